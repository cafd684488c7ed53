//! [`Spec`]: one iptables rule of the shapes the applets (and the Go plugins) write, read from
//! and printed as `iptables-save`'s canonical text. Anything else reads as `None`, and the
//! caller leaves that rule to the iptables tools.

use super::super::{Proto, quote};
use crate::netfilter::rule::Verdict;
use ipnet::IpNet;
use std::net::IpAddr;

/// A rule: the base matches (each with its `!`), the extension matches in rule order, the
/// target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Spec {
    pub src: Option<(IpNet, bool)>,
    pub dst: Option<(IpNet, bool)>,
    pub iniface: Option<(String, bool)>,
    pub outiface: Option<(String, bool)>,
    /// `-p tcp` (6) or `-p udp` (17).
    pub proto: Option<u8>,
    pub matches: Vec<Match>,
    pub target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Match {
    /// `-m tcp|udp --dport N`, of the rule's `-p`.
    Dport(u16),
    /// `-m comment --comment TEXT`.
    Comment(String),
    /// `-m multiport --dports P,LO:HI,...`: (low, high), equal for a single port.
    Dports(Vec<(u16, u16)>),
    /// `-m addrtype --dst-type LOCAL`.
    DstLocal,
    /// `-m mark --mark VALUE[/MASK]`.
    Mark(u32, u32),
    /// `-m conntrack --ctstate LIST`: XT_CONNTRACK_STATE bits.
    CtState(u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Verdict(Verdict),
    Masquerade,
    /// `-j DNAT --to-destination ADDR[:PORT]`.
    Dnat(IpAddr, Option<u16>),
    /// `-j MARK --set-xmark VALUE/MASK`.
    SetXmark(u32, u32),
}

/// The conntrack states iptables prints, in its order, with their bits.
pub(super) const CT_STATES: [(&str, u16); 4] = [
    ("INVALID", 1),
    ("NEW", 1 << 3),
    ("RELATED", 1 << 2),
    ("ESTABLISHED", 1 << 1),
];
/// Multiport's port slots (a range takes two).
pub(super) const MULTIPORT_SLOTS: usize = 15;
/// The comment match's buffer, its NUL included.
pub(super) const COMMENT_LEN: usize = 256;

/// `iptables-save`'s arguments: split at spaces, `"..."` with `\` escapes as one argument.
fn args(text: &str) -> Option<Vec<String>> {
    let (mut out, mut cur, mut open) = (Vec::new(), String::new(), false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' if open => {
                out.push(std::mem::take(&mut cur));
                open = false;
            }
            ' ' => {}
            '"' => {
                open = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        c => cur.push(c),
                    }
                }
            }
            c => {
                open = true;
                cur.push(c);
            }
        }
    }
    if open {
        out.push(cur);
    }
    Some(out)
}

/// `ADDR/LEN` as iptables-save prints it (LEN without leading zeros; never /0, which it omits).
fn net(proto: Proto, s: &str) -> Option<IpNet> {
    let (a, text) = s.split_once('/')?;
    let a: IpAddr = a.parse().ok()?;
    let len: u8 = text.parse().ok()?;
    if Proto::of(&a) != proto || len == 0 || len.to_string() != text {
        return None;
    }
    IpNet::new(a, len).ok().map(|n| n.trunc())
}

fn ifname(s: &str) -> Option<String> {
    // A trailing `+` is a wildcard, encoded otherwise: not ours.
    let ok = !s.is_empty() && s.len() < 16 && !s.ends_with('+') && !s.contains('\0');
    ok.then(|| s.to_string())
}

fn number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn port(s: &str) -> Option<u16> {
    s.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| s.parse().ok())?
}

/// The value after option `want`, which must come next.
fn value_of<'a>(it: &mut impl Iterator<Item = &'a str>, want: &str) -> Option<&'a str> {
    (it.next()? == want).then(|| it.next())?
}

/// A jump target that names a chain (iptables' limit: 28 bytes).
fn chain(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= 28
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !s.starts_with('-');
    ok.then(|| s.to_string())
}

