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
//!   stamp is removed before the first change of an operation, so a crash at any instant leaves
//!   the store unsealed. The one change no O(1) check can see is a reservation rewritten in
//!   place (same file, another owner's bytes), which no plugin does (Go's host-local only
//!   creates with O_EXCL and removes): until the index entry of the file's former owner is
//!   used, or the next scan, the new owner's DEL finds nothing;
//! - the owner's entry lists an address before its reservation exists, so no crash leaves a
//!   reservation the index does not know; entries, the stamp and `last_reserved_ip.N` are
//!   written to a temporary file and renamed (the temporary name is fixed per target,
//!   `.tmp-<name>`, and only used under the lock, so one left by a killed process is replaced
//!   by the next write instead of piling up);
//! - a reservation appears with its content in one step (a complete temporary file link(2)ed
//!   into place: atomic, and exclusive), so no empty or half-written reservation is ever
//!   visible (upstream #498), and any failure after it (a full disk writing
//!   `last_reserved_ip.N`) removes it again. Index writes are best effort: when one fails the
//!   store answers from scans and stays unsealed.

use super::canonical;
use crate::error::{Context, Error, Result};
use crate::undo::ErrorList;
use std::collections::BTreeMap;
use std::fs::TryLockError;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{ErrorKind, Write};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
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
    stamp: PathBuf,
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

/// Why the index could not answer; the caller scans the reservations instead.
struct Stale;

/// How an owner's entry is named: its key, or a hash of it when the key is too long for a
/// file name (Go's host-local writes owners of any length).
const MAX_ENTRY_NAME: usize = 200;

/// The temporary file for writing `name` in `dir`: `.tmp-<name>`. Every write happens under
/// the network's lock and each target has its own name (network names and entry names never
/// start with a dot), so a fixed name is never contended, and one left by a killed process is
/// simply replaced by the next write of the same target instead of accumulating.
fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".tmp-{name}"))
}

