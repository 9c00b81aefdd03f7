//! The soak's clients and their checker: CDN-like requests (skewed popularity, cookies,
//! `Vary`, conditionals, ranges, `no-cache`) over HTTP/1.1 and h2, and a verdict on every
//! response: the body is exactly the origin's bytes for the representation it names (or
//! a prefix of them, for a cut connection), and nothing in it was meant for another
//! client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use http::HeaderMap;

use crate::content::{GROUPS, LANGUAGES, OBJECTS, Representation, Traits, size_of};
use crate::origin::{Origin, variant_of};

/// Counts of outcomes and the first violations seen.
#[derive(Default)]
pub(crate) struct Tally {
    counts: Mutex<BTreeMap<String, u64>>,
    violations: Mutex<Vec<String>>,
}

impl Tally {
    /// Counts one `outcome`.
    pub(crate) fn count(&self, outcome: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(outcome.to_owned()).or_insert(0) += 1;
    }

    fn violation(&self, kind: &str, detail: String) {
        self.count(&format!("VIOLATION {kind}"));
        let mut seen = self.violations.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() < 20 {
            seen.push(format!("{kind}: {detail}"));
        }
    }

    /// Every outcome and its count.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The first violations.
    pub(crate) fn violations(&self) -> Vec<String> {
        self.violations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A small deterministic generator per client (xorshift), so runs repeat.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[(self.next() % options.len() as u64) as usize]
    }

    /// A skewed object number: low numbers are requested far more often.
    fn object(&mut self) -> u64 {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((u * u * u) * OBJECTS as f64) as u64
    }
}

/// One request as a client makes it.
struct Asked {
    object: u64,
    headers: HeaderMap,
    requester: String,
    range: Option<(usize, usize)>,
    conditional: bool,
}

fn set(headers: &mut HeaderMap, name: &'static str, value: String) {
    if let Ok(value) = http::HeaderValue::from_str(&value) {
        headers.insert(name, value);
    }
}

fn ask(dice: &mut Dice, client: &str, origin: &Origin) -> Asked {
    let object = dice.object();
    let mut headers = HeaderMap::new();
    let identified = dice.chance(50);
    if identified {
        set(&mut headers, "cookie", format!("sid={client}"));
    }
    set(
        &mut headers,
        "accept-language",
        dice.pick(&LANGUAGES).to_owned(),
    );
    let encoding = dice.pick(&["gzip", "gzip, deflate", "", "br", "deflate"]);
    if !encoding.is_empty() {
        set(&mut headers, "accept-encoding", encoding.to_owned());
    }
    let size = size_of(object);
    let range = dice.chance(10).then(|| {
        let first = (dice.next() as usize) % size;
        let last = (first + (dice.next() as usize) % 4096).min(size - 1);
        (first, last)
    });
    if let Some((first, last)) = range {
        set(&mut headers, "range", format!("bytes={first}-{last}"));
    }
    let conditional = range.is_none() && dice.chance(10);
    let requester = if identified {
        client.to_owned()
    } else {
        "-".to_owned()
    };
    if conditional {
        let traits = Traits::of(object);
        let guess = Representation {
            object,
            version: origin.version(object % GROUPS),
            variant: variant_of(traits, &headers),
            client: if traits.private {
                requester.clone()
            } else {
                "-".into()
            },
        };
        set(&mut headers, "if-none-match", guess.etag());
    }
    if dice.chance(5) {
        set(&mut headers, "cache-control", "no-cache".to_owned());
    }
    Asked {
        object,
        headers,
        requester,
        range,
        conditional,
    }
}

/// Runs one client until `until`, checking every answer into `tally`.
pub(crate) async fn run(
    id: usize,
    http2: bool,
    base: String,
    origin: Arc<Origin>,
    tally: Arc<Tally>,
    until: Instant,
) {
    let builder = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .no_proxy();
    let builder = if http2 {
        builder.http2_prior_knowledge()
    } else {
        builder.http1_only()
    };
    let Ok(client) = builder.build() else {
        tally.count("error client-build");
        return;
    };
    let name = format!("c{id}");
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1).wrapping_mul(0x2545_f491));
    while Instant::now() < until {
        let asked = ask(&mut dice, &name, &origin);
        let url = format!("{base}/o/{}", asked.object);
        let request = client.get(url).headers(asked.headers.clone());
        match request.send().await {
            Ok(response) => check(response, &asked, &origin, &tally).await,
            Err(error) if error.is_timeout() => tally.count("error timeout"),
            Err(error) if error.is_connect() => tally.count("error connect"),
            Err(_) => tally.count("error request"),
        }
    }
}

