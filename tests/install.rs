//! Installing over the Go plugins as an operator would: `make install [FORCE=1]`,
//! `make uninstall`, `symlinks.sh` (conflicts, backups, --restore, --hardlink upgrades, failing
//! links, argument errors), and `make demo`'s script end to end.

mod common;

use common::plugdir::{Run, Tmp, applets, assert_all_linked, fake_go_plugin, repo, run, snapshot};
use common::*;
use std::fs;
use std::path::Path;
use std::process::Command;

/// The static release build `make test` names in CNIBOX_STATIC; None, with a skip note (a
/// failure under CNIBOX_REQUIRE_ALL=1), when it is not set.
fn release_build(test: &str) -> Option<std::ffi::OsString> {
    let bin = std::env::var_os("CNIBOX_STATIC").filter(|v| !v.is_empty());
    if bin.is_none() {
        skip_note(test, "CNIBOX_STATIC is not set (make test sets it)");
    }
    bin
}

fn symlinks(args: &[&str], cnibox: Option<&Path>) -> Run {
    let mut cmd = Command::new(repo().join("symlinks.sh"));
    cmd.args(args);
    match cnibox {
        Some(b) => cmd.env("CNIBOX", b),
        None => cmd.env_remove("CNIBOX"),
    };
    run(&mut cmd)
}

#[test]
fn symlinks_refuses_go_plugins_without_force_and_changes_nothing() {
    let t = Tmp::new("install_conflict");
    let dir = t.0.join("bin");
    fs::create_dir_all(&dir).unwrap();
    fs::copy(bin(), dir.join("cnibox")).unwrap();
    fake_go_plugin(&dir.join("bridge"), "bridge");
    fake_go_plugin(&dir.join("portmap"), "portmap");
    let before = snapshot(&dir);
    let out = symlinks(&[dir.to_str().unwrap()], None);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("not cnibox: bridge portmap") && out.stderr.contains("--force"),
        "{out:?}"
    );
    assert_eq!(
        snapshot(&dir),
        before,
        "a refused run changed the directory"
    );
}

#[test]
fn make_install_force_moves_go_plugins_aside_and_uninstall_restores_them() {
    let t = Tmp::new("install_force");
    let dir = t.0.join("bin");
    fs::create_dir_all(&dir).unwrap();
    let names = applets();
    for n in &names {
        fake_go_plugin(&dir.join(n), n);
    }
    fake_go_plugin(&dir.join("vendor-plugin"), "vendor-plugin"); // not an applet: never touched
    let before = snapshot(&dir);
    // CARGO=false: install must use the binary that exists, not rebuild (root may lack cargo).
    let make = |target: &str, force: bool| {
        let mut cmd = Command::new("make");
        cmd.current_dir(repo())
            .arg("--no-print-directory")
            .arg(target)
            .arg(format!("BINDIR={}", dir.display()))
            .arg(format!("BIN={}", bin().display()))
            .arg("CARGO=false");
        if force {
            cmd.arg("FORCE=1");
        }
        run(&mut cmd)
    };
    let out = make("install", false);
    assert!(
        !out.ok,
        "install over Go plugins without FORCE must fail: {out:?}"
    );
    assert!(out.stderr.contains("FORCE=1"), "{out:?}");
    for n in &names {
        assert!(
            fs::read_to_string(dir.join(n)).unwrap().contains("(Go)"),
            "{n} replaced without FORCE"
        );
    }

    let out = make("install", true);
    assert!(out.ok, "{out:?}");
    let installed = dir.join("cnibox");
    assert_all_linked(&dir, &installed);
    let backup = t.0.join("bin.pre-cnibox");
    for n in &names {
        let saved = fs::read_to_string(backup.join(n)).unwrap();
        assert!(saved.contains(&format!("CNI {n} plugin")), "{n}: {saved}");
    }
    assert!(
        fs::read_to_string(dir.join("vendor-plugin"))
            .unwrap()
            .contains("(Go)")
    );
    // The links work as plugins.
    let out = run(Command::new(dir.join("bridge")).env("CNI_COMMAND", "VERSION"));
    assert!(
        out.ok && out.stdout.contains("supportedVersions"),
        "{out:?}"
    );

    // Installing again (an upgrade) keeps the backups and stays linked.
    let out = make("install", true);
    assert!(out.ok, "{out:?}");
    assert_all_linked(&dir, &installed);

    let out = make("uninstall", false);
    assert!(out.ok, "{out:?}");
    assert_eq!(
        snapshot(&dir),
        before,
        "uninstall did not restore the Go plugins"
    );
    assert!(!backup.exists(), "the emptied backup dir stays behind");
}

