//! Readiness waits: poll a condition until it holds or a generous limit passes. Nothing here
//! sleeps for a fixed time before looking; the pause between polls only spaces the polls out
//! (10 ms, doubling to 200 ms), so a wait ends soon after the condition holds however loaded the
//! machine is, and the limit only decides when to give up. Test files use these instead of their
//! own deadline loops (`tests/testkit.rs` checks).

use std::fmt::Display;
use std::time::{Duration, Instant};

/// The longest pause between two polls.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Poll `ready` until it gives `Some` (returned) or `limit` has passed (`None`). It is polled at
/// least once, and once more after the limit.
pub fn poll<T>(limit: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(10);
    loop {
        if let Some(v) = ready() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return ready();
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Whether `ready` holds within `limit` (see [`poll`]).
pub fn eventually(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    poll(limit, || ready().then_some(())).is_some()
}

/// [`poll`], failing the test with `what` when `limit` passes.
#[track_caller]
pub fn wait_for<T>(what: impl Display, limit: Duration, ready: impl FnMut() -> Option<T>) -> T {
    match poll(limit, ready) {
        Some(v) => v,
        None => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// [`eventually`], failing the test with `what` when `limit` passes.
#[track_caller]
pub fn wait_until(what: impl Display, limit: Duration, ready: impl FnMut() -> bool) {
    assert!(
        eventually(limit, ready),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Retry `f` until it gives `Ok`, for at most `limit`; fails the test with its last error.
#[track_caller]
pub fn retry<T>(
    what: impl Display,
    limit: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let mut last = String::new();
    let got = poll(limit, || match f() {
        Ok(v) => Some(v),
        Err(e) => {
            last = e;
            None
        }
    });
    match got {
        Some(v) => v,
        None => panic!("{what}: still failing after {limit:?}: {last}"),
    }
}

/// Seconds, for the limits above.
pub const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// [`wait_until`] with what `why` says (a log, a state dump) in the failure message, read only
/// when the wait fails.
#[track_caller]
pub fn wait_until_or(
    what: impl Display,
    limit: Duration,
    ready: impl FnMut() -> bool,
    why: impl FnOnce() -> String,
) {
    if !eventually(limit, ready) {
        panic!("timed out after {limit:?} waiting for {what}\n{}", why());
    }
}

/// [`wait_until`] where `wake` blocks until something may have changed (an `ip monitor` that
/// ends on the next event, with its own short timeout) instead of pausing between polls.
#[track_caller]
pub fn wait_until_woken(
    what: impl Display,
    limit: Duration,
    mut ready: impl FnMut() -> bool,
    mut wake: impl FnMut(),
) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        wake();
    }
}
