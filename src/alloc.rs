//! The binary's memory allocator: size classes with free lists, carved from one growing region.
//!
//! A plugin is a process of a few milliseconds that makes a few hundred small allocations.
//! musl's allocator maps and unmaps a fresh group of pages for most size classes it meets and
//! gives them back as soon as they empty (a bridge ADD: 18 mmap and 16 munmap calls, and a
//! page fault for every first touch of each). Here blocks of a power-of-two class are cut from
//! one region in order, so the few hundred KiB a run uses sit in a handful of pages, and a freed
//! block goes on its class's free list for the next allocation of that class (the dhcp daemon
//! runs for months: its memory is reused, never lost). The region starts in .bss (pages the
//! kernel maps on first touch) and continues in 1 MiB mappings. The newest block grows in place
//! and goes back to the region when freed, so a Vec or String being filled does not leave its
//! smaller copies behind. Requests above 64 KiB, or aligned to more than 16 bytes (rare: none
//! on the plugins' paths), go to musl as before.
//!
//! One spin lock guards it: plugins are single-threaded but for a short helper thread
//! (src/overlap.rs), and the daemon's threads allocate rarely.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};

/// Classes 16, 32, … 64 KiB: `16 << i`.
const CLASSES: usize = 13;
const MIN: usize = 16;
const MAX: usize = MIN << (CLASSES - 1);
/// The first region, in .bss.
const FIRST: usize = 256 * 1024;
/// Each region after it, mapped from the kernel.
const NEXT: usize = 1024 * 1024;

pub struct Classes {
    lock: AtomicBool,
    state: UnsafeCell<State>,
}

struct State {
    /// Head of each class's free list (a freed block stores the next one in its first word).
    free: [*mut u8; CLASSES],
    /// The unused part of the current region.
    next: usize,
    end: usize,
}

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; FIRST]>);
// SAFETY: the arena's bytes are only reached through blocks `Classes` hands out under its lock.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(UnsafeCell::new([0; FIRST]));
/// Whether an allocator has claimed ARENA (the binary has one; unit tests make more).
static ARENA_TAKEN: AtomicBool = AtomicBool::new(false);

// SAFETY: `state` is only touched with `lock` held.
unsafe impl Sync for Classes {}

impl Classes {
    pub const fn new() -> Classes {
        Classes {
            lock: AtomicBool::new(false),
            state: UnsafeCell::new(State {
                free: [null_mut(); CLASSES],
                next: 0,
                end: 0,
            }),
        }
    }

    /// The class index for `layout`, or None when musl should serve it.
    fn class(layout: Layout) -> Option<usize> {
        let size = layout.size().max(MIN);
        if size > MAX || layout.align() > MIN {
            return None;
        }
        let rounded = size.next_power_of_two();
        Some(rounded.trailing_zeros() as usize - MIN.trailing_zeros() as usize)
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held until the store below.
        let r = f(unsafe { &mut *self.state.get() });
        self.lock.store(false, Ordering::Release);
        r
    }
}

impl Default for Classes {
    fn default() -> Self {
        Classes::new()
    }
}

