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
//! `<dataDir>/.cnibox/<network>/<containerID>:<ifname>` (a hash of it when too long for a file
//! name) listing that owner's addresses, which makes ADD and DEL O(1). The index is a hint
//! that can only make things faster, never wrong:
//!
//! - every address it lists is checked against the reservation file before it is released or
//!   reported; an entry that is damaged (each carries a checksum), names another owner or lists
//!   an address that is not the owner's makes that lookup scan the reservations instead (and
//!   a DEL that meets such an entry rebuilds the whole index, since it may be wrong about
//!   other owners too);
//! - an absent entry is trusted only while the store is *sealed*: after each operation both
//!   directories get a sentinel modification time in the past and
//!   `<dataDir>/.cnibox/.sealed/<network>` records what the filesystem stored (with each
//!   directory's inode and change time, which nobody can set). Anyone creating or
//!   removing a file since (the Go plugin, an admin's `rm`) moves a directory to the current
//!   time; the stamp no longer matches and the next operation rebuilds the index by a scan. The
//!   stamp is emptied before the first change of an operation and rewritten in place at its
//!   end (a torn write matches nothing), so a crash at any instant leaves the store unsealed. The one change no O(1) check can see is a reservation rewritten in
//!   place (same file, another owner's bytes), which no plugin does (Go's host-local only
//!   creates with O_EXCL and removes): until the index entry of the file's former owner is
//!   used, or the next scan, the new owner's DEL finds nothing;
//! - the owner's entry lists an address before its reservation exists, so no crash leaves a
//!   reservation the index does not know; entries are rewritten in place (a torn one fails
//!   its checksum, and the crash that tore it left the store unsealed), a rebuild writes them
//!   to a temporary file and renames it (the temporary name is fixed per target, `.tmp-<name>`,
//!   and only used under the lock, so one left by a killed process is replaced by the next
//!   write instead of piling up); `last_reserved_ip.N` is rewritten in place with upstream's
//!   bytes (torn by a crash, it reads as "none" or as another start for the next search: a
//!   hint either way); small files are written over their old bytes and cut to length, never
//!   truncated to zero first (ext4 writes such a file out on close);
//! - a reservation appears with its content in one step (a complete temporary file link(2)ed
//!   into place: atomic, and exclusive), so no empty or half-written reservation is ever
//!   visible (upstream #498), and any failure after it (a full disk writing
//!   `last_reserved_ip.N`) removes it again. Index writes are best effort: when one fails the
//!   store answers from scans and stays unsealed.

mod files;
mod index;
#[cfg(test)]
mod tests;

use super::canonical;
use crate::error::{Context, Error, Result};
use crate::undo::ErrorList;
use files::{LITTER, discard, not_found_ok, tmp_path, write_in_place, write_tmp};
use std::fs::TryLockError;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    stamp: PathBuf,
    /// `<dataDir>/.cnibox/.collected/<network>`: written by each GC; its mtime is when the
    /// runtime last confirmed every reservation then present (see [`Store::confirmed_by_gc`]).
    collected: PathBuf,
    _lock: File,
    /// The stamp has been removed in this session (the store is being changed).
    unsealed: bool,
    /// An index write failed: answer from scans and leave the store unsealed, so the next
    /// operation rebuilds.
    broken: bool,
    /// Scans of the network directory in this session (the unit tests check that the common
    /// case makes none).
    scans: std::cell::Cell<u32>,
}

/// How an owner's entry is named: its key, or a hash of it when the key is too long for a
/// file name (Go's host-local writes owners of any length).
const MAX_ENTRY_NAME: usize = 200;

