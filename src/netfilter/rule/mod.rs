//! Rule builder: statements recorded in `nft` text order and encoded into nf_tables expressions
//! exactly as `nft` encodes the equivalent rule (including the implicit `meta nfproto` /
//! `meta protocol` dependency of address matches in `inet` and `bridge` tables), so listings
//! print the same.

pub(crate) mod encode;

use encode::{META_IIF, META_L4PROTO, META_MARK, META_OIF};
use ipnet::IpNet;
use std::net::IpAddr;

/// Where a rule sends a packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    Return,
    Jump(String),
    Goto(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Stmt {
    Addr {
        dst: bool,
        net: IpNet,
        neq: bool,
    },
    L4proto(u8),
    Meta {
        key: u32,
        neq: bool,
        data: Vec<u8>,
    },
    Port {
        dst: bool,
        port: u16,
        neq: bool,
    },
    Ifname {
        out: bool,
        name: String,
        neq: bool,
    },
    /// `ct state BITS` (any of the bits) or `ct state != BITS` (not that value).
    CtState(u32, bool),
    EtherSaddr([u8; 6]),
    /// `fib saddr|daddr type [!=] RTN_*`.
    Fib {
        daddr: bool,
        rtype: u32,
        neq: bool,
    },
    Counter,
    Masq,
    Nat {
        dnat: bool,
        addr: IpAddr,
        port: Option<u16>,
    },
    Verdict(Verdict),
}

/// A rule: statements in the order `nft` would print them, plus an optional comment.
///
/// `Rule::new().saddr(ip).daddr_not(net).masquerade().comment("id")` prints as
/// `ip saddr 10.88.0.5 ip daddr != 10.88.0.0/16 masquerade comment "id"`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    stmts: Vec<Stmt>,
    comment: Option<String>,
}

/// `ct state` bits for [`Rule::ct_state`]: the kernel's whole set, used or not.
#[allow(dead_code)]
pub mod ct {
    pub const INVALID: u32 = 1;
    pub const ESTABLISHED: u32 = 2;
    pub const RELATED: u32 = 4;
    pub const NEW: u32 = 8;
    pub const UNTRACKED: u32 = 64;
}

/// IP protocol numbers for [`Rule::l4proto`].
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const SCTP: u8 = 132;

