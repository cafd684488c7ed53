//! The nf_tables socket: batches applied atomically (with retries of transient conflicts),
//! single requests and queries, and the socket kept open until exit after a commit.

use super::{
    BATCH_BEGIN, BATCH_END, Batch, F_DUMP, F_ECHO, Family, GETGEN, NEWRULE, NFNL_BATCH_GENID,
    NFTA_GEN_ID, RuleInfo, SUBSYS, TRIES,
};
use crate::error::{Context, Error, Result};
use crate::netlink::Error as NlError;
use crate::netlink::socket::{Echoed, NlSocket, message};
use netlink_sys::protocols::NETLINK_NETFILTER;
use nix::errno::Errno;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};
#[cfg(test)]
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// A netfilter netlink socket bound to the network namespace it was opened in.
pub struct Nftables {
    sock: NlSocket,
}

pub(super) static LINGER: AtomicBool = AtomicBool::new(false);

/// Release netfilter sockets in the background when they are dropped, for the short-lived
/// plugin process only: `main` calls it, library users and tests do not.
///
/// Closing any netfilter socket (not only one that committed: a query's too) waits until the
/// kernel has destroyed what earlier commits in the namespace deleted: `nft_rcv_nl_event`
/// flushes nf_tables' destroy work, an RCU grace period of 10–30 ms, and a process closes its
/// sockets at exit at the latest, so every plugin whose DEL deleted a rule paid that wait.
/// Instead the socket is handed to the kernel ([`release_in_background`]).
pub fn linger_at_exit() {
    LINGER.store(true, Ordering::Relaxed);
}

impl Drop for Nftables {
    fn drop(&mut self) {
        linger(self.sock.as_fd());
    }
}

/// What every netfilter socket's owner does before closing it (the iptables backend's commit
/// watch too): in a plugin process ([`linger_at_exit`]), hand it to the kernel to release in
/// the background. On failure the socket is closed as usual (and waits).
pub(crate) fn linger(fd: BorrowedFd) {
    if LINGER.load(Ordering::Relaxed) {
        let _ = release_in_background(fd);
    }
}