/// A temporary file could not be removed: the store is left unsealed, so the next operation
/// rebuilds the index, which clears the index directory of leftovers.
static LITTER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Remove a temporary file, noting when one stays behind.
fn discard(tmp: &Path) {
    if not_found_ok(fs::remove_file(tmp)).is_err() {
        LITTER.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Create `tmp` (replacing a leftover) holding exactly `data`, mode 0600.
fn write_tmp(tmp: &Path, data: &[u8]) -> std::io::Result<()> {
    not_found_ok(fs::remove_file(tmp))?;
    let res = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .and_then(|mut f| f.write_all(data));
    if res.is_err() {
        discard(tmp);
    }
    res
}

/// Write `data` to a temporary file beside `path` and rename it over `path`.
fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = tmp_path(path.parent().unwrap_or(Path::new(".")), &name);
    let res = write_tmp(&tmp, data).and_then(|()| fs::rename(&tmp, path));
    if res.is_err() {
        discard(&tmp);
    }
    res
}

fn not_found_ok(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

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

    /// The index is complete when the stamp written by the last operation still matches the
    /// modification times of both directories: any file created or removed since, by anyone,
    /// moves one of them to the current time, which is never the sentinel (see [`Self::seal`]).
    fn is_sealed(&self) -> bool {
        let Ok(text) = fs::read_to_string(&self.stamp) else {
            return false;
        };
        match (fs::metadata(&self.dir), fs::metadata(&self.index)) {
            (Ok(d), Ok(i)) => text == stamp_text(&d, &i),
            _ => false,
        }
    }

    /// Remove the stamp before the first change of this session: a crash at any later instant
    /// leaves the store unsealed, and the next operation rebuilds the index.
    fn unseal(&mut self) -> Result<()> {
        if !self.unsealed {
            not_found_ok(fs::remove_file(&self.stamp))
                .ctx(format_args!("remove {}", self.stamp.display()))?;
            self.unsealed = true;
        }
        Ok(())
    }

    /// Stamp both directories with a sentinel time in the past and record what the filesystem
    /// stored. Called when a session that changed the store ends.
    fn seal(&self) -> std::io::Result<()> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let t =
            SystemTime::UNIX_EPOCH + Duration::new(now.as_secs().saturating_sub(1), 777_777_777);
        let times = FileTimes::new().set_modified(t).set_accessed(t);
        File::open(&self.index)?.set_times(times)?;
        File::open(&self.dir)?.set_times(times)?;
        let text = stamp_text(&fs::metadata(&self.dir)?, &fs::metadata(&self.index)?);
        if let Some(parent) = self.stamp.parent() {
            fs::create_dir_all(parent)?;
        }
        write_atomic(&self.stamp, text.as_bytes())
    }

    /// Rebuild the owner index from the reservation files (O(n), only after foreign changes or
    /// an interrupted operation).
    fn rebuild_index(&mut self) -> Result<()> {
        self.unseal()?;
        let owners = self.scan()?;
        let built = (|| -> std::io::Result<()> {
            not_found_ok(fs::remove_dir_all(&self.index))?;
            fs::create_dir_all(&self.index)?;
            for (owner, ips) in &owners {
                write_atomic(&self.entry_path(owner), entry_text(owner, ips).as_bytes())?;
            }
            Ok(())
        })();
        if let Err(e) = built {
            eprintln!(
                "host-local: could not rebuild the index of {} (answering from the reservations): {e}",
                self.dir.display()
            );
            self.broken = true;
        }
        Ok(())
    }

    /// Every reservation's owner, read from the reservation files themselves.
    fn scan(&self) -> Result<BTreeMap<Owner, Vec<IpAddr>>> {
        self.scans.set(self.scans.get() + 1);
        let mut owners: BTreeMap<Owner, Vec<IpAddr>> = BTreeMap::new();
        for (ip, path) in self.reservation_files()? {
            if let Some(owner) = holder(&path) {
                owners.entry(owner).or_default().push(ip);
            }
        }
        Ok(owners)
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
        let key = owner.key();
        if key.len() <= MAX_ENTRY_NAME && !key.starts_with('.') && !key.contains('/') {
            self.index.join(key)
        } else {
            self.index
                .join(format!("~{}", crate::hash::sha512_hex(key.as_bytes(), 64)))
        }
    }

    /// The addresses `owner`'s entry lists: `Ok(None)` without an entry, `Err(Stale)` when the
    /// entry is unreadable, damaged or for another owner.
    fn read_entry(&self, owner: &Owner) -> Result<Option<Vec<IpAddr>>, Stale> {
        match fs::read_to_string(self.entry_path(owner)) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(_) => Err(Stale),
            Ok(text) => match parse_entry(&text) {
                Some((key, ips)) if key == owner.key() => Ok(Some(ips)),
                _ => Err(Stale),
            },
        }
    }

    /// Record `ips` as `owner`'s (an empty list removes the entry). Best effort: a failure
    /// (full disk) leaves the store to be rebuilt from the reservations next time.
    fn write_entry(&mut self, owner: &Owner, ips: &[IpAddr]) {
        let path = self.entry_path(owner);
        let res = if ips.is_empty() {
            not_found_ok(fs::remove_file(&path))
        } else {
            write_atomic(&path, entry_text(owner, ips).as_bytes())
        };
        if let Err(e) = res {
            eprintln!("host-local: index entry {}: {e}", path.display());
            self.broken = true;
        }
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
            return Err(Error::io(format_args!("write {}", last.display()), e));
        }
        Ok(true)
    }

    /// Replace `last_reserved_ip.N` (same bytes as upstream) by renaming a complete temporary
    /// file from the index over it, so a crash or a full disk never leaves it empty or torn.
    /// On another filesystem (EXDEV) it is rewritten in place, as upstream does.
    fn record_last(&self, last: &Path, ip: IpAddr) -> std::io::Result<()> {
        let data = ip.to_string();
        let name = last.file_name().unwrap_or_default().to_string_lossy();
        let tmp = tmp_path(&self.index, &name);
        let res = write_tmp(&tmp, data.as_bytes()).and_then(|()| fs::rename(&tmp, last));
        match res {
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                discard(&tmp);
                OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(last)
                    .and_then(|mut f| f.write_all(data.as_bytes()))
            }
            Err(e) => {
                discard(&tmp);
                Err(e)
            }
            Ok(()) => Ok(()),
        }
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
                return Err(Error::io(format_args!("reserve {}", path.display()), e));
            }
            let linked = fs::hard_link(&tmp, path);
            discard(&tmp);
            match linked {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => return Ok(false),
                Err(e) if e.raw_os_error() == Some(libc::EXDEV) && dir == &self.index => continue,
                Err(e) => return Err(Error::io(format_args!("reserve {}", path.display()), e)),
            }
        }
        Err(Error::internal(format!(
            "reserve {}: no place for a temporary file",
            path.display()
        )))
    }

    /// What `owner`'s entry lists, unverified (empty when there is none or it is damaged).
    fn listed(&self, owner: &Owner) -> Vec<IpAddr> {
        self.read_entry(owner).ok().flatten().unwrap_or_default()
    }

    pub fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        fs::read_to_string(self.dir.join(format!("last_reserved_ip.{set}")))
            .ok()?
            .trim()
            .parse()
            .ok()
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

    /// `owner`'s addresses from the index, each checked against its reservation file; `None`
    /// when the index cannot answer (broken, entry damaged, or an address it lists is missing
    /// or names someone else).
    fn verified(&self, owner: &Owner) -> Option<Vec<IpAddr>> {
        if self.broken {
            return None;
        }
        let ips = self.read_entry(owner).ok()?.unwrap_or_default();
        let mine = |ip: &IpAddr| holder(&self.dir.join(ip.to_string())).as_ref() == Some(owner);
        ips.iter().all(mine).then_some(ips)
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
                    errors.push(Error::io(format_args!("release {}", path.display()), e));
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

    fn owners_from_index(&self) -> Option<Vec<(Owner, Vec<IpAddr>)>> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.index).ok()? {
            let e = e.ok()?;
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let (key, ips) = parse_entry(&fs::read_to_string(e.path()).ok()?)?;
            let owner = Owner::from_key(&key);
            if self.entry_path(&owner) != e.path()
                || !ips
                    .iter()
                    .all(|ip| holder(&self.dir.join(ip.to_string())).as_ref() == Some(&owner))
            {
                return None;
            }
            out.push((owner, ips));
        }
        Some(out)
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

