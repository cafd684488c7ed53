//! portmap (chained): forward host ports to a container (`runtimeConfig.portMappings`), with
//! hairpin and localhost access (`snat`), on either backend in upstream's layout so a node can
//! switch between the Go plugin and cnibox with containers running:
//!
//! ```text
//! iptables (nat, per family):
//!   PREROUTING/OUTPUT: -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
//!   CNI-HOSTPORT-DNAT: -p P -m comment --comment "dnat name: …" -m multiport --dports … -j CNI-DN-<21 hex>
//!   CNI-DN-<21 hex>:   [-s subnet|127.0.0.1 … -j CNI-HOSTPORT-SETMARK] … -j DNAT --to-destination IP:port
//!   CNI-HOSTPORT-SETMARK: -j MARK --set-xmark 0x2000/0x2000; CNI-HOSTPORT-MASQ: -m mark … -j MASQUERADE
//! nftables (tables ip/ip6 cni_hostport): chains hostports (DNAT rules), hostports_all,
//!   hostip_hostports, prerouting/output (fib daddr type local jump hostports_all), masquerading;
//!   every per-container rule is commented with the container ID.
//! ```
//!
//! iptables changes go through one `iptables-restore` per family; nftables through one netlink
//! batch per family. Beyond upstream: `conditionsV4/V6` on the nftables backend apply to this
//! container's rules only (upstream puts the latest ADD's conditions on the shared prerouting
//! rule, i.e. on every container); a repeated ADD replaces the container's rules instead of
//! duplicating them; GC removes the rules of containers that are gone; DEL also cleans up the
//! other backend; when `backend` is not set, nftables-syntax conditions select nftables (as
//! upstream's documentation says) instead of failing.

use crate::cni::gojson;
use crate::cni::result::CniResult;
use crate::cni::{Applet, Command, Context, Error, Request, Result, Version};
use crate::hash::sha512_hex;
use crate::netfilter::iptables::{self, Ipt, Proto, Saved, Script};
use crate::netfilter::{
    Backend, BaseChain, Batch, ChainType, Family, Hook, NFT_COMMENT_MAX, Nft, Rule, SCTP, Snapshot,
    TCP, Table, UDP, delete_commented, owners, validate,
};
use crate::netlink::Handle;
use crate::undo::{ErrorList, Undo};
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::HashSet;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "portmap",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: Some(gc),
};

