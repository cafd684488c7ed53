//! The daemon's leases on disk, so that a restarted daemon resumes keeping them (upstream's
//! forgets them: every pod's lease then lapses unrenewed). One file per lease in the directory
//! `<socket path>.leases` (`/run/cni/dhcp.sock.leases`: /run is a tmpfs, so they go with a
//! reboot, as the pods' namespaces do), named by a hash of the attachment and written whole
//! (a temporary file renamed), holding the call that made it, the last DHCPACK and when it came:
//!
//! ```text
//! {"call": {"op":"add","containerID":…}, "ack": "0201…", "at": 1764110000}
//! ```
//! A lease whose namespace or interface is gone when the daemon starts is dropped.
//!
//! The daemon touches only what it wrote: a record is a regular file named by the hash of the
//! attachment it holds (name and content agree), its temporary the same name with `.tmp` and
//! a record's start. Anything else in the directory (a file of someone else's, a FIFO, a
//! sub-directory, a symlink) is left alone with a line on stderr. The directory is made 0700;
//! one that is a symlink (or no directory) is refused at start, and every file in it is
//! reached through the directory's descriptor without following symlinks (openat, renameat,
//! unlinkat with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW).

use super::packet::Msg;
use super::proto::Call;
use crate::ipam::lease_record;
use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::json;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

pub(super) struct Store {
    dir: String,
    fd: OwnedFd,
}

/// A lease read back: its call, its last ACK and how long ago that came.
pub(super) struct Saved {
    pub call: Call,
    pub ack: Msg,
    pub age: Duration,
}

/// A record's file name: 32 hex digits of the SHA-512 of the attachment `name`.
fn file_name(name: &str) -> String {
    crate::hash::sha512_hex(name.as_bytes(), 32)
}

