//! `ipvlan` (upstream `plugins/main/ipvlan`): an ipvlan link on a master interface, placed in
//! the container namespace.
//!
//! Keys: `master`, `mode` (`l2` default, `l3`, `l3s`), `mtu` (0 = inherit, at most the
//! master's), `linkInContainer`, `ipam`, `dns`. Without `master`: in a chain, the single named
//! interface of the prevResult (upstream's chained use, typically with `linkInContainer`);
//! otherwise the interface of the default route, on the host or in the container. Without
//! `ipam`, a prevResult's addresses are moved to the ipvlan link (upstream's chained use);
//! otherwise the IPAM plugin is required.
//!
//! ADD creates the link under a temporary name directly in the container namespace and renames
//! it, sets `arp_notify`/`ndisc_notify` and applies the addresses and routes. A failure removes
//! the link and releases the addresses. DEL releases the addresses, then deletes the link
//! (only when it is an ipvlan), and tolerates a missing namespace or link. CHECK compares kind,
//! mode, MAC, addresses and routes with the prevResult. STATUS and GC go to the IPAM plugin.
//!
//! This build machine's kernel has no ipvlan: the applet is tested in the qemu VM
//! (tests/vm/ipvlan.sh), against the Go plugin there.

use super::shared::container::rename_into_place;
use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
use crate::cni::env::validate_config_ifname;
use crate::cni::{Applet, CniResult, Command, Error, Request, Result, Version, delegate};
use crate::netlink::ipvlan::{IPVLAN_MODE_L2, IPVLAN_MODE_L3, IPVLAN_MODE_L3S};
use crate::netlink::{Family, Handle, Link};
use crate::netns::NetNs;
use crate::undo::Undo;
use crate::{random, sysctl};
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "ipvlan",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize, Default)]
struct Conf {
    #[serde(default)]
    master: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    mtu: i64,
    #[serde(rename = "linkInContainer", default)]
    link_in_container: bool,
}

struct Config<'a> {
    /// Empty: the default route's interface.
    master: String,
    mode: u16,
    mtu: u32,
    in_container: bool,
    ipam: Option<&'a str>,
}

const MODES: &[(&str, u16)] = &[
    ("l2", IPVLAN_MODE_L2),
    ("l3", IPVLAN_MODE_L3),
    ("l3s", IPVLAN_MODE_L3S),
];

fn load(req: &Request) -> Result<Config<'_>> {
    let c: Conf = req.decode()?;
    let mut master = c.master;
    if master.is_empty()
        && let Some(prev) = req.prev_result()?
    {
        // Chained: the one named interface of the previous result.
        match prev.interfaces.as_slice() {
            [i] if !i.name.is_empty() => master = i.name.clone(),
            _ => {
                return Err(Error::config(
                    "master: chained master failure. PrevResult lacks a single named interface",
                ));
            }
        }
    }
    if !master.is_empty() {
        validate_config_ifname("master", &master)?;
    }
    let mode = if c.mode.is_empty() {
        IPVLAN_MODE_L2
    } else {
        MODES
            .iter()
            .find(|(n, _)| *n == c.mode)
            .map(|(_, m)| *m)
            .ok_or_else(|| Error::config(format!("unknown ipvlan mode: {:?}", c.mode)))?
    };
    let mtu = u32::try_from(c.mtu)
        .map_err(|_| Error::config(format!("invalid MTU {}, must be [0, master MTU]", c.mtu)))?;
    Ok(Config {
        master,
        mode,
        mtu,
        in_container: c.link_in_container,
        ipam: req.ipam_type(),
    })
}

/// The master in `h`'s namespace: the configured one, or the default route's interface.
fn master(c: &Config, h: &mut Handle) -> Result<Link> {
    let where_ = if c.in_container {
        "in the container namespace"
    } else {
        "on the host"
    };
    let m = if c.master.is_empty() {
        let index = h
            .routes(Family::All, None)?
            .into_iter()
            .find(|r| r.dst.prefix_len() == 0 && r.oif.is_some())
            .and_then(|r| r.oif)
            .ok_or_else(|| {
                Error::config(format!(
                    "master: not set, and no default route interface found {where_}"
                ))
            })?;
        h.link_by_index(index)?
    } else {
        h.link_by_name(&c.master)?
    };
    let m = m.ok_or_else(|| {
        Error::internal(format!(
            "failed to lookup master {:?}: no such interface {where_}",
            c.master
        ))
    })?;
    if c.mtu > m.mtu {
        return Err(Error::config(format!(
            "invalid MTU {}, must be [0, master MTU({})]",
            c.mtu, m.mtu
        )));
    }
    Ok(m)
}

