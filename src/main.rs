//! argv[0] dispatch: `bridge`, `host-local`, … run that applet; `cnibox APPLET` does too;
//! `cnibox --list | --version | --help` describe the binary.
//!
//! The process starts at C's `main`, not at std's runtime: a plugin lives a few milliseconds and
//! std's start-up (a poll of fds 0–2, an alternate signal stack mapped and guarded, SIGSEGV and
//! SIGBUS handlers to print "stack overflow", 14 system calls in all, and their undoing at exit)
//! is a tenth of a VERSION call. What a process needs of it — closed fds 0–2 opened on
//! /dev/null, SIGPIPE ignored — is done by `cnibox::process::start`, with the panic hook, first
//! thing in `main`; stdout is flushed at exit (`std::process::exit`). Arguments come from
//! `main`'s argv (musl gives std none without its runtime).
//!
//! Every entry point is an [`Entry`], reached only through [`enter`], which first tells the
//! panic hook how that entry point reports a panic: a new entry point is a new variant, and the
//! compiler asks for its voice.
#![cfg_attr(not(test), no_main)]
// Under `cargo test` the harness brings its own main and nothing here is reached.
#![cfg_attr(test, allow(dead_code))]
// No unwrap/expect outside tests (as in src/lib.rs).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use cnibox::applets;
use cnibox::cni::skel;
use cnibox::process::Voice;

mod install;

const USAGE: &str = "\
usage: cnibox APPLET          run APPLET as a CNI plugin (CNI_COMMAND etc. in the environment)
       APPLET                 the same, when cnibox is installed under the applet's name
       cnibox dhcp daemon [-socketpath PATH] …   the DHCP lease daemon (`-h`: its flags)
       cnibox install [DIR]   install itself and the applet links into DIR (`-h`: its flags)
       cnibox cnitool add|check|del|gc|status NETWORK NETNS   run a network config as a runtime
       cnibox status [--json] [--gc [--yes]]   node doctor: attachments, leaks, their GC
       cnibox --list          list applets
       cnibox --version       print version and supported CNI spec versions
       cnibox --help          this text";

// The release binary's stand-in for libunwind (see there).
#[cfg(all(
    not(test),
    panic = "abort",
    target_env = "musl",
    any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")
))]
mod nounwind;

#[global_allocator]
static ALLOC: cnibox::alloc::Classes = cnibox::alloc::Classes::new();

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::os::unix::ffi::OsStrExt as _;
    // Before anything can open a file or panic.
    cnibox::process::start();
    let args: Vec<std::ffi::OsString> = (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the C runtime passes argc valid, NUL-terminated strings in argv.
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|a| std::ffi::OsStr::from_bytes(a.to_bytes()).to_owned())
        .collect();
    std::process::exit(real_main(args.into_iter()))
}

