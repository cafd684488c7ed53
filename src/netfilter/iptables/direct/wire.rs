//! A [`Spec`] as the nf_tables expressions iptables-nft 1.8.9 makes of it, and back.
//!
//! Encoding follows iptables-nft's order: interfaces, `-p` (meta l4proto), addresses (only
//! the prefix's bytes, or all of them through a mask), the matches in rule order, a counter,
//! the target. tcp/udp ports and `mark` are native expressions; `comment`, `multiport`,
//! `addrtype` and `conntrack` are x_tables matches and `MASQUERADE`, `DNAT` and `MARK`
//! x_tables targets, each with the revision and the info structure iptables-nft sends.
//!
//! Rules are compared in [`canon`] form: what the kernel dumps and what we send differ only in
//! attribute order and flags, the counter's values, and the bitwise operation the kernel adds.

use super::super::Proto;
use super::spec::{COMMENT_LEN, Match, Spec, Target};
use crate::netfilter::msg::{Writer, attrs, get_be32, get_str};
use crate::netfilter::rule::Verdict;
use crate::netfilter::rule::encode::{
    BASE_NETWORK, BASE_TRANSPORT, CMP_EQ, CMP_NEQ, META_IIFNAME, META_L4PROTO, META_MARK,
    META_OIFNAME, NFTA_BITWISE_MASK, NFTA_CMP_DATA, NFTA_CMP_OP, NFTA_DATA_VALUE,
    NFTA_DATA_VERDICT, NFTA_EXPR_DATA, NFTA_EXPR_NAME, NFTA_IMMEDIATE_DATA, NFTA_IMMEDIATE_DREG,
    NFTA_LIST_ELEM, NFTA_META_KEY, NFTA_PAYLOAD_BASE, NFTA_PAYLOAD_LEN, NFTA_PAYLOAD_OFFSET,
    NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE, bitwise, cmp, expr, ip_bytes, meta, payload,
    prefix_match, verdict,
};
use crate::netlink::wire::get_ip;
use ipnet::IpNet;
use std::net::IpAddr;

const NFTA_XT_NAME: u16 = 1;
const NFTA_XT_REV: u16 = 2;
const NFTA_XT_INFO: u16 = 3;
const NFTA_COUNTER_BYTES: u16 = 1;
const NFTA_COUNTER_PACKETS: u16 = 2;
const NFTA_BITWISE_XOR: u16 = 5;
const NFTA_BITWISE_OP: u16 = 6;
/// xt_multiport's "destination ports".
const MULTIPORT_DST: u8 = 1;
/// xt_addrtype's bit of RTN_LOCAL.
const ADDRTYPE_LOCAL: u16 = 1 << 2;
/// xt_conntrack's "match the state" flag.
const CONNTRACK_STATE: u16 = 1;
/// nf_nat's range flags: an address, and a port.
const NAT_MAP_IPS: u32 = 1;
const NAT_PROTO_SPECIFIED: u32 = 2;

/// An x_tables match or target (`kind`), with `info` as iptables-nft sends it.
fn xt(w: &mut Writer, kind: &str, name: &str, rev: u32, info: &[u8]) {
    expr(w, kind, |w| {
        w.str(NFTA_XT_NAME, name);
        w.be32(NFTA_XT_REV, rev);
        w.attr(NFTA_XT_INFO, info);
    });
}

/// Offset of the source address in the network header; the destination follows it.
fn saddr_offset(proto: Proto) -> u32 {
    match proto {
        Proto::V4 => 12,
        Proto::V6 => 8,
    }
}

fn iface(w: &mut Writer, key: u32, name: &str, neg: bool) {
    meta(w, key);
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    cmp(w, if neg { CMP_NEQ } else { CMP_EQ }, &b);
}

