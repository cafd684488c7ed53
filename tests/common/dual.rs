//! IPv6 for the lab (tests/common/lab.rs): the node ↔ client link gets `fd00:N:1::1/64` and
//! `fd00:N:1::2/64` besides its IPv4 pair, so a scenario reaches the node (a hostPort) or the
//! outside host (masquerading) over either family; plus the small per-family helpers the
//! dual-stack matrix (tests/dualstack.rs) shares: the lab's addresses by family, routes from the
//! client to the container subnets, a socat reply that reports the peer's source address, and
//! "nothing of this container is left on the node" checks.

use super::NetNs;
use super::family::{Fam, v4_subnet, v6_subnet};
use super::lab::Lab;
use std::net::IpAddr;

/// Give the lab's node ↔ client veth its IPv6 pair (no DAD: the link is the test's own, and a
/// tentative address would only delay the first packet).
pub fn add_v6_link(lab: &Lab) {
    add_v6_link_ns(lab.n, &lab.node, &lab.client);
}

/// [`add_v6_link`] for a node and client made by `traffic::node_and_client(n)` outside a lab.
pub fn add_v6_link_ns(n: u8, node: &NetNs, client: &NetNs) {
    node.sh(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("fd00:{n}:1::1/64"),
        "dev",
        "tocl",
        "nodad",
    ]);
    client.sh(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("fd00:{n}:1::2/64"),
        "dev",
        "eth0",
        "nodad",
    ]);
}

/// The node's address on the client link, by family.
pub fn node_addr(lab: &Lab, v6: bool) -> String {
    if v6 {
        format!("fd00:{}:1::1", lab.n)
    } else {
        lab.node_addr()
    }
}

/// The client's address on its link to the node, by family.
pub fn client_addr(lab: &Lab, v6: bool) -> String {
    if v6 {
        format!("fd00:{}:1::2", lab.n)
    } else {
        lab.client_addr()
    }
}

/// Routes from the client to the container subnets of `fam` (`family::v4_subnet`/`v6_subnet`)
/// through the node, for scenarios where the outside host talks to containers directly.
pub fn route_client_to_containers(lab: &Lab, fam: Fam) {
    if fam.has_v4() {
        lab.client.sh(&[
            "ip",
            "route",
            "add",
            &v4_subnet(lab.n),
            "via",
            &node_addr(lab, false),
        ]);
    }
    if fam.has_v6() {
        lab.client.sh(&[
            "ip",
            "-6",
            "route",
            "add",
            &v6_subnet(lab.n),
            "via",
            &node_addr(lab, true),
        ]);
    }
}

/// The socat server reply that tells the client the source address the server saw.
pub const PEER_REPLY: &str = "$SOCAT_PEERADDR";

/// Parse socat's `SOCAT_PEERADDR` (`10.1.2.3`, or `[fd00:0000:…:0001]` for IPv6).
pub fn parse_peer(s: &str) -> Option<IpAddr> {
    s.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// The families `fam` has, as the `v6` flags the traffic helpers take.
pub fn v6_flags(fam: Fam) -> Vec<bool> {
    let mut v = Vec::new();
    if fam.has_v4() {
        v.push(false);
    }
    if fam.has_v6() {
        v.push(true);
    }
    v
}

/// The node's veths other than the client link.
pub fn pod_veths(node: &NetNs) -> Vec<String> {
    node.sh(&["ip", "-o", "link", "show", "type", "veth"])
        .lines()
        .filter(|l| !l.contains("tocl"))
        .map(str::to_string)
        .collect()
}

/// Every iptables, ip6tables and nftables line of the node that names one of `needles` (a
/// container ID or address), plus every upstream per-container chain still declared
/// (`CNI-DN-…` of portmap, `CNI-<24 hex>` of ipMasq): empty once the node holds nothing of the
/// containers.
pub fn rules_naming(node: &NetNs, needles: &[String]) -> Vec<String> {
    netfilter_lines(node)
        .into_iter()
        .filter(|line| {
            let l = line.split_once(": ").map_or(line.as_str(), |(_, r)| r);
            let per_container_chain = l.starts_with(":CNI-DN-")
                || l.strip_prefix(":CNI-").is_some_and(|rest| {
                    let name = rest.split(' ').next().unwrap_or_default();
                    name.len() == 24 && name.chars().all(|c| c.is_ascii_hexdigit())
                });
            per_container_chain || needles.iter().any(|n| l.contains(n.as_str()))
        })
        .collect()
}

/// Every line of the node's `iptables-save`, `ip6tables-save` and `nft list ruleset` (comment
/// lines dropped), each prefixed with the program that printed it.
pub fn netfilter_lines(node: &NetNs) -> Vec<String> {
    let mut v = Vec::new();
    for cmd in [
        &["iptables-save"][..],
        &["ip6tables-save"],
        &["nft", "list", "ruleset"],
    ] {
        let out = node.sh(cmd);
        v.extend(
            out.lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| format!("{}: {l}", cmd[0])),
        );
    }
    v
}

