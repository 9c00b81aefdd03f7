//! `Max-Forwards` on `TRACE` and `OPTIONS` (RFC 9110 §7.6.2).
//!
//! Each intermediary that receives one of these methods with `Max-Forwards` must check the
//! value before forwarding: at zero it must not forward, and answers as the final recipient;
//! above zero it forwards the value less one. That is how a client finds out what each hop
//! of a chain does (`TRACE`) or supports (`OPTIONS`). Other methods ignore the field.
//!
//! As the final recipient, secondhit answers `OPTIONS` with an empty 200, and `TRACE` with
//! the request it received as `message/http` (§9.3.8), leaving out the fields that carry
//! credentials (`Authorization`, `Proxy-Authorization`, `Cookie`), as that section advises.

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, HeaderName, PROXY_AUTHORIZATION};
use http::{HeaderValue, Method, Response, StatusCode, request};

use super::Answer;
use crate::body::full_body;
use crate::hygiene::Rejection;
use crate::outcome::{Detail, Outcome};

/// The `Max-Forwards` header name.
const MAX_FORWARDS: HeaderName = HeaderName::from_static("max-forwards");

/// What `Max-Forwards` says about a request.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hop {
    /// Forward it (the field, if any, already decremented).
    Forward,
    /// This proxy is the last hop: answer it here with [`answer`].
    Answer,
}

/// Checks and updates `Max-Forwards` on a `TRACE` or `OPTIONS` request: [`Hop::Answer`] at
/// zero, otherwise the value less one and [`Hop::Forward`]. A value that is not one
/// decimal number (or several field lines) is [`Rejection::InvalidMaxForwards`]. Other
/// methods, and requests without the field, are forwarded unchanged.
pub(super) fn take_hop(head: &mut request::Parts) -> Result<Hop, Rejection> {
    if head.method != Method::TRACE && head.method != Method::OPTIONS {
        return Ok(Hop::Forward);
    }
    let mut values = head.headers.get_all(MAX_FORWARDS).iter();
    let Some(value) = values.next() else {
        return Ok(Hop::Forward);
    };
    if values.next().is_some() {
        return Err(Rejection::InvalidMaxForwards);
    }
    let digits = value.as_bytes();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Rejection::InvalidMaxForwards);
    }
    // More digits than a u64 holds is still a valid (huge) value: saturate.
    let remaining = digits.iter().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    if remaining == 0 {
        return Ok(Hop::Answer);
    }
    head.headers
        .insert(MAX_FORWARDS, HeaderValue::from(remaining - 1));
    Ok(Hop::Forward)
}

/// The answer of the final recipient (see the module docs). Marked in `Cache-Status` with
/// `detail=max-forwards`: neither from storage nor from the origin.
pub(super) fn answer(head: &request::Parts) -> Answer {
    let (content_type, body) = if head.method == Method::TRACE {
        (Some("message/http"), Bytes::from(echo(head)))
    } else {
        (None, Bytes::new())
    };
    let mut response = Response::new(full_body(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    Answer::new(response, Outcome::own(Detail::MaxForwards))
}

/// The request as received, as `message/http`: request line and fields, without the
/// credentials, and an empty line.
fn echo(head: &request::Parts) -> Vec<u8> {
    let mut text = format!("{} {} {:?}\r\n", head.method, head.uri, head.version).into_bytes();
    for (name, value) in &head.headers {
        if name == AUTHORIZATION || name == PROXY_AUTHORIZATION || name == COOKIE {
            continue;
        }
        text.extend_from_slice(name.as_str().as_bytes());
        text.extend_from_slice(b": ");
        text.extend_from_slice(value.as_bytes());
        text.extend_from_slice(b"\r\n");
    }
    text.extend_from_slice(b"\r\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn head(method: Method, max_forwards: &[&str]) -> request::Parts {
        let mut builder = Request::builder().method(method).uri("/p");
        for value in max_forwards {
            builder = builder.header(MAX_FORWARDS, *value);
        }
        builder.body(()).expect("request").into_parts().0
    }

    #[test]
    fn zero_is_the_last_hop_and_more_is_decremented() {
        for method in [Method::TRACE, Method::OPTIONS] {
            assert_eq!(take_hop(&mut head(method.clone(), &["0"])), Ok(Hop::Answer));
            let mut three = head(method.clone(), &["3"]);
            assert_eq!(take_hop(&mut three), Ok(Hop::Forward));
            assert_eq!(three.headers[MAX_FORWARDS], "2");
            let mut huge = head(method, &["99999999999999999999999"]);
            assert_eq!(take_hop(&mut huge), Ok(Hop::Forward));
            assert_eq!(
                huge.headers[MAX_FORWARDS],
                (u64::MAX - 1).to_string().as_str()
            );
        }
    }

    #[test]
    fn other_methods_and_absent_fields_pass_untouched() {
        let mut get = head(Method::GET, &["0"]);
        assert_eq!(take_hop(&mut get), Ok(Hop::Forward));
        assert_eq!(get.headers[MAX_FORWARDS], "0");
        assert_eq!(take_hop(&mut head(Method::TRACE, &[])), Ok(Hop::Forward));
    }

    #[test]
    fn malformed_values_are_rejected() {
        for values in [&["-1"][..], &["1.5"], &[""], &[" 1"], &["1", "2"]] {
            assert_eq!(
                take_hop(&mut head(Method::OPTIONS, values)),
                Err(Rejection::InvalidMaxForwards),
                "{values:?}"
            );
        }
    }
}
