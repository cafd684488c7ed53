//! `macvlan` (upstream `plugins/main/macvlan`): a macvlan link on a master interface, placed in
//! the container namespace.
//!
//! Keys: `master` (default: the interface of the default route, looked up on the host or, with
//! `linkInContainer`, in the container), `mode` (`bridge` default, `private`, `vepa`,
//! `passthru`; `source` is refused, as upstream does), `mtu` (0 = inherit, at most the master's), `mac` (also CNI_ARGS `MAC`
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
//! created (`mode` with code 7 where upstream fails with 999); DEL only deletes CNI_IFNAME when
//! it is a macvlan.

use crate::applets::shared::container::{check_own_iface, delete_with_ipam, requested_mac};
use crate::applets::shared::link::{self, Announce, Dns, Master, Setup};
use crate::applets::shared::settle::Dad;
use crate::cni::delegate;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version};
use crate::netlink::macvlan::{
    MACVLAN_MODE_BRIDGE, MACVLAN_MODE_PASSTHRU, MACVLAN_MODE_PRIVATE, MACVLAN_MODE_VEPA, Macvlan,
};
use crate::netlink::{Handle, Link, parse_mac};
use crate::netns::NetNs;
use crate::undo::Undo;
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
    master: Master,
    mode: u32,
    mac: Option<[u8; 6]>,
    bc_queue_len: u32,
    ipam: Option<&'a str>,
}

/// Name → mode; the first is the default.
const MODES: &[(&str, u32)] = &[
    ("bridge", MACVLAN_MODE_BRIDGE),
    ("private", MACVLAN_MODE_PRIVATE),
    ("vepa", MACVLAN_MODE_VEPA),
    ("passthru", MACVLAN_MODE_PASSTHRU),
];

fn load(req: &Request) -> Result<Config<'_>> {
    let c: Conf = req.decode()?;
    let master = Master::load(c.master, c.mtu, c.link_in_container)?;
    // Upstream (v1.9.1 and main) knows no `source` mode: such a link receives only from the
    // MACs allowed on it (IFLA_MACVLAN_MACADDR), and no key sets them.
    if c.mode == "source" {
        return Err(Error::config(
            "unknown macvlan mode: \"source\" (as upstream: a source-mode macvlan receives \
             only from the MACs allowed on it, and no key sets them)",
        ));
    }
    let mode = link::mode(MODES, &c.mode, "macvlan")?;
    let bc_queue_len = u32::try_from(c.bcqueuelen)
        .map_err(|_| Error::config(format!("bcqueuelen {} is out of range", c.bcqueuelen)))?;
    // CNI_ARGS MAC < runtimeConfig.mac, over the config's `mac`, as upstream.
    let mac = requested_mac(req, c.mac)?;
    let mac = match mac.as_str() {
        "" => None,
        m => Some(parse_mac(m).map_err(|e| e.ctx("mac"))?),
    };
    Ok(Config {
        master,
        mode,
        mac,
        bc_queue_len,
        ipam: req.ipam_type(),
    })
}

fn add(req: &Request) -> Result<CniResult> {
    let c = load(req)?;
    let ns = req.netns()?;
    link::add(
        req,
        &ns,
        "macvlan",
        |cont| create(&c, req, &ns, cont),
        |cont, link, undo| configure(req, &c, &ns, cont, link, undo),
    )
}

/// Create the macvlan in the container under a temporary name and rename it to CNI_IFNAME.
fn create(c: &Config, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let mtu = c.master.mtu;
    c.master
        .create_renamed(req, ns, cont, "macvlan", |h, name, parent, ns| {
            h.add_macvlan(&Macvlan {
                name,
                parent,
                mode: c.mode,
                mtu: (mtu > 0).then_some(mtu),
                mac: c.mac,
                bc_queue_len: c.bc_queue_len,
                ns,
            })
            .ctx("failed to create macvlan")
        })
}

/// With IPAM: its addresses and routes on the link, announced; without: the link just set up.
fn configure<'a>(
    req: &'a Request,
    c: &Config<'a>,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let how = Setup {
        ipam: c.ipam,
        chained: None,
        ipam_ctx: None,
        announce: Announce::ArpNdisc,
        dad: Dad::Detect,
        dns: Dns::Config,
    };
    link::configure(req, ns, cont, link, undo, how)
}

fn del(req: &Request) -> Result<()> {
    let c = load(req)?;
    delete_with_ipam(req, c.ipam, "macvlan", "macvlan")
}

fn check(req: &Request) -> Result<()> {
    let c = load(req)?;
    let own = check_own_iface(req, c.ipam, "macvlan")?;
    link::check_mode(MODES, "macvlan", own.link.macvlan_mode, c.mode)?;
    own.check_addresses()
}

fn status(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Gc, req)
}