const TOP_DNAT: &str = "CNI-HOSTPORT-DNAT";
const SETMARK: &str = "CNI-HOSTPORT-SETMARK";
const MARK_MASQ: &str = "CNI-HOSTPORT-MASQ";
const NFT_TABLE: &str = "cni_hostport";
const OWNERS: &str = "portmap-nft";
/// The nftables chains holding per-container rules (commented with the container ID).
const OWNED_CHAINS: [&str; 3] = ["hostports", "hostip_hostports", "masquerading"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conf {
    backend: Option<String>,
    snat: Option<bool>,
    #[serde(rename = "conditionsV4")]
    conditions_v4: Option<Vec<String>>,
    #[serde(rename = "conditionsV6")]
    conditions_v6: Option<Vec<String>>,
    #[serde(default)]
    masq_all: bool,
    mark_masq_bit: Option<i64>,
    external_set_mark_chain: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMapping {
    host_port: i64,
    container_port: i64,
    #[serde(default)]
    protocol: String,
    #[serde(default, rename = "hostIP")]
    host_ip: String,
}

#[derive(Debug, Clone)]
struct Mapping {
    host_port: u16,
    container_port: u16,
    proto: &'static str,
    /// `None`: no hostIP; `Some(unspecified)` still means "all addresses" of its family.
    host_ip: Option<IpAddr>,
}

impl Mapping {
    /// Whether the mapping applies to the family of `cip` and, if so, the destination to match.
    fn for_family(&self, v6: bool) -> Option<Option<IpAddr>> {
        match self.host_ip {
            None => Some(None),
            Some(h) if h.is_ipv6() != v6 => None,
            Some(h) if h.is_unspecified() => Some(None),
            Some(h) => Some(Some(h)),
        }
    }
    fn proto_num(&self) -> u8 {
        match self.proto {
            "udp" => UDP,
            "sctp" => SCTP,
            _ => TCP,
        }
    }
}

struct Pm {
    backend: Backend,
    snat: bool,
    masq_all: bool,
    mark: u32,
    set_mark_chain: Option<String>,
    cond4: Vec<String>,
    cond6: Vec<String>,
    maps: Vec<Mapping>,
    network: String,
    cid: String,
    ifname: String,
}

/// iptables syntax if the first token starts with `-` or `!`, else nftables (upstream's test).
fn conditions_backend(c: &[String]) -> Option<Backend> {
    let first = c.first()?.chars().next()?;
    Some(if first == '-' || first == '!' {
        Backend::Iptables
    } else {
        Backend::Nftables
    })
}

fn load(req: &Request) -> Result<Pm> {
    let c: Conf = req.decode()?;
    if c.mark_masq_bit.is_some() && c.external_set_mark_chain.is_some() {
        return Err(Error::config(
            "Cannot specify externalSetMarkChain and markMasqBit",
        ));
    }
    let bit = c.mark_masq_bit.unwrap_or(13);
    if !(0..=31).contains(&bit) {
        return Err(Error::config(format!(
            "MasqMarkBit must be between 0 and 31 (got {bit})"
        )));
    }
    // DEL removes rules by chain name and comment, never with these keys: an invalid value
    // (which no ADD accepted) must not keep a container's rules from being removed.
    let strict = req.env.command != Command::Del;
    if let Some(chain) = c.external_set_mark_chain.as_ref().filter(|_| strict) {
        validate::chain_name("externalSetMarkChain", chain)?;
        if [TOP_DNAT, SETMARK, MARK_MASQ].contains(&chain.as_str()) {
            return Err(Error::config(format!(
                "externalSetMarkChain: {chain:?} is one of the plugin's own chains"
            )));
        }
    }
    let cond4 = c.conditions_v4.unwrap_or_default();
    let cond6 = c.conditions_v6.unwrap_or_default();
    let mut wants: Vec<(Backend, &str)> = Vec::new();
    if c.external_set_mark_chain.is_some() {
        wants.push((Backend::Iptables, "externalSetMarkChain"));
    }
    for (cond, key) in [(&cond4, "conditionsV4"), (&cond6, "conditionsV6")] {
        if let Some(b) = conditions_backend(cond) {
            wants.push((b, key));
        }
    }
    let backend = match c.backend.as_deref() {
        None | Some("") => match wants.first() {
            Some((b, _)) => *b,
            None => Backend::default_backend(),
        },
        explicit => Backend::parse("backend", explicit)?,
    };
    let wrong: Vec<&str> = wants
        .iter()
        .filter(|(b, _)| *b != backend)
        .map(|(_, k)| *k)
        .collect();
    if !wrong.is_empty() {
        let (name, other) = match backend {
            Backend::Iptables => ("iptables", "nftables"),
            Backend::Nftables => ("nftables", "iptables"),
        };
        return Err(Error::config(format!(
            "{name} backend was requested but configuration contains {other}-specific options {wrong:?}"
        )));
    }
    // Conditions are checked for the backend that uses them: iptables arguments are written
    // into the restore script (quoted, one argument per element), nftables conditions are
    // parsed into rule statements (for both families, so an error shows before any change).
    for (cond, key, v6) in [
        (&cond4, "conditionsV4", false),
        (&cond6, "conditionsV6", true),
    ] {
        if !strict {
            break;
        }
        match backend {
            Backend::Iptables => {
                iptables::validate_condition_tokens(key, cond)?;
            }
            Backend::Nftables => {
                nft_conditions(cond, v6, key)?;
            }
        }
    }
    let raw: Vec<RawMapping> = match req.runtime_config("portMappings") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(v) => gojson::from_value::<Vec<RawMapping>>(v)
            .map_err(|e| Error::decode(format!("runtimeConfig.portMappings: {e}")))?,
    };
    let mut maps = Vec::with_capacity(raw.len());
    for m in raw {
        let port = |what: &str, p: i64| {
            u16::try_from(p)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| Error::config(format!("Invalid {what} port number: {p}")))
        };
        let proto = match m.protocol.to_ascii_lowercase().as_str() {
            "tcp" => "tcp",
            "udp" => "udp",
            "sctp" => "sctp",
            _ => {
                return Err(Error::config(format!(
                    "invalid protocol {:?} in portMappings: use tcp, udp or sctp",
                    m.protocol
                )));
            }
        };
        let host_ip = if m.host_ip.is_empty() {
            None
        } else {
            Some(m.host_ip.parse::<IpAddr>().map_err(|_| {
                Error::config(format!("invalid hostIP {:?} in portMappings", m.host_ip))
            })?)
        };
        maps.push(Mapping {
            container_port: port("container", m.container_port)?,
            host_port: port("host", m.host_port)?,
            proto,
            host_ip,
        });
    }
    Ok(Pm {
        backend,
        snat: c.snat.unwrap_or(true),
        masq_all: c.masq_all,
        mark: 1u32 << bit,
        set_mark_chain: c.external_set_mark_chain,
        cond4,
        cond6,
        maps,
        network: req.conf.name.clone(),
        cid: req.env.container_id.clone(),
        ifname: req.env.ifname.clone(),
    })
}

/// The first IPv4 and first IPv6 address of the container interface IFNAME (addresses without
/// an interface index count, as upstream).
fn container_ips(prev: &CniResult, ifname: &str) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = Vec::new();
    for ip in &prev.ips {
        if out
            .iter()
            .any(|o| o.addr().is_ipv4() == ip.address.addr().is_ipv4())
        {
            continue;
        }
        if let Some(i) = ip.interface
            && let Some(iface) = prev.interfaces.get(i)
            && (iface.name != ifname || iface.sandbox.is_empty())
        {
            continue;
        }
        out.push(ip.address);
    }
    out
}

fn dnat_chain(network: &str, cid: &str) -> String {
    format!(
        "CNI-DN-{}",
        sha512_hex(format!("{network}{cid}").as_bytes(), 21)
    )
}

fn old_snat_chain(network: &str, cid: &str) -> String {
    format!(
        "CNI-SN-{}",
        sha512_hex(format!("{network}{cid}").as_bytes(), 21)
    )
}

fn dnat_comment(network: &str, cid: &str) -> String {
    // Trimmed to iptables' limit by iptables::comment, as upstream trims it.
    format!("dnat name: {network:?} id: {cid:?}")
}

fn mark_def(mark: u32) -> String {
    format!("{mark:#x}/{mark:#x}")
}

// ---------------------------------------------------------------------------------------------
// iptables

