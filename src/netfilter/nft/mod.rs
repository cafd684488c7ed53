//! The nf_tables netlink client: atomic batches of table/chain/rule operations (each
//! acknowledged, errors naming the object), rule and chain dumps, and existence checks.

mod batch;
mod dump;
mod owned;
mod socket;

pub use batch::Batch;
pub use dump::{RuleInfo, Snapshot, delete_commented};
pub use owned::{RuleRef, delete_owned};
pub(crate) use socket::linger;
pub use socket::{Nftables, linger_at_exit};

use std::fmt;

/// Read a received nf_tables datagram as the dumps do: each message's payload (after the
/// nfgenmsg header) as a chain and as a rule, whatever its type says. For the fuzz entry point
/// `netlink::fuzz::nft_dump`; returns how much was read, so nothing is optimised away.
pub(crate) fn read_dump(buf: &[u8]) -> usize {
    let mut n = 0;
    for m in crate::netlink::wire::messages(buf) {
        let body = m.payload.get(4..).unwrap_or_default();
        let (table, c) = dump::parse_chain(body);
        n += table.len() + c.name.len() + c.base.map_or(0, |b| b.priority as usize & 1);
        let (table, r) = dump::parse_rule(body);
        n += table.len() + r.chain.len() + r.comment.map_or(0, |c| c.len());
    }
    n
}

const SUBSYS: u16 = 10; // NFNL_SUBSYS_NFTABLES
const BATCH_BEGIN: u16 = 0x10;
const BATCH_END: u16 = 0x11;
const NEWTABLE: u8 = 0;
const GETTABLE: u8 = 1;
const DELTABLE: u8 = 2;
const NEWCHAIN: u8 = 3;
const GETCHAIN: u8 = 4;
const DELCHAIN: u8 = 5;
const NEWRULE: u8 = 6;
const GETRULE: u8 = 7;
const DELRULE: u8 = 8;
const GETGEN: u8 = 16;
pub(crate) const F_DUMP: u16 = crate::netlink::socket::NLM_F_DUMP;
const F_ECHO: u16 = 0x8;
const F_EXCL: u16 = 0x200;
const F_CREATE: u16 = 0x400;
const F_APPEND: u16 = 0x800;
const TRIES: u32 = 3;

// Attributes (linux/netfilter/nf_tables.h).
const NFTA_TABLE_NAME: u16 = 1;
const NFTA_TABLE_FLAGS: u16 = 2;
const NFTA_TABLE_USERDATA: u16 = 6;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_HANDLE: u16 = 2;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_CHAIN_HOOK: u16 = 4;
const NFTA_CHAIN_POLICY: u16 = 5;
const NFTA_CHAIN_TYPE: u16 = 7;
const NFTA_HOOK_HOOKNUM: u16 = 1;
const NFTA_HOOK_PRIORITY: u16 = 2;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_HANDLE: u16 = 3;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_RULE_COMPAT: u16 = 5;
const NFTA_RULE_COMPAT_PROTO: u16 = 1;
const NFTA_RULE_COMPAT_FLAGS: u16 = 2;
const NFTA_GEN_ID: u16 = 1;
const NFNL_BATCH_GENID: u16 = 1;
const NFTA_RULE_USERDATA: u16 = 7;

/// Table address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Requests about no family (the ruleset's generation).
    Unspec = 0,
    Ip = 2,
    Ip6 = 10,
    Inet = 1,
    Bridge = 7,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Unspec => "unspec",
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
            Family::Bridge => "bridge",
        })
    }
}

/// A table: family and name; prints as `inet cni_plugins_masquerade`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub family: Family,
    pub name: String,
}

impl Table {
    pub fn new(family: Family, name: impl Into<String>) -> Self {
        Table {
            family,
            name: name.into(),
        }
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family, self.name)
    }
}

/// Netfilter hook of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    Prerouting = 0,
    Input = 1,
    Forward = 2,
    Output = 3,
    Postrouting = 4,
}

/// Base chain type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainType {
    Filter,
    Nat,
    Route,
}

impl ChainType {
    fn name(self) -> &'static str {
        match self {
            ChainType::Filter => "filter",
            ChainType::Nat => "nat",
            ChainType::Route => "route",
        }
    }
}

/// Base chain policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Drop = 0,
    Accept = 1,
}

/// What makes a chain a base chain: `type T hook H priority P; policy X;`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    pub kind: ChainType,
    pub hook: Hook,
    /// `srcnat` = 100, `dstnat` = -100, `filter` = 0.
    pub priority: i32,
    pub policy: Policy,
}

impl BaseChain {
    /// A base chain with policy accept.
    pub fn new(kind: ChainType, hook: Hook, priority: i32) -> Self {
        BaseChain {
            kind,
            hook,
            priority,
            policy: Policy::Accept,
        }
    }
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
}
