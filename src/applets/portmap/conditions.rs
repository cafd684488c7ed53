//! `conditionsV4/V6` for the nftables backend: the `nft` expressions users write, parsed into
//! rule matches (or refused naming the token).

use crate::cni::{Error, Result};
use crate::netfilter::{Rule, SCTP, TCP, UDP, ct};
use ipnet::IpNet;
use std::net::IpAddr;

/// One parsed nftables condition: a match on one field, with the values of an anonymous set
/// (`{ a, b }`) or a single value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cond {
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
    /// `ct state`: the bits of the states listed (`a,b` is one match, as in `nft`).
    CtState {
        bits: u32,
        neq: bool,
    },
    /// `fib saddr|daddr type T`.
    Fib {
        daddr: bool,
        rtype: u32,
        neq: bool,
    },
    /// `iif|oif NAME` (also after `meta`): the interface's index when the rule is made.
    Ifindex {
        out: bool,
        index: u32,
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
            Cond::CtState { bits, neq: false } => r.ct_state(*bits),
            Cond::CtState { bits, neq: true } => r.ct_state_not(*bits),
            Cond::Fib { daddr, rtype, neq } => r.fib_type(*daddr, *rtype, *neq),
            Cond::Ifindex { out, index, neq } => r.ifindex(*out, *index, *neq),
        }
    }
}

/// `ct state` names and their bits.
const CT_STATES: &[(&str, u32)] = &[
    ("invalid", ct::INVALID),
    ("established", ct::ESTABLISHED),
    ("related", ct::RELATED),
    ("new", ct::NEW),
    ("untracked", ct::UNTRACKED),
];

/// `fib … type` names, in `RTN_*` order (0 = unspec).
const FIB_TYPES: &[&str] = &[
    "unspec",
    "unicast",
    "local",
    "broadcast",
    "anycast",
    "multicast",
    "blackhole",
    "unreachable",
    "prohibit",
];

/// An interface name as `nft` takes it: 1-15 bytes, no control character, no wildcard.
fn check_ifname(v: &str) -> std::result::Result<(), String> {
    if v.is_empty() || v.len() > 15 || v.chars().any(|c| c.is_control()) {
        return Err(format!("bad interface name {v:?} (1-15 bytes)"));
    }
    if v.ends_with('*') {
        return Err(format!("wildcard interface name {v:?} is not supported"));
    }
    Ok(())
}

/// The most rules one mapping may expand to (positive anonymous sets become one rule per
/// combination of their elements).
pub(super) const MAX_CONDITION_RULES: usize = 64;

pub(super) const NFT_SYNTAX: &str = "supported: `ip|ip6 saddr|daddr`, `iifname|oifname|iif|oif` \
    (also after `meta`), `meta mark`, `meta l4proto`, `th|tcp|udp|sctp dport|sport`, \
    `ct state`, `fib saddr|daddr type`, each followed by an optional `==`/`!=` and a value or \
    an anonymous set `{ a, b }`";

/// Split nftables condition text into tokens: words, `{`, `}`, `,` and quoted strings (quotes
/// removed).
pub(super) fn nft_tokens(text: &str) -> std::result::Result<Vec<String>, String> {
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
pub(super) fn nft_conditions(cond: &[String], v6: bool, key: &str) -> Result<Vec<Rule>> {
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
                        check_ifname(v)?;
                        Ok(Cond::Ifname {
                            out,
                            name: v.to_string(),
                            neq: false,
                        })
                    }),
                )
            }
            ("iif" | "oif", _) | ("meta", Some("iif" | "oif")) => {
                let (width, field) = if t == "meta" {
                    (2, toks[i + 1].as_str())
                } else {
                    (1, t)
                };
                let out = field == "oif";
                (
                    width,
                    Box::new(move |v: &str| {
                        check_ifname(v)?;
                        let index = nix::net::if_::if_nametoindex(v)
                            .map_err(|_| format!("no interface {v:?} on the node"))?;
                        Ok(Cond::Ifindex {
                            out,
                            index,
                            neq: false,
                        })
                    }),
                )
            }
            ("ct", Some("state")) => (
                2,
                Box::new(|v: &str| {
                    let bits = CT_STATES
                        .iter()
                        .find(|(n, _)| *n == v)
                        .map(|(_, b)| *b)
                        .ok_or_else(|| format!("unknown state {v:?}"))?;
                    Ok(Cond::CtState { bits, neq: false })
                }),
            ),
            ("ct", other) => {
                return Err(bad(format!(
                    "unsupported token {:?} after `ct` (expected state)",
                    other.unwrap_or("")
                )));
            }
            ("fib", Some(f @ ("saddr" | "daddr"))) if tok(i + 2) == Some("type") => {
                let daddr = f == "daddr";
                (
                    3,
                    Box::new(move |v: &str| {
                        let rtype = FIB_TYPES
                            .iter()
                            .position(|n| *n == v)
                            .ok_or_else(|| format!("unknown route type {v:?}"))?;
                        Ok(Cond::Fib {
                            daddr,
                            rtype: rtype as u32,
                            neq: false,
                        })
                    }),
                )
            }
            ("fib", _) => {
                return Err(bad(
                    "unsupported `fib` match (expected `fib saddr|daddr type T`)".into(),
                ));
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
        let set = tok(i) == Some("{");
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
                // `ct state a,b` is one match of either state, as in `nft`.
                while what == "ct state" && tok(i) == Some(",") {
                    match tok(i + 1) {
                        Some(v) if !matches!(v, "{" | "}" | ",") => values.push(v.to_string()),
                        _ => return Err(bad(format!("missing state after `,` in `{what}`"))),
                    }
                    i += 2;
                }
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
                | Cond::Port { neq: n, .. }
                | Cond::CtState { neq: n, .. }
                | Cond::Fib { neq: n, .. }
                | Cond::Ifindex { neq: n, .. } => *n = neq,
            }
            // A `ct state` list is one match of all its bits.
            if let (Cond::CtState { bits, .. }, Some(Cond::CtState { bits: prev, .. })) =
                (&c, parsed.last_mut())
                && !set
            {
                *prev |= *bits;
                continue;
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