/// The rules of the container's DNAT chain, in iptables-save's canonical form.
fn dn_rules(pm: &Pm, cip: &IpNet) -> Vec<String> {
    let v6 = cip.addr().is_ipv6();
    let host = Proto::of(&cip.addr()).host_bits();
    let mark_chain = pm.set_mark_chain.as_deref().unwrap_or(SETMARK);
    let mut rules = Vec::new();
    for m in &pm.maps {
        let Some(dst) = m.for_family(v6) else {
            continue;
        };
        let dst = dst.map(|d| format!("-d {d}/{host} ")).unwrap_or_default();
        let l4 = format!("-p {p} -m {p} --dport {}", m.host_port, p = m.proto);
        if pm.snat {
            let src = if pm.masq_all {
                String::new()
            } else {
                format!("-s {} ", cip.trunc())
            };
            rules.push(format!("{src}{dst}{l4} -j {mark_chain}"));
            if !v6 && !pm.masq_all {
                rules.push(format!("-s 127.0.0.1/32 {dst}{l4} -j {mark_chain}"));
            }
        }
        let to = match cip.addr() {
            IpAddr::V4(a) => format!("{a}:{}", m.container_port),
            IpAddr::V6(a) => format!("[{a}]:{}", m.container_port),
        };
        rules.push(format!("{dst}{l4} -j DNAT --to-destination {to}"));
    }
    rules
}

/// The jumps from CNI-HOSTPORT-DNAT: per protocol (sorted), ports in chunks of 15.
fn entry_rules(pm: &Pm, v6: bool) -> Vec<String> {
    let comment = iptables::comment(&dnat_comment(&pm.network, &pm.cid));
    let mut protos: Vec<&str> = pm.maps.iter().map(|m| m.proto).collect();
    protos.sort_unstable();
    protos.dedup();
    let cond = if v6 { &pm.cond6 } else { &pm.cond4 };
    let cond: String = cond
        .iter()
        .map(|t| format!(" {}", iptables::quote(t)))
        .collect();
    let mut out = Vec::new();
    for p in protos {
        let ports: Vec<String> = pm
            .maps
            .iter()
            .filter(|m| m.proto == p)
            .map(|m| m.host_port.to_string())
            .collect();
        for chunk in ports.chunks(15) {
            out.push(format!(
                "-p {p} {comment} -m multiport --dports {}{cond} -j {}",
                chunk.join(","),
                dnat_chain(&pm.network, &pm.cid)
            ));
        }
    }
    out
}

fn ipt_add(pm: &Pm, cip: &IpNet) -> Result<()> {
    let ipt = Ipt::new(Proto::of(&cip.addr()))?;
    let v6 = cip.addr().is_ipv6();
    let chain = dnat_chain(&pm.network, &pm.cid);
    let rules = dn_rules(pm, cip);
    let entries = entry_rules(pm, v6);
    ipt.transact("nat", |saved| {
        let mut s = Script::new();
        if pm.snat && pm.set_mark_chain.is_none() {
            let def = mark_def(pm.mark);
            s.ensure_chain(saved, SETMARK).append_unique(
                saved,
                SETMARK,
                &format!(
                    "{} -j MARK --set-xmark {def}",
                    iptables::comment("CNI portfwd masquerade mark")
                ),
            );
            s.ensure_chain(saved, MARK_MASQ).append_unique(
                saved,
                MARK_MASQ,
                &format!("-m mark --mark {def} -j MASQUERADE"),
            );
            s.insert_unique(
                saved,
                "POSTROUTING",
                &format!(
                    "{} -j {MARK_MASQ}",
                    iptables::comment("CNI portfwd requiring masquerade")
                ),
            );
        }
        s.ensure_chain(saved, TOP_DNAT);
        for entry in ["PREROUTING", "OUTPUT"] {
            s.append_unique(
                saved,
                entry,
                &format!("-m addrtype --dst-type LOCAL -j {TOP_DNAT}"),
            );
        }
        // Replace whatever this container had (a repeated ADD must not duplicate rules).
        if saved.has_chain(&chain) {
            for (from, spec) in saved.jumps_to(&chain) {
                s.delete(from, spec);
            }
            s.flush(&chain);
        } else {
            s.new_chain(&chain);
        }
        let ext = pm.set_mark_chain.as_deref().filter(|_| pm.snat);
        if let Some(ext) = ext
            && !saved.has_chain(ext)
        {
            return Err(Error::config(format!(
                "externalSetMarkChain: chain {ext:?} does not exist in the {} nat table",
                if v6 { "ip6tables" } else { "iptables" }
            )));
        }
        let jump = ext.map(|c| format!(" -j {c}"));
        for r in &rules {
            match (ext, &jump) {
                (Some(ext), Some(j)) if r.ends_with(j.as_str()) => {
                    s.from_key("externalSetMarkChain", &[ext], |s| {
                        s.append(&chain, r);
                    });
                }
                _ => {
                    s.append(&chain, r);
                }
            }
        }
        let (key, cond) = if v6 {
            ("conditionsV6", &pm.cond6)
        } else {
            ("conditionsV4", &pm.cond4)
        };
        let values: Vec<&str> = cond.iter().map(String::as_str).collect();
        let add_entries = |s: &mut Script| {
            for e in &entries {
                s.append(TOP_DNAT, e);
            }
        };
        if values.is_empty() {
            add_entries(&mut s);
        } else {
            s.from_key(key, &values, add_entries);
        }
        Ok(s)
    })
}