/// `tc qdisc show` lines of the node that shape traffic (tbf) or redirect it to an ifb, and the
/// node's ifb links: empty once bandwidth's DEL is done.
pub fn shaping_left(node: &NetNs) -> Vec<String> {
    let mut left: Vec<String> = node
        .sh(&["tc", "qdisc", "show"])
        .lines()
        .filter(|l| l.contains("tbf"))
        .map(str::to_string)
        .collect();
    left.extend(
        node.sh(&["ip", "-o", "link", "show", "type", "ifb"])
            .lines()
            .map(str::to_string),
    );
    left
}

/// Delete the first IPv6 rule of the node that names `needle` (an address), from ip6tables
/// (`filter` then `nat`) or from nftables, as an administrator or a firewall reload might; a
/// CHECK must notice. Returns the rule deleted; fails when none names `needle`.
#[track_caller]
pub fn delete_rule_naming(node: &NetNs, nft: bool, needle: &str) -> String {
    if nft {
        let ruleset = node.sh(&["nft", "-a", "list", "ruleset"]);
        let (mut table, mut chain) = (Vec::new(), String::new());
        for l in ruleset.lines() {
            let t = l.trim();
            if let Some(rest) = t.strip_prefix("table ") {
                table = rest
                    .trim_end_matches(['{', ' '])
                    .split(' ')
                    .take(2)
                    .map(str::to_string)
                    .collect();
            } else if let Some(rest) = t.strip_prefix("chain ") {
                chain = rest.split(' ').next().unwrap_or_default().to_string();
            } else if t.contains(needle)
                && let Some(handle) = t.rsplit_once("# handle ").map(|(_, h)| h.trim())
            {
                let mut args = vec!["nft", "delete", "rule"];
                args.extend(table.iter().map(String::as_str));
                args.extend([chain.as_str(), "handle", handle]);
                node.sh(&args);
                return t.to_string();
            }
        }
        panic!("no nftables rule names {needle}:\n{ruleset}");
    }
    for table in ["filter", "nat"] {
        let saved = node.sh(&["ip6tables-save", "-t", table]);
        let mut index: std::collections::HashMap<String, usize> = Default::default();
        for l in saved.lines() {
            let Some(rest) = l.strip_prefix("-A ") else {
                continue;
            };
            let chain = rest.split(' ').next().unwrap_or_default().to_string();
            let i = index.entry(chain.clone()).or_default();
            *i += 1;
            if l.contains(needle) {
                node.sh(&["ip6tables", "-t", table, "-D", &chain, &i.to_string()]);
                return l.to_string();
            }
        }
    }
    panic!("no ip6tables rule names {needle}");
}

/// bridge ipMasq's iptables chain of container `cid` on network `net` (upstream's name: `CNI-`
/// and 24 hex of sha512(net + cid)), computed with coreutils, independently of src/.
pub fn masq_chain(net: &str, cid: &str) -> String {
    let out = super::exec(
        std::path::Path::new("sha512sum"),
        &[],
        &[],
        &format!("{net}{cid}"),
    );
    assert!(out.status_ok, "sha512sum: {out:?}");
    format!("CNI-{}", &out.stdout[..24])
}
