//! A small synchronous rtnetlink (NETLINK_ROUTE) client: links, addresses and routes.
//!
//! [`Handle`] owns one netlink socket bound to the namespace it was opened in
//! ([`Handle::in_netns`] opens it inside another namespace while the caller stays where it is).
//! Every request goes through `request_ack` (one message, waits for the kernel's ACK and returns
//! the reply, if any) or `dump` (multipart dump, restarted when the kernel flags it as
//! interrupted). Kernel errors come back as [`Error`] carrying the errno, what was being done and
//! the kernel's extended-ack text.
//!
//! Messages are encoded and decoded here with [`crate::netlink::wire`]: requests carry exactly the
//! attributes we send, replies are read into our own small structs, only the attributes we use.
//! (netlink-packet-route, which understands every link kind, tc filter and action, was ~320 KB
//! of the static binary.)

mod addr;
mod link;
mod route;
pub mod tc;
#[cfg(test)]
mod tests;
pub mod wire;

use std::fmt;

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use wire::{NLMSG_DONE, NLMSG_ERROR, NLMSG_HDRLEN, Writer};

pub use addr::{Addr, IFA_F_NODAD, IFA_F_NOPREFIXROUTE};
pub use link::{BridgeVlan, Link, PortOpts};
pub use route::{NextHop, Route, SCOPE_HOST, SCOPE_LINK, SCOPE_UNIVERSE, TABLE_MAIN};

/// Which address family to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    All,
    V4,
    V6,
}