impl Store {
    /// Open (creating when `create`) and lock `<data_dir>/<network>`. `Ok(None)` when it does
    /// not exist and `create` is false: nothing was ever reserved there.
    pub fn open(data_dir: &Path, network: &str, create: bool) -> Result<Option<Store>> {
        if network.is_empty()
            || network.contains('/')
            || network.starts_with('.')
            || network.contains('\0')
        {
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
        let meta = data_dir.join(".cnibox");
        let mut store = Store {
            dir,
            index: meta.join(network),
            stamp: meta.join(".sealed").join(network),
            collected: meta.join(".collected").join(network),
            _lock: lock,
            unsealed: false,
            broken: false,
            scans: Default::default(),
        };
        if !store.is_sealed() {
            store.rebuild_index()?;
        }
        Ok(Some(store))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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

    /// Reserve `ip` for `owner` if it is free; record it as range set `set`'s last reservation.
    ///
    /// The owner's index entry lists the address before the reservation exists (so no crash
    /// can leave a reservation the index does not know), and the reservation appears with its
    /// content in one step: a complete temporary file is link(2)ed into place, which is atomic
    /// and fails if the address is taken. Any failure after that removes the reservation.
    pub fn reserve(&mut self, ip: IpAddr, owner: &Owner, set: usize) -> Result<bool> {
        let ip = canonical(ip);
        let path = self.dir.join(ip.to_string());
        if fs::symlink_metadata(&path).is_ok() {
            return Ok(false);
        }
        self.unseal()?;
        let listed = self.listed(owner);
        if !listed.contains(&ip) {
            let mut ips = listed.clone();
            ips.push(ip);
            self.write_entry(owner, &ips);
        }
        let created = self.create_reservation(&path, owner);
        if !matches!(created, Ok(true)) {
            self.write_entry(owner, &listed);
            return created;
        }
        let last = self.dir.join(format!("last_reserved_ip.{set}"));
        if let Err(e) = self.record_last(&last, ip) {
            let _ = fs::remove_file(&path);
            self.write_entry(owner, &listed);
            return Err(Error::host_io(format_args!("write {}", last.display()), e));
        }
        Ok(true)
    }

    /// Rewrite `last_reserved_ip.N` in place, with upstream's bytes. A crash or a full disk can
    /// leave it torn: empty or not an address (both plugins read that as "no last address": the
    /// next allocation starts at the range's start), or another address (the next allocation
    /// starts looking after it); either way taken addresses are skipped, as on a new network.
    /// Rewriting in place allocates no inode (ext4's inode allocator was the largest kernel
    /// cost of an ADD with a rename here).
    fn record_last(&self, last: &Path, ip: IpAddr) -> std::io::Result<()> {
        write_in_place(last, ip.to_string().as_bytes())
    }

    /// Link a complete reservation file into place; `Ok(false)` when the address is taken.
    fn create_reservation(&self, path: &Path, owner: &Owner) -> Result<bool> {
        // The temporary file lives in the index (out of the Go plugin's sight); on another
        // filesystem (EXDEV) it is made beside the reservation instead.
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        for dir in [&self.index, &self.dir] {
            let tmp = tmp_path(dir, &name);
            let written = write_tmp(&tmp, owner.content().as_bytes());
            if let Err(e) = written {
                if dir == &self.index {
                    continue;
                }
                return Err(Error::host_io(
                    format_args!("reserve {}", path.display()),
                    e,
                ));
            }
            let linked = fs::hard_link(&tmp, path);
            discard(&tmp);
            match linked {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) && dir == &self.index => continue,
                Err(e) => {
                    return Err(Error::host_io(
                        format_args!("reserve {}", path.display()),
                        e,
                    ));
                }
            }
        }
        Err(Error::internal(format!(
            "reserve {}: no place for a temporary file",
            path.display()
        )))
    }

    /// Record that a GC with the runtime's list of valid attachments has just run: every
    /// reservation left now belongs to an attachment the runtime still has.
    pub fn mark_collected(&self) -> Result<()> {
        if let Some(dir) = self.collected.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .ctx(format_args!("create {}", dir.display()))?;
        }
        // Content, so the write always moves the mtime (an empty rewrite would not).
        write_in_place(&self.collected, b"1")
            .ctx(format_args!("write {}", self.collected.display()))
    }

