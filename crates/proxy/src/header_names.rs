//! Names of header fields the `http` crate has no constant for, used on more than one
//! layer.

use http::HeaderName;

/// `Cache-Status` (RFC 9211): set on every response, never stored with one.
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// The CDN-targeted field of RFC 9213 §3, after the operator's own on the target list.
pub(crate) const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");
