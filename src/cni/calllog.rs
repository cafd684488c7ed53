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
use serde::Serialize;
use serde_json::Value;
use std::ffi::OsString;
use std::time::Instant;

const VAR: &str = "CNIBOX_LOG";
/// The size past which the log is rotated.
const MAX: u64 = 4 << 20;

pub(crate) struct Call {
    start: Instant,
    path: OsString,
    line: Line,
}

/// One line of the log, its keys in this order; the attachment's only once the environment
/// was read, the outcome's one of `result` and `error`.
#[derive(Serialize)]
struct Line {
    time: String,
    applet: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    verb: Option<&'static str>,
    #[serde(rename = "containerID", skip_serializing_if = "Option::is_none")]
    container_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    netns: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ifname: Option<String>,
    us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failed>,
}

#[derive(Serialize)]
struct Failed {
    code: u32,
    msg: String,
}

/// `None` when the log is off.
pub(crate) fn start(applet: &str) -> Option<Call> {
    let path = std::env::var_os(VAR).filter(|p| !p.is_empty())?;
    let line = Line {
        time: utc_now(),
        applet: applet.to_string(),
        verb: None,
        container_id: None,
        netns: None,
        ifname: None,
        us: 0,
        result: None,
        error: None,
    };
    Some(Call {
        start: Instant::now(),
        path,
        line,
    })
}

impl Call {
    pub(crate) fn env(&mut self, env: &Env) {
        self.line.verb = Some(env.command.as_str());
        self.line.container_id = Some(env.container_id.clone());
        self.line.netns = Some(env.netns.clone());
        self.line.ifname = Some(env.ifname.clone());
    }

    /// Appends the line for this call's outcome. Every error here is dropped on purpose.
    pub(crate) fn finish(mut self, out: &Result<Option<String>>) {
        use std::io::Write as _;
        let took = self.start.elapsed();
        self.line.us = took.as_secs() * 1_000_000 + u64::from(took.subsec_micros());
        match out {
            Ok(Some(text)) => {
                let v = serde_json::from_slice::<Value>(text.as_bytes()).unwrap_or(Value::Null);
                self.line.result = Some(v);
            }
            Ok(None) => self.line.result = Some(Value::String("ok".into())),
            Err(Error { code, msg, .. }) => {
                self.line.error = Some(Failed {
                    code: *code,
                    msg: bounded(msg),
                });
            }
        }
        let Ok(mut line) = serde_json::to_string(&self.line) else {
            return;
        };
        line.push('\n');
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
        let _ = f.write(line.as_bytes());
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
