//! A plugin directory as an operator has one, for the tests of `cnibox install`, symlinks.sh,
//! `make install` and the release archive: temp dirs, stand-ins for the Go plugins, snapshots.

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

/// [`super::applets`] as owned names (what `cnibox --list` prints).
pub fn applets() -> Vec<String> {
    super::applets().iter().map(|a| a.to_string()).collect()
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

/// `contrib/release.sh BINARY ARCH OUT` under `umask`: the archive's path.
pub fn pack(binary: &Path, arch: &str, out: &Path, umask: &str) -> PathBuf {
    let script = repo().join("contrib/release.sh");
    let r = run(Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(&script)
        .arg(binary)
        .arg(arch)
        .arg(out));
    assert!(r.ok, "{r:?}");
    PathBuf::from(r.stdout.trim())
}

/// The installer image (the top-level Containerfile) built by podman around the static binary
/// (CNIBOX_STATIC), under a tag of its own; removed on drop.
pub struct Image {
    pub tag: String,
    pub binary: PathBuf,
}

impl Image {
    /// `None` (a skip note; a failure under CNIBOX_REQUIRE_ALL=1) without podman or
    /// CNIBOX_STATIC. The build context is a temp dir holding only the binary.
    pub fn build(test: &str) -> Option<Image> {
        let skip = |why: &str| {
            assert!(!super::require_all(), "{test}: {why}");
            super::skip_note(test, why);
            None
        };
        let Some(binary) = std::env::var_os("CNIBOX_STATIC").filter(|v| !v.is_empty()) else {
            return skip("CNIBOX_STATIC is not set (make test sets it)");
        };
        if !run(Command::new("podman").arg("--version")).ok {
            return skip("podman missing");
        }
        let ctx = Tmp::new(&format!("image-{test}"));
        fs::copy(&binary, ctx.0.join("cnibox")).unwrap();
        fs::copy(repo().join("LICENSE"), ctx.0.join("LICENSE")).unwrap();
        let tag = format!("localhost/cnibox-test-{}-{test}:1", std::process::id());
        let out = run(Command::new("podman")
            .args([
                "build",
                "--pull=never",
                "--build-arg",
                "BIN=cnibox",
                "-t",
                &tag,
                "-f",
            ])
            .arg(repo().join("Containerfile"))
            .arg(&ctx.0));
        assert!(out.ok, "podman build: {out:?}");
        Some(Image {
            tag,
            binary: binary.into(),
        })
    }

    /// `podman run` of the image with `host_dir` as its host plugin directory.
    pub fn install(&self, host_dir: &Path, args: &[&str]) -> Run {
        let mount = format!("{}:/host/opt/cni/bin", host_dir.display());
        run(Command::new("podman")
            .args(["run", "--rm", "--network", "none", "-v", &mount])
            // Podman asks for 1048576 open files and processes, more than this machine lets runc set
            // (tests/e2e_podman.rs, `ulimits`).
            .args([
                "--ulimit",
                "nofile=1024:1024",
                "--ulimit",
                "nproc=1024:1024",
            ])
            .arg(&self.tag)
            .args(args))
    }
}

impl Image {
    /// The paths in the image's file system (`podman create` + `podman export`).
    pub fn files(&self) -> Vec<String> {
        let out = run(Command::new("podman").args(["create", &self.tag]));
        assert!(out.ok, "podman create: {out:?}");
        let id = out.stdout.trim().to_string();
        let tar = std::process::Command::new("sh")
            .args(["-c", "podman export \"$1\" | tar -tf -", "sh", &id])
            .output()
            .expect("podman export");
        let _ = run(Command::new("podman").args(["rm", "-f", &id]));
        String::from_utf8_lossy(&tar.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rmi", "-f", &self.tag])
            .output();
    }
}
