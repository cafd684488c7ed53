//! Reading nf_tables back: chain and rule dumps, existence checks, a table [`Snapshot`], and
//! deleting rules picked by their comment.

use super::{
    BaseChain, ChainType, F_DUMP, GETCHAIN, GETRULE, GETTABLE, Hook, NFTA_CHAIN_HANDLE,
    NFTA_CHAIN_HOOK, NFTA_CHAIN_NAME, NFTA_CHAIN_POLICY, NFTA_CHAIN_TABLE, NFTA_CHAIN_TYPE,
    NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY, NFTA_RULE_CHAIN, NFTA_RULE_EXPRESSIONS,
    NFTA_RULE_HANDLE, NFTA_RULE_TABLE, NFTA_RULE_USERDATA, NFTA_TABLE_NAME, Nftables, Policy,
    Table,
};
use crate::error::Result;
use crate::netfilter::msg::{self, Writer};

/// A chain as dumped by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainInfo {
    pub name: String,
    pub handle: u64,
    /// Hook, type, priority and policy of a base chain (`None` for a regular chain or a
    /// hook this module does not model).
    pub base: Option<BaseChain>,
}

/// A rule as dumped by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub chain: String,
    pub handle: u64,
    /// The `comment "..."` of the rule, if any.
    pub comment: Option<String>,
    /// Raw NFTA_RULE_EXPRESSIONS: what the iptables backend decodes, and the tests compare.
    pub exprs: Vec<u8>,
}

/// What exists of one table: its chains and all their rules (see [`Nftables::snapshot`]). ADD
/// paths plan from it so that a batch only creates what is missing: re-adding an existing
/// chain or flushing and re-adding fixed rules would put objects on the kernel's destroy list,
/// and closing the socket afterwards waits for an RCU grace period (~10–30 ms) in
/// `nft_rcv_nl_event`.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub table: bool,
    pub chains: Vec<ChainInfo>,
    pub rules: Vec<RuleInfo>,
}

impl Snapshot {
    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains.iter().any(|c| c.name == chain)
    }
    pub fn rules_in<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a RuleInfo> + 'a {
        self.rules.iter().filter(move |r| r.chain == chain)
    }
    /// The (handle, comment) of the rules in `chain` that have a comment.
    pub fn comments_in<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = (u64, &'a str)> + 'a {
        self.rules_in(chain)
            .filter_map(|r| Some((r.handle, r.comment.as_deref()?)))
    }
}

impl Nftables {
    /// The table's chains and rules (two dumps; an empty snapshot if the table is missing).
    pub fn snapshot(&mut self, t: &Table) -> Result<Snapshot> {
        let chains = self.chains(t)?;
        if chains.is_empty() && !self.table_exists(t)? {
            return Ok(Snapshot::default());
        }
        let rules = self.rules(t, None)?;
        Ok(Snapshot {
            table: true,
            chains,
            rules,
        })
    }

    /// Whether the table exists.
    pub fn table_exists(&mut self, t: &Table) -> Result<bool> {
        let mut w = Writer::default();
        w.str(NFTA_TABLE_NAME, &t.name);
        Ok(self
            .query(format_args!("get table {t}"), GETTABLE, t.family, 0, &w.buf)?
            .is_some())
    }

    /// Whether the chain exists (false also when the table does not).
    pub fn chain_exists(&mut self, t: &Table, chain: &str) -> Result<bool> {
        let mut w = Writer::default();
        w.str(NFTA_CHAIN_TABLE, &t.name);
        w.str(NFTA_CHAIN_NAME, chain);
        Ok(self
            .query(
                format_args!("get chain {t} {chain}"),
                GETCHAIN,
                t.family,
                0,
                &w.buf,
            )?
            .is_some())
    }

