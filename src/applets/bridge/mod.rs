//! bridge: a Linux bridge on the host, a veth pair per container, IPAM by delegation.
//!
//! Mirrors upstream `plugins/main/bridge` (v1.9): same keys and defaults, the same ADD order,
//! result interfaces `[bridge, host veth, container veth]` with ips pointing at index 2, host
//! veth named `veth` + 8 hex, gateway address on the bridge, forwarding sysctls. Deviations:
//! CHECK works for L2-only networks (upstream's fails with "no plugin name provided"), DEL
//! tears down ipMasq rules even when CNI_NETNS is empty (upstream leaks them), GC is forwarded
//! to IPAM and collects ipMasq rules, and a failed ADD undoes everything it did.

mod chain;
mod check;
mod gateway;
mod port;
mod spoofcheck;

use check::check;
use gateway::{prepare_gateways, setup_gateway};
use port::{setup_port_vlans, wait_oper_up, wait_port_forwarding};

use super::shared::veth::create_veth;
use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
use crate::cni::Request;
use crate::cni::env::validate_config_ifname;
use crate::cni::result::{CniResult, Interface};
use crate::cni::{Applet, Command, Context, Error, Result, Version, delegate};
use crate::netfilter::masq;
use crate::netlink::monitor::RTNLGRP_LINK;
use crate::netlink::{self, Handle, Link, Monitor, PortOpts, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::undo::{ErrorList, Undo};
use crate::{overlap, sysctl};
use ipnet::IpNet;
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "bridge",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize)]
struct TrunkRange {
    #[serde(default)]
    id: Option<i32>,
    #[serde(default, rename = "minID")]
    min_id: Option<i32>,
    #[serde(default, rename = "maxID")]
    max_id: Option<i32>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Conf {
    #[serde(default)]
    bridge: String,
    #[serde(default)]
    is_gateway: bool,
    #[serde(default)]
    is_default_gateway: bool,
    #[serde(default)]
    force_address: bool,
    #[serde(default)]
    ip_masq: bool,
    #[serde(default)]
    ip_masq_backend: Option<String>,
    #[serde(default)]
    mtu: Option<u32>,
    #[serde(default)]
    hairpin_mode: bool,
    #[serde(default)]
    promisc_mode: bool,
    #[serde(default)]
    vlan: i32,
    /// `[]` (or entries that name no VLAN) still turns VLAN filtering on, as upstream.
    #[serde(default)]
    vlan_trunk: Option<Vec<TrunkRange>>,
    #[serde(default)]
    preserve_default_vlan: bool,
    #[serde(default, rename = "enabledad")]
    enable_dad: bool,
    #[serde(default)]
    macspoofchk: bool,
    #[serde(default)]
    disable_container_interface: bool,
    #[serde(default)]
    port_isolation: bool,
}

/// The config with defaults applied and validated.
struct Bridge {
    c: Conf,
    trunk: Vec<u16>,
}

fn load(req: &Request) -> Result<Bridge> {
    let mut c: Conf = req.decode()?;
    if c.bridge.is_empty() {
        c.bridge = "cni0".into();
    }
    // The name reaches netlink, sysctl paths (/proc/sys/net/.../<bridge>/...) and rules.
    validate_config_ifname("bridge", &c.bridge)?;
    if c.ip_masq {
        crate::netfilter::Backend::parse("ipMasqBackend", c.ip_masq_backend.as_deref())?;
    }
    // The kernel's bounds for a veth or bridge (ETH_MIN_MTU … IP_MAX_MTU), checked here so a bad
    // value is a config error naming the key rather than a netlink EINVAL half-way through.
    if let Some(m) = c.mtu.filter(|m| *m != 0 && !(68..=65535).contains(m)) {
        return Err(Error::config(format!("mtu {m} is out of range (68-65535)")));
    }
    if c.is_default_gateway {
        c.is_gateway = true;
    }
    if !(0..=4094).contains(&c.vlan) {
        return Err(Error::config(format!(
            "invalid VLAN ID {} (must be between 0 and 4094)",
            c.vlan
        )));
    }
    // As upstream: an entry's range and its `id` both count, `{}` counts nothing; the VLANs
    // in order, each once.
    let mut seen = [false; 4095];
    for t in c.vlan_trunk.iter().flatten() {
        let range = match (t.min_id, t.max_id) {
            (Some(lo), Some(hi)) => Some((lo, hi)),
            (None, None) => None,
            _ => {
                return Err(Error::config(
                    "vlanTrunk: minID and maxID must be given together",
                ));
            }
        };
        for (lo, hi) in range.into_iter().chain(t.id.map(|id| (id, id))) {
            if !(1..=4094).contains(&lo) || !(1..=4094).contains(&hi) || lo > hi {
                return Err(Error::config(format!(
                    "vlanTrunk: invalid VLANs {lo}-{hi} (within 1-4094, minID at most maxID)"
                )));
            }
            for v in lo..=hi {
                seen[v as usize] = true;
            }
        }
    }
    let trunk: Vec<u16> = (1..4095u16).filter(|&v| seen[v as usize]).collect();
    if c.disable_container_interface && req.ipam_type().is_some() {
        return Err(Error::config(
            "cannot use IPAM when disableContainerInterface flag is set",
        ));
    }
    if c.hairpin_mode && c.promisc_mode {
        return Err(Error::config(
            "cannot set hairpin mode and promiscuous mode at the same time",
        ));
    }
    Ok(Bridge { c, trunk })
}

/// `runtimeConfig.mac` > `args.cni.mac` > CNI_ARGS `MAC`: the first non-empty one, as upstream
/// (an empty one falls through); a non-string is refused (code 6), as Go's decoder does.
fn requested_mac(req: &Request) -> Result<Option<[u8; 6]>> {
    let nonempty = |s: &&str| !s.is_empty();
    let runtime = req.runtime_config_str("mac")?.filter(nonempty);
    let args = req.args_cni_str("mac")?.filter(nonempty);
    let text = match runtime.or(args) {
        Some(s) => Some(s.to_string()),
        None => req.env.cni_args(&["MAC"])?.get("MAC").map(str::to_string),
    };
    text.filter(|s| !s.is_empty())
        .map(|s| parse_mac(&s))
        .transpose()
}

fn iface_of(l: &Link, sandbox: &str) -> Interface {
    Interface {
        name: l.name.clone(),
        mac: l.mac.map(|m| fmt_mac(&m)).unwrap_or_default(),
        sandbox: sandbox.into(),
        ..Default::default()
    }
}

/// Create the bridge if it is missing (tolerating a concurrent creator), else check it is one.
fn ensure_bridge(h: &mut Handle, b: &Bridge) -> Result<Link> {
    let name = &b.c.bridge;
    let vlan_filtering = b.c.vlan != 0 || b.c.vlan_trunk.is_some();
    let br = match h.link_by_name(name)? {
        Some(l) => l,
        None => {
            match h.add_bridge(name, b.c.mtu, vlan_filtering) {
                Err(e) if !e.is_exists() => {
                    return Err(Error::from(e).ctx(format_args!("could not add {name:?}")));
                }
                _ => {}
            }
            h.link(name)?
        }
    };
    if br.kind.as_deref() != Some("bridge") {
        return Err(Error::config(format!(
            "{name:?} already exists but is not a bridge"
        )));
    }
    if b.c.promisc_mode && !br.promisc {
        h.set_promisc(br.index, true)
            .ctx(format_args!("could not set promiscuous mode on {name:?}"))?;
    }
    // Bridges must not autoconfigure from router advertisements of their ports. Written only
    // when not already so (a `/proc/sys` open per ADD grows with the node: netlink/devconf.rs).
    if br.ipv6_accept_ra != Some(0) {
        let _ = sysctl::set(&sysctl::iface("net/ipv6/conf", name, "accept_ra"), "0");
    }
    if !br.up {
        h.set_up(br.index, true)
            .ctx(format_args!("could not set {name:?} up"))?;
    }
    Ok(br)
}

fn add(req: &Request) -> Result<CniResult> {
    let b = load(req)?;
    if req.version.is_legacy() && req.ipam_type().is_none() {
        // Checked up front: the 0.1/0.2 result cannot express an L2-only attachment, and
        // failing after the veth exists would leave it behind.
        return Err(Error::internal("cannot convert: no valid IP addresses"));
    }
    if let Some(prev) = req.prev_result()?
        && let Some(in_container) = chain::attach_target(req, &prev)?
    {
        return chain::add(req, &b, prev, in_container);
    }
    let mac = requested_mac(req)?;
    // Before the bridge: a CNI_NETNS that is no namespace must not leave a new bridge behind.
    let ns = req.netns()?;
    let mut host = Handle::new()?;
    let br = ensure_bridge(&mut host, &b)?;
    let mut cont = Handle::in_netns(&ns)?;
    let ifname = &req.env.ifname;
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::config(format!(
            "container veth name {ifname:?} already exists"
        )));
    }
    let host_ns = NetNs::current()?;
    let mut undo = Undo::new("bridge");
    let r = add_steps(
        req, &b, &br, &ns, &mut host, &mut cont, mac, &host_ns, &mut undo,
    );
    undo.finish(r)
}