#[test]
fn hardlink_install_upgrades() {
    let t = Tmp::new("install_hardlink");
    let dir = t.0.join("bin");
    fs::create_dir_all(&dir).unwrap();
    let cnibox = dir.join("cnibox");
    fs::copy(bin(), &cnibox).unwrap();
    let out = symlinks(&["--hardlink", dir.to_str().unwrap()], None);
    assert!(out.ok, "{out:?}");
    assert_all_linked(&dir, &cnibox);
    for a in applets() {
        assert!(!fs::symlink_metadata(dir.join(&a)).unwrap().is_symlink());
    }
    // A new build replaces the file (new inode), as `install` does; the old hard links are
    // copies of cnibox, not foreign plugins, so the refresh must replace them.
    let new = t.0.join("cnibox.new");
    fs::copy(bin(), &new).unwrap();
    fs::rename(&new, &cnibox).unwrap();
    let out = symlinks(&["--hardlink", dir.to_str().unwrap()], None);
    assert!(out.ok, "{out:?}");
    assert_all_linked(&dir, &cnibox);
    // And back to symbolic links.
    let out = symlinks(&[dir.to_str().unwrap()], None);
    assert!(out.ok, "{out:?}");
    for a in applets() {
        assert_eq!(fs::read_link(dir.join(&a)).unwrap(), Path::new("cnibox"));
    }
    // --remove takes only cnibox's links.
    fake_go_plugin(&dir.join("vendor-plugin"), "vendor-plugin");
    let out = symlinks(&["--remove", dir.to_str().unwrap()], None);
    assert!(out.ok, "{out:?}");
    let left: Vec<_> = snapshot(&dir).into_iter().map(|(n, _)| n).collect();
    assert_eq!(left, ["cnibox", "vendor-plugin"]);
}

#[test]
fn failed_links_fail_the_run_and_are_named() {
    // A directory with an applet's name cannot be kept in the backup (no hard link to a
    // directory) nor replaced: the run links every other applet, names that one, exits 1 and
    // leaves no temporary file.
    let t = Tmp::new("install_fail");
    let dir = t.0.join("bin");
    fs::create_dir_all(dir.join("portmap/x")).unwrap();
    let out = symlinks(&["--force", dir.to_str().unwrap()], Some(&bin()));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("bin/portmap in "), "{out:?}");
    assert!(out.stderr.contains("not linked: portmap\n"), "{out:?}");
    assert!(dir.join("portmap/x").is_dir());
    for a in applets().iter().filter(|a| *a != "portmap") {
        assert_eq!(
            fs::read_link(dir.join(a)).unwrap(),
            Path::new("cnibox"),
            "{a}"
        );
    }
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("new"))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn symlinks_argument_errors() {
    let t = Tmp::new("install_args");
    let a = t.0.join("a");
    let b = t.0.join("b");
    let out = symlinks(&[a.to_str().unwrap(), b.to_str().unwrap()], Some(&bin()));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("one directory only"), "{out:?}");
    assert!(!a.exists() && !b.exists());
    let out = symlinks(&["--bogus"], Some(&bin()));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("unknown option --bogus"), "{out:?}");
    let out = symlinks(&["--backup"], Some(&bin()));
    assert_eq!(out.code, Some(2), "{out:?}");
}

