//! The one netlink request/response core, for every protocol cnibox speaks: rtnetlink (links,
//! addresses, routes, tc) and netfilter (nf_tables batches, conntrack).
//!
//! A [`NlSocket`] is bound to the network namespace it was opened in. It numbers requests,
//! sends them, and reads the replies of exactly that request: messages for other sequence
//! numbers (stale replies of an earlier, abandoned request) are skipped, a datagram larger than
//! the buffer is an error rather than silently cut, and a kernel error keeps its errno and the
//! kernel's extended-ack text ([`Error`]).
//!
//! - [`NlSocket::request_ack`]: one request, its replies up to the ACK (or the end of a dump);
//! - [`NlSocket::dump`]: a dump, restarted while the kernel flags it as interrupted;
//! - [`NlSocket::batch`]: several messages in one datagram, one ACK each (nf_tables batches).

use super::Error;
use super::wire::{self, NLMSG_DONE, NLMSG_ERROR, Writer};
use netlink_sys::{Socket, SocketAddr};
use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;
use std::os::fd::{AsFd, BorrowedFd};

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_DUMP: u16 = 0x300;
/// In an NLMSG_ERROR: the echoed request was cut to its header / TLVs follow it.
pub(super) const NLM_F_CAPPED: u16 = 0x100;
pub(super) const NLM_F_ACK_TLVS: u16 = 0x200;
/// NLMSGERR_ATTR_MSG: the extended-ack text.
const NLMSGERR_ATTR_MSG: u16 = 1;

/// Receive buffer: the kernel caps dump datagrams at 32 KiB; batch ACKs come many per datagram.
const RECV_BUF: usize = 64 * 1024;

/// A netlink socket of one protocol in one network namespace.
pub struct NlSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// One reply message: its type and its payload after the netlink header.
pub struct Reply {
    pub ty: u16,
    pub body: Vec<u8>,
}

/// A message of type `ty`: netlink header (length set here; flags and sequence number set when
/// sent), the protocol's fixed header `fixed`, then what `body` writes.
pub fn message(ty: u16, fixed: &[u8], body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.resize(wire::NLMSG_HDRLEN, 0);
    w.buf[4..6].copy_from_slice(&ty.to_ne_bytes());
    w.buf.extend_from_slice(fixed);
    w.buf.resize((w.buf.len() + 3) & !3, 0);
    body(&mut w);
    let len = w.buf.len() as u32;
    w.buf[..4].copy_from_slice(&len.to_ne_bytes());
    w.buf
}

/// Set the flags and sequence number of a message built by [`message`].
fn stamp(msg: &mut [u8], flags: u16, seq: u32) {
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
}