/// The content of NFTA_RULE_EXPRESSIONS for `spec` in a table of `proto`.
pub(super) fn encode(proto: Proto, spec: &Spec) -> Vec<u8> {
    let mut w = Writer::default();
    if let Some((n, neg)) = &spec.iniface {
        iface(&mut w, META_IIFNAME, n, *neg);
    }
    if let Some((n, neg)) = &spec.outiface {
        iface(&mut w, META_OIFNAME, n, *neg);
    }
    if let Some(p) = spec.proto {
        meta(&mut w, META_L4PROTO);
        cmp(&mut w, CMP_EQ, &[p]);
    }
    if let Some((n, neg)) = &spec.src {
        prefix_match(&mut w, false, n, *neg);
    }
    if let Some((n, neg)) = &spec.dst {
        prefix_match(&mut w, true, n, *neg);
    }
    for m in &spec.matches {
        extension(&mut w, m);
    }
    expr(&mut w, "counter", |w| {
        w.be64(NFTA_COUNTER_BYTES, 0);
        w.be64(NFTA_COUNTER_PACKETS, 0);
    });
    target(&mut w, proto, &spec.target);
    w.buf
}

/// A match of the rule's `-m` list.
fn extension(w: &mut Writer, m: &Match) {
    match m {
        Match::Dport(p) => {
            payload(w, BASE_TRANSPORT, 2, 2);
            cmp(w, CMP_EQ, &p.to_be_bytes());
        }
        Match::Comment(c) => {
            let mut info = [0u8; COMMENT_LEN];
            info[..c.len()].copy_from_slice(c.as_bytes());
            xt(w, "match", "comment", 0, &info);
        }
        Match::Dports(v) => {
            // struct xt_multiport_v1: flags, count, ports[15], pflags[15], invert.
            let mut info = [0u8; 48];
            info[0] = MULTIPORT_DST;
            let mut i = 0;
            for (lo, hi) in v {
                info[2 + 2 * i..4 + 2 * i].copy_from_slice(&lo.to_ne_bytes());
                if lo != hi {
                    info[32 + i] = 1;
                    i += 1;
                    info[2 + 2 * i..4 + 2 * i].copy_from_slice(&hi.to_ne_bytes());
                }
                i += 1;
            }
            info[1] = i as u8;
            xt(w, "match", "multiport", 1, &info);
        }
        Match::DstLocal => {
            // struct xt_addrtype_info_v1: source, dest, flags.
            let mut info = [0u8; 8];
            info[2..4].copy_from_slice(&ADDRTYPE_LOCAL.to_ne_bytes());
            xt(w, "match", "addrtype", 1, &info);
        }
        Match::Mark(v, m) => {
            meta(w, META_MARK);
            if *m != u32::MAX {
                bitwise(w, &m.to_ne_bytes());
            }
            cmp(w, CMP_EQ, &v.to_ne_bytes());
        }
        Match::CtState(bits) => {
            // struct xt_conntrack_mtinfo3 (164 bytes, aligned to 168).
            let mut info = [0u8; 168];
            info[146..148].copy_from_slice(&CONNTRACK_STATE.to_ne_bytes());
            info[150..152].copy_from_slice(&bits.to_ne_bytes());
            xt(w, "match", "conntrack", 3, &info);
        }
    }
}

/// The rule's target: a verdict, or an x_tables target.
fn target(w: &mut Writer, proto: Proto, t: &Target) {
    match t {
        Target::Verdict(v) => {
            // Chain names were checked when the spec was read.
            let _ = verdict(w, v);
        }
        Target::Masquerade => match proto {
            // struct nf_nat_ipv4_multi_range_compat with one (empty) range.
            Proto::V4 => {
                let mut info = [0u8; 24];
                info[..4].copy_from_slice(&1u32.to_ne_bytes());
                xt(w, "target", "MASQUERADE", 0, &info);
            }
            // struct nf_nat_range, empty.
            Proto::V6 => xt(w, "target", "MASQUERADE", 0, &[0u8; 40]),
        },
        Target::Dnat(a, port) => {
            // struct nf_nat_range2: flags, min and max address, min, max and base port.
            let mut info = [0u8; 48];
            let flags = NAT_MAP_IPS | port.map_or(0, |_| NAT_PROTO_SPECIFIED);
            info[..4].copy_from_slice(&flags.to_ne_bytes());
            let b = ip_bytes(*a).1;
            info[4..4 + b.len()].copy_from_slice(&b);
            info[20..20 + b.len()].copy_from_slice(&b);
            if let Some(p) = port {
                info[36..38].copy_from_slice(&p.to_be_bytes());
                info[38..40].copy_from_slice(&p.to_be_bytes());
            }
            xt(w, "target", "DNAT", 2, &info);
        }
        Target::SetXmark(v, m) => {
            let mut info = [0u8; 8];
            info[..4].copy_from_slice(&v.to_ne_bytes());
            info[4..].copy_from_slice(&m.to_ne_bytes());
            xt(w, "target", "MARK", 2, &info);
        }
    }
}

