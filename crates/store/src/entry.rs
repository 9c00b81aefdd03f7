//! The on-disk entry format, version 2: a pure codec over byte slices (no I/O).
//!
//! One file holds one fill of one cache key. Three properties shape the layout:
//!
//! - **Metadata can be replaced without touching the body, atomically across a
//!   crash.** The metadata lives in two fixed-capacity slots, A and B, each with
//!   its own sequence number and checksum. A reader uses the valid slot with the
//!   highest sequence; a revalidation writes the *other* slot with sequence + 1
//!   and fsyncs. A torn write only ever damages the slot being written, whose
//!   checksum then fails, so the reader falls back to the old slot. (This is the
//!   double-buffered "ping-pong" commit used by many log and superblock formats.)
//! - **Integrity.** The preamble carries an xxh3-64 checksum over its own fields
//!   and the key bytes, verified before anything is served. The body is covered
//!   twice: its whole xxh3-64 in the preamble, for the reads of the whole body (one
//!   hash, nothing more to read: the fast path of a hit), and a table of one xxh3-64
//!   per 64 KiB block after the body, so that a byte range is verified by reading
//!   only the blocks it touches (see `blocks`). The table goes *after* the body
//!   because a writer streaming a chunked body learns its length only at the end.
//! - **A restart scan reads only the front of the file**: preamble, key and the
//!   two slots are all at fixed, computable offsets before the body; the table's
//!   offset and length follow from the body length, so the file's length is checked
//!   without reading the table.
//!
//! Version 1 was this layout without the table. A reader of version 2 does not read
//! it: the scan removes such files (counted, logged once in its summary), so the
//! cache starts without them rather than serving ranges it cannot verify.
//!
//! The full key string is stored so that a 128-bit hash collision can never serve
//! the wrong object. All integers are little-endian.
//!
//! | offset            | size      | field                                                    |
//! |-------------------|-----------|----------------------------------------------------------|
//! | 0                 | 8         | magic `b"SCNDHIT\0"`                                     |
//! | 8                 | 2         | format version (u16) = 2                                 |
//! | 10                | 2         | reserved, written as zero                                |
//! | 12                | 4         | key length K (u32), at most 64 KiB                       |
//! | 16                | 4         | slot capacity C (u32), a multiple of 512                 |
//! | 20                | 4         | reserved, written as zero                                |
//! | 24                | 8         | body length (u64)                                        |
//! | 32                | 8         | body xxh3-64 (u64)                                       |
//! | 40                | 8         | fill id (u64)                                            |
//! | 48                | 8         | reserved, written as zero                                |
//! | 56                | 8         | header checksum: xxh3-64 of bytes 0..56 followed by key  |
//! | 64                | K         | key (UTF-8)                                              |
//! | 64 + K            | pad       | zeros up to S = round_up(64 + K, 512), ignored           |
//! | S                 | C         | metadata slot A                                          |
//! | S + C             | C         | metadata slot B                                          |
//! | S + 2C            | body len  | body                                                     |
//! | S + 2C + body len | 8 × N     | block table: N = ceil(body len / 64 KiB) xxh3-64 values, |
//! |                   |           | block i's seeded with i (its bytes i × 64 KiB onwards)   |
//!
//! A metadata slot (C bytes; sequence 0 marks an empty slot):
//!
//! | offset | size | field                                              |
//! |--------|------|----------------------------------------------------|
//! | 0      | 8    | sequence (u64), 0 = empty                          |
//! | 8      | 4    | payload length L (u32)                             |
//! | 12     | 8    | xxh3-64 of bytes 0..12 followed by the payload     |
//! | 20     | L    | payload ([`EntryMeta`], below)                     |
//! | 20 + L | rest | zeros                                              |
//!
//! The payload: request time and response time as unix milliseconds (u64 each),
//! status (u16), then the response headers and the stored request headers, each
//! as a count (u32) of (name length u16, name, value length u32, value bytes).
//! An entry with cache tags or a soft-purge mark has one more section after them:
//! the tag count (u32), each tag as (length u16, UTF-8 bytes), then the time of the
//! soft purge as unix milliseconds (u64, 0 for none). An entry with neither ends
//! after the request headers, as every entry written before tags existed does, so
//! those are read unchanged (no new format version).
//! Request credentials (`Authorization`, `Cookie`, `Proxy-Authorization`) are
//! refused by the encoder and never reach the disk.

use std::time::SystemTime;

use http::{HeaderMap, StatusCode};
use xxhash_rust::xxh3::Xxh3Default;

pub(crate) mod blocks;
mod meta;

use meta::decode_meta;
pub(crate) use meta::encode_meta;

use crate::FillId;

