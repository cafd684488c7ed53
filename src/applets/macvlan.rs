//! `macvlan` (upstream `plugins/main/macvlan`): a macvlan link on a master interface, placed in
//! the container namespace.
//!
//! Keys: `master` (default: the interface of the default route, looked up on the host or, with
//! `linkInContainer`, in the container), `mode` (`bridge` default, `private`, `vepa`,
//! `passthru`, `source`), `mtu` (0 = inherit, at most the master's), `mac` (also CNI_ARGS `MAC`
//! and `runtimeConfig.mac`, which wins), `bcqueuelen`, `linkInContainer`, `ipam` (optional:
//! without it the link is L2 only and just set up), `dns`.
//!
//! ADD creates the link under a temporary name (`veth` + 8 hex) directly in the container
//! namespace — a host interface called CNI_IFNAME cannot clash — and renames it; with IPAM, it
//! sets `arp_notify`/`ndisc_notify` and applies the addresses and routes. A failure removes
//! the link and releases the addresses. DEL releases the addresses, then deletes the link, and
//! tolerates a missing namespace or link. CHECK compares the link (kind, mode, MAC) and the
//! addresses and routes with the prevResult. STATUS and GC go to the IPAM plugin.
//!
//! Beyond upstream: every key (mode, MAC, MTU range, names) is checked before anything is
//! created; DEL only deletes CNI_IFNAME when it is a macvlan; `source` mode is accepted.

use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
use crate::cni::delegate;
use crate::cni::env::validate_config_ifname;
use crate::cni::result::Interface;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version};
use crate::netlink::macvlan::{
    MACVLAN_MODE_BRIDGE, MACVLAN_MODE_PASSTHRU, MACVLAN_MODE_PRIVATE, MACVLAN_MODE_SOURCE,
    MACVLAN_MODE_VEPA, Macvlan,
};
use crate::netlink::{Family, Handle, Link, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::undo::Undo;
use crate::{random, sysctl};
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "macvlan",
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
    #[serde(default)]
    mac: String,
    #[serde(rename = "linkInContainer", default)]
    link_in_container: bool,
    #[serde(default)]
    bcqueuelen: i64,
}

struct Config<'a> {
    /// Empty: the default route's interface.
    master: String,
    mode: u32,
    mtu: u32,
    mac: Option<[u8; 6]>,
    in_container: bool,
    bc_queue_len: u32,
    ipam: Option<&'a str>,
}

const MODES: &[(&str, u32)] = &[
    ("bridge", MACVLAN_MODE_BRIDGE),
    ("private", MACVLAN_MODE_PRIVATE),
    ("vepa", MACVLAN_MODE_VEPA),
    ("passthru", MACVLAN_MODE_PASSTHRU),
    ("source", MACVLAN_MODE_SOURCE),
];

fn load(req: &Request) -> Result<Config<'_>> {
    let c: Conf = req.decode()?;
    if !c.master.is_empty() {
        validate_config_ifname("master", &c.master)?;
    }
    let mode = if c.mode.is_empty() {
        MACVLAN_MODE_BRIDGE
    } else {
        MODES
            .iter()
            .find(|(n, _)| *n == c.mode)
            .map(|(_, m)| *m)
            .ok_or_else(|| Error::config(format!("unknown macvlan mode: {:?}", c.mode)))?
    };
    let mtu = u32::try_from(c.mtu)
        .map_err(|_| Error::config(format!("invalid MTU {}, must be [0, master MTU]", c.mtu)))?;
    let bc_queue_len = u32::try_from(c.bcqueuelen)
        .map_err(|_| Error::config(format!("bcqueuelen {} is out of range", c.bcqueuelen)))?;
    // CNI_ARGS MAC < runtimeConfig.mac, over the config's `mac`, as upstream.
    let mac = super::shared::container::requested_mac(req, c.mac)?;
    let mac = match mac.as_str() {
        "" => None,
        m => Some(parse_mac(m).map_err(|e| e.ctx("mac"))?),
    };
    Ok(Config {
        master: c.master,
        mode,
        mtu,
        mac,
        in_container: c.link_in_container,
        bc_queue_len,
        ipam: req.ipam_type(),
    })
}