/// `make demo`'s script runs to the end: the page served in one container comes back through
/// the hostPort, and nothing is left (namespaces, temp dirs).
#[test]
fn demo_runs_and_cleans_up() {
    if !require_root("demo_runs_and_cleans_up") {
        return;
    }
    let out = run(Command::new(repo().join("demo.sh")).env("CNIBOX", bin()));
    assert!(out.ok, "{out:?}");
    assert!(out.stdout.contains("hello from c2"), "{out:?}");
    assert!(out.stdout.contains(" 0% packet loss"), "{out:?}");
    // The conflist runs through cnibox's cnitool: its CHECK against the cached results passes.
    assert!(out.stdout.contains("c2: ok"), "{out:?}");
    assert!(out.stdout.contains("reservations left in"), "{out:?}");
    assert!(out.stdout.contains(": 0\n"), "{out:?}");
    // The pid in the names is the script's; none of its namespaces may remain.
    let ns = run(Command::new("ip").args(["netns", "list"]));
    let pidtag = out
        .stdout
        .split("cnibox-demo-")
        .nth(1)
        .and_then(|s| s.split('-').next())
        .expect("namespace names printed");
    assert!(
        !ns.stdout.contains(&format!("cnibox-demo-{pidtag}-")),
        "{ns:?}"
    );
}

/// A PATH of every program of the machine's bin directories but `ping` (iputils), plus the
/// `overrides` (name, shell script) written in front: a machine as a newcomer may have it.
fn demo_path(t: &Tmp, overrides: &[(&str, &str)]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let dir = t.0.join("path");
    fs::create_dir_all(&dir).unwrap();
    for (name, script) in overrides {
        let p = dir.join(name);
        fs::write(&p, script).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    for d in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            let name = e.file_name();
            let n = name.to_string_lossy();
            if n.starts_with("ping") || dir.join(&name).exists() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
        }
    }
    dir.display().to_string()
}

/// `make demo` on a machine without iputils: the container-to-container ping is busybox's, the
/// demo still ends with "Done" and status 0.
#[test]
fn demo_needs_no_iputils() {
    if !require_root("demo_needs_no_iputils") {
        return;
    }
    let t = Tmp::new("demo-noping");
    let path = demo_path(&t, &[]);
    let out = run(Command::new(repo().join("demo.sh"))
        .env("CNIBOX", bin())
        .env("PATH", &path));
    assert!(out.ok, "{out:?}");
    assert!(out.stdout.contains(" 0% packet loss"), "{out:?}");
    assert!(out.stdout.contains("Done:"), "{out:?}");
}

/// A step that fails ends the demo with its status and an error, never with "Done" (here the
/// node's `nft` fails).
#[test]
fn demo_fails_when_a_step_fails() {
    if !require_root("demo_fails_when_a_step_fails") {
        return;
    }
    let t = Tmp::new("demo-fail");
    let path = demo_path(&t, &[("nft", "#!/bin/sh\necho broken nft >&2\nexit 3\n")]);
    let out = run(Command::new(repo().join("demo.sh"))
        .env("CNIBOX", bin())
        .env("PATH", &path));
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(!out.stdout.contains("Done:"), "{out:?}");
    assert!(out.stderr.contains("failed (status 3)"), "{out:?}");
    assert!(out.stderr.contains("a step failed"), "{out:?}");
}

/// README's applet table names every applet this build has, with one line each.
#[test]
fn readme_lists_every_applet() {
    let readme = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let list = cnibox(&["--list"]);
    assert!(list.status_ok, "{list:?}");
    for applet in list.stdout.lines() {
        let row = format!("| `{applet}` | ");
        assert_eq!(
            readme.matches(&row).count(),
            1,
            "README's applet table has no single row for {applet}"
        );
    }
}

