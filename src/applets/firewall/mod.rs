//! firewall (chained): accept forwarded traffic from and (established) to the container's
//! addresses, and optionally isolate its bridge from other bridges (`ingressPolicy`).
//!
//! ```text
//! iptables (filter, per family), upstream's layout:
//!   FORWARD:      -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD
//!   CNI-FORWARD:  -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN
//!                 -d IP/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
//!                 -s IP/32 -j ACCEPT
//!   same-bridge / isolated: FORWARD -j CNI-ISOLATION-STAGE-1 (first);
//!     STAGE-1: -i br ! -o br -j CNI-ISOLATION-STAGE-2 [-i br -o br -j DROP] … -j RETURN
//!     STAGE-2: -o br -j DROP … -j RETURN
//! nftables (table inet cni_plugins_firewall), the same policy:
//!   chain forward (filter hook forward priority 0): jump isolation-stage-1; jump admin;
//!                                                   jump cni-forward
//!   chain cni-forward: ip daddr IP ct state established,related accept; ip saddr IP accept
//!     (commented with the attachment's owner comment, like the Go plugins' nftables rules)
//!   chain isolation-stage-1 / -stage-2: the iptables isolation rules, per bridge
//!   chain admin: empty, for the administrator's own rules
//!
//! firewalld (`firewalld.rs`): the addresses as sources of a zone over D-Bus.
//! ```
//!
//! As upstream: versions 0.4.0 and later; isolation rules are per bridge and stay after DEL
//! (with firewalld they are iptables rules, as upstream writes them); `backend` unset, or a
//! value it does not know, means firewalld when its D-Bus name has an owner, else iptables
//! (cnibox: nftables where iptables is not installed). Beyond upstream: the nftables backend;
//! DEL works without prevResult (the iptables addresses and firewalld sources are recorded at
//! ADD, the nftables rules are found by comment) and cleans up every backend; GC removes the
//! rules and sources of attachments that are gone. With nftables, an `accept` here ends only
//! this table's evaluation: a drop policy in another table (say iptables-nft's FORWARD) still
//! applies, so on such nodes use the iptables backend.

mod firewalld;
mod iptables;
mod nftables;

use iptables::{ipt_add, ipt_check, ipt_remove};
use nftables::{nft_add, nft_check, nft_delete, nft_delete_owned};

use crate::attachment;
use crate::cni::result::CniResult;
use crate::cni::{Applet, Command, Error, Request, Result, Version};
use crate::dbus::Bus;
use crate::netfilter::iptables::Proto;
use crate::netfilter::{Backend, network_tag, owner_comment, validate};
use crate::undo::{ErrorList, Undo};
use serde::Deserialize;
use std::collections::HashSet;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "firewall",
    versions: &[Version::V040, Version::V100, Version::V110],
    add,
    del,
    check,
    status: None,
    gc: Some(gc),
};

const FORWARD_CHAIN: &str = crate::netfilter::FIREWALL_FORWARD_CHAIN;
const DEFAULT_ADMIN: &str = "CNI-ADMIN";
const STAGE1: &str = "CNI-ISOLATION-STAGE-1";
const STAGE2: &str = "CNI-ISOLATION-STAGE-2";
const NFT_TABLE: &str = crate::netfilter::FIREWALL_TABLE;
const NFT_FORWARD: &str = "cni-forward";
const NFT_ADMIN: &str = "admin";
const NFT_STAGE1: &str = "isolation-stage-1";
const NFT_STAGE2: &str = "isolation-stage-2";
/// Owner records of the iptables and firewalld backends: the addresses whose rules or sources
/// an attachment added, with firewalld also `zone=<zone>`.
const OWNERS: &str = "firewall-ipt";
const ZONE_MARK: &str = "zone=";
/// Records of the nftables backend: the handles of an attachment's rules (a hint for DEL).
const NFT_OWNERS: &str = "firewall-nft";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conf {
    #[serde(default)]
    backend: String,
    #[serde(default)]
    iptables_admin_chain_name: String,
    #[serde(default)]
    ingress_policy: String,
    #[serde(default)]
    firewalld_zone: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Open,
    SameBridge,
    Isolated,
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Open => "open",
            Policy::SameBridge => "same-bridge",
            Policy::Isolated => "isolated",
        }
    }
}

