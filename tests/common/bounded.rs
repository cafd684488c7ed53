//! Child processes with a deadline: a test of something that could hang (a plugin blocked in
//! open(2), a daemon that never answers, a process that ignores SIGTERM) fails after a bound
//! and kills what it started, instead of hanging CI.

use super::Output;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Wait for `child` for at most `limit`: `None` if it is still running then (it is left
/// running: the caller decides, usually [`kill_and_reap`] and fail).
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
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
/// at most `limit`. `Err` (after killing it) when it ran longer, with what it printed so far.
pub fn exec_within(
    program: &Path,
    args: &[&str],
    vars: &[(&str, &str)],
    stdin: &str,
    limit: Duration,
) -> Result<Output, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = std::env::var_os("PATH") {
        cmd.env("PATH", p);
    }
    cmd.envs(vars.iter().copied());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    // Readers and the writer on threads of their own, so a full pipe or a child that never
    // reads stdin cannot block the deadline.
    let input = stdin.to_string();
    let mut i = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        // A plugin may exit without reading stdin: ignore EPIPE.
        let _ = i.write_all(input.as_bytes());
    });
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("stdout")));
    let err = reader(Box::new(child.stderr.take().expect("stderr")));
    let status = wait_within(&mut child, limit);
    if status.is_none() {
        let reaped = kill_and_reap(&mut child);
        let _ = writer.join();
        let (o, e) = (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        );
        return Err(format!(
            "{} {args:?} still running after {limit:?}, killed ({reaped:?})\n\
             --- stdout ---\n{o}\n--- stderr ---\n{e}",
            program.display()
        ));
    }
    let status = status.expect("status");
    let _ = writer.join();
    let stdout = out.join().unwrap_or_default();
    Ok(Output {
        status_ok: status.success(),
        code: status.code(),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
        stderr: err.join().unwrap_or_default(),
    })
}