/// The release build is linked with the functions of `.cargo/hot-functions.txt` packed together
/// (`.cargo/ld-order`). When the code moves on and the list no longer names the functions it
/// has, the packing quietly stops working (a bridge ADD maps 1.1 MB of text instead of ~0.6):
/// this fails first. `make hot-order` regenerates the list.
#[test]
fn hot_function_list_matches_the_release_build() {
    let Some(bin) = release_build("hot_function_list") else {
        return;
    };
    let deps = Path::new(&bin).parent().expect("binary dir").join("deps");
    let newest = fs::read_dir(&deps)
        .expect("deps dir of the release build")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("cnibox-") && n.ends_with(".order")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("no cnibox-*.order: the release build was not linked by .cargo/ld-order");
    let keys = |text: String| -> std::collections::BTreeSet<String> {
        let mut child = Command::new(repo().join(".cargo/ld-order"))
            .arg("--keys")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("ld-order --keys");
        let mut stdin = child.stdin.take().expect("stdin");
        let feeder = std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(text.as_bytes());
        });
        let out = child.wait_with_output().expect("ld-order --keys");
        feeder.join().expect("feeder");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    // Rust functions only: musl's C names are ordered by name whatever the build.
    let rust = |k: &String| k.contains("::");
    let ordered = keys(fs::read_to_string(newest.path()).expect("order file"));
    let listed: Vec<String> = fs::read_to_string(repo().join(".cargo/hot-functions.txt"))
        .expect("hot list")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_owned)
        .filter(rust)
        .collect();
    let found = listed.iter().filter(|k| ordered.contains(*k)).count();
    assert!(
        listed.len() > 500 && found * 10 >= listed.len() * 9,
        "only {found} of the {} functions in .cargo/hot-functions.txt are in the release build \
         ({}): the list is stale, run `make hot-order`",
        listed.len(),
        newest.path().display()
    );
}

/// What the hot-function packing buys, measured on the release build: a VERSION exec (stdin
/// /dev/null, as runtimes and compare.sh spawn it) takes few page faults. A list gone stale by
/// code moving on (the new hot functions it does not name land anywhere in 1 MB of text) went
/// unnoticed by the test above: VERSION took 22 faults instead of 14, and a bridge ADD peaked at
/// 1,012 KiB instead of 696. The kernel maps text by fault, 64 KiB around each, so the count is
/// deterministic on a kernel (the peak RSS is not measurable here: a spawned child's includes
/// its parent's). Not a timing.
#[test]
fn version_exec_takes_few_page_faults() {
    let Some(bin) = release_build("version_exec_takes_few_page_faults") else {
        return;
    };
    let t = Tmp::new("version_faults");
    let bridge = t.0.join("bridge");
    std::os::unix::fs::symlink(&bin, &bridge).unwrap();
    let mut least = i64::MAX;
    for _ in 0..3 {
        // Reaped by wait4 below, which also reads the child's resource usage.
        #[allow(clippy::zombie_processes)]
        let child = Command::new(&bridge)
            .env("CNI_COMMAND", "VERSION")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn VERSION");
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of that plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: the pid is our own unreaped child (`child` never waits for it), and both
        // pointers are to live locals of the types wait4 writes.
        let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
        assert_eq!(pid, child.id() as i32, "wait4");
        assert_eq!(status, 0, "VERSION failed");
        least = least.min(ru.ru_minflt);
    }
    assert!(
        least <= 17,
        "a VERSION exec took {least} page faults (14 with a fresh hot-function list): is \
         .cargo/hot-functions.txt stale? run `make hot-order`"
    );
}

/// `.ci/setup` (what `make test` and `.ci/run` run first) installs only what is missing: on a
/// machine that has everything it installs nothing. Run as root whose PATH lacks cargo (as
/// under `sudo make test`), it says what to do instead.
#[test]
fn setup_is_idempotent_and_says_what_to_do_without_cargo() {
    if !require_root("setup_is_idempotent") {
        return;
    }
    let setup = repo().join(".ci/setup");
    let out = run(&mut Command::new(&setup));
    assert!(out.ok, "{out:?}");
    assert!(
        !out.stdout.contains("== setup:"),
        "a second run installed: {out:?}"
    );
    let out = run(Command::new(&setup)
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("SUDO_USER", "alice"));
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr
            .contains("root's PATH has no rustup/cargo (they are alice's)")
            && out.stderr.contains("sudo env \"PATH=$PATH\" make test"),
        "{out:?}"
    );
}