/// The `backend` key: a netfilter backend, firewalld, or (unset or unknown) upstream's choice.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Choice {
    Rules(Backend),
    Firewalld,
    Auto,
}

/// The backend in use: for firewalld, with its bus.
enum Chosen {
    Rules(Backend),
    Firewalld(Bus),
}

/// What the config asks for.
struct Firewall {
    backend: Choice,
    admin: String,
    /// `firewalldZone`; empty on a DEL whose value no ADD would have accepted.
    zone: String,
    policy: Policy,
    network: String,
    cid: String,
    ifname: String,
}

fn load(req: &Request) -> Result<Firewall> {
    let c: Conf = req.decode()?;
    let policy = match c.ingress_policy.as_str() {
        "" | "open" => Policy::Open,
        "same-bridge" => Policy::SameBridge,
        "isolated" => Policy::Isolated,
        other => {
            return Err(Error::config(format!(
                "unknown ingress policy: {other:?} (use \"open\", \"same-bridge\" or \"isolated\")"
            )));
        }
    };
    let backend = match c.backend.as_str() {
        "firewalld" => Choice::Firewalld,
        "iptables" => Choice::Rules(Backend::Iptables),
        "nftables" => Choice::Rules(Backend::Nftables),
        "" => Choice::Auto,
        other => {
            // Upstream picks as if the key were unset; say so where the runtime logs.
            crate::warn!("firewall: unknown backend {other:?}, choosing as if it were unset");
            Choice::Auto
        }
    };
    let mut zone = match c.firewalld_zone.as_str() {
        "" => "trusted".to_string(),
        z => z.to_string(),
    };
    let admin = if c.iptables_admin_chain_name.is_empty() {
        DEFAULT_ADMIN.to_string()
    } else {
        c.iptables_admin_chain_name
    };
    // DEL removes rules by address and comment, never with the admin chain: an invalid name
    // (which no ADD accepted) must not keep a container's rules from being removed.
    if req.env.command != Command::Del {
        validate::chain_name("iptablesAdminChainName", &admin)?;
        if [FORWARD_CHAIN, STAGE1, STAGE2].contains(&admin.as_str()) {
            return Err(Error::config(format!(
                "iptablesAdminChainName: {admin:?} is one of the plugin's own chains"
            )));
        }
        if !firewalld::valid_zone(&zone) {
            return Err(Error::config(format!(
                "firewalldZone: {zone:?} is not a zone name (letters, digits, '_', '-', one \
                 inner '/')"
            )));
        }
    } else if !firewalld::valid_zone(&zone) {
        zone.clear();
    }
    Ok(Firewall {
        backend,
        admin,
        zone,
        policy,
        network: req.conf.name.clone(),
        cid: req.env.container_id.clone(),
        ifname: req.env.ifname.clone(),
    })
}

/// Upstream's choice: the configured backend, or firewalld when it runs, else the default
/// netfilter backend. A bus that answers badly or not at all is an error, not "no firewalld".
fn backend_for(fw: &Firewall) -> Result<Chosen> {
    Ok(match fw.backend {
        Choice::Rules(b) => Chosen::Rules(b),
        Choice::Firewalld => Chosen::Firewalld(firewalld::need()?),
        Choice::Auto => match firewalld::running()? {
            Some(bus) => Chosen::Firewalld(bus),
            None => Chosen::Rules(Backend::default_backend()),
        },
    })
}

fn prev(req: &Request) -> Result<CniResult> {
    req.prev_result()?
        .ok_or_else(|| Error::config("missing prevResult from earlier plugin"))
}

/// The bridge of `ingressPolicy`: the first interface of the previous result.
fn bridge_of(fw: &Firewall, prev: &CniResult) -> Result<Option<String>> {
    if fw.policy == Policy::Open {
        return Ok(None);
    }
    match prev.interfaces.first() {
        None => Err(Error::config(format!(
            "interface needs to be set for ingress policy {:?}, make sure to chain \"firewall\" \
             plugin with \"bridge\"",
            fw.policy.name()
        ))),
        Some(i) if i.name.is_empty() => Err(Error::config("got empty bridge name")),
        Some(i) => {
            validate::iface_name("prevResult.interfaces[0].name", &i.name)?;
            Ok(Some(i.name.clone()))
        }
    }
}