/// First eight bytes of every entry file.
const MAGIC: [u8; 8] = *b"SCNDHIT\0";
/// The format version this module writes and reads.
pub(crate) const VERSION: u16 = 2;
/// Size of the fixed preamble at the start of every entry file.
pub(crate) const PREAMBLE_LEN: usize = 64;
/// Longest key accepted; bounds what a reader allocates for garbage input.
const MAX_KEY_LEN: usize = 64 * 1024;
/// Largest slot capacity; bounds what a reader allocates for garbage input.
const MAX_SLOT_CAPACITY: usize = 4 * 1024 * 1024;
/// Smallest slot capacity: typical response metadata (a few hundred bytes) fits with
/// room to grow on revalidation, while a small object's entry stays small (two slots of
/// 1 KiB and a 512-byte front: 2.5 KiB of header for most keys).
const MIN_SLOT_CAPACITY: usize = 1024;
/// Slots start and end on 512-byte boundaries so that rewriting one slot never
/// shares a disk sector with the other slot.
const ALIGN: usize = 512;
/// Sequence, payload length and checksum in front of each slot's payload.
const SLOT_HEADER_LEN: usize = 20;

/// What was cached about one response, besides its body.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryMeta {
    /// When the request that produced the response was sent (millisecond precision on disk).
    pub request_time: SystemTime,
    /// When the response headers arrived (millisecond precision on disk).
    pub response_time: SystemTime,
    /// The response status.
    pub status: StatusCode,
    /// The response headers, in order, repeated names kept.
    pub response_headers: HeaderMap,
    /// Request headers kept for matching (e.g. `Vary`); never credentials.
    pub request_headers: HeaderMap,
    /// The entry's cache tags (`Surrogate-Key` or `Cache-Tag`, within the configured
    /// limits), for purges by tag; kept here so the start-up scan indexes them again.
    pub tags: Vec<String>,
    /// When a soft purge marked the entry stale: it is then revalidated before it is
    /// served fresh again. `None` for an entry never soft-purged, and after a
    /// revalidation replaced its metadata.
    pub purged: Option<SystemTime>,
}

/// Why bytes could not be encoded or decoded as an entry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum EntryError {
    /// The input ends before a field it must contain.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    /// The file does not start with the entry magic.
    #[error("bad magic")]
    BadMagic,
    /// A format version this code does not read.
    #[error("unsupported format version {0}")]
    Version(u16),
    /// A structural field is out of range.
    #[error("invalid {0}")]
    Invalid(&'static str),
    /// The preamble and key do not match their checksum.
    #[error("header checksum mismatch")]
    Checksum,
    /// Neither metadata slot holds a valid, decodable payload.
    #[error("no valid metadata slot: {0}")]
    NoValidSlot(&'static str),
    /// Request credentials were offered for storage.
    #[error("refusing to store request credentials")]
    Credentials,
    /// A key or metadata too large for the format's limits.
    #[error("{what} of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    /// Replacement metadata (slot header included) larger than an existing
    /// entry's slot capacity.
    #[error("metadata slot of {len} bytes exceeds the slot capacity of {capacity} bytes")]
    SlotFull { len: usize, capacity: usize },
}

/// One of the two metadata slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The first slot, written by the fill.
    A,
    /// The second slot, first written by a revalidation.
    B,
}

impl Slot {
    /// The slot a replacement of this one's metadata goes to.
    pub(crate) fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }
}

/// The fixed fields at the start of an entry file (everything but the checksum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Preamble {
    /// Length of the key in bytes.
    pub key_len: u32,
    /// Capacity of each of the two metadata slots, in bytes.
    pub slot_capacity: u32,
    /// Length of the body; zero until the fill finishes.
    pub body_len: u64,
    /// xxh3-64 of the body; zero until the fill finishes.
    pub body_hash: u64,
    /// The fill that wrote this file (also in its name).
    pub fill_id: FillId,
}

impl Preamble {
    /// Offset of the body, which is also the length of everything before it.
    pub(crate) fn header_len(&self) -> u64 {
        self.slot_a_offset() as u64 + 2 * u64::from(self.slot_capacity)
    }

    /// The length of the whole file: header, body and block table.
    pub(crate) fn file_len(&self) -> u64 {
        file_len(self.header_len(), self.body_len)
    }

    fn slot_a_offset(&self) -> usize {
        (PREAMBLE_LEN + self.key_len as usize).next_multiple_of(ALIGN)
    }

    /// File offset of a metadata slot.
    pub(crate) fn slot_offset(&self, slot: Slot) -> u64 {
        let a = self.slot_a_offset() as u64;
        match slot {
            Slot::A => a,
            Slot::B => a + u64::from(self.slot_capacity),
        }
    }
}

