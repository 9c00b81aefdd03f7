//! Names of header fields the `http` crate has no constant for, used on more than one
//! layer.

use http::HeaderName;

/// `Cache-Status` (RFC 9211): set on every response, never stored with one.
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// The CDN-targeted field of RFC 9213 §3, after the operator's own on the target list.
pub(crate) const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");

/// `name`'s length as one bit of a mask (lengths taken modulo 64).
pub(crate) fn length_bit(name: &HeaderName) -> u64 {
    1 << (name.as_str().len() % 64)
}

/// The lengths of `names` as a mask of [`length_bit`]s: a name whose bit is not in it is
/// none of `names`, which one AND tells, where comparing it with each costs a call apiece.
pub(crate) fn length_mask(names: &[HeaderName]) -> u64 {
    names.iter().fold(0, |mask, name| mask | length_bit(name))
}

#[cfg(test)]
mod tests {
    use http::header::{ETAG, RANGE};

    use super::*;

    #[test]
    fn a_mask_has_the_bit_of_every_name_in_it_and_not_of_other_lengths() {
        let names = [RANGE, CDN_CACHE_CONTROL];
        let mask = length_mask(&names);
        assert!(names.iter().all(|name| mask & length_bit(name) != 0));
        // Four letters: no name in the mask has that length.
        assert_eq!(mask & length_bit(&ETAG), 0);
        // A name of a length in the mask passes; the names are compared after it.
        assert_ne!(mask & length_bit(&HeaderName::from_static("x-abc")), 0);
    }
}