/// ADD once the bridge exists: every change to the host or the container registers its undo.
#[allow(clippy::too_many_arguments)]
fn add_steps<'a>(
    req: &'a Request,
    b: &Bridge,
    br: &Link,
    ns: &'a NetNs,
    host: &mut Handle,
    cont: &mut Handle,
    mac: Option<[u8; 6]>,
    host_ns: &NetNs,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let ifname = &req.env.ifname;
    let (network, cid) = (&req.conf.name, &req.env.container_id);
    let host_name = create_veth(cont, ifname, b.c.mtu, mac, host_ns)?;
    undo.push(format_args!("veth {ifname}").to_string(), move || {
        Handle::in_netns(ns)?.del_link_by_name(ifname)?;
        Ok(())
    });
    let hv = host.link(&host_name)?;
    let _ = sysctl::set(
        &sysctl::iface("net/ipv6/conf", &host_name, "accept_ra"),
        "0",
    );
    host.set_master(hv.index, Some(br.index)).ctx(format_args!(
        "failed to connect {host_name:?} to bridge {}",
        b.c.bridge
    ))?;
    host.set_up(hv.index, true)
        .ctx(format_args!("failed to set {host_name:?} up"))?;
    if b.c.hairpin_mode || b.c.port_isolation {
        let opts = PortOpts {
            hairpin: b.c.hairpin_mode.then_some(true),
            isolated: b.c.port_isolation.then_some(true),
            ..Default::default()
        };
        host.set_bridge_port(hv.index, &opts)
            .ctx(format_args!("failed to set port options on {host_name:?}"))?;
    }
    setup_port_vlans(host, hv.index, b)
        .ctx(format_args!("failed to set VLANs on {host_name:?}"))?;
    let cv = cont.link(ifname)?;

    let mut result = CniResult {
        interfaces: vec![
            iface_of(br, ""),
            iface_of(&hv, ""),
            iface_of(&cv, &req.env.netns),
        ],
        ..Default::default()
    };
    if b.c.macspoofchk {
        let mac = cv
            .mac
            .ok_or_else(|| Error::internal(format!("{ifname:?} has no MAC address")))?;
        undo.push("macspoofchk", move || spoofcheck::teardown(cid, ifname));
        spoofcheck::setup(&host_name, cid, ifname, mac).ctx("failed to set up macspoofchk")?;
    }
    if let Some(name) = req.ipam_type() {
        let r = iface::ipam_add(name, req, undo)?;
        result.ips = r.ips;
        result.routes = r.routes;
        result.dns = r.dns;
        prepare_gateways(b, &mut result)?;
    }
    if let Some(dns) = req.dns_override() {
        result.dns = dns;
    }

    // The host side (gateway, ipMasq) and the links' final state before the container
    // interface comes up: its IPv6 then starts (DAD,) router solicitation and MLD, which the
    // kernel sends from a worker holding the RTNL lock and the bridge floods to every port.
    // That work grows with the containers on the bridge and delays every RTNL request made
    // after it, so as few as possible follow: the routes and one look at the host veth.
    // The bridge takes the lowest port MAC unless pinned (the gateway step pins it and reads
    // the bridge then); the container end's MAC and MTU do not change when it comes up.
    let (br_now, vlan_gateway) = if b.c.is_gateway {
        setup_gateway(host, b, br, &result)?
    } else {
        (host.link(&b.c.bridge)?, None)
    };
    if b.c.ip_masq {
        let nets: Vec<IpNet> = result.ips.iter().map(|ip| ip.address).collect();
        undo.push("ipMasq", move || masq::teardown(network, cid, ifname));
        masq::setup(
            b.c.ip_masq_backend.as_deref(),
            &req.conf.name,
            &req.env.container_id,
            ifname,
            &nets,
        )
        .ctx("failed to set up IP masquerading")?;
    }
    ns.enter(|| {
        let v6 = format!("net/ipv6/conf/{ifname}");
        let _ = sysctl::set(
            &format!("{v6}/accept_dad"),
            if b.c.enable_dad { "1" } else { "0" },
        );
        if b.c.enable_dad {
            let _ = sysctl::set(&format!("{v6}/enhanced_dad"), "1");
        }
    })?;
    // Over netlink, not `/proc/sys` (netlink/devconf.rs); best effort, as upstream.
    let _ = cont.set_arp_notify(cv.index);
    if result.ips.is_empty() {
        if !b.c.disable_container_interface {
            cont.set_up(cv.index, true)
                .ctx(format_args!("failed to set {ifname:?} up"))?;
        }
    } else {
        // As upstream, DAD only runs with `enabledad`; without it the addresses get
        // IFA_F_NODAD as well as `accept_dad=0`, so they are usable at once even before the
        // veth has its carrier. With it, the shared step waits for detection.
        let dad = if b.c.enable_dad {
            Dad::Detect
        } else {
            Dad::Off
        };
        let v6 = result.ips.iter().any(|ip| ip.address.addr().is_ipv6());
        if dad == Dad::Detect && v6 {
            // Detection's probe must find the bridge port forwarding (wait_port_forwarding):
            // the container end comes up first, its addresses once the port forwards.
            let mut monitor =
                Monitor::in_netns(host_ns, &[RTNLGRP_LINK]).ctx("failed to watch link changes")?;
            cont.set_up(cv.index, true)
                .ctx(format_args!("failed to set {ifname:?} up"))?;
            wait_port_forwarding(host, &mut monitor, hv.index, &host_name)?;
        }
        iface::configure(ns, cont, ifname, cv.index, &result, 2, dad)?;
    }
    let hv_now = if b.c.disable_container_interface {
        host.link(&host_name)?
    } else {
        wait_oper_up(host, hv.index, &host_name)?
    };
    for (i, link) in [br_now, hv_now, cv].iter().enumerate() {
        result.interfaces[i].mac = link.mac.map(|m| fmt_mac(&m)).unwrap_or_default();
        // 1.1.0 results carry the MTU of each interface when one was configured.
        if b.c.mtu.is_some() {
            result.interfaces[i].mtu = Some(link.mtu);
        }
    }
    // With `vlan` the gateway addresses live on `<bridge>.<vlan>`, which belongs in the result
    // as upstream reports it (after the container's interface, so IP indexes stay).
    if let Some(l) = vlan_gateway {
        let l = host.link_by_index(l.index)?.unwrap_or(l);
        result.interfaces.push(iface_of(&l, ""));
    }
    // Chained after another plugin (CONVENTIONS.md): what it reported stays, ours follows.
    if let Some(prev) = req.prev_result()? {
        result = chain_after(prev, result);
    }
    Ok(result)
}

