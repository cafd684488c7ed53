//! `tap` (upstream `plugins/main/tap`): a persistent tap device in the container namespace,
//! for a VM monitor running there.
//!
//! Keys: `mac` (also CNI_ARGS `MAC` and `runtimeConfig.mac`, which wins), `mtu` (0: the
//! kernel's 1500), `multiQueue`, `owner`, `group` (uid/gid allowed to attach; unset: anyone),
//! `selinuxContext` (the label the device is created in), `bridge` (an existing bridge in the
//! container namespace the tap joins), `ipam` (optional: without it the tap is L2 only and just
//! set up), `dns`.
//!
//! As upstream, the TUNSETIFF flags depend on the path upstream takes: with both `owner` and
//! `group` and no `selinuxContext` (its netlink path) `tap vnet_hdr` plus `multi_queue pi off`
//! with `multiQueue`; otherwise (its `ip tuntap` path) `tap pi off` plus `multi_queue`. ADD
//! creates the device, applies MTU and MAC, renames it to CNI_IFNAME, joins `bridge`, sets it up
//! and, with IPAM, applies the addresses and routes (`arp_notify` on). The result has the tap
//! (name, MAC, sandbox) and IPAM's IPs and routes; DNS is the config's. DEL releases the
//! addresses and deletes the tap, tolerating a missing namespace or link. CHECK compares the
//! prevResult's addresses and routes with the container's. STATUS and GC go to IPAM.
//!
//! Beyond upstream: every key is checked before anything is created; `mtu` and `mac` are
//! applied with `owner`+`group` too (upstream's netlink path drops them); a failed ADD removes
//! the tap and releases the addresses; `selinuxContext` on a host without SELinux is ignored
//! with a note on stderr (upstream fails); DEL deletes CNI_IFNAME only when it is a tun/tap;
//! CHECK also checks the link is a tap with the recorded MAC on `bridge`.

use crate::applets::shared::container::{check_own_iface, delete_with_ipam, requested_mac};
use crate::applets::shared::link::{self, Announce, Dns, Setup};
use crate::applets::shared::settle::Dad;
use crate::cni::delegate;
use crate::cni::env::validate_config_ifname;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version};
use crate::netlink::{Handle, Link, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::tuntap::{self, IFF_MULTI_QUEUE, IFF_NO_PI, IFF_TAP, IFF_VNET_HDR, Tap};
use crate::undo::Undo;
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "tap",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Conf {
    #[serde(default)]
    multi_queue: bool,
    #[serde(default)]
    mtu: i64,
    #[serde(default)]
    mac: String,
    #[serde(default)]
    owner: Option<u32>,
    #[serde(default)]
    group: Option<u32>,
    #[serde(default)]
    selinux_context: String,
    #[serde(default)]
    bridge: String,
}

struct Config<'a> {
    tap: Tap,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
    label: Option<String>,
    bridge: Option<String>,
    ipam: Option<&'a str>,
}

/// The tun driver's MTU bounds (ETH_MIN_MTU, 65535 minus the Ethernet header).
const MTU_RANGE: std::ops::RangeInclusive<i64> = 68..=65521;

fn load(req: &Request) -> Result<Config<'_>> {
    let c: Conf = req.decode()?;
    if c.mtu != 0 && !MTU_RANGE.contains(&c.mtu) {
        return Err(Error::config(format!(
            "mtu {} is out of range (68-65521, or 0 for the default)",
            c.mtu
        )));
    }
    for (key, id) in [("owner", c.owner), ("group", c.group)] {
        // (uid_t)-1 is the kernel's "no owner": TUNSETOWNER refuses it.
        if id == Some(u32::MAX) {
            return Err(Error::config(format!(
                "{key} {} is not a valid id",
                u32::MAX
            )));
        }
    }
    if !c.bridge.is_empty() {
        validate_config_ifname("bridge", &c.bridge)?;
    }
    // The label is written to /proc/thread-self/attr/exec: one line of printable text.
    if c.selinux_context.len() > 4096 || c.selinux_context.chars().any(|ch| ch.is_control()) {
        return Err(Error::config(
            "selinuxContext must be printable text of at most 4096 bytes",
        ));
    }
    let mac = requested_mac(req, c.mac)?;
    let mac = match mac.as_str() {
        "" => None,
        m => Some(parse_mac(m).map_err(|e| e.ctx("mac"))?),
    };
    let netlink_path = c.selinux_context.is_empty() && c.owner.is_some() && c.group.is_some();
    let mut flags = IFF_TAP;
    flags |= match (netlink_path, c.multi_queue) {
        (true, false) => IFF_VNET_HDR,
        (true, true) => IFF_VNET_HDR | IFF_MULTI_QUEUE | IFF_NO_PI,
        (false, false) => IFF_NO_PI,
        (false, true) => IFF_NO_PI | IFF_MULTI_QUEUE,
    };
    Ok(Config {
        tap: Tap {
            flags,
            owner: c.owner,
            group: c.group,
        },
        mtu: (c.mtu != 0).then_some(c.mtu as u32),
        mac,
        label: Some(c.selinux_context).filter(|s| !s.is_empty()),
        bridge: Some(c.bridge).filter(|s| !s.is_empty()),
        ipam: req.ipam_type(),
    })
}