/// The start of what [`Store::save`] writes (its first key: serde_json orders them, by name
/// or as written), whole or cut short.
fn record_start(b: &[u8]) -> bool {
    b.starts_with(br#"{"ack":""#) || b.starts_with(br#"{"call":{"#)
}

impl Store {
    /// The records of the daemon on `socket`: `<socket>.leases`, made 0700 if absent; refused
    /// when it is a symlink or no directory.
    pub fn open(socket: &str) -> Result<Store, String> {
        let dir = format!("{socket}.leases");
        let refuse = |why: &str| format!("lease directory {dir}: {why}");
        let cwd = nix::fcntl::AT_FDCWD;
        match mkdirat(cwd, dir.as_str(), Mode::S_IRWXU) {
            Ok(()) | Err(Errno::EEXIST) => {}
            Err(e) => return Err(refuse(&e.to_string())),
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match openat(cwd, dir.as_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            // O_DIRECTORY|O_NOFOLLOW on a symlink: ENOTDIR (or ELOOP); say which it is.
            Err(Errno::ENOTDIR | Errno::ELOOP) => {
                let st = fstatat(cwd, dir.as_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
                let link = st.is_ok_and(|st| {
                    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
                });
                return Err(refuse(if link {
                    "a symlink; refusing to follow it (the daemon's lease records need a directory of their own)"
                } else {
                    "not a directory"
                }));
            }
            Err(e) => return Err(refuse(&e.to_string())),
        };
        Ok(Store { dir, fd })
    }

    /// Record the lease `name` made by `call`, acknowledged by `ack` just now.
    pub fn save(&self, name: &str, call: &Call, ack: &Msg) {
        let hex: String = ack.encode().iter().map(|b| format!("{b:02x}")).collect();
        let v = json!({"call": call.to_json(), "ack": hex, "at": lease_record::now()});
        let f = file_name(name);
        let tmp = format!("{f}.tmp");
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_CLOEXEC;
        let r = openat(
            self.fd.as_fd(),
            tmp.as_str(),
            flags,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .map_err(std::io::Error::from)
        .and_then(|fd| std::fs::File::from(fd).write_all(v.to_string().as_bytes()))
        .and_then(|()| {
            renameat(self.fd.as_fd(), tmp.as_str(), self.fd.as_fd(), f.as_str())
                .map_err(std::io::Error::from)
        });
        if let Err(e) = r {
            let at = format!("{}/{f}", self.dir);
            super::lease::log(name, &format!("cannot record the lease in {at}: {e}"));
        }
    }

    /// Remove the record of lease `name`, if it is one (a regular file holding that lease).
    pub fn remove(&self, name: &str) {
        let f = file_name(name);
        if self.read(&f).is_some_and(|b| parse_for(&f, &b).is_some()) {
            let _ = unlinkat(self.fd.as_fd(), f.as_str(), UnlinkatFlags::NoRemoveDir);
        }
    }

    /// The bytes of regular file `f` of the directory (never through a symlink); `None` for
    /// anything else.
    fn read(&self, f: &str) -> Option<Vec<u8>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let st = fstatat(self.fd.as_fd(), f, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return None;
        }
        let fd = openat(self.fd.as_fd(), f, flags, Mode::empty()).ok()?;
        let mut b = Vec::new();
        std::fs::File::from(fd)
            .take(lease_record::MAX_RECORD)
            .read_to_end(&mut b)
            .ok()?;
        Some(b)
    }

    /// The leases recorded, each file read once. A temporary of a record is removed; anything
    /// that is not a record of this daemon is left alone, with a line on stderr.
    pub fn load(&self) -> Vec<Saved> {
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let alone = |n: &str, why: &str| {
            crate::warn!(
                "dhcp daemon: {}/{n}: {why}, not a lease record of this daemon: left alone",
                self.dir
            );
        };
        for e in dir.flatten() {
            let Some(n) = e.file_name().to_str().map(str::to_owned) else {
                alone(&e.file_name().to_string_lossy(), "a name that is not UTF-8");
                continue;
            };
            let tmp = n.strip_suffix(".tmp");
            if !lease_record::record_shaped(tmp.unwrap_or(&n)) {
                alone(&n, "not named like one");
                continue;
            }
            let Some(b) = self.read(&n) else {
                alone(&n, "not a regular file");
                continue;
            };
            // A record half written when the daemon was killed: its previous one is whole.
            if tmp.is_some() {
                if record_start(&b) {
                    let _ = unlinkat(self.fd.as_fd(), n.as_str(), UnlinkatFlags::NoRemoveDir);
                } else {
                    alone(&n, "not the start of a record");
                }
                continue;
            }
            match parse_for(&n, &b) {
                Some(s) => out.push(s),
                None => alone(&n, "its content is not a record of that name"),
            }
        }
        out
    }
}

/// The record in `b` when it is the one file `f` holds: the hash of its attachment is `f`.
fn parse_for(f: &str, b: &[u8]) -> Option<Saved> {
    let s = parse(b)?;
    let c = &s.call;
    let name = format!("{}/{}/{}", c.container_id, c.network, c.ifname);
    (file_name(&name) == f).then_some(s)
}

/// A record's bytes as the daemon reads them back (the envelope is `ipam::lease_record`'s): the call,
/// a whole ACK and its time, all present.
fn parse(b: &[u8]) -> Option<Saved> {
    let r = lease_record::parse(b)?;
    Some(Saved {
        call: Call::from_json(&r.call).ok()?,
        ack: Msg::decode(&r.ack()?)?,
        age: lease_record::age(r.at?),
    })
}

#[cfg(test)]
mod tests {
    use super::super::packet::{ACK, Msg};
    use super::super::proto::{Call, Op};
    use super::{Store, file_name, parse};

    /// A record reads back as written and is removed by its lease's name; a half-written
    /// temporary of a record goes; what is not a record of this daemon stays: bad JSON under
    /// a record's name, a record under another record's name, a foreign name, a foreign
    /// temporary, a directory, a symlink.
    #[test]
    fn records_round_trip_and_only_records_go() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cnibox-dhcp-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("dhcp.sock").display().to_string();
        let s = Store::open(&sock).unwrap();
        let leases = format!("{sock}.leases");
        let mode = std::fs::metadata(&leases).unwrap().permissions().mode();
        assert_eq!(mode & 0o7777, 0o700);
        let call = Call {
            op: Op::Add,
            container_id: "c".into(),
            network: "n".into(),
            netns: "/run/netns/c".into(),
            ifname: "eth0".into(),
            options: vec![(12, "h".into())],
            ..Call::default()
        };
        let mut ack = Msg::request(ACK, 7, [2, 0, 0, 0, 0, 1]);
        ack.yiaddr = "10.0.0.5".parse().unwrap();
        s.save("c/n/eth0", &call, &ack);
        let mine = file_name("c/n/eth0");
        let record = std::fs::read(format!("{leases}/{mine}")).unwrap();
        let other = file_name("d/n/eth0");
        let foreign: Vec<(String, Vec<u8>)> = vec![
            (file_name("x/n/eth0"), b"{".to_vec()),
            (other.clone(), record.clone()),
            ("notes".into(), b"{}".to_vec()),
            ("x.tmp".into(), b"{}".to_vec()),
            (format!("{}.tmp", file_name("y/n/eth0")), b"hello".to_vec()),
        ];
        for (name, text) in &foreign {
            std::fs::write(format!("{leases}/{name}"), text).unwrap();
        }
        let half = format!("{leases}/{}.tmp", file_name("z/n/eth0"));
        std::fs::write(&half, &record[..10]).unwrap();
        std::fs::create_dir(format!("{leases}/{}", file_name("sub"))).unwrap();
        std::os::unix::fs::symlink(
            format!("{leases}/{mine}"),
            format!("{leases}/{}", file_name("l")),
        )
        .unwrap();
        let got = s.load();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].ack, ack);
        assert_eq!(format!("{:?}", got[0].call), format!("{call:?}"));
        assert!(got[0].age.as_secs() < 5);
        assert!(!std::path::Path::new(&half).exists());
        for (name, text) in &foreign {
            assert_eq!(&std::fs::read(format!("{leases}/{name}")).unwrap(), text);
        }
        assert!(parse(br#"{"call": {}, "ack": "zz", "at": 1}"#).is_none());
        s.remove("c/n/eth0");
        s.remove("d/n/eth0"); // the copy under d's name holds c's lease: not d's record
        assert!(!std::path::Path::new(&format!("{leases}/{mine}")).exists());
        assert_eq!(
            std::fs::read_dir(&leases).unwrap().count(),
            foreign.len() + 2
        );
        // A lease directory that is a symlink is refused.
        let link = dir.join("l.sock");
        std::os::unix::fs::symlink(&leases, format!("{}.leases", link.display())).unwrap();
        let e = Store::open(&link.display().to_string()).err().unwrap();
        assert!(e.contains("symlink"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
