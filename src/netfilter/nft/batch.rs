//! [`Batch`]: table, chain and rule operations collected for one atomic commit.

use super::{
    BaseChain, DELCHAIN, DELRULE, DELTABLE, F_APPEND, F_CREATE, F_EXCL, Family, NEWCHAIN, NEWRULE,
    NEWTABLE, NFTA_CHAIN_HOOK, NFTA_CHAIN_NAME, NFTA_CHAIN_POLICY, NFTA_CHAIN_TABLE,
    NFTA_CHAIN_TYPE, NFTA_HOOK_HOOKNUM, NFTA_HOOK_PRIORITY, NFTA_RULE_CHAIN, NFTA_RULE_COMPAT,
    NFTA_RULE_COMPAT_FLAGS, NFTA_RULE_COMPAT_PROTO, NFTA_RULE_EXPRESSIONS, NFTA_RULE_HANDLE,
    NFTA_RULE_TABLE, NFTA_TABLE_FLAGS, NFTA_TABLE_NAME, NFTA_TABLE_USERDATA, Snapshot, Table,
};
use crate::error::{Error, Result};
use crate::netfilter::msg::{self, Writer};
use crate::netfilter::{Rule, validate};

pub(super) struct Op {
    pub(super) what: String,
    pub(super) ty: u8,
    pub(super) family: Family,
    pub(super) flags: u16,
    pub(super) body: Vec<u8>,
}