fn ipt_check(pm: &Pm, cip: &IpNet) -> Result<()> {
    let ipt = Ipt::new(Proto::of(&cip.addr()))?;
    let saved = ipt.save("nat")?;
    let chain = dnat_chain(&pm.network, &pm.cid);
    if !saved.has_chain(&chain) {
        return Err(Error::internal(format!(
            "chain {chain} not found in iptables table nat"
        )));
    }
    for r in dn_rules(pm, cip) {
        if !saved.has_rule(&chain, &r) {
            return Err(Error::internal(format!(
                "rule {r:?} in chain {chain} not found in table nat"
            )));
        }
    }
    let want = entry_rules(pm, cip.addr().is_ipv6()).len();
    let have = saved
        .jumps_to(&chain)
        .filter(|(c, _)| *c == TOP_DNAT)
        .count();
    if have < want {
        return Err(Error::internal(format!(
            "{TOP_DNAT} has {have} of the {want} rules jumping to {chain}"
        )));
    }
    Ok(())
}

fn ipt_remove(ipt: &Ipt, chains: &[String]) -> Result<()> {
    ipt.transact("nat", |saved| {
        let mut s = Script::new();
        for c in chains {
            s.remove_chain(saved, c);
        }
        Ok(s)
    })
}

// ---------------------------------------------------------------------------------------------
// nftables

/// The comment of a container's nftables rules: its ID, as upstream writes it; an ID longer
/// than nft's comment limit (where upstream fails) is cut and ends in `/` and 16 hex of its
/// hash (`/` is never in a container ID, so no short ID can match it).
fn nft_comment(cid: &str) -> String {
    if cid.len() <= NFT_COMMENT_MAX {
        return cid.to_string();
    }
    let mut end = NFT_COMMENT_MAX - 17;
    while !cid.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}/{}", &cid[..end], sha512_hex(cid.as_bytes(), 16))
}

fn nft_table(v6: bool) -> Table {
    Table::new(if v6 { Family::Ip6 } else { Family::Ip }, NFT_TABLE)
}

/// One parsed nftables condition: a match on one field, with the values of an anonymous set
/// (`{ a, b }`) or a single value.
#[derive(Debug, Clone, PartialEq)]
enum Cond {
    Addr {
        dst: bool,
        net: IpNet,
        neq: bool,
    },
    Ifname {
        out: bool,
        name: String,
        neq: bool,
    },
    Mark {
        mark: u32,
        neq: bool,
    },
    L4proto {
        proto: u8,
        neq: bool,
    },
    /// `th|tcp|udp|sctp dport|sport`: `l4` is the protocol dependency (`None` for `th`).
    Port {
        l4: Option<u8>,
        dst: bool,
        port: u16,
        neq: bool,
    },
}

impl Cond {
    fn apply(&self, r: Rule) -> Rule {
        match self {
            Cond::Addr { dst, net, neq } => match (dst, neq) {
                (false, false) => r.saddr(*net),
                (false, true) => r.saddr_not(*net),
                (true, false) => r.daddr(*net),
                (true, true) => r.daddr_not(*net),
            },
            Cond::Ifname { out, name, neq } => match (out, neq) {
                (false, false) => r.iifname(name),
                (false, true) => r.iifname_not(name),
                (true, false) => r.oifname(name),
                (true, true) => r.oifname_not(name),
            },
            Cond::Mark { mark, neq } => r.mark(*mark, *neq),
            Cond::L4proto { proto, neq: false } => r.l4proto(*proto),
            Cond::L4proto { proto, neq: true } => r.l4proto_not(*proto),
            Cond::Port { l4, dst, port, neq } => {
                let r = match l4 {
                    Some(p) => r.l4proto(*p),
                    None => r,
                };
                r.port(*dst, *port, *neq)
            }
        }
    }
}

/// The most rules one mapping may expand to (positive anonymous sets become one rule per
/// combination of their elements).
const MAX_CONDITION_RULES: usize = 64;

const NFT_SYNTAX: &str = "supported: `ip|ip6 saddr|daddr`, `iifname|oifname` (also after \
    `meta`), `meta mark`, `meta l4proto`, `th|tcp|udp|sctp dport|sport`, each followed by an \
    optional `==`/`!=` and a value or an anonymous set `{ a, b }`";

/// Split nftables condition text into tokens: words, `{`, `}`, `,` and quoted strings (quotes
/// removed).
fn nft_tokens(text: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                flush(&mut cur, &mut out);
                let mut q = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some(c) if c.is_control() => {
                            return Err(format!("control character {c:?}"));
                        }
                        Some(c) => q.push(c),
                        None => return Err("unterminated quoted string".into()),
                    }
                }
                out.push(q);
            }
            '{' | '}' | ',' => {
                flush(&mut cur, &mut out);
                out.push(c.to_string());
            }
            c if c.is_control() && c != '\t' => {
                return Err(format!("control character {c:?}"));
            }
            c if c.is_whitespace() => flush(&mut cur, &mut out),
            c => cur.push(c),
        }
    }
    flush(&mut cur, &mut out);
    Ok(out)
}

