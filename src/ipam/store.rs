//! host-local's on-disk reservations, byte-compatible with upstream so a node can switch
//! between the Go plugin and cnibox with containers running:
//!
//! ```text
//! <dataDir>/<network>/<ip>                  "<containerID>\r\n<ifname>" (0600, O_EXCL)
//! <dataDir>/<network>/last_reserved_ip.<n>  the last address reserved in range set n
//! <dataDir>/<network>/lock                  flock(LOCK_EX) serialises every operation
//! ```
//!
//! Upstream walks and reads every reservation on each ADD (duplicate check) and DEL, so both
//! cost O(reservations). cnibox keeps an owner index beside the store,
//! `<dataDir>/.cnibox/<network>/<containerID>:<ifname>` listing that owner's addresses (legacy
//! reservations holding only a container ID are indexed under `<containerID>`), which makes ADD
//! and DEL O(1). The index is only trusted while the network directory's mtime equals the
//! index directory's: after each operation both are set to a sentinel one second in the past.
//! Anything else touching the store (the Go plugin, an admin's `rm`, a crash halfway) creates or
//! removes a file, which stamps the directory with the current time, so the next operation sees
//! the mismatch and rebuilds the index from the reservations themselves.

use super::canonical;
use crate::cni::{Context, Error, Result};
use std::collections::BTreeMap;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{ErrorKind, Write};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// Who holds a reservation: `(containerID, Some(ifname))`, or `(containerID, None)` for files
/// written by host-local before it recorded interface names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Owner {
    pub container_id: String,
    pub ifname: Option<String>,
}

impl Owner {
    pub fn new(cid: &str, ifname: &str) -> Owner {
        Owner {
            container_id: cid.trim().to_string(),
            ifname: Some(ifname.to_string()),
        }
    }

    fn legacy(cid: &str) -> Owner {
        Owner {
            container_id: cid.trim().to_string(),
            ifname: None,
        }
    }

    /// Parse a reservation file's content.
    fn from_content(data: &str) -> Option<Owner> {
        let data = data.trim();
        match data.split_once("\r\n") {
            Some((cid, ifname)) => Some(Owner::new(cid, ifname.trim())),
            None if !data.is_empty() => Some(Owner::legacy(data)),
            None => None,
        }
    }

    fn content(&self) -> String {
        match &self.ifname {
            Some(i) => format!("{}\r\n{}", self.container_id, i),
            None => self.container_id.clone(),
        }
    }

    fn key(&self) -> String {
        match &self.ifname {
            Some(i) => format!("{}:{}", self.container_id, i),
            None => self.container_id.clone(),
        }
    }

    fn from_key(key: &str) -> Owner {
        match key.split_once(':') {
            Some((cid, ifname)) => Owner::new(cid, ifname),
            None => Owner::legacy(key),
        }
    }
}

/// The store of one network, locked for as long as it is open.
pub struct Store {
    dir: PathBuf,
    index: PathBuf,
    _lock: File,
    dirty: bool,
}

