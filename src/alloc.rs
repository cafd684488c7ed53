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
//! Alignment: blocks are cut one after another, so a block is aligned only to 16 (every class
//! size is a multiple of 16 and every region starts on a page), not to its class size. That is
//! enough because [`Classes::class`] hands every request aligned to more than 16 to musl.
//!
//! One spin lock guards it: plugins are single-threaded but for a short helper thread
//! (src/overlap.rs), and the daemon's threads allocate rarely.
//!
//! A long-lived process calls [`use_system`] first thing: the dhcp daemon lives for months,
//! and memory on free lists is never given back, so a burst (a hostile peer's stream, many
//! calls at once) would stay in its RSS for good. From then on every new block is musl's,
//! which returns emptied groups and large blocks to the kernel; blocks carved before stay
//! ours until freed (a pointer is ours when it lies in one of the regions recorded at
//! carving; the regions are few by then, since the switch comes before the work).

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
/// Regions recorded (for [`use_system`]'s ownership test); a process that carved more than
/// this before the switch stays on its classes.
const REGIONS: usize = 64;

/// Set by [`use_system`]: allocators switch to musl at their next allocation.
static SYSTEM: AtomicBool = AtomicBool::new(false);

/// From now on, new blocks come from musl's allocator, which gives memory back: for a
/// process that lives long (the dhcp daemon), never for a plugin (whose speed the classes
/// are for). Irreversible.
pub fn use_system() {
    SYSTEM.store(true, Ordering::Relaxed);
}

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
    /// Where each region carved so far starts (its length: FIRST for the .bss one, else NEXT).
    regions: [(usize, usize); REGIONS],
    carved: usize,
    /// Every new block is musl's ([`use_system`]).
    system: bool,
}

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; FIRST]>);
// SAFETY: the arena's bytes are reached only as blocks carved by the one allocator that claimed
// it (ARENA_TAKEN), under that allocator's lock; each block is then its holder's alone.
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
                regions: [(0, 0); REGIONS],
                carved: 0,
                system: false,
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
        // SAFETY: the lock is held (acquired above, released by the store below), so this is the
        // only reference to the state, and it cannot outlive `f`'s call.
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
    /// The block is 16-aligned and no more: regions start page-aligned and the cursor only
    /// ever moves by class sizes, which are multiples of 16.
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
            if let Some(r) = self.regions.get_mut(self.carved) {
                *r = (base, len);
            }
            self.carved += 1;
            self.next = base;
            self.end = base + len;
            at = base;
        }
        self.next = at + size;
        at as *mut u8
    }

    /// Whether new blocks are musl's: switched on at the first allocation after
    /// [`use_system`], unless more regions were carved than recorded (ownership would be
    /// unknown).
    fn system(&mut self) -> bool {
        if !self.system && self.carved <= REGIONS && SYSTEM.load(Ordering::Relaxed) {
            self.system = true;
        }
        self.system
    }

    /// Whether `p` is a block of ours: always before the switch to musl, after it when it lies
    /// in a region carved before.
    fn owns(&self, p: *mut u8) -> bool {
        let p = p as usize;
        !self.system
            || self.regions[..self.carved.min(REGIONS)]
                .iter()
                .any(|(base, len)| (*base..base + len).contains(&p))
    }
}