/// Let the kernel release `fd`'s socket after we close it, in a kernel worker rather than in
/// this process: a copy travels, with one end of a unix socket pair, into that end's own
/// receive queue. Once both ends are closed nothing can read it: an unreachable cycle that the
/// unix sockets' garbage collector frees, closing our socket — in a workqueue since Linux
/// 6.10, in the closing process before (then it is a plain close). The kernel's work is the
/// same either way (what was deleted is destroyed after the grace period; the next commit in
/// the namespace waits for that as it would for our own close); only our exit stops waiting.
fn release_in_background(fd: BorrowedFd) -> nix::Result<()> {
    use nix::sys::socket::{AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType};
    use nix::sys::socket::{sendmsg, socketpair};
    use std::os::fd::AsRawFd;
    let (a, b) = socketpair(
        AddressFamily::Unix,
        SockType::Datagram,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    let fds = [a.as_raw_fd(), fd.as_raw_fd()];
    let msg = [std::io::IoSlice::new(b"x")];
    sendmsg::<()>(
        b.as_raw_fd(),
        &msg,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

pub(super) fn strerror(errno: i32) -> &'static str {
    Errno::from_raw(errno).desc()
}

/// The errno of a refusal; EIO when the kernel's answer carried none.
fn errno(e: &NlError) -> i32 {
    if e.errno == 0 { libc::EIO } else { e.errno }
}

pub(super) fn transient(errno: i32) -> bool {
    [libc::EINTR, libc::EAGAIN, libc::EBUSY, libc::ERESTART].contains(&errno)
}

/// A netfilter message: netlink header, nfgenmsg (family, version 0, big-endian resource id),
/// then `body`.
pub(super) fn nf_message(ty: u16, family: u8, res_id: u16, body: &[u8]) -> Vec<u8> {
    let mut fixed = [family, 0, 0, 0];
    fixed[2..].copy_from_slice(&res_id.to_be_bytes());
    message(ty, &fixed, |w| w.buf.extend_from_slice(body))
}

pub(super) fn nft_type(ty: u8) -> u16 {
    SUBSYS << 8 | ty as u16
}

impl Nftables {
    /// Open a socket in the current network namespace.
    pub fn open() -> Result<Nftables> {
        Ok(Nftables {
            sock: NlSocket::open(NETLINK_NETFILTER, "nftables").ctx("nftables")?,
        })
    }

    /// Open a socket in the network namespace at `netns` (e.g. `/var/run/netns/NAME`); only the
    /// calling thread switches, and it switches back before returning. The plugins open theirs
    /// inside the namespace they entered; the tests open them from outside.
    #[cfg(test)]
    pub fn open_in(netns: &Path) -> Result<Nftables> {
        let path = netns.to_string_lossy();
        crate::netns::NetNs::open(&path)
            .map_err(Error::from)?
            .enter(Nftables::open)?
    }

    /// Apply all operations of `batch` atomically. Transient conflicts (EBUSY, EINTR, EAGAIN,
    /// ERESTART) are retried a few times before failing with a try-again error.
    pub fn apply(&mut self, batch: &Batch) -> Result<()> {
        self.apply_inner(batch, false).map(drop)
    }

    /// [`Nftables::apply`], returning the rules the batch added as the kernel reports them
    /// (with their handles, which a later delete needs).
    pub fn apply_echo(&mut self, batch: &Batch) -> Result<Vec<RuleInfo>> {
        let echoed = self.apply_inner(batch, true)?;
        Ok(echoed
            .iter()
            .filter(|(ty, _)| *ty == nft_type(NEWRULE))
            .filter_map(|(_, m)| m.get(4..))
            .map(|body| super::dump::parse_rule(body).1)
            .collect())
    }

    fn apply_inner(&mut self, batch: &Batch, echo: bool) -> Result<Echoed> {
        if let Some(e) = &batch.err {
            return Err(e.clone());
        }
        if batch.ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut tries = 0;
        loop {
            let (what, errno, ext) = match self.apply_once(batch, echo) {
                Ok(echoed) => return Ok(echoed),
                Err((i, e)) => (
                    i.map_or("apply batch", |i| batch.ops[i].what.as_str()),
                    errno(&e),
                    e.ext,
                ),
            };
            let mut msg = format!("nftables: {what}: {}", strerror(errno));
            if !ext.is_empty() {
                msg = format!("{msg} ({ext})");
            }
            tries += 1;
            if !transient(errno) {
                return Err(Error::internal(msg).with_errno(errno));
            }
            if tries >= TRIES {
                return Err(Error::try_again(msg).with_errno(errno));
            }
            std::thread::sleep(std::time::Duration::from_millis(20 * tries as u64));
        }
    }

    /// The ruleset's generation, which every commit in the namespace advances: a batch
    /// [`Batch::planned_at`] it applies only if nothing was committed since.
    pub(crate) fn generation(&mut self) -> Result<u32> {
        let msgs = self
            .query(
                format_args!("get generation"),
                GETGEN,
                Family::Unspec,
                0,
                &[],
            )?
            .unwrap_or_default();
        msgs.iter()
            .flat_map(|m| crate::netfilter::msg::attrs(m))
            .find(|(ty, _)| *ty == NFTA_GEN_ID)
            .map(|(_, d)| crate::netfilter::msg::get_be32(d))
            .ok_or_else(|| Error::internal("nftables: the generation reply has no id"))
    }

    /// One attempt at `batch`, no retries: the errno of a refusal (ERESTART when the
    /// generation it was planned at is gone).
    pub(crate) fn apply_attempt(&mut self, batch: &Batch) -> std::result::Result<(), i32> {
        if batch.err.is_some() {
            return Err(libc::EINVAL);
        }
        if batch.ops.is_empty() {
            return Ok(());
        }
        self.apply_once(batch, false)
            .map(drop)
            .map_err(|(_, e)| errno(&e))
    }

    /// One attempt: Err((index of the failing op or None for the batch itself, the error)).
    pub(super) fn apply_once(
        &mut self,
        batch: &Batch,
        echo: bool,
    ) -> std::result::Result<Echoed, (Option<usize>, NlError)> {
        let mut msgs = Vec::with_capacity(batch.ops.len() + 2);
        let mut begin = crate::netfilter::msg::Writer::default();
        if let Some(g) = batch.genid {
            begin.be32(NFNL_BATCH_GENID, g);
        }
        msgs.push((nf_message(BATCH_BEGIN, 0, SUBSYS, &begin.buf), 0));
        for op in &batch.ops {
            let m = nf_message(nft_type(op.ty), op.family as u8, 0, &op.body);
            let echo = if echo && op.ty == NEWRULE { F_ECHO } else { 0 };
            msgs.push((m, op.flags | echo));
        }
        msgs.push((nf_message(BATCH_END, 0, SUBSYS, &[]), 0));
        self.sock.batch(msgs)
    }

    /// Send one request and collect the payloads (after the nfgenmsg header) of its replies.
    /// Dumps end at NLMSG_DONE (restarted when interrupted), other requests at their ACK.
    pub(super) fn request(
        &mut self,
        ty: u8,
        family: Family,
        flags: u16,
        body: &[u8],
    ) -> std::result::Result<Vec<Vec<u8>>, i32> {
        self.request_raw(nft_type(ty), family as u8, flags, body)
            .map_err(|e| errno(&e))
    }

    /// One request of any netfilter subsystem (`msg_type` = subsystem << 8 | message): the
    /// payloads (after the nfgenmsg header) of the replies.
    pub(crate) fn request_raw(
        &mut self,
        msg_type: u16,
        family: u8,
        flags: u16,
        body: &[u8],
    ) -> std::result::Result<Vec<Vec<u8>>, NlError> {
        let req = nf_message(msg_type, family, 0, body);
        let replies = if flags & F_DUMP == F_DUMP {
            self.sock.dump(req, flags)?
        } else {
            self.sock.request_ack(req, flags)?.0
        };
        Ok(replies
            .into_iter()
            .map(|r| r.body.get(4..).unwrap_or_default().to_vec())
            .collect())
    }

    /// [`Nftables::request`] with retries; ENOENT yields `None`.
    pub(super) fn query(
        &mut self,
        what: fmt::Arguments,
        ty: u8,
        family: Family,
        flags: u16,
        body: &[u8],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let mut tries = 0;
        loop {
            let errno = match self.request(ty, family, flags, body) {
                Ok(v) => return Ok(Some(v)),
                Err(libc::ENOENT) => return Ok(None),
                Err(e) => e,
            };
            tries += 1;
            let msg = format!("nftables: {what}: {}", strerror(errno));
            if !transient(errno) {
                return Err(Error::internal(msg).with_errno(errno));
            }
            if tries >= TRIES {
                return Err(Error::try_again(msg).with_errno(errno));
            }
        }
    }
}