fn addrs(prev: &CniResult) -> Vec<IpAddr> {
    prev.ips.iter().map(|ip| ip.address.addr()).collect()
}

// ---------------------------------------------------------------------------------------------
// iptables

/// The addresses of each family that has any.
fn by_family(ips: &[IpAddr]) -> Vec<(Proto, Vec<IpAddr>)> {
    [Proto::V4, Proto::V6]
        .into_iter()
        .map(|p| {
            (
                p,
                ips.iter()
                    .copied()
                    .filter(|ip| Proto::of(ip) == p)
                    .collect(),
            )
        })
        .filter(|(_, v): &(Proto, Vec<IpAddr>)| !v.is_empty())
        .collect()
}

fn add(req: &Request) -> Result<CniResult> {
    let fw = load(req)?;
    let prev = prev(req)?;
    let ips = addrs(&prev);
    if ips.is_empty() {
        return Ok(prev);
    }
    let bridge = bridge_of(&fw, &prev)?;
    let bus = match backend_for(&fw)? {
        Chosen::Rules(Backend::Nftables) => {
            return nft_add(&fw, &ips, bridge.as_deref()).map(|()| prev);
        }
        Chosen::Rules(Backend::Iptables) => None,
        Chosen::Firewalld(bus) => Some(bus),
    };
    // Record first: a DEL after a failed or interrupted ADD then still finds the addresses
    // (and, with firewalld, the zone they went to).
    let mut items: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
    if bus.is_some() {
        items.push(format!("{ZONE_MARK}{}", fw.zone));
    }
    attachment::record(OWNERS, &fw.network, &fw.cid, &fw.ifname, &items)?;
    let mut undo = Undo::new("firewall");
    undo.push("owner record", || {
        attachment::forget(OWNERS, &fw.network, &fw.cid, &fw.ifname);
        Ok(())
    });
    // iptables' CNI-FORWARD rules, or firewalld's sources; the isolation rules are iptables
    // rules with firewalld too, as upstream writes them. One call of ipt_add keeps it inlined.
    let forward = match bus {
        None => {
            undo.push("iptables rules", || ipt_remove(&ips));
            true
        }
        Some(bus) => {
            firewalld::add(&fw, bus, &ips, &mut undo)?;
            false
        }
    };
    if forward || bridge.is_some() {
        undo.finish(ipt_add(&fw, &ips, bridge.as_deref(), forward))?;
    } else {
        undo.commit();
    }
    Ok(prev)
}

/// An attachment's record: its addresses, and the firewalld zone they went to (if any).
fn recorded(items: &[String]) -> (Vec<IpAddr>, Option<&str>) {
    let ips = items.iter().filter_map(|s| s.parse().ok()).collect();
    (ips, items.iter().find_map(|s| s.strip_prefix(ZONE_MARK)))
}

fn del(req: &Request) -> Result<()> {
    let fw = load(req)?;
    // Every backend, whatever is configured: the node may have switched while the container
    // ran. Addresses: prevResult's and the ones recorded at ADD.
    let items = attachment::get(OWNERS, &fw.network, &fw.cid, &fw.ifname);
    let (mut ips, zone) = recorded(&items);
    if let Ok(Some(p)) = req.prev_result() {
        for ip in addrs(&p) {
            if !ips.contains(&ip) {
                ips.push(ip);
            }
        }
    }
    let mut errors = ErrorList::new();
    errors.check(ipt_remove(&ips));
    errors.check(nft_delete_owned(&fw));
    // firewalld: the recorded zone, and (as upstream, which keeps no record) the configured
    // one unless a netfilter backend is configured or our own ADD's record says where the
    // addresses went (a record without a zone: not to firewalld, so no bus round trips).
    let mut zones: Vec<&str> = zone.into_iter().collect();
    if !matches!(fw.backend, Choice::Rules(_))
        && items.is_empty()
        && !fw.zone.is_empty()
        && zone != Some(&fw.zone)
    {
        zones.push(&fw.zone);
    }
    for z in zones {
        errors.check(firewalld::remove_from(z, &ips));
    }
    errors.into_result()?;
    attachment::forget(OWNERS, &fw.network, &fw.cid, &fw.ifname);
    attachment::forget(NFT_OWNERS, &fw.network, &fw.cid, &fw.ifname);
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let fw = load(req)?;
    let prev = prev(req)?;
    let ips = addrs(&prev);
    if ips.is_empty() {
        return Ok(());
    }
    match backend_for(&fw)? {
        Chosen::Rules(Backend::Iptables) => ipt_check(&fw, &ips),
        Chosen::Rules(Backend::Nftables) => nft_check(&fw, &ips),
        Chosen::Firewalld(bus) => firewalld::check(&fw, bus, &ips),
    }
}

