//! The field names of a connection's last head, by position: a server, or a client on a
//! keep-alive connection, sends much the same fields in the same order each time, and
//! comparing a name's bytes with the last head's costs a fraction of parsing it again.

use http::HeaderName;
use http::header::InvalidHeaderName;

/// The most names remembered: more than a usual head has, so a connection's memory
/// stays small whatever its peer sends.
const MAX_NAMES: usize = 32;
/// The most bytes of names remembered, for the same reason.
const MAX_BYTES: usize = 1024;

/// The field names of the last head read on a connection: each as it came and as
/// parsed. One per connection, handed to each read of a head on it.
#[derive(Debug, Default)]
pub struct NameMemo {
    raw: Vec<u8>,
    /// Each name's end in `raw` (it starts where the one before it ends), and the name.
    names: Vec<(usize, HeaderName)>,
}

impl NameMemo {
    /// The name `raw`, the field at position `at` of a head: the last head's name there
    /// when it came as these very bytes, else parsed and remembered. A name that differs
    /// forgets the names after it, since the fields that follow have most likely moved.
    pub(crate) fn name(&mut self, at: usize, raw: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
        let start = match at.checked_sub(1).map(|before| self.names.get(before)) {
            None => 0,
            Some(Some((end, _))) => *end,
            // The field before this one was not remembered: neither is this one.
            Some(None) => return HeaderName::from_bytes(raw),
        };
        if let Some((end, name)) = self.names.get(at)
            && self.raw.get(start..*end) == Some(raw)
        {
            return Ok(name.clone());
        }
        let name = HeaderName::from_bytes(raw)?;
        self.names.truncate(at);
        self.raw.truncate(start);
        if at < MAX_NAMES && start + raw.len() <= MAX_BYTES {
            self.raw.extend_from_slice(raw);
            self.names.push((self.raw.len(), name.clone()));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Names from a small alphabet, so that heads share names, differ in case and
    /// sometimes are not names at all.
    fn raw_name() -> impl Strategy<Value = Vec<u8>> {
        prop::sample::select(vec![
            &b"Content-Type"[..],
            b"content-type",
            b"ETag",
            b"X-Custom",
            b"x-custom",
            b"Set-Cookie",
            b"bad name",
            b"",
            b"Cache-Control",
        ])
        .prop_map(<[u8]>::to_vec)
    }

    proptest! {
        /// However heads follow each other on a connection, every name is the one
        /// `HeaderName::from_bytes` makes of the same bytes, or the same error.
        #[test]
        fn every_name_is_the_one_its_bytes_parse_to(
            heads in prop::collection::vec(prop::collection::vec(raw_name(), 0..12), 1..8)
        ) {
            let mut memo = NameMemo::default();
            for head in &heads {
                for (at, raw) in head.iter().enumerate() {
                    let remembered = memo.name(at, raw).ok();
                    prop_assert_eq!(remembered, HeaderName::from_bytes(raw).ok());
                }
            }
        }
    }

    #[test]
    fn a_name_seen_at_its_place_in_the_last_head_is_not_parsed_again() {
        let mut memo = NameMemo::default();
        for (at, raw) in [&b"Server"[..], b"X-Trace"].iter().enumerate() {
            memo.name(at, raw).expect("a valid name");
        }
        assert_eq!(memo.names.len(), 2);
        let raw_before = memo.raw.clone();
        assert_eq!(
            memo.name(1, b"X-Trace").ok(),
            HeaderName::from_bytes(b"x-trace").ok()
        );
        assert_eq!(
            memo.raw, raw_before,
            "a remembered name is not stored again"
        );
        // Another name at the first place forgets the one after it.
        memo.name(0, b"Date").expect("a valid name");
        assert_eq!(memo.names.len(), 1);
        assert_eq!(memo.raw, b"Date");
    }

    #[test]
    fn memory_stays_bounded_whatever_the_heads() {
        let mut memo = NameMemo::default();
        let long = vec![b'x'; 600];
        for at in 0..100 {
            memo.name(at, &long).expect("a valid name");
        }
        assert!(memo.names.len() <= MAX_NAMES && memo.raw.len() <= MAX_BYTES);
        for at in 0..100 {
            memo.name(at, format!("x-{at}").as_bytes())
                .expect("a valid name");
        }
        assert_eq!(memo.names.len(), MAX_NAMES);
    }
}
