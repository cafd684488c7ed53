//! An attachment's rules found without reading every rule of its chains: the handles its ADD
//! learnt from the kernel ([`Nftables::apply_echo`]) are kept in its attachment record as
//! [`RuleRef`] lines, looked up one by one later and trusted only while each still holds a
//! rule with the attachment's exact comment; otherwise the chains are scanned by comment.
//! ADD (replacing the rules of a repeated ADD) and DEL then cost the same with 1 or 1,000
//! containers.

use super::{Batch, Family, Nftables, Table};
use crate::error::Result;

/// One rule as an attachment record names it: `<family> <table> <chain> <handle>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRef {
    pub table: Table,
    pub chain: String,
    pub handle: u64,
}

impl RuleRef {
    pub fn new(table: &Table, chain: &str, handle: u64) -> RuleRef {
        RuleRef {
            table: table.clone(),
            chain: chain.to_string(),
            handle,
        }
    }
    /// A record line back (`None` for anything else, e.g. an older record's line).
    pub fn parse(s: &str) -> Option<RuleRef> {
        let mut it = s.split(' ');
        let family = match it.next()? {
            "ip" => Family::Ip,
            "ip6" => Family::Ip6,
            "inet" => Family::Inet,
            "bridge" => Family::Bridge,
            _ => return None,
        };
        let (table, chain, handle) = (it.next()?, it.next()?, it.next()?.parse().ok()?);
        if it.next().is_some() {
            return None;
        }
        Some(RuleRef::new(&Table::new(family, table), chain, handle))
    }
    /// The record line.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.table, self.chain, self.handle)
    }
}

impl Nftables {
    /// The rules an attachment owns. `recorded` (its record's lines): trusted when not empty
    /// and each names a rule that still exists with comment `comment` (one lookup each).
    /// Otherwise — a record that does not match (stale, foreign, a table recreated), or no
    /// record when `scan_unrecorded` — the rules of `chains` in `tables` whose comment `ours`
    /// accepts; no record and not `scan_unrecorded`: none.
    pub fn owned_rules(
        &mut self,
        recorded: &[String],
        comment: &str,
        scan_unrecorded: bool,
        tables: &[Table],
        chains: &[&str],
        ours: impl Fn(&str) -> bool,
    ) -> Result<Vec<RuleRef>> {
        if recorded.is_empty() && !scan_unrecorded {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for line in recorded {
            let Some(r) = RuleRef::parse(line) else { break };
            match self.rule(&r.table, &r.chain, r.handle)? {
                Some(info) if info.comment.as_deref() == Some(comment) => found.push(r),
                _ => break,
            }
        }
        if !recorded.is_empty() && found.len() == recorded.len() {
            return Ok(found);
        }
        let mut out = Vec::new();
        for t in tables {
            for chain in chains {
                for r in self.rules(t, Some(chain))? {
                    if r.comment.as_deref().is_some_and(&ours) {
                        out.push(RuleRef::new(t, chain, r.handle));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Delete an attachment's rules ([`Nftables::owned_rules`], scanning when there is no
/// record) in one batch. A kernel without nf_tables or missing tables mean nothing to delete.
pub fn delete_owned(
    recorded: &[String],
    comment: &str,
    tables: &[Table],
    chains: &[&str],
    ours: impl Fn(&str) -> bool,
) -> Result<()> {
    let Ok(mut nft) = Nftables::open() else {
        return Ok(());
    };
    let mut b = Batch::new();
    for r in nft.owned_rules(recorded, comment, true, tables, chains, ours)? {
        b.del_rule(&r.table, &r.chain, r.handle);
    }
    nft.apply(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lines_round_trip() {
        let r = RuleRef::new(&Table::new(Family::Ip6, "cni_hostport"), "hostports", 42);
        assert_eq!(r.line(), "ip6 cni_hostport hostports 42");
        assert_eq!(RuleRef::parse(&r.line()), Some(r));
        // Older records (bare handles) and anything else are not rule references.
        for bad in [
            "42",
            "ip t c",
            "ip t c x",
            "arp t c 1",
            "ip t c 1 extra",
            "",
        ] {
            assert_eq!(RuleRef::parse(bad), None, "{bad:?}");
        }
    }
}