/// Which attributes of an expression's data (or of a nested value) are nested themselves.
#[derive(Clone, Copy, PartialEq)]
enum Nest {
    Expr(&'static str),
    Data,
    Verdict,
}

impl Nest {
    fn child(self, ty: u16) -> Option<Nest> {
        match (self, ty) {
            (Nest::Expr("cmp"), NFTA_CMP_DATA)
            | (Nest::Expr("bitwise"), NFTA_BITWISE_MASK | NFTA_BITWISE_XOR)
            | (Nest::Expr("immediate"), NFTA_IMMEDIATE_DATA) => Some(Nest::Data),
            (Nest::Data, NFTA_DATA_VERDICT) => Some(Nest::Verdict),
            _ => None,
        }
    }
}

fn canon_attrs(out: &mut Vec<u8>, buf: &[u8], nest: Nest) {
    let mut v: Vec<(u16, &[u8])> = attrs(buf)
        .filter(|(ty, d)| {
            !(nest == Nest::Expr("bitwise") && *ty == NFTA_BITWISE_OP && *d == [0; 4])
        })
        .collect();
    v.sort_by_key(|(ty, _)| *ty);
    for (ty, d) in v {
        out.extend_from_slice(&ty.to_ne_bytes());
        match nest.child(ty) {
            Some(n) => {
                out.push(b'{');
                canon_attrs(out, d, n);
                out.push(b'}');
            }
            None => {
                out.extend_from_slice(&(d.len() as u16).to_ne_bytes());
                out.extend_from_slice(d);
            }
        }
    }
}

/// The expressions (NFTA_RULE_EXPRESSIONS' content) in a form that is equal for equal rules,
/// whether sent or dumped; `None` for an expression this module does not know.
pub(super) fn canon(exprs: &[u8]) -> Option<Vec<u8>> {
    const KNOWN: [&str; 8] = [
        "meta",
        "cmp",
        "payload",
        "bitwise",
        "immediate",
        "counter",
        "match",
        "target",
    ];
    let mut out = Vec::with_capacity(exprs.len());
    for (ty, elem) in attrs(exprs) {
        if ty != NFTA_LIST_ELEM {
            return None;
        }
        let (mut name, mut data) = (String::new(), &[][..]);
        for (t, d) in attrs(elem) {
            match t {
                NFTA_EXPR_NAME => name = get_str(d),
                NFTA_EXPR_DATA => data = d,
                _ => {}
            }
        }
        let name = *KNOWN.iter().find(|k| **k == name)?;
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        // A counter's values are the traffic's, not the rule's.
        if name != "counter" {
            canon_attrs(&mut out, data, Nest::Expr(name));
        }
        out.push(b';');
    }
    Some(out)
}

/// One expression, read: its name and its data's attributes.
struct Expr<'a> {
    name: String,
    data: Vec<(u16, &'a [u8])>,
}

impl<'a> Expr<'a> {
    fn get(&self, ty: u16) -> Option<&'a [u8]> {
        self.data.iter().find(|(t, _)| *t == ty).map(|(_, d)| *d)
    }
    fn u32(&self, ty: u16) -> Option<u32> {
        self.get(ty).filter(|d| d.len() == 4).map(get_be32)
    }
    /// The NFTA_DATA_VALUE nested in attribute `ty`.
    fn value(&self, ty: u16) -> Option<&'a [u8]> {
        attrs(self.get(ty)?)
            .find(|(t, _)| *t == NFTA_DATA_VALUE)
            .map(|(_, d)| d)
    }
}

