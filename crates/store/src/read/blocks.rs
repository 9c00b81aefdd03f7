//! Byte ranges read from an entry file and verified by the blocks they touch: each
//! 64 KiB block is read whole and checked against its entry in the block table (after
//! the body, see `entry`) before any of its bytes goes out.
//!
//! Two ways, by the range's size:
//! - [`StoredEntry::verify_range`]: the lookup of a Range request reads and verifies the
//!   blocks of a small range (at most [`VERIFY_FIRST_MAX`] bytes of blocks) before the
//!   response's head is sent. A damaged block then discards the entry, and the request
//!   is a miss that goes to the origin: the client never sees the damage at all.
//! - [`next_chunk`]: a longer range, and every whole body read from its file, streams
//!   block by block; a damaged block ends the stream with an error before its first
//!   byte, so the client gets a response cut at the first bad block, never a wrong byte.
//!
//! A body the memory tier holds, mapped or copied, was verified whole when it got there,
//! so its ranges are slices with nothing more to check.

use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::super::disk::Damage;
use super::super::entry::blocks::{SUM_LEN, block_span, blocks_of, check_blocks};
use super::{Source, StoredEntry, discard, read_file};

/// Largest span of whole blocks a range may touch to be verified before the head is
/// sent: 4 blocks. Small ranges (a document viewer's pages, a resumed download's
/// first request, 21 bytes around a damaged one) touch one or two; holding 256 KiB per such
/// request is no more than a few socket buffers, and a larger range streams verified
/// block by block, holding one block at a time.
pub(crate) const VERIFY_FIRST_MAX: u64 = 256 * 1024;

/// Table entries read at most at once, for a long range: 4096 entries (32 KiB) cover
/// 256 MiB of body, so a stream of a huge range holds a bounded part of its table.
const SUMS_AT_ONCE: u64 = 4096;

/// Block table entries read from the file, for a run of blocks.
pub(super) struct Sums {
    /// The block the first entry is for.
    first_block: u64,
    /// The entries, [`SUM_LEN`] bytes each.
    bytes: Vec<u8>,
}

impl Sums {
    /// The entry of `block`, if these hold it.
    fn of(&self, block: u64) -> Option<&[u8]> {
        let at = usize::try_from(block.checked_sub(self.first_block)? * SUM_LEN).ok()?;
        self.bytes.get(at..at + SUM_LEN as usize)
    }
}

/// Reads the table entries of blocks `first..=last` of `entry`.
async fn read_sums(
    entry: &StoredEntry,
    file: &Arc<std::fs::File>,
    first: u64,
    last: u64,
) -> io::Result<Sums> {
    let table = entry.body_offset + entry.body_len;
    let len = (last - first + 1) * SUM_LEN;
    let bytes = read_file(entry, file, len, table + first * SUM_LEN).await?;
    Ok(Sums {
        first_block: first,
        bytes,
    })
}

/// Discards `entry`, whose `block` failed its check, and returns the error that ends
/// its stream.
async fn damaged(entry: &StoredEntry, block: u64) -> io::Error {
    let reason = format!("block {block} fails its checksum");
    discard(entry, Damage::Checksum, &reason).await;
    io::Error::new(
        io::ErrorKind::InvalidData,
        "cached body fails a block checksum",
    )
}

/// The next chunk of a range of `entry` streamed from `file`, whose next byte is at file
/// offset `position` with `remaining` bytes to go (both advanced past the chunk): the rest
/// of the range within the block holding that byte, after the whole block was read and
/// checked against its entry in `sums` (read first if they do not hold it).
pub(super) async fn next_chunk(
    entry: &StoredEntry,
    file: &Arc<std::fs::File>,
    sums: &mut Option<Sums>,
    position: &mut u64,
    remaining: &mut u64,
) -> io::Result<Bytes> {
    let at = *position - entry.body_offset;
    let (block, last_block) = blocks_of(at, at + *remaining - 1);
    if sums.as_ref().and_then(|s| s.of(block)).is_none() {
        let last = last_block.min(block + SUMS_AT_ONCE - 1);
        *sums = Some(read_sums(entry, file, block, last).await?);
    }
    let sum = sums.as_ref().and_then(|s| s.of(block)).unwrap_or_default();
    let (start, end) = block_span(block, entry.body_len);
    let bytes = read_file(entry, file, end - start, entry.body_offset + start).await?;
    if let Err(block) = check_blocks(&bytes, block, entry.body_len, sum) {
        return Err(damaged(entry, block).await);
    }
    let skip = at - start;
    let take = (*remaining).min(end - at);
    *remaining -= take;
    *position += take;
    // Lossless: both are within one block.
    Ok(Bytes::from(bytes).slice(skip as usize..(skip + take) as usize))
}

impl StoredEntry {
    /// Reads and verifies, before anything is sent, the whole blocks the body bytes
    /// `first..=last` touch, when they are at most `VERIFY_FIRST_MAX` bytes and the
    /// body is read from the file; [`StoredEntry::into_range_stream`] of that range then
    /// serves them without reading again. False when a block fails its checksum (or the
    /// file is shorter than its header says): the entry is then discarded and counted,
    /// and the caller should treat the request as a miss. True otherwise, including when
    /// nothing was read ahead (a body in memory, a longer range, a range outside the
    /// body, a read error), in which case the stream verifies what it reads.
    pub async fn verify_range(&mut self, first: u64, last: u64) -> bool {
        let Source::File(file) = &self.source else {
            return true;
        };
        if self.outside_body(first, last).is_some() {
            return true;
        }
        let (first_block, last_block) = blocks_of(first, last);
        let (start, _) = block_span(first_block, self.body_len);
        let (_, end) = block_span(last_block, self.body_len);
        if end - start > VERIFY_FIRST_MAX {
            return true;
        }
        let file = Arc::clone(file);
        let read = async {
            let sums = read_sums(self, &file, first_block, last_block).await?;
            let position = self.body_offset + start;
            let blocks = read_file(self, &file, end - start, position).await?;
            Ok::<_, io::Error>((sums, blocks))
        };
        let (sums, blocks) = match read.await {
            Ok(read) => read,
            // `read_file` discarded the entry: it is shorter than its header says.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return false,
            // Left to the stream, which reads again and reports what it finds.
            Err(_) => return true,
        };
        if let Err(block) = check_blocks(&blocks, first_block, self.body_len, &sums.bytes) {
            damaged(self, block).await;
            return false;
        }
        self.source = Source::Verified {
            file,
            start,
            blocks: Bytes::from(blocks),
        };
        true
    }
}
