//! Apply an IPAM result to an interface inside a container namespace: addresses, link up,
//! routes — upstream's `pkg/ipam.ConfigureIface`, shared by the applets that make a container
//! interface (bridge, vlan, macvlan, ipvlan, ptp, host-device, dummy, tap); and the IPAM ADD
//! they all start with. IPv6 addresses go through the shared settling step (`settle.rs`)
//! before the routes are added.
//!
//! As upstream: IPv6 is enabled on the interface (and `lo`) when it gets an IPv6 address, with
//! `keep_addr_on_down=1`; a route without `gw` uses the gateway of the interface's address of
//! the same family; routes to the same destination and table become one multipath route; route
//! `table`, `scope` and `priority` are applied, `mtu`/`advmss` are not (upstream does not).

use crate::applets::shared::settle::{Dad, Settle};
use crate::cni::result::CniResult;
use crate::cni::{Request, delegate};
use crate::error::{Context, Error, Result};
use crate::netlink::{self, Family, Handle, Link, NextHop};
use crate::netns::NetNs;
use crate::sysctl;
use crate::undo::Undo;

/// A result whose one interface is the container's `link` (CNI_IFNAME in CNI_NETNS): every
/// address points at it; the interface is returned for what else a plugin reports (MTU).
pub fn sole_interface<'r>(
    result: &'r mut CniResult,
    req: &Request,
    link: &Link,
) -> &'r mut crate::cni::result::Interface {
    for ip in &mut result.ips {
        ip.interface = Some(0);
    }
    result.interfaces = vec![crate::cni::result::Interface {
        name: req.env.ifname.clone(),
        mac: link.mac.map(|m| netlink::fmt_mac(&m)).unwrap_or_default(),
        sandbox: req.env.netns.clone(),
        ..Default::default()
    }];
    &mut result.interfaces[0]
}

/// IPAM ADD for a plugin that makes a container interface: the result, with the IPAM's DEL
/// pushed onto `undo`; as upstream, a result without an address is an error.
pub fn ipam_add<'a>(ipam: &'a str, req: &'a Request, undo: &mut Undo<'a>) -> Result<CniResult> {
    let r = delegate::add(ipam, req)?;
    undo.push(format!("IPAM {ipam}"), move || delegate::del(ipam, req));
    if r.ips.is_empty() {
        return Err(Error::internal(format!(
            "IPAM plugin {ipam:?} returned missing IP config"
        )));
    }
    Ok(r)
}

/// `result` (IPAM's, the chain's, or empty for an L2 link) made about `link` alone
/// ([`sole_interface`]) and applied to it ([`configure`]: with no address, just set up); the
/// end of a container link's ADD (`link::configure`).
pub fn apply(
    req: &Request,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    mut result: CniResult,
    dad: Dad,
) -> Result<CniResult> {
    sole_interface(&mut result, req, link);
    configure(ns, cont, &req.env.ifname, link.index, &result, 0, dad)?;
    Ok(result)
}

/// The result's IPs for `ifname`, at `if_pos` in its interfaces, as upstream's ConfigureIface
/// takes them: one without `interface` is skipped, one whose `interface` is not `if_pos` or
/// names another interface is an error (callers point every address at their interface; ptp
/// lists its interfaces only afterwards).
fn own_ips<'r>(
    result: &'r CniResult,
    ifname: &str,
    if_pos: usize,
) -> Result<Vec<&'r crate::cni::result::IpConfig>> {
    let mut own = Vec::new();
    for ip in &result.ips {
        let Some(i) = ip.interface else { continue };
        if i != if_pos || result.interfaces.get(i).is_some_and(|f| f.name != ifname) {
            return Err(Error::internal(format!(
                "failed to add IP addr {} to {ifname:?}: invalid interface index {i}",
                ip.address
            )));
        }
        own.push(ip);
    }
    Ok(own)
}

/// Configure `ifname` (index `index` in `ns`) with the result's IPs whose `interface` points at
/// `if_pos` (any other index is an error, see [`own_ips`]), set it up, settle its IPv6 addresses as `dad` says (the
/// shared step of [`crate::applets::shared::settle`]: usable when this returns, a duplicate is an
/// error) and add the routes.
pub fn configure(
    ns: &NetNs,
    h: &mut Handle,
    ifname: &str,
    index: u32,
    result: &CniResult,
    if_pos: usize,
    dad: Dad,
) -> Result<()> {
    let ips = own_ips(result, ifname, if_pos)?;
    let v6 = ips.iter().any(|ip| ip.address.addr().is_ipv6());
    if v6 {
        enable_ipv6(ns, ifname)?;
    }
    // Only an IPv6 address needs settling: an IPv4-only ADD opens nothing more.
    let settle = if v6 {
        Some(Settle::begin(ns, ifname, index, dad)?)
    } else {
        None
    };
    add_addresses(h, ifname, index, &ips, settle.as_ref())?;
    h.set_up(index, true)
        .ctx(format_args!("failed to set {ifname} up"))?;
    // As upstream, routes are added once the addresses are usable.
    if let Some(s) = settle {
        let addrs: Vec<_> = ips.iter().map(|ip| ip.address).collect();
        s.wait(h, &addrs)?;
    }
    add_routes(h, ifname, &group_routes(result, &ips, index))
}

/// As upstream, IPv6 on for `ifname` and `lo` in `ns`, with the addresses kept on link down.
fn enable_ipv6(ns: &NetNs, ifname: &str) -> Result<()> {
    ns.enter(|| -> Result<()> {
        for dev in ["lo", ifname] {
            // A kernel booted with ipv6.disable=1 has no such keys; adding the address
            // will then fail with a clearer error.
            let _ = sysctl::set(&sysctl::iface("net/ipv6/conf", dev, "disable_ipv6"), "0");
        }
        let _ = sysctl::set(
            &sysctl::iface("net/ipv6/conf", ifname, "keep_addr_on_down"),
            "1",
        );
        Ok(())
    })?
}

