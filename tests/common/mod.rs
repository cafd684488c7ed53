//! Shared harness for integration tests: runs the BUILT cnibox through applet symlinks exactly as
//! a container runtime would (argv[0] dispatch, CNI_* environment, config on stdin), or the
//! reference Go plugin of the same name for compatibility comparisons: upstream v1.9.1 (Debian
//! unstable's package, unpacked by `.ci/fetch-unstable`, see [`reference_dir`]), and where an
//! older node matters (live swaps, dhcp/firewalld interop) Debian 12's v1.1.1 in `/usr/lib/cni`
//! ([`OLDER_REFERENCE_DIR`], [`Impl::OlderReference`]).
//!
//! ```ignore
//! mod common;
//! use common::*;
//! let sb = Sandbox::new("my_test");
//! let out = sb.ours().add("static", &sb.env(), &conf);   // Output { status_ok, stdout, json, .. }
//! if reference_available("static") {
//!     let theirs = sb.reference().add("static", &sb.env(), &conf);
//!     assert_eq!(normalize(&out.json), normalize(&theirs.json));
//! }
//! ```
//!
//! Each test binary compiles this module separately and uses a subset of it.
#![allow(dead_code)]

pub mod bounded;
pub mod conflist;
pub mod dhcp;
pub mod dual;
pub mod env;
pub mod family;
pub mod lab;
pub mod plugdir;
pub mod proc;
pub mod rng;
pub mod traffic;
pub mod wait;

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Every applet the built binary serves, as `cnibox --list` prints them (asked once per test
/// binary): the sandbox links each of them, and "every applet" loops iterate over this, so a new
/// applet is covered without anyone editing a list.
pub fn applets() -> &'static [&'static str] {
    static LIST: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let out = cnibox(&["--list"]);
        assert!(out.status_ok, "cnibox --list: {out:?}");
        let names: Vec<&'static str> = out
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| &*Box::leak(l.to_string().into_boxed_str()))
            .collect();
        assert!(
            names.len() > 10,
            "cnibox --list lists too few applets: {names:?}"
        );
        names
    })
}

/// The release binary's size budget (README): every target's static, stripped build is smaller.
pub const SIZE_BUDGET: u64 = 1_500_000;

/// The applet names as they were written by hand, kept so that code not yet moved to
/// [`applets`] still builds; `tests/testkit.rs` fails when this drifts from `cnibox --list`.
pub const APPLETS: &[&str] = &[
    "bridge",
    "host-local",
    "static",
    "vlan",
    "loopback",
    "portmap",
    "bandwidth",
    "firewall",
    "tuning",
    "ptp",
    "macvlan",
    "ipvlan",
    "flannel",
    "host-device",
    "dummy",
    "tap",
    "sbr",
    "vrf",
    "dhcp",
];

/// Where `.ci/setup` unpacks the reference plugins of today: upstream v1.9.1, Debian unstable's
/// `containernetworking-plugins` (`.ci/fetch-unstable`, under `$CNIBOX_UNSTABLE`).
pub const REFERENCE_DIR_DEFAULT: &str =
    "/var/cache/cnibox-unstable/containernetworking-plugins/usr/lib/cni";

/// Where Debian 12's package installs the plugins of an older node (v1.1.1): the second
/// reference, for live swaps (Go ADD → cnibox DEL and back) and dhcp/firewalld interop.
pub const OLDER_REFERENCE_DIR: &str = "/usr/lib/cni";

/// The reference plugins' directory: `CNIBOX_REFERENCE_DIR` when set (for example
/// `CNIBOX_REFERENCE_DIR=/usr/lib/cni` points the whole suite back at v1.1.1), else
/// [`REFERENCE_DIR_DEFAULT`] (v1.9.1).
pub fn reference_dir() -> String {
    std::env::var("CNIBOX_REFERENCE_DIR")
        .ok()
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| REFERENCE_DIR_DEFAULT.to_string())
}

/// Every spec version, oldest first.
pub const ALL_VERSIONS: &[&str] = &[
    "0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
];

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tag: String = tag
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{}-{n}-{tag}", std::process::id())
}

/// The cnibox binary cargo built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cnibox"))
}