impl Rule {
    pub fn new() -> Self {
        Self::default()
    }
    fn push(mut self, s: Stmt) -> Self {
        self.stmts.push(s);
        self
    }
    fn addr(self, dst: bool, net: impl Into<IpNet>, neq: bool) -> Self {
        self.push(Stmt::Addr {
            dst,
            net: net.into(),
            neq,
        })
    }
    /// `ip saddr NET` / `ip6 saddr NET` (an address is a full-length prefix).
    pub fn saddr(self, net: impl Into<IpNet>) -> Self {
        self.addr(false, net, false)
    }
    /// `ip saddr != NET`.
    pub fn saddr_not(self, net: impl Into<IpNet>) -> Self {
        self.addr(false, net, true)
    }
    /// `ip daddr NET`.
    pub fn daddr(self, net: impl Into<IpNet>) -> Self {
        self.addr(true, net, false)
    }
    /// `ip daddr != NET`.
    pub fn daddr_not(self, net: impl Into<IpNet>) -> Self {
        self.addr(true, net, true)
    }
    /// `meta l4proto P`; followed by [`Rule::dport`] it prints as `tcp dport N` etc.
    pub fn l4proto(self, proto: u8) -> Self {
        self.push(Stmt::L4proto(proto))
    }
    /// `th dport N` (`tcp dport N` after `l4proto(TCP)`).
    pub fn dport(self, port: u16) -> Self {
        self.port(true, port, false)
    }
    /// `th sport N`.
    pub fn sport(self, port: u16) -> Self {
        self.port(false, port, false)
    }
    /// `th dport|sport [!=] N`.
    pub fn port(self, dst: bool, port: u16, neq: bool) -> Self {
        self.push(Stmt::Port { dst, port, neq })
    }
    /// `meta l4proto != P`.
    pub fn l4proto_not(self, proto: u8) -> Self {
        self.push(Stmt::Meta {
            key: META_L4PROTO,
            neq: true,
            data: vec![proto],
        })
    }
    /// `meta mark [!=] N`.
    pub fn mark(self, mark: u32, neq: bool) -> Self {
        self.push(Stmt::Meta {
            key: META_MARK,
            neq,
            data: mark.to_ne_bytes().to_vec(),
        })
    }
    fn ifname(self, out: bool, name: &str, neq: bool) -> Self {
        self.push(Stmt::Ifname {
            out,
            name: name.into(),
            neq,
        })
    }
    /// `iifname "NAME"`.
    pub fn iifname(self, name: &str) -> Self {
        self.ifname(false, name, false)
    }
    /// `iifname != "NAME"`.
    pub fn iifname_not(self, name: &str) -> Self {
        self.ifname(false, name, true)
    }
    /// `oifname "NAME"`.
    pub fn oifname(self, name: &str) -> Self {
        self.ifname(true, name, false)
    }
    /// `oifname != "NAME"`.
    pub fn oifname_not(self, name: &str) -> Self {
        self.ifname(true, name, true)
    }
    /// `ct state A,B` with bits from [`ct`].
    pub fn ct_state(self, bits: u32) -> Self {
        self.push(Stmt::CtState(bits, false))
    }
    /// `ct state != A[,B]`, as `nft` makes it: the state is not that value (`!= a,b` compares
    /// with `a | b`, which no single state is; `!= { a, b }` is the "neither" form).
    pub fn ct_state_not(self, bits: u32) -> Self {
        self.push(Stmt::CtState(bits, true))
    }
    /// `ether saddr MAC` (bridge family: no dependency match needed).
    pub fn ether_saddr(self, mac: [u8; 6]) -> Self {
        self.push(Stmt::EtherSaddr(mac))
    }
    /// `fib daddr type local`.
    pub fn fib_daddr_local(self) -> Self {
        self.fib_type(true, libc::RTN_LOCAL as u32, false)
    }
    /// `fib saddr|daddr type [!=] T` with `T` an `RTN_*` route type.
    pub fn fib_type(self, daddr: bool, rtype: u32, neq: bool) -> Self {
        self.push(Stmt::Fib { daddr, rtype, neq })
    }
    /// `iif|oif [!=] "NAME"`: the interface by index (`nft` resolves the name when the rule is
    /// added, so the rule follows that interface, not its name).
    pub fn ifindex(self, out: bool, index: u32, neq: bool) -> Self {
        self.push(Stmt::Meta {
            key: if out { META_OIF } else { META_IIF },
            neq,
            data: index.to_ne_bytes().to_vec(),
        })
    }
    /// `counter`.
    pub fn counter(self) -> Self {
        self.push(Stmt::Counter)
    }
    /// `masquerade`.
    pub fn masquerade(self) -> Self {
        self.push(Stmt::Masq)
    }
    /// `dnat to ADDR[:PORT]` (`dnat to [ADDR]:PORT` for IPv6).
    pub fn dnat(self, addr: IpAddr, port: Option<u16>) -> Self {
        self.push(Stmt::Nat {
            dnat: true,
            addr,
            port,
        })
    }
    /// `snat to ADDR[:PORT]`.
    pub fn snat(self, addr: IpAddr, port: Option<u16>) -> Self {
        self.push(Stmt::Nat {
            dnat: false,
            addr,
            port,
        })
    }
    pub fn verdict(self, v: Verdict) -> Self {
        self.push(Stmt::Verdict(v))
    }
    pub fn accept(self) -> Self {
        self.verdict(Verdict::Accept)
    }
    pub fn drop(self) -> Self {
        self.verdict(Verdict::Drop)
    }
    /// `return`.
    pub fn ret(self) -> Self {
        self.verdict(Verdict::Return)
    }
    pub fn jump(self, chain: &str) -> Self {
        self.verdict(Verdict::Jump(chain.into()))
    }
    pub fn goto(self, chain: &str) -> Self {
        self.verdict(Verdict::Goto(chain.into()))
    }
    /// `comment "TEXT"` (stored as rule user data, as `nft` does).
    pub fn comment(mut self, text: impl Into<String>) -> Self {
        self.comment = Some(text.into());
        self
    }
}
