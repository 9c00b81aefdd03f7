//! The global allocator: mimalloc, asked for plain blocks wherever a plain block is
//! aligned enough.
//!
//! The `mimalloc` crate's allocator passes every request to `mi_malloc_aligned`. In
//! mimalloc 3 that takes its fast path only for blocks of up to 1 KiB whose page has a
//! free block at hand; any other request whose rounded size is not a power of two goes
//! to the over-allocating aligned path, even for the alignment of 8 or 16 that every
//! block has anyway. A stored miss made nine such calls, about 5,700 instructions
//! (`benches/RESULTS.md`, "plain blocks from mimalloc"; the crate's open pull request 170
//! makes the same change).

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc,
    mi_zalloc_aligned,
};

/// The alignment every mimalloc block of at least that size has (`MI_MAX_ALIGN_SIZE`):
/// its size classes are multiples of 8, and of 16 above 16, and each page's first block
/// is 16-aligned.
const PLAIN_ALIGN: usize = 16;

/// mimalloc, with plain calls for the layouts a plain block satisfies.
pub(crate) struct MiMalloc;

/// Whether a block of `size` bytes from plain `mi_malloc` is aligned to `align`: an
/// alignment mimalloc's size classes keep, and no larger than the block (the smallest
/// class is 8 bytes, aligned only to 8).
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` and the
// `realloc`s take any mimalloc block, aligned or not); each is aligned as its layout
// asks, by `plain` or by mimalloc's aligned calls.
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain mimalloc calls, valid for any size and power-of-two alignment.
        unsafe {
            match plain(layout.size(), layout.align()) {
                true => mi_malloc(layout.size()),
                false => mi_malloc_aligned(layout.size(), layout.align()),
            }
        }
        .cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            match plain(layout.size(), layout.align()) {
                true => mi_zalloc(layout.size()),
                false => mi_zalloc_aligned(layout.size(), layout.align()),
            }
        }
        .cast()
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator, so from mimalloc, which moves the
        // contents to a new block when the old one cannot grow in place.
        unsafe {
            match plain(new_size, layout.align()) {
                true => mi_realloc(ptr.cast(), new_size),
                false => mi_realloc_aligned(ptr.cast(), new_size, layout.align()),
            }
        }
        .cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes around each of mimalloc's size classes up to a few pages, and large ones.
    fn sizes() -> impl Iterator<Item = usize> {
        (1..=4096)
            .chain((4097..70_000).step_by(61))
            .chain([1 << 20, 3 << 20])
    }

    #[test]
    fn every_block_has_the_alignment_its_layout_asks_for_and_keeps_it_when_resized() {
        let allocator = MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in sizes().filter(|size| size % 7 == 0 || size.is_power_of_two()) {
                let layout = Layout::from_size_align(size, align).expect("a valid layout");
                // SAFETY: a non-zero size; each block is checked, written and freed once.
                unsafe {
                    let block = allocator.alloc(layout);
                    assert!(!block.is_null(), "{size} aligned to {align}");
                    assert_eq!(block as usize % align, 0, "{size} aligned to {align}");
                    block.write_bytes(0xa5, size);
                    let grown = allocator.realloc(block, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "{size}*3 aligned to {align}");
                    assert_eq!(*grown.add(size - 1), 0xa5, "the contents moved with it");
                    let grown_layout = Layout::from_size_align(size * 3, align).expect("valid");
                    allocator.dealloc(grown, grown_layout);
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert_eq!(
                        zeroed as usize % align,
                        0,
                        "{size} zeroed, aligned to {align}"
                    );
                    let bytes = std::slice::from_raw_parts(zeroed, size);
                    assert!(bytes.iter().all(|b| *b == 0), "{size} zeroed");
                    allocator.dealloc(zeroed, layout);
                }
            }
        }
    }

    #[test]
    fn only_alignments_every_block_of_the_size_has_go_to_plain_calls() {
        assert!(plain(8, 8) && plain(16, 16) && plain(24, 8) && plain(1500, 16));
        assert!(plain(1, 1) && plain(3, 2));
        assert!(!plain(8, 16), "the 8-byte class is aligned only to 8");
        assert!(!plain(64, 32) && !plain(4096, 4096));
    }
}
