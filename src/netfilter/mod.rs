//! Packet filtering with two backends behind the same callers:
//!
//! - [`nft`]: a native nf_tables client speaking netfilter netlink, so the plugins need neither
//!   the `nft` nor the `iptables` binary. [`nft::Nft`] talks to the kernel (atomic batches,
//!   dumps, existence checks), [`nft::Batch`] collects table/chain/rule operations and
//!   [`rule::Rule`] builds rules encoded exactly as the `nft` tool encodes the equivalent text,
//!   so `nft list ruleset` prints them identically and comments round-trip between this crate,
//!   `nft` and the Go plugins.
//! - [`iptables`]: one `iptables-save` + one `iptables-restore --noflush` per table, family and
//!   ADD/DEL, in the Go plugins' chain layout.
//!
//! [`Backend`] picks between them the way upstream does.

pub mod conntrack;
pub mod iptables;
pub mod masq;
mod msg;
pub mod nft;
pub mod owners;
pub mod rule;
pub mod spoofcheck;
#[cfg(test)]
mod tests;

pub use nft::{BaseChain, Batch, ChainInfo, ChainType, Family, Hook, Nft, Policy, RuleInfo, Table};
pub use rule::{Rule, SCTP, TCP, UDP, Verdict, ct};

use crate::cni::{Error, Result};

/// Which netfilter interface a plugin writes its rules with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Iptables,
    Nftables,
}

impl Backend {
    /// The value of a `backend`/`ipMasqBackend` key; `None` picks the default.
    pub fn parse(key: &str, value: Option<&str>) -> Result<Backend> {
        match value {
            None | Some("") => Ok(Backend::default_backend()),
            Some("iptables") => Ok(Backend::Iptables),
            Some("nftables") => Ok(Backend::Nftables),
            Some(other) => Err(Error::config(format!(
                "unrecognized {key} {other:?}: use \"iptables\" or \"nftables\""
            ))),
        }
    }

    /// Upstream's rule: iptables when it is usable, else nftables. Usable here means the
    /// iptables-save/-restore tools are installed; our nftables backend needs no tools at all,
    /// so a node or initramfs without iptables simply gets nftables.
    pub fn default_backend() -> Backend {
        if iptables::available(iptables::Proto::V4) {
            Backend::Iptables
        } else {
            Backend::Nftables
        }
    }
}

/// The nftables "table or chain is not there" errors, which teardown treats as done.
pub fn is_missing(e: &Error) -> bool {
    e.msg.contains("No such file or directory") || e.msg.contains("ENOENT")
}
