//! bridge `macspoofchk`: drop frames from a container whose source MAC is not the one it was
//! given, in the same nftables layout upstream creates through `nft -j` (so either
//! implementation's DEL removes the other's rules), but written over netlink:
//!
//! ```text
//! table bridge nat
//!   chain PREROUTING  (filter, prerouting, priority -300, accept)
//!     iifname "<host veth>" jump cni-br-iface-<cid>-<ifname>      comment "macspoofchk-<cid>-<ifname>"
//!   chain cni-br-iface-<cid>-<ifname>
//!     jump cni-br-iface-<cid>-<ifname>-mac                        comment …
//!   chain cni-br-iface-<cid>-<ifname>-mac
//!     ether saddr <mac> return                                    comment …
//!     drop                                                        comment …
//! ```

use crate::error::Result;
use crate::netfilter::{
    BaseChain, Batch, ChainType, Family, Hook, NFT_COMMENT_MAX, Nftables, Rule, Table,
};

const BASE: &str = "PREROUTING";

/// The chain and comment names, as upstream derives them from `<cid>-<ifname>`. Where upstream
/// fails (its comment over nft's 128-byte limit, so a container ID over ~100 bytes), the id is
/// cut and ends in `/` and 16 hex of its hash (`/` is in neither a container ID nor an
/// interface name, so no short id can match it): every name stays within nf_tables' limits.
fn names(cid: &str, ifname: &str) -> (String, String, String) {
    const COMMENT_PREFIX: usize = "macspoofchk-".len();
    let mut id = format!("{cid}-{ifname}");
    if COMMENT_PREFIX + id.len() > NFT_COMMENT_MAX {
        let mut end = NFT_COMMENT_MAX - COMMENT_PREFIX - 17;
        while !id.is_char_boundary(end) {
            end -= 1;
        }
        id = format!(
            "{}/{}",
            &id[..end],
            crate::hash::sha512_hex(id.as_bytes(), 16)
        );
    }
    let iface = format!("cni-br-iface-{id}");
    (format!("{iface}-mac"), iface, format!("macspoofchk-{id}"))
}

fn table() -> Table {
    Table::new(Family::Bridge, "nat")
}

pub fn setup(host_iface: &str, cid: &str, ifname: &str, mac: [u8; 6]) -> Result<()> {
    let (mac_chain, iface_chain, comment) = names(cid, ifname);
    let t = table();
    let mut b = Batch::new();
    b.add_table(&t, None)
        .add_chain(
            &t,
            BASE,
            Some(BaseChain::new(ChainType::Filter, Hook::Prerouting, -300)),
        )
        .add_chain(&t, &iface_chain, None)
        .add_chain(&t, &mac_chain, None)
        .flush_chain(&t, &iface_chain)
        .flush_chain(&t, &mac_chain)
        .add_rule(
            &t,
            &mac_chain,
            &Rule::new().ether_saddr(mac).ret().comment(comment.clone()),
        )
        .add_rule(&t, &mac_chain, &Rule::new().drop().comment(comment.clone()))
        .add_rule(
            &t,
            &iface_chain,
            &Rule::new().jump(&mac_chain).comment(comment.clone()),
        )
        .add_rule(
            &t,
            BASE,
            &Rule::new()
                .iifname(host_iface)
                .jump(&iface_chain)
                .comment(comment),
        );
    Nftables::open()?.apply(&b)
}

/// Remove the jump and both chains; nothing there is fine.
pub fn teardown(cid: &str, ifname: &str) -> Result<()> {
    let (mac_chain, iface_chain, comment) = names(cid, ifname);
    let t = table();
    let mut nft = Nftables::open()?;
    if !nft.table_exists(&t)? {
        return Ok(());
    }
    let mut b = Batch::new();
    for r in nft.rules(&t, Some(BASE))? {
        if r.comment.as_deref() == Some(comment.as_str()) {
            b.del_rule(&t, BASE, r.handle);
        }
    }
    let chains: Vec<String> = nft.chains(&t)?.into_iter().map(|c| c.name).collect();
    for c in [&iface_chain, &mac_chain] {
        if chains.contains(c) {
            b.flush_chain(&t, c);
        }
    }
    for c in [&iface_chain, &mac_chain] {
        if chains.contains(c) {
            b.del_chain(&t, c);
        }
    }
    if b.is_empty() { Ok(()) } else { nft.apply(&b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_like_upstream_and_bounded() {
        let (mac, iface, comment) = names("c1", "eth0");
        assert_eq!(
            (mac.as_str(), iface.as_str(), comment.as_str()),
            (
                "cni-br-iface-c1-eth0-mac",
                "cni-br-iface-c1-eth0",
                "macspoofchk-c1-eth0"
            )
        );
        let long = "c".repeat(400);
        let (mac, _, comment) = names(&long, "eth0");
        assert_eq!(comment.len(), crate::netfilter::NFT_COMMENT_MAX);
        assert!(mac.len() < 256);
        assert_ne!(names(&format!("{long}x"), "eth0").2, comment);
    }
}
