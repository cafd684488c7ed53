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

/// A condition's field: what its values are parsed into.
enum Field {
    Addr { dst: bool },
    Ifname { out: bool },
    Ifindex { out: bool },
    CtState,
    Fib { daddr: bool },
    Mark,
    L4proto,
    Port { l4: Option<u8>, dst: bool },
}

impl Field {
    /// One value of this field as a condition (`neq` for `!=`).
    fn value(&self, v: &str, v6: bool, neq: bool) -> std::result::Result<Cond, String> {
        match *self {
            Field::Addr { dst } => addr_value(v, dst, v6, neq),
            Field::Ifname { out } => ifname_value(v, out, neq),
            Field::Ifindex { out } => ifindex_value(v, out, neq),
            Field::CtState => ct_state_value(v, neq),
            Field::Fib { daddr } => fib_value(v, daddr, neq),
            Field::Mark => mark_value(v, neq),
            Field::L4proto => l4proto_value(v, neq),
            Field::Port { l4, dst } => port_value(v, l4, dst, neq),
        }
    }
}

/// `ip|ip6 saddr|daddr`: an address or a prefix of the rule's family.
fn addr_value(v: &str, dst: bool, v6: bool, neq: bool) -> std::result::Result<Cond, String> {
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
        neq,
    })
}

/// `iifname|oifname`: an interface name, matched by name.
fn ifname_value(v: &str, out: bool, neq: bool) -> std::result::Result<Cond, String> {
    check_ifname(v)?;
    Ok(Cond::Ifname {
        out,
        name: v.to_string(),
        neq,
    })
}

/// `iif|oif`: an interface of the node, matched by its index now.
fn ifindex_value(v: &str, out: bool, neq: bool) -> std::result::Result<Cond, String> {
    check_ifname(v)?;
    let index =
        nix::net::if_::if_nametoindex(v).map_err(|_| format!("no interface {v:?} on the node"))?;
    Ok(Cond::Ifindex { out, index, neq })
}

/// `ct state`: one of [`CT_STATES`].
fn ct_state_value(v: &str, neq: bool) -> std::result::Result<Cond, String> {
    let bits = CT_STATES
        .iter()
        .find(|(n, _)| *n == v)
        .map(|(_, b)| *b)
        .ok_or_else(|| format!("unknown state {v:?}"))?;
    Ok(Cond::CtState { bits, neq })
}

/// `fib saddr|daddr type`: one of [`FIB_TYPES`].
fn fib_value(v: &str, daddr: bool, neq: bool) -> std::result::Result<Cond, String> {
    let rtype = FIB_TYPES
        .iter()
        .position(|n| *n == v)
        .ok_or_else(|| format!("unknown route type {v:?}"))?;
    Ok(Cond::Fib {
        daddr,
        rtype: rtype as u32,
        neq,
    })
}

/// `meta mark`: a decimal or `0x` hexadecimal u32.
fn mark_value(v: &str, neq: bool) -> std::result::Result<Cond, String> {
    let mark = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => v.parse::<u32>(),
    }
    .map_err(|_| format!("bad mark {v:?}"))?;
    Ok(Cond::Mark { mark, neq })
}

/// `meta l4proto`: `tcp`, `udp`, `sctp` or a protocol number.
fn l4proto_value(v: &str, neq: bool) -> std::result::Result<Cond, String> {
    let proto = match v {
        "tcp" => TCP,
        "udp" => UDP,
        "sctp" => SCTP,
        _ => v.parse::<u8>().map_err(|_| format!("bad protocol {v:?}"))?,
    };
    Ok(Cond::L4proto { proto, neq })
}

/// `th|tcp|udp|sctp dport|sport`: a port number.
fn port_value(v: &str, l4: Option<u8>, dst: bool, neq: bool) -> std::result::Result<Cond, String> {
    let port = v.parse::<u16>().map_err(|_| {
        format!("bad port {v:?} (a number; ranges and service names are not supported)")
    })?;
    Ok(Cond::Port { l4, dst, port, neq })
}