async fn check(response: reqwest::Response, asked: &Asked, origin: &Origin, tally: &Tally) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    check_headers(&headers, asked, tally);
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    let mut cut = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    let etag = headers.get("etag").and_then(|v| v.to_str().ok());
    let claimed = etag.and_then(Representation::from_etag);
    match (status, claimed) {
        (200 | 206, Some(rep)) => {
            check_body(status, &headers, &body, cut, (asked, &rep), origin, tally)
        }
        (304, Some(_)) if asked.conditional => tally.count("ok 304"),
        (304, _) => tally.violation("unasked-304", format!("/o/{}", asked.object)),
        (200 | 206, None) => tally.violation("no-etag", format!("{status} /o/{}", asked.object)),
        (status, _) => tally.count(&format!("error status {status}")),
    }
}

fn check_headers(headers: &HeaderMap, asked: &Asked, tally: &Tally) {
    for cookie in headers.get_all("set-cookie") {
        let expected = format!("sid={}; Path=/", asked.requester);
        if cookie.as_bytes() != expected.as_bytes() {
            let got = String::from_utf8_lossy(cookie.as_bytes()).into_owned();
            tally.violation(
                "foreign-set-cookie",
                format!("/o/{} for {}: {got}", asked.object, asked.requester),
            );
        }
    }
    if headers
        .get("content-encoding")
        .is_some_and(|v| v.as_bytes() == b"deflate")
    {
        let accepted = asked
            .headers
            .get("accept-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|c| c.trim() == "deflate"));
        if !accepted {
            tally.violation("encoding-not-accepted", format!("/o/{}", asked.object));
        }
    }
}

fn check_body(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    cut: bool,
    (asked, rep): (&Asked, &Representation),
    origin: &Origin,
    tally: &Tally,
) {
    let traits = Traits::of(asked.object);
    let own_client = if traits.private {
        asked.requester.as_str()
    } else {
        "-"
    };
    if rep.object != asked.object {
        return tally.violation(
            "other-url",
            format!("asked /o/{} got {}", asked.object, rep.etag()),
        );
    }
    if rep.client != own_client {
        return tally.violation(
            "other-client",
            format!(
                "{} asked /o/{} got {}",
                asked.requester,
                asked.object,
                rep.etag()
            ),
        );
    }
    // The identity coding is acceptable to every request (RFC 9110 §12.5.3).
    let acceptable = rep.variant == variant_of(traits, &asked.headers)
        || (traits.by_encoding && rep.variant == "identity");
    if !acceptable {
        return tally.violation(
            "other-variant",
            format!("/o/{} {:?} got {}", asked.object, asked.headers, rep.etag()),
        );
    }
    if rep.version > origin.version(asked.object % GROUPS) {
        return tally.violation("future-version", rep.etag());
    }
    let whole = rep.body();
    let expected: &[u8] = match (status, content_range(headers)) {
        (206, Some((first, last))) if last < whole.len() && first <= last => &whole[first..=last],
        (206, _) => return tally.violation("bad-content-range", format!("/o/{}", asked.object)),
        _ => &whole,
    };
    let whole_range = asked.range.is_some() && status == 200;
    match (cut, body == expected, expected.starts_with(body)) {
        (false, true, _) if whole_range => tally.count("ok 200 for a range"),
        (false, true, _) => tally.count(&format!("ok {status}")),
        (true, _, true) => tally.count("cut prefix"),
        _ => tally.violation(
            "wrong-body",
            format!(
                "{status} /o/{} {} cut={cut} {} of {} bytes",
                asked.object,
                rep.etag(),
                body.len(),
                expected.len()
            ),
        ),
    }
}

/// The first and last byte of a `Content-Range: bytes a-b/len`.
fn content_range(headers: &HeaderMap) -> Option<(usize, usize)> {
    let value = headers.get("content-range")?.to_str().ok()?;
    let range = value.strip_prefix("bytes ")?.split('/').next()?;
    let (first, last) = range.split_once('-')?;
    Some((first.parse().ok()?, last.parse().ok()?))
}
