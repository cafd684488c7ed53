//! `loopback`: brings `lo` up in the container namespace (upstream `plugins/main/loopback`).
//!
//! No config keys. CNI_IFNAME is ignored: the applet always acts on `lo`.
//!
//! * ADD sets `lo` up and checks that every address on it is a loopback address. A `prevResult`
//!   is passed through unchanged; otherwise the result is one interface `lo` (MAC
//!   `00:00:00:00:00:00`, sandbox = CNI_NETNS) with the first IPv4 and first IPv6 address of
//!   `lo`. (For 0.1.0/0.2.0 a `lo` without addresses cannot be printed, as upstream.)
//! * DEL sets `lo` down; an empty or missing CNI_NETNS is success.
//! * CHECK fails unless `lo` is up.
//! * STATUS and GC have nothing to do.
//!
//! One deliberate difference: upstream builds a 1.0.0 result, labels it with the config's
//! version and prints it unconverted, so for 0.1.0–0.4.0 it emits `interfaces`/`ips` without
//! `ips[].version` (and no `ip4`/`ip6` for 0.1.0/0.2.0). cnibox prints the shape the spec
//! defines for the requested version, which is what a runtime of that version can parse.

use crate::cni::result::{Interface, IpConfig};
use crate::cni::{Applet, CniResult, Context, Error, Request, Result, Version};
use crate::netlink::{Addr, Family, Handle};

pub static APPLET: Applet = Applet {
    name: "loopback",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: None,
};

const LO: &str = "lo";

fn lo(h: &mut Handle) -> Result<crate::netlink::Link> {
    h.link_by_name(LO)?
        .ok_or_else(|| Error::internal("loopback interface lo not found"))
}

/// The first of `addrs`, after checking that all of them are loopback addresses.
fn first_loopback(addrs: &[Addr]) -> Result<Option<ipnet::IpNet>> {
    if let Some(bad) = addrs.iter().find(|a| !a.net.addr().is_loopback()) {
        return Err(Error::internal(format!(
            "loopback interface found with non-loopback address {:?}",
            bad.net.addr().to_string()
        )));
    }
    Ok(addrs.first().map(|a| a.net))
}

fn add(req: &Request) -> Result<CniResult> {
    // Parse prevResult before touching anything, so a bad one changes nothing.
    let prev = req.prev_result()?;
    let ns = req.netns()?;
    let mut h = Handle::in_netns(&ns)?;
    let link = lo(&mut h)?;
    h.set_up(link.index, true).ctx("failed to set lo up")?;
    let v4 = first_loopback(&h.addrs(Some(link.index), Family::V4)?)?;
    let v6 = first_loopback(&h.addrs(Some(link.index), Family::V6)?)?;
    if let Some(prev) = prev {
        return Ok(prev);
    }
    let ips = [v4, v6]
        .into_iter()
        .flatten()
        .map(|address| IpConfig {
            version: None,
            interface: Some(0),
            address,
            gateway: None,
        })
        .collect();
    Ok(CniResult {
        interfaces: vec![Interface {
            name: LO.into(),
            mac: "00:00:00:00:00:00".into(),
            sandbox: req.env.netns.clone(),
            ..Default::default()
        }],
        ips,
        ..Default::default()
    })
}

fn del(req: &Request) -> Result<()> {
    let Some(ns) = req.netns_if_exists()? else {
        return Ok(());
    };
    let mut h = Handle::in_netns(&ns)?;
    let link = lo(&mut h)?;
    h.set_up(link.index, false).ctx("failed to set lo down")?;
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let ns = req.netns()?;
    let mut h = Handle::in_netns(&ns)?;
    if !lo(&mut h)?.up {
        return Err(Error::internal("loopback interface is down"));
    }
    Ok(())
}
