//! Writing files so that no crash leaves a half-written one: fixed temporary names under the
//! lock, write-then-rename.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The temporary file for writing `name` in `dir`: `.tmp-<name>`. Every write happens under
/// the network's lock and each target has its own name (network names and entry names never
/// start with a dot), so a fixed name is never contended, and one left by a killed process is
/// simply replaced by the next write of the same target instead of accumulating.
pub(super) fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(".tmp-{name}"))
}

/// A temporary file could not be removed: the store is left unsealed, so the next operation
/// rebuilds the index, which clears the index directory of leftovers.
pub(super) static LITTER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Remove a temporary file, noting when one stays behind.
pub(super) fn discard(tmp: &Path) {
    if not_found_ok(fs::remove_file(tmp)).is_err() {
        LITTER.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Create `tmp` (replacing a leftover) holding exactly `data`, mode 0600.
pub(super) fn write_tmp(tmp: &Path, data: &[u8]) -> std::io::Result<()> {
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(tmp)
    };
    // A leftover of a killed process is rare: remove it only when it is there.
    let file = match create() {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            not_found_ok(fs::remove_file(tmp))?;
            create()
        }
        r => r,
    };
    let res = file.and_then(|mut f| f.write_all(data));
    if res.is_err() {
        discard(tmp);
    }
    res
}

/// Rewrite `path` in place (created 0600 when missing): no new inode, for the small files whose
/// torn state after a crash is harmless to every reader (a stamp that matches nothing, a
/// last-reserved hint that only moves where the next allocation starts looking).
///
/// Written over the old bytes and then cut to the new length, never truncated to zero first:
/// ext4 (auto_da_alloc) writes a file's data out on close(2) when it was truncated to zero and
/// rewritten, which cost 0.4–1.1 ms per file — per range set, so a dual-stack ADD paid it twice.
pub(super) fn write_in_place(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)?;
    if f.metadata()?.len() > data.len() as u64 {
        f.set_len(data.len() as u64)?;
    }
    Ok(())
}

/// Write `data` to a temporary file beside `path` and rename it over `path`.
pub(super) fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = tmp_path(path.parent().unwrap_or(Path::new(".")), &name);
    let res = write_tmp(&tmp, data).and_then(|()| fs::rename(&tmp, path));
    if res.is_err() {
        discard(&tmp);
    }
    res
}

pub(super) fn not_found_ok(r: std::io::Result<()>) -> std::io::Result<()> {
    match r {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        r => r,
    }
}
