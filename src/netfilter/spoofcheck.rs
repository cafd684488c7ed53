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

use super::{BaseChain, Batch, ChainType, Family, Hook, Nft, Rule, Table};
use crate::cni::Result;

const BASE: &str = "PREROUTING";

fn names(cid: &str, ifname: &str) -> (String, String, String) {
    let id = format!("{cid}-{ifname}");
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
    Nft::open()?.apply(&b)
}

/// Remove the jump and both chains; nothing there is fine.
pub fn teardown(cid: &str, ifname: &str) -> Result<()> {
    let (mac_chain, iface_chain, comment) = names(cid, ifname);
    let t = table();
    let mut nft = Nft::open()?;
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