impl State {
    /// A block of `size` bytes (a power of two ≤ MAX, so a multiple of 16) from the region.
    fn carve(&mut self, size: usize) -> *mut u8 {
        let mut at = self.next;
        if self.end == 0 || at + size > self.end {
            let (base, len) = if !ARENA_TAKEN.swap(true, Ordering::Relaxed) {
                (ARENA.0.get() as usize, FIRST)
            } else {
                // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
                let p = unsafe {
                    libc::mmap(
                        null_mut(),
                        NEXT,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    return null_mut();
                }
                (p as usize, NEXT)
            };
            // The rest of the old region is left unused: at most one block's worth.
            self.next = base;
            self.end = base + len;
            at = base;
        }
        self.next = at + size;
        at as *mut u8
    }
}

// SAFETY: blocks never overlap (each is carved once and, after `dealloc`, handed out again only
// from its class's free list), are at least `layout.size()` bytes and aligned to
// `layout.align()` (a power of two ≤ the class size, and the class size's alignment is kept by
// `carve`); everything else is musl's.
unsafe impl GlobalAlloc for Classes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = Self::class(layout) else {
            // SAFETY: forwarded as is.
            return unsafe { System.alloc(layout) };
        };
        self.with(|s| {
            let head = s.free[c];
            if head.is_null() {
                s.carve(MIN << c)
            } else {
                // SAFETY: a free block of this class holds the next free block in its first word.
                s.free[c] = unsafe { (head as *mut *mut u8).read() };
                head
            }
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = Self::class(layout) else {
            // SAFETY: it came from System.alloc with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        };
        self.with(|s| {
            if ptr as usize + (MIN << c) == s.next {
                // The last block carved: the region takes it back for any class.
                s.next = ptr as usize;
            } else {
                // SAFETY: the block is ours, of class `c`, at least 16 bytes and 16-aligned.
                unsafe { (ptr as *mut *mut u8).write(s.free[c]) };
                s.free[c] = ptr;
            }
        })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `new_size` comes from the caller's contract (non-zero, no overflow).
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let (from, to) = (Self::class(layout), Self::class(new));
        if let (Some(a), Some(b)) = (from, to) {
            if a == b {
                // Same class: the block already has room.
                return ptr;
            }
            // The last block carved grows (or shrinks) where it is when the region has room:
            // a Vec or String being filled is usually the newest allocation.
            let in_place = self.with(|s| {
                let at = ptr as usize;
                let fits = at + (MIN << a) == s.next && at + (MIN << b) <= s.end;
                if fits {
                    s.next = at + (MIN << b);
                }
                fits
            });
            if in_place {
                return ptr;
            }
        }
        match (from, to) {
            // Both musl's: let it grow in place when it can.
            // SAFETY: forwarded as is.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: a fresh block, then the old one's bytes, then the old one freed.
                unsafe {
                    let to = self.alloc(new);
                    if !to.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    to
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_and_send_the_rest_to_musl() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(Classes::class(l(1, 1)), Some(0));
        assert_eq!(Classes::class(l(16, 8)), Some(0));
        assert_eq!(Classes::class(l(17, 8)), Some(1));
        assert_eq!(Classes::class(l(64, 16)), Some(2));
        assert_eq!(Classes::class(l(MAX, 8)), Some(CLASSES - 1));
        assert_eq!(Classes::class(l(MAX + 1, 8)), None);
        assert_eq!(Classes::class(l(64, 32)), None);
    }

    /// Blocks are aligned, do not overlap, keep their bytes across growth, are reused after
    /// being freed, and the allocator keeps working past the .bss region.
    #[test]
    fn blocks_are_aligned_disjoint_and_reused() {
        let a = Classes::new();
        let mut live: Vec<(*mut u8, Layout)> = Vec::new();
        let mut total = 0;
        // Enough to leave the first region (256 KiB) several times over.
        for i in 0..4000usize {
            let size = 1 + (i * 37) % 3000;
            let align = 1 << (i % 7);
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a valid non-zero layout.
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0);
            // SAFETY: p has `size` bytes.
            unsafe { std::ptr::write_bytes(p, (i % 251) as u8, size) };
            live.push((p, layout));
            total += size;
        }
        assert!(total > 3 * FIRST);
        let mut spans: Vec<(usize, usize)> = live
            .iter()
            .map(|(p, l)| (*p as usize, *p as usize + l.size()))
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        for (i, (p, l)) in live.iter().enumerate() {
            // SAFETY: each block still holds what was written into it.
            let bytes = unsafe { std::slice::from_raw_parts(*p, l.size()) };
            assert!(
                bytes.iter().all(|b| *b == (i % 251) as u8),
                "block {i} changed"
            );
        }
        // Growth keeps the bytes; a freed block of a class comes back for that class.
        let (p, l) = live[3];
        // SAFETY: p was allocated with l; 5000 > l.size().
        let q = unsafe { a.realloc(p, l, 5000) };
        // SAFETY: q has 5000 bytes, the first l.size() copied from p.
        let grown = unsafe { std::slice::from_raw_parts(q, l.size()) };
        assert!(grown.iter().all(|b| *b == 3));
        let big = Layout::from_size_align(5000, l.align()).unwrap();
        // SAFETY: q is live with layout `big`.
        unsafe { a.dealloc(q, big) };
        // SAFETY: a valid layout of the same class as `big`.
        let again = unsafe { a.alloc(Layout::from_size_align(6000, 1).unwrap()) };
        assert_eq!(again, q);
        // A freed block that is not the newest goes on its class's list and comes back next.
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: valid layouts; each block freed once with its own layout.
        unsafe {
            let x = a.alloc(small);
            let y = a.alloc(small);
            a.dealloc(x, small);
            assert_eq!(a.alloc(small), x);
            // The newest block grows where it is, and keeps its bytes.
            y.write(7);
            let z = a.realloc(y, small, 3000);
            assert_eq!(z, y);
            assert_eq!(z.read(), 7);
            a.dealloc(z, Layout::from_size_align(3000, 8).unwrap());
            a.dealloc(x, small);
        }
        // Above the largest class: musl's.
        let huge = Layout::from_size_align(MAX * 2, 8).unwrap();
        // SAFETY: valid layout; freed with the same.
        unsafe {
            let h = a.alloc(huge);
            assert!(!h.is_null());
            a.dealloc(h, huge);
        }
    }
}