/// Parse nftables-syntax conditions (`conditionsV4`/`conditionsV6`, elements joined with
/// spaces as upstream pastes them into its rules) into the rules they stand for: one rule per
/// combination of the elements of positive anonymous sets (a negated set is all of its
/// `!=` matches in one rule). Anything else is a code 7 error naming the token.
fn nft_conditions(cond: &[String], v6: bool, key: &str) -> Result<Vec<Rule>> {
    let text = cond.join(" ");
    let bad = |why: String| Error::config(format!("{key}: {why} in {text:?}; {NFT_SYNTAX}"));
    let toks = nft_tokens(&text).map_err(&bad)?;
    // Each condition: its alternatives (one for a value or a negated set).
    let mut conds: Vec<Vec<Vec<Cond>>> = Vec::new();
    let mut i = 0;
    let tok = |i: usize| toks.get(i).map(String::as_str);
    while i < toks.len() {
        let t = toks[i].as_str();
        // The field: how many tokens it takes and how to build a condition from one value.
        type Make<'a> = Box<dyn Fn(&str) -> std::result::Result<Cond, String> + 'a>;
        let (width, make): (usize, Make) = match (t, tok(i + 1)) {
            ("ip" | "ip6", Some(f @ ("saddr" | "daddr"))) => {
                if (t == "ip6") != v6 {
                    return Err(bad(format!(
                        "`{t} {f}` does not apply to {}",
                        if v6 { "IPv6" } else { "IPv4" }
                    )));
                }
                let dst = f == "daddr";
                (
                    2,
                    Box::new(move |v: &str| {
                        let net = v
                            .parse::<IpNet>()
                            .or_else(|_| v.parse::<IpAddr>().map(IpNet::from))
                            .map_err(|_| format!("bad address {v:?}"))?;
                        if net.addr().is_ipv6() != v6 {
                            return Err(format!(
                                "{v:?} is not an IPv{} address",
                                if v6 { 6 } else { 4 }
                            ));
                        }
                        Ok(Cond::Addr {
                            dst,
                            net: net.trunc(),
                            neq: false,
                        })
                    }),
                )
            }
            ("ip" | "ip6", _) => {
                return Err(bad(format!(
                    "unsupported token {:?} after `{t}` (expected saddr or daddr)",
                    tok(i + 1).unwrap_or("")
                )));
            }
            ("iifname" | "oifname", _) | ("meta", Some("iifname" | "oifname")) => {
                let (width, field) = if t == "meta" {
                    (2, toks[i + 1].as_str())
                } else {
                    (1, t)
                };
                let out = field == "oifname";
                (
                    width,
                    Box::new(move |v: &str| {
                        if v.is_empty() || v.len() > 15 || v.chars().any(|c| c.is_control()) {
                            return Err(format!("bad interface name {v:?} (1-15 bytes)"));
                        }
                        if v.ends_with('*') {
                            return Err(format!("wildcard interface name {v:?} is not supported"));
                        }
                        Ok(Cond::Ifname {
                            out,
                            name: v.to_string(),
                            neq: false,
                        })
                    }),
                )
            }
            ("meta", Some("mark")) | ("mark", _) => (
                if t == "meta" { 2 } else { 1 },
                Box::new(|v: &str| {
                    let mark = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
                        Some(h) => u32::from_str_radix(h, 16),
                        None => v.parse::<u32>(),
                    }
                    .map_err(|_| format!("bad mark {v:?}"))?;
                    Ok(Cond::Mark { mark, neq: false })
                }),
            ),
            ("meta", Some("l4proto")) => (
                2,
                Box::new(|v: &str| {
                    let proto = match v {
                        "tcp" => TCP,
                        "udp" => UDP,
                        "sctp" => SCTP,
                        _ => v.parse::<u8>().map_err(|_| format!("bad protocol {v:?}"))?,
                    };
                    Ok(Cond::L4proto { proto, neq: false })
                }),
            ),
            ("meta", other) => {
                return Err(bad(format!(
                    "unsupported token {:?} after `meta`",
                    other.unwrap_or("")
                )));
            }
            ("th" | "tcp" | "udp" | "sctp", Some(f @ ("dport" | "sport"))) => {
                let l4 = match t {
                    "tcp" => Some(TCP),
                    "udp" => Some(UDP),
                    "sctp" => Some(SCTP),
                    _ => None,
                };
                let dst = f == "dport";
                (
                    2,
                    Box::new(move |v: &str| {
                        let port = v.parse::<u16>().map_err(|_| {
                            format!("bad port {v:?} (a number; ranges and service names are not supported)")
                        })?;
                        Ok(Cond::Port {
                            l4,
                            dst,
                            port,
                            neq: false,
                        })
                    }),
                )
            }
            ("th" | "tcp" | "udp" | "sctp", other) => {
                return Err(bad(format!(
                    "unsupported token {:?} after `{t}` (expected dport or sport)",
                    other.unwrap_or("")
                )));
            }
            (other, _) => return Err(bad(format!("unsupported token {other:?}"))),
        };
        let what = toks[i..i + width].join(" ");
        i += width;
        let neq = match tok(i) {
            Some("!=" | "ne") => {
                i += 1;
                true
            }
            Some("==" | "eq") => {
                i += 1;
                false
            }
            _ => false,
        };
        // One value or an anonymous set.
        let mut values = Vec::new();
        match tok(i) {
            None => return Err(bad(format!("missing value after `{what}`"))),
            Some("{") => {
                i += 1;
                loop {
                    match tok(i) {
                        None => return Err(bad(format!("unterminated set after `{what}`"))),
                        Some("}") => {
                            i += 1;
                            break;
                        }
                        Some(",") => i += 1,
                        Some(v) => {
                            values.push(v.to_string());
                            i += 1;
                        }
                    }
                }
                if values.is_empty() {
                    return Err(bad(format!("empty set after `{what}`")));
                }
            }
            Some(v @ ("}" | ",")) => return Err(bad(format!("unexpected {v:?} after `{what}`"))),
            Some(v) => {
                values.push(v.to_string());
                i += 1;
            }
        }
        let mut parsed = Vec::new();
        for v in &values {
            let mut c = make(v).map_err(|e| bad(format!("`{what}`: {e}")))?;
            match &mut c {
                Cond::Addr { neq: n, .. }
                | Cond::Ifname { neq: n, .. }
                | Cond::Mark { neq: n, .. }
                | Cond::L4proto { neq: n, .. }
                | Cond::Port { neq: n, .. } => *n = neq,
            }
            parsed.push(c);
        }
        conds.push(if neq {
            vec![parsed]
        } else {
            parsed.into_iter().map(|c| vec![c]).collect()
        });
    }
    let mut rules = vec![Rule::new()];
    for alts in &conds {
        if rules.len() * alts.len() > MAX_CONDITION_RULES {
            return Err(bad(format!(
                "the sets expand to more than {MAX_CONDITION_RULES} rules per port mapping"
            )));
        }
        rules = rules
            .iter()
            .flat_map(|r| {
                alts.iter()
                    .map(move |alt| alt.iter().fold(r.clone(), |r, c| c.apply(r)))
            })
            .collect();
    }
    Ok(rules)
}

