//! Request collapsing: concurrent misses of one key make one origin fetch, and the
//! requests that waited are answered from what it stored (`Cache-Status: collapsed`);
//! a leader whose answer is not stored releases them to the origin at once. Real
//! sockets: a scripted (slowed) origin and the real proxy on 127.0.0.1:0.
//!
//! The tests that send a burst stay on the wall clock: a burst must reach the proxy while
//! the origin's delay runs, and a paused clock jumps past that delay whenever the
//! runtime waits on a socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::join_all;

use crate::support::{
    Reply, ReplyBody, Seen, TestOrigin, TestProxy, body_bytes, client, get, sample, scrape, send,
};
use secondhit_proxy::config::AdmissionPolicy;

/// Concurrent requests in each wave.
const WAVE: usize = 100;

/// How long the origin takes to answer the head: every request of a wave arrives before.
const SLOW: Duration = Duration::from_secs(1);

/// An origin answering `body` (fresh for an hour) after `SLOW`, and a proxy in front of it
/// that stores every storable response (`always`).
async fn slow_origin_storing_all(body: &[u8]) -> (TestOrigin, TestProxy) {
    let served = body.to_vec();
    let origin =
        TestOrigin::start(move |_| Reply::ok("max-age=3600", served.clone()).delayed(SLOW)).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    (origin, proxy)
}

