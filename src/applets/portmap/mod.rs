//! portmap (chained): forward host ports to a container (`runtimeConfig.portMappings`), with
//! hairpin and localhost access (`snat`), on either backend in upstream's layout so a node can
//! switch between the Go plugin and cnibox with containers running:
//!
//! ```text
//! iptables (nat, per family):
//!   PREROUTING/OUTPUT: -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT
//!   CNI-HOSTPORT-DNAT: -p P -m comment --comment "dnat name: …" -m multiport --dports … -j CNI-DN-<21 hex>
//!   CNI-DN-<21 hex>:   [-s subnet|127.0.0.1 … -j CNI-HOSTPORT-SETMARK] … -j DNAT --to-destination IP:port
//!   CNI-HOSTPORT-SETMARK: -j MARK --set-xmark 0x2000/0x2000; CNI-HOSTPORT-MASQ: -m mark … -j MASQUERADE
//! nftables (tables ip/ip6 cni_hostport): chains hostports (DNAT rules), hostports_all,
//!   hostip_hostports, prerouting/output (fib daddr type local jump hostports_all), masquerading;
//!   every per-container rule is commented with the container ID.
//! ```
//!
//! iptables changes go through one `iptables-restore` per family; nftables through one netlink
//! batch per family. Beyond upstream: `conditionsV4/V6` on the nftables backend apply to this
//! container's rules only (upstream puts the latest ADD's conditions on the shared prerouting
//! rule, i.e. on every container); a repeated ADD replaces the container's rules instead of
//! duplicating them; GC removes the rules of containers that are gone; DEL also cleans up the
//! other backend; when `backend` is not set, nftables-syntax conditions select nftables (as
//! upstream's documentation says) instead of failing.

mod conditions;
mod iptables;
mod nftables;
#[cfg(test)]
mod tests;

use conditions::nft_conditions;
use iptables::{dnat_chain, ipt_add, ipt_check, ipt_remove, old_snat_chain};
use nftables::{nft_add, nft_check, nft_remove, nft_remove_owned, nft_replaced};

use crate::attachment;
use crate::cni::error::code;
use crate::cni::gojson;
use crate::cni::result::CniResult;
use crate::cni::{Applet, CodeContext, Command, Context, Error, Request, Result, Version};
use crate::netfilter;
use crate::netfilter::iptables::{Iptables, Proto, Saved, Script};
use crate::netfilter::{Backend, SCTP, TCP, UDP, validate};
use crate::netlink::Handle;
use crate::undo::{ErrorList, Undo};
use ipnet::IpNet;
use serde::Deserialize;
use std::collections::HashSet;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "portmap",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: Some(gc),
};