impl Spec {
    /// A rule matching everything; its readers set the target they read last.
    pub(super) fn blank() -> Spec {
        Spec {
            src: None,
            dst: None,
            iniface: None,
            outiface: None,
            proto: None,
            matches: Vec::new(),
            target: Target::Masquerade,
        }
    }

    /// Read `text` (`iptables-save`'s spec of a rule, after `-A CHAIN`) for `proto`.
    pub(super) fn parse(proto: Proto, text: &str) -> Option<Spec> {
        let args = args(text)?;
        let mut it = args.iter().map(String::as_str);
        let mut s = Spec::blank();
        let mut target = None;
        while let Some(a) = it.next() {
            if target.is_some() {
                return None;
            }
            let neg = a == "!";
            let a = if neg { it.next()? } else { a };
            match a {
                "-s" | "-d" => {
                    let slot = if a == "-s" { &mut s.src } else { &mut s.dst };
                    if slot.replace((net(proto, it.next()?)?, neg)).is_some() {
                        return None;
                    }
                }
                "-i" | "-o" => {
                    let slot = if a == "-i" {
                        &mut s.iniface
                    } else {
                        &mut s.outiface
                    };
                    if slot.replace((ifname(it.next()?)?, neg)).is_some() {
                        return None;
                    }
                }
                "-p" if !neg && s.proto.is_none() => {
                    s.proto = Some(match it.next()? {
                        "tcp" => 6,
                        "udp" => 17,
                        _ => return None,
                    })
                }
                "-m" if !neg => {
                    let m = Self::extension(it.next()?, &mut it, s.proto)?;
                    s.matches.push(m);
                }
                "-j" if !neg => target = Some(Self::target(proto, it.next()?, &mut it)?),
                "-g" if !neg => target = Some(Target::Verdict(Verdict::Goto(chain(it.next()?)?))),
                _ => return None,
            }
        }
        s.target = target?;
        Some(s)
    }

