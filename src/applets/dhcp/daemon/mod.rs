//! `dhcp daemon` (upstream `daemon.go`): holds the leases of the `dhcp` plugin's attachments.
//!
//! Listens on `-socketpath` (default `/run/cni/dhcp.sock`, under `-hostprefix`), or on the one
//! socket systemd passes (LISTEN_FDS, `contrib/systemd/cnibox-dhcp.socket`). A connection
//! carries one cnibox [`super::proto::Call`] (JSON), or upstream's plugin's net/rpc calls
//! ([`super::gorpc`], after `CONNECT`). Leases are recorded ([`Store`]) and taken up again at
//! start. Each lease has a thread that entered the container namespace and keeps
//! it there (the namespace stays open while the lease lives, so DEL can release the lease even
//! after the runtime removed the namespace's mount). SIGTERM and SIGINT end the daemon: the
//! socket (unless systemd owns it) and the pidfile are removed, leases are not released, as
//! upstream. Beyond upstream: a stale socket file of a daemon that is gone is replaced (a live
//! daemon on it is an error); a lease whose interface disappeared is forgotten, so a later ADD
//! acquires a new one; leases are keyed by the whole attachment (upstream keys them by the
//! client identifier cut to 254 bytes, so long container IDs share one); a new lease whose
//! plugin is gone when the answer is written (its deadline passed) is released at once.
//!
//! A panic on any of its threads ends the whole daemon with status 1 and a line on stderr
//! (the panic hook, `process.rs`; the release build aborts on panic, nothing unwinds): the
//! shipped systemd unit restarts it and every lease resumes from its record.
//!
//! The parts: this file is the process's life (flags, pidfile, the listening socket, signals,
//! the accept loop); [`serve`] a connection (JSON or net/rpc) and its call; [`table`] the
//! leases held, one per attachment, and the verbs on them; [`super::mapping`] what an
//! attachment is to DHCP (client identifier, options, the result an ACK makes).

mod serve;
mod table;

use super::conns::{Conns, Ticket};
use super::flags::{Flags, Stop, USAGE};
use super::lease::Timing;
use super::store::Store;
use crate::error::{Error, Result};
use std::ffi::CString;
use std::os::fd::FromRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;
use table::Daemon;

/// Run `job` on a thread of its own (1 MiB of stack): its handle to join, or `None` when
/// `detached` (the handle is dropped, which detaches it). std's threads here: the daemon is
/// no plugin, so their start-up machinery costs no plugin call anything.
pub(super) fn spawn(
    job: impl FnOnce() + Send + 'static,
    detached: bool,
) -> Result<Option<JoinHandle<()>>> {
    let t = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(job)
        .map_err(|e| Error::io("start a thread", e))?;
    Ok((!detached).then_some(t))
}

/// What SIGTERM and SIGINT remove: the socket (unless systemd's) and the pidfile.
static CLEANUP: OnceLock<Vec<CString>> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    const MSG: &[u8] = b"dhcp daemon: terminating\n";
    // SAFETY: only async-signal-safe calls (write, unlink, _exit) on data set before the
    // handler was installed.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        for p in CLEANUP.get().into_iter().flatten() {
            libc::unlink(p.as_ptr());
        }
        libc::_exit(0);
    }
}

/// `dhcp daemon ARGS…`: the exit status.
pub fn main(args: &[String]) -> i32 {
    // The daemon lives for months: its memory goes back to the system after a burst (the
    // binary's own classes, made for short plugin runs, keep every freed block).
    crate::alloc::use_system();
    let f = match Flags::parse(args) {
        Ok(f) => f,
        Err(Stop::Help) => {
            crate::warn!("{USAGE}");
            return 0;
        }
        Err(Stop::Bad(m)) => {
            crate::warn!("{m}\n{USAGE}");
            return 2;
        }
    };
    match run(f) {
        Ok(()) => 0,
        Err(e) => {
            crate::warn!("dhcp daemon: {e}");
            1
        }
    }
}