/// The reference plugin's path.
pub fn reference_path(name: &str) -> PathBuf {
    Path::new(&reference_dir()).join(name)
}

/// The older (v1.1.1) reference plugin's path.
pub fn older_reference_path(name: &str) -> PathBuf {
    Path::new(OLDER_REFERENCE_DIR).join(name)
}

/// Whether every test must run: `CNIBOX_REQUIRE_ALL=1` (set by `.ci/run`) turns each skip into
/// a failure, so a missing tool, reference plugin or privilege cannot make CI pass by accident.
pub fn require_all() -> bool {
    std::env::var("CNIBOX_REQUIRE_ALL").is_ok_and(|v| v == "1" || v == "true")
}

/// Record that `test` skips (part of) its work because of `why`: a failure under
/// [`require_all`], otherwise a `SKIP` line written straight to fd 2, past the test harness's
/// output capture, so skips are visible in every run.
#[track_caller]
pub fn skip_note(test: &str, why: &str) {
    assert!(
        !require_all(),
        "{test} would skip ({why}), and CNIBOX_REQUIRE_ALL=1 forbids skipping"
    );
    // One write, so parallel tests' lines do not interleave.
    let _ = std::io::stderr().write_all(format!("SKIP {test}: {why}\n").as_bytes());
}

/// Whether the reference plugin `name` is installed; prints a skip note when it is not (a
/// failure under `CNIBOX_REQUIRE_ALL=1`), so a compat test can simply
/// `if !reference_available("static") { return; }`.
#[track_caller]
pub fn reference_available(name: &str) -> bool {
    impl_available(Impl::Reference, name)
}

/// [`reference_available`] for either reference ([`Impl::Ours`] is always there).
#[track_caller]
pub fn impl_available(imp: Impl, name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = match imp {
        Impl::Ours => return true,
        Impl::Reference => reference_path(name),
        Impl::OlderReference => older_reference_path(name),
    };
    let ok =
        std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !ok {
        skip_note(
            &format!("reference comparison ({name})"),
            &format!("{} missing", path.display()),
        );
    }
    ok
}

/// The Go references a live-swap or interop test runs against: v1.9.1 and v1.1.1, each that is
/// installed (a missing one is a skip note, a failure under `CNIBOX_REQUIRE_ALL=1`).
#[track_caller]
pub fn go_references(name: &str) -> Vec<Impl> {
    [Impl::Reference, Impl::OlderReference]
        .into_iter()
        .filter(|&i| impl_available(i, name))
        .collect()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `if !require_root("test name") { return; }` — prints a skip note when not root (a failure
/// under `CNIBOX_REQUIRE_ALL=1`).
#[track_caller]
pub fn require_root(test: &str) -> bool {
    let root = is_root();
    if !root {
        skip_note(test, "needs root");
    }
    root
}

/// A per-test directory (`$TMPDIR/cnibox-<pid>-<n>-<test>`) whose `bin/` holds the applet
/// symlinks; removed on drop.
pub struct Sandbox {
    pub root: PathBuf,
    pub bin: PathBuf,
}

impl Sandbox {
    pub fn new(test: &str) -> Sandbox {
        let root = std::env::temp_dir().join(format!("cnibox-{}", unique(test)));
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).expect("create sandbox");
        let sb = Sandbox { root, bin };
        for a in applets() {
            sb.link(a);
        }
        sb
    }

    /// Add a symlink `bin/<name>` → cnibox (e.g. an unknown applet name) and return its path.
    pub fn link(&self, name: &str) -> PathBuf {
        let p = self.bin.join(name);
        std::os::unix::fs::symlink(bin(), &p).expect("symlink applet");
        p
    }

    /// Where cnibox keeps its GC owner records when this sandbox's plugins run.
    pub fn state_dir(&self) -> String {
        self.path("cnibox-state").display().to_string()
    }

    /// The container ID libcni's cache (`CNI_CACHE_DIR` = `cache/` of this sandbox, as the
    /// doctor and dhcp tests set it) records for the attachment in namespace `netns`.
    pub fn cached_cid(&self, netns: &str) -> String {
        let results = std::fs::read_dir(self.path("cache/results")).expect("cache/results");
        results
            .flatten()
            .filter_map(|e| {
                let v: Value = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
                (v["netns"] == netns).then(|| v["containerId"].as_str().map(String::from))?
            })
            .next()
            .unwrap_or_else(|| panic!("no cache entry for {netns}"))
    }

    /// Drop the cache entries of container `cid`, as a runtime killed between ADD and its
    /// cache write leaves it; at least one must go.
    pub fn drop_cache_of(&self, cid: &str) {
        let results = std::fs::read_dir(self.path("cache/results")).expect("cache/results");
        let mut dropped = 0;
        for f in results.flatten() {
            if f.file_name().to_string_lossy().contains(cid) {
                std::fs::remove_file(f.path()).unwrap();
                dropped += 1;
            }
        }
        assert!(dropped > 0, "no cache entry of {cid}");
    }

    /// A scratch path inside the sandbox (for data dirs etc.).
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The default environment: fixed container ID, `eth0`, a dummy netns path, CNI_PATH unset
    /// (the runner then uses the implementation's own dir).
    pub fn env(&self) -> Env {
        Env::default()
    }

    /// `imp`, run inside the node namespace `node`.
    pub fn plugin_in<'a>(&'a self, imp: Impl, node: &'a NetNs) -> Plugin<'a> {
        Plugin {
            sb: self,
            imp,
            node: Some(node),
        }
    }
    pub fn plugin(&self, imp: Impl) -> Plugin<'_> {
        Plugin {
            sb: self,
            imp,
            node: None,
        }
    }
    pub fn ours(&self) -> Plugin<'_> {
        self.plugin(Impl::Ours)
    }
    pub fn reference(&self) -> Plugin<'_> {
        self.plugin(Impl::Reference)
    }
    pub fn older_reference(&self) -> Plugin<'_> {
        self.plugin(Impl::OlderReference)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The CNI_* environment of one invocation. An empty string leaves the variable unset, which is