    /// The chains of a table (empty if the table does not exist).
    pub fn chains(&mut self, t: &Table) -> Result<Vec<ChainInfo>> {
        let mut w = Writer::default();
        w.str(NFTA_CHAIN_TABLE, &t.name);
        let msgs = self.query(
            format_args!("list chains of {t}"),
            GETCHAIN,
            t.family,
            F_DUMP,
            &w.buf,
        )?;
        let mut out = Vec::new();
        for m in msgs.unwrap_or_default() {
            let (table, c) = parse_chain(&m);
            if table == t.name {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// The rules of a table, or of one chain of it, in chain order (empty if the table or
    /// chain does not exist).
    pub fn rules(&mut self, t: &Table, chain: Option<&str>) -> Result<Vec<RuleInfo>> {
        let mut w = Writer::default();
        w.str(NFTA_RULE_TABLE, &t.name);
        if let Some(c) = chain {
            w.str(NFTA_RULE_CHAIN, c);
        }
        let msgs = self.query(
            format_args!("list rules of {t}"),
            GETRULE,
            t.family,
            F_DUMP,
            &w.buf,
        )?;
        let mut out = Vec::new();
        for m in msgs.unwrap_or_default() {
            let (table, r) = parse_rule(&m);
            if table == t.name && chain.is_none_or(|c| c == r.chain) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The rule with `handle` in `chain` (`None` if it, the chain or the table is missing): one
    /// lookup, however many rules the chain has.
    pub fn rule(&mut self, t: &Table, chain: &str, handle: u64) -> Result<Option<RuleInfo>> {
        let mut w = Writer::default();
        w.str(NFTA_RULE_TABLE, &t.name);
        w.str(NFTA_RULE_CHAIN, chain);
        w.be64(NFTA_RULE_HANDLE, handle);
        let msgs = self.query(
            format_args!("get rule handle {handle} of {t} {chain}"),
            GETRULE,
            t.family,
            0,
            &w.buf,
        )?;
        Ok(msgs
            .unwrap_or_default()
            .iter()
            .map(|m| parse_rule(m))
            .find(|(table, r)| *table == t.name && r.chain == chain && r.handle == handle)
            .map(|(_, r)| r))
    }

    /// A [`Snapshot`] of the table's chains and of the rules of `chains` only: what an ADD
    /// needs to plan, at a cost that does not grow with the rules of other chains.
    pub fn snapshot_of(&mut self, t: &Table, chains: &[&str]) -> Result<Snapshot> {
        let all = self.chains(t)?;
        if all.is_empty() && !self.table_exists(t)? {
            return Ok(Snapshot::default());
        }
        let mut rules = Vec::new();
        for c in chains {
            if all.iter().any(|x| x.name == *c) {
                rules.extend(self.rules(t, Some(c))?);
            }
        }
        Ok(Snapshot {
            table: true,
            chains: all,
            rules,
        })
    }
}

/// A chain message's table name and the chain (a base chain when it has a hook and a type).
pub(super) fn parse_chain(m: &[u8]) -> (String, ChainInfo) {
    let (mut table, mut c) = (
        String::new(),
        ChainInfo {
            name: String::new(),
            handle: 0,
            base: None,
        },
    );
    let (mut hook, mut prio, mut policy, mut kind) = (None, 0, Policy::Accept, None);
    for (ty, d) in msg::attrs(m) {
        match ty {
            NFTA_CHAIN_TABLE => table = msg::get_str(d),
            NFTA_CHAIN_HANDLE => c.handle = msg::get_be64(d),
            NFTA_CHAIN_NAME => c.name = msg::get_str(d),
            NFTA_CHAIN_HOOK => {
                for (ty, d) in msg::attrs(d) {
                    match ty {
                        NFTA_HOOK_HOOKNUM => hook = hook_from(msg::get_be32(d)),
                        NFTA_HOOK_PRIORITY => prio = msg::get_be32(d) as i32,
                        _ => {}
                    }
                }
            }
            NFTA_CHAIN_POLICY if msg::get_be32(d) == 0 => policy = Policy::Drop,
            NFTA_CHAIN_TYPE => {
                kind = match msg::get_str(d).as_str() {
                    "filter" => Some(ChainType::Filter),
                    "nat" => Some(ChainType::Nat),
                    "route" => Some(ChainType::Route),
                    _ => None,
                }
            }
            _ => {}
        }
    }
    if let (Some(hook), Some(kind)) = (hook, kind) {
        c.base = Some(BaseChain {
            kind,
            hook,
            priority: prio,
            policy,
        });
    }
    (table, c)
}

/// A rule message's table name and the rule.
pub(super) fn parse_rule(m: &[u8]) -> (String, RuleInfo) {
    let mut table = String::new();
    let mut r = RuleInfo {
        chain: String::new(),
        handle: 0,
        comment: None,
        exprs: Vec::new(),
    };
    for (ty, d) in msg::attrs(m) {
        match ty {
            NFTA_RULE_TABLE => table = msg::get_str(d),
            NFTA_RULE_CHAIN => r.chain = msg::get_str(d),
            NFTA_RULE_HANDLE => r.handle = msg::get_be64(d),
            NFTA_RULE_EXPRESSIONS => r.exprs = d.to_vec(),
            NFTA_RULE_USERDATA => r.comment = msg::udata_get_comment(d),
            _ => {}
        }
    }
    (table, r)
}
/// Delete, in one batch, the rules of `chains` in table `t` whose comment `doomed` picks (one
/// dump per chain). A missing table or chain, or a kernel without nf_tables, means nothing to
/// delete.
pub fn delete_commented(t: &Table, chains: &[&str], doomed: impl Fn(&str) -> bool) -> Result<()> {
    super::delete_owned(&[], "", std::slice::from_ref(t), chains, doomed)
}

pub(super) fn hook_from(n: u32) -> Option<Hook> {
    [
        Hook::Prerouting,
        Hook::Input,
        Hook::Forward,
        Hook::Output,
        Hook::Postrouting,
    ]
    .into_iter()
    .find(|h| *h as u32 == n)
}