/// Operations applied atomically by [`Nftables::apply`] (all or none).
#[derive(Default)]
pub struct Batch {
    pub(super) ops: Vec<Op>,
    pub(super) err: Option<Error>,
    /// The ruleset generation the batch was planned against ([`Batch::planned_at`]).
    pub(super) genid: Option<u32>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.err.is_none()
    }
    pub(super) fn op(
        &mut self,
        what: String,
        ty: u8,
        family: Family,
        flags: u16,
        f: impl FnOnce(&mut Writer) -> Result<()>,
    ) -> &mut Self {
        let mut w = Writer::default();
        match f(&mut w) {
            Ok(()) => self.ops.push(Op {
                what,
                ty,
                family,
                flags,
                body: w.buf,
            }),
            Err(e) => {
                if self.err.is_none() {
                    self.err = Some(e.ctx(format_args!("nftables: {what}")));
                }
            }
        }
        self
    }
    /// Apply only if the ruleset is still at generation `genid` ([`Nftables::generation`]):
    /// otherwise the kernel refuses the whole batch with ERESTART.
    pub(crate) fn planned_at(&mut self, genid: u32) -> &mut Self {
        self.genid = Some(genid);
        self
    }
    /// `add table`: creates the table unless it exists (no error if it does; an existing
    /// table keeps its comment).
    pub fn add_table(&mut self, t: &Table, comment: Option<&str>) -> &mut Self {
        self.op(
            format!("add table {t}"),
            NEWTABLE,
            t.family,
            F_CREATE,
            |w| {
                validate::nft_name("nftables table", &t.name)?;
                w.str(NFTA_TABLE_NAME, &t.name);
                w.be32(NFTA_TABLE_FLAGS, 0);
                if let Some(c) = comment {
                    w.attr(
                        NFTA_TABLE_USERDATA,
                        &msg::udata_comment(c)
                            .ok_or_else(|| Error::internal("comment too long"))?,
                    );
                }
                Ok(())
            },
        )
    }
    /// `delete table` (fails with ENOENT when missing; see [`Batch::ensure_no_table`]).
    pub fn del_table(&mut self, t: &Table) -> &mut Self {
        self.op(format!("delete table {t}"), DELTABLE, t.family, 0, |w| {
            w.str(NFTA_TABLE_NAME, &t.name);
            Ok(())
        })
    }
    /// Delete the table with everything in it, whether or not it exists (add, then delete).
    pub fn ensure_no_table(&mut self, t: &Table) -> &mut Self {
        self.add_table(t, None).del_table(t)
    }
    /// `add chain`: a regular chain (`base` None) or a base chain; no error if it exists.
    pub fn add_chain(&mut self, t: &Table, chain: &str, base: Option<BaseChain>) -> &mut Self {
        self.op(
            format!("add chain {t} {chain}"),
            NEWCHAIN,
            t.family,
            F_CREATE,
            |w| {
                validate::nft_name("nftables chain", chain)?;
                w.str(NFTA_CHAIN_TABLE, &t.name);
                w.str(NFTA_CHAIN_NAME, chain);
                if let Some(b) = base {
                    w.nest(NFTA_CHAIN_HOOK, |w| {
                        w.be32(NFTA_HOOK_HOOKNUM, b.hook as u32);
                        w.be32(NFTA_HOOK_PRIORITY, b.priority as u32);
                    });
                    w.be32(NFTA_CHAIN_POLICY, b.policy as u32);
                    w.str(NFTA_CHAIN_TYPE, b.kind.name());
                }
                Ok(())
            },
        )
    }
    /// A new regular chain; the batch fails (EEXIST) if it exists, as iptables' `-N`.
    pub(crate) fn new_chain(&mut self, t: &Table, chain: &str) -> &mut Self {
        self.op(
            format!("new chain {t} {chain}"),
            NEWCHAIN,
            t.family,
            F_CREATE | F_EXCL,
            |w| {
                validate::nft_name("nftables chain", chain)?;
                w.str(NFTA_CHAIN_TABLE, &t.name);
                w.str(NFTA_CHAIN_NAME, chain);
                Ok(())
            },
        )
    }
    /// A rule whose expressions `exprs` writes (the content of NFTA_RULE_EXPRESSIONS), with
    /// the x_tables compatibility information iptables-nft adds: the rule's layer-4 protocol,
    /// which compat matches such as `multiport` check. Appended, or inserted at the head.
    pub(crate) fn xt_rule(
        &mut self,
        t: &Table,
        chain: &str,
        append: bool,
        proto: u8,
        exprs: &[u8],
    ) -> &mut Self {
        let flags = if append {
            F_CREATE | F_APPEND
        } else {
            F_CREATE
        };
        self.op(
            format!("add rule to {t} {chain}"),
            NEWRULE,
            t.family,
            flags,
            |w| {
                validate::nft_name("nftables chain", chain)?;
                w.str(NFTA_RULE_TABLE, &t.name);
                w.str(NFTA_RULE_CHAIN, chain);
                w.nest(NFTA_RULE_EXPRESSIONS, |w| w.buf.extend_from_slice(exprs));
                w.nest(NFTA_RULE_COMPAT, |w| {
                    w.be32(NFTA_RULE_COMPAT_PROTO, proto.into());
                    w.be32(NFTA_RULE_COMPAT_FLAGS, 0);
                });
                Ok(())
            },
        )
    }
    /// `flush chain`: delete all its rules.
    pub fn flush_chain(&mut self, t: &Table, chain: &str) -> &mut Self {
        self.op(
            format!("flush chain {t} {chain}"),
            DELRULE,
            t.family,
            0,
            |w| {
                w.str(NFTA_RULE_TABLE, &t.name);
                w.str(NFTA_RULE_CHAIN, chain);
                Ok(())
            },
        )
    }
    /// `delete chain` (must be empty and unreferenced).
    pub fn del_chain(&mut self, t: &Table, chain: &str) -> &mut Self {
        self.op(
            format!("delete chain {t} {chain}"),
            DELCHAIN,
            t.family,
            0,
            |w| {
                w.str(NFTA_CHAIN_TABLE, &t.name);
                w.str(NFTA_CHAIN_NAME, chain);
                Ok(())
            },
        )
    }
    pub(super) fn rule(
        &mut self,
        what: String,
        t: &Table,
        chain: &str,
        rule: &Rule,
        flags: u16,
    ) -> &mut Self {
        self.op(what, NEWRULE, t.family, flags, |w| {
            validate::nft_name("nftables chain", chain)?;
            w.str(NFTA_RULE_TABLE, &t.name);
            w.str(NFTA_RULE_CHAIN, chain);
            rule.encode(t.family, w)
        })
    }
    /// `add rule`: append at the end of the chain.
    pub fn add_rule(&mut self, t: &Table, chain: &str, rule: &Rule) -> &mut Self {
        self.rule(
            format!("add rule to {t} {chain}"),
            t,
            chain,
            rule,
            F_CREATE | F_APPEND,
        )
    }
    /// `insert rule`: put it at the head of the chain.
    pub fn insert_rule(&mut self, t: &Table, chain: &str, rule: &Rule) -> &mut Self {
        self.rule(
            format!("insert rule into {t} {chain}"),
            t,
            chain,
            rule,
            F_CREATE,
        )
    }
    /// `add table` unless `snap` has it.
    pub fn ensure_table(&mut self, snap: &Snapshot, t: &Table, comment: Option<&str>) -> &mut Self {
        if !snap.table {
            self.add_table(t, comment);
        }
        self
    }
    /// `add chain` unless `snap` has it.
    pub fn ensure_chain(
        &mut self,
        snap: &Snapshot,
        t: &Table,
        chain: &str,
        base: Option<BaseChain>,
    ) -> &mut Self {
        if !snap.has_chain(chain) {
            self.add_chain(t, chain, base);
        }
        self
    }
    /// A chain whose whole content is `rules`: (created,) flushed and filled when missing or
    /// when its rule count differs, left alone otherwise.
    pub fn ensure_fixed_chain(
        &mut self,
        snap: &Snapshot,
        t: &Table,
        chain: &str,
        base: Option<BaseChain>,
        rules: &[Rule],
    ) -> &mut Self {
        if snap.has_chain(chain) {
            if snap.rules_in(chain).count() == rules.len() {
                return self;
            }
        } else {
            self.add_chain(t, chain, base);
        }
        // Flushed in the same transaction even when we create the chain: a concurrent first
        // ADD may have created and filled it since our snapshot (flushing an empty chain
        // deletes nothing, so costs no grace period).
        self.flush_chain(t, chain);
        for r in rules {
            self.add_rule(t, chain, r);
        }
        self
    }
    /// `delete rule ... handle H`.
    pub fn del_rule(&mut self, t: &Table, chain: &str, handle: u64) -> &mut Self {
        self.op(
            format!("delete rule handle {handle} from {t} {chain}"),
            DELRULE,
            t.family,
            0,
            |w| {
                w.str(NFTA_RULE_TABLE, &t.name);
                w.str(NFTA_RULE_CHAIN, chain);
                w.be64(NFTA_RULE_HANDLE, handle);
                Ok(())
            },
        )
    }
}