/// how tests express "missing". `path: None` means the implementation's default CNI_PATH (the
/// sandbox bin dir for ours, the reference's own directory for the references).
#[derive(Clone, Debug)]
pub struct Env {
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    pub path: Option<String>,
    /// More variables (e.g. `CNI_NETNS_OVERRIDE`).
    pub extra: Vec<(String, String)>,
}

impl Env {
    /// The CNI_* variables a runtime sets for `command` with CNI_PATH `path` (empty ones left
    /// unset), then [`Env::extra`].
    pub fn vars<'a>(&'a self, command: &'a str, path: &'a str) -> Vec<(&'a str, &'a str)> {
        let mut vars: Vec<(&str, &str)> = [
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", self.container_id.as_str()),
            ("CNI_NETNS", self.netns.as_str()),
            ("CNI_IFNAME", self.ifname.as_str()),
            ("CNI_ARGS", self.args.as_str()),
            ("CNI_PATH", path),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect();
        vars.extend(self.extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        vars
    }
}

impl Default for Env {
    fn default() -> Env {
        Env {
            container_id: "cnibox-test-1".into(),
            netns: "/run/netns/cnibox-test-none".into(),
            ifname: "eth0".into(),
            args: String::new(),
            path: None,
            extra: Vec::new(),
        }
    }
}

impl Env {
    pub fn with_args(mut self, args: &str) -> Env {
        self.args = args.into();
        self
    }
    pub fn with_netns(mut self, netns: &str) -> Env {
        self.netns = netns.into();
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// cnibox through a symlink in the sandbox.
    Ours,
    /// The Go plugin of today (v1.9.1) in [`reference_dir`].
    Reference,
    /// The Go plugin of an older node (v1.1.1) in [`OLDER_REFERENCE_DIR`].
    OlderReference,
}

impl Impl {
    /// A short name for messages: `ours`, `v1.9.1`, `v1.1.1`.
    pub fn label(self) -> &'static str {
        match self {
            Impl::Ours => "ours",
            Impl::Reference => "v1.9.1",
            Impl::OlderReference => "v1.1.1",
        }
    }
}

/// What a plugin run produced.
#[derive(Clone)]
pub struct Output {
    pub status_ok: bool,
    /// The exit code; `None` when a signal ended the program ([`exec`] then notes which on
    /// stderr, and whether it was the deadline's SIGKILL: see [`Output::crash`]).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// stdout parsed as JSON, `Value::Null` if empty or not JSON.
    pub json: Value,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Output {
    /// Assert success and return the parsed stdout.
    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert!(self.status_ok, "expected success, got {self:?}");
        &self.json
    }
    /// Assert failure with CNI error `code` and return the error message.
    #[track_caller]
    pub fn err(&self, code: u64) -> String {
        assert!(
            !self.status_ok,
            "expected error {code}, got success: {self:?}"
        );
        assert_eq!(self.json["code"].as_u64(), Some(code), "{self:?}");
        self.json["msg"].as_str().unwrap_or_default().to_string()
    }
    /// The error code on stdout, if any.
    pub fn err_code(&self) -> Option<u64> {
        self.json["code"].as_u64()
    }
}

/// What cnibox's driver (src/cni/skel.rs) puts in front of a panic's text: its panic hook
/// prints `{"code": 999, "msg": "internal error (please report): panicked at …"}` and exits 1,
/// which reads like any failed plugin unless somebody looks for it.
pub const PANIC_MARKER: &str = "internal error (please report)";

/// What [`exec`] appends to stderr when it killed the program at the deadline
/// [`with_deadline`] set (the fields of [`Output`] stay as they were, so code that builds one
/// keeps compiling).
pub const DEADLINE_NOTE: &str = "[common::exec: killed at its deadline]";
/// What [`exec`] appends to stderr when a signal ended the program: `… signal N]`.
pub const SIGNAL_NOTE: &str = "[common::exec: killed by signal";

impl Output {
    /// Why this run is a crash whatever the test expected: a hang past the deadline, ended by a signal (SIGSEGV of a stack
    /// overflow, SIGABRT of a `panic = "abort"` build), or a panic the driver turned into an
    /// error (the [`PANIC_MARKER`], or Rust's own `panicked at` on stderr). `None` otherwise.
    pub fn crash(&self) -> Option<String> {
        if self.timed_out() {
            return Some("ran past its deadline (a hang)".into());
        }
        if self.code.is_none() {
            let sig = self
                .stderr
                .split(SIGNAL_NOTE)
                .nth(1)
                .and_then(|t| t.split(']').next())
                .unwrap_or(" ?");
            return Some(format!("killed by signal{sig}"));
        }
        if self.stdout.contains(PANIC_MARKER) || self.stderr.contains(PANIC_MARKER) {
            return Some("panicked (the driver's panic marker)".into());
        }
        if self.stderr.contains("panicked at") {
            return Some("panicked (Rust's panic message on stderr)".into());
        }
        None
    }

    /// Whether [`exec`] killed the program at its deadline.
    pub fn timed_out(&self) -> bool {
        self.stderr.contains(DEADLINE_NOTE)
    }
}

/// Run any program with a clean environment (only PATH is kept) plus `vars`. A crash (see
/// [`Output::crash`]) fails the calling test here, so every test that runs the binary through
/// this helper — [`Plugin::run`] and everything built on it — fails on a panic or a signal
/// whatever it asserts afterwards. A test that kills a program on purpose uses
/// [`exec_unchecked`].
#[track_caller]
pub fn exec(program: &Path, args: &[&str], vars: &[(&str, &str)], stdin: &str) -> Output {
    let out = exec_unchecked(program, args, vars, stdin);
    if let Some(why) = out.crash() {
        panic!(
            "{} {args:?} crashed: {why}\n  stdin: {}\n{out:?}",
            program.display(),
            stdin.chars().take(400).collect::<String>()
        );
    }
    out
}

/// [`exec`] without the crash check, for a test that sends a signal on purpose (strace's fault
/// injection) or proves that the check fires; it must then look at [`Output::crash`] itself.
pub fn exec_unchecked(program: &Path, args: &[&str], vars: &[(&str, &str)], stdin: &str) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = std::env::var_os("PATH") {
        cmd.env("PATH", p);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    let mut timed_out = false;
    let out = match DEADLINE.get() {
        None => {
            if let Some(mut i) = child.stdin.take() {
                // A plugin may exit without reading stdin (VERSION): ignore EPIPE.
                let _ = i.write_all(stdin.as_bytes());
            }
            child.wait_with_output().expect("wait for plugin")
        }
        Some(limit) => {
            // A plugin that hangs may never read its stdin either: feed it from a thread.
            let feeder = child.stdin.take().map(|mut i| {
                let input = stdin.as_bytes().to_vec();
                std::thread::spawn(move || {
                    let _ = i.write_all(&input);
                })
            });
            let pid = child.id() as libc::pid_t;
            let (tx, rx) = std::sync::mpsc::channel();
            let waiter = std::thread::spawn(move || {
                let _ = tx.send(child.wait_with_output());
            });
            let res = match rx.recv_timeout(limit) {
                Ok(r) => r,
                Err(_) => {
                    timed_out = true;
                    // SAFETY: kill(2) has no memory preconditions. `pid` is the child the
                    // waiter thread has not reaped (it has not answered), so it names no
                    // other process.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    rx.recv().expect("waiter thread")
                }
            };
            let _ = waiter.join();
            if let Some(f) = feeder {
                let _ = f.join();
            }
            res.expect("wait for plugin")
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    use std::os::unix::process::ExitStatusExt;
    if timed_out {
        stderr.push_str(&format!("\n{DEADLINE_NOTE}\n"));
    } else if let Some(sig) = out.status.signal() {
        stderr.push_str(&format!("\n{SIGNAL_NOTE} {sig}]\n"));
    }
    Output {
        status_ok: out.status.success() && !timed_out,
        code: out.status.code(),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
        stderr,
    }
}

thread_local! {
    /// The deadline [`with_deadline`] sets for this thread's runs.
    static DEADLINE: std::cell::Cell<Option<std::time::Duration>> =
        const { std::cell::Cell::new(None) };
}

/// Run `f` with every program it starts through [`exec`] (and so every [`Plugin::run`]) killed
/// after `limit`: the run then fails as a crash ("ran past its deadline") instead of hanging
/// the test suite. Without it, runs have no deadline.
pub fn with_deadline<T>(limit: std::time::Duration, f: impl FnOnce() -> T) -> T {
    let old = DEADLINE.replace(Some(limit));
    // Restored even when `f` panics (a crash caught by the caller's catch_unwind).
    struct Restore(Option<std::time::Duration>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.set(self.0);
        }
    }
    let _restore = Restore(old);
    f()
}

/// `cnibox ARGS…` run directly (no CNI environment).
#[track_caller]
pub fn cnibox(args: &[&str]) -> Output {
    exec(&bin(), args, &[], "")
}

/// Runs one implementation of the applets.
pub struct Plugin<'a> {
    pub sb: &'a Sandbox,
    pub imp: Impl,
    /// Run the plugin inside this "node" namespace (`ip netns exec`), so bridges, rules and
    /// sysctls it creates never touch the machine's own namespace.
    pub node: Option<&'a NetNs>,
}

impl Plugin<'_> {
    pub fn program(&self, applet: &str) -> PathBuf {
        match self.imp {
            Impl::Ours => self.sb.bin.join(applet),
            Impl::Reference => reference_path(applet),
            Impl::OlderReference => older_reference_path(applet),
        }
    }

    fn default_path(&self) -> String {
        match self.imp {
            Impl::Ours => self.sb.bin.display().to_string(),
            Impl::Reference => reference_dir(),
            Impl::OlderReference => OLDER_REFERENCE_DIR.to_string(),
        }
    }

    /// Run `applet` with CNI_COMMAND=`command` (empty: unset) and `stdin`.
    #[track_caller]
    pub fn run(&self, applet: &str, command: &str, env: &Env, stdin: &str) -> Output {
        let path = env.path.clone().unwrap_or_else(|| self.default_path());
        let mut vars = env.vars(command, &path);
        // cnibox's GC owner records go to the sandbox, not the machine's /var/lib/cni/cnibox
        // (a test that sets CNIBOX_STATE_DIR itself keeps its own).
        let state = self.sb.state_dir();
        if !vars.iter().any(|(k, _)| *k == "CNIBOX_STATE_DIR") {
            vars.push(("CNIBOX_STATE_DIR", state.as_str()));
        }
        // firewall picks firewalld when it owns its name on the system bus: a test never talks
        // to the machine's bus (whose firewalld it would change) unless it names a bus itself.
        if !vars.iter().any(|(k, _)| *k == "DBUS_SYSTEM_BUS_ADDRESS") {
            vars.push((
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/nonexistent/cnibox-test-bus",
            ));
        }
        match self.node {
            None => exec(&self.program(applet), &[], &vars, stdin),
            Some(node) => {
                let prog = self.program(applet).display().to_string();
                exec(
                    Path::new("ip"),
                    &["netns", "exec", &node.name, &prog],
                    &vars,
                    stdin,
                )
            }
        }
    }

    /// Run with a JSON config.
    #[track_caller]
    pub fn cmd(&self, applet: &str, command: &str, env: &Env, conf: &Value) -> Output {
        self.run(applet, command, env, &conf.to_string())
    }
    #[track_caller]
    pub fn add(&self, applet: &str, env: &Env, conf: &Value) -> Output {
        self.cmd(applet, "ADD", env, conf)
    }
    #[track_caller]
    pub fn del(&self, applet: &str, env: &Env, conf: &Value) -> Output {
        self.cmd(applet, "DEL", env, conf)
    }
    #[track_caller]
    pub fn check(&self, applet: &str, env: &Env, conf: &Value) -> Output {
        self.cmd(applet, "CHECK", env, conf)
    }
    #[track_caller]
    pub fn status(&self, applet: &str, conf: &Value) -> Output {
        self.cmd(applet, "STATUS", &self.sb.env(), conf)
    }
    #[track_caller]
    pub fn gc(&self, applet: &str, conf: &Value) -> Output {
        self.cmd(applet, "GC", &self.sb.env(), conf)
    }

    /// The spec versions the implementation's `applet` reports for VERSION.
    pub fn versions(&self, applet: &str) -> Vec<String> {
        let out = self.run(
            applet,
            "VERSION",
            &self.sb.env(),
            r#"{"cniVersion":"0.4.0"}"#,
        );
        out.ok()["supportedVersions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A result as compared across implementations. Nothing is dropped: v1.9.1 and cnibox print
/// `"dns": {}` up to spec 0.4.0 and leave an empty DNS out from 1.0.0 (v1.1.1 printed it in
/// every version), and a test must see it if either stops doing so.
pub fn normalize(v: &Value) -> Value {
    v.clone()
}

/// Put `prevResult` into a config (for CHECK/DEL and chained plugins).
pub fn with_prev(conf: &Value, prev: &Value) -> Value {
    let mut c = conf.clone();
    c["prevResult"] = prev.clone();
    c
}

/// A network namespace `cnibox-t-<pid>-<n>` created with `ip netns add`, deleted on drop.
/// Needs root: guard the test with [`require_root`].
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    pub fn create() -> NetNs {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("cnibox-t-{}-{n}", std::process::id());
        let out = exec(Path::new("ip"), &["netns", "add", &name], &[], "");
        assert!(out.status_ok, "ip netns add {name}: {out:?}");
        NetNs { name }
    }

    /// The path to pass as CNI_NETNS.
    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.name)
    }

    /// Run a command inside the namespace via `ip netns exec`.
    #[track_caller]
    pub fn exec(&self, cmd: &[&str]) -> Output {
        let mut args = vec!["netns", "exec", self.name.as_str()];
        args.extend_from_slice(cmd);
        exec(Path::new("ip"), &args, &[], "")
    }

    /// Like [`NetNs::exec`] but asserts success and returns stdout.
    #[track_caller]
    pub fn sh(&self, cmd: &[&str]) -> String {
        let out = self.exec(cmd);
        assert!(out.status_ok, "{cmd:?} in {}: {out:?}", self.name);
        out.stdout
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = exec(Path::new("ip"), &["netns", "del", &self.name], &[], "");
    }
}