fn create(c: &Config, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let ifname = &req.env.ifname;
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::internal(format!(
            "container interface name provided ({ifname}) already exists"
        )));
    }
    let tmp = format!("veth{}", random::hex(8));
    let mtu = (c.mtu > 0).then_some(c.mtu);
    let created = if c.in_container {
        let m = master(c, cont)?;
        cont.add_ipvlan(&tmp, m.index, c.mode, mtu, None)
    } else {
        let mut host = Handle::new()?;
        let m = master(c, &mut host)?;
        host.add_ipvlan(&tmp, m.index, c.mode, mtu, Some(ns))
    };
    created.map_err(|e| Error::from(e).ctx("failed to create ipvlan"))?;
    rename_into_place(cont, "ipvlan", &tmp, ifname)
}

fn add(req: &Request) -> Result<CniResult> {
    let c = load(req)?;
    // Without IPAM the addresses come from the chain; check that before creating anything.
    let chained = match c.ipam {
        Some(_) => None,
        None => Some(
            req.prev_result()?
                .filter(|p| !p.ips.is_empty())
                .ok_or_else(|| {
                    Error::config(
                        "ipam: an \"ipam\" section with a \"type\" is required \
                         (or a prevResult with addresses)",
                    )
                })?,
        ),
    };
    let ns = NetNs::open(&req.env.netns).map_err(Error::from)?;
    let mut cont = Handle::in_netns(&ns)?;
    let link = create(&c, req, &ns, &mut cont)?;
    let mut undo = Undo::new("ipvlan");
    let (index, ns_ref) = (link.index, &ns);
    undo.push(format!("ipvlan {}", req.env.ifname), move || {
        Ok(Handle::in_netns(ns_ref)?.del_link(index)?)
    });
    let r = configure(req, &c, chained, &ns, &mut cont, &link, &mut undo);
    undo.finish(r)
}

fn configure<'a>(
    req: &'a Request,
    c: &Config<'a>,
    chained: Option<CniResult>,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let ifname = &req.env.ifname;
    let mut result = match (chained, c.ipam) {
        (Some(prev), _) => prev,
        (None, Some(ipam)) => iface::ipam_add(ipam, req, undo)?,
        (None, None) => unreachable!("checked in add"),
    };
    iface::sole_interface(&mut result, req, link);
    ns.enter(|| {
        let _ = sysctl::set(&sysctl::iface("net/ipv4/conf", ifname, "arp_notify"), "1");
        let _ = sysctl::set(&sysctl::iface("net/ipv6/conf", ifname, "ndisc_notify"), "1");
    })?;
    iface::configure(ns, cont, ifname, link.index, &result, 0, Dad::Detect)?;
    result.dns = req.conf.dns.clone().unwrap_or_default();
    Ok(result)
}

fn del(req: &Request) -> Result<()> {
    let _: Conf = req.decode()?;
    super::shared::container::delete_with_ipam(req, req.ipam_type(), "ipvlan", "ipvlan")
}

fn check(req: &Request) -> Result<()> {
    let c: Conf = req.decode()?;
    let (mut cont, prev, pos, link) =
        super::shared::container::check_own_iface(req, req.ipam_type(), "ipvlan")?;
    let mode = MODES
        .iter()
        .find(|(n, _)| *n == c.mode || (c.mode.is_empty() && *n == "l2"))
        .map(|(_, m)| *m);
    if mode.is_some() && link.ipvlan_mode != mode {
        let name = |m: Option<u16>| {
            MODES
                .iter()
                .find(|(_, v)| Some(*v) == m)
                .map_or("unknown", |(n, _)| n)
        };
        return Err(Error::internal(format!(
            "Error: Container ipvlan mode {} does not match expected value: {}",
            name(link.ipvlan_mode),
            name(mode)
        )));
    }
    iface::check(&mut cont, &link, &prev, pos)
}

fn status(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Gc, req)
}
