//! `ptp` (upstream `plugins/main/ptp`): a veth pair whose container end gets the IPAM
//! addresses and whose host end routes to them — no bridge.
//!
//! As upstream, the container reaches everything through the gateway: its address keeps the
//! IPAM prefix, but the kernel's subnet route is replaced by `gw/32 dev eth0 scope link` and
//! `subnet via gw`, so even neighbours in the subnet are reached through the host. The host end
//! (`veth<8 hex>`) carries each gateway as a /32 (/128) and a host route to each container
//! address. Keys: `mtu`, `ipMasq`, `ipMasqBackend`, `ipam` (required), `dns` (overrides the
//! IPAM's when set). Forwarding is turned on for the families in use.
//!
//! Beyond upstream: the container's IPv6 addresses are added without duplicate address
//! detection (the veth's only other end is ours), so an IPv6 ADD does not wait 1-2 s for it
//! (settle.rs); an IPAM result whose gateway is of the other family, or is the address itself,
//! is an error; a failed ADD removes the veth and masquerading it made (upstream only
//! releases the addresses); DEL removes the masquerading even without CNI_NETNS (upstream
//! needs the link's addresses to find it, so a DEL after the container is gone leaks it); GC
//! collects masquerading of attachments the runtime no longer lists, and the IPAM's.

use super::shared::veth::create_veth;
use crate::applets::shared::container::check_own_iface;
use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
use crate::cni::result::Interface;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netfilter::masq;
use crate::netlink::{Handle, IFA_F_NODAD, Route, SCOPE_HOST, SCOPE_LINK, fmt_mac};
use crate::netns::NetNs;
use crate::sysctl;
use crate::undo::{ErrorList, Undo};
use ipnet::IpNet;
use serde::Deserialize;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "ptp",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize, Default)]
struct Conf {
    #[serde(rename = "ipMasq", default)]
    ip_masq: bool,
    #[serde(rename = "ipMasqBackend", default)]
    ip_masq_backend: Option<String>,
    #[serde(default)]
    mtu: i64,
}

struct Ptp<'a> {
    c: Conf,
    ipam: &'a str,
    mtu: Option<u32>,
}

fn load(req: &Request) -> Result<Ptp<'_>> {
    let c: Conf = req.decode()?;
    if c.ip_masq {
        crate::netfilter::Backend::parse("ipMasqBackend", c.ip_masq_backend.as_deref())?;
    }
    let mtu = match c.mtu {
        0 => None,
        m @ 68..=65535 => Some(m as u32),
        m => return Err(Error::config(format!("mtu {m} is out of range (68-65535)"))),
    };
    let ipam = req
        .ipam_type()
        .ok_or_else(|| Error::config("ptp: an \"ipam\" section with a \"type\" is required"))?;
    Ok(Ptp { c, ipam, mtu })
}

fn add(req: &Request) -> Result<CniResult> {
    let p = load(req)?;
    let ns = req.netns()?;
    let host_ns = NetNs::current()?;
    let mut undo = Undo::new("ptp");
    let r = add_steps(req, &p, &ns, &host_ns, &mut undo);
    undo.finish(r)
}

fn add_steps<'a>(
    req: &'a Request,
    p: &'a Ptp<'a>,
    ns: &'a NetNs,
    host_ns: &NetNs,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let ifname = &req.env.ifname;
    let mut result = iface::ipam_add(p.ipam, req, undo)?;
    let gateways = checked_gateways(p.ipam, &result)?;
    let mut host = Handle::new()?;
    enable_forwarding(&mut host, &result)?;

    let mut cont = Handle::in_netns(ns)?;
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::config(format!(
            "container veth name {ifname:?} already exists"
        )));
    }
    let host_name = create_veth(&mut cont, ifname, p.mtu, None, host_ns)?;
    undo.push(format!("veth {ifname}"), move || {
        Handle::in_netns(ns)?.del_link_by_name(ifname)?;
        Ok(())
    });
    let cv = cont.link(ifname)?;
    for ip in &mut result.ips {
        ip.interface = Some(1);
    }
    // No other node can hold the address: the veth's only other end is our host end (whose
    // addresses are the gateways). Without DAD the address is usable at once, so the routes
    // below can take it as their source (the kernel refuses a tentative source address).
    iface::configure(ns, &mut cont, ifname, cv.index, &result, 1, Dad::Off)?;
    route_through_gateways(&mut cont, ifname, cv.index, &result, &gateways)?;
    host_end(&mut host, &host_name, &result, &gateways)?;
    if p.c.ip_masq {
        let nets: Vec<IpNet> = result.ips.iter().map(|ip| ip.address).collect();
        let (network, cid) = (&req.conf.name, &req.env.container_id);
        undo.push("ipMasq", move || masq::teardown(network, cid, ifname));
        masq::setup(p.c.ip_masq_backend.as_deref(), network, cid, ifname, &nets)
            .ctx("failed to set up IP masquerading")?;
    }
    let cv = cont.link(ifname)?;
    let hv = host.link(&host_name)?;
    result.interfaces = vec![
        Interface {
            name: hv.name.clone(),
            mac: hv.mac.map(|m| fmt_mac(&m)).unwrap_or_default(),
            ..Default::default()
        },
        Interface {
            name: ifname.clone(),
            mac: cv.mac.map(|m| fmt_mac(&m)).unwrap_or_default(),
            sandbox: req.env.netns.clone(),
            ..Default::default()
        },
    ];
    if let Some(dns) = req.dns_override() {
        result.dns = dns;
    }
    Ok(result)
}

