//! portmap on nf_tables: tables `ip`/`ip6 cni_hostport`, every per-container rule commented with
//! the container ID, one netlink batch per family.

use super::conditions::nft_conditions;
use super::{NFT_TABLE, OWNED_CHAINS, Portmap};
use crate::cni::{Context, Error, Result};
use crate::hash::sha512_hex;
use crate::netfilter::{
    BaseChain, Batch, ChainType, Family, Hook, NFT_COMMENT_MAX, Nftables, Rule, RuleRef, Snapshot,
    Table, delete_commented, delete_owned,
};
use ipnet::IpNet;
use std::collections::HashSet;
use std::net::IpAddr;

/// The comment of a container's nftables rules: its ID, as upstream writes it; an ID longer
/// than nft's comment limit (where upstream fails) is cut and ends in `/` and 16 hex of its
/// hash (`/` is never in a container ID, so no short ID can match it).
pub(super) fn nft_comment(cid: &str) -> String {
    if cid.len() <= NFT_COMMENT_MAX {
        return cid.to_string();
    }
    let mut end = NFT_COMMENT_MAX - 17;
    while !cid.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}/{}", &cid[..end], sha512_hex(cid.as_bytes(), 16))
}

pub(super) fn nft_table(v6: bool) -> Table {
    Table::new(if v6 { Family::Ip6 } else { Family::Ip }, NFT_TABLE)
}

/// (chain, handle) of the rules in the per-container chains whose comment (the container ID)
/// `owned` accepts.
pub(super) fn nft_owned(snap: &Snapshot, owned: impl Fn(&str) -> bool) -> Vec<(&'static str, u64)> {
    OWNED_CHAINS
        .iter()
        .flat_map(|chain| {
            snap.comments_in(chain)
                .filter(|(_, c)| owned(c))
                .map(move |(h, _)| (*chain, h))
        })
        .collect()
}

/// Both families' tables.
pub(super) fn nft_tables() -> [Table; 2] {
    [nft_table(false), nft_table(true)]
}

/// The rules a repeated ADD replaces: those the attachment's record names when they still
/// hold (see [`Nftables::owned_rules`]), or the container's rules when the record does not
/// match; nothing without a record (a first ADD).
pub(super) fn nft_replaced(pm: &Portmap, recorded: &[String]) -> Result<Vec<RuleRef>> {
    if recorded.is_empty() {
        return Ok(Vec::new());
    }
    let c = nft_comment(&pm.cid);
    Nftables::open()?.owned_rules(recorded, &c, false, &nft_tables(), &OWNED_CHAINS, |x| {
        x == c
    })
}

/// Add the container's rules for `cip`'s family, replacing `replaced` (of either family);
/// returns the record lines of the rules added, or `None` when the kernel did not report them
/// all.
pub(super) fn nft_add(
    pm: &Portmap,
    cip: &IpNet,
    replaced: &[RuleRef],
) -> Result<Option<Vec<String>>> {
    let v6 = cip.addr().is_ipv6();
    let t = nft_table(v6);
    let (cond, key) = if v6 {
        (&pm.cond6, "conditionsV6")
    } else {
        (&pm.cond4, "conditionsV4")
    };
    let bases = nft_conditions(cond, v6, key)?;
    let mut nft = Nftables::open()?;
    // Only the fixed chains' rules are read: the others hold one or more per container.
    let snap = nft.snapshot_of(&t, &["hostports_all", "prerouting", "output"])?;
    let mut b = Batch::new();
    ensure_chains(&mut b, &snap, &t, pm.snat);
    for r in replaced.iter().filter(|r| r.table == t) {
        b.del_rule(&t, &r.chain, r.handle);
    }
    let added =
        add_dnat_rules(&mut b, &t, pm, cip, &bases) + add_masquerade_rules(&mut b, &t, pm, cip);
    let echoed = nft
        .apply_echo(&b)
        .ctx("unable to set up nftables rules for port mappings")?;
    let c = nft_comment(&pm.cid);
    let lines: Vec<String> = echoed
        .iter()
        .filter(|r| r.comment.as_deref() == Some(c.as_str()))
        .map(|r| RuleRef::new(&t, &r.chain, r.handle).line())
        .collect();
    Ok((lines.len() == added).then_some(lines))
}

