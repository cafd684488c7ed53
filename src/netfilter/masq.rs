//! IP masquerading for a container's addresses (bridge `ipMasq`), in upstream's two layouts so
//! either implementation's DEL removes the other's rules:
//!
//! ```text
//! iptables, nat table, per family:
//!   -A POSTROUTING -s <ip>/32 -m comment --comment "name: \"<net>\" id: \"<cid>\"" -j CNI-<24 hex>
//!   -A CNI-<24 hex> -d <subnet> -m comment --comment … -j ACCEPT
//!   -A CNI-<24 hex> ! -d 224.0.0.0/4 -m comment --comment … -j MASQUERADE
//! nftables, table inet cni_plugins_masquerade:
//!   chain postrouting (nat, postrouting, srcnat): ip daddr 224.0.0.0/4 return;
//!                                                 ip6 daddr ff00::/8 return; goto masq_checks
//!   chain masq_checks: ip saddr <ip> ip daddr != <subnet> masquerade comment "<hashes>, net: …"
//! ```
//!
//! Teardown needs neither the addresses nor the netns: the iptables chain name and the nftables
//! comment derive from network, container ID and ifname, so a DEL with an empty CNI_NETNS still
//! removes everything (upstream leaks the rules then). It tries both backends, as upstream.

use super::iptables::{self, Iptables, Proto, Saved, Script};
use super::{
    Backend, BaseChain, Batch, ChainType, Family, Hook, Nftables, Rule, RuleRef, Table,
    delete_commented, instance_tag, network_tag, owner_comment,
};
use crate::attachment::{self, Attachment};
use crate::error::Result;
use crate::hash::sha512_hex;
use crate::undo::ErrorList;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Multicast destinations the nftables chain leaves alone (checked when compiled, not at run time).
const MULTICAST_V4: Ipv4Net = Ipv4Net::new_assert(Ipv4Addr::new(224, 0, 0, 0), 4);
const MULTICAST_V6: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8);
const NFT_TABLE: &str = super::MASQ_TABLE;
const NFT_CHAIN: &str = "masq_checks";
/// Attachment records (`attachment`) of the handles of each attachment's nftables rules.
const HINTS: &str = "ipmasq";

/// `CNI-` + 24 hex of sha512(network + containerID).
pub fn chain_name(network: &str, cid: &str) -> String {
    format!(
        "CNI-{}",
        sha512_hex(format!("{network}{cid}").as_bytes(), 24)
    )
}

/// Go's `fmt.Sprintf("name: %q id: %q", …)` for ordinary names.
pub fn comment(network: &str, cid: &str) -> String {
    format!("name: {network:?} id: {cid:?}")
}

fn table() -> Table {
    Table::new(Family::Inet, NFT_TABLE)
}

