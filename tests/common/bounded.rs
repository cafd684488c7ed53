//! Child processes with a deadline: a test of something that could hang (a plugin blocked in
//! open(2), a daemon that never answers, a process that ignores SIGTERM) fails after a bound
//! and kills what it started, instead of hanging CI.

use super::{Output, exec_unchecked, with_deadline};
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Wait for `child` for at most `limit`: `None` if it is still running then (it is left
/// running: the caller decides, usually [`kill_and_reap`] and fail).
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    wait_within_polling(child, limit, Duration::from_millis(10))
}

/// [`wait_within`], looking every `pause` (1 ms where thousands of short runs are reaped, as in
/// the fuzzer).
pub fn wait_within_polling(
    child: &mut Child,
    limit: Duration,
    pause: Duration,
) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(pause),
            Ok(None) => return None,
            Err(e) => panic!("wait for pid {}: {e}", child.id()),
        }
    }
}

/// SIGKILL `child` and reap it, checked: a child that does not end within 10 s of SIGKILL
/// (stuck in the kernel) is reported, not waited for forever. `Err` says what went wrong.
pub fn kill_and_reap(child: &mut Child) -> Result<ExitStatus, String> {
    // Already reaped or exited: kill is a no-op then (std returns Ok for an exited child).
    if let Err(e) = child.kill() {
        return Err(format!("kill pid {}: {e}", child.id()));
    }
    wait_within(child, Duration::from_secs(10))
        .ok_or_else(|| format!("pid {} still running 10 s after SIGKILL", child.id()))
}

/// Run `program` with a clean environment (PATH kept) plus `vars`, `stdin` as its input, for
/// at most `limit`: [`super::exec`] under [`super::with_deadline`]. `Err` (after killing it)
/// when it ran longer, with what it printed so far; any other crash fails the test as in
/// [`super::exec`].
#[track_caller]
pub fn exec_within(
    program: &Path,
    args: &[&str],
    vars: &[(&str, &str)],
    stdin: &str,
    limit: Duration,
) -> Result<Output, String> {
    let out = with_deadline(limit, || exec_unchecked(program, args, vars, stdin));
    if out.timed_out() {
        return Err(format!(
            "{} {args:?} still running after {limit:?}, killed\n\
             --- stdout ---\n{}\n--- stderr ---\n{}",
            program.display(),
            out.stdout,
            out.stderr
        ));
    }
    if let Some(why) = out.crash() {
        panic!("{} {args:?} crashed: {why}\n{out:?}", program.display());
    }
    Ok(out)
}

/// Let `child` run for `delay`, then SIGKILL and reap it: `true` when it was still running (the
/// kill landed), `false` when it had ended by itself. For fault injection, where the delay is
/// the point of the test, not a wait for readiness.
pub fn kill_after(child: &mut Child, delay: Duration) -> bool {
    let end = Instant::now() + delay;
    while Instant::now() < end {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    true
}