impl Store {
    /// Open (creating when `create`) and lock `<data_dir>/<network>`. `Ok(None)` when it does
    /// not exist and `create` is false: nothing was ever reserved there.
    pub fn open(data_dir: &Path, network: &str, create: bool) -> Result<Option<Store>> {
        if network.is_empty() || network.contains('/') || network == "." || network == ".." {
            return Err(Error::config(format!(
                "invalid network name {network:?}: it would escape dataDir"
            )));
        }
        let dir = data_dir.join(network);
        if create {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&dir)
                .ctx(format_args!("create {}", dir.display()))?;
        } else if !dir.is_dir() {
            return Ok(None);
        }
        let lock_path = dir.join("lock");
        let lock = OpenOptions::new()
            .read(true)
            .write(false)
            .create(false)
            .open(&lock_path)
            .or_else(|_| {
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o750)
                    .open(&lock_path)
            })
            .ctx(format_args!("open {}", lock_path.display()))?;
        lock_exclusive(&lock, &lock_path)?;
        let index = data_dir.join(".cnibox").join(network);
        let mut store = Store {
            dir,
            index,
            _lock: lock,
            dirty: false,
        };
        if !store.index_is_current() {
            store.rebuild_index()?;
        }
        Ok(Some(store))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn index_is_current(&self) -> bool {
        match (fs::metadata(&self.dir), fs::metadata(&self.index)) {
            (Ok(d), Ok(i)) => d.mtime() == i.mtime() && d.mtime_nsec() == i.mtime_nsec(),
            _ => false,
        }
    }

    /// Rebuild the owner index from the reservation files (O(n), only after foreign changes).
    fn rebuild_index(&mut self) -> Result<()> {
        let mut owners: BTreeMap<Owner, Vec<IpAddr>> = BTreeMap::new();
        for (ip, path) in self.reservation_files()? {
            if let Some(owner) = fs::read_to_string(&path)
                .ok()
                .and_then(|d| Owner::from_content(&d))
            {
                owners.entry(owner).or_default().push(ip);
            }
        }
        match fs::remove_dir_all(&self.index) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(Error::io(
                    format_args!("remove {}", self.index.display()),
                    e,
                ));
            }
            _ => {}
        }
        fs::create_dir_all(&self.index).ctx(format_args!("create {}", self.index.display()))?;
        for (owner, ips) in &owners {
            self.write_entry(owner, ips)?;
        }
        self.dirty = true;
        Ok(())
    }

    /// Every `<ip>` file of the network directory (other names are skipped).
    pub fn reservation_files(&self) -> Result<Vec<(IpAddr, PathBuf)>> {
        let rd = fs::read_dir(&self.dir).ctx(format_args!("read {}", self.dir.display()))?;
        Ok(rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let ip: IpAddr = name.parse().ok()?;
                (ip.to_string() == name).then(|| (ip, e.path()))
            })
            .collect())
    }

    fn entry_path(&self, owner: &Owner) -> PathBuf {
        self.index.join(owner.key())
    }

    fn read_entry(&self, owner: &Owner) -> Vec<IpAddr> {
        fs::read_to_string(self.entry_path(owner))
            .map(|s| s.lines().filter_map(|l| l.parse().ok()).collect())
            .unwrap_or_default()
    }

    fn write_entry(&self, owner: &Owner, ips: &[IpAddr]) -> Result<()> {
        let path = self.entry_path(owner);
        if ips.is_empty() {
            return match fs::remove_file(&path) {
                Err(e) if e.kind() != ErrorKind::NotFound => {
                    Err(Error::io(format_args!("remove {}", path.display()), e))
                }
                _ => Ok(()),
            };
        }
        let text: String = ips.iter().map(|ip| format!("{ip}\n")).collect();
        fs::write(&path, text).ctx(format_args!("write {}", path.display()))
    }

    /// Reserve `ip` for `owner` if it is free; record it as range set `set`'s last reservation.
    pub fn reserve(&mut self, ip: IpAddr, owner: &Owner, set: usize) -> Result<bool> {
        let ip = canonical(ip);
        let path = self.dir.join(ip.to_string());
        let mut f = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(Error::io(format_args!("reserve {}", path.display()), e)),
        };
        self.dirty = true;
        if let Err(e) = f.write_all(owner.content().as_bytes()) {
            // An empty reservation file would leak the address forever (upstream issue #498).
            let _ = fs::remove_file(&path);
            return Err(Error::io(format_args!("write {}", path.display()), e));
        }
        drop(f);
        let last = self.dir.join(format!("last_reserved_ip.{set}"));
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&last)
            .and_then(|mut f| f.write_all(ip.to_string().as_bytes()))
            .ctx(format_args!("write {}", last.display()))?;
        let mut ips = self.read_entry(owner);
        ips.push(ip);
        self.write_entry(owner, &ips)?;
        Ok(true)
    }

    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        fs::read_to_string(self.dir.join(format!("last_reserved_ip.{set}")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Addresses held by `owner` (exact owner; legacy entries are not included).
    pub fn owned_by(&self, owner: &Owner) -> Vec<IpAddr> {
        self.read_entry(owner)
    }

    /// Release everything `(cid, ifname)` holds; if it holds nothing, release what a legacy
    /// reservation under `cid` alone holds, as upstream's DEL does. Returns the count released.
    pub fn release(&mut self, cid: &str, ifname: &str) -> Result<usize> {
        let n = self.release_owner(&Owner::new(cid, ifname))?;
        if n > 0 {
            return Ok(n);
        }
        self.release_owner(&Owner::legacy(cid))
    }

    /// Release the reservations of exactly `owner`, checking each file still names it.
    pub fn release_owner(&mut self, owner: &Owner) -> Result<usize> {
        let ips = self.read_entry(owner);
        if ips.is_empty() {
            return Ok(0);
        }
        let mut released = 0;
        let mut errors = Vec::new();
        for ip in &ips {
            let path = self.dir.join(ip.to_string());
            let holder = fs::read_to_string(&path)
                .ok()
                .and_then(|d| Owner::from_content(&d));
            if holder.as_ref() != Some(owner) {
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => released += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => errors.push(format!("release {}: {e}", path.display())),
            }
        }
        self.dirty = true;
        self.write_entry(owner, &[])?;
        if errors.is_empty() {
            Ok(released)
        } else {
            Err(Error::internal(errors.join("; ")))
        }
    }

    /// Release one address if `owner` holds it (rollback of a partial ADD).
    pub fn release_ip(&mut self, ip: IpAddr, owner: &Owner) -> Result<()> {
        let path = self.dir.join(ip.to_string());
        let holder = fs::read_to_string(&path)
            .ok()
            .and_then(|d| Owner::from_content(&d));
        if holder.as_ref() == Some(owner) {
            fs::remove_file(&path).ctx(format_args!("release {}", path.display()))?;
            self.dirty = true;
        }
        let ips: Vec<IpAddr> = self
            .read_entry(owner)
            .into_iter()
            .filter(|i| *i != ip)
            .collect();
        self.write_entry(owner, &ips)
    }

    /// Every owner in the index with its addresses (GC).
    pub fn owners(&self) -> Result<Vec<(Owner, Vec<IpAddr>)>> {
        let rd = fs::read_dir(&self.index).ctx(format_args!("read {}", self.index.display()))?;
        Ok(rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .map(|key| {
                let owner = Owner::from_key(&key);
                let ips = self.read_entry(&owner);
                (owner, ips)
            })
            .collect())
    }

    /// Remove reservation files that name no owner (left by failed writes of old versions).
    pub fn remove_orphans(&mut self) -> Result<usize> {
        let mut n = 0;
        for (_, path) in self.reservation_files()? {
            if fs::read_to_string(&path).is_ok_and(|d| d.trim().is_empty())
                && fs::remove_file(&path).is_ok()
            {
                n += 1;
                self.dirty = true;
            }
        }
        Ok(n)
    }

    /// Stamp the index and the network directory with the same sentinel time (index first, so
    /// a crash in between still reads as "stale").
    fn seal(&self) -> std::io::Result<()> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let t =
            SystemTime::UNIX_EPOCH + Duration::new(now.as_secs().saturating_sub(1), 777_777_777);
        let times = FileTimes::new().set_modified(t).set_accessed(t);
        File::open(&self.index)?.set_times(times)?;
        File::open(&self.dir)?.set_times(times)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.dirty
            && let Err(e) = self.seal()
        {
            // Not fatal: the next operation rebuilds the index.
            eprintln!(
                "host-local: could not seal index of {}: {e}",
                self.dir.display()
            );
        }
    }
}