const TOP_DNAT: &str = "CNI-HOSTPORT-DNAT";
const SETMARK: &str = "CNI-HOSTPORT-SETMARK";
const MARK_MASQ: &str = "CNI-HOSTPORT-MASQ";
const NFT_TABLE: &str = crate::netfilter::HOSTPORT_TABLE;
const OWNERS: &str = "portmap-nft";
/// The nftables chains holding per-container rules (commented with the container ID).
const OWNED_CHAINS: [&str; 3] = ["hostports", "hostip_hostports", "masquerading"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conf {
    backend: Option<String>,
    snat: Option<bool>,
    #[serde(rename = "conditionsV4")]
    conditions_v4: Option<Vec<String>>,
    #[serde(rename = "conditionsV6")]
    conditions_v6: Option<Vec<String>>,
    #[serde(default)]
    masq_all: bool,
    mark_masq_bit: Option<i64>,
    external_set_mark_chain: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMapping {
    host_port: i64,
    container_port: i64,
    #[serde(default)]
    protocol: String,
    #[serde(default, rename = "hostIP")]
    host_ip: String,
}

#[derive(Debug, Clone)]
struct Mapping {
    host_port: u16,
    container_port: u16,
    proto: &'static str,
    /// `None`: no hostIP; `Some(unspecified)` still means "all addresses" of its family.
    host_ip: Option<IpAddr>,
}

impl Mapping {
    /// Whether the mapping applies to the family of `cip` and, if so, the destination to match.
    fn for_family(&self, v6: bool) -> Option<Option<IpAddr>> {
        match self.host_ip {
            None => Some(None),
            Some(h) if h.is_ipv6() != v6 => None,
            Some(h) if h.is_unspecified() => Some(None),
            Some(h) => Some(Some(h)),
        }
    }
    fn proto_num(&self) -> u8 {
        match self.proto {
            "udp" => UDP,
            "sctp" => SCTP,
            _ => TCP,
        }
    }
}

struct Portmap {
    backend: Backend,
    snat: bool,
    masq_all: bool,
    mark: u32,
    set_mark_chain: Option<String>,
    cond4: Vec<String>,
    cond6: Vec<String>,
    maps: Vec<Mapping>,
    network: String,
    cid: String,
    ifname: String,
}

/// iptables syntax if the first token starts with `-` or `!`, else nftables (upstream's test).
fn conditions_backend(c: &[String]) -> Option<Backend> {
    let first = c.first()?.chars().next()?;
    Some(if first == '-' || first == '!' {
        Backend::Iptables
    } else {
        Backend::Nftables
    })
}

/// The configuration and runtimeConfig.portMappings, checked in upstream's order: the mark,
/// externalSetMarkChain, the backend, the conditions, the mappings.
fn load(req: &Request) -> Result<Portmap> {
    let mut c: Conf = req.decode()?;
    let bit = mark_masq_bit(&c)?;
    // DEL removes rules by chain name and comment, never with these keys: an invalid value
    // (which no ADD accepted) must not keep a container's rules from being removed.
    let strict = req.env.command != Command::Del;
    if let Some(chain) = c.external_set_mark_chain.as_ref().filter(|_| strict) {
        check_set_mark_chain(chain)?;
    }
    let cond4 = c.conditions_v4.take().unwrap_or_default();
    let cond6 = c.conditions_v6.take().unwrap_or_default();
    let backend = choose_backend(&c, &cond4, &cond6)?;
    if strict {
        check_conditions(backend, &cond4, &cond6)?;
    }
    let maps = mappings(req)?;
    Ok(Portmap {
        backend,
        snat: c.snat.unwrap_or(true),
        masq_all: c.masq_all,
        mark: 1u32 << bit,
        set_mark_chain: c.external_set_mark_chain,
        cond4,
        cond6,
        maps,
        network: req.conf.name.clone(),
        cid: req.env.container_id.clone(),
        ifname: req.env.ifname.clone(),
    })
}

/// `markMasqBit` (13 by default, 0-31), which excludes `externalSetMarkChain`.
fn mark_masq_bit(c: &Conf) -> Result<i64> {
    if c.mark_masq_bit.is_some() && c.external_set_mark_chain.is_some() {
        return Err(Error::config(
            "Cannot specify externalSetMarkChain and markMasqBit",
        ));
    }
    let bit = c.mark_masq_bit.unwrap_or(13);
    if !(0..=31).contains(&bit) {
        return Err(Error::config(format!(
            "MasqMarkBit must be between 0 and 31 (got {bit})"
        )));
    }
    Ok(bit)
}

/// `externalSetMarkChain`: a valid chain name that is none of the plugin's own chains.
fn check_set_mark_chain(chain: &str) -> Result<()> {
    validate::chain_name("externalSetMarkChain", chain)?;
    if [TOP_DNAT, SETMARK, MARK_MASQ].contains(&chain) {
        return Err(Error::config(format!(
            "externalSetMarkChain: {chain:?} is one of the plugin's own chains"
        )));
    }
    Ok(())
}

/// The backend: `backend` if set, else the one the backend-specific keys ask for, else the
/// default; a key of the other backend is an error.
fn choose_backend(c: &Conf, cond4: &[String], cond6: &[String]) -> Result<Backend> {
    let mut wants: Vec<(Backend, &str)> = Vec::new();
    if c.external_set_mark_chain.is_some() {
        wants.push((Backend::Iptables, "externalSetMarkChain"));
    }
    for (cond, key) in [(cond4, "conditionsV4"), (cond6, "conditionsV6")] {
        if let Some(b) = conditions_backend(cond) {
            wants.push((b, key));
        }
    }
    let backend = match c.backend.as_deref() {
        None | Some("") => match wants.first() {
            Some((b, _)) => *b,
            None => Backend::default_backend(),
        },
        explicit => Backend::parse("backend", explicit)?,
    };
    let wrong: Vec<&str> = wants
        .iter()
        .filter(|(b, _)| *b != backend)
        .map(|(_, k)| *k)
        .collect();
    if !wrong.is_empty() {
        let (name, other) = match backend {
            Backend::Iptables => ("iptables", "nftables"),
            Backend::Nftables => ("nftables", "iptables"),
        };
        return Err(Error::config(format!(
            "{name} backend was requested but configuration contains {other}-specific options {wrong:?}"
        )));
    }
    Ok(backend)
}

/// Conditions are checked for the backend that uses them: iptables arguments are written
/// into the restore script (quoted, one argument per element), nftables conditions are
/// parsed into rule statements (for both families, so an error shows before any change).
fn check_conditions(backend: Backend, cond4: &[String], cond6: &[String]) -> Result<()> {
    for (cond, key, v6) in [
        (cond4, "conditionsV4", false),
        (cond6, "conditionsV6", true),
    ] {
        match backend {
            Backend::Iptables => {
                netfilter::iptables::validate_condition_tokens(key, cond)?;
            }
            Backend::Nftables => {
                nft_conditions(cond, v6, key)?;
            }
        }
    }
    Ok(())
}

/// runtimeConfig.portMappings (none when absent or null).
fn mappings(req: &Request) -> Result<Vec<Mapping>> {
    let raw: Vec<RawMapping> = match req.runtime_config("portMappings") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(v) => gojson::from_value::<Vec<RawMapping>>(v)
            .ctx_code(code::DECODE_FAILURE, "runtimeConfig.portMappings")?,
    };
    raw.into_iter().map(mapping).collect()
}

/// One port mapping: protocol, hostIP, then the container and host ports (1-65535).
fn mapping(m: RawMapping) -> Result<Mapping> {
    let port = |what: &str, p: i64| {
        u16::try_from(p)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| Error::config(format!("Invalid {what} port number: {p}")))
    };
    let proto = match m.protocol.to_ascii_lowercase().as_str() {
        "tcp" => "tcp",
        "udp" => "udp",
        "sctp" => "sctp",
        _ => {
            return Err(Error::config(format!(
                "invalid protocol {:?} in portMappings: use tcp, udp or sctp",
                m.protocol
            )));
        }
    };
    let host_ip = if m.host_ip.is_empty() {
        None
    } else {
        Some(m.host_ip.parse::<IpAddr>().map_err(|_| {
            Error::config(format!("invalid hostIP {:?} in portMappings", m.host_ip))
        })?)
    };
    Ok(Mapping {
        container_port: port("container", m.container_port)?,
        host_port: port("host", m.host_port)?,
        proto,
        host_ip,
    })
}

