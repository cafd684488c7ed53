//! The netfilter rules the plugins leave per attachment, read back with who owns each: the
//! iptables nat table's ipMasq and portmap rules (comment `name: "<net>" id: "<cid>"`), the
//! filter table's firewall rules (`CNI-FORWARD`, one address each, no owner in a comment: the
//! address is the owner), and the nftables tables of ipMasq and firewall (owner comments:
//! `<instance tag>, net: …, if: …, id: …`) and of portmap (the container ID). Both iptables
//! families; the Go plugins write the same tables, chains and comments as cnibox.

use crate::netfilter::iptables::{Iptables, Proto};
use crate::netfilter::{
    FIREWALL_FORWARD_CHAIN, FIREWALL_TABLE, Family, HOSTPORT_TABLE, MASQ_TABLE, NFT_COMMENT_MAX,
    Nftables, Table, instance_tag,
};
use std::net::IpAddr;

/// Whose a rule is, by what the rule names.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// An iptables nat comment: (network, container ID).
    NetCid(String, String),
    /// An nftables owner comment: its instance tag (the hash of network, ifname and container
    /// ID), and the network and container ID it names (either cut where the comment was).
    Instance {
        tag: String,
        network: String,
        cid: String,
    },
    /// portmap's nftables comment: a container ID, or the cut form of a long one (`…/<hash>`).
    Container(String),
    /// firewall's iptables rules: the container address they accept.
    Address(IpAddr),
}

impl Owner {
    /// Does the attachment (network, ifname, container ID) own a rule naming this?
    pub(crate) fn is(&self, network: &str, ifname: &str, cid: &str) -> bool {
        match self {
            Owner::NetCid(n, c) => n == network && c == cid,
            Owner::Instance { tag, .. } => *tag == instance_tag(network, ifname, cid),
            Owner::Container(c) => {
                c == cid
                    || (cid.len() > NFT_COMMENT_MAX
                        && c.rsplit_once('/')
                            .is_some_and(|(head, _)| cid.starts_with(head)))
            }
            Owner::Address(_) => false,
        }
    }

    /// The container ID the rule names, if it names one (cut in a long nftables comment).
    pub(crate) fn container_id(&self) -> Option<&str> {
        match self {
            Owner::NetCid(_, c) | Owner::Instance { cid: c, .. } | Owner::Container(c) => Some(c),
            Owner::Address(_) => None,
        }
    }

    /// The network the rule names, if it names one.
    pub(crate) fn network(&self) -> Option<&str> {
        match self {
            Owner::NetCid(n, _) | Owner::Instance { network: n, .. } => Some(n),
            Owner::Container(_) | Owner::Address(_) => None,
        }
    }
}

/// One rule: how it is shown, and its owner.
pub(crate) struct Found {
    pub(crate) object: String,
    pub(crate) owner: Owner,
}

/// `(network, cid)` of a rule commented `name: \"N\" id: \"C\"` (iptables-save's quoting).
fn nat_owner(rule: &str) -> Option<(String, String)> {
    let start = rule.find("name: \\\"")? + 8;
    let rest = &rule[start..];
    let end = rest.find("\\\"")?;
    let net = &rest[..end];
    let rest = &rest[end..];
    let id = rest.find("id: \\\"")? + 6;
    let rest = &rest[id..];
    let end = rest.find("\\\"")?;
    Some((net.to_string(), rest[..end].to_string()))
}

/// The address of a firewall rule of `CNI-FORWARD`: `-d IP/32 … -j ACCEPT` or
/// `-s IP/32 -j ACCEPT` (`/128` for IPv6).
fn firewall_address(spec: &str) -> Option<IpAddr> {
    let mut words = spec.split(' ');
    let first = words.next()?;
    if first != "-d" && first != "-s" || !spec.ends_with("-j ACCEPT") {
        return None;
    }
    let (ip, len) = words.next()?.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let host = if ip.is_ipv4() { "32" } else { "128" };
    (len == host).then_some(ip)
}

/// An nftables owner comment: (instance tag, the network it names).
fn instance_owner(comment: &str) -> Option<Owner> {
    let (tag, rest) = comment.split_once(", net: ")?;
    let (net_hash, if_hash) = tag.split_once('-')?;
    let hex = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex(net_hash) || !hex(if_hash) {
        return None;
    }
    let (network, rest) = rest.split_once(", if: ").unwrap_or((rest, ""));
    let cid = rest.split_once(", id: ").map_or("", |(_, c)| c);
    Some(Owner::Instance {
        tag: tag.to_string(),
        network: network.to_string(),
        cid: cid.to_string(),
    })
}

