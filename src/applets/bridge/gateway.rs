//! The gateway side of the bridge: gateway addresses from IPAM, the default route
//! (`isDefaultGateway`), addresses on the bridge or on `<bridge>.<vlan>`, forwarding sysctls.

use super::port::setup_port_vlans;
use super::{Bridge, Conf};
use crate::cni::result::{CniResult, Route};
use crate::cni::{Context, Error, Result};
use crate::netlink::{Family, Handle, Link};
use crate::{random, sysctl};
use ipnet::IpNet;
use std::net::IpAddr;

/// Fill in missing gateways (network + 1), point IPs at the container veth and add default
/// routes for isDefaultGateway, as upstream's calcGateways.
pub(super) fn prepare_gateways(b: &Bridge, result: &mut CniResult) -> Result<()> {
    for ip in &mut result.ips {
        ip.interface = Some(2);
        if b.c.is_gateway && ip.gateway.is_none() {
            ip.gateway = Some(next_ip(ip.address.network()));
        }
    }
    if !b.c.is_default_gateway {
        return Ok(());
    }
    for v4 in [true, false] {
        let Some(gw) = result
            .ips
            .iter()
            .find(|ip| ip.address.addr().is_ipv4() == v4)
            .and_then(|ip| ip.gateway)
        else {
            continue;
        };
        let default = if v4 {
            IpNet::V4(Default::default())
        } else {
            IpNet::V6(Default::default())
        };
        match result.routes.iter_mut().find(|r| r.dst == default) {
            // IPAM's own default route with a gateway wins, as upstream.
            Some(r) if r.gw.is_some() => {}
            Some(r) => r.gw = Some(gw),
            None => result.routes.push(Route::new(default, Some(gw))),
        }
    }
    Ok(())
}

pub(super) fn next_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4((u32::from(a).wrapping_add(1)).into()),
        IpAddr::V6(a) => IpAddr::V6((u128::from(a).wrapping_add(1)).into()),
    }
}

/// Put `gw/prefix` on the bridge (or on `<bridge>.<vlan>` with a VLAN), pin the bridge MAC and
/// enable forwarding for each family that has a gateway.
/// Returns the bridge as it is then (its MAC pinned) and, with a `vlan`, the `<bridge>.<vlan>`
/// link that holds the gateway addresses.
pub(super) fn setup_gateway(
    h: &mut Handle,
    b: &Bridge,
    br: &Link,
    result: &CniResult,
) -> Result<(Link, Option<Link>)> {
    let target = if b.c.vlan != 0 {
        vlan_gateway_link(h, b, br)?
    } else {
        br.clone()
    };
    let mut v4 = false;
    let mut v6 = false;
    for ip in &result.ips {
        let Some(gw) = ip.gateway else { continue };
        let net = IpNet::new(gw, ip.address.prefix_len()).map_err(|_| {
            Error::internal(format!(
                "gateway {gw} cannot take the prefix /{} of {}",
                ip.address.prefix_len(),
                ip.address
            ))
        })?;
        ensure_addr(h, &target, net, b.c.force_address)?;
        if gw.is_ipv4() { v4 = true } else { v6 = true }
    }
    // Without a fixed address the bridge MAC follows its ports and neighbours lose it. Read it
    // now that a port is attached: a bridge that lost its last port may have the zero address.
    let now = h.link(&b.c.bridge)?;
    if let Some(mac) = now.mac.filter(|m| *m != [0; 6]) {
        h.set_mac(br.index, mac)
            .ctx(format_args!("failed to pin the MAC of {:?}", br.name))?;
    }
    if v4 {
        sysctl::forwarding_on(h, false)?;
    }
    if v6 {
        sysctl::forwarding_on(h, true)?;
    }
    Ok((now, (b.c.vlan != 0).then_some(target)))
}

/// The `<bridge>.<vlan>` veth whose peer is an access port of that VLAN on the bridge.
pub(super) fn vlan_gateway_link(h: &mut Handle, b: &Bridge, br: &Link) -> Result<Link> {
    let name = format!("{}.{}", b.c.bridge, b.c.vlan);
    if let Some(l) = h.link_by_name(&name)? {
        return Ok(l);
    }
    let peer = format!("veth{}", random::hex(8));
    match h.add_veth(&name, &peer, b.c.mtu, None, None) {
        Err(e) if !e.is_exists() => {
            return Err(Error::from(e).ctx(format_args!("failed to create {name:?}")));
        }
        _ => {}
    }
    let p = h.link(&peer)?;
    h.set_master(p.index, Some(br.index))?;
    h.set_up(p.index, true)?;
    let vb = Bridge {
        c: Conf {
            vlan: b.c.vlan,
            preserve_default_vlan: b.c.preserve_default_vlan,
            ..Default::default()
        },
        trunk: Vec::new(),
    };
    setup_port_vlans(h, p.index, &vb)?;
    let l = h.link(&name)?;
    h.set_up(l.index, true)?;
    Ok(l)
}

/// Add `net` to `link` unless present; another address of the family is an error unless
/// forceAddress (IPv4: any other address; IPv6: an overlapping prefix), as upstream.
pub(super) fn ensure_addr(h: &mut Handle, link: &Link, net: IpNet, force: bool) -> Result<()> {
    let fam = if net.addr().is_ipv4() {
        Family::V4
    } else {
        Family::V6
    };
    for a in h.addrs(Some(link.index), fam)? {
        if a.net == net {
            return Ok(());
        }
        let clash = if net.addr().is_ipv4() {
            true
        } else {
            a.net.contains(&net.addr()) || net.contains(&a.net.addr())
        };
        if clash && !a.net.addr().is_ipv6()
            || clash && a.net.addr().is_ipv6() && !is_link_local(a.net.addr())
        {
            if !force {
                return Err(Error::config(format!(
                    "{:?} already has an IP address different from {net}",
                    link.name
                )));
            }
            h.del_addr(link.index, a.net).ctx(format_args!(
                "failed to remove IP address {} from {:?}",
                a.net, link.name
            ))?;
        }
    }
    match h.add_addr(link.index, net, 0) {
        // A concurrent ADD on the same new bridge got there first.
        Err(e) if e.is_exists() => Ok(()),
        r => r.ctx(format_args!(
            "could not add IP address {net} to {:?}",
            link.name
        )),
    }
}

pub(super) fn is_link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(a) if (a.segments()[0] & 0xffc0) == 0xfe80)
}
