//! Rule builder: statements recorded in `nft` text order and encoded into nf_tables expressions
//! exactly as `nft` encodes the equivalent rule (including the implicit `meta nfproto` /
//! `meta protocol` dependency of address matches in `inet` and `bridge` tables), so listings
//! print the same.

use super::msg::{Writer, udata_comment};
use super::nft::Family;
use crate::error::{Error, Result};
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
    CtState(u32),
    EtherSaddr([u8; 6]),
    FibDaddrLocal,
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

/// `ct state` bits for [`Rule::ct_state`].
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
        self.push(Stmt::CtState(bits))
    }
    /// `fib daddr type local`.
    /// `ether saddr MAC` (bridge family: no dependency match needed).
    pub fn ether_saddr(self, mac: [u8; 6]) -> Self {
        self.push(Stmt::EtherSaddr(mac))
    }
    pub fn fib_daddr_local(self) -> Self {
        self.push(Stmt::FibDaddrLocal)
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

    /// Write NFTA_RULE_EXPRESSIONS and NFTA_RULE_USERDATA for a table of `family`.
    pub(crate) fn encode(&self, family: Family, w: &mut Writer) -> Result<()> {
        let mut err = None;
        w.nest(NFTA_RULE_EXPRESSIONS, |w| {
            let mut l3 = match family {
                Family::Ip => 4,
                Family::Ip6 => 6,
                _ => 0,
            };
            for s in &self.stmts {
                if let Err(e) = stmt(w, family, &mut l3, s) {
                    err = Some(e);
                    return;
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        if let Some(c) = &self.comment {
            let u = udata_comment(c).ok_or_else(|| {
                Error::config("nftables: rule comment longer than 254 bytes or containing NUL")
            })?;
            w.attr(NFTA_RULE_USERDATA, &u);
        }
        Ok(())
    }
}

// Attribute numbers (linux/netfilter/nf_tables.h), per expression.
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_USERDATA: u16 = 7;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_PAYLOAD_DREG: u16 = 1;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFTA_BITWISE_SREG: u16 = 1;
const NFTA_BITWISE_DREG: u16 = 2;
const NFTA_BITWISE_LEN: u16 = 3;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
const NFTA_CT_DREG: u16 = 1;
const NFTA_CT_KEY: u16 = 2;
const NFTA_FIB_DREG: u16 = 1;
const NFTA_FIB_RESULT: u16 = 2;
const NFTA_FIB_FLAGS: u16 = 3;
const NFTA_NAT_TYPE: u16 = 1;
const NFTA_NAT_FAMILY: u16 = 2;
const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
const NFTA_NAT_REG_PROTO_MIN: u16 = 5;
const NFTA_NAT_FLAGS: u16 = 7;

const CMP_EQ: u32 = 0;
const CMP_NEQ: u32 = 1;
const REG1: u32 = 1;
const REG2: u32 = 2;
const META_PROTOCOL: u32 = 1;
const META_MARK: u32 = 3;
const META_IIFNAME: u32 = 6;
const META_OIFNAME: u32 = 7;
const META_NFPROTO: u32 = 15;
const META_L4PROTO: u32 = 16;
const BASE_LINK: u32 = 0;
const BASE_NETWORK: u32 = 1;
const BASE_TRANSPORT: u32 = 2;

fn expr(w: &mut Writer, name: &str, f: impl FnOnce(&mut Writer)) {
    w.nest(NFTA_LIST_ELEM, |w| {
        w.str(NFTA_EXPR_NAME, name);
        w.nest(NFTA_EXPR_DATA, f);
    });
}

fn meta(w: &mut Writer, key: u32) {
    expr(w, "meta", |w| {
        w.be32(NFTA_META_KEY, key);
        w.be32(NFTA_META_DREG, REG1);
    });
}

fn cmp(w: &mut Writer, op: u32, data: &[u8]) {
    expr(w, "cmp", |w| {
        w.be32(NFTA_CMP_SREG, REG1);
        w.be32(NFTA_CMP_OP, op);
        w.nest(NFTA_CMP_DATA, |w| w.attr(NFTA_DATA_VALUE, data));
    });
}

fn payload(w: &mut Writer, base: u32, offset: u32, len: usize) {
    expr(w, "payload", |w| {
        w.be32(NFTA_PAYLOAD_DREG, REG1);
        w.be32(NFTA_PAYLOAD_BASE, base);
        w.be32(NFTA_PAYLOAD_OFFSET, offset);
        w.be32(NFTA_PAYLOAD_LEN, len as u32);
    });
}

fn bitwise(w: &mut Writer, mask: &[u8]) {
    expr(w, "bitwise", |w| {
        w.be32(NFTA_BITWISE_SREG, REG1);
        w.be32(NFTA_BITWISE_DREG, REG1);
        w.be32(NFTA_BITWISE_LEN, mask.len() as u32);
        w.nest(NFTA_BITWISE_MASK, |w| w.attr(NFTA_DATA_VALUE, mask));
        w.nest(NFTA_BITWISE_XOR, |w| {
            w.attr(NFTA_DATA_VALUE, &vec![0; mask.len()])
        });
    });
}

fn immediate(w: &mut Writer, reg: u32, f: impl FnOnce(&mut Writer)) {
    expr(w, "immediate", |w| {
        w.be32(NFTA_IMMEDIATE_DREG, reg);
        w.nest(NFTA_IMMEDIATE_DATA, f);
    });
}

/// Emit the layer-3 dependency `nft` adds before an ip/ip6 match in inet and bridge tables.
fn l3dep(w: &mut Writer, family: Family, l3: &mut u8, want: u8) -> Result<()> {
    if *l3 == want {
        return Ok(());
    }
    if *l3 != 0 {
        return Err(Error::internal(format!(
            "nftables: IPv{want} match in a rule already restricted to IPv{l3} ({family} table)"
        )));
    }
    if family == Family::Bridge {
        meta(w, META_PROTOCOL);
        cmp(
            w,
            CMP_EQ,
            if want == 4 {
                &[0x08, 0x00]
            } else {
                &[0x86, 0xdd]
            },
        );
    } else {
        meta(w, META_NFPROTO);
        cmp(w, CMP_EQ, &[if want == 4 { 2 } else { 10 }]);
    }
    *l3 = want;
    Ok(())
}

fn ip_bytes(a: IpAddr) -> (u8, Vec<u8>) {
    match a {
        IpAddr::V4(a) => (4, a.octets().to_vec()),
        IpAddr::V6(a) => (6, a.octets().to_vec()),
    }
}

fn stmt(w: &mut Writer, family: Family, l3: &mut u8, s: &Stmt) -> Result<()> {
    match s {
        Stmt::Addr { dst, net, neq } => {
            let (v, addr) = ip_bytes(net.network());
            let mask = ip_bytes(net.netmask()).1;
            l3dep(w, family, l3, v)?;
            let offset = match (v, dst) {
                (4, false) => 12,
                (4, true) => 16,
                (_, false) => 8,
                (_, true) => 24,
            };
            let plen = net.prefix_len() as usize;
            let op = if *neq { CMP_NEQ } else { CMP_EQ };
            if plen > 0 && plen.is_multiple_of(8) {
                payload(w, BASE_NETWORK, offset, plen / 8);
                cmp(w, op, &addr[..plen / 8]);
            } else {
                payload(w, BASE_NETWORK, offset, addr.len());
                bitwise(w, &mask);
                cmp(w, op, &addr);
            }
        }
        Stmt::L4proto(p) => {
            meta(w, META_L4PROTO);
            cmp(w, CMP_EQ, &[*p]);
        }
        Stmt::Meta { key, neq, data } => {
            meta(w, *key);
            cmp(w, if *neq { CMP_NEQ } else { CMP_EQ }, data);
        }
        Stmt::Port { dst, port, neq } => {
            payload(w, BASE_TRANSPORT, if *dst { 2 } else { 0 }, 2);
            cmp(w, if *neq { CMP_NEQ } else { CMP_EQ }, &port.to_be_bytes());
        }
        Stmt::Ifname { out, name, neq } => {
            // The kernel compares 16 bytes; a NUL inside would cut the name short.
            if name.is_empty() || name.len() >= 16 || name.contains('\0') {
                return Err(Error::config(format!(
                    "nftables: invalid interface name {name:?} (1-15 bytes, no NUL)"
                )));
            }
            let mut b = [0u8; 16];
            b[..name.len()].copy_from_slice(name.as_bytes());
            meta(w, if *out { META_OIFNAME } else { META_IIFNAME });
            cmp(w, if *neq { CMP_NEQ } else { CMP_EQ }, &b);
        }
        Stmt::CtState(bits) => {
            expr(w, "ct", |w| {
                w.be32(NFTA_CT_KEY, 0); // NFT_CT_STATE
                w.be32(NFTA_CT_DREG, REG1);
            });
            bitwise(w, &bits.to_ne_bytes());
            cmp(w, CMP_NEQ, &[0; 4]);
        }
        Stmt::EtherSaddr(mac) => {
            payload(w, BASE_LINK, 6, 6);
            cmp(w, CMP_EQ, mac);
        }
        Stmt::FibDaddrLocal => {
            expr(w, "fib", |w| {
                w.be32(NFTA_FIB_FLAGS, 2); // NFTA_FIB_F_DADDR
                w.be32(NFTA_FIB_RESULT, 3); // NFT_FIB_RESULT_ADDRTYPE
                w.be32(NFTA_FIB_DREG, REG1);
            });
            cmp(w, CMP_EQ, &(libc::RTN_LOCAL as u32).to_ne_bytes());
        }
        Stmt::Counter => expr(w, "counter", |_| {}),
        Stmt::Masq => expr(w, "masq", |_| {}),
        Stmt::Nat { dnat, addr, port } => {
            let (v, a) = ip_bytes(*addr);
            if (family == Family::Ip && v != 4) || (family == Family::Ip6 && v != 6) {
                return Err(Error::internal(format!(
                    "nftables: cannot NAT to {addr} in a {family} table"
                )));
            }
            immediate(w, REG1, |w| w.attr(NFTA_DATA_VALUE, &a));
            if let Some(p) = port {
                immediate(w, REG2, |w| w.attr(NFTA_DATA_VALUE, &p.to_be_bytes()));
            }
            expr(w, "nat", |w| {
                w.be32(NFTA_NAT_TYPE, *dnat as u32);
                w.be32(NFTA_NAT_FAMILY, if v == 4 { 2 } else { 10 });
                w.be32(NFTA_NAT_REG_ADDR_MIN, REG1);
                if port.is_some() {
                    w.be32(NFTA_NAT_REG_PROTO_MIN, REG2);
                    w.be32(NFTA_NAT_FLAGS, 2); // NF_NAT_RANGE_PROTO_SPECIFIED
                }
            });
        }
        Stmt::Verdict(v) => {
            let (code, chain): (i32, _) = match v {
                Verdict::Accept => (1, None),
                Verdict::Drop => (0, None),
                Verdict::Return => (-5, None),
                Verdict::Jump(c) => (-3, Some(c)),
                Verdict::Goto(c) => (-4, Some(c)),
            };
            if let Some(c) = chain {
                super::validate::nft_name("nftables jump target", c)?;
            }
            // Register 0 is the verdict register.
            immediate(w, 0, |w| {
                w.nest(NFTA_DATA_VERDICT, |w| {
                    w.be32(NFTA_VERDICT_CODE, code as u32);
                    if let Some(c) = chain {
                        w.str(NFTA_VERDICT_CHAIN, c);
                    }
                })
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::wire::attrs;

    /// An expression: its name and the attributes of its data.
    type Expr = (String, Vec<(u16, Vec<u8>)>);

    /// The expressions of an encoded rule.
    fn exprs(rule: &Rule, family: Family) -> Vec<Expr> {
        let mut w = Writer::default();
        rule.encode(family, &mut w).unwrap();
        let (ty, list) = attrs(&w.buf).next().unwrap();
        assert_eq!(ty, NFTA_RULE_EXPRESSIONS);
        attrs(list)
            .map(|(_, e)| {
                let mut name = String::new();
                let mut data = Vec::new();
                for (ty, v) in attrs(e) {
                    match ty {
                        NFTA_EXPR_NAME => name = crate::netlink::wire::get_str(v),
                        NFTA_EXPR_DATA => data = attrs(v).map(|(t, v)| (t, v.to_vec())).collect(),
                        _ => {}
                    }
                }
                (name, data)
            })
            .collect()
    }

    fn get(e: &Expr, ty: u16) -> &[u8] {
        &e.1.iter()
            .find(|(t, _)| *t == ty)
            .unwrap_or_else(|| panic!("{} has no attribute {ty}", e.0))
            .1
    }

    /// The NFTA_DATA_VALUE inside a nested data attribute (cmp data, immediate data, masks).
    fn value(e: &Expr, ty: u16) -> Vec<u8> {
        attrs(get(e, ty))
            .find(|(t, _)| *t == NFTA_DATA_VALUE)
            .map(|(_, v)| v.to_vec())
            .unwrap()
    }

    /// nf_tables byte order, checked against known bytes: expression parameters (registers,
    /// keys, offsets, lengths, NAT flags) are big-endian, packet data compared with the
    /// payload (ports) is in network order, and values the kernel loads into registers in host
    /// order (meta mark, ct state bits) are host-endian. A port written host-endian makes
    /// `tcp dport 8080` match port 36895 on a little-endian machine.
    #[test]
    fn rule_bytes_in_nf_tables_byte_order() {
        let r = Rule::new()
            .l4proto(TCP)
            .dport(8080)
            .mark(0x1234_5678, false)
            .ct_state(ct::NEW)
            .dnat("10.88.0.2".parse().unwrap(), Some(80));
        let e = exprs(&r, Family::Ip);
        let names: Vec<&str> = e.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "meta",
                "cmp",
                "payload",
                "cmp",
                "meta",
                "cmp",
                "ct",
                "bitwise",
                "cmp",
                "immediate",
                "immediate",
                "nat"
            ]
        );
        // meta l4proto tcp
        assert_eq!(get(&e[0], NFTA_META_KEY), [0, 0, 0, 16]);
        assert_eq!(get(&e[0], NFTA_META_DREG), [0, 0, 0, 1]);
        assert_eq!(get(&e[1], NFTA_CMP_OP), [0, 0, 0, 0]);
        assert_eq!(value(&e[1], NFTA_CMP_DATA), [6]);
        // th dport 8080: transport header, offset 2, 2 bytes, 0x1f90 in network order
        assert_eq!(get(&e[2], NFTA_PAYLOAD_BASE), [0, 0, 0, 2]);
        assert_eq!(get(&e[2], NFTA_PAYLOAD_OFFSET), [0, 0, 0, 2]);
        assert_eq!(get(&e[2], NFTA_PAYLOAD_LEN), [0, 0, 0, 2]);
        assert_eq!(value(&e[3], NFTA_CMP_DATA), [0x1f, 0x90]);
        // meta mark 0x12345678: the register holds skb->mark in host order
        assert_eq!(get(&e[4], NFTA_META_KEY), [0, 0, 0, 3]);
        assert_eq!(value(&e[5], NFTA_CMP_DATA), 0x1234_5678u32.to_ne_bytes());
        // ct state new: host-order bits, masked, compared != 0
        assert_eq!(value(&e[7], NFTA_BITWISE_MASK), 8u32.to_ne_bytes());
        assert_eq!(value(&e[7], NFTA_BITWISE_XOR), [0; 4]);
        assert_eq!(get(&e[7], NFTA_BITWISE_LEN), [0, 0, 0, 4]);
        assert_eq!(get(&e[8], NFTA_CMP_OP), [0, 0, 0, 1]);
        // dnat to 10.88.0.2:80: address and port in network order, in registers 1 and 2
        assert_eq!(get(&e[9], NFTA_IMMEDIATE_DREG), [0, 0, 0, 1]);
        assert_eq!(value(&e[9], NFTA_IMMEDIATE_DATA), [10, 88, 0, 2]);
        assert_eq!(get(&e[10], NFTA_IMMEDIATE_DREG), [0, 0, 0, 2]);
        assert_eq!(value(&e[10], NFTA_IMMEDIATE_DATA), [0, 80]);
        assert_eq!(get(&e[11], NFTA_NAT_TYPE), [0, 0, 0, 1]);
        assert_eq!(get(&e[11], NFTA_NAT_FAMILY), [0, 0, 0, 2]);
        assert_eq!(get(&e[11], NFTA_NAT_REG_ADDR_MIN), [0, 0, 0, 1]);
        assert_eq!(get(&e[11], NFTA_NAT_REG_PROTO_MIN), [0, 0, 0, 2]);
        assert_eq!(get(&e[11], NFTA_NAT_FLAGS), [0, 0, 0, 2]);
        if cfg!(target_endian = "little") {
            assert_eq!(value(&e[5], NFTA_CMP_DATA), [0x78, 0x56, 0x34, 0x12]);
        }
    }

    /// A verdict code is a big-endian s32 (return = -5), a jump names its chain.
    #[test]
    fn verdict_bytes() {
        let e = exprs(&Rule::new().ret(), Family::Inet);
        assert_eq!(e[0].0, "immediate");
        let verdict = get(&e[0], NFTA_IMMEDIATE_DATA);
        let (_, v) = attrs(verdict).next().unwrap();
        let code: Vec<_> = attrs(v).collect();
        assert_eq!(code[0], (NFTA_VERDICT_CODE, &[0xff, 0xff, 0xff, 0xfb][..]));
    }
}