/// (chain, handle) of the rules in the per-container chains whose comment (the container ID)
/// `owned` accepts.
fn nft_owned(snap: &Snapshot, owned: impl Fn(&str) -> bool) -> Vec<(&'static str, u64)> {
    OWNED_CHAINS
        .iter()
        .flat_map(|chain| {
            snap.comments_in(chain)
                .filter(|(_, c)| owned(c))
                .map(move |(h, _)| (*chain, h))
        })
        .collect()
}

fn nft_add(pm: &Pm, cip: &IpNet) -> Result<()> {
    let v6 = cip.addr().is_ipv6();
    let t = nft_table(v6);
    let (cond, key) = if v6 {
        (&pm.cond6, "conditionsV6")
    } else {
        (&pm.cond4, "conditionsV4")
    };
    let bases = nft_conditions(cond, v6, key)?;
    let mut nft = Nft::open()?;
    let snap = nft.snapshot(&t)?;
    let mut b = Batch::new();
    b.ensure_table(&snap, &t, Some("CNI portmap plugin"))
        .ensure_chain(&snap, &t, "hostports", None)
        .ensure_chain(&snap, &t, "hostip_hostports", None)
        .ensure_fixed_chain(
            &snap,
            &t,
            "hostports_all",
            None,
            &[
                Rule::new().jump("hostip_hostports"),
                Rule::new().jump("hostports"),
            ],
        );
    for (chain, hook) in [("prerouting", Hook::Prerouting), ("output", Hook::Output)] {
        b.ensure_fixed_chain(
            &snap,
            &t,
            chain,
            Some(BaseChain::new(ChainType::Nat, hook, -100)),
            &[Rule::new().fib_daddr_local().jump("hostports_all")],
        );
    }
    if pm.snat {
        b.ensure_chain(
            &snap,
            &t,
            "masquerading",
            Some(BaseChain::new(ChainType::Nat, Hook::Postrouting, 100)),
        );
    }
    // A repeated ADD replaces the container's rules.
    for chain in OWNED_CHAINS {
        for (h, c) in snap.comments_in(chain) {
            if c == nft_comment(&pm.cid) {
                b.del_rule(&t, chain, h);
            }
        }
    }
    for m in &pm.maps {
        let Some(dst) = m.for_family(v6) else {
            continue;
        };
        for base in &bases {
            let mut r = base.clone();
            if let Some(d) = dst {
                r = r.daddr(d);
            }
            r = r
                .l4proto(m.proto_num())
                .dport(m.host_port)
                .dnat(cip.addr(), Some(m.container_port))
                .comment(nft_comment(&pm.cid));
            b.add_rule(&t, "hostports", &r);
        }
    }
    if pm.snat {
        let src: IpNet = if pm.masq_all {
            if v6 {
                "::/0".parse().expect("literal")
            } else {
                "0.0.0.0/0".parse().expect("literal")
            }
        } else {
            cip.addr().into()
        };
        b.add_rule(
            &t,
            "masquerading",
            &Rule::new()
                .saddr(src)
                .daddr(cip.addr())
                .masquerade()
                .comment(nft_comment(&pm.cid)),
        );
        if !v6 && !pm.masq_all {
            b.add_rule(
                &t,
                "masquerading",
                &Rule::new()
                    .saddr("127.0.0.1".parse::<IpAddr>().expect("literal"))
                    .daddr(cip.addr())
                    .masquerade()
                    .comment(nft_comment(&pm.cid)),
            );
        }
    }
    nft.apply(&b)
        .ctx("unable to set up nftables rules for port mappings")
}

fn nft_check(pm: &Pm, cip: &IpNet) -> Result<()> {
    let v6 = cip.addr().is_ipv6();
    let t = nft_table(v6);
    let want_ports = pm
        .maps
        .iter()
        .filter(|m| m.for_family(v6).is_some())
        .count();
    let want_masq = match (pm.snat, !v6 && !pm.masq_all) {
        (false, _) => 0,
        (true, true) => 2,
        (true, false) => 1,
    };
    let snap = Nft::open()?.snapshot(&t)?;
    let mine = nft_comment(&pm.cid);
    let owned = nft_owned(&snap, |c| c == mine);
    for (chain, want) in [("hostports", want_ports), ("masquerading", want_masq)] {
        let have = owned.iter().filter(|(c, _)| *c == chain).count();
        if have < want {
            return Err(Error::internal(format!(
                "missing hostport rules in {chain:?} chain of {t}"
            )));
        }
    }
    Ok(())
}