/// The release binary stays under the 1,500,000-byte budget (README), and it does so without the
/// unwinder and unwind tables a `panic = "abort"` binary never uses: src/nounwind.rs stands in
/// for libunwind (so LTO drops it and std's backtrace symbolizer, gimli and addr2line) and
/// `.cargo/no-unwind-tables.ld` drops `.eh_frame`. Either one undone costs 180–270 KB.
#[test]
fn release_binary_fits_the_budget_without_an_unwinder() {
    let Some(bin) = release_build("size_budget") else {
        return;
    };
    let bytes = fs::read(&bin).expect("the release binary");
    assert!(
        (bytes.len() as u64) < SIZE_BUDGET,
        "{}: {} bytes, the budget is < {SIZE_BUDGET}",
        Path::new(&bin).display(),
        bytes.len()
    );
    let has = |what: &str| bytes.windows(what.len()).any(|w| w == what.as_bytes());
    let found: Vec<&str> = [".eh_frame", "libunwind", "gimli", "addr2line"]
        .into_iter()
        .filter(|what| has(what))
        .collect();
    assert!(
        found.is_empty(),
        "{} contains {found:?}: the unwinder or its tables are linked again",
        Path::new(&bin).display()
    );
}

/// benches/NOTES.md quotes the release binary's size (the size target's sentence and the
/// per-target table's x86_64 row) and how many times smaller it is than Debian 12's plugins in
/// /usr/lib/cni: both must match the built binary (within 2%) so that they cannot drift.
#[test]
fn notes_quote_the_measured_binary_size() {
    let Some(bin) = release_build("notes_size") else {
        return;
    };
    let size = fs::metadata(&bin).expect("the release binary").len() as f64;
    let notes = fs::read_to_string(repo().join("benches/NOTES.md")).expect("benches/NOTES.md");
    let number = |s: &str| -> f64 {
        s.trim_matches(|c: char| !c.is_ascii_digit())
            .replace(',', "")
            .parse()
            .unwrap_or_else(|e| panic!("NOTES.md: {s:?} is not a number: {e}"))
    };
    let sentence = notes
        .lines()
        .find_map(|l| {
            l.split_once(" bytes, ")
                .filter(|(_, r)| r.contains("× smaller than the 16"))
        })
        .expect("NOTES.md: the size target's \"N bytes, R× smaller than the 16 …\" sentence");
    let quoted = number(sentence.0.rsplit(' ').next().unwrap_or(""));
    let ratio: f64 = sentence
        .1
        .split('×')
        .next()
        .unwrap_or("")
        .parse()
        .expect("the ratio");
    let row = notes
        .lines()
        .find(|l| l.starts_with("| `x86_64-unknown-linux-musl` |"))
        .expect("NOTES.md: the per-target table's x86_64 row");
    let row_bytes = number(row.split('|').nth(3).unwrap_or(""));
    for (what, n) in [("size sentence", quoted), ("per-target table", row_bytes)] {
        assert!(
            (n - size).abs() <= size * 0.02,
            "NOTES.md's {what} says {n} bytes, the release binary is {size}: update it"
        );
    }
    let reference: u64 = fs::read_dir(OLDER_REFERENCE_DIR)
        .expect("Debian 12's plugins (.ci/setup)")
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let measured = reference as f64 / size;
    assert!(
        (ratio - measured).abs() <= measured * 0.02,
        "NOTES.md says {ratio}× smaller than {OLDER_REFERENCE_DIR}; measured {measured:.1}×"
    );
}
