//! `cnibox install`, the binary installing itself: into a fresh directory, over the reference
//! Go plugins (refusal, --force, --remove and --restore), upgraded again and again while
//! plugins of the directory execute in a loop (no call may fail, no ETXTBSY), and into a
//! read-only directory (a clear error, nothing changed).

mod common;
use common::plugdir::{Tmp, applets, assert_all_linked, run, snapshot};
use common::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The static build when there is one (what nodes run; the test build is 20 times bigger and
/// slow to search for cnibox's mark), else the test build.
fn me() -> std::path::PathBuf {
    std::env::var_os("CNIBOX_STATIC")
        .filter(|v| !v.is_empty())
        .map_or_else(bin, std::path::PathBuf::from)
}

fn install(bin: &Path, args: &[&str]) -> common::plugdir::Run {
    run(Command::new(bin).arg("install").args(args))
}

fn version_ok(plugin: &Path) -> Result<(), String> {
    let out = Command::new(plugin)
        .env("CNI_COMMAND", "VERSION")
        .output()
        .map_err(|e| format!("exec {}: {e}", plugin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && text.contains("supportedVersions") {
        Ok(())
    } else {
        Err(format!("{}: {:?} {text}", plugin.display(), out.status))
    }
}

/// The reference plugins of the applet names that /usr/lib/cni has.
fn go_plugins(test: &str) -> Option<Vec<String>> {
    let have: Vec<String> = applets()
        .into_iter()
        .filter(|a| reference_path(a).exists())
        .collect();
    if have.len() < 5 {
        assert!(
            !require_all(),
            "{test}: the Go plugins are not in /usr/lib/cni"
        );
        skip_note(test, "the Go plugins are not in /usr/lib/cni");
        return None;
    }
    Some(have)
}

#[test]
fn install_into_a_fresh_dir() {
    let t = Tmp::new("self_fresh");
    let dir = t.0.join("opt/cni/bin");
    let d = dir.to_str().unwrap();
    let out = install(&me(), &[d]);
    assert!(out.ok, "{out:?}");
    let cnibox = dir.join("cnibox");
    assert_eq!(fs::read(&cnibox).unwrap(), fs::read(me()).unwrap());
    assert_eq!(
        fs::metadata(&cnibox).unwrap().permissions().mode() & 0o777,
        0o755
    );
    for a in applets() {
        assert_eq!(
            fs::read_link(dir.join(&a)).unwrap(),
            Path::new("cnibox"),
            "{a}"
        );
    }
    version_ok(&dir.join("bridge")).unwrap();
    let list = install(&me(), &["--list", d]);
    assert!(list.ok, "{list:?}");
    let want: Vec<String> = applets().iter().map(|a| format!("{a}\tcnibox")).collect();
    assert_eq!(list.stdout.lines().collect::<Vec<_>>(), want);
    // Run again from the installed copy: nothing to copy, the same file stays.
    let ino = fs::metadata(&cnibox).unwrap().ino();
    let before = snapshot(&dir);
    let out = install(&cnibox, &["--hardlink", d]);
    assert!(out.ok, "{out:?}");
    assert_eq!(fs::metadata(&cnibox).unwrap().ino(), ino);
    assert_all_linked(&dir, &cnibox);
    let out = install(&cnibox, &[d]);
    assert!(out.ok, "{out:?}");
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn install_over_the_go_plugins_refuses_then_forces_and_restores() {
    let test = "install_over_the_go_plugins";
    let Some(go) = go_plugins(test) else { return };
    let t = Tmp::new("self_go");
    let dir = t.0.join("bin");
    let d = dir.to_str().unwrap();
    fs::create_dir_all(&dir).unwrap();
    for n in &go {
        fs::copy(reference_path(n), dir.join(n)).unwrap();
    }
    fs::write(dir.join("vendor-plugin"), "#!/bin/sh\n").unwrap();
    let same_as_go = |d: &Path| {
        for n in &go {
            let (have, want) = (fs::read(d.join(n)), fs::read(reference_path(n)));
            assert!(
                have.unwrap() == want.unwrap(),
                "{n} in {} is not Go's",
                d.display()
            );
        }
    };
    let before = snapshot(&dir);
    let out = install(&me(), &[d]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("not cnibox: {}\n", go.join(" "))),
        "{out:?}"
    );
    assert!(out.stderr.contains("--force"), "{out:?}");
    assert_eq!(
        snapshot(&dir),
        before,
        "a refused run changed the directory"
    );
    assert!(!dir.join("cnibox").exists());
    let list = install(&me(), &["--list", d]);
    assert!(list.stdout.contains("bridge\tother\n"), "{list:?}");

    let out = install(&me(), &["--force", d]);
    assert!(out.ok, "{out:?}");
    let backup = t.0.join("bin.pre-cnibox");
    same_as_go(&backup);
    assert_all_linked(&dir, &dir.join("cnibox"));
    version_ok(&dir.join("portmap")).unwrap();
    assert_eq!(
        fs::read_to_string(dir.join("vendor-plugin")).unwrap(),
        "#!/bin/sh\n"
    );

    let cnibox = dir.join("cnibox");
    let out = install(&cnibox, &["--remove", d]);
    assert!(out.ok, "{out:?}");
    let backup_s = backup.to_str().unwrap();
    let out = install(&cnibox, &["--restore", backup_s, d]);
    assert!(out.ok, "{out:?}");
    fs::remove_file(&cnibox).unwrap();
    assert_eq!(snapshot(&dir), before, "the Go plugins are not back");
    same_as_go(&dir);
    assert!(!backup.exists(), "the emptied backup dir stays behind");
}

/// Upgrades (symbolic and hard links in turn, two builds of different inodes) while two
/// threads execute the directory's plugins in a loop: every call must succeed.
#[test]
fn upgrade_while_plugins_execute() {
    let t = Tmp::new("self_upgrade");
    let dir = t.0.join("bin");
    let d = dir.to_str().unwrap().to_string();
    let src = me();
    let builds = [t.0.join("cnibox-a"), t.0.join("cnibox-b")];
    for b in &builds {
        fs::copy(&src, b).unwrap();
    }
    assert!(install(&builds[0], &[&d]).ok);
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let loops: Vec<_> = ["bridge", "portmap"]
        .into_iter()
        .map(|name| {
            let (stop, calls, failed) = (stop.clone(), calls.clone(), failed.clone());
            let plugin = dir.join(name);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = version_ok(&plugin) {
                        failed.lock().unwrap().push(e);
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for i in 0..8 {
        // Each upgrade starts once the loops have run since the last one.
        let seen = calls.load(Ordering::Relaxed);
        while calls.load(Ordering::Relaxed) < seen + 4 {
            std::thread::yield_now();
        }
        let args: &[&str] = if i % 2 == 0 {
            &["--hardlink", &d]
        } else {
            &[&d]
        };
        let out = install(&builds[(i + 1) % 2], args);
        assert!(out.ok, "upgrade {i}: {out:?}");
    }
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let failed = failed.lock().unwrap();
    assert!(
        failed.is_empty(),
        "{} calls failed: {failed:?}",
        failed.len()
    );
    assert!(fs::read(dir.join("cnibox")).unwrap() == fs::read(&src).unwrap());
}

#[test]
fn install_into_a_read_only_dir_fails_clearly() {
    if !require_root("install_into_a_read_only_dir_fails_clearly") {
        return;
    }
    let t = Tmp::new("self_ro");
    let dir = t.0.join("ro");
    fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    struct Umount<'a>(&'a str);
    impl Drop for Umount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let sh = |args: &[&str]| assert!(Command::new("mount").args(args).status().unwrap().success());
    sh(&["-t", "tmpfs", "tmpfs", d]);
    let _u = Umount(d);
    fs::write(dir.join("vendor-plugin"), "#!/bin/sh\n").unwrap();
    sh(&["-o", "remount,ro", d]);
    let before = snapshot(&dir);
    for args in [&[d][..], &["--force", "--backup", d, d][..]] {
        let out = install(&me(), args);
        assert_eq!(out.code, Some(1), "{out:?}");
        let want = format!("cnibox install: cannot install {d}/cnibox: Read-only file system");
        assert!(out.stderr.starts_with(&want), "{out:?}");
        assert_eq!(snapshot(&dir), before);
    }
}