fn families(ips: &[IpNet]) -> Vec<Proto> {
    let mut v = Vec::new();
    for ip in ips {
        let p = Proto::of(&ip.addr());
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

/// Masquerade traffic from `ips` (container addresses with their subnet prefix) leaving the
/// subnet. `backend` is the `ipMasqBackend` key.
pub fn setup(
    backend: Option<&str>,
    network: &str,
    cid: &str,
    ifname: &str,
    ips: &[IpNet],
) -> Result<()> {
    match Backend::parse("ipMasqBackend", backend)? {
        Backend::Iptables => setup_iptables(network, cid, ips),
        Backend::Nftables => setup_nftables(network, cid, ifname, ips),
    }
}

fn iptables_rules(network: &str, cid: &str, ip: &IpNet) -> (String, [String; 2], String) {
    let chain = chain_name(network, cid);
    let c = iptables::comment(&comment(network, cid));
    let multicast = match ip {
        IpNet::V4(_) => "224.0.0.0/4",
        IpNet::V6(_) => "ff00::/8",
    };
    let rules = [
        format!("-d {} {c} -j ACCEPT", ip.trunc()),
        format!("! -d {multicast} {c} -j MASQUERADE"),
    ];
    let host = Proto::of(&ip.addr()).host_bits();
    let jump = format!("-s {}/{host} {c} -j {chain}", ip.addr());
    (chain, rules, jump)
}

fn setup_iptables(network: &str, cid: &str, ips: &[IpNet]) -> Result<()> {
    for proto in families(ips) {
        let ipt = Iptables::new(proto)?;
        let chain = chain_name(network, cid);
        ipt.transact_new("nat", &[&chain], &[], |saved| {
            let mut s = Script::new();
            for ip in ips.iter().filter(|ip| Proto::of(&ip.addr()) == proto) {
                let (chain, rules, jump) = iptables_rules(network, cid, ip);
                s.ensure_chain(saved, &chain);
                for r in &rules {
                    s.append_unique(saved, &chain, r);
                }
                s.append_unique(saved, "POSTROUTING", &jump);
            }
            Ok(s)
        })?;
    }
    Ok(())
}

fn setup_nftables(network: &str, cid: &str, ifname: &str, ips: &[IpNet]) -> Result<()> {
    let t = table();
    let mut nft = Nftables::open()?;
    // Only the fixed chain's rules are read: masq_checks holds one rule per container.
    let snap = nft.snapshot_of(&t, &["postrouting"])?;
    let mut b = Batch::new();
    b.ensure_table(
        &snap,
        &t,
        Some("Masquerading for plugins from github.com/containernetworking/plugins"),
    )
    .ensure_chain(&snap, &t, NFT_CHAIN, None)
    .ensure_fixed_chain(
        &snap,
        &t,
        "postrouting",
        Some(BaseChain::new(ChainType::Nat, Hook::Postrouting, 100)),
        &[
            Rule::new().daddr(MULTICAST_V4).ret(),
            Rule::new().daddr(MULTICAST_V6).ret(),
            Rule::new().goto(NFT_CHAIN),
        ],
    );
    // A repeated ADD replaces the attachment's rules.
    if snap.has_chain(NFT_CHAIN) {
        for h in own_rules(&mut nft, network, cid, ifname)? {
            b.del_rule(&t, NFT_CHAIN, h);
        }
    }
    let c = owner_comment(network, ifname, cid);
    for ip in ips {
        b.add_rule(
            &t,
            NFT_CHAIN,
            &Rule::new()
                .saddr(ip.addr())
                .daddr_not(ip.trunc())
                .masquerade()
                .comment(c.clone()),
        );
    }
    let added = nft.apply_echo(&b)?;
    let handles: Vec<String> = added
        .iter()
        .filter(|r| r.chain == NFT_CHAIN && r.comment.as_deref() == Some(c.as_str()))
        .map(|r| r.handle.to_string())
        .collect();
    // A hint only (see `own_rules`): without it the next DEL scans, as upstream does.
    if handles.len() == ips.len() {
        let _ = attachment::record(HINTS, network, cid, ifname, &handles);
    } else {
        attachment::forget(HINTS, network, cid, ifname);
    }
    Ok(())
}

/// The handles of the attachment's rules in masq_checks. The handles its last ADD recorded
/// (`HINTS`) are looked up one by one and trusted when each still holds a rule with the
/// attachment's comment: ADD and DEL then cost the same with 1 or 1,000 containers. Without a
/// record (a fresh attachment, or one the Go plugins made) an ADD finds nothing to replace and
/// a DEL scans the chain; a record that no longer matches the rules makes both scan.
fn own_rules(nft: &mut Nftables, network: &str, cid: &str, ifname: &str) -> Result<Vec<u64>> {
    let t = table();
    // The record holds bare handles (all in masq_checks).
    let recorded: Vec<String> = attachment::get(HINTS, network, cid, ifname)
        .into_iter()
        .map(|h| match h.parse::<u64>() {
            Ok(h) => RuleRef::new(&t, NFT_CHAIN, h).line(),
            Err(_) => h,
        })
        .collect();
    let prefix = instance_tag(network, ifname, cid);
    let comment = owner_comment(network, ifname, cid);
    Ok(nft
        .owned_rules(&recorded, &comment, false, &[t], &[NFT_CHAIN], |c| {
            c.starts_with(&prefix)
        })?
        .into_iter()
        .map(|r| r.handle)
        .collect())
}

/// DEL's iptables part for one family. With the addresses, one restore deletes the jumps
/// from POSTROUTING by their exact rules and then the chain; it fails as a whole (the chain
/// still referenced, a rule not there) unless that is everything, and the table is then saved
/// and searched for every jump to the chain.
fn teardown_iptables(ipt: &Iptables, network: &str, cid: &str, ips: &[IpNet]) -> Result<()> {
    let chain = chain_name(network, cid);
    let mine: Vec<&IpNet> = ips
        .iter()
        .filter(|ip| Proto::of(&ip.addr()) == ipt.proto)
        .collect();
    if !mine.is_empty() {
        let mut s = Script::new();
        for ip in mine {
            s.delete("POSTROUTING", &iptables_rules(network, cid, ip).2);
        }
        s.flush(&chain).delete_chain(&chain);
        if ipt.restore("nat", &s).is_ok() {
            return Ok(());
        }
    }
    ipt.transact("nat", |saved| {
        let mut s = Script::new();
        s.remove_chain(saved, &chain);
        Ok(s)
    })
}

/// DEL's nftables part: the attachment's rules by their recorded handles, else by a scan of
/// their comments.
fn teardown_nftables(network: &str, cid: &str, ifname: &str) -> Result<()> {
    let recorded = !attachment::get(HINTS, network, cid, ifname).is_empty();
    if recorded && let Ok(mut nft) = Nftables::open() {
        let t = table();
        let mut b = Batch::new();
        for h in own_rules(&mut nft, network, cid, ifname)? {
            b.del_rule(&t, NFT_CHAIN, h);
        }
        nft.apply(&b)?;
    } else {
        let prefix = instance_tag(network, ifname, cid);
        delete_commented(&table(), &[NFT_CHAIN], |c| c.starts_with(&prefix))?;
    }
    attachment::forget(HINTS, network, cid, ifname);
    Ok(())
}

/// Remove the container's masquerading from both backends; everything is found by name.
pub fn teardown(network: &str, cid: &str, ifname: &str) -> Result<()> {
    teardown_with(network, cid, ifname, &[])
}

/// [`teardown`] given the addresses ADD masqueraded (DEL's prevResult), a hint that saves the
/// iptables backend reading the whole nat table; wrong or missing addresses only cost that.
pub fn teardown_with(network: &str, cid: &str, ifname: &str, ips: &[IpNet]) -> Result<()> {
    let mut failures = ErrorList::new();
    let chain = chain_name(network, cid);
    for proto in [Proto::V4, Proto::V6] {
        if !iptables::may_hold(proto, "nat", &[&chain]) {
            continue;
        }
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        failures.check(teardown_iptables(&ipt, network, cid, ips));
    }
    failures.check(teardown_nftables(network, cid, ifname));
    failures.into_result()
}

/// Remove the masquerading of every attachment of `network` not in `valid`, from both
/// backends. iptables chains are recognised by their comment naming this network.
pub fn gc(network: &str, valid: &[Attachment]) -> Result<()> {
    let mut failures = ErrorList::new();
    let keep_chains: HashSet<String> = valid
        .iter()
        .map(|a| chain_name(network, &a.container_id))
        .collect();
    let mine = iptables::comment_prefix(&format!("name: {network:?} id: "));
    for proto in [Proto::V4, Proto::V6] {
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        failures.check(ipt.transact("nat", |saved| {
            let mut s = Script::new();
            for chain in stale_chains(saved, &mine, &keep_chains) {
                s.remove_chain(saved, &chain);
            }
            Ok(s)
        }));
    }
    let keep: HashSet<String> = valid
        .iter()
        .map(|a| owner_comment(network, &a.ifname, &a.container_id))
        .collect();
    let of_network = format!("{}-", network_tag(network));
    failures.check(delete_commented(&table(), &[NFT_CHAIN], |c| {
        c.starts_with(&of_network) && !keep.contains(c)
    }));
    let valid: HashSet<(&str, &str)> = valid
        .iter()
        .map(|a| (a.container_id.as_str(), a.ifname.as_str()))
        .collect();
    for (cid, ifname, _) in attachment::list(HINTS, network) {
        if !valid.contains(&(cid.as_str(), ifname.as_str())) {
            attachment::forget(HINTS, network, &cid, &ifname);
        }
    }
    failures.into_result()
}

/// Masquerade chains (`CNI-` + 24 hex) whose rules carry this network's comment and whose name
/// is not one of `keep`.
fn stale_chains(saved: &Saved, mine: &str, keep: &HashSet<String>) -> Vec<String> {
    saved
        .chains()
        .filter(|c| {
            c.len() == 28
                && c.strip_prefix("CNI-")
                    .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                && !keep.contains(*c)
                && saved.rules_in(c).any(|r| r.contains(mine))
        })
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_upstream_derivation() {
        let c = chain_name("net", "cid");
        assert_eq!(c.len(), 28);
        assert!(c.starts_with("CNI-"));
        assert_eq!(comment("mynet", "abc"), r#"name: "mynet" id: "abc""#);
        let n = owner_comment("net", "eth0", "cid");
        assert!(n.ends_with(", net: net, if: eth0, id: cid"), "{n}");
        assert_eq!(n.split(',').next().unwrap().len(), 33);
        assert!(
            owner_comment("n", "eth0", &"x".repeat(200)).len() <= crate::netfilter::NFT_COMMENT_MAX
        );
    }

    #[test]
    fn iptables_rules_are_in_saved_form() {
        let ip: IpNet = "10.88.0.5/16".parse().unwrap();
        let (_, rules, jump) = iptables_rules("net", "c1", &ip);
        assert_eq!(
            rules[0],
            r#"-d 10.88.0.0/16 -m comment --comment "name: \"net\" id: \"c1\"" -j ACCEPT"#
        );
        assert!(rules[1].starts_with("! -d 224.0.0.0/4 -m comment"));
        assert!(jump.starts_with("-s 10.88.0.5/32 -m comment"));
        // A long container ID: the comment is cut to the comment match's 255 bytes (legacy
        // iptables refuses longer ones, iptables-nft cuts them silently so the saved form
        // would no longer equal ours), and GC still finds it by its prefix.
        let cid = "c".repeat(300);
        let (_, rules, _) = iptables_rules("net", &cid, &ip);
        let c = iptables::trim_comment(&comment("net", &cid));
        assert_eq!(c.len(), 255);
        assert!(rules[0].contains(&iptables::quote(&c)), "{}", rules[0]);
        assert!(rules[0].contains(&iptables::comment_prefix(r#"name: "net" id: "#)));
    }
}
