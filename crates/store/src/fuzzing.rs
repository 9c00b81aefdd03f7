//! Entry points for the fuzz targets of the store's decoders (`store_entry`, `purge_log` in
//! `fuzz/`): each drives the real code with arbitrary bytes and asserts what its callers
//! rely on (round-trips). Compiled with the `fuzzing` feature, which the proxy's `fuzzing`
//! feature turns on; the proxy's own tests replay the kept inputs through them.

use crate::entry::{self, Slot};
use crate::purge_log;
use crate::{PurgeKind, PurgeSelector};

/// The store's entry format (`store::entry`): its preamble, header and metadata decoders.
/// `data[0]` bit 0 clear: the rest is an entry file's front, decoded as it is. Set: the
/// rest is a key length byte, the key, then a metadata payload, wrapped in a valid
/// preamble and slot (bit 1: slot B) so that the checksums hold and the metadata decoder
/// is reached. Asserts that decoding never panics and that decoded metadata, encoded
/// again, decodes to the same entry (or is refused for holding credentials).
pub fn store_entry(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let wrapped;
    let front = if mode & 1 == 0 {
        if let Ok(preamble) = entry::decode_preamble(rest) {
            let _ = (preamble.file_len(), preamble.slot_offset(Slot::B));
        }
        rest
    } else {
        let slot = if mode & 2 == 0 { Slot::A } else { Slot::B };
        let Some(front) = wrap_entry(rest, slot) else {
            return;
        };
        wrapped = front;
        &wrapped
    };
    let Ok(decoded) = entry::decode_header(front) else {
        return;
    };
    match entry::encode_header(&decoded.key, &decoded.meta, decoded.preamble.fill_id) {
        Ok((_, again)) => {
            let again = entry::decode_header(&again).expect("an encoded entry decodes");
            assert_eq!(again.key, decoded.key);
            assert_eq!(again.meta, decoded.meta);
        }
        Err(entry::EntryError::Credentials) => {
            let stored = &decoded.meta.request_headers;
            assert!(stored.contains_key("authorization") || stored.contains_key("cookie"));
        }
        Err(error) => panic!("decoded metadata does not encode again: {error}"),
    }
}

/// The front of an entry file holding `data`'s key and payload in `slot`, with the
/// checksums the format's encoders compute; `None` when they do not fit the format.
fn wrap_entry(data: &[u8], slot: Slot) -> Option<Vec<u8>> {
    let (&key_len, rest) = data.split_first()?;
    let key = rest.get(..usize::from(key_len))?;
    let payload = &rest[key.len()..];
    let capacity = (payload.len() + 20).next_multiple_of(512).max(1024);
    let preamble = entry::Preamble {
        key_len: u32::from(key_len),
        slot_capacity: u32::try_from(capacity).ok()?,
        body_len: 0,
        body_hash: 0,
        fill_id: crate::FillId(7),
    };
    let encoded = entry::encode_slot(payload, 1, preamble.slot_capacity).ok()?;
    let mut front = vec![0u8; usize::try_from(preamble.header_len()).ok()?];
    front[..entry::PREAMBLE_LEN].copy_from_slice(&entry::encode_preamble(&preamble, key));
    front[entry::PREAMBLE_LEN..entry::PREAMBLE_LEN + key.len()].copy_from_slice(key);
    let at = usize::try_from(preamble.slot_offset(slot)).ok()?;
    front[at..at + encoded.len()].copy_from_slice(&encoded);
    Some(front)
}

/// The pending-purge log's codec (`store::purge_log`). `data` is the file's bytes: decoding
/// them never panics, and the purges read, written again, read back the same. `data` is
/// also one purge (`data[0]` its kind, the rest its value), which reads back as itself.
pub fn purge_log(data: &[u8]) {
    let read: Vec<PurgeSelector> = purge_log::decode(data).filter_map(Result::ok).collect();
    let written = purge_log::encode(&read);
    let again: Vec<PurgeSelector> = (purge_log::decode(written.as_bytes()))
        .map(|line| line.expect("a written line reads back"))
        .collect();
    assert_eq!(again, read);
    let Some((&kind, value)) = data.split_first() else {
        return;
    };
    let value = String::from_utf8_lossy(value).into_owned();
    let kind = PurgeKind::ALL[usize::from(kind) % PurgeKind::ALL.len()];
    let one = PurgeSelector::new(kind, value);
    let written = purge_log::encode([&one]);
    let again: Vec<_> = purge_log::decode(written.as_bytes()).collect();
    assert_eq!(again, [Ok(one)], "{written:?}");
}