/// `prev`'s interfaces, IPs and routes followed by `ours`, whose interface indexes move past
/// `prev`'s; our DNS unless we have none.
fn chain_after(prev: CniResult, mut ours: CniResult) -> CniResult {
    let off = prev.interfaces.len();
    for ip in &mut ours.ips {
        ip.interface = ip.interface.map(|i| i + off);
    }
    let mut out = prev;
    out.interfaces.append(&mut ours.interfaces);
    out.ips.append(&mut ours.ips);
    out.routes.append(&mut ours.routes);
    if !ours.dns.is_empty() {
        out.dns = ours.dns;
    }
    out
}

fn del(req: &Request) -> Result<()> {
    let b = load(req)?;
    // Deleting the veth waits in the kernel for an RCU grace period (10-30 ms): with ipMasq it
    // runs on a thread of its own while the masquerading rules go here, so that their grace
    // periods (nftables' deferred destruction, iptables-restore's exit) overlap it.
    let veth = del_veth(req, &b)?;
    let masq = if b.c.ip_masq {
        // Found by name, so an empty CNI_NETNS does not leak rules; prevResult's addresses
        // let it delete the exact rules without reading the whole table.
        let ips = req.prev_addresses();
        masq::teardown_with(&req.conf.name, &req.env.container_id, &req.env.ifname, &ips)
    } else {
        Ok(())
    };
    if let Some(p) = veth {
        match p.wait() {
            Some(Err(e)) if !e.is_not_found() => {
                return Err(
                    Error::from(e).ctx(format_args!("failed to delete {:?}", req.env.ifname))
                );
            }
            None => return Err(Error::internal("veth deletion did not run")),
            _ => {}
        }
    }
    masq?;
    // The address is released once the veth holding it is gone.
    if let Some(name) = req.ipam_type() {
        delegate::del(name, req)?;
    }
    if b.c.macspoofchk {
        // As upstream: a leftover anti-spoofing rule must not fail the DEL.
        if let Err(e) = spoofcheck::teardown(&req.env.container_id, &req.env.ifname) {
            crate::warn!("bridge: macspoofchk teardown: {e}");
        }
    }
    Ok(())
}