/// The first IPv4 and first IPv6 address of the container interface IFNAME (addresses without
/// an interface index count, as upstream).
fn container_ips(prev: &CniResult, ifname: &str) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = Vec::new();
    for ip in &prev.ips {
        if out
            .iter()
            .any(|o| o.addr().is_ipv4() == ip.address.addr().is_ipv4())
        {
            continue;
        }
        if let Some(i) = ip.interface
            && let Some(iface) = prev.interfaces.get(i)
            && (iface.name != ifname || iface.sandbox.is_empty())
        {
            continue;
        }
        out.push(ip.address);
    }
    out
}

/// `route_localnet=1` on the host interface that routes to the container, so 127.0.0.1:port
/// can be DNATed to it.
fn enable_route_localnet(cip: IpAddr) -> Result<()> {
    let mut h = Handle::new()?;
    let Some(oif) = h.route_get(cip)? else {
        return Ok(());
    };
    let Some(link) = h.link_by_index(oif)? else {
        return Ok(());
    };
    crate::sysctl::set(
        &crate::sysctl::iface("net/ipv4/conf", &link.name, "route_localnet"),
        "1",
    )
    .ctx("unable to enable route_localnet")
}

// ---------------------------------------------------------------------------------------------
// verbs

fn add(req: &Request) -> Result<CniResult> {
    let pm = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("must be called as chained plugin"))?;
    if pm.maps.is_empty() {
        return Ok(prev);
    }
    let ips = container_ips(&prev, &pm.ifname);
    let nft = pm.backend == Backend::Nftables;
    let replaced = if nft {
        nft_replaced(
            &pm,
            &attachment::get(OWNERS, &pm.network, &pm.cid, &pm.ifname),
        )?
    } else {
        Vec::new()
    };
    // Each address is its own transaction: a failure at the second must take the first back.
    let mut undo = Undo::new("portmap");
    undo.push("port mappings", || remove(&pm, &[]));
    let r = (|| -> Result<()> {
        // The handles of the nftables rules, for the record (`None`: not all reported).
        let mut handles = Some(Vec::new());
        for cip in &ips {
            match pm.backend {
                Backend::Iptables => ipt_add(&pm, cip)?,
                Backend::Nftables => {
                    let added = nft_add(&pm, cip, &replaced)?;
                    if let (Some(all), Some(added)) = (handles.as_mut(), added) {
                        all.extend(added);
                    } else {
                        handles = None;
                    }
                }
            }
            let udp: Vec<u16> = pm
                .maps
                .iter()
                .filter(|m| m.proto == "udp")
                .map(|m| m.host_port)
                .collect();
            if !udp.is_empty()
                && let Err(e) =
                    crate::netfilter::conntrack::delete_udp_dport(cip.addr().is_ipv6(), &udp)
            {
                crate::warn!(
                    "portmap: failed to delete stale UDP conntrack entries for {cip}: {e}"
                );
            }
            if pm.snat && cip.addr().is_ipv4() {
                enable_route_localnet(cip.addr())?;
            }
        }
        if nft && !ips.is_empty() {
            // The record is also GC's list of attachments with nftables rules; its lines
            // (the rules' handles) are a hint for the next ADD and DEL, never trusted blindly.
            let lines = handles.unwrap_or_default();
            attachment::record(OWNERS, &pm.network, &pm.cid, &pm.ifname, &lines)?;
        }
        Ok(())
    })();
    undo.finish(r)?;
    Ok(prev)
}