/// What this process is, once argv is read.
enum Entry {
    /// A CNI plugin (argv[0] or `cnibox APPLET`).
    Plugin(&'static cnibox::cni::Applet),
    /// `APPLET daemon …` of an applet that is also a daemon (dhcp).
    Daemon(&'static cnibox::cni::Applet, Vec<String>),
    /// The runtime side (`cnitool` link or `cnibox cnitool`): not a plugin, so not in the table.
    Cnitool(Vec<String>),
    /// `cnibox install …`.
    Install(Vec<String>),
    /// `cnibox status …`, the node doctor (src/doctor).
    Status(Vec<String>),
    /// Internal: the tap applet creating a device in an SELinux label (src/tuntap.rs).
    TapHelper(Vec<String>),
    /// A line to print and the exit status (`--list`, `--version`, usage errors).
    Say {
        stdout: bool,
        text: String,
        status: i32,
    },
}

impl Entry {
    fn voice(&self) -> Voice {
        match self {
            Entry::Plugin(_) | Entry::Cnitool(_) => Voice::CniError,
            Entry::Daemon(..) => Voice::DhcpDaemon,
            Entry::Install(_) => Voice::Install,
            Entry::Status(_) => Voice::Status,
            Entry::TapHelper(_) => Voice::TapHelper,
            Entry::Say { .. } => Voice::Cnibox,
        }
    }
}

/// Run `entry`: its exit status.
fn enter(entry: Entry) -> i32 {
    cnibox::process::speak_as(entry.voice());
    injected_panic(entry.voice());
    match entry {
        Entry::Plugin(applet) => skel::run(applets::TABLE, applet),
        Entry::Daemon(applet, rest) => {
            applets::daemon(applet.name, &rest).unwrap_or_else(|| skel::run(applets::TABLE, applet))
        }
        Entry::Cnitool(rest) => cnibox::runtime::main(applets::TABLE, &rest),
        Entry::Install(rest) => install::main(&rest),
        Entry::Status(rest) => cnibox::doctor::main(applets::TABLE, &rest),
        Entry::TapHelper(rest) => cnibox::tuntap::helper_main(&rest),
        Entry::Say {
            stdout: true,
            text,
            status,
        } => say(std::io::stdout(), &text, status),
        Entry::Say { text, status, .. } => say(std::io::stderr(), &text, status),
    }
}

/// Debug builds only (the tests' binary): `CNIBOX_TEST_PANIC=<voice>` (`CniError`,
/// `DhcpDaemon`, …, as `Debug` prints it) panics at the start of the entry point speaking with
/// that voice, so tests/faults.rs proves each entry point reports a panic.
fn injected_panic(voice: Voice) {
    #[cfg(debug_assertions)]
    if std::env::var("CNIBOX_TEST_PANIC").is_ok_and(|v| v == format!("{voice:?}")) {
        panic!("CNIBOX_TEST_PANIC={voice:?}");
    }
    #[cfg(not(debug_assertions))]
    let _ = voice;
}

/// Writes `text` and a newline, then returns `status`. A closed pipe (`cnibox --list | head -1`)
/// or a full disk is not worth a panic: the write's error is dropped, as the shell's tools do.
fn say(mut to: impl std::io::Write, text: &str, status: i32) -> i32 {
    let _ = writeln!(to, "{text}");
    status
}

type Args = std::vec::IntoIter<std::ffi::OsString>;

fn strings(args: Args) -> Vec<String> {
    args.map(|s| s.to_string_lossy().into_owned()).collect()
}

/// `applet`'s entry: the plugin, or given `daemon` as its first argument (`dhcp daemon …`), the
/// daemon it also is.
fn plugin_or_daemon(applet: &'static cnibox::cni::Applet, mut args: Args) -> Entry {
    if args.next().is_some_and(|a| a == "daemon") {
        return Entry::Daemon(applet, strings(args));
    }
    Entry::Plugin(applet)
}

fn real_main(args: Args) -> i32 {
    cnibox::netfilter::linger_at_exit();
    enter(entry(args))
}

/// Which entry point argv names.
fn entry(mut args: Args) -> Entry {
    let argv0 = args.next().unwrap_or_default();
    let base = std::path::Path::new(&argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = base.strip_suffix(".exe").unwrap_or(&base);
    let unknown = |name: &str| Entry::Say {
        stdout: false,
        text: format!("cnibox: unknown applet {name:?} (cnibox --list shows the applets)"),
        status: 1,
    };
    if base == "cnitool" {
        return Entry::Cnitool(strings(args));
    }
    if let Some(applet) = applets::find(base) {
        return plugin_or_daemon(applet, args);
    }
    if !base.starts_with("cnibox") {
        return unknown(base);
    }
    let first = args
        .next()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (stdout, text, status) = match first.as_str() {
        "--list" | "-l" => {
            let names: Vec<&str> = applets::TABLE.iter().map(|a| a.name).collect();
            (true, names.join("\n"), 0)
        }
        "--version" | "-V" => (
            true,
            format!(
                "cnibox {} (commit {}; containernetworking/plugins v{} compatible)\nCNI protocol versions supported: {}",
                env!("CARGO_PKG_VERSION"),
                env!("CNIBOX_COMMIT"),
                cnibox::cni::version::UPSTREAM_RELEASE,
                cnibox::cni::version::list(cnibox::cni::Version::ALL)
            ),
            0,
        ),
        "--help" | "-h" => (true, USAGE.to_string(), 0),
        "" => (false, USAGE.to_string(), 1),
        "install" => return Entry::Install(strings(args)),
        "status" => return Entry::Status(strings(args)),
        cnibox::tuntap::HELPER_OPTION => return Entry::TapHelper(strings(args)),
        opt if opt.starts_with('-') => {
            (false, format!("cnibox: unknown option {opt:?}\n{USAGE}"), 2)
        }
        "cnitool" => return Entry::Cnitool(strings(args)),
        name => {
            return match applets::find(name) {
                Some(applet) => plugin_or_daemon(applet, args),
                None => unknown(name),
            };
        }
    };
    Entry::Say {
        stdout,
        text,
        status,
    }
}