/// flock(LOCK_EX) with a bounded wait: a lock held for a minute is reported as code 11.
fn lock_exclusive(f: &File, path: &Path) -> Result<()> {
    let deadline = Instant::now() + LOCK_WAIT;
    let mut pause = Duration::from_micros(100);
    loop {
        // SAFETY: flock on a descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) && err.kind() != ErrorKind::Interrupted {
            return Err(Error::io(format_args!("lock {}", path.display()), err));
        }
        if Instant::now() >= deadline {
            return Err(Error::try_again(format!(
                "timed out waiting for lock {}",
                path.display()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("cnibox-store-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        p
    }

    #[test]
    fn reserve_release_and_formats() {
        let d = tmp("basic");
        let o = Owner::new("c1", "eth0");
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        {
            let mut s = Store::open(&d, "net", true).unwrap().unwrap();
            assert!(s.reserve(ip, &o, 0).unwrap());
            assert!(!s.reserve(ip, &Owner::new("c2", "eth0"), 0).unwrap());
            assert_eq!(s.owned_by(&o), vec![ip]);
        }
        assert_eq!(fs::read(d.join("net/10.0.0.2")).unwrap(), b"c1\r\neth0");
        assert_eq!(
            fs::read(d.join("net/last_reserved_ip.0")).unwrap(),
            b"10.0.0.2"
        );
        assert_eq!(
            fs::metadata(d.join("net/10.0.0.2")).unwrap().mode() & 0o777,
            0o600
        );
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert_eq!(s.release("c1", "eth0").unwrap(), 1);
        assert_eq!(s.release("c1", "eth0").unwrap(), 0);
        assert!(!d.join("net/10.0.0.2").exists());
        drop(s);
        assert!(Store::open(&d, "other", false).unwrap().is_none());
        assert!(Store::open(&d, "..", true).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn foreign_changes_are_noticed() {
        let d = tmp("foreign");
        drop(Store::open(&d, "net", true).unwrap());
        // Another host-local (or a person) writes reservations, including a legacy one.
        fs::write(d.join("net/10.0.0.7"), "c9\r\neth1").unwrap();
        fs::write(d.join("net/10.0.0.8"), "old").unwrap();
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert_eq!(
            s.owned_by(&Owner::new("c9", "eth1")),
            vec!["10.0.0.7".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            s.release("old", "eth0").unwrap(),
            1,
            "legacy reservation released by container ID"
        );
        drop(s);
        fs::remove_file(d.join("net/10.0.0.7")).unwrap();
        let s = Store::open(&d, "net", false).unwrap().unwrap();
        assert!(s.owned_by(&Owner::new("c9", "eth1")).is_empty());
        drop(s);
        fs::remove_dir_all(&d).unwrap();
    }
}