/// Each address's gateway, checked: ptp routes through it.
fn checked_gateways(ipam: &str, result: &CniResult) -> Result<Vec<IpAddr>> {
    result
        .ips
        .iter()
        .map(|ip| {
            let gw = ip.gateway.ok_or_else(|| {
                Error::internal(format!(
                    "IPAM plugin {:?} returned {} without a gateway (ptp routes through it)",
                    ipam, ip.address
                ))
            })?;
            // Whatever the IPAM plugin returns (a static address, a prevResult-like answer of
            // a third-party plugin), the gateway must be a host of the address's family other
            // than the address itself: it becomes a /32 (/128) on the host end.
            if gw.is_ipv4() != ip.address.addr().is_ipv4() {
                return Err(Error::internal(format!(
                    "IPAM plugin {:?} returned gateway {gw} for {}: not of the same address family",
                    ipam, ip.address
                )));
            }
            if gw == ip.address.addr() {
                return Err(Error::internal(format!(
                    "IPAM plugin {:?} returned {} with itself as gateway",
                    ipam, ip.address
                )));
            }
            Ok(gw)
        })
        .collect()
}

/// IP forwarding on for each family the result has addresses of.
fn enable_forwarding(host: &mut Handle, result: &CniResult) -> Result<()> {
    for v6 in [false, true] {
        if result
            .ips
            .iter()
            .any(|ip| ip.address.addr().is_ipv6() == v6)
        {
            sysctl::forwarding_on(host, v6).ctx("could not enable IP forwarding")?;
        }
    }
    Ok(())
}

/// Point-to-point through the gateway: drop the kernel's subnet route, reach the gateway on
/// the link, the subnet through the gateway.
fn route_through_gateways(
    cont: &mut Handle,
    ifname: &str,
    index: u32,
    result: &CniResult,
    gateways: &[IpAddr],
) -> Result<()> {
    for (ip, gw) in result.ips.iter().zip(gateways) {
        let subnet = ip.address.trunc();
        cont.route_del(&Route {
            dst: subnet,
            oif: Some(index),
            ..Default::default()
        })
        .ctx(format_args!("failed to delete route {subnet} dev {ifname}"))?;
        let gw_net = IpNet::from(*gw);
        for r in [
            Route {
                dst: gw_net,
                oif: Some(index),
                scope: SCOPE_LINK,
                src: Some(ip.address.addr()),
                ..Default::default()
            },
            Route {
                dst: subnet,
                gw: Some(*gw),
                oif: Some(index),
                src: Some(ip.address.addr()),
                ..Default::default()
            },
        ] {
            cont.route_add(&r).ctx(format_args!(
                "failed to add route {} in the container",
                r.dst
            ))?;
        }
    }
    Ok(())
}

/// The host end: each gateway as a host address, a host route to each container address.
fn host_end(
    host: &mut Handle,
    host_name: &str,
    result: &CniResult,
    gateways: &[IpAddr],
) -> Result<()> {
    let hv = host.link(host_name)?;
    // Bridges must not autoconfigure from router advertisements of their ports; neither
    // should this routed end.
    let _ = sysctl::set(&sysctl::iface("net/ipv6/conf", host_name, "accept_ra"), "0");
    host.set_up(hv.index, true)
        .ctx(format_args!("failed to set {host_name:?} up"))?;
    for (ip, gw) in result.ips.iter().zip(gateways) {
        let gw_net = IpNet::from(*gw);
        host.add_addr(hv.index, gw_net, IFA_F_NODAD)
            .ctx(format_args!("failed to add {gw_net} to {host_name:?}"))?;
        let dst = IpNet::from(ip.address.addr());
        match host.route_add(&Route {
            dst,
            oif: Some(hv.index),
            scope: SCOPE_HOST,
            ..Default::default()
        }) {
            Err(e) if !e.is_exists() => {
                return Err(Error::from(e).ctx(format_args!("failed to add route {dst} on host")));
            }
            _ => {}
        }
    }
    Ok(())
}

fn del(req: &Request) -> Result<()> {
    let p = load(req)?;
    // As upstream, the addresses go first and an IPAM failure fails the DEL.
    delegate::del(p.ipam, req)?;
    let mut errors = ErrorList::new();
    if p.c.ip_masq {
        // Found by name: no link or namespace needed; prevResult's addresses spare the
        // iptables backend reading the whole nat table.
        errors.check(masq::teardown_with(
            &req.conf.name,
            &req.env.container_id,
            &req.env.ifname,
            &req.prev_addresses(),
        ));
    }
    if let Some(ns) = req.netns_if_exists()?
        && let Err(e) = Handle::in_netns(&ns)?.del_link_by_name_unlisted(&req.env.ifname)
    {
        errors.push(Error::from(e).ctx(format_args!("failed to delete {:?}", req.env.ifname)));
    }
    errors.into_result()
}

fn check(req: &Request) -> Result<()> {
    let p = load(req)?;
    let own = check_own_iface(req, Some(p.ipam), "veth")?;
    own.check_addresses()
}

fn status(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    let p = load(req)?;
    let mut errors = ErrorList::new();
    errors.check(delegate::to_ipam(Command::Gc, req));
    if let (true, Some(valid)) = (p.c.ip_masq, req.valid_attachments()) {
        errors.check(masq::gc(&req.conf.name, valid));
    }
    errors.into_result()
}