    /// Whether every reservation in `files` predates the last GC, i.e. the runtime confirmed
    /// each one still in use (false when no GC ever ran here, or an ADD came after it). Both
    /// times come from the same filesystem clock; a reservation in the GC's own clock tick
    /// counts as not confirmed.
    pub fn confirmed_by_gc(&self, files: &[(IpAddr, PathBuf)]) -> bool {
        let Ok(gc) = fs::metadata(&self.collected).and_then(|m| m.modified()) else {
            return false;
        };
        files.iter().all(|(_, p)| {
            fs::symlink_metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t < gc)
        })
    }

    /// What `last_reserved_ip.N` holds (`None`: no such file), for [`Store::restore_last`] and,
    /// through [`parse_last`], where the next allocation starts.
    pub fn last_reserved_raw(&self, set: usize) -> Option<Vec<u8>> {
        fs::read(self.dir.join(format!("last_reserved_ip.{set}"))).ok()
    }

    /// Put `last_reserved_ip.N` back as it was before a reservation moved it (the undo of a
    /// failed ADD: a failed ADD changes nothing, not even where the next allocation starts).
    pub fn restore_last(&mut self, set: usize, prev: Option<&[u8]>) -> Result<()> {
        let last = self.dir.join(format!("last_reserved_ip.{set}"));
        match prev {
            Some(bytes) => write_in_place(&last, bytes),
            None => {
                self.unseal()?;
                not_found_ok(fs::remove_file(&last))
            }
        }
        .ctx(format_args!("restore {}", last.display()))
    }

    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        parse_last(&self.last_reserved_raw(set)?)
    }

    /// Addresses held by exactly `owner`, as the reservation files say. The index only says
    /// where to look: every address it lists is checked against its file, and when the entry
    /// is damaged, lists an address that is not the owner's, or the index is broken, the
    /// reservations are scanned instead.
    pub fn owned_by(&self, owner: &Owner) -> Result<Vec<IpAddr>> {
        match self.verified(owner) {
            Some(ips) => Ok(ips),
            None => Ok(self.scan()?.remove(owner).unwrap_or_default()),
        }
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

    /// Release the reservations of exactly `owner`.
    pub fn release_owner(&mut self, owner: &Owner) -> Result<usize> {
        let ips = match self.verified(owner) {
            Some(ips) => ips,
            None => {
                // The index disagrees with the reservations, so it may be wrong about other
                // owners too (a reservation rewritten in place names an owner the index does
                // not know): rebuild all of it, not only this owner's answer. (Not when it is
                // already known broken: a full disk would fail the rebuild again.)
                if !self.broken {
                    self.rebuild_index()?;
                }
                self.owned_by(owner)?
            }
        };
        let listed = self.read_entry(owner);
        if ips.is_empty() && matches!(listed, Ok(None)) {
            return Ok(0);
        }
        self.unseal()?;
        let mut released = 0;
        let mut errors = ErrorList::new();
        // Addresses that could not be released stay in the entry: the next DEL must find them.
        let mut kept = Vec::new();
        for ip in &ips {
            let path = self.dir.join(ip.to_string());
            match fs::remove_file(&path) {
                Ok(()) => released += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    errors.push(Error::host_io(
                        format_args!("release {}", path.display()),
                        e,
                    ));
                    kept.push(*ip);
                }
            }
        }
        self.write_entry(owner, &kept);
        errors.into_result().map(|()| released)
    }

    /// Release one address if `owner` holds it (rollback of a partial ADD).
    pub fn release_ip(&mut self, ip: IpAddr, owner: &Owner) -> Result<()> {
        self.unseal()?;
        let path = self.dir.join(ip.to_string());
        if holder(&path).as_ref() == Some(owner) {
            fs::remove_file(&path).ctx(format_args!("release {}", path.display()))?;
        }
        let ips: Vec<IpAddr> = self
            .listed(owner)
            .into_iter()
            .filter(|i| *i != ip)
            .collect();
        self.write_entry(owner, &ips);
        Ok(())
    }

    /// Every owner with the addresses it holds (GC): from the index, each entry verified
    /// against the reservations, or from a scan when any entry is damaged or wrong.
    pub fn owners(&self) -> Result<Vec<(Owner, Vec<IpAddr>)>> {
        if !self.broken
            && let Some(owners) = self.owners_from_index()
        {
            return Ok(owners);
        }
        Ok(self.scan()?.into_iter().collect())
    }

    /// Remove reservation files that name no owner (left by failed writes of old versions or
    /// of the Go plugin, upstream issue #498).
    pub fn remove_orphans(&mut self) -> Result<usize> {
        let mut n = 0;
        for (_, path) in self.reservation_files()? {
            if fs::read_to_string(&path).is_ok_and(|d| d.trim().is_empty()) {
                self.unseal()?;
                if fs::remove_file(&path).is_ok() {
                    n += 1;
                }
            }
        }
        Ok(n)
    }
}

/// Who a reservation file names, if it is readable and names anyone.
fn holder(path: &Path) -> Option<Owner> {
    fs::read_to_string(path)
        .ok()
        .and_then(|d| Owner::from_content(&d))
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.unsealed
            && !self.broken
            && !LITTER.load(std::sync::atomic::Ordering::Relaxed)
            && let Err(e) = self.seal()
        {
            // Not fatal: the next operation rebuilds the index.
            crate::warn!(
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
        // std's lock is flock(2) on Linux, the lock Go's host-local takes on the same file.
        match f.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) if e.kind() == ErrorKind::Interrupted => {}
            Err(TryLockError::Error(e)) => {
                return Err(Error::host_io(format_args!("lock {}", path.display()), e));
            }
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

/// The address in `last_reserved_ip.N`'s bytes; a torn or foreign file is no address (the next
/// allocation starts at the range's start, as upstream's).
pub fn parse_last(raw: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(raw).ok()?.trim().parse().ok()
}
