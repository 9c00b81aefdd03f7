//! The block table of an entry body: one xxh3-64 per [`BLOCK_LEN`] bytes, so that a
//! reader can verify any byte range by the blocks it touches (layout in the parent
//! module's docs).
//!
//! Why 64 KiB blocks: a range read then reads at most one block too many at each end
//! (128 KiB for the smallest range, quick to hash), and that is also the size in
//! which the store reads bodies anyway, so a block is one positioned read. The table costs
//! 8 bytes per 64 KiB (0.012% of the body; 640 bytes for 5 MB, 128 KiB for 1 GiB), so the
//! few entries a range needs are one small read. Smaller blocks would cut the over-read of
//! tiny ranges but grow the table and the number of hashes per read; larger ones the reverse.
//!
//! Each block's hash is seeded with the block's index, so a block written at the wrong
//! offset (or two identical-looking blocks swapped) fails too, not only a changed byte.

use xxhash_rust::xxh3::{Xxh3, xxh3_64_with_seed};

/// Bytes of body per block; the last block of a body may be shorter.
pub(crate) const BLOCK_LEN: u64 = 64 * 1024;
/// Bytes of one block's entry in the table (a little-endian xxh3-64).
pub(crate) const SUM_LEN: u64 = 8;

/// Blocks in a body of `body_len` bytes.
pub(crate) fn block_count(body_len: u64) -> u64 {
    body_len.div_ceil(BLOCK_LEN)
}

/// Bytes of the block table of a body of `body_len` bytes.
pub(crate) fn table_len(body_len: u64) -> u64 {
    block_count(body_len) * SUM_LEN
}

/// The body offsets `start..end` of block `block` of a body of `body_len` bytes.
pub(crate) fn block_span(block: u64, body_len: u64) -> (u64, u64) {
    let start = block.saturating_mul(BLOCK_LEN).min(body_len);
    (start, start.saturating_add(BLOCK_LEN).min(body_len))
}

/// The first and last block the body bytes `first..=last` touch.
pub(crate) fn blocks_of(first: u64, last: u64) -> (u64, u64) {
    (first / BLOCK_LEN, last / BLOCK_LEN)
}

/// The hash block `block` with these bytes has in the table.
fn block_sum(block: u64, bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, block)
}

/// Checks `bytes`, the whole blocks `first_block..` of a body of `body_len` bytes in a
/// row, against `sums`, their table entries in a row. `Err(block)` names the first block
/// that fails, or that `bytes` or `sums` do not hold whole.
pub(crate) fn check_blocks(
    bytes: &[u8],
    first_block: u64,
    body_len: u64,
    sums: &[u8],
) -> Result<(), u64> {
    let (mut rest, mut sums) = (bytes, sums);
    let mut block = first_block;
    while !rest.is_empty() {
        let (start, end) = block_span(block, body_len);
        let len = usize::try_from(end - start).map_err(|_| block)?;
        if len == 0 || rest.len() < len || sums.len() < SUM_LEN as usize {
            return Err(block);
        }
        let (this, after) = rest.split_at(len);
        let (sum, more) = sums.split_at(SUM_LEN as usize);
        let stored = u64::from_le_bytes(sum.try_into().map_err(|_| block)?);
        if block_sum(block, this) != stored {
            return Err(block);
        }
        (rest, sums, block) = (after, more, block + 1);
    }
    Ok(())
}

/// Builds the block table of a body that arrives in pieces of any size.
pub(crate) struct BlockHasher {
    /// The block being hashed. Boxed: it carries a large buffer.
    hasher: Box<Xxh3>,
    /// Its index.
    block: u64,
    /// Bytes of it hashed so far.
    filled: u64,
    /// The table so far: one entry per finished block.
    table: Vec<u8>,
}

impl BlockHasher {
    /// A hasher for a body that has not started.
    pub(crate) fn new() -> BlockHasher {
        BlockHasher {
            hasher: Box::new(Xxh3::with_seed(0)),
            block: 0,
            filled: 0,
            table: Vec::new(),
        }
    }