/// Remove the rules of this network's attachments that are not valid: nftables rules by their
/// owner comment, iptables rules and firewalld sources through what was recorded at ADD (an
/// address still recorded for a live attachment keeps its rules). Isolation rules are per
/// bridge and stay.
fn gc(req: &Request) -> Result<()> {
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let network = &req.conf.name;
    let keep: HashSet<(&str, &str)> = valid
        .iter()
        .map(|a| (a.container_id.as_str(), a.ifname.as_str()))
        .collect();
    let mut failures = ErrorList::new();
    let records = attachment::list(OWNERS, network);
    let live: HashSet<&str> = records
        .iter()
        .filter(|(cid, ifname, _)| keep.contains(&(cid.as_str(), ifname.as_str())))
        .flat_map(|(_, _, items)| items.iter().map(String::as_str))
        .collect();
    for (cid, ifname, items) in &records {
        if keep.contains(&(cid.as_str(), ifname.as_str())) {
            continue;
        }
        let (mut ips, zone) = recorded(items);
        ips.retain(|ip| !live.contains(ip.to_string().as_str()));
        let mut r = ipt_remove(&ips);
        if let (Ok(()), Some(z)) = (&r, zone) {
            r = firewalld::remove_from(z, &ips);
        }
        if failures.check(r).is_some() {
            attachment::forget(OWNERS, network, cid, ifname);
        }
    }
    let keep_comments: HashSet<String> = valid
        .iter()
        .map(|a| owner_comment(network, &a.ifname, &a.container_id))
        .collect();
    let of_network = format!("{}-", network_tag(network));
    failures.check(nft_delete(|c| {
        c.starts_with(&of_network) && !keep_comments.contains(c)
    }));
    for (cid, ifname, _) in attachment::list(NFT_OWNERS, network) {
        if !keep.contains(&(cid.as_str(), ifname.as_str())) {
            attachment::forget(NFT_OWNERS, network, &cid, &ifname);
        }
    }
    failures.into_result()
}

#[cfg(test)]
mod tests {
    use super::Policy;
    use super::iptables::{forward_jump, ip_rules, isolation_rules};

    #[test]
    fn iptables_rules_in_saved_form() {
        assert_eq!(
            forward_jump(),
            r#"-m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD"#
        );
        assert_eq!(
            ip_rules("10.1.0.5".parse().unwrap()),
            [
                "-d 10.1.0.5/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT".to_string(),
                "-s 10.1.0.5/32 -j ACCEPT".to_string(),
            ]
        );
        assert_eq!(
            ip_rules("fd00::5".parse().unwrap())[1],
            "-s fd00::5/128 -j ACCEPT"
        );
        let iso = isolation_rules("cni0", Policy::Isolated);
        assert_eq!(
            iso[1].1,
            r#"-i cni0 ! -o cni0 -m comment --comment "CNI firewall plugin rules (ingressPolicy: isolated)" -j CNI-ISOLATION-STAGE-2"#
        );
        assert_eq!(
            iso[2].1,
            r#"-i cni0 -o cni0 -m comment --comment "CNI firewall plugin rules (ingressPolicy: isolated)" -j DROP"#
        );
        assert_eq!(isolation_rules("cni0", Policy::SameBridge).len(), 5);
    }
}
