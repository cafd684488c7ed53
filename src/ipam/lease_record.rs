//! The dhcp daemon's lease record on disk, as a file's bytes: what `applets/dhcp/store.rs`
//! writes and reads back, and what the doctor (`doctor/survey.rs`) reads without knowing the
//! applet's types. One regular file named by 32 hex digits holding
//!
//! ```text
//! {"ack": "<hex DHCPACK>", "at": <unix s>, "call": {"op":"add","containerID":…}}
//! ```
//! Here only the envelope: the call stays JSON (the applet decodes it into its `Call`), the ACK
//! stays hex (decoded whole by the applet, its yiaddr alone by the doctor).

use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest record read back (a call's config and an ACK).
pub const MAX_RECORD: u64 = 4 << 20;

/// A record's envelope: `call` present, `ack` (a string) and `at` as found, checked by who
/// needs them.
pub struct Record {
    pub call: Value,
    ack: Option<String>,
    pub at: Option<u64>,
}

/// Seconds since the epoch, now (0 before it).
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// How long ago `at` (seconds since the epoch) was.
pub fn age(at: u64) -> Duration {
    Duration::from_secs(now().saturating_sub(at))
}

/// The envelope in `b`: a JSON object with a `call`; `None` for anything else.
pub fn parse(b: &[u8]) -> Option<Record> {
    let mut v: Value = serde_json::from_slice(b).ok()?;
    let call = v.get_mut("call")?.take();
    let ack = v.get("ack").and_then(Value::as_str).map(String::from);
    let at = v.get("at").and_then(Value::as_u64);
    Some(Record { call, ack, at })
}

/// Whether `name` has a record's shape: 32 lower-case hex digits, as the daemon names them
/// (so the doctor judges exactly the files the daemon would read).
pub fn record_shaped(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The record at `path`, when its name has a record's shape ([`record_shaped`]) and it is a
/// regular file (no symlink followed, no FIFO waited on) of at most [`MAX_RECORD`] bytes.
pub fn peek(path: &Path) -> Option<Record> {
    if !record_shaped(path.file_name()?.to_str()?) {
        return None;
    }
    let b = crate::smallfile::read_nofollow(path.to_str()?, MAX_RECORD).ok()?;
    parse(&b)
}

impl Record {
    /// Byte `i` of the ACK.
    fn ack_byte(&self, i: usize) -> Option<u8> {
        let h = self.ack.as_ref()?.get(2 * i..2 * i + 2)?;
        u8::from_str_radix(h, 16).ok()
    }

    /// The ACK's bytes, when `ack` is a string of whole hex.
    pub fn ack(&self) -> Option<Vec<u8>> {
        let len = self.ack.as_ref()?.len();
        (0..len.div_ceil(2)).map(|i| self.ack_byte(i)).collect()
    }

    /// The ACK's yiaddr (bytes 16..20), read alone: the rest of the ACK may be anything.
    pub fn yiaddr(&self) -> Option<Ipv4Addr> {
        let o = (16..20)
            .map(|i| self.ack_byte(i))
            .collect::<Option<Vec<u8>>>()?;
        Some(Ipv4Addr::new(o[0], o[1], o[2], o[3]))
    }

    /// The call's string field `k`, "" when absent.
    pub fn call_field(&self, k: &str) -> String {
        self.call
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{age, parse, peek};
    use std::net::Ipv4Addr;

    /// The envelope: call required; ack and at as found; the yiaddr read alone.
    #[test]
    fn envelope_reads_as_written() {
        let mut ack = vec![0u8; 24];
        ack[16..20].copy_from_slice(&[10, 1, 0, 5]);
        let hex: String = ack.iter().map(|b| format!("{b:02x}")).collect();
        let b = format!(r#"{{"ack":"{hex}","at":1,"call":{{"containerID":"c","ifName":"eth0"}}}}"#);
        let r = parse(b.as_bytes()).unwrap();
        assert_eq!(r.ack(), Some(ack));
        assert_eq!(r.yiaddr(), Some(Ipv4Addr::new(10, 1, 0, 5)));
        assert_eq!(r.call_field("containerID"), "c");
        assert_eq!(r.call_field("network"), "");
        assert_eq!(r.at, Some(1));
        assert!(age(1).as_secs() > 1_000_000);
        assert!(parse(br#"{"ack":"00"}"#).is_none());
        assert!(parse(b"{").is_none());
        let r = parse(br#"{"call":{},"ack":"zz"}"#).unwrap();
        assert_eq!((r.ack(), r.yiaddr(), r.at), (None, None, None));
        assert_eq!(parse(br#"{"call":{},"ack":"abc"}"#).unwrap().ack(), None);
    }

    /// Only a regular file named like a record is one; a symlink to one is not.
    #[test]
    fn peek_reads_only_records() {
        let dir = std::env::temp_dir().join(format!("cnibox-lease-peek-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let name = "0123456789abcdef0123456789abcdef";
        let rec = dir.join(name);
        std::fs::write(&rec, r#"{"call":{"network":"n"}}"#).unwrap();
        assert_eq!(peek(&rec).unwrap().call_field("network"), "n");
        let other = dir.join("notes");
        std::fs::write(&other, r#"{"call":{}}"#).unwrap();
        assert!(peek(&other).is_none());
        let link = dir.join("fedcba9876543210fedcba9876543210");
        std::os::unix::fs::symlink(&rec, &link).unwrap();
        assert!(peek(&link).is_none());
        let sub = dir.join("00000000000000000000000000000000");
        std::fs::create_dir(&sub).unwrap();
        assert!(peek(&sub).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