/// `owner <key>`, one address per line, then `sum <hash>` of everything before it, so a
/// truncated or edited entry is recognised as damaged.
fn entry_text(owner: &Owner, ips: &[IpAddr]) -> String {
    let mut t = format!("owner {}\n", owner.key());
    for ip in ips {
        t.push_str(&format!("{ip}\n"));
    }
    let sum = crate::hash::sha512_hex(t.as_bytes(), 16);
    t.push_str(&format!("sum {sum}\n"));
    t
}

fn parse_entry(text: &str) -> Option<(String, Vec<IpAddr>)> {
    let (body, sum_line) = text.strip_suffix('\n')?.rsplit_once('\n')?;
    let body = format!("{body}\n");
    if sum_line.strip_prefix("sum ")? != crate::hash::sha512_hex(body.as_bytes(), 16) {
        return None;
    }
    let mut lines = body.lines();
    let key = lines.next()?.strip_prefix("owner ")?.to_string();
    let ips = lines
        .map(|l| l.parse().ok())
        .collect::<Option<Vec<IpAddr>>>()?;
    Some((key, ips))
}

/// What the stamp records of both directories: device and inode (a directory replaced, say
/// restored from a backup, is another one), the modification time (moved to the current time
/// by any create, remove or rename in it, so never the sentinel again) and the change time
/// (which nobody can set: it also moves when someone sets the modification time back).
fn stamp_text(dir: &fs::Metadata, index: &fs::Metadata) -> String {
    let one = |m: &fs::Metadata| {
        format!(
            "{}:{} m{}.{} c{}.{}",
            m.dev(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        )
    };
    format!("{} {}\n", one(dir), one(index))
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.unsealed
            && !self.broken
            && !LITTER.load(std::sync::atomic::Ordering::Relaxed)
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
        // std's lock is flock(2) on Linux, the lock Go's host-local takes on the same file.
        match f.try_lock() {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) if e.kind() == ErrorKind::Interrupted => {}
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format_args!("lock {}", path.display()), e));
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
            assert_eq!(s.owned_by(&o).unwrap(), vec![ip]);
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
            s.owned_by(&Owner::new("c9", "eth1")).unwrap(),
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
        assert!(s.owned_by(&Owner::new("c9", "eth1")).unwrap().is_empty());
        drop(s);
        fs::remove_dir_all(&d).unwrap();
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A store with c1 holding .2 and c2 holding .3, sealed.
    fn two(name: &str) -> PathBuf {
        let d = tmp(name);
        let mut s = Store::open(&d, "net", true).unwrap().unwrap();
        assert!(
            s.reserve(ip("10.0.0.2"), &Owner::new("c1", "eth0"), 0)
                .unwrap()
        );
        assert!(
            s.reserve(ip("10.0.0.3"), &Owner::new("c2", "eth0"), 0)
                .unwrap()
        );
        drop(s);
        d
    }

    fn release(d: &Path, cid: &str) -> usize {
        Store::open(d, "net", false)
            .unwrap()
            .unwrap()
            .release(cid, "eth0")
            .unwrap()
    }

    /// However the index is made wrong, DEL releases exactly the owner's reservations: never
    /// another's, never none of its own.
    #[test]
    fn a_stale_index_is_never_trusted() {
        type Damage = fn(&Path);
        let cases: &[(&str, Damage)] = &[
            ("entry removed by an admin", |d| {
                fs::remove_file(d.join(".cnibox/net/c1:eth0")).unwrap()
            }),
            ("entry truncated", |d| {
                fs::write(d.join(".cnibox/net/c1:eth0"), "owner c1:eth0\n").unwrap()
            }),
            ("entry edited to another address", |d| {
                let t = entry_text(&Owner::new("c1", "eth0"), &[ip("10.0.0.3")]);
                fs::write(d.join(".cnibox/net/c1:eth0"), t).unwrap()
            }),
            ("entry emptied", |d| {
                fs::write(d.join(".cnibox/net/c1:eth0"), "").unwrap()
            }),
            ("index removed", |d| {
                fs::remove_dir_all(d.join(".cnibox/net")).unwrap()
            }),
            ("stamp removed (crash mid-operation)", |d| {
                fs::remove_file(d.join(".cnibox/.sealed/net")).unwrap()
            }),
            ("reservation moved behind our back", |d| {
                // The Go plugin released .2 and gave c1 .4 instead.
                fs::remove_file(d.join("net/10.0.0.2")).unwrap();
                fs::write(d.join("net/10.0.0.4"), "c1\r\neth0").unwrap();
            }),
            ("reservation handed to another owner", |d| {
                fs::write(d.join("net/10.0.0.2"), "c9\r\neth0").unwrap();
                fs::write(d.join("net/10.0.0.5"), "c1\r\neth0").unwrap();
            }),
            ("directory times set back to the very stamp", |d| {
                let m = fs::metadata(d.join("net")).unwrap();
                fs::write(d.join("net/10.0.0.6"), "c1\r\neth0").unwrap();
                let t =
                    SystemTime::UNIX_EPOCH + Duration::new(m.mtime() as u64, m.mtime_nsec() as u32);
                let times = FileTimes::new().set_modified(t);
                File::open(d.join("net")).unwrap().set_times(times).unwrap();
            }),
            ("directory times restored by a backup tool", |d| {
                fs::write(d.join("net/10.0.0.6"), "c1\r\neth0").unwrap();
                let t = SystemTime::UNIX_EPOCH + Duration::new(1, 777_777_777);
                let times = FileTimes::new().set_modified(t);
                File::open(d.join("net")).unwrap().set_times(times).unwrap();
            }),
        ];
        for (i, (what, damage)) in cases.iter().enumerate() {
            let d = two(&format!("stale{i}"));
            damage(&d);
            let theirs: Vec<String> = fs::read_dir(d.join("net"))
                .unwrap()
                .flatten()
                .filter(|e| fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c1\r")))
                .map(|e| e.file_name().into_string().unwrap())
                .collect();
            let n = release(&d, "c1");
            assert_eq!(n, theirs.len(), "{what}: released {n} of {theirs:?}");
            for f in fs::read_dir(d.join("net")).unwrap().flatten() {
                let c = fs::read_to_string(f.path()).unwrap_or_default();
                assert!(!c.starts_with("c1\r"), "{what}: {:?} left", f.file_name());
            }
            assert!(
                fs::read_dir(d.join("net"))
                    .unwrap()
                    .flatten()
                    .any(
                        |e| fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c2\r"))
                            || fs::read_to_string(e.path()).is_ok_and(|c| c.starts_with("c9\r"))
                    ),
                "{what}: another owner's reservation was released"
            );
            // The next operation is correct again, and sealed.
            assert_eq!(release(&d, "c1"), 0, "{what}");
            fs::remove_dir_all(&d).unwrap();
        }
    }

    /// ADD and DEL are O(1) in the number of reservations while only cnibox changes the
    /// store: no scan at open, reserve, lookup or release (also for an owner with nothing);
    /// one change by anyone else costs exactly one scan, after which it is O(1) again.
    #[test]
    fn common_case_never_scans() {
        let d = tmp("o1");
        {
            let mut s = Store::open(&d, "net", true).unwrap().unwrap();
            for i in 1..=60 {
                let o = Owner::new(&format!("c{i}"), "eth0");
                assert!(s.reserve(ip(&format!("10.0.1.{i}")), &o, 0).unwrap());
            }
        }
        for round in 1..=3 {
            let mut s = Store::open(&d, "net", false).unwrap().unwrap();
            assert!(
                s.reserve(ip(&format!("10.0.2.{round}")), &Owner::new("n", "eth1"), 0)
                    .unwrap()
            );
            assert_eq!(
                s.owned_by(&Owner::new("c30", "eth0")).unwrap(),
                [ip("10.0.1.30")]
            );
            assert_eq!(s.release(&format!("c{round}"), "eth0").unwrap(), 1);
            assert_eq!(s.release("absent", "eth0").unwrap(), 0);
            assert_eq!(s.scans.get(), 0, "round {round}");
        }
        fs::write(d.join("net/10.0.3.1"), "go\r\neth0").unwrap();
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert_eq!(s.release("go", "eth0").unwrap(), 1);
        assert_eq!(s.scans.get(), 1, "one scan after a foreign change");
        drop(s);
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert_eq!(s.release("c40", "eth0").unwrap(), 1);
        assert_eq!(s.scans.get(), 0, "sealed again");
        drop(s);
        fs::remove_dir_all(&d).unwrap();
    }

    /// Owners longer than a file name (Go writes them) neither break the index nor leak.
    #[test]
    fn long_owners() {
        let d = tmp("long");
        drop(Store::open(&d, "net", true).unwrap());
        let long = "c".repeat(300);
        fs::write(d.join("net/10.0.0.9"), format!("{long}\r\neth0")).unwrap();
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        let o = Owner::new(&long, "eth0");
        assert_eq!(s.owned_by(&o).unwrap(), vec![ip("10.0.0.9")]);
        let o2 = Owner::new(&"d".repeat(400), "eth1");
        assert!(s.reserve(ip("10.0.0.10"), &o2, 0).unwrap());
        drop(s);
        let mut s = Store::open(&d, "net", false).unwrap().unwrap();
        assert_eq!(s.owned_by(&o2).unwrap(), vec![ip("10.0.0.10")]);
        assert_eq!(s.owners().unwrap().len(), 2);
        assert_eq!(s.release(&long, "eth0").unwrap(), 1);
        assert_eq!(s.release(&"d".repeat(400), "eth1").unwrap(), 1);
        drop(s);
        fs::remove_dir_all(&d).unwrap();
    }

    /// No temporary or empty file is ever left where the Go plugin would read it.
    #[test]
    fn reservations_appear_complete() {
        let d = two("complete");
        for e in fs::read_dir(d.join("net")).unwrap().flatten() {
            let name = e.file_name().into_string().unwrap();
            assert!(!name.starts_with(".tmp"), "{name}");
            if name.parse::<IpAddr>().is_ok() {
                assert!(!fs::read_to_string(e.path()).unwrap().is_empty());
            }
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