/// The table and the chains every container's rules go through, made when missing.
fn ensure_chains(b: &mut Batch, snap: &Snapshot, t: &Table, snat: bool) {
    b.ensure_table(snap, t, Some("CNI portmap plugin"))
        .ensure_chain(snap, t, "hostports", None)
        .ensure_chain(snap, t, "hostip_hostports", None)
        .ensure_fixed_chain(
            snap,
            t,
            "hostports_all",
            None,
            &[
                Rule::new().jump("hostip_hostports"),
                Rule::new().jump("hostports"),
            ],
        );
    for (chain, hook) in [("prerouting", Hook::Prerouting), ("output", Hook::Output)] {
        b.ensure_fixed_chain(
            snap,
            t,
            chain,
            Some(BaseChain::new(ChainType::Nat, hook, -100)),
            &[Rule::new().fib_daddr_local().jump("hostports_all")],
        );
    }
    if snat {
        b.ensure_chain(
            snap,
            t,
            "masquerading",
            Some(BaseChain::new(ChainType::Nat, Hook::Postrouting, 100)),
        );
    }
}

/// One DNAT rule per mapping of the family and condition set; how many.
fn add_dnat_rules(b: &mut Batch, t: &Table, pm: &Portmap, cip: &IpNet, bases: &[Rule]) -> usize {
    let v6 = cip.addr().is_ipv6();
    let mut added = 0;
    for m in &pm.maps {
        let Some(dst) = m.for_family(v6) else {
            continue;
        };
        for base in bases {
            let mut r = base.clone();
            if let Some(d) = dst {
                r = r.daddr(d);
            }
            r = r
                .l4proto(m.proto_num())
                .dport(m.host_port)
                .dnat(cip.addr(), Some(m.container_port))
                .comment(nft_comment(&pm.cid));
            b.add_rule(t, "hostports", &r);
            added += 1;
        }
    }
    added
}

/// With `snat`, masquerade what the container sends to itself through a mapped port (and,
/// for IPv4, hairpin from localhost); how many rules.
fn add_masquerade_rules(b: &mut Batch, t: &Table, pm: &Portmap, cip: &IpNet) -> usize {
    let v6 = cip.addr().is_ipv6();
    let mut added = 0;
    if pm.snat {
        let src: IpNet = if pm.masq_all {
            if v6 {
                IpNet::V6(ipnet::Ipv6Net::default())
            } else {
                IpNet::V4(ipnet::Ipv4Net::default())
            }
        } else {
            cip.addr().into()
        };
        b.add_rule(
            t,
            "masquerading",
            &Rule::new()
                .saddr(src)
                .daddr(cip.addr())
                .masquerade()
                .comment(nft_comment(&pm.cid)),
        );
        added += 1;
        if !v6 && !pm.masq_all {
            b.add_rule(
                t,
                "masquerading",
                &Rule::new()
                    .saddr(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
                    .daddr(cip.addr())
                    .masquerade()
                    .comment(nft_comment(&pm.cid)),
            );
            added += 1;
        }
    }
    added
}

pub(super) fn nft_check(pm: &Portmap, cip: &IpNet) -> Result<()> {
    let v6 = cip.addr().is_ipv6();
    let t = nft_table(v6);
    let want_ports = pm
        .maps
        .iter()
        .filter(|m| m.for_family(v6).is_some())
        .count();
    let want_masq = match (pm.snat, !v6 && !pm.masq_all) {
        (false, _) => 0,
        (true, true) => 2,
        (true, false) => 1,
    };
    let snap = Nftables::open()?.snapshot(&t)?;
    let mine = nft_comment(&pm.cid);
    let owned = nft_owned(&snap, |c| c == mine);
    for (chain, want) in [("hostports", want_ports), ("masquerading", want_masq)] {
        let have = owned.iter().filter(|(c, _)| *c == chain).count();
        if have < want {
            return Err(Error::internal(format!(
                "missing hostport rules in {chain:?} chain of {t}"
            )));
        }
    }
    Ok(())
}

/// Delete one attachment's rules from both nftables families: by its record (`recorded`, see
/// [`delete_owned`]), else by comment; no table is fine.
pub(super) fn nft_remove_owned(cid: &str, recorded: &[String]) -> Result<()> {
    let c = nft_comment(cid);
    delete_owned(recorded, &c, &nft_tables(), &OWNED_CHAINS, |x| x == c)
        .ctx("error deleting nftables rules")
}

/// Delete the containers' rules from both nftables families by comment; no table is fine.
pub(super) fn nft_remove(cids: &HashSet<&str>) -> Result<()> {
    let comments: HashSet<String> = cids.iter().map(|c| nft_comment(c)).collect();
    for v6 in [false, true] {
        delete_commented(&nft_table(v6), &OWNED_CHAINS, |c| comments.contains(c))
            .ctx("error deleting nftables rules")?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// host side effects
