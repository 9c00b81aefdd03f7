//! Header values made from text on the request path, each in one allocation of its exact
//! size.
//!
//! A value built in a `String` of its own and turned into a `HeaderValue` costs two
//! allocations (the string's, and the shared handle `bytes` adds when the length differs
//! from the capacity), as does `HeaderValue::from(u64)` (its buffer, then the same
//! handle). Written into a scratch string each thread keeps instead, a value is copied
//! out once, at its exact size, which `bytes` keeps without a handle. Numbers and
//! IPv4 addresses are written with `itoa`, for `write!` costs several times more.

use std::cell::RefCell;
use std::fmt::Write as _;

use http::HeaderValue;

thread_local! {
    /// The scratch text of this thread: cleared before each use, kept for the next.
    static SCRATCH: RefCell<String> = RefCell::new(String::with_capacity(256));
}

/// Runs `build` on this thread's scratch text (empty when `build` starts) and returns
/// what it returns: `build` writes a value into it and copies it out, e.g. with
/// [`HeaderValue::from_str`].
pub(crate) fn with_scratch<R>(build: impl FnOnce(&mut String) -> R) -> R {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut text) => {
            text.clear();
            build(&mut text)
        }
        // Only a `build` that itself builds a value lands here: it gets a string of its own.
        Err(_) => build(&mut String::new()),
    })
}

/// `n` in decimal, as a header value (`Content-Length`, `Age`).
pub(crate) fn decimal(n: u64) -> HeaderValue {
    let digits = itoa::Buffer::new().format(n).as_bytes().to_vec();
    // Digits are a valid value; a vector of its exact size becomes the value's bytes.
    HeaderValue::from_maybe_shared(bytes::Bytes::from(digits))
        .unwrap_or_else(|_| HeaderValue::from(n))
}

/// Appends `ip` to `out` as `Display` writes it: an IPv4 address by its octets (every
/// request forwarded writes its client's, twice, and `write!` costs several times
/// more), an IPv6 one through `write!`.
pub(crate) fn push_ip(out: &mut String, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (at, octet) in v4.octets().into_iter().enumerate() {
                if at > 0 {
                    out.push('.');
                }
                out.push_str(itoa::Buffer::new().format(octet));
            }
        }
        // Writing to a String cannot fail.
        std::net::IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_read_as_the_number() {
        for n in [0, 7, 1024, u64::MAX] {
            assert_eq!(decimal(n), HeaderValue::from(n));
        }
    }

    #[test]
    fn addresses_read_as_display_writes_them() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "255.255.255.255",
            "10.20.3.40",
            "::1",
            "2001:db8::7",
        ] {
            let ip: std::net::IpAddr = ip.parse().expect("test address");
            let mut text = String::new();
            push_ip(&mut text, ip);
            assert_eq!(text, ip.to_string());
        }
    }

    #[test]
    fn a_nested_build_gets_a_string_of_its_own() {
        let (outer, inner) = with_scratch(|outer| {
            outer.push_str("outer");
            let inner = with_scratch(|inner| {
                inner.push_str("inner");
                inner.clone()
            });
            (outer.clone(), inner)
        });
        assert_eq!((outer.as_str(), inner.as_str()), ("outer", "inner"));
    }
}