/// The master link in `h`'s namespace: the configured one, or the default route's interface.
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

/// Create the macvlan in the container under a temporary name and rename it to CNI_IFNAME.
fn create(c: &Config, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let ifname = &req.env.ifname;
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::internal(format!(
            "container interface name provided ({ifname}) already exists"
        )));
    }
    let tmp = format!("veth{}", random::hex(8));
    let spec = |parent, ns| Macvlan {
        name: &tmp,
        parent,
        mode: c.mode,
        mtu: (c.mtu > 0).then_some(c.mtu),
        mac: c.mac,
        bc_queue_len: c.bc_queue_len,
        ns,
    };
    let created = if c.in_container {
        let m = master(c, cont)?;
        cont.add_macvlan(&spec(m.index, None))
    } else {
        let mut host = Handle::new()?;
        let m = master(c, &mut host)?;
        host.add_macvlan(&spec(m.index, Some(ns)))
    };
    created.map_err(|e| Error::from(e).ctx("failed to create macvlan"))?;
    super::shared::container::rename_into_place(cont, "macvlan", &tmp, ifname)
}

fn add(req: &Request) -> Result<CniResult> {
    let c = load(req)?;
    let ns = NetNs::open(&req.env.netns).map_err(Error::from)?;
    let mut cont = Handle::in_netns(&ns)?;
    let link = create(&c, req, &ns, &mut cont)?;
    let mut undo = Undo::new("macvlan");
    let (index, ns_ref) = (link.index, &ns);
    undo.push(format!("macvlan {}", req.env.ifname), move || {
        Ok(Handle::in_netns(ns_ref)?.del_link(index)?)
    });
    let r = configure(req, &c, &ns, &mut cont, &link, &mut undo);
    undo.finish(r)
}

fn configure<'a>(
    req: &'a Request,
    c: &Config<'a>,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let ifname = &req.env.ifname;
    let mut result = CniResult {
        interfaces: vec![Interface {
            name: ifname.clone(),
            mac: link.mac.map(|m| fmt_mac(&m)).unwrap_or_default(),
            sandbox: req.env.netns.clone(),
            ..Default::default()
        }],
        ..Default::default()
    };
    match c.ipam {
        Some(ipam) => {
            let r = iface::ipam_add(ipam, req, undo)?;
            result.ips = r.ips;
            result.routes = r.routes;
            for ip in &mut result.ips {
                ip.interface = Some(0);
            }
            ns.enter(|| {
                let _ = sysctl::set(&sysctl::iface("net/ipv4/conf", ifname, "arp_notify"), "1");
                let _ = sysctl::set(&sysctl::iface("net/ipv6/conf", ifname, "ndisc_notify"), "1");
            })?;
            iface::configure(ns, cont, ifname, link.index, &result, 0, Dad::Detect)?;
        }
        None => cont
            .set_up(link.index, true)
            .ctx(format_args!("failed to set {ifname:?} UP"))?,
    }
    result.dns = req.conf.dns.clone().unwrap_or_default();
    Ok(result)
}

fn del(req: &Request) -> Result<()> {
    let c = load(req)?;
    super::shared::container::delete_with_ipam(req, c.ipam, "macvlan", "macvlan")
}

fn check(req: &Request) -> Result<()> {
    let c = load(req)?;
    let (mut cont, prev, pos, link) =
        super::shared::container::check_own_iface(req, c.ipam, "macvlan")?;
    if link.macvlan_mode != Some(c.mode) {
        let name = |m: Option<u32>| {
            MODES
                .iter()
                .find(|(_, v)| Some(*v) == m)
                .map_or("unknown", |(n, _)| n)
        };
        return Err(Error::internal(format!(
            "Error: Container macvlan mode {} does not match expected value: {}",
            name(link.macvlan_mode),
            name(Some(c.mode))
        )));
    }
    iface::check(&mut cont, &link, &prev, pos)
}

fn status(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Gc, req)
}
