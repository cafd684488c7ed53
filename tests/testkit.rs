//! The test kit stays one kit: no test file grows its own copy of what `tests/common` provides
//! (environments, labs, waits, processes, applet lists), and the applet lists follow the binary.
//! A grep over the test sources; each rule names the module to use instead.

mod common;
use common::wait::{eventually, poll, retry, wait_until};
use common::{APPLETS, Sandbox, applets, cnibox};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// (needle, what to use instead). A line (comments aside) containing the needle is a copy.
const RULES: &[(&str, &str)] = &[
    ("fn env_for(", "common::env::env_for"),
    (
        "\"netns\", \"add\"",
        "common::NetNs::create (unique, removed on drop)",
    ),
    (
        "..Env::default()",
        "common::env (env_for, env_id, env_without_netns, with_ifname, with_var)",
    ),
    ("struct Lab", "an `impl Lab` block on common::lab::Lab"),
    ("Deref for Lab", "an `impl Lab` block on common::lab::Lab"),
    (
        "Target = lab::Lab",
        "an `impl Lab` block on common::lab::Lab",
    ),
    (
        "fd{n:02x}",
        "the lab's one IPv6 scheme (Lab::with_v6, dual::node_addr, family::v6_subnet)",
    ),
    (
        "fd{:02x}",
        "the lab's one IPv6 scheme (Lab::with_v6, dual::node_addr, family::v6_subnet)",
    ),
    (
        "Instant::now() +",
        "common::wait (a readiness wait) or common::bounded",
    ),
    (
        "thread::sleep(",
        "common::wait (a readiness wait) or common::bounded",
    ),
    ("fn wait_for(", "common::wait::wait_for"),
    ("fn wait_for<", "common::wait::wait_for"),
    ("fn wait_or(", "common::wait::wait_until_or"),
    ("fn wait_until(", "common::wait::wait_until"),
    ("fn eventually(", "common::wait::eventually / retry"),
    ("fn eventually<", "common::wait::eventually / retry"),
    ("struct Proc(", "common::proc::Proc"),
    ("fn cnibox_binary(", "common::proc::cnibox_binary"),
    ("fn files_under(", "common::proc::files_under"),
    ("fn in_path(", "common::proc::in_path"),
    (
        "const APPLETS",
        "common::applets() (what `cnibox --list` prints)",
    ),
];

/// Files another lane is moving onto the kit: (file, what is left to move). Each must still
/// have a copy (an entry for a clean file fails, so the list only shrinks).
const PENDING: &[(&str, &str)] = &[];

/// The copies in `text`: (line number, line, what to use instead).
fn copies(text: &str) -> Vec<(usize, String, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for (needle, instead) in RULES {
            if code.contains(needle) {
                found.push((i + 1, code.to_string(), *instead));
            }
        }
    }
    found
}

/// The test sources: tests/*.rs, not tests/common (the kit itself) nor this file.
fn test_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("read tests/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| p.file_name().is_some_and(|n| n != "testkit.rs"))
        .collect();
    files.sort();
    assert!(
        files.len() > 20,
        "too few test files found in {}",
        dir.display()
    );
    files
}

#[test]
fn no_test_file_copies_the_kit() {
    let mut report = Vec::new();
    for path in test_files() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let text = std::fs::read_to_string(&path).expect("read test file");
        let found = copies(&text);
        match PENDING.iter().find(|(f, _)| *f == name) {
            Some((_, left)) => assert!(
                !found.is_empty(),
                "tests/{name} has no copy left ({left}): remove it from PENDING"
            ),
            None => {
                report.extend(found.into_iter().map(|(n, line, instead)| {
                    format!("tests/{name}:{n}: {line}\n    use {instead}")
                }))
            }
        }
    }
    assert!(
        report.is_empty(),
        "test files copy what tests/common provides:\n{}",
        report.join("\n")
    );
}

/// The lint finds each kind of copy (so a rule that cannot match is noticed).
#[test]
fn the_lint_sees_each_rule() {
    for (needle, _) in RULES {
        let text = format!("// {needle} in a comment\nfn x() {{\n    {needle}\n}}\n");
        let found = copies(&text);
        assert_eq!(found.len(), 1, "{needle}: {found:?}");
        assert_eq!(found[0].0, 3, "{needle}: {found:?}");
    }
}

/// The applet list is the binary's: `cnibox --list`, every name linked into a sandbox; the
/// hand-written `APPLETS` kept for code in flight may not drift from it.
#[test]
fn applet_lists_follow_the_binary() {
    let out = cnibox(&["--list"]);
    let listed: BTreeSet<&str> = out.stdout.lines().filter(|l| !l.is_empty()).collect();
    let derived: BTreeSet<&str> = applets().iter().copied().collect();
    assert_eq!(derived, listed, "common::applets() against cnibox --list");
    let by_hand: BTreeSet<&str> = APPLETS.iter().copied().collect();
    assert_eq!(
        by_hand, listed,
        "common::APPLETS against cnibox --list: add the new applet (or move its users to applets())"
    );
    let sb = Sandbox::new("testkit-applets");
    for a in &listed {
        assert!(sb.bin.join(a).exists(), "{a} not linked into the sandbox");
    }
}

/// The kit's waits poll until the condition holds (not once, not a fixed time), and a wait
/// whose condition never holds fails.
#[test]
fn waits_are_readiness_waits() {
    let mut calls = 0;
    let got = poll(Duration::from_secs(30), || {
        calls += 1;
        (calls == 5).then_some(calls)
    });
    assert_eq!(got, Some(5), "poll returns once the condition holds");
    assert!(!eventually(Duration::from_millis(30), || false));
    let failed = std::panic::catch_unwind(|| {
        wait_until(
            "a condition that never holds",
            Duration::from_millis(30),
            || false,
        )
    });
    assert!(
        failed.is_err(),
        "wait_until must fail when the limit passes"
    );
    let mut tries = 0;
    let last = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        retry(
            "always failing",
            Duration::from_millis(30),
            || -> Result<(), String> {
                tries += 1;
                Err(format!("try {tries}"))
            },
        )
    }));
    let msg = last
        .err()
        .and_then(|e| e.downcast::<String>().ok())
        .map(|m| *m)
        .unwrap_or_default();
    assert!(
        msg.contains("always failing") && msg.contains("try "),
        "{msg}"
    );
}
