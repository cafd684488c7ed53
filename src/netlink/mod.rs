//! A small synchronous rtnetlink (NETLINK_ROUTE) client: links, addresses, routes and rules.
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
mod bridge;
mod devconf;
#[doc(hidden)]
pub mod fuzz;
mod identity;
pub(crate) mod ipvlan;
mod link;
pub(crate) mod macvlan;
pub(crate) mod monitor;
mod route;
mod rule;
pub(crate) mod socket;
pub(crate) mod tc;
#[cfg(test)]
mod tests;
mod vrf;
pub(crate) mod wire;

use std::fmt;

use netlink_sys::protocols::NETLINK_ROUTE;
#[cfg(test)]
use socket::{NLM_F_ACK_TLVS, NLM_F_CAPPED, ext_ack};
pub(crate) use socket::{NlSocket, Reply};
use wire::Writer;

pub(crate) use addr::{
    Addr, IFA_F_DADFAILED, IFA_F_NODAD, IFA_F_NOPREFIXROUTE, IFA_F_OPTIMISTIC, IFA_F_TENTATIVE,
};
#[cfg(test)]
pub(crate) use bridge::BridgeVlan;
pub(crate) use identity::Identity;
pub(crate) use link::{BR_STATE_FORWARDING, Link, PortOpts};
pub(crate) use monitor::Monitor;
pub(crate) use route::{NextHop, Route, SCOPE_HOST, SCOPE_LINK, SCOPE_UNIVERSE, TABLE_MAIN};
pub(crate) use rule::Rule;

/// Which address family to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    All,
    V4,
    V6,
}

/// A netlink failure: `errno` is the (positive) OS error, 0 when the failure was not the
/// kernel's (e.g. an undecodable reply); `msg` says what was being done; `ext` is the kernel's
/// extended-ack message, if it sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub errno: i32,
    pub msg: String,
    pub ext: String,
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

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
    /// The object is absent ([`crate::error::errno_is_not_found`]).
    pub fn is_not_found(&self) -> bool {
        crate::error::errno_is_not_found(self.errno)
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

/// A NETLINK_ROUTE socket in one network namespace.
pub(crate) struct Handle {
    sock: NlSocket,
}

impl Handle {
    /// A socket in the calling thread's namespace.
    pub fn new() -> Result<Handle> {
        Ok(Handle {
            sock: NlSocket::open(NETLINK_ROUTE, "rtnetlink")?,
        })
    }

    /// A socket inside `ns`; the calling thread is back in its own namespace on return.
    pub fn in_netns(ns: &crate::netns::NetNs) -> Result<Handle> {
        ns.enter(Handle::new)
            .map_err(|e| Error::new(0, e.to_string()))?
    }

    /// Send one request and wait for the ACK; returns the reply message, if the request has
    /// one (a GET).
    pub(crate) fn request_ack(&mut self, req: Vec<u8>, flags: u16) -> Result<Option<Reply>> {
        let (out, _) = self.sock.request_ack(req, flags)?;
        Ok(out.into_iter().next())
    }

    /// Dump all objects matching `req` (restarted when interrupted by a concurrent change).
    pub(crate) fn dump(&mut self, req: Vec<u8>) -> Result<Vec<Reply>> {
        self.sock.dump(req, 0)
    }
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
pub(crate) const NLM_F_REPLACE: u16 = 0x100;
pub(crate) const NLM_F_EXCL: u16 = 0x200;
pub(crate) const NLM_F_CREATE: u16 = 0x400;

/// A request of type `ty`: netlink header, the family's fixed header `fixed`, then the
/// attributes `attrs` writes (flags and sequence number are set when sent).
pub(crate) fn request(ty: u16, fixed: &[u8], attrs: impl FnOnce(&mut Writer)) -> Vec<u8> {
    socket::message(ty, fixed, attrs)
}

/// A 6-byte MAC address as Go's `net.ParseMAC` reads one: `aa:bb:cc:dd:ee:ff`,
/// `aa-bb-cc-dd-ee-ff` or `aabb.ccdd.eeff` (any letter case). Code 7 when it is not one.
pub(crate) fn parse_mac(s: &str) -> crate::error::Result<[u8; 6]> {
    let bad = || crate::error::Error::config(format!("invalid MAC address {s:?}"));
    let hex = |p: &str, n: usize| {
        (p.len() == n && p.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())
    };
    let digits: String = if s.len() == 17 && (s.contains(':') ^ s.contains('-')) {
        let sep = if s.contains(':') { ':' } else { '-' };
        let parts: Vec<&str> = s.split(sep).collect();
        if parts.len() != 6 || parts.iter().any(|p| hex(p, 2).is_none()) {
            return Err(bad());
        }
        parts.concat()
    } else if s.len() == 14 && s.matches('.').count() == 2 {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.iter().any(|p| hex(p, 4).is_none()) {
            return Err(bad());
        }
        parts.concat()
    } else {
        return Err(bad());
    };
    let mut mac = [0u8; 6];
    for (i, b) in mac.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

/// `aa:bb:cc:dd:ee:ff`, as CNI results spell MAC addresses.
pub(crate) fn fmt_mac(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}
