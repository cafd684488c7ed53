//! The owner index and its seal (see the module documentation of [`super`]): entries,
//! verification against the reservations, scans and rebuilds, and the stamp that says the
//! index is complete.

use super::files::{not_found_ok, write_atomic, write_in_place};
use super::{MAX_ENTRY_NAME, Owner, Store, holder};
use crate::error::{Context, Result};
use std::collections::BTreeMap;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::ErrorKind;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

impl Store {
    /// The index is complete when the stamp written by the last operation still matches the
    /// modification times of both directories: any file created or removed since, by anyone,
    /// moves one of them to the current time, which is never the sentinel (see [`Self::seal`]).
    pub(super) fn is_sealed(&self) -> bool {
        let Ok(text) = fs::read_to_string(&self.stamp) else {
            return false;
        };
        match (fs::metadata(&self.dir), fs::metadata(&self.index)) {
            (Ok(d), Ok(i)) => text == stamp_text(&d, &i),
            _ => false,
        }
    }

    /// Empty the stamp before the first change of this session: a crash at any later instant
    /// leaves the store unsealed, and the next operation rebuilds the index. (Emptied, not
    /// removed: [`Self::seal`] rewrites it in place, so a session allocates no inode for it.)
    pub(super) fn unseal(&mut self) -> Result<()> {
        if !self.unsealed {
            let emptied = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&self.stamp)
                .map(drop);
            not_found_ok(emptied).ctx(format_args!("empty {}", self.stamp.display()))?;
            self.unsealed = true;
        }
        Ok(())
    }

    /// Stamp both directories with a sentinel time in the past and record what the filesystem
    /// stored. Called when a session that changed the store ends.
    pub(super) fn seal(&self) -> std::io::Result<()> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let t =
            SystemTime::UNIX_EPOCH + Duration::new(now.as_secs().saturating_sub(1), 777_777_777);
        let times = FileTimes::new().set_modified(t).set_accessed(t);
        File::open(&self.index)?.set_times(times)?;
        File::open(&self.dir)?.set_times(times)?;
        let text = stamp_text(&fs::metadata(&self.dir)?, &fs::metadata(&self.index)?);
        // In place: a write torn by a crash matches no directory, so it reads as unsealed.
        match write_in_place(&self.stamp, text.as_bytes()) {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if let Some(parent) = self.stamp.parent() {
                    fs::create_dir_all(parent)?;
                }
                write_in_place(&self.stamp, text.as_bytes())
            }
            r => r,
        }
    }

    /// Rebuild the owner index from the reservation files (O(n), only after foreign changes or
    /// an interrupted operation).
    pub(super) fn rebuild_index(&mut self) -> Result<()> {
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
            crate::warn!(
                "host-local: could not rebuild the index of {} (answering from the reservations): {e}",
                self.dir.display()
            );
            self.broken = true;
        }
        Ok(())
    }

    /// Every reservation's owner, read from the reservation files themselves.
    pub(super) fn scan(&self) -> Result<BTreeMap<Owner, Vec<IpAddr>>> {
        self.scans.set(self.scans.get() + 1);
        let mut owners: BTreeMap<Owner, Vec<IpAddr>> = BTreeMap::new();
        for (ip, path) in self.reservation_files()? {
            if let Some(owner) = holder(&path) {
                owners.entry(owner).or_default().push(ip);
            }
        }
        Ok(owners)
    }

    pub(super) fn entry_path(&self, owner: &Owner) -> PathBuf {
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
    pub(super) fn read_entry(&self, owner: &Owner) -> Result<Option<Vec<IpAddr>>, Stale> {
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
    pub(super) fn write_entry(&mut self, owner: &Owner, ips: &[IpAddr]) {
        let path = self.entry_path(owner);
        // In place, not through a temporary file and rename(2): no inode per write (a
        // dual-stack ADD writes the entry once per range set). A write torn by a crash fails the
        // entry's checksum, and the crash has left the store unsealed: the next operation
        // rebuilds the index from the reservations.
        let res = if ips.is_empty() {
            not_found_ok(fs::remove_file(&path))
        } else {
            write_in_place(&path, entry_text(owner, ips).as_bytes())
        };
        if let Err(e) = res {
            crate::warn!("host-local: index entry {}: {e}", path.display());
            self.broken = true;
        }
    }

    /// What `owner`'s entry lists, unverified (empty when there is none or it is damaged).
    pub(super) fn listed(&self, owner: &Owner) -> Vec<IpAddr> {
        self.read_entry(owner).ok().flatten().unwrap_or_default()
    }

    /// `owner`'s addresses from the index, each checked against its reservation file; `None`
    /// when the index cannot answer (broken, entry damaged, or an address it lists is missing
    /// or names someone else).
    pub(super) fn verified(&self, owner: &Owner) -> Option<Vec<IpAddr>> {
        if self.broken {
            return None;
        }
        let ips = self.read_entry(owner).ok()?.unwrap_or_default();
        let mine = |ip: &IpAddr| holder(&self.dir.join(ip.to_string())).as_ref() == Some(owner);
        ips.iter().all(mine).then_some(ips)
    }

    pub(super) fn owners_from_index(&self) -> Option<Vec<(Owner, Vec<IpAddr>)>> {
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
}

/// Why the index could not answer; the caller scans the reservations instead.
pub(super) struct Stale;

/// `owner <key>`, one address per line, then `sum <hash>` of everything before it, so a
/// truncated or edited entry is recognised as damaged.
pub(super) fn entry_text(owner: &Owner, ips: &[IpAddr]) -> String {
    let mut t = format!("owner {}\n", owner.key());
    for ip in ips {
        t.push_str(&format!("{ip}\n"));
    }
    let sum = crate::hash::sha512_hex(t.as_bytes(), 16);
    t.push_str(&format!("sum {sum}\n"));
    t
}

pub(super) fn parse_entry(text: &str) -> Option<(String, Vec<IpAddr>)> {
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
pub(super) fn stamp_text(dir: &fs::Metadata, index: &fs::Metadata) -> String {
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