fn exprs(buf: &[u8]) -> Vec<Expr<'_>> {
    attrs(buf)
        .map(|(_, elem)| {
            let (mut name, mut data) = (String::new(), Vec::new());
            for (t, d) in attrs(elem) {
                match t {
                    NFTA_EXPR_NAME => name = get_str(d),
                    NFTA_EXPR_DATA => data = attrs(d).collect(),
                    _ => {}
                }
            }
            Expr { name, data }
        })
        .collect()
}

/// The bytes of an address of `proto`.
fn addr_len(proto: Proto) -> usize {
    match proto {
        Proto::V4 => 4,
        Proto::V6 => 16,
    }
}

/// The address of `proto` at the start of `b`.
fn ip_of(proto: Proto, b: &[u8]) -> Option<IpAddr> {
    get_ip(b.get(..addr_len(proto))?)
}

/// A rule of the kernel's (NFTA_RULE_EXPRESSIONS' content) as a [`Spec`], when it is one of
/// the shapes [`encode`] makes — checked by encoding the result again and comparing.
pub(super) fn decode(proto: Proto, buf: &[u8]) -> Option<Spec> {
    let spec = read(proto, buf)?;
    (canon(&encode(proto, &spec))? == canon(buf)?).then_some(spec)
}

/// A rule's expressions being read into a [`Spec`], one step per expression (with the ones
/// that complete it: a bitwise and a cmp after a load).
struct Reader<'a> {
    proto: Proto,
    ex: Vec<Expr<'a>>,
    at: usize,
    spec: Spec,
    target: Option<Target>,
}

fn read(proto: Proto, buf: &[u8]) -> Option<Spec> {
    let mut r = Reader {
        proto,
        ex: exprs(buf),
        at: 0,
        spec: Spec::blank(),
        target: None,
    };
    while r.at < r.ex.len() {
        r.at += 1;
        match r.ex[r.at - 1].name.as_str() {
            "meta" => r.meta()?,
            "payload" => r.payload()?,
            "counter" => {}
            "immediate" => r.immediate()?,
            "match" | "target" => r.xt()?,
            _ => return None,
        }
    }
    r.spec.target = r.target?;
    Some(r.spec)
}