/// GETs `path` `WAVE` times at once, with `headers`.
async fn wave(proxy: &TestProxy, path: &str, headers: &[(&str, &str)]) -> Vec<Seen> {
    let client = client();
    let requests = (0..WAVE).map(|_| {
        let mut request = client.get(proxy.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        send(request)
    });
    join_all(requests).await
}

/// Asserts that `seen` holds one response that went to the origin and stored, and that
/// every other one was answered from it (collapsed, or a hit once it was stored), all
/// with `body`.
fn one_fill_served_all(seen: &[Seen], body: &[u8]) {
    let stored = seen.iter().filter(|s| s.cache.stored).count();
    assert_eq!(stored, 1, "one request fetched and stored");
    for s in seen {
        assert_eq!(s.status, 200);
        assert!(s.body == body, "a complete, identical body: {:?}", s.cache);
        assert!(
            s.cache.stored || s.cache.collapsed || s.cache.hit,
            "answered from the one fetch: {:?}",
            s.cache
        );
        if s.cache.collapsed {
            assert_eq!(s.cache.fwd.as_deref(), Some("uri-miss"), "{:?}", s.cache);
            assert!(!s.cache.hit && !s.cache.stored, "{:?}", s.cache);
        }
    }
    assert!(
        seen.iter().any(|s| s.cache.collapsed),
        "requests that arrived during the fetch waited for it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_make_one_origin_fetch_under_always() {
    let body = body_bytes(200_000, 7);
    let (origin, proxy) = slow_origin_storing_all(&body).await;
    let seen = wave(&proxy, "/hot", &[]).await;
    assert_eq!(
        origin.count("/hot"),
        1,
        "one origin fetch for {WAVE} requests"
    );
    one_fill_served_all(&seen, &body);
    // The operator sees them: one count per collapsed answer, and each is a miss.
    let collapsed = seen.iter().filter(|s| s.cache.collapsed).count() as f64;
    let metrics = scrape(&proxy).await;
    assert_eq!(
        sample(&metrics, "secondhit_collapsed_requests_total"),
        collapsed
    );
}

/// A small body arrives whole with its head and is stored in one file call, with no
/// stream to follow: the requests waiting for it still get all of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_collapsed_onto_a_small_fill_get_the_whole_body() {
    let body = body_bytes(3_000, 11);
    let (origin, proxy) = slow_origin_storing_all(&body).await;
    let seen = wave(&proxy, "/small", &[]).await;
    one_fill_served_all(&seen, &body);
    assert_eq!(origin.count("/small"), 1);
    proxy.wait_committed(1).await;
    let calls = proxy.store.stats().fill_calls;
    assert_eq!(
        calls.worker + calls.pool,
        1,
        "stored in one call: {calls:?}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_second_hit_the_second_wave_makes_one_origin_fetch() {
    let body = body_bytes(50_000, 8);
    let served = body.clone();
    let origin =
        TestOrigin::start(move |_| Reply::ok("max-age=3600", served.clone()).delayed(SLOW)).await;
    let proxy = TestProxy::start(origin.addr, |_| {}).await;
    let first = get(&proxy.url("/twice")).await;
    assert_eq!(first.cache.detail.as_deref(), Some("first-sight"));
    let seen = wave(&proxy, "/twice", &[]).await;
    assert_eq!(
        origin.count("/twice"),
        2,
        "the first sight, then one fetch for the whole wave"
    );
    one_fill_served_all(&seen, &body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_store_leader_releases_its_followers_to_the_origin_at_once() {
    let origin = TestOrigin::start(|_| {
        Reply::ok("no-store", body_bytes(10_000, 9)).delayed(Duration::from_millis(500))
    })
    .await;
    // Far longer than the client's patience: a follower held until it would fail the test.
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.collapse_timeout = Duration::from_secs(3600);
    })
    .await;
    let seen = wave(&proxy, "/private", &[]).await;
    for s in &seen {
        assert_eq!(s.body, body_bytes(10_000, 9));
        assert_eq!(s.cache.detail.as_deref(), Some("no-store"), "{:?}", s.cache);
        assert!(!s.cache.collapsed);
    }
    assert_eq!(
        origin.count("/private"),
        WAVE,
        "each request fetched once for itself; none waited behind a second leader"
    );
    // The key is now known to be refused: the next burst goes to the origin side by side.
    for s in wave(&proxy, "/private", &[]).await {
        assert_eq!(s.cache.detail.as_deref(), Some("no-store"), "{:?}", s.cache);
    }
    assert_eq!(origin.count("/private"), 2 * WAVE);
}

// On the paused clock: the collapse timeout and the origin's pauses are tokio timers, and
// the two requests are sent one after the other.
#[tokio::test(start_paused = true)]
async fn a_follower_that_waits_past_collapse_timeout_fetches_uncached() {
    let origin = TestOrigin::start(|_| {
        let pause = Duration::from_millis(100);
        Reply::slow("max-age=3600", body_bytes(100_000, 10), 10_000, pause)
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.collapse_timeout = Duration::from_millis(50);
    })
    .await;
    let leader = client()
        .get(proxy.url("/slow"))
        .send()
        .await
        .expect("leader's head");
    assert!(crate::support::ParsedCacheStatus::from_headers(leader.headers()).stored);
    // The leader's fill takes a second: this request gives up waiting for it.
    let follower = get(&proxy.url("/slow")).await;
    assert_eq!(follower.body, body_bytes(100_000, 10));
    assert_eq!(
        follower.cache.detail.as_deref(),
        Some("collapse-timeout"),
        "{:?}",
        follower.cache
    );
    assert!(!follower.cache.stored);
    let whole = leader.bytes().await.expect("leader's body");
    assert_eq!(&whole[..], &body_bytes(100_000, 10)[..]);
    proxy.wait_committed(1).await;
    assert_eq!(
        proxy.store.stats().committed_fills,
        1,
        "only the leader stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_requests_follow_a_fill_and_get_their_range() {
    let body = body_bytes(300_000, 11);
    let (origin, proxy) = slow_origin_storing_all(&body).await;
    let seen = wave(&proxy, "/ranged", &[("range", "bytes=1000-1999")]).await;
    assert_eq!(origin.count("/ranged"), 1, "the whole object, fetched once");
    for s in &seen {
        assert_eq!(s.status, 206, "{:?}", s.cache);
        assert!(s.body == body[1000..2000], "the range asked for");
    }
    assert!(seen.iter().any(|s| s.cache.collapsed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_of_a_fill_that_fails_make_one_more_fetch_not_a_herd() {
    let whole = body_bytes(100_000, 12);
    let answers = Arc::new(AtomicUsize::new(0));
    let served = whole.clone();
    // The first answer is cut short after its head (so every request is waiting by
    // then); the next ones are whole.
    let origin = TestOrigin::start(move |_| {
        if answers.fetch_add(1, Ordering::SeqCst) > 0 {
            return Reply::ok("max-age=3600", served.clone());
        }
        let cut = ReplyBody::CutAfter {
            declared: served.len(),
            sent: served[..30_000].to_vec(),
        };
        Reply {
            body: cut,
            ..Reply::ok("max-age=3600", Vec::new())
        }
        .delayed(SLOW)
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let client = client();
    let requests = (0..20).map(|_| async {
        let response = client.get(proxy.url("/flaky")).send().await?;
        response.bytes().await
    });
    let outcomes = join_all(requests).await;
    let cut = outcomes.iter().filter(|outcome| outcome.is_err()).count();
    assert_eq!(cut, 1, "only the first leader's client saw the cut body");
    for body in outcomes.into_iter().flatten() {
        assert!(body == whole, "the others got it whole");
    }
    assert_eq!(
        origin.count("/flaky"),
        2,
        "the failed fill, then one fetch for all who waited for it"
    );
}

/// Sends `n` GETs of `path` at once and returns each response's `Cache-Status` detail
/// (the body may fail: these origins cut it or grow it too large).
async fn details_of_a_burst(proxy: &TestProxy, path: &str, n: usize) -> Vec<Option<String>> {
    let client = client();
    let requests = (0..n).map(|_| {
        let request = client.get(proxy.url(path));
        async move {
            let response = request.send().await.expect("a response head");
            let cache = crate::support::ParsedCacheStatus::from_headers(response.headers());
            let _ = response.bytes().await;
            cache.detail
        }
    });
    join_all(requests).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_fill_releases_all_its_waiters_at_once() {
    // The head comes after a pause, so the whole burst waits on the first leader; then
    // its fill is dropped: `/cut` resets after part of the body, `/huge` is a chunked
    // body past `cache.max_object_size`. The waiters of `/huge` then all fetch at once;
    // those of `/cut` follow one more leader, then all fetch at once. One leader at a
    // time, they would reach the origin 0.5 s apart and most give up at the timeout.
    let origin = TestOrigin::start(|head| {
        let reply = match head.uri.path() {
            "/cut" => Reply {
                body: ReplyBody::CutAfter {
                    declared: 100_000,
                    sent: body_bytes(10_000, 3),
                },
                ..Reply::ok("max-age=3600", Vec::new())
            },
            _ => Reply::chunked("max-age=3600", body_bytes(300_000, 4), 16_384),
        };
        reply.delayed(Duration::from_millis(500))
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
        c.cache.max_object_size = secondhit_proxy::config::MaxObjectSize::Bytes(100_000);
        c.cache.collapse_timeout = Duration::from_secs(2);
    })
    .await;
    const BURST: usize = 20;
    for path in ["/cut", "/huge"] {
        let details = details_of_a_burst(&proxy, path, BURST).await;
        assert!(
            details
                .iter()
                .all(|detail| detail.as_deref() != Some("collapse-timeout")),
            "{path}: every waiter fetched before the collapse timeout: {details:?}"
        );
        assert_eq!(
            origin.count(path),
            BURST,
            "{path}: each request fetched once"
        );
    }
    // A body grown too large leaves the key passed uncollapsed for a while.
    let details = details_of_a_burst(&proxy, "/huge", 5).await;
    assert_eq!(details.len(), 5);
    assert_eq!(origin.count("/huge"), BURST + 5);
}

/// A body far larger than what the sockets between proxy and client buffer, and than
/// what the proxy keeps in memory for one client (`tee::CLIENT_LAG_BYTES`).
const OUTSIZED: usize = 40 * 1024 * 1024;

/// A client that sends one GET of `path` on a real socket and reads its response only when
/// told to.
struct IdleReader {
    stream: tokio::net::TcpStream,
    /// What has been read: the head, and what came with it.
    read: Vec<u8>,
}

impl IdleReader {
    /// Sends the GET and reads until the response head is in.
    async fn get(proxy: &TestProxy, path: &str) -> IdleReader {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A small receive buffer: what the client's kernel takes for it is not the point.
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .set_recv_buffer_size(64 * 1024)
            .expect("receive buffer");
        let mut stream = socket.connect(proxy.addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", proxy.addr);
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut reader = IdleReader {
            stream,
            read: Vec::new(),
        };
        let mut buf = vec![0; 16 * 1024];
        while reader.head_len().is_none() {
            let n = reader.stream.read(&mut buf).await.expect("read the head");
            assert!(n > 0, "closed before the head");
            reader.read.extend_from_slice(&buf[..n]);
        }
        reader
    }

    fn head_len(&self) -> Option<usize> {
        let end = self.read.windows(4).position(|w| w == b"\r\n\r\n")?;
        Some(end + 4)
    }

    /// Reads the rest of a body of `len` bytes and returns the whole body, or the error
    /// that cut it.
    async fn rest_of_body(mut self, len: usize) -> std::io::Result<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let head_len = self.head_len().expect("the head was read");
        let mut body = self.read.split_off(head_len);
        let mut rest = vec![0; len - body.len()];
        self.stream.read_exact(&mut rest).await?;
        body.extend_from_slice(&rest);
        Ok(body)
    }
}

/// A client that stops reading after the head holds back neither the fill nor the
/// requests that follow it: the fill reads the origin into the store at the origin's
/// (and the disk's) pace and commits while the client has read next to nothing, later
/// requests are answered from the entry, and the client still gets the whole body, from
/// the fill's file, once it reads on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_back_neither_the_fill_nor_its_followers() {
    let body = body_bytes(OUTSIZED, 13);
    let served = body.clone();
    let origin = TestOrigin::start(move |_| Reply::ok("max-age=3600", served.clone())).await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let idle = IdleReader::get(&proxy, "/outsized").await;
    let head = String::from_utf8_lossy(&idle.read[..idle.head_len().unwrap_or(0)]).to_string();
    assert!(head.contains("stored"), "{head}");
    proxy.wait_committed(1).await;
    let follower = get(&proxy.url("/outsized")).await;
    assert!(
        follower.cache.hit || follower.cache.collapsed,
        "{:?}",
        follower.cache
    );
    assert!(follower.body == body, "the follower got the whole object");
    assert_eq!(origin.count("/outsized"), 1);
    let read = idle
        .rest_of_body(OUTSIZED)
        .await
        .expect("the rest of the body");
    assert!(read == body, "the idle client got the whole object");
    assert_eq!(proxy.store.stats().dropped_fills.total(), 0);
}

/// A client that stopped reading, and reads on after the origin cut the body, gets the
/// bytes the origin sent and then a cut, never what looks like a complete body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stopped_reading_sees_the_cut_of_a_body_the_origin_broke_off() {
    let sent = body_bytes(OUTSIZED / 2, 14);
    let part = sent.clone();
    let origin = TestOrigin::start(move |_| Reply {
        body: ReplyBody::CutAfter {
            declared: OUTSIZED,
            sent: part.clone(),
        },
        ..Reply::ok("max-age=3600", Vec::new())
    })
    .await;
    let proxy = TestProxy::start(origin.addr, |c| {
        c.admission.policy = AdmissionPolicy::Always;
    })
    .await;
    let idle = IdleReader::get(&proxy, "/cut").await;
    crate::support::wait_until(
        || "the fill of the cut body was never dropped".into(),
        || proxy.store.stats().dropped_fills.total() == 1,
    )
    .await;
    let read = idle.rest_of_body(OUTSIZED).await;
    assert!(read.is_err(), "a cut body reached the client whole");
    assert!(proxy.entry_files().is_empty());
}