    fn extension<'a>(
        name: &str,
        it: &mut impl Iterator<Item = &'a str>,
        proto: Option<u8>,
    ) -> Option<Match> {
        let mut option = |want: &str| value_of(it, want);
        Some(match name {
            "tcp" | "udp" => {
                if proto != Some(if name == "tcp" { 6 } else { 17 }) {
                    return None;
                }
                Match::Dport(port(option("--dport")?)?)
            }
            "comment" => {
                let c = option("--comment")?;
                if c.len() >= COMMENT_LEN || c.contains('\0') {
                    return None;
                }
                Match::Comment(c.to_string())
            }
            "multiport" => {
                proto?;
                let mut v = Vec::new();
                let mut slots = 0;
                for p in option("--dports")?.split(',') {
                    let (lo, hi) = match p.split_once(':') {
                        Some((lo, hi)) => (port(lo)?, port(hi)?),
                        None => (port(p)?, port(p)?),
                    };
                    slots += if lo == hi { 1 } else { 2 };
                    if lo > hi || slots > MULTIPORT_SLOTS {
                        return None;
                    }
                    v.push((lo, hi));
                }
                Match::Dports(v)
            }
            "addrtype" => (option("--dst-type")? == "LOCAL").then_some(Match::DstLocal)?,
            "mark" => {
                let m = option("--mark")?;
                let (v, mask) = match m.split_once('/') {
                    Some((v, mask)) => (number(v)?, number(mask)?),
                    None => (number(m)?, u32::MAX),
                };
                Match::Mark(v, mask)
            }
            "conntrack" => {
                let mut bits = 0;
                for st in option("--ctstate")?.split(',') {
                    bits |= CT_STATES.iter().find(|(n, _)| *n == st)?.1;
                }
                Match::CtState(bits)
            }
            _ => return None,
        })
    }

    fn target<'a>(
        proto: Proto,
        name: &str,
        it: &mut impl Iterator<Item = &'a str>,
    ) -> Option<Target> {
        let mut option = |want: &str| value_of(it, want);
        Some(match name {
            "ACCEPT" => Target::Verdict(Verdict::Accept),
            "DROP" => Target::Verdict(Verdict::Drop),
            "RETURN" => Target::Verdict(Verdict::Return),
            "MASQUERADE" => Target::Masquerade,
            "DNAT" => {
                let to = option("--to-destination")?;
                let (addr, port) = match (proto, to.strip_prefix('[')) {
                    (Proto::V6, Some(rest)) => {
                        let (a, p) = rest.split_once("]:")?;
                        (a, Some(port(p)?))
                    }
                    (Proto::V4, None) => match to.split_once(':') {
                        Some((a, p)) => (a, Some(port(p)?)),
                        None => (to, None),
                    },
                    (Proto::V6, None) => (to, None),
                    _ => return None,
                };
                let addr: IpAddr = addr.parse().ok()?;
                if Proto::of(&addr) != proto || port == Some(0) {
                    return None;
                }
                Target::Dnat(addr, port)
            }
            "MARK" => {
                let (v, m) = option("--set-xmark")?.split_once('/')?;
                Target::SetXmark(number(v)?, number(m)?)
            }
            // Other upper-case names are targets of their own (LOG, REJECT, SNAT, ...).
            _ if name.bytes().all(|b| b.is_ascii_uppercase()) => return None,
            _ => Target::Verdict(Verdict::Jump(chain(name)?)),
        })
    }

    /// `iptables-save`'s text of the rule.
    pub(super) fn render(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        let mut base = |neg: bool, opt: &str, v: String| {
            if neg {
                out.push("!".into());
            }
            out.push(opt.into());
            out.push(v);
        };
        if let Some((n, neg)) = &self.src {
            base(*neg, "-s", n.to_string());
        }
        if let Some((n, neg)) = &self.dst {
            base(*neg, "-d", n.to_string());
        }
        if let Some((i, neg)) = &self.iniface {
            base(*neg, "-i", i.clone());
        }
        if let Some((i, neg)) = &self.outiface {
            base(*neg, "-o", i.clone());
        }
        let pname = match self.proto {
            Some(6) => "tcp",
            _ => "udp",
        };
        if self.proto.is_some() {
            base(false, "-p", pname.into());
        }
        for m in &self.matches {
            let (name, opt, v) = match m {
                Match::Dport(p) => (pname, "--dport", p.to_string()),
                Match::Comment(c) => ("comment", "--comment", quote(c)),
                Match::Dports(v) => {
                    let ports: Vec<String> = v
                        .iter()
                        .map(|(lo, hi)| {
                            if lo == hi {
                                lo.to_string()
                            } else {
                                format!("{lo}:{hi}")
                            }
                        })
                        .collect();
                    ("multiport", "--dports", ports.join(","))
                }
                Match::DstLocal => ("addrtype", "--dst-type", "LOCAL".into()),
                Match::Mark(v, m) if *m == u32::MAX => ("mark", "--mark", format!("{v:#x}")),
                Match::Mark(v, m) => ("mark", "--mark", format!("{v:#x}/{m:#x}")),
                Match::CtState(bits) => {
                    let names: Vec<&str> = CT_STATES
                        .iter()
                        .filter(|(_, b)| bits & b != 0)
                        .map(|(n, _)| *n)
                        .collect();
                    ("conntrack", "--ctstate", names.join(","))
                }
            };
            out.extend(["-m".into(), name.into(), opt.into(), v]);
        }
        let target = match &self.target {
            Target::Verdict(Verdict::Accept) => "-j ACCEPT".into(),
            Target::Verdict(Verdict::Drop) => "-j DROP".into(),
            Target::Verdict(Verdict::Return) => "-j RETURN".into(),
            Target::Verdict(Verdict::Jump(c)) => format!("-j {c}"),
            Target::Verdict(Verdict::Goto(c)) => format!("-g {c}"),
            Target::Masquerade => "-j MASQUERADE".into(),
            Target::Dnat(a, p) => match (a, p) {
                (IpAddr::V6(a), Some(p)) => format!("-j DNAT --to-destination [{a}]:{p}"),
                (a, Some(p)) => format!("-j DNAT --to-destination {a}:{p}"),
                (a, None) => format!("-j DNAT --to-destination {a}"),
            },
            Target::SetXmark(v, m) => format!("-j MARK --set-xmark {v:#x}/{m:#x}"),
        };
        out.push(target);
        out.join(" ")
    }
}
