//! Processes a test starts and must not leave behind: [`Proc`] kills and reaps its child on drop
//! (checked, within a bound), plus which binary to start and whether a tool is installed.
//! Test files use these instead of their own copies (`tests/testkit.rs` checks).

use super::bin;
use super::bounded::kill_and_reap;
use std::path::{Path, PathBuf};
use std::process::Child;

/// A child process killed and reaped on drop, within a bound (checked: a test that is not
/// already failing fails when the child outlives SIGKILL).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Err(e) = kill_and_reap(&mut self.0) {
            if std::thread::panicking() {
                eprintln!("{e}");
            } else {
                panic!("{e}");
            }
        }
    }
}

/// The binary under test for end-to-end runs: the static release build `make test` names in
/// CNIBOX_STATIC, else the one cargo built for this run.
pub fn cnibox_binary() -> PathBuf {
    std::env::var_os("CNIBOX_STATIC")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .unwrap_or_else(bin)
}

/// Whether an executable `tool` is on PATH.
pub fn in_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// A log file's text so far (empty when it is not there yet), for failure messages.
pub fn log_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Every file under `dir`, recursively, not following symlinked directories (none when `dir`
/// does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
