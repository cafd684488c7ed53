//! A plugin directory as an operator has one, for the tests of `cnibox install`, symlinks.sh,
//! `make install` and the release archive: temp dirs, stand-ins for the Go plugins, snapshots.

use super::bin;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct Run {
    pub ok: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("spawn");
    Run {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A temp dir removed on drop.
pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Tmp {
        // Not a Sandbox: its bin/ holds symlinks to the built binary, and writing a fake
        // plugin through one would overwrite cnibox itself.
        let p = std::env::temp_dir().join(format!("cnibox-install-{}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
        let _ = fs::remove_dir_all(self.0.with_extension("pre-cnibox"));
    }
}

pub fn applets() -> Vec<String> {
    let out = run(Command::new(bin()).arg("--list"));
    assert!(out.ok, "{out:?}");
    out.stdout.lines().map(str::to_owned).collect()
}

/// A stand-in for a Go plugin: a script whose content identifies it.
pub fn fake_go_plugin(path: &Path, name: &str) {
    fs::write(
        path,
        format!("#!/bin/sh\necho 'CNI {name} plugin v1.1.1 (Go)'\n"),
    )
    .unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every applet name in `dir` resolves to the same file as `bin`.
pub fn assert_all_linked(dir: &Path, bin: &Path) {
    let want = fs::metadata(bin).unwrap().ino();
    for a in applets() {
        let m = fs::metadata(dir.join(&a)).unwrap_or_else(|e| panic!("{a}: {e}"));
        assert_eq!(m.ino(), want, "{a} is not cnibox");
    }
}

pub fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let p = e.path();
            let what = match fs::symlink_metadata(&p).unwrap().file_type().is_symlink() {
                true => format!("-> {}", fs::read_link(&p).unwrap().display()),
                false => String::from_utf8_lossy(&fs::read(&p).unwrap())
                    .chars()
                    .take(80)
                    .collect(),
            };
            (e.file_name().to_string_lossy().into_owned(), what)
        })
        .collect();
    v.sort();
    v
}
