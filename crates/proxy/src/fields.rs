//! Field lookups in the small header maps of the request path.
//!
//! `HeaderMap::get` hashes the name before it probes, and a request is asked for
//! twenty-odd fields, most of them absent. A map of a few names answers sooner by
//! comparing its names in turn (a known name compares as one byte): [`has`] and [`first`]
//! hash nothing there, and [`all`] and [`remove`] hash only a name present. Larger maps
//! are looked up by hash alone. The answers are those of `contains_key`, `get`, `get_all`
//! and `remove` in every case (the tests compare them).

use http::header;
use http::{HeaderMap, HeaderName, HeaderValue};

/// Maps of at most this many names are scanned first; larger ones are looked up by hash
/// alone. Chosen by the instructions of pass-throughs and hits with one field and with a
/// browser's eleven (`benches/RESULTS.md`, "field lookups by scan"): beyond it, a scan
/// costs more than the hash it saves.
const SCAN_UP_TO: usize = 6;

/// Whether `headers` has a line of `name` (`HeaderMap::contains_key`).
pub(crate) fn has(headers: &HeaderMap, name: &HeaderName) -> bool {
    if headers.keys_len() <= SCAN_UP_TO {
        headers.keys().any(|key| key == name)
    } else {
        headers.contains_key(name)
    }
}

/// The first line of `name` in `headers` (`HeaderMap::get`).
pub(crate) fn first<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    if headers.keys_len() <= SCAN_UP_TO {
        // A name's lines come in turn, its first line first.
        headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    } else {
        headers.get(name)
    }
}

/// Every line of `name` in `headers`, in order (`HeaderMap::get_all`).
pub(crate) fn all<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Lines<'a> {
    let lines = (!absent_from_small(headers, name)).then(|| headers.get_all(name).iter());
    Lines(lines)
}

/// Whether `headers` is small enough to scan and has no line of `name`. Most names the
/// request path asks for are absent: a scan says so, and only a name present is hashed.
fn absent_from_small(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers.keys_len() <= SCAN_UP_TO && !headers.keys().any(|key| key == name)
}

/// The lines [`all`] finds: none, or a name's lines found by hash.
pub(crate) struct Lines<'a>(Option<header::ValueIter<'a, HeaderValue>>);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a HeaderValue;

    fn next(&mut self) -> Option<&'a HeaderValue> {
        self.0.as_mut()?.next()
    }
}

/// Removes every line of `name` from `headers` and returns the first
/// (`HeaderMap::remove`); a name it does not have costs a scan, not a hash.
pub(crate) fn remove(headers: &mut HeaderMap, name: &HeaderName) -> Option<HeaderValue> {
    if absent_from_small(headers, name) {
        None
    } else {
        headers.remove(name)
    }
}

#[cfg(test)]
mod tests {
    use http::header::{ACCEPT, CACHE_CONTROL, HOST, SET_COOKIE, VARY};
    use proptest::prelude::*;

    use super::*;

    /// Names from a small set, standard and not, so that maps repeat and miss names.
    fn name() -> impl Strategy<Value = HeaderName> {
        prop::sample::select(vec![
            HOST,
            ACCEPT,
            CACHE_CONTROL,
            SET_COOKIE,
            VARY,
            HeaderName::from_static("x-a"),
            HeaderName::from_static("x-b"),
            HeaderName::from_static("x-forwarded-for"),
        ])
    }

    /// Maps of up to twice [`SCAN_UP_TO`] lines, so that both ways are taken; each line
    /// is appended, so a name may have several.
    fn map() -> impl Strategy<Value = HeaderMap> {
        prop::collection::vec((name(), 0u8..4), 0..2 * SCAN_UP_TO).prop_map(|lines| {
            let mut headers = HeaderMap::new();
            for (name, n) in lines {
                headers.append(name, HeaderValue::from(u16::from(n)));
            }
            headers
        })
    }

    /// A map with more names than [`SCAN_UP_TO`], and `name` among them.
    fn large_map_with(name: &HeaderName) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for n in 0..=SCAN_UP_TO {
            let custom = HeaderName::try_from(format!("x-filler-{n}")).expect("a name");
            headers.append(custom, HeaderValue::from_static("filler"));
        }
        headers.append(name.clone(), HeaderValue::from_static("one"));
        headers.append(name.clone(), HeaderValue::from_static("two"));
        headers
    }

    proptest! {
        /// Every lookup answers as the map's own, for maps scanned and maps hashed.
        #[test]
        fn every_lookup_answers_as_the_maps_own(headers in map(), name in name()) {
            prop_assert_eq!(has(&headers, &name), headers.contains_key(&name));
            prop_assert_eq!(first(&headers, &name), headers.get(&name));
            let ours: Vec<_> = all(&headers, &name).collect();
            let theirs: Vec<_> = headers.get_all(&name).iter().collect();
            prop_assert_eq!(ours, theirs);
            let mut removed = headers.clone();
            let mut expected = headers.clone();
            prop_assert_eq!(remove(&mut removed, &name), expected.remove(&name));
            prop_assert_eq!(removed, expected);
        }
    }

    #[test]
    fn a_large_map_is_looked_up_by_hash_with_the_same_answers() {
        let headers = large_map_with(&VARY);
        assert!(headers.keys_len() > SCAN_UP_TO);
        assert!(has(&headers, &VARY));
        assert!(!has(&headers, &HOST));
        assert_eq!(
            first(&headers, &VARY),
            Some(&HeaderValue::from_static("one"))
        );
        let lines: Vec<_> = all(&headers, &VARY).collect();
        assert_eq!(lines, ["one", "two"]);
        assert_eq!(all(&headers, &HOST).count(), 0);
    }
}
