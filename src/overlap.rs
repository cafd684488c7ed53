//! Overlapping a kernel wait with other work in a plugin: one job on a thread of its own
//! ([`spawn`], a `std::thread` with a 256 KiB stack), or here and now ([`here`]) when there is
//! nothing to overlap it with.
//!
//! Deleting a link returns only after the kernel has waited for an RCU grace period
//! (`rcu_barrier()` in `netdev_run_todo`, 10-20 ms, most of a DEL). Work that does not depend
//! on the deletion (netfilter teardown, which has grace periods of its own) runs meanwhile on
//! the calling thread, so the waits overlap instead of adding up. (A DEL no longer waits for
//! that barrier at all: `NlSocket::request_until` leaves it to a child process; the thread
//! still overlaps the deletion's own synchronisation with the teardown.)
//!
//! std's threads, not raw pthreads: the dhcp daemon links them anyway, and measured against
//! the pthread wrapper this file had (issue 36 item 2) they cost 1,416 bytes of the static
//! binary (release build: 1,241,360 bytes with pthreads, 1,242,776 with std's threads).

use std::sync::{Arc, Mutex};
use std::thread::{Builder, JoinHandle};

/// The job of a [`Pending`], shared with its thread so that it can still run here when no
/// thread could be made.
type Shared<F> = Arc<Mutex<Option<F>>>;

/// A job started by [`spawn`]; [`Pending::wait`] takes its result. Dropping it waits too, as
/// the pthread version did (callers rely on the work being done when it goes).
pub struct Pending<T> {
    thread: Option<JoinHandle<Option<T>>>,
    out: Option<T>,
}

/// Start `job` on a new thread; when no thread can be made, it runs here and now instead, so
/// the caller never needs a second code path.
pub fn spawn<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    let shared: Shared<_> = Arc::new(Mutex::new(Some(job)));
    let theirs = Arc::clone(&shared);
    let started = Builder::new()
        .stack_size(256 << 10)
        .spawn(move || take(&theirs).map(|job| job()));
    match started {
        Ok(thread) => Pending {
            thread: Some(thread),
            out: None,
        },
        // The closure (and its clone of `shared`) is gone: the job is still in `shared`.
        Err(_) => Pending {
            thread: None,
            out: take(&shared).map(|job| job()),
        },
    }
}

/// Run `job` here and now, for a caller that has nothing to overlap it with (a thread would
/// only cost its creation).
pub fn here<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Pending<T> {
    Pending {
        thread: None,
        out: Some(job()),
    }
}

/// The job, taken once (a poisoned lock cannot happen: a panic aborts the process).
fn take<F>(shared: &Shared<F>) -> Option<F> {
    shared.lock().ok().and_then(|mut g| g.take())
}

impl<T> Pending<T> {
    fn join(&mut self) {
        if let Some(t) = self.thread.take() {
            self.out = t.join().ok().flatten();
        }
    }

    /// Wait for the job and return what it returned (None only if it never ran, which
    /// cannot happen: a panic aborts the process).
    pub fn wait(mut self) -> Option<T> {
        self.join();
        self.out.take()
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