impl NlSocket {
    /// A socket of `protocol` (`NETLINK_ROUTE`, `NETLINK_NETFILTER`) in the calling thread's
    /// network namespace.
    pub fn open(protocol: isize, what: &str) -> Result<NlSocket> {
        let ctx = |step: &str, e| Error::io(&format!("{step} {what} netlink socket"), e);
        let mut sock = Socket::new(protocol).map_err(|e| ctx("open", e))?;
        sock.bind_auto().map_err(|e| ctx("bind", e))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|e| ctx("connect", e))?;
        // Best effort: older kernels lack these and work without them; a failed timeout only
        // loses the bound on a kernel that never answers.
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        let _ = setsockopt(&sock, sockopt::ReceiveTimeout, &TimeVal::new(10, 0));
        // Start the sequence somewhere unlikely to match a stale reply of an earlier process
        // that used the same port id.
        let seq = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs() as u32);
        Ok(NlSocket {
            sock,
            seq,
            buf: Vec::with_capacity(RECV_BUF),
        })
    }

    pub fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Raise the kernel buffers for a large batch (best effort, as `nft` does).
    pub fn grow_buffers(&self, send: usize, recv: usize) {
        if send > 1 << 17 {
            let _ = setsockopt(&self.sock, sockopt::SndBufForce, &send);
        }
        if recv > 1 << 17 {
            let _ = setsockopt(&self.sock, sockopt::RcvBufForce, &recv);
        }
    }

    /// Join the multicast group `group` (RTNLGRP_*): the kernel's notifications of that group
    /// arrive on this socket from then on.
    pub fn join(&self, group: u32) -> Result<()> {
        self.sock
            .add_membership(group)
            .map_err(|e| Error::io(&format!("join netlink group {group}"), e))
    }

    /// Leave the multicast group `group` joined by [`NlSocket::join`].
    pub fn leave(&self, group: u32) -> Result<()> {
        self.sock
            .drop_membership(group)
            .map_err(|e| Error::io(&format!("leave netlink group {group}"), e))
    }

    /// Wait at most `limit` for a datagram (a notification on a socket that joined a group).
    /// `Ok(false)`: nothing came in time. What arrived is not returned: callers re-read the
    /// state they wait on, so a lost notification (ENOBUFS) is only a wake-up like the others.
    pub fn wait(&mut self, limit: std::time::Duration) -> Result<bool> {
        // A zero timeout would mean "block forever" to the kernel.
        let limit = limit.max(std::time::Duration::from_millis(1));
        let tv = TimeVal::new(limit.as_secs() as _, limit.subsec_micros() as _);
        setsockopt(&self.sock, sockopt::ReceiveTimeout, &tv)
            .map_err(|e| Error::new(e as i32, "set netlink receive timeout"))?;
        let got = match self.recv_notification(0) {
            Ok(got) => Ok(got.is_some()),
            // The socket's queue overflowed: notifications were lost, which a re-read covers.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(true),
            Err(e) => Err(Error::io("receive netlink notification", e)),
        };
        // The timeout is this wait's only: a later request waits for its reply as long as the
        // kernel takes (a zero timeval means no timeout).
        let forever = TimeVal::new(0, 0);
        setsockopt(&self.sock, sockopt::ReceiveTimeout, &forever)
            .map_err(|e| Error::new(e as i32, "clear netlink receive timeout"))?;
        got
    }

    /// Read what is queued on a socket that joined a group, without blocking: each message's
    /// type and payload go to `each`. `Ok(false)`: nothing was queued. A lost notification
    /// (ENOBUFS) is an error here: the caller counts messages, and a count with a gap is wrong.
    pub fn take_notifications(&mut self, mut each: impl FnMut(u16, &[u8])) -> Result<bool> {
        let Some(n) = self
            .recv_notification(libc::MSG_DONTWAIT)
            .map_err(|e| Error::io("receive netlink notification", e))?
        else {
            return Ok(false);
        };
        for m in wire::messages(&self.buf[..n]) {
            each(m.ty, m.payload);
        }
        Ok(true)
    }

    /// One datagram of a group into `self.buf` (its length, at most the buffer's), for
    /// [`NlSocket::wait`] and [`NlSocket::take_notifications`]. `None`: none came (the receive
    /// timed out, would block, or was interrupted). ENOBUFS (notifications lost) is left to
    /// the caller: a wake-up for one, a gap for the other.
    fn recv_notification(&mut self, flags: libc::c_int) -> std::io::Result<Option<usize>> {
        self.buf.clear();
        match self.sock.recv(&mut self.buf, flags) {
            Ok(n) => Ok(Some(n.min(self.buf.len()))),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn send(&mut self, buf: &[u8]) -> Result<()> {
        self.sock
            .send(buf, 0)
            .map(drop)
            .map_err(|e| Error::io("send netlink request", e))
    }

    /// Receive one datagram into `self.buf`; a datagram larger than the buffer is an error.
    fn recv(&mut self) -> Result<usize> {
        self.buf.clear();
        // A signal (a stop and continue of the process, a handler a runtime left installed)
        // interrupts the wait for a reply: the reply still comes, so wait again.
        let n = loop {
            match self.sock.recv(&mut self.buf, libc::MSG_TRUNC) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => self.buf.clear(),
                r => break r.map_err(|e| Error::io("receive netlink reply", e))?,
            }
        };
        if n > self.buf.len() {
            return Err(Error::new(
                0,
                format!("netlink reply truncated ({n} bytes)"),
            ));
        }
        Ok(n)
    }

    /// Send `req` (built by [`message`]) with `flags` (NLM_F_REQUEST and NLM_F_ACK added) and
    /// collect its replies until the ACK, or the end of a dump. Returns them and whether the
    /// kernel flagged the dump as interrupted.
    pub fn request_ack(&mut self, mut req: Vec<u8>, flags: u16) -> Result<(Vec<Reply>, bool)> {
        let seq = self.next_seq();
        stamp(&mut req, flags | NLM_F_REQUEST | NLM_F_ACK, seq);
        self.send(&req)?;
        let mut out = Vec::new();
        let mut intr = false;
        loop {
            let n = self.recv()?;
            for m in wire::messages(&self.buf[..n]) {
                if m.seq != seq {
                    continue;
                }
                intr |= m.flags & NLM_F_DUMP_INTR != 0;
                match m.ty {
                    NLMSG_ERROR => {
                        return match status(m.flags, m.payload) {
                            Ok(()) => Ok((out, intr)),
                            Err(e) => Err(e),
                        };
                    }
                    // DONE carries the dump's status like an error message does (it may be
                    // shorter than one on old kernels: then it is a success).
                    NLMSG_DONE => {
                        return match wire::get_u32(m.payload, 0).map(|c| c as i32) {
                            Some(c) if c < 0 => Err(Error::new(-c, "")),
                            _ => Ok((out, intr)),
                        };
                    }
                    ty if ty >= 16 => out.push(Reply {
                        ty,
                        body: m.payload.to_vec(),
                    }),
                    _ => {}
                }
            }
        }
    }

    /// Send `req` like [`NlSocket::request_ack`], but return as soon as the kernel has done
    /// its visible part: when a notification `done(type, payload)` accepts arrives (on a group
    /// this socket has joined), or the request's own ACK or error. The request is sent from a
    /// forked child process, which stays in the kernel for what follows the notification (a
    /// link deletion's RCU barrier in `netdev_run_todo`, 10-30 ms) and exits on its own; the
    /// caller, and the runtime waiting for this process, do not wait for it. Without a child
    /// (fork failed) the request runs here, as `request_ack` would.
    pub fn request_until(
        &mut self,
        mut req: Vec<u8>,
        done: impl Fn(u16, &[u8]) -> bool,
    ) -> Result<()> {
        use std::os::fd::AsRawFd;
        let seq = self.next_seq();
        stamp(&mut req, NLM_F_REQUEST | NLM_F_ACK, seq);
        let fd = self.sock.as_raw_fd();
        // SAFETY: fork has no preconditions. The child (possibly forked from one thread of
        // several) makes only async-signal-safe system calls on memory that exists before the
        // fork (`req`, `fd`): no allocation, no lock, no unwinding, then _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: as above. Everything but the socket is closed first, so that the child
            // holds none of the parent's pipes (the runtime reads stdout to its end) or locks.
            unsafe {
                let lo = fd as libc::c_uint;
                if lo > 0 {
                    libc::syscall(
                        libc::SYS_close_range,
                        0 as libc::c_uint,
                        lo - 1,
                        0 as libc::c_uint,
                    );
                }
                libc::syscall(
                    libc::SYS_close_range,
                    lo + 1,
                    libc::c_uint::MAX,
                    0 as libc::c_uint,
                );
                libc::send(fd, req.as_ptr().cast(), req.len(), 0);
                libc::_exit(0)
            }
        }
        if pid < 0 {
            return self.request_ack(req, 0).map(drop);
        }
        loop {
            let n = match self.recv() {
                Ok(n) => n,
                // Notifications were lost: the request's ACK still comes, later.
                Err(e) if e.errno == libc::ENOBUFS => continue,
                Err(e) => return Err(e),
            };
            for m in wire::messages(&self.buf[..n]) {
                if m.seq == seq && m.ty == NLMSG_ERROR {
                    return status(m.flags, m.payload);
                }
                // (A notification may carry the request's sequence number: the kernel echoes it.)
                if m.ty != NLMSG_ERROR && done(m.ty, m.payload) {
                    return Ok(());
                }
            }
        }
    }

    /// Dump all objects matching `req`, restarted up to 5 times while the kernel flags the
    /// dump as interrupted by a concurrent change (NLM_F_DUMP_INTR).
    pub fn dump(&mut self, req: Vec<u8>, flags: u16) -> Result<Vec<Reply>> {
        for _ in 0..5 {
            let (out, intr) = self.request_ack(req.clone(), flags | NLM_F_DUMP)?;
            if !intr {
                return Ok(out);
            }
        }
        Err(Error::new(
            libc::EINTR,
            "netlink dump kept being interrupted",
        ))
    }

    /// Send `msgs` (each built by [`message`], flags included: NLM_F_REQUEST is added, and
    /// NLM_F_ACK to all but the first and last, the batch delimiters) in one datagram and wait
    /// for the ACK of each message between the delimiters. Returns the first failure with the
    /// index of the message it belongs to (`None`: the batch as a whole). On success, the type
    /// and payload of every other message that came back before the ACKs: what the kernel
    /// echoed for messages flagged `NLM_F_ECHO` (nf_tables: the created objects, with handles).
    pub fn batch(
        &mut self,
        mut msgs: Vec<(Vec<u8>, u16)>,
    ) -> std::result::Result<Echoed, (Option<usize>, Error)> {
        let count = msgs.len().saturating_sub(2);
        let first = self.seq.wrapping_add(1);
        let mut buf = Vec::new();
        let last = msgs.len().saturating_sub(1);
        for (i, (m, flags)) in msgs.iter_mut().enumerate() {
            let ack = if i == 0 || i == last { 0 } else { NLM_F_ACK };
            let seq = self.next_seq();
            stamp(m, *flags | NLM_F_REQUEST | ack, seq);
            buf.extend_from_slice(m);
        }
        let end = self.seq;
        self.grow_buffers(buf.len() + 4096, count * 1024);
        self.send(&buf).map_err(|e| (None, e))?;
        let mut pending = count;
        let mut failed = None;
        let mut echoed = Vec::new();
        while pending > 0 {
            let n = self.recv().map_err(|e| (None, e))?;
            for m in wire::messages(&self.buf[..n]) {
                if m.ty != NLMSG_ERROR {
                    if m.seq.wrapping_sub(first) <= count as u32 {
                        echoed.push((m.ty, m.payload.to_vec()));
                    }
                    continue;
                }
                let st = status(m.flags, m.payload);
                let idx = m.seq.wrapping_sub(first).wrapping_sub(1) as usize;
                if idx < count {
                    pending -= 1;
                    if let (Err(e), None) = (st, &failed) {
                        failed = Some((Some(idx), e));
                    }
                } else if m.seq == first || m.seq == end {
                    // The batch as a whole failed (permissions, generation change, commit).
                    let e = st.err().unwrap_or_else(|| Error::new(libc::EPROTO, ""));
                    return Err((failed.and_then(|f| f.0), e));
                }
            }
        }
        failed.map_or(Ok(echoed), Err)
    }
}

