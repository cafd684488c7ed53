//! Packet filtering without external tools: a native nf_tables client speaking netfilter
//! netlink (`nft`), so the plugins need neither the `nft` nor the `iptables` binary.
//!
//! [`nft::Nft`] talks to the kernel (atomic batches, dumps, existence checks), [`nft::Batch`]
//! collects table/chain/rule operations and [`rule::Rule`] builds rules encoded exactly as the
//! `nft` tool encodes the equivalent text, so `nft list ruleset` prints them identically and
//! comments round-trip between this crate, `nft` and the Go plugins.

pub mod masq;
mod msg;
pub mod nft;
pub mod rule;
pub mod spoofcheck;
#[cfg(test)]
mod tests;

pub use nft::{BaseChain, Batch, ChainInfo, ChainType, Family, Hook, Nft, Policy, RuleInfo, Table};
pub use rule::{Rule, SCTP, TCP, UDP, Verdict, ct};