    /// Adds the next bytes of the body.
    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = usize::try_from(BLOCK_LEN - self.filled).unwrap_or(usize::MAX);
            let (this, rest) = bytes.split_at(room.min(bytes.len()));
            self.hasher.update(this);
            self.filled += this.len() as u64;
            bytes = rest;
            if self.filled == BLOCK_LEN {
                self.end_block();
            }
        }
    }

    fn end_block(&mut self) {
        self.table
            .extend_from_slice(&self.hasher.digest().to_le_bytes());
        self.block += 1;
        self.filled = 0;
        *self.hasher = Xxh3::with_seed(self.block);
    }

    /// The table of the body added so far ([`table_len`] bytes of it).
    pub(crate) fn finish(mut self) -> Vec<u8> {
        if self.filled > 0 {
            self.end_block();
        }
        self.table
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The table of `body`, built in pieces of `piece` bytes.
    fn table(body: &[u8], piece: usize) -> Vec<u8> {
        let mut hasher = BlockHasher::new();
        body.chunks(piece.max(1)).for_each(|c| hasher.update(c));
        hasher.finish()
    }

    /// The whole blocks under `first..=last`, and their table entries, checked.
    fn check_range(body: &[u8], table: &[u8], first: u64, last: u64) -> Result<(), u64> {
        let len = body.len() as u64;
        let (fb, lb) = blocks_of(first, last);
        let (start, _) = block_span(fb, len);
        let (_, end) = block_span(lb, len);
        let sums = &table[(fb * SUM_LEN) as usize..((lb + 1) * SUM_LEN) as usize];
        check_blocks(&body[start as usize..end as usize], fb, len, sums)
    }

    #[test]
    fn spans_and_counts_at_the_edges() {
        assert_eq!((block_count(0), table_len(0)), (0, 0));
        assert_eq!(block_count(BLOCK_LEN), 1);
        assert_eq!(
            (block_count(BLOCK_LEN + 1), table_len(BLOCK_LEN + 1)),
            (2, 16)
        );
        assert_eq!(block_span(1, BLOCK_LEN + 10), (BLOCK_LEN, BLOCK_LEN + 10));
        assert_eq!(blocks_of(BLOCK_LEN - 1, BLOCK_LEN), (0, 1));
        assert_eq!(table(&[], 7), Vec::<u8>::new());
    }

    #[test]
    fn a_block_moved_to_another_index_fails() {
        let body = vec![7u8; 2 * BLOCK_LEN as usize];
        let table = table(&body, 1000);
        // Two identical blocks: only the seed tells them apart.
        assert_ne!(table[..8], table[8..16]);
        let swapped: Vec<u8> = table[8..16].iter().chain(&table[..8]).copied().collect();
        assert_eq!(check_blocks(&body, 0, body.len() as u64, &swapped), Err(0));
    }

    proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(64))]

        /// The table does not depend on how the body is cut, and any range of an intact
        /// body verifies.
        #[test]
        fn any_range_of_an_intact_body_verifies(
            len in 1usize..(3 * BLOCK_LEN as usize + 100),
            pieces in (1usize..70_000, 1usize..70_000),
            range in (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
        ) {
            let body: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
            let table_a = table(&body, pieces.0);
            prop_assert_eq!(&table_a, &table(&body, pieces.1));
            prop_assert_eq!(table_a.len() as u64, table_len(len as u64));
            let (a, b) = (range.0.index(len) as u64, range.1.index(len) as u64);
            prop_assert_eq!(check_range(&body, &table_a, a.min(b), a.max(b)), Ok(()));
        }

        /// A range verifies exactly when no block it touches holds the flipped byte (or
        /// the flipped table entry).
        #[test]
        fn a_range_verifies_iff_its_blocks_are_intact(
            len in 1usize..(3 * BLOCK_LEN as usize + 100),
            flip in any::<prop::sample::Index>(),
            in_table in any::<bool>(),
            range in (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
        ) {
            let mut body: Vec<u8> = (0..len).map(|i| (i * 7 % 253) as u8).collect();
            let mut table = table(&body, 4096);
            let damaged = if in_table {
                let at = flip.index(table.len());
                table[at] ^= 0x10;
                at as u64 / SUM_LEN
            } else {
                let at = flip.index(len);
                body[at] ^= 0x10;
                at as u64 / BLOCK_LEN
            };
            let (a, b) = (range.0.index(len) as u64, range.1.index(len) as u64);
            let (first, last) = (a.min(b), a.max(b));
            let (fb, lb) = blocks_of(first, last);
            let expected = if (fb..=lb).contains(&damaged) { Err(damaged) } else { Ok(()) };
            prop_assert_eq!(check_range(&body, &table, first, last), expected);
        }

        /// Arbitrary bytes, offsets and tables never panic.
        #[test]
        fn arbitrary_input_never_panics(
            bytes in prop::collection::vec(any::<u8>(), 0..300),
            sums in prop::collection::vec(any::<u8>(), 0..40),
            first_block in any::<u64>(),
            body_len in any::<u64>(),
        ) {
            let _ = check_blocks(&bytes, first_block, body_len, &sums);
            let _ = block_span(first_block, body_len);
            let _ = table_len(body_len);
        }
    }
}
