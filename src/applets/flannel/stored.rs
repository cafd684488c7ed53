//! The stored delegate configs under `dataDir`: their names, the directories made for them,
//! written as flannel writes them and removed again.

use super::Flannel;
use crate::cni::{Error, Result};
use std::path::{Path, PathBuf};

/// Longest container ID stored under its own name, as flannel stores it (a file name's limit);
/// a longer one, which flannel cannot store, gets `~<32 hex of sha512>`, as
/// [`crate::attachment`] names long owners (`~` never starts a container ID).
pub(super) const NAME_MAX: usize = 255;

pub(super) fn stored_path(f: &Flannel, cid: &str) -> PathBuf {
    if cid.len() <= NAME_MAX {
        f.data_dir.join(cid)
    } else {
        f.data_dir
            .join(format!("~{}", crate::hash::sha512_hex(cid.as_bytes(), 32)))
    }
}

/// Kind of flannel's records of the attachments whose config it stored
/// (`<state dir>/flannel/<network>/<cid>:<ifname>`): GC drops only what they name.
pub(super) const RECORD: &str = "flannel";

/// Make `dir` and its missing parents (0700, as flannel's MkdirAll): the directories made,
/// outermost first, so a failed ADD removes only those. Code 7 naming `dataDir` when it, or a
/// parent, is not a directory.
fn make_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    use std::os::unix::fs::DirBuilderExt;
    let not_dir = |d: &Path| {
        Error::config(format!(
            "dataDir {:?}: {} is not a directory",
            dir.display().to_string(),
            d.display()
        ))
    };
    let mut missing = Vec::new();
    for d in dir.ancestors() {
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => return Err(not_dir(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(d.to_path_buf()),
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Err(not_dir(dir)),
            Err(e) => {
                return Err(Error::host_io(
                    format_args!("failed to create {}", dir.display()),
                    e,
                ));
            }
        }
    }
    let mut made = Vec::new();
    for d in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => made.push(d),
            // Made by a concurrent ADD: not ours to remove.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(not_dir(&d)),
            Err(e) => {
                return Err(Error::host_io(
                    format_args!("failed to create {}", d.display()),
                    e,
                ));
            }
        }
    }
    Ok(made)
}

/// Upstream's write: directory 0700, file 0600, synced before the delegate runs, so a crash
/// after it leaves what DEL needs. Returns the directories it made. The directory is made
/// again if a concurrent failed ADD removed it in between (see [`unstore`]).
pub(super) fn store(f: &Flannel, cid: &str, text: &str) -> Result<Vec<PathBuf>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = stored_path(f, cid);
    let mut made = Vec::new();
    let mut tries = 0;
    loop {
        made.extend(make_dirs(&f.data_dir)?);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path);
        match opened {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
            opened => {
                return opened
                    .and_then(|mut file| {
                        file.write_all(text.as_bytes())?;
                        file.sync_all()
                    })
                    .map(|()| made)
                    .map_err(|e| {
                        Error::host_io(format_args!("failed to save {}", path.display()), e)
                    });
            }
        }
    }
}

/// A failed ADD's stored config, and the directories its `store` made when nothing else is in
/// them, so the host is as it was (a `dataDir` that was there stays).
pub(super) fn unstore(f: &Flannel, cid: &str, made: &[PathBuf]) {
    if let Err(e) = remove(&stored_path(f, cid)) {
        crate::warn!("flannel: {e}");
    }
    for d in made.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

pub(super) fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::host_io(format_args!("remove {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// The stored config of a container, `None` when there is none (DEL already ran).
pub(super) fn read_stored(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(Error::config(format!(
            "dataDir: {} is not a directory",
            path.parent().unwrap_or(path).display()
        ))),
        Err(e) => Err(Error::host_io(format_args!("read {}", path.display()), e)),
    }
}