/// DEL's container side: the veth ADD made, deleted on a thread ([`overlap`]); a link the
/// chained mode attached is detached here instead, never deleted (an unreadable prevResult
/// must not block DEL; without one, a container link on a bridge or not a veth is not ours).
fn del_veth(req: &Request, b: &Bridge) -> Result<Option<overlap::Pending<netlink::Result<()>>>> {
    let chained = req.prev_result().ok().flatten();
    if let Some(in_container) = chained.and_then(|p| chain::attached_in(&p, b, &req.env.ifname)) {
        chain::detach(req, b, in_container)?;
        return Ok(None);
    }
    let Some(ns) = req.netns_if_exists()? else {
        return Ok(None);
    };
    let mut h = Handle::in_netns(&ns)?;
    let Some(l) = h.link_by_name(&req.env.ifname)? else {
        return Ok(None);
    };
    if l.master.is_some() || l.kind.as_deref() != Some("veth") {
        crate::warn!(
            "bridge: {} in {} was not made by bridge: left in place",
            l.name,
            req.env.netns
        );
        if l.master.is_some() {
            chain::detach(req, b, true)?;
        }
        return Ok(None);
    }
    // Without masquerading there is nothing to overlap the deletion with.
    let job = move || h.del_link_unlisted(l.index);
    Ok(Some(if b.c.ip_masq {
        overlap::spawn(job)
    } else {
        overlap::here(job)
    }))
}

fn status(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    let b = load(req)?;
    let mut errors = ErrorList::new();
    errors.check(delegate::to_ipam(Command::Gc, req));
    if let (true, Some(valid)) = (b.c.ip_masq, req.valid_attachments()) {
        errors.check(masq::gc(&req.conf.name, valid));
    }
    errors.into_result()
}
