//! firewall on nf_tables: table `inet cni_plugins_firewall`, the same policy as the iptables
//! backend, every rule commented with its attachment.

use super::{
    Firewall, NFT_ADMIN, NFT_FORWARD, NFT_OWNERS, NFT_STAGE1, NFT_STAGE2, NFT_TABLE, Policy,
};
use crate::attachment;
use crate::cni::{Context, Error, Result};
use crate::netfilter::{
    BaseChain, Batch, ChainType, Family, Hook, Nftables, Rule, RuleRef, Table, ct,
    delete_commented, delete_owned, owner_comment,
};
use std::collections::HashSet;
use std::net::IpAddr;

pub(super) fn nft_table() -> Table {
    Table::new(Family::Inet, NFT_TABLE)
}

pub(super) fn nft_isolation_comment(policy: &str, what: &str, bridge: &str) -> String {
    format!("CNI firewall plugin rules (ingressPolicy: {policy}): {what} {bridge}")
}

/// The isolation rules for `bridge`: (chain, comment, rule).
pub(super) fn nft_isolation_rules(
    bridge: &str,
    policy: Policy,
) -> Vec<(&'static str, String, Rule)> {
    let name = policy.name();
    let mut v = vec![
        (
            NFT_STAGE1,
            nft_isolation_comment(name, "leaving", bridge),
            Rule::new()
                .iifname(bridge)
                .oifname_not(bridge)
                .jump(NFT_STAGE2),
        ),
        (
            NFT_STAGE2,
            nft_isolation_comment("same-bridge|isolated", "entering", bridge),
            Rule::new().oifname(bridge).drop(),
        ),
    ];
    if policy == Policy::Isolated {
        v.push((
            NFT_STAGE1,
            nft_isolation_comment(name, "within", bridge),
            Rule::new().iifname(bridge).oifname(bridge).drop(),
        ));
    }
    v.into_iter()
        .map(|(chain, c, r)| (chain, c.clone(), r.comment(c)))
        .collect()
}

pub(super) fn nft_add(fw: &Firewall, ips: &[IpAddr], bridge: Option<&str>) -> Result<()> {
    let t = nft_table();
    let mut nft = Nftables::open()?;
    // The fixed chain and the isolation chains (rules per bridge) are read; cni-forward, with
    // two rules per address of every container, is not.
    let snap = nft.snapshot_of(&t, &["forward", NFT_STAGE1, NFT_STAGE2])?;
    let comment = owner_comment(&fw.network, &fw.ifname, &fw.cid);
    let recorded = attachment::get(NFT_OWNERS, &fw.network, &fw.cid, &fw.ifname);
    let mut b = Batch::new();
    b.ensure_table(&snap, &t, Some("CNI firewall plugin rules"));
    for chain in [NFT_ADMIN, NFT_FORWARD, NFT_STAGE1, NFT_STAGE2] {
        b.ensure_chain(&snap, &t, chain, None);
    }
    b.ensure_fixed_chain(
        &snap,
        &t,
        "forward",
        Some(BaseChain::new(ChainType::Filter, Hook::Forward, 0)),
        &[
            Rule::new().jump(NFT_STAGE1),
            Rule::new().jump(NFT_ADMIN),
            Rule::new().jump(NFT_FORWARD),
        ],
    );
    // A repeated ADD replaces the attachment's rules (found through its record).
    let table = std::slice::from_ref(&t);
    for r in nft.owned_rules(&recorded, &comment, false, table, &[NFT_FORWARD], |c| {
        c == comment
    })? {
        b.del_rule(&t, &r.chain, r.handle);
    }
    for ip in ips {
        b.add_rule(
            &t,
            NFT_FORWARD,
            &Rule::new()
                .daddr(*ip)
                .ct_state(ct::ESTABLISHED | ct::RELATED)
                .accept()
                .comment(comment.clone()),
        )
        .add_rule(
            &t,
            NFT_FORWARD,
            &Rule::new().saddr(*ip).accept().comment(comment.clone()),
        );
    }
    if let Some(br) = bridge {
        let have: HashSet<&str> = [NFT_STAGE1, NFT_STAGE2]
            .iter()
            .flat_map(|chain| snap.comments_in(chain).map(|(_, c)| c))
            .collect();
        for (chain, c, rule) in nft_isolation_rules(br, fw.policy) {
            if !have.contains(c.as_str()) {
                b.add_rule(&t, chain, &rule);
            }
        }
    }
    let echoed = nft
        .apply_echo(&b)
        .ctx("unable to set up nftables firewall rules")?;
    let lines: Vec<String> = echoed
        .iter()
        .filter(|r| r.chain == NFT_FORWARD && r.comment.as_deref() == Some(comment.as_str()))
        .map(|r| RuleRef::new(&t, &r.chain, r.handle).line())
        .collect();
    // A hint for the next ADD and DEL (see `owned_rules`); without it they scan.
    if lines.len() == 2 * ips.len() {
        let _ = attachment::record(NFT_OWNERS, &fw.network, &fw.cid, &fw.ifname, &lines);
    } else {
        attachment::forget(NFT_OWNERS, &fw.network, &fw.cid, &fw.ifname);
    }
    Ok(())
}

pub(super) fn nft_check(fw: &Firewall, ips: &[IpAddr]) -> Result<()> {
    let t = nft_table();
    let snap = Nftables::open()?.snapshot(&t)?;
    if !snap.has_chain("forward") {
        return Err(Error::internal(format!("nftables table {t} not found")));
    }
    let jumps = snap.rules_in("forward").count();
    let comment = owner_comment(&fw.network, &fw.ifname, &fw.cid);
    let have = snap
        .comments_in(NFT_FORWARD)
        .filter(|(_, c)| *c == comment)
        .count();
    if jumps < 3 || have < 2 * ips.len() {
        return Err(Error::internal(format!(
            "expected firewall rules for {} in nftables table {t} not found",
            fw.cid
        )));
    }
    Ok(())
}

/// Delete one attachment's `cni-forward` rules: by the handles its record names, else by its
/// comment (no table is fine).
pub(super) fn nft_delete_owned(fw: &Firewall) -> Result<()> {
    let comment = owner_comment(&fw.network, &fw.ifname, &fw.cid);
    let recorded = attachment::get(NFT_OWNERS, &fw.network, &fw.cid, &fw.ifname);
    delete_owned(&recorded, &comment, &[nft_table()], &[NFT_FORWARD], |c| {
        c == comment
    })
    .ctx("error deleting nftables firewall rules")
}

/// Delete the `cni-forward` rules whose comment `doomed` picks (no table is fine).
pub(super) fn nft_delete(doomed: impl Fn(&str) -> bool) -> Result<()> {
    delete_commented(&nft_table(), &[NFT_FORWARD], doomed)
        .ctx("error deleting nftables firewall rules")
}

// ---------------------------------------------------------------------------------------------
// verbs