/// Create the device in the container (under the kernel's `tap<N>` name) and return it.
fn create(c: &Config, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    link::ensure_free(cont, &req.env.ifname)?;
    let name = ns.enter(|| match c.label.as_deref() {
        Some(label) if tuntap::selinux_enabled() => tuntap::create_labelled(&c.tap, label),
        Some(label) => {
            crate::warn!(
                "tap: SELinux is not enabled on this host: selinuxContext {label:?} ignored"
            );
            tuntap::create_here(&c.tap)
        }
        None => tuntap::create_here(&c.tap),
    })??;
    cont.link_by_name(&name)?
        .ok_or_else(|| Error::internal(format!("tap {name} vanished after creation")))
}

fn add(req: &Request) -> Result<CniResult> {
    let c = load(req)?;
    if req.version.is_legacy() && c.ipam.is_none() {
        // Checked up front: a 0.1/0.2 result cannot express an L2-only attachment.
        return Err(Error::internal("cannot convert: no valid IP addresses"));
    }
    let ns = req.netns()?;
    link::add(
        req,
        &ns,
        "tap",
        |cont| create(&c, req, &ns, cont),
        |cont, link, undo| configure(req, &c, &ns, cont, link.index, undo),
    )
}

fn configure<'a>(
    req: &'a Request,
    c: &Config<'a>,
    ns: &NetNs,
    cont: &mut Handle,
    index: u32,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let ifname = &req.env.ifname;
    if let Some(mtu) = c.mtu {
        cont.set_mtu(index, mtu)
            .ctx(format_args!("failed to set tap MTU to {mtu}"))?;
    }
    if let Some(mac) = c.mac {
        cont.set_mac(index, mac)
            .ctx(format_args!("failed to set tap MAC to {}", fmt_mac(&mac)))?;
    }
    cont.rename(index, ifname)
        .ctx(format_args!("failed to rename tap to {ifname:?}"))?;
    if let Some(bridge) = &c.bridge {
        let br = cont.link_by_name(bridge)?.ok_or_else(|| {
            Error::internal(format!(
                "bridge: failed to get bridge {bridge:?}: no such interface in the container"
            ))
        })?;
        cont.set_master(index, Some(br.index)).ctx(format_args!(
            "failed to set tap {ifname} as a port of bridge {bridge}"
        ))?;
    }
    cont.set_up(index, true)
        .ctx(format_args!("failed to set tap interface {ifname:?} up"))?;
    let link = cont
        .link_by_index(index)?
        .ok_or_else(|| Error::internal(format!("failed to refetch tap {ifname:?}")))?;
    let how = Setup {
        ipam: c.ipam,
        chained: None,
        ipam_ctx: None,
        announce: Announce::Arp,
        // A tap has no carrier until its reader (the VM) attaches, after ADD: see settle::Dad.
        dad: Dad::Deferred,
        dns: Dns::Config,
    };
    link::configure(req, ns, cont, &link, undo, how)
}

fn del(req: &Request) -> Result<()> {
    let c = load(req)?;
    delete_with_ipam(req, c.ipam, "tap", "tun")
}

fn check(req: &Request) -> Result<()> {
    let c = load(req)?;
    let mut own = check_own_iface(req, c.ipam, "tun")?;
    if let Some(bridge) = &c.bridge {
        let master = match own.link.master {
            Some(m) => own.cont.link_by_index(m)?.map(|l| l.name),
            None => None,
        };
        if master.as_ref() != Some(bridge) {
            return Err(Error::internal(format!(
                "tap {} is not a port of bridge {bridge}",
                own.link.name
            )));
        }
    }
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
