//! Helpers for the crate's own unit tests.

/// Whether every test must run: `CNIBOX_REQUIRE_ALL=1` (set by CI) turns a skip into a failure.
pub fn require_all() -> bool {
    std::env::var("CNIBOX_REQUIRE_ALL").is_ok_and(|v| v == "1" || v == "true")
}

/// `if !require_root("test") { return; }` for tests that need root (namespaces, netlink
/// writes): as non-root they skip with a `SKIP` line on stderr (past the harness's output
/// capture), and under `CNIBOX_REQUIRE_ALL=1` they fail instead.
#[track_caller]
pub fn require_root(test: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    assert!(
        !require_all(),
        "{test} needs root, and CNIBOX_REQUIRE_ALL=1 forbids skipping"
    );
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("SKIP {test}: needs root\n").as_bytes(),
    );
    false
}

/// Whether the running kernel was built with `option` (`CONFIG_…=y` or `=m`), from
/// `/proc/config.gz`; `None` when the kernel does not expose its config.
pub fn kernel_has(option: &str) -> Option<bool> {
    let out = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().any(|l| {
        l.strip_prefix(option)
            .is_some_and(|rest| rest == "=y" || rest == "=m")
    }))
}