/// The addresses onto `ifname`, an IPv6 one with the flags `settle` asks for.
fn add_addresses(
    h: &mut Handle,
    ifname: &str,
    index: u32,
    ips: &[&crate::cni::result::IpConfig],
    settle: Option<&Settle>,
) -> Result<()> {
    for ip in ips {
        let flags = match settle {
            Some(s) if ip.address.addr().is_ipv6() => s.addr_flags(),
            _ => 0,
        };
        h.add_addr(index, ip.address, flags).ctx(format_args!(
            "failed to add IP address {} to {ifname}",
            ip.address
        ))?;
    }
    Ok(())
}

/// The result's routes out of interface `index`: a route without `gw` takes the gateway of the
/// interface's first address of its family; routes with the same destination and table become
/// one multipath route (ECMP).
fn group_routes(
    result: &CniResult,
    ips: &[&crate::cni::result::IpConfig],
    index: u32,
) -> Vec<netlink::Route> {
    let gw_for = |v4: bool| {
        ips.iter()
            .find(|ip| ip.address.addr().is_ipv4() == v4)
            .and_then(|ip| ip.gateway)
    };
    let mut routes: Vec<netlink::Route> = Vec::new();
    for r in &result.routes {
        let gw = r.gw.or_else(|| gw_for(r.dst.addr().is_ipv4()));
        let table = r.table.unwrap_or(0);
        if let Some(existing) = routes
            .iter_mut()
            .find(|x| x.dst == r.dst && x.table == table && gw.is_some())
        {
            if existing.multipath.is_empty() {
                existing.multipath.push(NextHop {
                    gw: existing.gw.take(),
                    oif: index,
                });
                existing.oif = None;
            }
            existing.multipath.push(NextHop { gw, oif: index });
            continue;
        }
        routes.push(netlink::Route {
            dst: r.dst,
            gw,
            oif: Some(index),
            table,
            scope: r.scope.unwrap_or(if gw.is_none() {
                netlink::SCOPE_LINK
            } else {
                netlink::SCOPE_UNIVERSE
            }),
            metric: r.priority,
            ..Default::default()
        });
    }
    routes
}

/// The routes added via `ifname`; one already there is left as it is.
fn add_routes(h: &mut Handle, ifname: &str, routes: &[netlink::Route]) -> Result<()> {
    for r in routes {
        match h.route_add(r) {
            Ok(()) => {}
            // The route is already there (typically the default route of a first network when
            // a second one is attached): the first one wins, as upstream.
            Err(e) if e.is_exists() => {}
            Err(e) => {
                let via = r.gw.map(|g| format!(" via {g}")).unwrap_or_default();
                return Err(Error::from(e).ctx(format_args!(
                    "failed to add route '{}'{via} dev {ifname}",
                    r.dst
                )));
            }
        }
    }
    Ok(())
}

/// CHECK: every address of prevResult meant for this interface is on it; every route is present.
pub fn check(h: &mut Handle, link: &Link, prev: &CniResult, pos: usize) -> Result<()> {
    let have = h.addrs(Some(link.index), Family::All)?;
    for ip in prev
        .ips
        .iter()
        .filter(|ip| ip.interface.is_none_or(|i| i == pos))
    {
        if !have.iter().any(|a| a.net == ip.address) {
            return Err(Error::internal(format!(
                "address {} not found on {:?}",
                ip.address, link.name
            )));
        }
    }
    if prev.routes.is_empty() {
        return Ok(());
    }
    let routes = h.routes(Family::All, None)?;
    for r in &prev.routes {
        let table = r.table.unwrap_or(netlink::TABLE_MAIN);
        let found = routes.iter().any(|x| {
            x.dst == r.dst
                && (x.table == table || (x.table == 0 && table == netlink::TABLE_MAIN))
                && (r.gw.is_none() || x.gw == r.gw || x.multipath.iter().any(|n| n.gw == r.gw))
        });
        if !found {
            return Err(Error::internal(format!(
                "route to {} not found in the container",
                r.dst
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::own_ips;
    use crate::cni::result::{CniResult, Interface, IpConfig};

    fn result(indexes: &[Option<usize>]) -> CniResult {
        let iface = |name: &str| Interface {
            name: name.into(),
            ..Default::default()
        };
        CniResult {
            interfaces: vec![iface("br0"), iface("veth1"), iface("eth0")],
            ips: indexes
                .iter()
                .enumerate()
                .map(|(n, i)| IpConfig {
                    version: None,
                    interface: *i,
                    address: format!("10.0.0.{}/24", n + 2).parse().unwrap(),
                    gateway: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// As upstream's ConfigureIface: an index of another interface, out of range, or of an
    /// interface of another name is an error naming the address; no index is skipped.
    #[test]
    fn an_ip_of_another_interface_is_an_error() {
        let r = result(&[Some(2), None, Some(2)]);
        let own = own_ips(&r, "eth0", 2).unwrap();
        assert_eq!(own.len(), 2);
        assert_eq!(own[1].address.to_string(), "10.0.0.4/24");
        for (idx, pos, name) in [(1, 2, "eth0"), (7, 2, "eth0"), (2, 2, "net1")] {
            let r = result(&[None, Some(idx)]);
            let e = own_ips(&r, name, pos).unwrap_err().to_string();
            assert!(
                e.contains("10.0.0.3/24") && e.contains("invalid interface index"),
                "{e}"
            );
        }
    }
}
