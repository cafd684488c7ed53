//! What every process of this binary needs before its first line of work, done in one place
//! ([`start`], called first thing by `main`) that no entry point — plugin, `cnitool`,
//! `dhcp daemon`, `install`, the tap helper, or one added later — can skip.
//!
//! The binary starts at C's `main`, without std's runtime (see main.rs), so what std's start-up
//! would have done for us and a plugin needs is done here:
//! - closed descriptors 0–2 are opened on `/dev/null`, as std does. Otherwise the first file
//!   the process opens takes the free number: started with stdout closed, a host-local ADD got
//!   its config file and then its store's lock file as fd 1, and its result went there (or
//!   failed with EBADF and left the reservation behind);
//! - SIGPIPE is ignored, so a write to a closed pipe is an error to handle, not a kill;
//! - a panic hook: a panic is a bug, and with `panic = "abort"` it would end the process by
//!   SIGABRT, which a runtime or systemd reports as a crash with no reason. The hook says what
//!   happened in the way the running entry point speaks ([`Voice`]: a CNI error on stdout for a
//!   plugin or cnitool, a line on stderr for the daemon, `install` and the tap helper) and
//!   exits with status 1.

use crate::cni::Version;
use crate::cni::skel;
use crate::error::Error;
use std::sync::Once;
use std::sync::atomic::{AtomicU8, Ordering};

/// How the running entry point reports a panic. Set by [`speak_as`] once `main` knows which
/// entry point runs; until then [`Voice::Cnibox`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Voice {
    /// Before dispatch, or `cnibox --list` and the like: a line on stderr.
    Cnibox = 0,
    /// A CNI plugin, or cnitool (which prints failures as CNI errors too): the error JSON on
    /// stdout, code 999.
    CniError = 1,
    /// `dhcp daemon`: a line on stderr, which the journal keeps; systemd restarts the unit.
    DhcpDaemon = 2,
    /// `cnibox install`: a line on stderr.
    Install = 3,
    /// `cnibox --tap-create`: a line on stderr, which the tap applet reports.
    TapHelper = 4,
    /// `cnibox status`: a line on stderr and exit status 2 (its 1 means "orphans found").
    Status = 5,
}

impl Voice {
    fn from_u8(v: u8) -> Voice {
        match v {
            1 => Voice::CniError,
            2 => Voice::DhcpDaemon,
            3 => Voice::Install,
            4 => Voice::TapHelper,
            5 => Voice::Status,
            _ => Voice::Cnibox,
        }
    }

    /// The prefix of the stderr line (none for [`Voice::CniError`]).
    fn who(self) -> &'static str {
        match self {
            Voice::Cnibox | Voice::CniError => "cnibox",
            Voice::DhcpDaemon => "dhcp daemon",
            Voice::Install => "cnibox install",
            Voice::TapHelper => "cnibox tap helper",
            Voice::Status => "cnibox status",
        }
    }
}

static VOICE: AtomicU8 = AtomicU8::new(Voice::Cnibox as u8);
static HOOK: Once = Once::new();

/// Everything a process needs before its first line of work (module documentation). Call
/// first, before anything can open a file or panic.
pub fn start() {
    repair_std_fds();
    // SAFETY: setting a signal's disposition to SIG_IGN, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    speak_as(Voice::Cnibox);
}

/// Report a panic from now on as `voice` says; installs the hook if [`start`] did not run
/// (a test binary driving `skel::run` itself).
pub fn speak_as(voice: Voice) {
    VOICE.store(voice as u8, Ordering::Relaxed);
    HOOK.call_once(|| std::panic::set_hook(Box::new(report)));
}

fn report(info: &std::panic::PanicHookInfo<'_>) {
    let text = format!("internal error (please report): {info}");
    match Voice::from_u8(VOICE.load(Ordering::Relaxed)) {
        Voice::CniError => {
            let e = Error::internal(text);
            let _ = skel::write_stdout(&skel::error_json(&e, Version::LATEST));
        }
        voice => crate::warn!("{}: {text}", voice.who()),
    }
    // The release profile aborts on panic; an abort is a signal, which runtimes and systemd
    // report as a crash with no reason. Exit like any other failure instead (the daemon's
    // unit restarts it: contrib/systemd, Restart=on-failure). `cnibox status` says "error"
    // with 2, its 1 meaning "orphans found".
    let voice = Voice::from_u8(VOICE.load(Ordering::Relaxed));
    std::process::exit(if voice == Voice::Status { 2 } else { 1 });
}

/// Open `/dev/null` on each of fds 0–2 that is closed, in order, so each open takes the number
/// that is missing (the lowest free one), as std's runtime does before `main`.
fn repair_std_fds() {
    for fd in 0..=2 {
        // SAFETY: F_GETFD only reads the descriptor's flags; any integer may be asked about.
        let closed = unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
        if !closed {
            continue;
        }
        // SAFETY: a NUL-terminated path and plain flags; the new descriptor is deliberately
        // left open for the life of the process (it is the standard stream it stands in for).
        let got = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        if got != fd {
            // No /dev/null (or a descriptor below `fd` closed meanwhile, which nothing here
            // does): going on would let a file the plugin opens take the standard stream's
            // number. std aborts here; an exit status says it without a signal.
            std::process::exit(1);
        }
    }
}
