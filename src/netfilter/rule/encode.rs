//! Encoding a [`Rule`] into nf_tables expressions as `nft` encodes it: the attribute numbers,
//! one writer per expression kind, and the implicit layer-3 dependency of address matches.

// The tests read this module's attribute numbers, so they are its child (file rule/tests.rs).
#[cfg(test)]
#[path = "tests.rs"]
mod tests;

use super::{Rule, Stmt, Verdict};
use crate::error::{Error, Result};
use crate::netfilter::msg::{Writer, udata_comment};
use crate::netfilter::nft::Family;
use ipnet::IpNet;
use std::net::IpAddr;

impl Rule {
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
pub(crate) const NFTA_LIST_ELEM: u16 = 1;
pub(crate) const NFTA_EXPR_NAME: u16 = 1;
pub(crate) const NFTA_EXPR_DATA: u16 = 2;
pub(crate) const NFTA_DATA_VALUE: u16 = 1;
pub(crate) const NFTA_DATA_VERDICT: u16 = 2;
pub(crate) const NFTA_VERDICT_CODE: u16 = 1;
pub(crate) const NFTA_VERDICT_CHAIN: u16 = 2;
const NFTA_META_DREG: u16 = 1;
pub(crate) const NFTA_META_KEY: u16 = 2;
const NFTA_CMP_SREG: u16 = 1;
pub(crate) const NFTA_CMP_OP: u16 = 2;
pub(crate) const NFTA_CMP_DATA: u16 = 3;
const NFTA_PAYLOAD_DREG: u16 = 1;
pub(crate) const NFTA_PAYLOAD_BASE: u16 = 2;
pub(crate) const NFTA_PAYLOAD_OFFSET: u16 = 3;
pub(crate) const NFTA_PAYLOAD_LEN: u16 = 4;
const NFTA_BITWISE_SREG: u16 = 1;
const NFTA_BITWISE_DREG: u16 = 2;
pub(crate) const NFTA_BITWISE_LEN: u16 = 3;
pub(crate) const NFTA_BITWISE_MASK: u16 = 4;
pub(crate) const NFTA_BITWISE_XOR: u16 = 5;
pub(crate) const NFTA_IMMEDIATE_DREG: u16 = 1;
pub(crate) const NFTA_IMMEDIATE_DATA: u16 = 2;
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

pub(crate) const CMP_EQ: u32 = 0;
pub(crate) const CMP_NEQ: u32 = 1;
const REG1: u32 = 1;
const REG2: u32 = 2;
const META_PROTOCOL: u32 = 1;
pub(crate) const META_MARK: u32 = 3;
pub(crate) const META_IIF: u32 = 4;
pub(crate) const META_OIF: u32 = 5;
pub(crate) const META_IIFNAME: u32 = 6;
pub(crate) const META_OIFNAME: u32 = 7;
const META_NFPROTO: u32 = 15;
pub(crate) const META_L4PROTO: u32 = 16;
const BASE_LINK: u32 = 0;
pub(crate) const BASE_NETWORK: u32 = 1;
pub(crate) const BASE_TRANSPORT: u32 = 2;

pub(crate) fn expr(w: &mut Writer, name: &str, f: impl FnOnce(&mut Writer)) {
    w.nest(NFTA_LIST_ELEM, |w| {
        w.str(NFTA_EXPR_NAME, name);
        w.nest(NFTA_EXPR_DATA, f);
    });
}

pub(crate) fn meta(w: &mut Writer, key: u32) {
    expr(w, "meta", |w| {
        w.be32(NFTA_META_KEY, key);
        w.be32(NFTA_META_DREG, REG1);
    });
}

pub(crate) fn cmp(w: &mut Writer, op: u32, data: &[u8]) {
    expr(w, "cmp", |w| {
        w.be32(NFTA_CMP_SREG, REG1);
        w.be32(NFTA_CMP_OP, op);
        w.nest(NFTA_CMP_DATA, |w| w.attr(NFTA_DATA_VALUE, data));
    });
}

pub(crate) fn payload(w: &mut Writer, base: u32, offset: u32, len: usize) {
    expr(w, "payload", |w| {
        w.be32(NFTA_PAYLOAD_DREG, REG1);
        w.be32(NFTA_PAYLOAD_BASE, base);
        w.be32(NFTA_PAYLOAD_OFFSET, offset);
        w.be32(NFTA_PAYLOAD_LEN, len as u32);
    });
}

pub(crate) fn bitwise(w: &mut Writer, mask: &[u8]) {
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

pub(crate) fn immediate(w: &mut Writer, reg: u32, f: impl FnOnce(&mut Writer)) {
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

/// The IP version and the address's bytes.
pub(crate) fn ip_bytes(a: IpAddr) -> (u8, Vec<u8>) {
    match a {
        IpAddr::V4(a) => (4, a.octets().to_vec()),
        IpAddr::V6(a) => (6, a.octets().to_vec()),
    }
}

fn stmt(w: &mut Writer, family: Family, l3: &mut u8, s: &Stmt) -> Result<()> {
    match s {
        Stmt::Addr { dst, net, neq } => addr_match(w, family, l3, *dst, net, *neq)?,
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
        Stmt::Ifname { out, name, neq } => ifname_match(w, *out, name, *neq)?,
        Stmt::CtState(bits, neq) => {
            expr(w, "ct", |w| {
                w.be32(NFTA_CT_KEY, 0); // NFT_CT_STATE
                w.be32(NFTA_CT_DREG, REG1);
            });
            // As `nft` encodes them: a state list is a bit test, `!=` a comparison with the
            // value (a packet has one state: `!= new` is "not new").
            if *neq {
                cmp(w, CMP_NEQ, &bits.to_ne_bytes());
            } else {
                bitwise(w, &bits.to_ne_bytes());
                cmp(w, CMP_NEQ, &[0; 4]);
            }
        }
        Stmt::EtherSaddr(mac) => {
            payload(w, BASE_LINK, 6, 6);
            cmp(w, CMP_EQ, mac);
        }
        Stmt::Fib { daddr, rtype, neq } => {
            expr(w, "fib", |w| {
                // NFTA_FIB_F_DADDR or NFTA_FIB_F_SADDR
                w.be32(NFTA_FIB_FLAGS, if *daddr { 2 } else { 1 });
                w.be32(NFTA_FIB_RESULT, 3); // NFT_FIB_RESULT_ADDRTYPE
                w.be32(NFTA_FIB_DREG, REG1);
            });
            cmp(w, if *neq { CMP_NEQ } else { CMP_EQ }, &rtype.to_ne_bytes());
        }
        Stmt::Counter => expr(w, "counter", |_| {}),
        Stmt::Masq => expr(w, "masq", |_| {}),
        Stmt::Nat { dnat, addr, port } => nat(w, family, *dnat, *addr, *port)?,
        Stmt::Verdict(v) => verdict(w, v)?,
    }
    Ok(())
}

/// An address match: the source or destination address, or its prefix, compared.
fn addr_match(
    w: &mut Writer,
    family: Family,
    l3: &mut u8,
    dst: bool,
    net: &IpNet,
    neq: bool,
) -> Result<()> {
    l3dep(w, family, l3, ip_bytes(net.addr()).0)?;
    prefix_match(w, dst, net, neq);
    Ok(())
}

/// The source or destination address of the network header compared with `net`: only the
/// prefix's bytes when it ends on a byte, else the whole address through a mask. `nft` and
/// iptables-nft encode it alike (the iptables backend's direct writer shares it).
pub(crate) fn prefix_match(w: &mut Writer, dst: bool, net: &IpNet, neq: bool) {
    let (v, addr) = ip_bytes(net.network());
    let mask = ip_bytes(net.netmask()).1;
    let offset = match (v, dst) {
        (4, false) => 12,
        (4, true) => 16,
        (_, false) => 8,
        (_, true) => 24,
    };
    let plen = net.prefix_len() as usize;
    let op = if neq { CMP_NEQ } else { CMP_EQ };
    if plen > 0 && plen.is_multiple_of(8) {
        payload(w, BASE_NETWORK, offset, plen / 8);
        cmp(w, op, &addr[..plen / 8]);
    } else {
        payload(w, BASE_NETWORK, offset, addr.len());
        bitwise(w, &mask);
        cmp(w, op, &addr);
    }
}

/// An interface name match (`iifname`/`oifname`), validated: 1-15 bytes, no NUL.
fn ifname_match(w: &mut Writer, out: bool, name: &str, neq: bool) -> Result<()> {
    // The kernel compares 16 bytes; a NUL inside would cut the name short.
    if name.is_empty() || name.len() >= 16 || name.contains('\0') {
        return Err(Error::config(format!(
            "nftables: invalid interface name {name:?} (1-15 bytes, no NUL)"
        )));
    }
    let mut b = [0u8; 16];
    b[..name.len()].copy_from_slice(name.as_bytes());
    meta(w, if out { META_OIFNAME } else { META_IIFNAME });
    cmp(w, if neq { CMP_NEQ } else { CMP_EQ }, &b);
    Ok(())
}

/// DNAT or SNAT to `addr` (and `port`), of the table's family.
fn nat(w: &mut Writer, family: Family, dnat: bool, addr: IpAddr, port: Option<u16>) -> Result<()> {
    let (v, a) = ip_bytes(addr);
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
        w.be32(NFTA_NAT_TYPE, dnat as u32);
        w.be32(NFTA_NAT_FAMILY, if v == 4 { 2 } else { 10 });
        w.be32(NFTA_NAT_REG_ADDR_MIN, REG1);
        if port.is_some() {
            w.be32(NFTA_NAT_REG_PROTO_MIN, REG2);
            w.be32(NFTA_NAT_FLAGS, 2); // NF_NAT_RANGE_PROTO_SPECIFIED
        }
    });
    Ok(())
}

/// A verdict; a jump or goto target is validated as a chain name.
pub(crate) fn verdict(w: &mut Writer, v: &Verdict) -> Result<()> {
    let (code, chain): (i32, _) = match v {
        Verdict::Accept => (1, None),
        Verdict::Drop => (0, None),
        Verdict::Return => (-5, None),
        Verdict::Jump(c) => (-3, Some(c)),
        Verdict::Goto(c) => (-4, Some(c)),
    };
    if let Some(c) = chain {
        crate::netfilter::validate::nft_name("nftables jump target", c)?;
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
    Ok(())
}
