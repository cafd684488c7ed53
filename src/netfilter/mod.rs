//! Packet filtering with two backends behind the same callers:
//!
//! - [`nft`]: a native nf_tables client speaking netfilter netlink, so the plugins need neither
//!   the `nft` nor the `iptables` binary. [`nft::Nftables`] talks to the kernel (atomic batches,
//!   dumps, existence checks), [`nft::Batch`] collects table/chain/rule operations and
//!   [`rule::Rule`] builds rules encoded exactly as the `nft` tool encodes the equivalent text,
//!   so `nft list ruleset` prints them identically and comments round-trip between this crate,
//!   `nft` and the Go plugins.
//! - [`iptables`]: one `iptables-save` + one `iptables-restore --noflush` per table, family and
//!   ADD/DEL, in the Go plugins' chain layout.
//!
//! [`Backend`] picks between them the way upstream does.

pub(crate) mod conntrack;
pub mod iptables;
pub(crate) mod masq;
mod msg;
pub(crate) mod nft;
pub(crate) mod rule;
#[cfg(test)]
mod tests;
pub(crate) mod validate;

// What main.rs and benches/ use is `pub`; the rest is the crate's own (so dead code shows).
pub(crate) use nft::{
    BaseChain, ChainType, Hook, Nftables, RuleRef, Snapshot, delete_commented, delete_owned,
};
pub use nft::{Batch, Family, Table, linger_at_exit};
pub use rule::{Rule, TCP, UDP};
pub(crate) use rule::{SCTP, ct};

use crate::error::{Error, Result};
use crate::hash::sha512_hex;

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

/// The nftables tables whose rules name their attachment in a comment, as the Go plugins name
/// them (cnibox shares them): ipMasq's (`inet`, owner comments), firewall's (`inet`, owner
/// comments) and portmap's (`ip` and `ip6`, the container ID). The plugins and the node doctor
/// use these.
pub const MASQ_TABLE: &str = "cni_plugins_masquerade";
pub const FIREWALL_TABLE: &str = "cni_plugins_firewall";
pub const HOSTPORT_TABLE: &str = "cni_hostport";
/// The iptables filter chain of firewall's per-address rules (`-d IP/32 … -j ACCEPT`,
/// `-s IP/32 -j ACCEPT`: no comment names their owner, upstream's layout).
pub const FIREWALL_FORWARD_CHAIN: &str = "CNI-FORWARD";

/// knftables' CommentLengthMax, which the Go plugins truncate their comments to.
pub const NFT_COMMENT_MAX: usize = 128;

/// The Go plugins' nftables owner hash of a network: 16 hex of sha512(network).
pub fn network_tag(network: &str) -> String {
    sha512_hex(network.as_bytes(), 16)
}

/// `<network tag>-<16 hex of sha512(ifname:cid)>`: one attachment.
pub fn instance_tag(network: &str, ifname: &str, cid: &str) -> String {
    format!(
        "{}-{}",
        network_tag(network),
        sha512_hex(format!("{ifname}:{cid}").as_bytes(), 16)
    )
}

/// The comment the Go plugins put on an attachment's nftables rules:
/// `<instance tag>, net: <net>, if: <ifname>, id: <cid>` (quotes dropped, at most 128 bytes).
/// Teardown and GC find the rules by its prefix, without addresses or netns.
pub fn owner_comment(network: &str, ifname: &str, cid: &str) -> String {
    let strip = |s: &str| s.replace('"', "");
    let mut c = format!(
        "{}, net: {}, if: {}, id: {}",
        instance_tag(network, ifname, cid),
        strip(network),
        strip(ifname),
        strip(cid)
    );
    if c.len() > NFT_COMMENT_MAX {
        let mut end = NFT_COMMENT_MAX;
        while !c.is_char_boundary(end) {
            end -= 1;
        }
        c.truncate(end);
    }
    c
}
