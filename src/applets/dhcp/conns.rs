//! The daemon's open connections: how many may be open at once, which of them are idle (no
//! call of theirs is being handled), and the room a new one gets (upstream's daemon has no
//! limit: a crowd of silent clients exhausts its file descriptors and real calls wait).
//! Connections are admitted in the order they were accepted.
//!
//! The limit is a quarter of the open-file limit (RLIMIT_NOFILE), at least 16 and at most
//! 256: the rest is for the leases (a namespace and two sockets each) and the listener. A
//! connection past the limit takes the place of the one idle longest, which is shut down (its
//! thread's read ends); when none is idle, the new one is closed. Either way with a line on
//! stderr, at most one per [`QUIET`].

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lease::lock;

/// How long a connection may stay silent: for its call, or between its calls.
pub(super) const IDLE: Duration = Duration::from_secs(10);

/// At most one line per this long about the limit.
const QUIET: Duration = Duration::from_secs(10);

pub(super) struct Conns {
    limit: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// By age: ids only grow.
    open: BTreeMap<u64, Entry>,
    next: u64,
    said: Option<Instant>,
    unsaid: u64,
}

struct Entry {
    /// The connection's descriptor, only ever shut down (never closed) here, and only while
    /// registered: its thread unregisters ([`Ticket`]'s drop) before it closes it.
    fd: RawFd,
    idle: bool,
    evicted: bool,
}

/// One connection's place, given up when dropped (before the connection is closed).
pub(super) struct Ticket<'a> {
    conns: &'a Conns,
    id: u64,
}

impl Conns {
    /// The limit from this process's open-file limit.
    pub fn new() -> Conns {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into `l`, which lives across the call.
        let soft = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } {
            0 => usize::try_from(l.rlim_cur).unwrap_or(usize::MAX),
            _ => 1024,
        };
        Conns::with_limit((soft / 4).clamp(16, 256))
    }

    fn with_limit(limit: usize) -> Conns {
        Conns {
            limit,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// A place for the new connection `c`: made by shutting down the connection idle longest
    /// when at the limit; `None` (close `c`) when all are busy.
    pub fn admit(&self, c: &UnixStream) -> Option<Ticket<'_>> {
        let mut m = lock(&self.inner);
        let live = m.open.values().filter(|e| !e.evicted).count();
        if live >= self.limit {
            let evicted = m.evict();
            let what = if evicted {
                "closing the one idle longest"
            } else {
                "all busy, closing the new one"
            };
            m.say(&format!(
                "{} connections open, the limit: {what}",
                self.limit
            ));
            if !evicted {
                return None;
            }
        }
        let id = m.next;
        m.next += 1;
        m.open.insert(
            id,
            Entry {
                fd: c.as_raw_fd(),
                idle: true,
                evicted: false,
            },
        );
        Some(Ticket { conns: self, id })
    }

    /// Out of file descriptors: shut down the connection idle longest, if any.
    pub fn make_room(&self) -> bool {
        lock(&self.inner).evict()
    }
}

impl Inner {
    /// Shut down the connection idle longest. One whose call is already waiting to be read
    /// (its thread has not run yet) is not idle: a crowd connecting after a real caller must
    /// not push it out before it is read.
    fn evict(&mut self) -> bool {
        let Some(e) = self
            .open
            .values_mut()
            .find(|e| e.idle && !e.evicted && !has_input(e.fd))
        else {
            return false;
        };
        e.evicted = true;
        // SAFETY: `fd` is a connection still registered (its thread unregisters, under this
        // lock, before closing it), so it is that open socket; shutdown does not close it.
        unsafe { libc::shutdown(e.fd, libc::SHUT_RDWR) };
        true
    }

    fn say(&mut self, what: &str) {
        let now = Instant::now();
        if self.said.is_some_and(|t| now.duration_since(t) < QUIET) {
            self.unsaid += 1;
            return;
        }
        let more = match std::mem::take(&mut self.unsaid) {
            0 => String::new(),
            n => format!(" ({n} more times since the last line)"),
        };
        crate::warn!("dhcp daemon: {what}{more}");
        self.said = Some(now);
    }
}

/// Bytes are waiting to be read on `fd` (FIONREAD); an error counts as none.
fn has_input(fd: RawFd) -> bool {
    let mut n: libc::c_int = 0;
    // SAFETY: `fd` is a registered, open connection (see `Entry::fd`); FIONREAD writes one
    // c_int into `n`, which lives across the call.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    r == 0 && n > 0
}

impl Ticket<'_> {
    /// A call of this connection is being handled (`true`) or was answered (`false`).
    pub fn busy(&self, busy: bool) {
        if let Some(e) = lock(&self.conns.inner).open.get_mut(&self.id) {
            e.idle = !busy;
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        lock(&self.conns.inner).open.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::Conns;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    /// `n` connected pairs: the daemon's end first, the client's second.
    fn pairs(n: usize) -> Vec<(UnixStream, UnixStream)> {
        (0..n).map(|_| UnixStream::pair().unwrap()).collect()
    }

    /// The client's end `c` reads the end of the connection (its daemon end was shut down).
    fn ended(mut c: &UnixStream) -> bool {
        c.read(&mut [0u8; 1]).unwrap() == 0
    }

    /// Past the limit the connection idle longest is shut down (its peer reads the end), a
    /// busy one never; with every one busy the newcomer is refused.
    #[test]
    fn the_idle_longest_makes_room_and_busy_ones_stay() {
        let conns = Conns::with_limit(2);
        let pairs = pairs(4);
        let a = conns.admit(&pairs[0].0).unwrap();
        let b = conns.admit(&pairs[1].0).unwrap();
        a.busy(true);
        let c = conns.admit(&pairs[2].0).unwrap();
        // b (idle) went: its peer sees the end; a (busy) did not.
        assert!(ended(&pairs[1].1));
        pairs[0]
            .1
            .set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        assert!((&pairs[0].1).read(&mut [0u8; 1]).is_err());
        drop(b);
        c.busy(true);
        assert!(conns.admit(&pairs[3].0).is_none());
        c.busy(false);
        assert!(conns.admit(&pairs[3].0).is_some());
        drop(a);
    }

    /// A connection whose call is queued but not yet read is not taken for an idle one,
    /// however old: the newcomer is refused instead (with every other one busy).
    #[test]
    fn a_queued_call_is_not_idle() {
        let conns = Conns::with_limit(2);
        let pairs = pairs(3);
        let _a = conns.admit(&pairs[0].0).unwrap();
        let b = conns.admit(&pairs[1].0).unwrap();
        (&pairs[0].1).write_all(b"{").unwrap();
        b.busy(true);
        assert!(conns.admit(&pairs[2].0).is_none());
        b.busy(false);
        let _c = conns.admit(&pairs[2].0).unwrap();
        assert!(ended(&pairs[1].1));
    }
}
