//! Overlapping a kernel wait with other work in a plugin: one job on a thread of its own
//! ([`spawn`], over the pthread wrapper [`spawn_raw`]). The dhcp daemon, which is no plugin,
//! uses std's threads.
//!
//! Deleting a link returns only after the kernel has waited for an RCU grace period
//! (`rcu_barrier()` in `netdev_run_todo`, 10–20 ms, most of a DEL). Work that does not depend
//! on the deletion (netfilter teardown, which has grace periods of its own) runs meanwhile on
//! the calling thread, so the waits overlap instead of adding up. Plain pthreads: std's threads
//! bring about 12 KB of machinery (names, spawn hooks, stack-overflow handlers) not needed here.

use std::ffi::c_void;

/// What a thread runs.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A joinable thread from [`spawn_raw`].
pub struct Thread(libc::pthread_t);

// SAFETY: a pthread_t is a plain handle; joining it from another thread is allowed.
unsafe impl Send for Thread {}

impl Thread {
    /// Wait for the thread to end.
    pub fn join(self) {
        // SAFETY: a joinable thread, joined once (`self` is consumed).
        unsafe { libc::pthread_join(self.0, std::ptr::null_mut()) };
    }
}

/// Run `job` on a new thread with `stack` bytes of stack: `Some` joinable thread, or `None`
/// when `detached`. What [`spawn`]'s overlap runs on.
///
/// # Safety
/// Whatever `job` borrows through raw pointers must outlive the thread.
unsafe fn spawn_raw(job: Job, stack: usize, detached: bool) -> std::io::Result<Option<Thread>> {
    extern "C" fn start(p: *mut c_void) -> *mut c_void {
        // SAFETY: `p` is the box `spawn_raw` leaked for this thread, taken back once, here.
        let job = unsafe { Box::from_raw(p.cast::<Job>()) };
        job();
        std::ptr::null_mut()
    }
    let p = Box::into_raw(Box::new(job));
    // SAFETY: the attribute object is initialised before use and destroyed after; `p` goes to
    // the new thread, or is taken back when there is none.
    unsafe {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        libc::pthread_attr_init(attr.as_mut_ptr());
        libc::pthread_attr_setstacksize(attr.as_mut_ptr(), stack);
        if detached {
            libc::pthread_attr_setdetachstate(attr.as_mut_ptr(), libc::PTHREAD_CREATE_DETACHED);
        }
        let mut t: libc::pthread_t = std::mem::zeroed();
        let r = libc::pthread_create(&mut t, attr.as_ptr(), start, p.cast());
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        if r != 0 {
            drop(Box::from_raw(p));
            return Err(std::io::Error::from_raw_os_error(r));
        }
        Ok((!detached).then_some(Thread(t)))
    }
}

/// A job started by [`spawn`]; [`Pending::wait`] takes its result. Dropping it waits too (the
/// thread uses memory the value owns).
pub struct Pending<T> {
    thread: Option<Thread>,
    slot: Box<Slot<T>>,
}

struct Slot<T> {
    job: Option<Box<dyn FnOnce() -> T + Send>>,
    out: Option<T>,
}

impl<T> Slot<T> {
    fn run(&mut self) {
        if let Some(job) = self.job.take() {
            self.out = Some(job());
        }
    }
}

/// Start `job` on a new thread; when no thread can be made, it runs here and now instead, so
/// the caller never needs a second code path.
pub fn spawn<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    start(job, true)
}

/// Run `job` here and now, for a caller that has nothing to overlap it with (a thread would
/// only cost its creation).
pub fn here<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    start(job, false)
}

fn start<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static, thread: bool) -> Pending<T> {
    let mut slot = Box::new(Slot {
        job: Some(Box::new(job) as Box<dyn FnOnce() -> T + Send>),
        out: None,
    });
    let thread = if thread { new_thread(&mut slot) } else { None };
    if thread.is_none() {
        slot.run();
    }
    Pending { thread, slot }
}

/// A thread running `slot`'s job, or None when none can be made.
fn new_thread<T: 'static>(slot: &mut Slot<T>) -> Option<Thread> {
    struct SlotPtr<T>(*mut Slot<T>);
    // SAFETY: the slot is only touched by the new thread until `Pending` joins it.
    unsafe impl<T> Send for SlotPtr<T> {}
    let p = SlotPtr(slot);
    let job: Job = Box::new(move || {
        let p = p;
        // SAFETY: `p` points to the slot that `start` boxed; its `Pending` joins this thread
        // before the box is freed or read, so this is the only access meanwhile.
        unsafe { (*p.0).run() }
    });
    // SAFETY: the job only borrows the slot, which `Pending` keeps alive until it joins.
    unsafe { spawn_raw(job, 256 << 10, false) }.ok().flatten()
}

impl<T> Pending<T> {
    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            t.join();
        }
    }

    /// Wait for the job and return what it returned (None only if it never ran, which
    /// cannot happen: a panic aborts the process).
    pub fn wait(mut self) -> Option<T> {
        self.join();
        self.slot.out.take()
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_another_thread_and_returns() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        // SAFETY: as above.
        let p = spawn(move || (unsafe { libc::gettid() }, 42));
        let (tid, v) = p.wait().unwrap();
        assert_ne!(tid, me);
        assert_eq!(v, 42);
    }

    #[test]
    fn here_runs_on_this_thread() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        // SAFETY: as above.
        assert_eq!(here(move || unsafe { libc::gettid() }).wait(), Some(me));
    }

    #[test]
    fn dropping_waits_for_the_job() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        drop(spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            d.store(true, Ordering::SeqCst);
        }));
        assert!(done.load(Ordering::SeqCst));
    }
}
