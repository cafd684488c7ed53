//! iptables-nft's rules written and read in-process, without running `iptables-restore` or
//! `iptables-save`: the same nf_tables objects those tools make (tables `ip|ip6 nat|filter`,
//! their built-in chains created on first use, regular chains, rules encoded as iptables-nft
//! 1.8.9 encodes them, see [`wire`]), so `iptables-save`, `iptables -D` and the Go plugins see
//! exactly what the tools would have written.
//!
//! Only for what it knows: the `nat` and `filter` tables, on a node whose iptables is the
//! nf_tables one (`iptables-restore` in PATH is `xtables-nft-multi`), rules of the shapes in
//! [`spec`]. Everything else — another table, a rule it cannot read, a legacy iptables, a
//! rule to delete or check that is not there in our encoding, a kernel refusal — answers
//! `None`/`false`, and the caller runs the tools as before: a script is applied whole, by one
//! or the other, never in part.
//!
//! A script is planned against the ruleset's generation and applied only if nothing was
//! committed since (the kernel refuses the batch otherwise, and we plan again), as
//! `iptables-restore` does: `-C` and `-D` are decided on the rules as they are at the commit.

mod spec;
mod wire;

use super::{Proto, Saved, Script};
use crate::netfilter::nft::{BaseChain, Batch, ChainType, Family, Hook, Nftables, Table};
use spec::Spec;
use std::path::Path;

/// Plans against a changed generation before giving up on the direct path.
const ATTEMPTS: usize = 8;
/// A rule message's expressions (linux/netfilter/nf_tables.h).
const NFTA_RULE_EXPRESSIONS: u16 = 4;

/// Whether the direct path may be used for `restore` (the `iptables-restore` or
/// `ip6tables-restore` found in PATH): the tools are iptables-nft, and `CNIBOX_IPTABLES` is
/// not `exec` (which keeps the tools, to compare both in tests and benchmarks).
pub(super) fn usable(restore: &Path) -> bool {
    std::env::var_os("CNIBOX_IPTABLES").is_none_or(|v| v != "exec")
        && std::fs::canonicalize(restore).is_ok_and(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("xtables-nft-multi"))
        })
}

fn table_of(proto: Proto, table: &str) -> Option<Table> {
    let family = match proto {
        Proto::V4 => Family::Ip,
        Proto::V6 => Family::Ip6,
    };
    matches!(table, "nat" | "filter").then(|| Table::new(family, table))
}

/// The built-in chain `chain` of `table` as iptables-nft creates it.
fn builtin(table: &str, chain: &str) -> Option<BaseChain> {
    let (kind, hook, priority) = match (table, chain) {
        ("filter", "INPUT") => (ChainType::Filter, Hook::Input, 0),
        ("filter", "FORWARD") => (ChainType::Filter, Hook::Forward, 0),
        ("filter", "OUTPUT") => (ChainType::Filter, Hook::Output, 0),
        ("nat", "PREROUTING") => (ChainType::Nat, Hook::Prerouting, -100),
        ("nat", "INPUT") => (ChainType::Nat, Hook::Input, 100),
        ("nat", "OUTPUT") => (ChainType::Nat, Hook::Output, -100),
        ("nat", "POSTROUTING") => (ChainType::Nat, Hook::Postrouting, 100),
        _ => return None,
    };
    Some(BaseChain::new(kind, hook, priority))
}

/// A rule of a script line, encoded ([`wire::encode`]), with its `-p` protocol for the
/// kernel's x_tables checks (0: none).
struct Encoded {
    proto: u8,
    exprs: Vec<u8>,
}

/// One line of a script.
enum Line {
    New(String),
    Flush(String),
    Remove(String),
    /// `-A` (true) or `-I CHAIN 1` (false).
    Add(String, bool, Encoded),
    Delete(String, Encoded),
    Check(String, Encoded),
}

