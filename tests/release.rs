//! The release archives (`make release`, contrib/release.sh): for each architecture built
//! (CNIBOX_STATIC, CNIBOX_STATIC_AARCH64, CNIBOX_STATIC_ARMV7, as `make test` sets them) two
//! packings with different file times and umask are byte-identical, the .sha256/.sha512 files
//! check, and the archive unpacks as install guides unpack upstream's (`tar -xzf … -C DIR`)
//! into a plugin directory: every applet name a link to the one binary, the docs, nothing
//! else; the ARM ones run their applets under qemu-user. tests/conflists.rs runs a conflist
//! from an unpacked archive.

mod common;
use common::plugdir::{Tmp, applets, pack, run};
use common::wait::wait_until;
use common::*;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn archive_of(test: &str, var: &str, arch: &str, qemu: Option<&str>) {
    let Some(binary) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        assert!(
            !require_all(),
            "{test}: {var} is not set (make test sets it)"
        );
        skip_note(test, &format!("{var} is not set (make test sets it)"));
        return;
    };
    let binary = PathBuf::from(binary);
    let t = Tmp::new(test);
    // The second packing: another copy of the binary, a later mtime, a strict umask.
    let copy = t.0.join("cnibox");
    fs::copy(&binary, &copy).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let a = pack(&binary, arch, &t.0.join("a"), "022");
    // Files staged in another second: only --mtime keeps the archives equal.
    let secs = || {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.unwrap().as_secs()
    };
    let first = secs();
    wait_until("the next second", Duration::from_secs(5), || {
        secs() != first
    });
    pack(&copy, arch, &t.0.join("b"), "077");
    let name = format!("cnibox-linux-{arch}-v{}.tgz", env!("CARGO_PKG_VERSION"));
    assert_eq!(a.file_name().unwrap().to_str(), Some(name.as_str()));
    for ext in ["", ".sha256", ".sha512"] {
        let f = |d: &str| fs::read(t.0.join(d).join(format!("{name}{ext}"))).unwrap();
        assert!(f("a") == f("b"), "{name}{ext} differs between two packings");
    }
    for sum in ["sha256sum", "sha512sum"] {
        let check = format!("{name}.{}", &sum[..6]);
        let out = run(Command::new(sum)
            .arg("-c")
            .arg(&check)
            .current_dir(t.0.join("a")));
        assert!(out.ok && out.stdout.contains(": OK"), "{out:?}");
    }
    // Unpacked over a directory that already has a Go plugin, as a guide's tar would.
    let dir = t.0.join("opt-cni-bin");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("bridge"), "Go bridge").unwrap();
    let out = run(Command::new("tar").arg("-xzf").arg(&a).arg("-C").arg(&dir));
    assert!(out.ok, "{out:?}");
    let mut want: Vec<String> = applets();
    want.extend(["cnibox".into(), "README.md".into(), "LICENSE".into()]);
    let license = fs::read_to_string(dir.join("LICENSE")).unwrap();
    assert!(
        license.contains("Apache License") && license.contains("Version 2.0, January 2004"),
        "the archive's LICENSE is not Apache-2.0"
    );
    want.sort();
    let mut have: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    have.sort();
    assert_eq!(have, want);
    let cnibox = dir.join("cnibox");
    assert!(fs::read(&cnibox).unwrap() == fs::read(&binary).unwrap());
    assert_eq!(fs::metadata(&cnibox).unwrap().mode() & 0o7777, 0o755);
    let ino = fs::metadata(&cnibox).unwrap().ino();
    for a in applets() {
        assert_eq!(fs::metadata(dir.join(&a)).unwrap().ino(), ino, "{a}");
    }
    let listing = run(Command::new("tar").arg("-tvzf").arg(&a));
    assert!(listing.ok, "{listing:?}");
    for l in listing.stdout.lines() {
        assert!(l.contains(" 0/0 ") && l.contains(" ./"), "{l}");
    }
    let bridge = dir.join("bridge");
    let mut cmd = match qemu {
        Some(q) => {
            let mut c = Command::new(q);
            c.arg(&bridge);
            c
        }
        None => Command::new(&bridge),
    };
    let out = run(cmd.env("CNI_COMMAND", "VERSION"));
    assert!(
        out.ok && out.stdout.contains("supportedVersions"),
        "{out:?}"
    );
}

#[test]
fn release_archive_amd64() {
    archive_of("release_archive_amd64", "CNIBOX_STATIC", "amd64", None);
}

#[test]
fn release_archive_arm64() {
    let q = Some("qemu-aarch64-static");
    archive_of("release_archive_arm64", "CNIBOX_STATIC_AARCH64", "arm64", q);
}

#[test]
fn release_archive_arm() {
    let q = Some("qemu-arm-static");
    archive_of("release_archive_arm", "CNIBOX_STATIC_ARMV7", "arm", q);
}

#[test]
fn packing_refuses_bad_arguments() {
    let out = run(&mut Command::new(
        common::plugdir::repo().join("contrib/release.sh"),
    ));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("BINARY ARCH OUTDIR"), "{out:?}");
}