// SAFETY: a block of ours is handed out only for a layout `Classes::class` accepted, so
// `layout.align()` ≤ 16 and `layout.size()` ≤ its class size. Every block is 16-aligned (regions
// start page-aligned, the cursor moves by class sizes, all multiples of 16; see `carve`), so it
// meets that alignment; it is NOT aligned to its class size, which is why `class` sends every
// request aligned to more than 16 to musl. Blocks never overlap: each is carved once from the
// unused part of a region, and after `dealloc` it either goes back to that unused part (only if
// it is the last one carved) or onto its class's free list, from which it is handed out again
// for the same class only. All of it is under the one lock (`with`). Every other request, and
// every pointer whose layout `class` rejects, is musl's, forwarded unchanged. After the switch
// to musl (`State::system`, never undone) every new block is musl's, and a pointer is ours
// exactly when it lies in a region carved before (`owns`: the regions are all recorded, or the
// switch does not happen); blocks are never carved after it, so the regions do not change.
unsafe impl GlobalAlloc for Classes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = Self::class(layout) else {
            // SAFETY: the caller's layout (non-zero size), forwarded unchanged.
            return unsafe { System.alloc(layout) };
        };
        let ours = self.with(|s| {
            if s.system() {
                return None;
            }
            let head = s.free[c];
            Some(if head.is_null() {
                s.carve(MIN << c)
            } else {
                // SAFETY: `head` is a block on this class's free list, put there by `dealloc`,
                // which wrote the next free block (or null) into its first, 16-aligned word.
                s.free[c] = unsafe { (head as *mut *mut u8).read() };
                head
            })
        });
        match ours {
            Some(p) => p,
            // SAFETY: the caller's layout (non-zero size), forwarded unchanged.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = Self::class(layout) else {
            // SAFETY: `class` is a function of the layout alone, so a layout it rejects now was
            // rejected at allocation too: the block came from System.alloc with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        };
        let ours = self.with(|s| {
            if !s.owns(ptr) {
                return false;
            }
            if ptr as usize + (MIN << c) == s.next {
                // The last block carved: the region takes it back for any class.
                s.next = ptr as usize;
            } else {
                // SAFETY: the caller gives back a live block of ours of class `c`: at least 16
                // bytes, 16-aligned, and no longer used by anyone, so its first word is ours to
                // hold the list's next pointer.
                unsafe { (ptr as *mut *mut u8).write(s.free[c]) };
                s.free[c] = ptr;
            }
            true
        });
        if !ours {
            // SAFETY: not in a region of ours, so made by System.alloc (after `use_system`)
            // with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: realloc's contract: `new_size` is non-zero and, rounded up to `layout.align()`
        // (a power of two from a valid layout), does not overflow isize.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let (from, to) = (Self::class(layout), Self::class(new));
        // Before any `use_system` every block of a class is ours: no lock taken to ask.
        if from.is_some() && SYSTEM.load(Ordering::Relaxed) && !self.with(|s| s.owns(ptr)) {
            // SAFETY: not in a region of ours, so musl's (made after `use_system`), forwarded
            // with the caller's layout and size unchanged.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
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
            // SAFETY: `ptr` is musl's (`class` rejected its layout, so System.alloc made it),
            // forwarded with the caller's layout and size unchanged.
            (None, None) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY: `new` is a valid layout (above); `to` is a fresh block of at least
                // `new_size` bytes that cannot overlap the caller's live block `ptr`, of which
                // the first min(old, new) bytes are copied before `ptr` is freed, once, with
                // the layout it was allocated with.
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

    impl Classes {
        /// [`use_system`] for this allocator alone (the flag is the process's).
        fn switch(&self) {
            self.with(|s| s.system = s.carved <= REGIONS);
        }
    }

    /// After the switch new blocks are musl's (outside every region), old ones still ours:
    /// each freed and grown by its owner, bytes kept across growth either way.
    #[test]
    fn after_the_switch_blocks_are_musls_and_old_ones_still_ours() {
        let a = Classes::new();
        let l = |n| Layout::from_size_align(n, 8).unwrap();
        // SAFETY: valid non-zero layouts.
        let old: Vec<*mut u8> = (0..100).map(|i| unsafe { a.alloc(l(16 + i)) }).collect();
        a.switch();
        // SAFETY: valid non-zero layouts.
        let new: Vec<*mut u8> = (0..100).map(|i| unsafe { a.alloc(l(16 + i)) }).collect();
        a.with(|s| {
            assert!(s.system);
            s.system = false;
            for p in &new {
                let inside = s.regions[..s.carved]
                    .iter()
                    .any(|(b, n)| (*b..b + n).contains(&(*p as usize)));
                assert!(!inside);
            }
            s.system = true;
            assert!(old.iter().all(|p| s.owns(*p)));
            assert!(!new.iter().any(|p| s.owns(*p)));
        });
        for (i, p) in old.iter().chain(&new).enumerate() {
            let n = 16 + i % 100;
            // SAFETY: `p` is a live block of `a` of layout `l(n)`, written within its size,
            // grown once and freed once with the layout it then has.
            unsafe {
                p.write_bytes(7, n);
                let q = a.realloc(*p, l(n), 5000);
                assert!(std::slice::from_raw_parts(q, n).iter().all(|b| *b == 7));
                a.dealloc(q, l(5000));
            }
        }
    }

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

    /// A block of every class, at every alignment up to a page, is aligned: ≤ 16 by the
    /// classes (the cursor is put off any larger boundary first), above 16 by musl.
    #[test]
    fn every_class_and_alignment_is_aligned() {
        let a = Classes::new();
        let odd = Layout::from_size_align(16, 1).unwrap();
        let mut live = Vec::new();
        for c in 0..=CLASSES {
            let size = MIN << c; // the last is above the largest class
            for size in [size / 2 + 1, size] {
                for shift in 0..=12 {
                    let align = 1usize << shift;
                    let layout = Layout::from_size_align(size, align).unwrap();
                    // SAFETY: valid non-zero layouts; every block is freed below with its own.
                    unsafe {
                        // A 16-byte block first, so that the cursor sits on an odd multiple of 16.
                        live.push((a.alloc(odd), odd));
                        let p = a.alloc(layout);
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "size {size} align {align}");
                        std::ptr::write_bytes(p, 0xa5, size);
                        // Growing keeps the alignment too, within a class, across classes, and
                        // out of the classes to musl.
                        let q = a.realloc(p, layout, size * 3);
                        assert!(!q.is_null());
                        assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                        assert_eq!(q.add(size - 1).read(), 0xa5);
                        live.push((q, Layout::from_size_align(size * 3, align).unwrap()));
                    }
                }
            }
        }
        for (p, l) in live {
            // SAFETY: each block once, with the layout it was last (re)allocated with.
            unsafe { a.dealloc(p, l) };
        }
    }

    /// Threads allocating, growing, shrinking and freeing at once (the dhcp daemon's threads,
    /// a DEL's overlap thread), some blocks freed by another thread than the one that made
    /// them: no block is handed out twice, and every block keeps its bytes.
    #[test]
    fn threads_allocate_and_free_concurrently() {
        const THREADS: usize = 8;
        const ROUNDS: usize = 40_000;
        let a = Classes::new();
        // Every block holds a window of one byte pattern, at an offset its stamp (thread,
        // serial) picks: blocks mixed up, overlapping or shifted do not compare equal. (Slice
        // copies and compares keep the unoptimised test fast.)
        let pattern: Vec<u8> = (0..2 * MAX + 256)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let window = |len: usize, stamp: usize| &pattern[stamp % 251..][..len];
        let fill = |p: *mut u8, len: usize, stamp: usize| {
            // SAFETY: p has len bytes, owned by this block's holder.
            unsafe { std::slice::from_raw_parts_mut(p, len) }.copy_from_slice(window(len, stamp));
        };
        let check = |p: *const u8, len: usize, stamp: usize| {
            // SAFETY: as in `fill`.
            let got = unsafe { std::slice::from_raw_parts(p, len) };
            assert!(
                got == window(len, stamp),
                "block {stamp:#x} of {len} bytes changed"
            );
        };
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS)
            .map(|_| std::sync::mpsc::channel::<(usize, Layout, usize)>())
            .unzip();
        let start = std::sync::Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for (t, rx) in rxs.into_iter().enumerate() {
                let (a, tx) = (&a, txs[(t + 1) % THREADS].clone());
                let start = &start;
                scope.spawn(move || {
                    // All at once, for the most contention.
                    start.wait();
                    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64 + 1);
                    let mut next = || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng as usize
                    };
                    let mut live: Vec<(*mut u8, Layout, usize)> = Vec::new();
                    for serial in 0..ROUNDS {
                        // Thread in the high bits, round below (ROUNDS < 2^20): distinct on 32-bit too.
                        let stamp = t << 20 | serial;
                        // Blocks handed over by the previous thread: check, then free them.
                        while let Ok((p, l, st)) = rx.try_recv() {
                            check(p as *const u8, l.size(), st);
                            // SAFETY: the sender allocated it with `l` and gave it up.
                            unsafe { a.dealloc(p as *mut u8, l) };
                        }
                        match next() % 8 {
                            0..=3 => {
                                // Mostly small, some above the largest class (musl's).
                                let size = 1 + next() % [48, 48, 48, 600, 2 * MAX][next() % 5];
                                let l = Layout::from_size_align(size, 1 << (next() % 6)).unwrap();
                                // SAFETY: a valid non-zero layout.
                                let p = unsafe { a.alloc(l) };
                                assert!(!p.is_null());
                                assert_eq!(p as usize % l.align(), 0);
                                fill(p, size, stamp);
                                live.push((p, l, stamp));
                            }
                            4 | 5 if !live.is_empty() => {
                                let i = next() % live.len();
                                let (p, l, st) = live.swap_remove(i);
                                check(p, l.size(), st);
                                if next() % 4 == 0 {
                                    let _ = tx.send((p as usize, l, st));
                                } else {
                                    // SAFETY: allocated with `l`, freed once.
                                    unsafe { a.dealloc(p, l) };
                                }
                            }
                            6 | 7 if !live.is_empty() => {
                                let i = next() % live.len();
                                let (p, l, st) = live[i];
                                let size = 1 + next() % [48, 300, 3000][next() % 3];
                                // SAFETY: p is live with `l`; `size` is non-zero.
                                let q = unsafe { a.realloc(p, l, size) };
                                assert!(!q.is_null());
                                check(q, l.size().min(size), st);
                                fill(q, size, stamp);
                                let l = Layout::from_size_align(size, l.align()).unwrap();
                                live[i] = (q, l, stamp);
                            }
                            _ => {}
                        }
                    }
                    for (p, l, st) in live {
                        check(p, l.size(), st);
                        // SAFETY: allocated with `l`, freed once.
                        unsafe { a.dealloc(p, l) };
                    }
                    drop(tx);
                    // What the previous thread still hands over, until it is done.
                    for (p, l, st) in rx {
                        check(p as *const u8, l.size(), st);
                        // SAFETY: as above.
                        unsafe { a.dealloc(p as *mut u8, l) };
                    }
                });
            }
            drop(txs);
        });
    }
}