/// The length of an entry file with a header of `header_len` bytes and a body of
/// `body_len` (what a fill reserves of the budget as its body grows).
pub(crate) fn file_len(header_len: u64, body_len: u64) -> u64 {
    header_len
        .saturating_add(body_len)
        .saturating_add(blocks::table_len(body_len))
}

/// A verified entry header: preamble, key and the current metadata.
#[derive(Debug)]
pub(crate) struct DecodedHeader {
    /// The preamble fields.
    pub preamble: Preamble,
    /// The full cache key the entry was stored under.
    pub key: String,
    /// Metadata from the valid slot with the highest sequence.
    pub meta: EntryMeta,
    /// The slot `meta` came from.
    pub slot: Slot,
    /// That slot's sequence number.
    pub sequence: u64,
}

/// Encodes the preamble for `p`, with its checksum over the fields and `key`.
pub(crate) fn encode_preamble(p: &Preamble, key: &[u8]) -> [u8; PREAMBLE_LEN] {
    let mut out = [0u8; PREAMBLE_LEN];
    out[0..8].copy_from_slice(&MAGIC);
    out[8..10].copy_from_slice(&VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&p.key_len.to_le_bytes());
    out[16..20].copy_from_slice(&p.slot_capacity.to_le_bytes());
    out[24..32].copy_from_slice(&p.body_len.to_le_bytes());
    out[32..40].copy_from_slice(&p.body_hash.to_le_bytes());
    out[40..48].copy_from_slice(&p.fill_id.0.to_le_bytes());
    let sum = header_checksum(&out[..56], key);
    out[56..64].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Encodes everything before the body of a new fill: preamble (body fields zero),
/// key, slot A holding `meta` at sequence 1, and an empty slot B.
pub(crate) fn encode_header(
    key: &str,
    meta: &EntryMeta,
    fill_id: FillId,
) -> Result<(Preamble, Vec<u8>), EntryError> {
    if key.len() > MAX_KEY_LEN {
        return Err(EntryError::TooLarge {
            what: "key",
            len: key.len(),
            limit: MAX_KEY_LEN,
        });
    }
    let payload = encode_meta(meta)?;
    let slot_len = SLOT_HEADER_LEN + payload.len();
    // Twice the current size leaves room for a revalidation to add headers
    // without rewriting the body.
    let capacity = (2 * slot_len)
        .max(MIN_SLOT_CAPACITY)
        .next_multiple_of(ALIGN)
        .min(MAX_SLOT_CAPACITY);
    if slot_len > capacity {
        return Err(EntryError::TooLarge {
            what: "metadata",
            len: slot_len,
            limit: MAX_SLOT_CAPACITY,
        });
    }
    // Both casts are lossless: the limits above are far below u32::MAX.
    let preamble = Preamble {
        key_len: key.len() as u32,
        slot_capacity: capacity as u32,
        body_len: 0,
        body_hash: 0,
        fill_id,
    };
    let slot_a = preamble.slot_a_offset();
    let mut out = vec![0u8; slot_a + 2 * capacity];
    out[..PREAMBLE_LEN].copy_from_slice(&encode_preamble(&preamble, key.as_bytes()));
    out[PREAMBLE_LEN..PREAMBLE_LEN + key.len()].copy_from_slice(key.as_bytes());
    let slot = encode_slot(&payload, 1, preamble.slot_capacity)?;
    out[slot_a..slot_a + slot.len()].copy_from_slice(&slot);
    Ok((preamble, out))
}

/// Encodes one metadata slot holding `payload` (from [`encode_meta`]) at
/// `sequence`: slot header and payload, without the zeros up to `capacity`
/// (a reader ignores bytes past the payload, so a replacement writes only these).
/// Fails with `SlotFull` if they exceed `capacity`.
pub(crate) fn encode_slot(
    payload: &[u8],
    sequence: u64,
    capacity: u32,
) -> Result<Vec<u8>, EntryError> {
    let len = SLOT_HEADER_LEN + payload.len();
    let capacity = capacity as usize;
    if len > capacity {
        return Err(EntryError::SlotFull { len, capacity });
    }
    let mut slot = Vec::with_capacity(len);
    slot.extend_from_slice(&sequence.to_le_bytes());
    // Lossless: the payload fits a slot, and slots are at most MAX_SLOT_CAPACITY.
    slot.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let sum = slot_checksum(&slot[0..12], payload);
    slot.extend_from_slice(&sum.to_le_bytes());
    slot.extend_from_slice(payload);
    Ok(slot)
}

/// Decodes and range-checks the first [`PREAMBLE_LEN`] bytes. The checksum is
/// not verified here (it covers the key too): use [`decode_header`] for that.
pub(crate) fn decode_preamble(buf: &[u8]) -> Result<Preamble, EntryError> {
    let mut r = Reader::new(buf);
    if r.take(8)? != MAGIC {
        return Err(EntryError::BadMagic);
    }
    let version = r.u16()?;
    if version != VERSION {
        return Err(EntryError::Version(version));
    }
    r.take(2)?;
    let key_len = r.u32()?;
    let slot_capacity = r.u32()?;
    r.take(4)?;
    let p = Preamble {
        key_len,
        slot_capacity,
        body_len: r.u64()?,
        body_hash: r.u64()?,
        fill_id: FillId(r.u64()?),
    };
    if key_len as usize > MAX_KEY_LEN {
        return Err(EntryError::Invalid("key length"));
    }
    let cap = slot_capacity as usize;
    if !(SLOT_HEADER_LEN..=MAX_SLOT_CAPACITY).contains(&cap) || !cap.is_multiple_of(ALIGN) {
        return Err(EntryError::Invalid("slot capacity"));
    }
    Ok(p)
}

/// Decodes and verifies everything before the body. `buf` starts at file offset
/// 0 and holds at least [`Preamble::header_len`] bytes.
pub(crate) fn decode_header(buf: &[u8]) -> Result<DecodedHeader, EntryError> {
    let preamble = decode_preamble(buf)?;
    let need = preamble.header_len() as usize;
    if buf.len() < need {
        return Err(EntryError::Truncated {
            need,
            have: buf.len(),
        });
    }
    let key_bytes = &buf[PREAMBLE_LEN..PREAMBLE_LEN + preamble.key_len as usize];
    let stored_sum = u64::from_le_bytes(read_array(&buf[56..64])?);
    if header_checksum(&buf[..56], key_bytes) != stored_sum {
        return Err(EntryError::Checksum);
    }
    let key = std::str::from_utf8(key_bytes)
        .map_err(|_| EntryError::Invalid("key encoding"))?
        .to_owned();
    let cap = preamble.slot_capacity as usize;
    let mut slots: Vec<(Slot, u64, &[u8])> = [Slot::A, Slot::B]
        .into_iter()
        .filter_map(|slot| {
            let start = preamble.slot_offset(slot) as usize;
            let (sequence, payload) = valid_slot(&buf[start..start + cap])?;
            Some((slot, sequence, payload))
        })
        .collect();
    // Highest sequence first; a valid payload that fails to decode (which only a
    // bug could produce) falls back to the other slot rather than losing the entry.
    slots.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut why = "both slots empty or failing their checksum";
    for (slot, sequence, payload) in slots {
        match decode_meta(payload) {
            Ok(meta) => {
                return Ok(DecodedHeader {
                    preamble,
                    key,
                    meta,
                    slot,
                    sequence,
                });
            }
            Err(e) => why = e,
        }
    }
    Err(EntryError::NoValidSlot(why))
}

fn header_checksum(fields: &[u8], key: &[u8]) -> u64 {
    let mut h = Xxh3Default::new();
    h.update(fields);
    h.update(key);
    h.digest()
}

fn slot_checksum(seq_and_len: &[u8], payload: &[u8]) -> u64 {
    let mut h = Xxh3Default::new();
    h.update(seq_and_len);
    h.update(payload);
    h.digest()
}

/// The sequence and payload of a non-empty slot whose checksum holds.
fn valid_slot(slot: &[u8]) -> Option<(u64, &[u8])> {
    let mut r = Reader::new(slot);
    let seq = r.u64().ok()?;
    let len = r.u32().ok()? as usize;
    let sum = r.u64().ok()?;
    let payload = r.take(len).ok()?;
    (seq != 0 && slot_checksum(&slot[0..12], payload) == sum).then_some((seq, payload))
}

fn read_array<const N: usize>(bytes: &[u8]) -> Result<[u8; N], EntryError> {
    bytes.try_into().map_err(|_| EntryError::Truncated {
        need: N,
        have: bytes.len(),
    })
}

/// A bounds-checked cursor: every read fails cleanly past the end.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// How many bytes were read so far.
    fn position(&self) -> usize {
        self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], EntryError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or(EntryError::Truncated {
            need: self.pos.saturating_add(n),
            have: self.buf.len(),
        })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, EntryError> {
        Ok(u16::from_le_bytes(read_array(self.take(2)?)?))
    }

    fn u32(&mut self) -> Result<u32, EntryError> {
        Ok(u32::from_le_bytes(read_array(self.take(4)?)?))
    }

    fn u64(&mut self) -> Result<u64, EntryError> {
        Ok(u64::from_le_bytes(read_array(self.take(8)?)?))
    }

    fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
}

#[cfg(test)]
mod tests;
