//! The daemon's leases on disk, so that a restarted daemon resumes keeping them (upstream's
//! forgets them: every pod's lease then lapses unrenewed). One file per lease in the directory
//! `<socket path>.leases` (`/run/cni/dhcp.sock.leases`: /run is a tmpfs, so they go with a
//! reboot, as the pods' namespaces do), named by a hash of the attachment and written whole
//! (a temporary file renamed), holding the call that made it, the last DHCPACK and when it came:
//!
//! ```text
//! {"call": {"op":"add","containerID":…}, "ack": "0201…", "at": 1764110000}
//! ```
//! A file that cannot be read back is removed with a log line; a lease whose namespace or
//! interface is gone when the daemon starts is dropped.

use super::packet::Msg;
use super::proto::Call;
use serde_json::{Value, json};
use std::os::unix::fs::DirBuilderExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) struct Store {
    dir: String,
}

/// A lease read back: its call, its last ACK and how long ago that came.
pub(super) struct Saved {
    pub call: Call,
    pub ack: Msg,
    pub age: Duration,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Store {
    pub fn new(socket: &str) -> Store {
        Store {
            dir: format!("{socket}.leases"),
        }
    }

    fn file(&self, name: &str) -> String {
        format!(
            "{}/{}",
            self.dir,
            crate::hash::sha512_hex(name.as_bytes(), 32)
        )
    }

    /// Record the lease `name` made by `call`, acknowledged by `ack` just now.
    pub fn save(&self, name: &str, call: &Call, ack: &Msg) {
        let hex: String = ack.encode().iter().map(|b| format!("{b:02x}")).collect();
        let v = json!({"call": call.to_json(), "ack": hex, "at": now()});
        let (f, tmp) = (self.file(name), format!("{}.tmp", self.file(name)));
        let r = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .and_then(|()| std::fs::write(&tmp, v.to_string()))
            .and_then(|()| std::fs::rename(&tmp, &f));
        if let Err(e) = r {
            super::lease::log(name, &format!("cannot record the lease in {f}: {e}"));
        }
    }

    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.file(name));
    }

    /// The leases recorded, each file read once; unreadable ones are removed.
    pub fn load(&self) -> Vec<Saved> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in dir.flatten() {
            let p = e.path();
            // A record half written when the daemon was killed: its previous one is whole.
            if p.extension().is_some_and(|x| x == "tmp") {
                let _ = std::fs::remove_file(&p);
                continue;
            }
            let read = std::fs::read(&p).ok().and_then(|b| parse(&b));
            match read {
                Some(s) => out.push(s),
                None => {
                    crate::warn!("dhcp daemon: {}: not a lease record, removed", p.display());
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
        out
    }
}

fn parse(b: &[u8]) -> Option<Saved> {
    let v: Value = serde_json::from_slice(b).ok()?;
    let call = Call::from_json(v.get("call")?)?;
    let hex = v.get("ack")?.as_str()?;
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let at = v.get("at")?.as_u64()?;
    Some(Saved {
        call,
        ack: Msg::decode(&bytes)?,
        age: Duration::from_secs(now().saturating_sub(at)),
    })
}

#[cfg(test)]
mod tests {
    use super::super::packet::{ACK, Msg};
    use super::super::proto::Call;
    use super::{Store, parse};

    /// A record reads back as written; a broken one (bad JSON, odd hex, a short ACK, a
    /// half-written temporary) is removed when loading, a whole one kept.
    #[test]
    fn records_round_trip_and_broken_ones_go() {
        let dir = std::env::temp_dir().join(format!("cnibox-dhcp-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let sock = dir.join("dhcp.sock").display().to_string();
        let s = Store::new(&sock);
        let call = Call {
            op: "add".into(),
            container_id: "c".into(),
            netns: "/run/netns/c".into(),
            ifname: "eth0".into(),
            options: vec![(12, "h".into())],
            ..Call::default()
        };
        let mut ack = Msg::request(ACK, 7, [2, 0, 0, 0, 0, 1]);
        ack.yiaddr = "10.0.0.5".parse().unwrap();
        s.save("c/n/eth0", &call, &ack);
        let leases = format!("{sock}.leases");
        for (name, text) in [
            ("a", "{"),
            ("b", r#"{"call": {}, "ack": "0", "at": 1}"#),
            ("c", r#"{"call": {}, "ack": "0201", "at": 1}"#),
            ("d.tmp", "{}"),
        ] {
            std::fs::write(format!("{leases}/{name}"), text).unwrap();
        }
        let got = s.load();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].ack, ack);
        assert_eq!(format!("{:?}", got[0].call), format!("{call:?}"));
        assert!(got[0].age.as_secs() < 5);
        assert_eq!(std::fs::read_dir(&leases).unwrap().count(), 1);
        assert!(parse(br#"{"call": {}, "ack": "zz", "at": 1}"#).is_none());
        s.remove("c/n/eth0");
        assert_eq!(std::fs::read_dir(&leases).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