impl Line {
    fn chain(&self) -> &str {
        match self {
            Line::New(c) | Line::Flush(c) | Line::Remove(c) => c,
            Line::Add(c, ..) | Line::Delete(c, _) | Line::Check(c, _) => c,
        }
    }
    fn parse(proto: Proto, l: &str) -> Option<Line> {
        let (cmd, rest) = l.split_once(' ')?;
        let (chain, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let chain = chain.to_string();
        let rule = |text: &str| {
            let spec = Spec::parse(proto, text)?;
            Some(Encoded {
                proto: spec.proto.unwrap_or(0),
                exprs: wire::encode(proto, &spec),
            })
        };
        Some(match cmd {
            "-N" if text.is_empty() => Line::New(chain),
            "-F" if text.is_empty() => Line::Flush(chain),
            "-X" if text.is_empty() => Line::Remove(chain),
            "-A" => Line::Add(chain, true, rule(text)?),
            "-I" => Line::Add(chain, false, rule(text.strip_prefix("1 ")?)?),
            "-D" => Line::Delete(chain, rule(text)?),
            "-C" => Line::Check(chain, rule(text)?),
            _ => return None,
        })
    }
}

/// Apply `script` to `table` directly; false when it was not (nothing changed then).
pub(super) fn restore(proto: Proto, table: &str, script: &Script) -> bool {
    let Some(t) = table_of(proto, table) else {
        return false;
    };
    let Some(lines) = script
        .lines()
        .map(|l| Line::parse(proto, l))
        .collect::<Option<Vec<_>>>()
    else {
        return false;
    };
    // -N and -X of a built-in chain are errors iptables-restore reports: leave them to it.
    if lines
        .iter()
        .any(|l| matches!(l, Line::New(c) | Line::Remove(c) if builtin(table, c).is_some()))
    {
        return false;
    }
    let Ok(mut nft) = Nftables::open() else {
        return false;
    };
    for _ in 0..ATTEMPTS {
        let Some(batch) = plan(&mut nft, &t, &lines) else {
            return false;
        };
        match nft.apply_attempt(&batch) {
            Ok(()) => return true,
            Err(libc::ERESTART) => continue,
            Err(_) => return false,
        }
    }
    false
}

/// A rule's handle and its expressions in [`wire::canon`] form (`None`: not one we know).
type Dumped = (u64, Option<Vec<u8>>);

/// The batch for `lines` against the ruleset as it is now; `None` when a rule to delete or
/// check is not found (in our encoding) or the kernel cannot be asked.
fn plan(nft: &mut Nftables, t: &Table, lines: &[Line]) -> Option<Batch> {
    let genid = nft.generation().ok()?;
    let mut b = Batch::new();
    b.planned_at(genid).add_table(t, None);
    // Built-in chains are created when first used, as iptables-nft does (so the chains are
    // in the same order).
    let mut ensured: Vec<&str> = Vec::new();
    // The canonical form of each chain's rules, dumped once; a deleted rule is taken out.
    let mut dumped: Vec<(&str, Vec<Dumped>)> = Vec::new();
    for l in lines {
        let c = l.chain();
        if let Some(base) = builtin(&t.name, c)
            && !ensured.contains(&c)
        {
            if !nft.chain_exists(t, c).ok()? {
                b.add_chain(t, c, Some(base));
            }
            ensured.push(c);
        }
        match l {
            Line::New(c) => {
                b.new_chain(t, c);
            }
            Line::Flush(c) => {
                b.flush_chain(t, c);
            }
            Line::Remove(c) => {
                b.del_chain(t, c);
            }
            Line::Add(c, append, r) => {
                b.xt_rule(t, c, *append, r.proto, &r.exprs);
            }
            Line::Delete(c, r) | Line::Check(c, r) => {
                let want = wire::canon(&r.exprs)?;
                let at = match dumped.iter().position(|(d, _)| d == c) {
                    Some(at) => at,
                    None => {
                        let rules = nft.rules(t, Some(c)).ok()?;
                        let canon = rules
                            .iter()
                            .map(|r| (r.handle, wire::canon(&r.exprs)))
                            .collect();
                        dumped.push((c, canon));
                        dumped.len() - 1
                    }
                };
                let rules = &mut dumped[at].1;
                let i = rules.iter().position(|(_, r)| r.as_ref() == Some(&want))?;
                if let Line::Delete(..) = l {
                    b.del_rule(t, c, rules.remove(i).0);
                }
            }
        }
    }
    Some(b)
}

/// The table as `iptables-save -t TABLE` prints its chains and rules, read from the kernel;
/// `None` when a rule is not one [`spec`] reads (the caller runs `iptables-save` then).
pub(super) fn save(proto: Proto, table: &str) -> Option<Saved> {
    let t = table_of(proto, table)?;
    let mut nft = Nftables::open().ok()?;
    let chains = nft.chains(&t).ok()?;
    let mut text = String::new();
    // iptables-save lists every built-in chain of the table, created or not.
    for c in ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"] {
        if builtin(table, c).is_some() && !chains.iter().any(|x| x.name == c) {
            text.push_str(&format!(":{c} ACCEPT\n"));
        }
    }
    for c in &chains {
        text.push(':');
        text.push_str(&c.name);
        text.push_str(if c.base.is_some() {
            " ACCEPT\n"
        } else {
            " -\n"
        });
    }
    // One dump of the table: the rules come chain by chain, each chain's in order.
    for r in nft.rules(&t, None).ok()? {
        let spec = wire::decode(proto, &r.exprs)?;
        text.push_str("-A ");
        text.push_str(&r.chain);
        text.push(' ');
        text.push_str(&spec.render());
        text.push('\n');
    }
    Some(Saved::parse(text))
}

/// Read every rule of a received nf_tables datagram as [`save`] reads rules, in both
/// families (whatever the message's type says), for the fuzz entry point
/// `netlink::fuzz::nft_dump`; returns how much was read, so nothing is optimised away.
pub(crate) fn read_dump(buf: &[u8]) -> usize {
    let mut n = 0;
    for m in crate::netlink::wire::messages(buf) {
        let body = m.payload.get(4..).unwrap_or_default();
        for (_, exprs) in
            crate::netfilter::msg::attrs(body).filter(|(ty, _)| *ty == NFTA_RULE_EXPRESSIONS)
        {
            n += wire::canon(exprs).map_or(0, |c| c.len());
            for proto in [Proto::V4, Proto::V6] {
                n += wire::decode(proto, exprs).map_or(0, |s| s.render().len());
            }
        }
    }
    n
}

#[cfg(test)]
mod tests;