/// Remove the container's mappings from both backends: iptables by chain name (and the exact
/// entry rules `pm` gives), nftables by the record's handles (`recorded`) or by comment.
fn remove(pm: &Portmap, recorded: &[String]) -> Result<()> {
    let chains = [
        dnat_chain(&pm.network, &pm.cid),
        old_snat_chain(&pm.network, &pm.cid),
    ];
    let mut errors = ErrorList::new();
    let names = [chains[0].as_str(), chains[1].as_str()];
    for proto in [Proto::V4, Proto::V6] {
        if !netfilter::iptables::may_hold(proto, "nat", &names) {
            continue;
        }
        if let Ok(ipt) = Iptables::new(proto) {
            errors.check(ipt_remove(&ipt, Some(pm), &chains));
        }
    }
    errors.check(nft_remove_owned(&pm.cid, recorded));
    errors.into_result()
}

fn del(req: &Request) -> Result<()> {
    let pm = load(req)?;
    if pm.maps.is_empty() {
        return Ok(());
    }
    // Both backends: a node may have switched backend while the container ran.
    remove(
        &pm,
        &attachment::get(OWNERS, &pm.network, &pm.cid, &pm.ifname),
    )?;
    attachment::forget(OWNERS, &pm.network, &pm.cid, &pm.ifname);
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let pm = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("Required prevResult missing"))?;
    if pm.maps.is_empty() {
        return Ok(());
    }
    for cip in container_ips(&prev, &pm.ifname) {
        match pm.backend {
            Backend::Iptables => ipt_check(&pm, &cip)?,
            Backend::Nftables => nft_check(&pm, &cip)?,
        }
    }
    Ok(())
}

/// Remove the port mappings of this network's containers that are not valid attachments:
/// iptables DNAT chains found through their `dnat name: "<net>"` entry rules, nftables rules
/// through the ADD records (nftables rules name only the container).
fn gc(req: &Request) -> Result<()> {
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let network = &req.conf.name;
    let keep_ids: HashSet<&str> = valid.iter().map(|a| a.container_id.as_str()).collect();
    let keep_chains: HashSet<String> = valid
        .iter()
        .map(|a| dnat_chain(network, &a.container_id))
        .collect();
    let mine = netfilter::iptables::comment_prefix(&format!("dnat name: {network:?} id: "));
    let mut failures = ErrorList::new();
    for proto in [Proto::V4, Proto::V6] {
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        failures.check(ipt.transact("nat", |saved: &Saved| {
            let mut stale: Vec<String> = saved
                .rules_in(TOP_DNAT)
                .filter(|r| r.contains(&mine))
                .filter_map(|r| r.rsplit_once(" -j ").map(|(_, t)| t.to_string()))
                .filter(|t| t.starts_with("CNI-DN-") && !keep_chains.contains(t))
                .collect();
            stale.sort();
            stale.dedup();
            let mut s = Script::new();
            for c in &stale {
                s.remove_chain(saved, c);
            }
            Ok(s)
        }));
    }
    // One nftables batch per family for every stale container.
    let stale: Vec<(String, String, Vec<String>)> = attachment::list(OWNERS, network)
        .into_iter()
        .filter(|(cid, _, _)| !keep_ids.contains(cid.as_str()))
        .collect();
    let cids: HashSet<&str> = stale.iter().map(|(cid, _, _)| cid.as_str()).collect();
    if !cids.is_empty() && failures.check(nft_remove(&cids)).is_some() {
        for (cid, ifname, _) in &stale {
            attachment::forget(OWNERS, network, cid, ifname);
        }
    }
    failures.into_result()
}
