//! The installer image (Containerfile: FROM scratch, the static binary, `cnibox install` into
//! the host directory mounted at /host/opt/cni/bin), built and run by podman against a
//! throwaway host directory holding the reference Go plugins: refusal, `--force` (the Go plugins
//! kept in .pre-cnibox), an upgrade in place while a plugin executes in a loop, `--restore`.
//! tests/e2e_cri.rs drives a directory the image installed with containerd's CRI plugin.

mod common;
use common::plugdir::{Image, Tmp, applets, assert_all_linked};
use common::*;
use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn image_installs_over_the_go_plugins_and_upgrades_in_place() {
    let test = "image_installs_over_the_go_plugins";
    if !require_root(test) {
        return;
    }
    let Some(image) = Image::build(test) else {
        return;
    };
    // The licence travels with the binary.
    let files = image.files();
    assert!(
        files.iter().any(|f| f == "LICENSE") && files.iter().any(|f| f == "cnibox"),
        "{files:?}"
    );
    let t = Tmp::new("image_host");
    let dir = t.0.join("bin");
    fs::create_dir_all(&dir).unwrap();
    let go: Vec<String> = applets()
        .into_iter()
        .filter(|a| reference_path(a).exists())
        .collect();
    assert!(
        go.len() >= 5 || !require_all(),
        "the Go reference plugins are not installed"
    );
    for n in &go {
        fs::copy(reference_path(n), dir.join(n)).unwrap();
    }
    let out = image.install(&dir, &[]);
    assert!(!out.ok, "{out:?}");
    if let Some(first) = go.first() {
        assert!(
            out.stderr.contains(&format!("are not cnibox: {first}")),
            "{out:?}"
        );
    }
    assert!(!dir.join("cnibox").exists());

    let out = image.install(&dir, &["--force"]);
    assert!(out.ok, "{out:?}");
    assert!(fs::read(dir.join("cnibox")).unwrap() == fs::read(&image.binary).unwrap());
    assert_all_linked(&dir, &dir.join("cnibox"));
    for n in &go {
        let kept = fs::read(dir.join(".pre-cnibox").join(n)).unwrap();
        assert!(kept == fs::read(reference_path(n)).unwrap(), "{n} not kept");
    }

    // Upgrade in place (hard links this time) while bridge runs in a loop.
    let (stop, calls) = (AtomicBool::new(false), AtomicUsize::new(0));
    let failures = std::thread::scope(|s| {
        let looper = s.spawn(|| {
            let mut failed = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let out = Command::new(dir.join("bridge"))
                    .env("CNI_COMMAND", "VERSION")
                    .output();
                match out {
                    Ok(o) if o.status.success() => {}
                    other => failed.push(format!("{other:?}")),
                }
                calls.fetch_add(1, Ordering::Relaxed);
            }
            failed
        });
        for _ in 0..2 {
            let seen = calls.load(Ordering::Relaxed);
            while calls.load(Ordering::Relaxed) < seen + 4 {
                std::thread::yield_now();
            }
            let out = image.install(&dir, &["--force", "--hardlink"]);
            assert!(out.ok, "{out:?}");
        }
        stop.store(true, Ordering::Relaxed);
        looper.join().unwrap()
    });
    assert!(
        failures.is_empty(),
        "calls failed during the upgrade: {failures:?}"
    );
    for a in applets() {
        assert!(
            !fs::symlink_metadata(dir.join(&a)).unwrap().is_symlink(),
            "{a}"
        );
    }

    let out = image.install(&dir, &["--remove"]);
    assert!(out.ok, "{out:?}");
    let out = image.install(&dir, &["--restore", "/host/opt/cni/bin/.pre-cnibox"]);
    assert!(out.ok, "{out:?}");
    for n in &go {
        assert!(
            fs::read(dir.join(n)).unwrap() == fs::read(reference_path(n)).unwrap(),
            "{n}"
        );
    }
    assert!(!dir.join(".pre-cnibox").exists());
}

/// The ARM images build offline too (`--arch`, the ARM binary as BIN) and say their
/// architecture; they run where the node is ARM (not here).
#[test]
fn image_builds_for_arm() {
    let test = "image_builds_for_arm";
    if !require_root(test) {
        return;
    }
    for (var, arch, variant) in [
        ("CNIBOX_STATIC_AARCH64", "arm64", ""),
        ("CNIBOX_STATIC_ARMV7", "arm", "v7"),
    ] {
        let Some(binary) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
            assert!(
                !require_all(),
                "{test}: {var} is not set (make test sets it)"
            );
            skip_note(test, &format!("{var} is not set (make test sets it)"));
            continue;
        };
        let ctx = Tmp::new(&format!("image-{arch}"));
        fs::copy(&binary, ctx.0.join("cnibox")).unwrap();
        fs::copy(
            common::plugdir::repo().join("LICENSE"),
            ctx.0.join("LICENSE"),
        )
        .unwrap();
        let tag = format!("localhost/cnibox-test-{}-{arch}:1", std::process::id());
        let mut build = Command::new("podman");
        build.args([
            "build",
            "--pull=never",
            "--arch",
            arch,
            "--build-arg",
            "BIN=cnibox",
        ]);
        if !variant.is_empty() {
            build.args(["--variant", variant]);
        }
        let out = common::plugdir::run(
            build
                .args(["-t", &tag, "-f"])
                .arg(common::plugdir::repo().join("Containerfile"))
                .arg(&ctx.0),
        );
        assert!(out.ok, "podman build --arch {arch}: {out:?}");
        let inspect = common::plugdir::run(Command::new("podman").args([
            "image",
            "inspect",
            "--format",
            "{{.Architecture}}",
            &tag,
        ]));
        let _ = Command::new("podman").args(["rmi", "-f", &tag]).output();
        assert_eq!(inspect.stdout.trim(), arch, "{inspect:?}");
    }
}