/// Delete the container's rules from both nftables families; no table is fine.
fn nft_remove(cids: &HashSet<&str>) -> Result<()> {
    let comments: HashSet<String> = cids.iter().map(|c| nft_comment(c)).collect();
    for v6 in [false, true] {
        delete_commented(&nft_table(v6), &OWNED_CHAINS, |c| comments.contains(c))
            .ctx("error deleting nftables rules")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// host side effects

/// `route_localnet=1` on the host interface that routes to the container, so 127.0.0.1:port
/// can be DNATed to it.
fn enable_route_localnet(cip: IpAddr) -> Result<()> {
    let mut h = Handle::new()?;
    let Some(oif) = h.route_get(cip)? else {
        return Ok(());
    };
    let Some(link) = h.link_by_index(oif)? else {
        return Ok(());
    };
    crate::sysctl::set(
        &crate::sysctl::iface("net/ipv4/conf", &link.name, "route_localnet"),
        "1",
    )
    .ctx("unable to enable route_localnet")
}

// ---------------------------------------------------------------------------------------------
// verbs

fn add(req: &Request) -> Result<CniResult> {
    let pm = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("must be called as chained plugin"))?;
    if pm.maps.is_empty() {
        return Ok(prev);
    }
    let ips = container_ips(&prev, &pm.ifname);
    // Each address is its own transaction: a failure at the second must take the first back.
    let mut undo = Undo::new("portmap");
    undo.push("port mappings", || remove(&pm.network, &pm.cid));
    let r = (|| -> Result<()> {
        for cip in &ips {
            match pm.backend {
                Backend::Iptables => ipt_add(&pm, cip)?,
                Backend::Nftables => nft_add(&pm, cip)?,
            }
            let udp: Vec<u16> = pm
                .maps
                .iter()
                .filter(|m| m.proto == "udp")
                .map(|m| m.host_port)
                .collect();
            if !udp.is_empty()
                && let Err(e) =
                    crate::netfilter::conntrack::delete_udp_dport(cip.addr().is_ipv6(), &udp)
            {
                eprintln!("portmap: failed to delete stale UDP conntrack entries for {cip}: {e}");
            }
            if pm.snat && cip.addr().is_ipv4() {
                enable_route_localnet(cip.addr())?;
            }
        }
        if pm.backend == Backend::Nftables && !ips.is_empty() {
            owners::record(OWNERS, &pm.network, &pm.cid, &pm.ifname, &[])?;
        }
        Ok(())
    })();
    undo.finish(r)?;
    Ok(prev)
}

fn remove(network: &str, cid: &str) -> Result<()> {
    let chains = [dnat_chain(network, cid), old_snat_chain(network, cid)];
    let mut errors = ErrorList::new();
    let names = [chains[0].as_str(), chains[1].as_str()];
    for proto in [Proto::V4, Proto::V6] {
        if !iptables::may_hold(proto, "nat", &names) {
            continue;
        }
        if let Ok(ipt) = Ipt::new(proto) {
            errors.check(ipt_remove(&ipt, &chains));
        }
    }
    errors.check(nft_remove(&HashSet::from([cid])));
    errors.into_result()
}

fn del(req: &Request) -> Result<()> {
    let pm = load(req)?;
    if pm.maps.is_empty() {
        return Ok(());
    }
    // Both backends: a node may have switched backend while the container ran.
    remove(&pm.network, &pm.cid)?;
    owners::forget(OWNERS, &pm.network, &pm.cid, &pm.ifname);
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let pm = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("Required prevResult missing"))?;
    if pm.maps.is_empty() {
        return Ok(());
    }
    for cip in container_ips(&prev, &pm.ifname) {
        match pm.backend {
            Backend::Iptables => ipt_check(&pm, &cip)?,
            Backend::Nftables => nft_check(&pm, &cip)?,
        }
    }
    Ok(())
}

