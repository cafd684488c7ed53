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

use crate::applets::shared::container::{check_own_iface, delete_with_ipam};
use crate::applets::shared::link::{self, Announce, Dns, Master, Setup};
use crate::applets::shared::settle::Dad;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netlink::ipvlan::{IPVLAN_MODE_L2, IPVLAN_MODE_L3, IPVLAN_MODE_L3S};
use crate::netlink::{Handle, Link};
use crate::netns::NetNs;
use crate::undo::Undo;
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
    master: Master,
    mode: u16,
    ipam: Option<&'a str>,
}

/// Name → mode; the first is the default.
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
    let master = Master::load(master, c.mtu, c.link_in_container)?;
    let mode = link::mode(MODES, &c.mode, "ipvlan")?;
    Ok(Config {
        master,
        mode,
        ipam: req.ipam_type(),
    })
}

fn create(c: &Config, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let mtu = (c.master.mtu > 0).then_some(c.master.mtu);
    c.master
        .create_renamed(req, ns, cont, "ipvlan", |h, name, parent, ns| {
            h.add_ipvlan(name, parent, c.mode, mtu, ns)
                .ctx("failed to create ipvlan")
        })
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
    let ns = req.netns()?;
    link::add(
        req,
        &ns,
        "ipvlan",
        |cont| create(&c, req, &ns, cont),
        |cont, link, undo| configure(req, &c, chained, &ns, cont, link, undo),
    )
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
    // Without IPAM, `add` made sure the chain has addresses.
    let how = Setup {
        ipam: c.ipam,
        chained,
        ipam_ctx: None,
        announce: Announce::ArpNdisc,
        dad: Dad::Detect,
        dns: Dns::Config,
    };
    link::configure(req, ns, cont, link, undo, how)
}

fn del(req: &Request) -> Result<()> {
    let _: Conf = req.decode()?;
    delete_with_ipam(req, req.ipam_type(), "ipvlan", "ipvlan")
}

fn check(req: &Request) -> Result<()> {
    let c: Conf = req.decode()?;
    let own = check_own_iface(req, req.ipam_type(), "ipvlan")?;
    // CHECK does not load the config: a mode it does not know is not compared.
    if let Ok(mode) = link::mode(MODES, &c.mode, "ipvlan") {
        link::check_mode(MODES, "ipvlan", own.link.ipvlan_mode, mode)?;
    }
    own.check_addresses()
}

fn status(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Gc, req)
}
