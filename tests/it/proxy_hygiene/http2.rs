//! RFC 9113: HTTP/2 (h2c prior knowledge) requests get the forwarding fields too.

use super::common::*;
use crate::support::{h2c_client, send};

/// RFC 9110 §7.6.3 and RFC 9113 §8.3.1: an HTTP/2 (h2c prior knowledge) request is
/// forwarded with `Via: 2 secondhit`, `X-Forwarded-For` and `X-Forwarded-Host` from
/// `:authority`, and its response carries `Via`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfc9113_8_3_1_http2_requests_get_forwarding_fields() {
    let (origin, proxy) = setup().await;
    let seen = send(
        h2c_client()
            .get(proxy.url("/h2"))
            .header("x-forwarded-for", "192.0.2.9"),
    )
    .await;
    assert_eq!(seen.status, 200);
    assert_eq!(
        seen.headers.get("via").expect("response via"),
        "1.1 secondhit"
    );
    assert_eq!(origin_list(&origin, "/h2", "via"), "2 secondhit");
    assert_eq!(
        origin_list(&origin, "/h2", "x-forwarded-for"),
        "192.0.2.9, 127.0.0.1"
    );
    assert_eq!(
        origin_list(&origin, "/h2", "x-forwarded-host"),
        proxy.addr.to_string()
    );
}