fn run(f: Flags) -> std::result::Result<(), String> {
    if !f.pidfile.is_empty() {
        if !f.pidfile.starts_with('/') {
            return Err(format!(
                "Error writing pidfile {:?}: path not absolute",
                f.pidfile
            ));
        }
        std::fs::write(&f.pidfile, std::process::id().to_string())
            .map_err(|e| format!("Error writing pidfile {:?}: {e}", f.pidfile))?;
    }
    let path = match f.socketpath.as_str() {
        "" => super::DEFAULT_SOCKET,
        s => s,
    };
    let path = format!("{}{path}", f.hostprefix);
    let (listener, activated) = listen(&path).inspect_err(|_| {
        let _ = std::fs::remove_file(&f.pidfile);
    })?;
    let store = Store::open(&path).inspect_err(|_| {
        let _ = std::fs::remove_file(&f.pidfile);
        if !activated {
            let _ = std::fs::remove_file(&path);
        }
    })?;
    let owned = [(!activated).then_some(&path), Some(&f.pidfile)];
    let files = owned.into_iter().flatten().filter(|p| !p.is_empty());
    let _ = CLEANUP.set(
        files
            .filter_map(|p| CString::new(p.as_str()).ok())
            .collect(),
    );
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installs a handler that only makes async-signal-safe calls.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    crate::warn!("dhcp daemon: listening on {path}");
    let timing = Timing {
        timeout: f.timeout,
        resend_max: f.resendmax,
        resend_timeout: f.resendtimeout,
        broadcast: f.broadcast,
    };
    let d: &'static Daemon = Box::leak(Box::new(Daemon::new(f.hostprefix, timing, store)));
    d.resume_recorded();
    accept_loop(&listener, d);
    Ok(())
}

/// Each connection on a thread of its own, admitted by [`Conns`] (a cap, idle ones closed).
fn accept_loop(listener: &UnixListener, d: &'static Daemon) {
    let conns: &'static Conns = Box::leak(Box::new(Conns::new()));
    // Doubled on each failed accept in a row (out of file descriptors: no busy loop).
    let mut backoff = Duration::ZERO;
    for conn in listener.incoming() {
        match conn {
            Ok(c) => {
                backoff = Duration::ZERO;
                // Admitted here, in the order of accept, not when its thread runs.
                let Some(ticket) = conns.admit(&c) else {
                    continue;
                };
                let conn = Admitted { ticket, c };
                let job = move || {
                    serve::serve(d, &conn.c, &conn.ticket);
                    drop(conn);
                    give_back();
                };
                if let Err(e) = spawn(job, true) {
                    crate::warn!("dhcp daemon: {e}");
                }
            }
            Err(e) => {
                let out_of_fds = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                if backoff.is_zero() {
                    let more = if out_of_fds {
                        ": closing idle connections, backing off"
                    } else {
                        ""
                    };
                    crate::warn!("dhcp daemon: accept: {e}{more}");
                }
                if out_of_fds {
                    conns.make_room();
                }
                backoff = (backoff * 2).clamp(ACCEPT_BACKOFF.0, ACCEPT_BACKOFF.1);
                std::thread::sleep(backoff);
            }
        }
    }
}

/// An admitted connection. Its fields drop in this order, also when its thread never
/// started: the place is given up before the connection is closed (see [`Conns`]).
struct Admitted {
    ticket: Ticket<'static>,
    c: UnixStream,
}

/// The listener's first and longest wait after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// After a connection: glibc's malloc (a build for the host's tests; the release binary is
/// musl's, whose allocator returns emptied groups on its own) keeps freed memory in its
/// per-thread arenas until asked to give it back.
fn give_back() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own state, under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The socket systemd passed, or a new one at `path`; `true` when systemd's.
fn listen(path: &str) -> std::result::Result<(UnixListener, bool), String> {
    let var = |k| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    if var("LISTEN_PID") == Some(std::process::id()) {
        match var("LISTEN_FDS").unwrap_or(0) {
            0 => {}
            // SAFETY: systemd hands fd 3 to this process (LISTEN_PID) and nothing else owns it.
            1 => unsafe {
                libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
                return Ok((UnixListener::from_raw_fd(3), true));
            },
            n => {
                return Err(format!(
                    "Too many ({n}) FDs passed through socket activation"
                ));
            }
        }
    }
    if let Some(dir) = std::path::Path::new(path).parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("Error getting listener: {}: {e}", dir.display()))?;
    }
    if let Ok(m) = std::fs::symlink_metadata(path)
        && m.file_type().is_socket()
    {
        if UnixStream::connect(path).is_ok() {
            return Err(format!(
                "Error getting listener: {path}: another daemon is listening"
            ));
        }
        let _ = std::fs::remove_file(path);
    }
    UnixListener::bind(path)
        .map(|l| (l, false))
        .map_err(|e| format!("Error getting listener: {path}: {e}"))
}