impl<'a> Reader<'a> {
    fn current(&self) -> &Expr<'a> {
        &self.ex[self.at - 1]
    }
    /// The mask of a bitwise expression next, if there is one (taken).
    fn mask(&mut self) -> Option<Option<&'a [u8]>> {
        if self.ex.get(self.at)?.name != "bitwise" {
            return Some(None);
        }
        self.at += 1;
        Some(Some(self.ex[self.at - 1].value(NFTA_BITWISE_MASK)?))
    }
    /// The cmp expression next (taken): its operation and data.
    fn cmp(&mut self) -> Option<(u32, &'a [u8])> {
        let c = self.ex.get(self.at).filter(|c| c.name == "cmp")?;
        self.at += 1;
        Some((c.u32(NFTA_CMP_OP)?, c.value(NFTA_CMP_DATA)?))
    }

    fn meta(&mut self) -> Option<()> {
        let key = self.current().u32(NFTA_META_KEY)?;
        let mask = if key == META_MARK { self.mask()? } else { None };
        let (op, data) = self.cmp()?;
        let neg = op == CMP_NEQ;
        let s = &mut self.spec;
        match key {
            META_IIFNAME => s.iniface = Some((get_str(data), neg)),
            META_OIFNAME => s.outiface = Some((get_str(data), neg)),
            META_L4PROTO => s.proto = Some(*data.first()?),
            META_MARK => {
                let word = |b: &[u8]| Some(u32::from_ne_bytes(b.try_into().ok()?));
                let m = mask.map_or(Some(u32::MAX), word)?;
                s.matches.push(Match::Mark(word(data)?, m));
            }
            _ => return None,
        }
        Some(())
    }

    fn payload(&mut self) -> Option<()> {
        let e = self.current();
        let (base, off, len) = (
            e.u32(NFTA_PAYLOAD_BASE)?,
            e.u32(NFTA_PAYLOAD_OFFSET)?,
            e.u32(NFTA_PAYLOAD_LEN)? as usize,
        );
        let plen = match self.mask()? {
            Some(m) => m.iter().map(|b| b.count_ones() as usize).sum(),
            None => len * 8,
        };
        let (op, data) = self.cmp()?;
        if base == BASE_TRANSPORT && off == 2 && len == 2 && op == CMP_EQ {
            let port = u16::from_be_bytes(data.try_into().ok()?);
            self.spec.matches.push(Match::Dport(port));
            return Some(());
        }
        let alen = addr_len(self.proto);
        if base != BASE_NETWORK || len > alen {
            return None;
        }
        let mut full = data.to_vec();
        full.resize(alen, 0);
        let net = IpNet::new(ip_of(self.proto, &full)?, plen as u8).ok()?;
        let slot = if off == saddr_offset(self.proto) {
            &mut self.spec.src
        } else {
            &mut self.spec.dst
        };
        *slot = Some((net, op == CMP_NEQ));
        Some(())
    }

    fn immediate(&mut self) -> Option<()> {
        let e = self.current();
        if e.u32(NFTA_IMMEDIATE_DREG)? != 0 {
            return None;
        }
        let v = attrs(e.get(NFTA_IMMEDIATE_DATA)?)
            .find(|(t, _)| *t == NFTA_DATA_VERDICT)?
            .1;
        let (mut code, mut chain) = (None, None);
        for (t, d) in attrs(v) {
            match t {
                NFTA_VERDICT_CODE => code = Some(get_be32(d) as i32),
                NFTA_VERDICT_CHAIN => chain = Some(get_str(d)),
                _ => {}
            }
        }
        self.target = Some(Target::Verdict(match (code?, chain) {
            (1, None) => Verdict::Accept,
            (0, None) => Verdict::Drop,
            (-5, None) => Verdict::Return,
            (-3, Some(c)) => Verdict::Jump(c),
            (-4, Some(c)) => Verdict::Goto(c),
            _ => return None,
        }));
        Some(())
    }

    /// An x_tables match or target, by name (its revision and info are checked by
    /// [`decode`]'s encoding again).
    fn xt(&mut self) -> Option<()> {
        let e = self.current();
        let kind = if e.name == "match" { "match" } else { "target" };
        let name = get_str(e.get(NFTA_XT_NAME)?);
        let info = e.get(NFTA_XT_INFO)?;
        let ne16 = |at: usize| Some(u16::from_ne_bytes(info.get(at..at + 2)?.try_into().ok()?));
        let ne32 = |at: usize| Some(u32::from_ne_bytes(info.get(at..at + 4)?.try_into().ok()?));
        let (m, t) = (&mut self.spec.matches, &mut self.target);
        match (kind, name.as_str()) {
            ("match", "comment") => {
                let c = info.split(|b| *b == 0).next()?;
                m.push(Match::Comment(String::from_utf8(c.to_vec()).ok()?));
            }
            ("match", "multiport") => {
                let count = *info.get(1)? as usize;
                let mut v = Vec::new();
                let mut k = 0;
                while k < count {
                    let lo = ne16(2 + 2 * k)?;
                    let range = *info.get(32 + k)? == 1;
                    v.push((lo, if range { ne16(4 + 2 * k)? } else { lo }));
                    k += if range { 2 } else { 1 };
                }
                m.push(Match::Dports(v));
            }
            ("match", "addrtype") => m.push(Match::DstLocal),
            ("match", "conntrack") => m.push(Match::CtState(ne16(150)?)),
            ("target", "MASQUERADE") => *t = Some(Target::Masquerade),
            ("target", "DNAT") => {
                let port = match ne32(0)? & NAT_PROTO_SPECIFIED {
                    0 => None,
                    _ => Some(u16::from_be_bytes(info.get(36..38)?.try_into().ok()?)),
                };
                *t = Some(Target::Dnat(ip_of(self.proto, info.get(4..)?)?, port));
            }
            ("target", "MARK") => *t = Some(Target::SetXmark(ne32(0)?, ne32(4)?)),
            _ => return None,
        }
        Some(())
    }
}