/// A netlink failure: `errno` is the (positive) OS error, 0 when the failure was not the
/// kernel's (e.g. an undecodable reply); `msg` says what was being done; `ext` is the kernel's
/// extended-ack message, if it sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub errno: i32,
    pub msg: String,
    pub ext: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(errno: i32, msg: impl Into<String>) -> Self {
        Error {
            errno,
            msg: msg.into(),
            ext: String::new(),
        }
    }
    fn io(what: &str, e: std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => Error::new(n, what),
            None => Error::new(0, format!("{what}: {e}")),
        }
    }
    /// Prefix the message with what was being done.
    pub fn ctx(mut self, what: impl fmt::Display) -> Self {
        self.msg = if self.msg.is_empty() {
            what.to_string()
        } else {
            format!("{what}: {}", self.msg)
        };
        self
    }
    /// The object already exists (EEXIST).
    pub fn is_exists(&self) -> bool {
        self.errno == libc::EEXIST
    }
    /// The object is absent: no such device (ENODEV), entry (ENOENT), route (ESRCH) or
    /// address (EADDRNOTAVAIL).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.errno,
            libc::ENODEV | libc::ENOENT | libc::ESRCH | libc::EADDRNOTAVAIL
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)?;
        if self.errno > 0 {
            write!(f, ": {}", std::io::Error::from_raw_os_error(self.errno))?;
        }
        if !self.ext.is_empty() {
            write!(f, " ({})", self.ext)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<Error> for crate::error::Error {
    fn from(e: Error) -> Self {
        crate::error::Error::internal(e.to_string()).with_errno(e.errno)
    }
}

impl<T> crate::error::Context<T> for Result<T> {
    fn ctx(self, what: impl fmt::Display) -> crate::error::Result<T> {
        self.map_err(|e| crate::error::Error::from(e).ctx(what))
    }
}

/// Receive buffer size: the kernel caps dump datagrams at 32 KiB.
const RECV_BUF: usize = 64 * 1024;

/// A NETLINK_ROUTE socket in one network namespace.
pub struct Handle {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Handle {
    /// A socket in the calling thread's namespace.
    pub fn new() -> Result<Handle> {
        let mut sock =
            Socket::new(NETLINK_ROUTE).map_err(|e| Error::io("open netlink socket", e))?;
        sock.bind_auto()
            .map_err(|e| Error::io("bind netlink socket", e))?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(|e| Error::io("connect netlink socket", e))?;
        // Best effort: older kernels lack these and work without them.
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        Ok(Handle {
            sock,
            seq: 0,
            buf: Vec::with_capacity(RECV_BUF),
        })
    }

    /// A socket inside `ns`; the calling thread is back in its own namespace on return.
    pub fn in_netns(ns: &crate::netns::NetNs) -> Result<Handle> {
        ns.enter(Handle::new)
            .map_err(|e| Error::new(0, e.to_string()))?
    }

    /// Send `req` (built by [`request`]) with `flags` and a new sequence number.
    fn send(&mut self, req: &mut [u8], flags: u16) -> Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        req[6..8].copy_from_slice(&(flags | NLM_F_REQUEST).to_ne_bytes());
        req[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        self.sock
            .send(req, 0)
            .map_err(|e| Error::io("send netlink request", e))?;
        Ok(self.seq)
    }

    /// Read the replies to request `seq` into `out` until its ACK (or, for a dump, DONE).
    /// Messages for other sequence numbers (stale replies) are skipped. Returns whether the
    /// kernel flagged the dump as interrupted.
    fn recv(&mut self, seq: u32, out: &mut Vec<Reply>) -> Result<bool> {
        let mut intr = false;
        loop {
            self.buf.clear();
            let n = self
                .sock
                .recv(&mut self.buf, libc::MSG_TRUNC)
                .map_err(|e| Error::io("receive netlink reply", e))?;
            if n > self.buf.len() {
                return Err(Error::new(
                    0,
                    format!("netlink reply truncated ({n} bytes)"),
                ));
            }
            for m in wire::messages(&self.buf[..n]) {
                if m.seq != seq {
                    continue;
                }
                intr |= m.flags & NLM_F_DUMP_INTR != 0;
                let code = wire::get_u32(m.payload, 0).map(|c| c as i32);
                match m.ty {
                    NLMSG_ERROR => match code {
                        Some(0) => return Ok(intr),
                        Some(c) => {
                            let mut err = Error::new(c.abs(), "");
                            err.ext = ext_ack(m.flags, &m.payload[4..]);
                            return Err(err);
                        }
                        None => return Err(Error::new(0, "bad netlink error message")),
                    },
                    NLMSG_DONE => match code {
                        Some(c) if c < 0 => return Err(Error::new(-c, "")),
                        _ => return Ok(intr),
                    },
                    ty if ty >= 16 => out.push(Reply {
                        ty,
                        body: m.payload.to_vec(),
                    }),
                    _ => {}
                }
            }
        }
    }

    /// Send one request (NLM_F_ACK added) and wait for the ACK; returns the reply message,
    /// if the request has one (a GET).
    pub(crate) fn request_ack(&mut self, mut req: Vec<u8>, flags: u16) -> Result<Option<Reply>> {
        let seq = self.send(&mut req, flags | NLM_F_ACK)?;
        let mut out = Vec::new();
        self.recv(seq, &mut out)?;
        Ok(out.into_iter().next())
    }

    /// Dump all objects matching `msg`, retrying up to 5 times if the dump was interrupted
    /// by a concurrent change (NLM_F_DUMP_INTR).
    pub(crate) fn dump(&mut self, mut req: Vec<u8>) -> Result<Vec<Reply>> {
        for _ in 0..5 {
            let seq = self.send(&mut req, NLM_F_DUMP)?;
            let mut out = Vec::new();
            if !self.recv(seq, &mut out)? {
                return Ok(out);
            }
        }
        Err(Error::new(
            libc::EINTR,
            "netlink dump kept being interrupted",
        ))
    }
}

/// One reply message: its type (RTM_NEW*) and its payload after the netlink header.
pub(crate) struct Reply {
    pub ty: u16,
    pub body: Vec<u8>,
}

// Message types (linux/rtnetlink.h) and header flags (linux/netlink.h).
pub(crate) const RTM_NEWLINK: u16 = 16;
pub(crate) const RTM_DELLINK: u16 = 17;
pub(crate) const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_SETLINK: u16 = 19;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
pub(crate) const RTM_GETADDR: u16 = 22;
pub(crate) const RTM_NEWROUTE: u16 = 24;
pub(crate) const RTM_DELROUTE: u16 = 25;
pub(crate) const RTM_GETROUTE: u16 = 26;
pub(crate) const RTM_NEWQDISC: u16 = 36;
pub(crate) const RTM_GETQDISC: u16 = 38;
pub(crate) const RTM_NEWTFILTER: u16 = 44;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP_INTR: u16 = 0x10;
const NLM_F_DUMP: u16 = 0x300;
pub(crate) const NLM_F_REPLACE: u16 = 0x100;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_CREATE: u16 = 0x400;
/// In an NLMSG_ERROR: the echoed request was cut to its header / TLVs follow it.
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;

/// A request of type `ty`: netlink header (length set here; flags and sequence number set when
/// sent), the family's fixed header `fixed`, then the attributes `attrs` writes.
pub(crate) fn request(ty: u16, fixed: &[u8], attrs: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    w.buf.resize(NLMSG_HDRLEN, 0);
    w.buf[4..6].copy_from_slice(&ty.to_ne_bytes());
    w.buf.extend_from_slice(fixed);
    w.buf.resize((w.buf.len() + 3) & !3, 0);
    attrs(&mut w);
    let len = w.buf.len() as u32;
    w.buf[..4].copy_from_slice(&len.to_ne_bytes());
    w.buf
}

/// The kernel's extended-ack text (NLMSGERR_ATTR_MSG) from an NLMSG_ERROR body (the echoed
/// request header, capped or not, followed by attributes).
fn ext_ack(flags: u16, body: &[u8]) -> String {
    if flags & NLM_F_ACK_TLVS == 0 {
        return String::new();
    }
    let off = if flags & NLM_F_CAPPED != 0 {
        16
    } else {
        body.get(..4)
            .map_or(0, |b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    let tlvs = body.get((off + 3) & !3..).unwrap_or_default();
    wire::attrs(tlvs)
        .find(|(ty, _)| *ty == 1)
        .map(|(_, v)| wire::get_str(v).trim_end_matches('\n').to_string())
        .unwrap_or_default()
}

/// `aa:bb:cc:dd:ee:ff`, as CNI results spell MAC addresses.
pub fn fmt_mac(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}