/// The field named by the tokens at `i`, and how many tokens its name takes.
fn field(toks: &[String], i: usize, v6: bool) -> std::result::Result<(usize, Field), String> {
    let tok = |i: usize| toks.get(i).map(String::as_str);
    let t = toks[i].as_str();
    Ok(match (t, tok(i + 1)) {
        ("ip" | "ip6", Some(f @ ("saddr" | "daddr"))) => {
            if (t == "ip6") != v6 {
                return Err(format!(
                    "`{t} {f}` does not apply to {}",
                    if v6 { "IPv6" } else { "IPv4" }
                ));
            }
            (2, Field::Addr { dst: f == "daddr" })
        }
        ("ip" | "ip6", _) => {
            return Err(format!(
                "unsupported token {:?} after `{t}` (expected saddr or daddr)",
                tok(i + 1).unwrap_or("")
            ));
        }
        ("iifname" | "oifname", _) => (
            1,
            Field::Ifname {
                out: t == "oifname",
            },
        ),
        ("meta", Some(f @ ("iifname" | "oifname"))) => (
            2,
            Field::Ifname {
                out: f == "oifname",
            },
        ),
        ("iif" | "oif", _) => (1, Field::Ifindex { out: t == "oif" }),
        ("meta", Some(f @ ("iif" | "oif"))) => (2, Field::Ifindex { out: f == "oif" }),
        ("ct", Some("state")) => (2, Field::CtState),
        ("ct", other) => {
            return Err(format!(
                "unsupported token {:?} after `ct` (expected state)",
                other.unwrap_or("")
            ));
        }
        ("fib", Some(f @ ("saddr" | "daddr"))) if tok(i + 2) == Some("type") => (
            3,
            Field::Fib {
                daddr: f == "daddr",
            },
        ),
        ("fib", _) => {
            return Err("unsupported `fib` match (expected `fib saddr|daddr type T`)".into());
        }
        ("meta", Some("mark")) => (2, Field::Mark),
        ("mark", _) => (1, Field::Mark),
        ("meta", Some("l4proto")) => (2, Field::L4proto),
        ("meta", other) => {
            return Err(format!(
                "unsupported token {:?} after `meta`",
                other.unwrap_or("")
            ));
        }
        ("th" | "tcp" | "udp" | "sctp", Some(f @ ("dport" | "sport"))) => {
            let l4 = match t {
                "tcp" => Some(TCP),
                "udp" => Some(UDP),
                "sctp" => Some(SCTP),
                _ => None,
            };
            (
                2,
                Field::Port {
                    l4,
                    dst: f == "dport",
                },
            )
        }
        ("th" | "tcp" | "udp" | "sctp", other) => {
            return Err(format!(
                "unsupported token {:?} after `{t}` (expected dport or sport)",
                other.unwrap_or("")
            ));
        }
        (other, _) => return Err(format!("unsupported token {other:?}")),
    })
}

/// An optional `==`/`eq` or `!=`/`ne` at `*i`, stepped over: whether it negates.
fn operator(toks: &[String], i: &mut usize) -> bool {
    match toks.get(*i).map(String::as_str) {
        Some("!=" | "ne") => {
            *i += 1;
            true
        }
        Some("==" | "eq") => {
            *i += 1;
            false
        }
        _ => false,
    }
}

/// The value or anonymous set `{ a, b }` at `*i` after the field `what`, stepped over, and
/// whether it was a set.
fn values(
    toks: &[String],
    i: &mut usize,
    what: &str,
) -> std::result::Result<(Vec<String>, bool), String> {
    let tok = |i: usize| toks.get(i).map(String::as_str);
    let mut values = Vec::new();
    match tok(*i) {
        None => return Err(format!("missing value after `{what}`")),
        Some("{") => {
            *i += 1;
            loop {
                match tok(*i) {
                    None => return Err(format!("unterminated set after `{what}`")),
                    Some("}") => {
                        *i += 1;
                        break;
                    }
                    Some(",") => *i += 1,
                    Some(v) => {
                        values.push(v.to_string());
                        *i += 1;
                    }
                }
            }
            if values.is_empty() {
                return Err(format!("empty set after `{what}`"));
            }
            return Ok((values, true));
        }
        Some(v @ ("}" | ",")) => return Err(format!("unexpected {v:?} after `{what}`")),
        Some(v) => {
            values.push(v.to_string());
            *i += 1;
            // `ct state a,b` is one match of either state, as in `nft`.
            while what == "ct state" && tok(*i) == Some(",") {
                match tok(*i + 1) {
                    Some(v) if !matches!(v, "{" | "}" | ",") => values.push(v.to_string()),
                    _ => return Err(format!("missing state after `,` in `{what}`")),
                }
                *i += 2;
            }
        }
    }
    Ok((values, false))
}

/// The values of `field` (named `what`) as conditions; a `ct state` list that is not a set is
/// one match of all its bits.
fn parse_values(
    field: &Field,
    what: &str,
    values: &[String],
    set: bool,
    v6: bool,
    neq: bool,
) -> std::result::Result<Vec<Cond>, String> {
    let mut parsed = Vec::new();
    for v in values {
        let c = field
            .value(v, v6, neq)
            .map_err(|e| format!("`{what}`: {e}"))?;
        if let (Cond::CtState { bits, .. }, Some(Cond::CtState { bits: prev, .. })) =
            (&c, parsed.last_mut())
            && !set
        {
            *prev |= *bits;
            continue;
        }
        parsed.push(c);
    }
    Ok(parsed)
}

/// One rule per combination of the conditions' alternatives, at most
/// [`MAX_CONDITION_RULES`].
fn expand(conds: &[Vec<Vec<Cond>>]) -> std::result::Result<Vec<Rule>, String> {
    let mut rules = vec![Rule::new()];
    for alts in conds {
        if rules.len() * alts.len() > MAX_CONDITION_RULES {
            return Err(format!(
                "the sets expand to more than {MAX_CONDITION_RULES} rules per port mapping"
            ));
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
    while i < toks.len() {
        let (width, field) = field(&toks, i, v6).map_err(&bad)?;
        let what = toks[i..i + width].join(" ");
        i += width;
        let neq = operator(&toks, &mut i);
        let (values, set) = values(&toks, &mut i, &what).map_err(&bad)?;
        let parsed = parse_values(&field, &what, &values, set, v6, neq).map_err(&bad)?;
        conds.push(if neq {
            vec![parsed]
        } else {
            parsed.into_iter().map(|c| vec![c]).collect()
        });
    }
    expand(&conds).map_err(&bad)
}