/// What a batch got back besides its ACKs: `(message type, payload)` of each echoed message.
pub type Echoed = Vec<(u16, Vec<u8>)>;

impl AsFd for NlSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// The outcome an NLMSG_ERROR message reports: `Ok` for an ACK, else the errno with the
/// kernel's extended-ack text.
fn status(flags: u16, payload: &[u8]) -> Result<()> {
    match wire::get_u32(payload, 0).map(|c| c as i32) {
        Some(0) => Ok(()),
        Some(c) => {
            let mut e = Error::new(c.abs(), "");
            e.ext = ext_ack(flags, &payload[4..]);
            Err(e)
        }
        None => Err(Error::new(libc::EPROTO, "bad netlink error message")),
    }
}

/// The kernel's extended-ack text (NLMSGERR_ATTR_MSG) from an NLMSG_ERROR body (the echoed
/// request header, capped or not, followed by attributes).
pub(super) fn ext_ack(flags: u16, body: &[u8]) -> String {
    if flags & NLM_F_ACK_TLVS == 0 {
        return String::new();
    }
    let off = if flags & NLM_F_CAPPED != 0 {
        wire::NLMSG_HDRLEN
    } else {
        body.get(..4)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let tlvs = body.get((off + 3) & !3..).unwrap_or_default();
    wire::attrs(tlvs)
        .find(|(ty, _)| *ty == NLMSGERR_ATTR_MSG)
        .map(|(_, v)| wire::get_str(v).trim_end_matches('\n').to_string())
        .unwrap_or_default()
}