/// The iptables rules (nat: ipMasq and portmap; filter: firewall), both families. No iptables
/// tools: none, with a note.
pub(crate) fn iptables(notes: &mut Vec<String>) -> Vec<Found> {
    let mut out = Vec::new();
    for proto in [Proto::V4, Proto::V6] {
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        for table in ["nat", "filter"] {
            let saved = match ipt.save(table) {
                Ok(s) => s,
                Err(e) => {
                    notes.push(format!("iptables: {}", e.msg));
                    continue;
                }
            };
            for (chain, spec) in saved.rules() {
                let owner = if table == "nat" {
                    nat_owner(spec).map(|(n, c)| Owner::NetCid(n, c))
                } else if chain == FIREWALL_FORWARD_CHAIN {
                    firewall_address(spec).map(Owner::Address)
                } else {
                    None
                };
                if let Some(owner) = owner {
                    let object = format!("{proto:?} {table} -A {chain} {spec}");
                    out.push(Found { object, owner });
                }
            }
        }
    }
    out
}

/// The nftables rules of ipMasq, firewall and portmap whose comment names an attachment. No
/// nf_tables here: none, with a note.
pub(crate) fn nftables(notes: &mut Vec<String>) -> Vec<Found> {
    let mut nft = match Nftables::open() {
        Ok(n) => n,
        Err(e) => {
            notes.push(format!("nftables: {}", e.msg));
            return Vec::new();
        }
    };
    let tables = [
        Table::new(Family::Inet, MASQ_TABLE),
        Table::new(Family::Inet, FIREWALL_TABLE),
        Table::new(Family::Ip, HOSTPORT_TABLE),
        Table::new(Family::Ip6, HOSTPORT_TABLE),
    ];
    let mut out = Vec::new();
    for t in &tables {
        let rules = match nft.rules(t, None) {
            Ok(r) => r,
            Err(e) => {
                notes.push(format!("nftables: {}", e.msg));
                continue;
            }
        };
        for r in rules {
            let Some(comment) = r.comment else { continue };
            let owner = if t.name == HOSTPORT_TABLE {
                // Only an ID (or its cut form) in portmap's comments; other rules have none.
                (!comment.contains(' ')).then(|| Owner::Container(comment.clone()))
            } else {
                instance_owner(&comment)
            };
            if let Some(owner) = owner {
                let object = format!("{t} chain {} handle {} # {comment}", r.chain, r.handle);
                out.push(Found { object, owner });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Owner, firewall_address, instance_owner, nat_owner};
    use crate::netfilter::owner_comment;

    #[test]
    fn nat_owners_are_read_from_iptables_save_comments() {
        let r = r#"-s 10.1.0.2/32 -m comment --comment "name: \"net1\" id: \"abc\"" -j CNI-x"#;
        assert_eq!(nat_owner(r), Some(("net1".into(), "abc".into())));
        let r = r#"-p tcp -m comment --comment "dnat name: \"n\" id: \"c\"" -j CNI-DN-1"#;
        assert_eq!(nat_owner(r), Some(("n".into(), "c".into())));
        assert_eq!(nat_owner("-j MASQUERADE"), None);
    }

    #[test]
    fn firewall_addresses_are_host_routes_accepted() {
        let est = "-d 10.1.0.2/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT";
        assert_eq!(firewall_address(est), Some("10.1.0.2".parse().unwrap()));
        let src = "-s fd00:1::2/128 -j ACCEPT";
        assert_eq!(firewall_address(src), Some("fd00:1::2".parse().unwrap()));
        assert_eq!(firewall_address("-s 10.1.0.0/24 -j ACCEPT"), None);
        assert_eq!(firewall_address("-s 10.1.0.2/32 -j DROP"), None);
        let admin = r#"-m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN"#;
        assert_eq!(firewall_address(admin), None);
    }

    #[test]
    fn owner_comments_name_their_attachment() {
        let c = owner_comment("net1", "eth0", "abc");
        let o = instance_owner(&c).unwrap();
        assert!(o.is("net1", "eth0", "abc"));
        assert!(!o.is("net1", "eth1", "abc") && !o.is("net2", "eth0", "abc"));
        assert_eq!(o.network(), Some("net1"));
        assert_eq!(o.container_id(), Some("abc"));
        // Cut at 128 bytes: the tag still says whose it is.
        let long = "c".repeat(200);
        let o = instance_owner(&owner_comment("net1", "eth0", &long)).unwrap();
        assert!(o.is("net1", "eth0", &long));
        assert_eq!(
            instance_owner("CNI firewall plugin rules (ingressPolicy: x)"),
            None
        );
        assert_eq!(instance_owner("zz, net: n"), None);
    }

    #[test]
    fn portmap_comments_name_a_container() {
        let o = Owner::Container("abc".into());
        assert!(o.is("any", "eth0", "abc") && !o.is("any", "eth0", "abcd"));
        let long = "d".repeat(200);
        let cut = format!("{}/0123456789abcdef", &long[..111]);
        assert!(Owner::Container(cut).is("n", "eth0", &long));
        assert_eq!(o.network(), None);
    }
}
