//! The opt-in per-call log: with `CNIBOX_LOG=PATH` set (a runtime's environment, or kubelet's /
//! containerd's), each plugin process appends one JSON line to PATH when it ends:
//! `{"time":…,"applet":…,"verb":…,"containerID":…,"netns":…,"ifname":…,"us":…,"result":…}`
//! (`result`: ADD's result, compact, or "ok"), or `"error":{"code":…,"msg":…}` instead of
//! `result`. Runtimes show only the last error of a plugin; this shows every call.
//!
//! It never blocks nor fails a call: the file is opened O_APPEND|O_NONBLOCK (a FIFO nobody
//! reads, or a full one, is skipped), the line goes out in one write(2) whose error is ignored
//! (a full disk loses the line, not the call), and no error of the log reaches the runtime.
//! Bounded: a file past [`MAX`] bytes is renamed to PATH.1 (replacing the older one) and PATH
//! starts again, so the log never holds more than about twice that. Unset (the default), it
//! costs one environment lookup.

use super::env::Env;
use super::error::{Error, Result, bounded};
use serde_json::Value;
use std::ffi::OsString;
use std::time::Instant;

const VAR: &str = "CNIBOX_LOG";
/// The size past which the log is rotated.
const MAX: u64 = 4 << 20;

pub(crate) struct Call {
    start: Instant,
    path: OsString,
    line: String,
}

/// `None` when the log is off.
pub(crate) fn start(applet: &str) -> Option<Call> {
    let path = std::env::var_os(VAR).filter(|p| !p.is_empty())?;
    let line = format!(r#"{{"time":"{}","applet":{}"#, utc_now(), quote(applet));
    Some(Call {
        start: Instant::now(),
        path,
        line,
    })
}

fn quote(s: &str) -> Value {
    Value::String(s.to_string())
}

impl Call {
    pub(crate) fn env(&mut self, env: &Env) {
        self.line += &format!(
            r#","verb":"{}","containerID":{},"netns":{},"ifname":{}"#,
            env.command.as_str(),
            quote(&env.container_id),
            quote(&env.netns),
            quote(&env.ifname)
        );
    }

    /// Appends the line for this call's outcome. Every error here is dropped on purpose.
    pub(crate) fn finish(mut self, out: &Result<Option<String>>) {
        use std::io::Write as _;
        let took = self.start.elapsed();
        let us = took.as_secs() * 1_000_000 + u64::from(took.subsec_micros());
        let outcome = match out {
            Ok(Some(text)) => {
                let v = serde_json::from_slice::<Value>(text.as_bytes()).unwrap_or(Value::Null);
                format!(r#""result":{v}"#)
            }
            Ok(None) => r#""result":"ok""#.to_string(),
            Err(Error { code, msg, .. }) => {
                format!(
                    r#""error":{{"code":{code},"msg":{}}}"#,
                    quote(&bounded(msg))
                )
            }
        };
        self.line += &format!(r#","us":{us},{outcome}}}"#);
        self.line.push('\n');
        let Some(mut f) = open(&self.path) else {
            return;
        };
        if f.metadata().is_ok_and(|m| m.is_file() && m.len() >= MAX) {
            let mut old = self.path.clone();
            old.push(".1");
            if std::fs::rename(&self.path, &old).is_ok() {
                f = open(&self.path).unwrap_or(f);
            }
        }
        // One write(2), never retried: with O_APPEND concurrent plugins' lines stay whole.
        let _ = f.write(self.line.as_bytes());
    }
}

fn open(path: &OsString) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()
}

fn utc_now() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    utc(d.as_secs(), d.subsec_millis())
}

/// RFC 3339 in UTC, milliseconds (days to a civil date: H. Hinnant's algorithm).
fn utc(secs: u64, ms: u32) -> String {
    let (days, s) = (secs / 86400, secs % 86400);
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let (h, m, s) = (s / 3600, s % 3600 / 60, s % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        for (secs, want) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400, "2000-02-29T00:00:00.000Z"),
            (1_764_108_000, "2025-11-25T22:00:00.000Z"),
            (4_102_444_799, "2099-12-31T23:59:59.000Z"),
        ] {
            assert_eq!(super::utc(secs, 0), want);
        }
        assert_eq!(super::utc(59, 7), "1970-01-01T00:00:59.007Z");
    }
}