/// Remove the port mappings of this network's containers that are not valid attachments:
/// iptables DNAT chains found through their `dnat name: "<net>"` entry rules, nftables rules
/// through the ADD records (nftables rules name only the container).
fn gc(req: &Request) -> Result<()> {
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let network = &req.conf.name;
    let keep_ids: HashSet<&str> = valid.iter().map(|a| a.container_id.as_str()).collect();
    let keep_chains: HashSet<String> = valid
        .iter()
        .map(|a| dnat_chain(network, &a.container_id))
        .collect();
    let mine = iptables::comment_prefix(&format!("dnat name: {network:?} id: "));
    let mut failures = ErrorList::new();
    for proto in [Proto::V4, Proto::V6] {
        let Ok(ipt) = Ipt::new(proto) else { continue };
        failures.check(ipt.transact("nat", |saved: &Saved| {
            let mut stale: Vec<String> = saved
                .rules_in(TOP_DNAT)
                .filter(|r| r.contains(&mine))
                .filter_map(|r| r.rsplit_once(" -j ").map(|(_, t)| t.to_string()))
                .filter(|t| t.starts_with("CNI-DN-") && !keep_chains.contains(t))
                .collect();
            stale.sort();
            stale.dedup();
            let mut s = Script::new();
            for c in &stale {
                s.remove_chain(saved, c);
            }
            Ok(s)
        }));
    }
    // One nftables batch per family for every stale container.
    let stale: Vec<(String, String, Vec<String>)> = owners::list(OWNERS, network)
        .into_iter()
        .filter(|(cid, _, _)| !keep_ids.contains(cid.as_str()))
        .collect();
    let cids: HashSet<&str> = stale.iter().map(|(cid, _, _)| cid.as_str()).collect();
    if !cids.is_empty() && failures.check(nft_remove(&cids)).is_some() {
        for (cid, ifname, _) in &stale {
            owners::forget(OWNERS, network, cid, ifname);
        }
    }
    failures.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(maps: Vec<Mapping>) -> Pm {
        Pm {
            backend: Backend::Iptables,
            snat: true,
            masq_all: false,
            mark: 0x2000,
            set_mark_chain: None,
            cond4: Vec::new(),
            cond6: Vec::new(),
            maps,
            network: "net".into(),
            cid: "c1".into(),
            ifname: "eth0".into(),
        }
    }

    fn tcp(h: u16, c: u16) -> Mapping {
        Mapping {
            host_port: h,
            container_port: c,
            proto: "tcp",
            host_ip: None,
        }
    }

    #[test]
    fn iptables_rules_in_saved_form() {
        let p = pm(vec![tcp(8080, 80)]);
        let cip: IpNet = "10.1.0.5/24".parse().unwrap();
        let r = dn_rules(&p, &cip);
        assert_eq!(
            r,
            vec![
                "-s 10.1.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
                "-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.5:80",
            ]
        );
        let e = entry_rules(&p, false);
        assert_eq!(e.len(), 1);
        assert!(e[0].starts_with(
            r#"-p tcp -m comment --comment "dnat name: \"net\" id: \"c1\"" -m multiport --dports 8080 -j CNI-DN-"#
        ));
        assert_eq!(mark_def(1 << 13), "0x2000/0x2000");
    }

    #[test]
    fn ports_split_in_chunks_of_15() {
        let p = pm((1..=16).map(|i| tcp(1000 + i, 80)).collect());
        assert_eq!(entry_rules(&p, false).len(), 2);
    }

    #[test]
    fn chain_names() {
        assert_eq!(dnat_chain("net", "cid").len(), 28);
        assert!(old_snat_chain("net", "cid").starts_with("CNI-SN-"));
    }

    fn cond(parts: &[&str], v6: bool) -> Result<Vec<Rule>> {
        let c: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
        nft_conditions(&c, v6, if v6 { "conditionsV6" } else { "conditionsV4" })
    }

    #[test]
    fn nft_conditions_parse() {
        let one = cond(&["ip saddr != 10.0.0.0/8", "iifname", "\"eth0\""], false).unwrap();
        assert_eq!(
            one,
            vec![
                Rule::new()
                    .saddr_not("10.0.0.0/8".parse::<IpNet>().unwrap())
                    .iifname("eth0")
            ]
        );
        assert!(cond(&["ip saddr != 10.0.0.0/8"], true).is_err());
        // Anonymous sets: a positive set is one rule per element, a negated one all `!=`s.
        let set = cond(&["ip saddr { 127.0.0.0/8, 10.0.0.1 }"], false).unwrap();
        assert_eq!(
            set,
            vec![
                Rule::new().saddr("127.0.0.0/8".parse::<IpNet>().unwrap()),
                Rule::new().saddr("10.0.0.1/32".parse::<IpNet>().unwrap()),
            ]
        );
        assert_eq!(
            cond(&["ip", "daddr", "{10.0.0.1,10.0.0.2}"], false)
                .unwrap()
                .len(),
            2
        );
        let neg = cond(&["ip saddr != { 127.0.0.0/8, 10.0.0.1 }"], false).unwrap();
        assert_eq!(
            neg,
            vec![
                Rule::new()
                    .saddr_not("127.0.0.0/8".parse::<IpNet>().unwrap())
                    .saddr_not("10.0.0.1/32".parse::<IpNet>().unwrap())
            ]
        );
        assert_eq!(
            cond(
                &["meta mark 0x10", "th dport != 22", "meta l4proto tcp"],
                false
            )
            .unwrap(),
            vec![
                Rule::new()
                    .mark(0x10, false)
                    .port(true, 22, true)
                    .l4proto(TCP)
            ]
        );
        assert_eq!(
            cond(&["tcp dport { 80, 443 } oifname != \"lo\""], true).unwrap(),
            vec![
                Rule::new().l4proto(TCP).dport(80).oifname_not("lo"),
                Rule::new().l4proto(TCP).dport(443).oifname_not("lo"),
            ]
        );
        assert_eq!(
            cond(&["ip6 daddr == ::1", "mark != 7"], true)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(cond(&[], false).unwrap(), vec![Rule::new()]);
        // Every error is code 7, names the key and the offending token.
        for (parts, v6, token) in [
            (&["meta foo 1"][..], false, "\"foo\""),
            (&["ct state established"][..], false, "\"ct\""),
            (&["ip saddr"][..], false, "missing value"),
            (&["ip saddr { 10.0.0.1"][..], false, "unterminated set"),
            (&["ip saddr {}"][..], false, "empty set"),
            (&["ip saddr fd00::1"][..], false, "not an IPv4"),
            (&["ip6 saddr fd00::1"][..], false, "does not apply to IPv4"),
            (&["th dport 1000-2000"][..], false, "ranges"),
            (&["tcp dport http"][..], false, "bad port"),
            (&["iifname \"eth0"][..], false, "unterminated"),
            (
                &["iifname \"averyveryverylongname\""][..],
                false,
                "bad interface",
            ),
            (&["iifname eth*"][..], false, "wildcard"),
            (
                &["ip saddr 10.0.0.1\n;add rule ip x y drop"][..],
                false,
                "control character",
            ),
            (&["ip saddr 10.0.0.1 ; drop"][..], false, "\";\""),
            (
                &[
                    "ip saddr { 1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, 1.1.1.8 } ip daddr { 1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, 1.1.1.8, 1.1.1.9 }",
                ][..],
                false,
                "more than 64",
            ),
        ] {
            let e = cond(parts, v6).unwrap_err();
            assert_eq!(e.code, crate::cni::error::code::INVALID_CONFIG, "{parts:?}");
            assert!(e.msg.starts_with("conditionsV4: "), "{}", e.msg);
            assert!(e.msg.contains(token), "{parts:?}: {}", e.msg);
        }
    }
}
