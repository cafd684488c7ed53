//! `host-device` (upstream `plugins/main/host-device`): move an existing device of the host into
//! the container as CNI_IFNAME, and back on DEL.
//!
//! Keys: the device, by the first of `device` (name), `hwaddr` (MAC; the first link that has
//! it), `kernelpath` (a `/sys/devices/…` path: the first entry of its `net/`), `pciBusID` (the
//! first entry of `/sys/bus/pci/devices/<id>/net/`, or of a `virtio*/net/` below it) — or
//! `runtimeConfig.deviceID` (the `deviceID` capability, e.g. from an SR-IOV device plugin),
//! which is a PCI address when `/sys/bus/pci/devices/<id>` exists, else an auxiliary device
//! (`/sys/bus/auxiliary/devices/<id>/net/`) and takes `pciBusID`'s place. `ipam` (optional),
//! `dns`, and `DPDKMode` (Go's untagged field, so any case of that key, as upstream).
//!
//! ADD moves the device into the container, renames it to CNI_IFNAME there, stores its host
//! name in its alias (IFLA_IFALIAS, what upstream's DEL reads) and sets it up; with IPAM it then
//! applies the addresses and routes. Renaming in the container means neither a host interface
//! called CNI_IFNAME nor udev gets in the way (upstream v1.2+ renames in a temporary namespace
//! for that, two namespace moves where this is one). Only when the container already has a
//! link of the device's host name does it go through a temporary namespace. A PCI device bound
//! to a userspace driver (`vfio-pci`, `uio_pci_generic`, `igb_uio`: DPDK) has no netdev: it is
//! not moved, the result just names CNI_IFNAME (and the IPAM addresses, not applied), as
//! upstream. A failed ADD moves the device back under its name, up again if it was, and
//! releases the addresses (upstream only releases them).
//!
//! ADD also records on the host, outside the container's reach, what it moved in
//! (`<state dir>/host-device/<network>/<cid>:<ifname>`): host name and index, index in the
//! container, kind, permanent MAC (IFLA_PERM_ADDRESS), parent bus device, and where its peer
//! or lower link lives. DEL releases the addresses, then takes the link at the recorded index
//! (whatever the container named it) — only when it still matches the record: same kind, same
//! permanent address and parent device when there were any, its peer or lower link where it
//! was (the same host link, never the container) — renames it in the container to its recorded
//! host name, clears the alias and moves it back to the host (through a temporary namespace
//! only when the container has another link of that name); the record goes. A link that does
//! not match stays where it is, with a note on stderr, and DEL succeeds. Without a record (the
//! Go plugin's ADD) DEL takes CNI_IFNAME only when it is a device no container can make: a
//! driver's device (no kind) with a parent device or a permanent address, or a link whose peer
//! or lower link is in the host's namespace (a veth, vlan, macvlan… made on the host); its name
//! on the host is its alias, as upstream, or `dev<index>` (the kernel's name for a device
//! coming home to a taken name) when the alias is empty, no interface name, or taken on the
//! host. It is left down, as upstream (its earlier state is unknown); addresses went with the
//! move. A missing namespace or device is success (upstream fails), and a DEL without
//! CNI_NETNS still releases the addresses (upstream does nothing). CHECK runs IPAM's CHECK, then (not for DPDK devices)
//! compares CNI_IFNAME's MAC, addresses and routes with the prevResult. STATUS and GC go to
//! the IPAM plugin (upstream's GC is a no-op); GC also drops the records of attachments the
//! runtime no longer lists.
//!
//! Deviations: paths from `kernelpath`, `pciBusID` and `deviceID` are refused at load when
//! they could leave their directory (`..`, `/`); MAC addresses are 6 bytes (an InfiniBand
//! device's 20-byte address is neither matched by `hwaddr` nor reported).

use super::shared::container::checked_any_iface;
use super::shared::iface;
use crate::attachment;
use crate::cni::env::validate_config_ifname;
use crate::cni::result::Interface;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netlink::{Handle, Identity, Link, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::undo::{ErrorList, Undo};
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "host-device",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

const PCI: &str = "/sys/bus/pci/devices";
const AUX: &str = "/sys/bus/auxiliary/devices";
/// Drivers that take a NIC away from the kernel's network stack (DPDK).
const USERSPACE_DRIVERS: &[&str] = &["vfio-pci", "uio_pci_generic", "igb_uio"];

#[derive(Deserialize, Default)]
struct Conf {
    #[serde(default)]
    device: String,
    #[serde(default)]
    hwaddr: String,
    #[serde(default)]
    kernelpath: String,
    #[serde(rename = "pciBusID", default)]
    pci: String,
    #[serde(rename = "DPDKMode", default)]
    dpdk: bool,
    #[serde(rename = "runtimeConfig", default)]
    runtime_config: Option<RuntimeConfig>,
}

#[derive(Deserialize, Default)]
struct RuntimeConfig {
    #[serde(rename = "deviceID", default)]
    device_id: String,
}

struct Config<'a> {
    device: String,
    hwaddr: Option<[u8; 6]>,
    kernelpath: String,
    pci: String,
    device_id: String,
    /// The auxiliary device `deviceID` named (set by [`Config::resolve`]).
    aux: String,
    dpdk: bool,
    ipam: Option<&'a str>,
}

/// A PCI address or auxiliary device name: one path component below a sysfs bus directory.
fn sysfs_entry(key: &str, v: &str) -> Result<()> {
    if v == "." || v == ".." || v.contains('/') || v.chars().any(char::is_control) {
        return Err(Error::config(format!(
            "{key}: {v:?} is not a device name under /sys/bus"
        )));
    }
    Ok(())
}

fn load(req: &Request) -> Result<Config<'_>> {
    let c: Conf = req.decode()?;
    if !c.device.is_empty() {
        validate_config_ifname("device", &c.device)?;
    }
    let hwaddr = match c.hwaddr.as_str() {
        "" => None,
        m => Some(parse_mac(m).map_err(|e| e.ctx("hwaddr"))?),
    };
    if !c.kernelpath.is_empty()
        && (!c.kernelpath.starts_with("/sys/devices/")
            || c.kernelpath.split('/').any(|p| p == "..")
            || c.kernelpath.chars().any(char::is_control))
    {
        return Err(Error::config(format!(
            "kernelpath: kernel device path {:?} must be absolute and begin with /sys/devices/",
            c.kernelpath
        )));
    }
    sysfs_entry("pciBusID", &c.pci)?;
    let device_id = c.runtime_config.unwrap_or_default().device_id;
    sysfs_entry("runtimeConfig.deviceID", &device_id)?;
    if c.device.is_empty()
        && hwaddr.is_none()
        && c.kernelpath.is_empty()
        && c.pci.is_empty()
        && device_id.is_empty()
    {
        return Err(Error::config(
            r#"specify either "device", "hwaddr", "kernelpath" or "pciBusID""#,
        ));
    }
    Ok(Config {
        device: c.device,
        hwaddr,
        kernelpath: c.kernelpath,
        pci: c.pci,
        device_id,
        aux: String::new(),
        dpdk: c.dpdk,
        ipam: req.ipam_type(),
    })
}

fn exists(p: &str) -> bool {
    std::fs::metadata(p).is_ok()
}

impl Config<'_> {
    /// What sysfs says, as upstream's loadConf: `deviceID` is a PCI or an auxiliary device,
    /// and a PCI device bound to a userspace driver is in DPDK mode.
    fn resolve(&mut self) -> Result<()> {
        let id = &self.device_id;
        if !id.is_empty() {
            if exists(&format!("{PCI}/{id}")) {
                self.pci = id.clone();
            } else if exists(&format!("{AUX}/{id}")) {
                self.pci.clear();
                self.aux = id.clone();
            } else {
                return Err(Error::internal(format!(
                    "runtime config DeviceID {id} not found or unsupported"
                )));
            }
        }
        if !self.pci.is_empty() {
            let link = format!("{PCI}/{}/driver", self.pci);
            let driver = std::fs::canonicalize(&link).ctx(format_args!(
                "error with host device: cannot resolve {link}"
            ))?;
            let name = driver.file_name().and_then(|n| n.to_str()).unwrap_or("");
            self.dpdk = USERSPACE_DRIVERS.contains(&name);
        }
        Ok(())
    }
}

/// The first entry of a sysfs `net/` directory: the device's interface name.
fn first_netdev(dir: &str) -> Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ctx(format_args!("failed to read directory {dir}"))?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    let name = names
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal(format!("failed to find network device in path {dir}")))?;
    validate_config_ifname(dir, &name)?;
    Ok(name)
}

/// The `net/` directory of a PCI device, or of the virtio device below it.
fn pci_net_dir(pci: &str) -> Result<String> {
    let base = format!("{PCI}/{pci}");
    let net = format!("{base}/net");
    if std::fs::symlink_metadata(&net).is_ok() {
        return Ok(net);
    }
    let mut virtio = Vec::new();
    for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let name = e.file_name();
        let p = format!("{base}/{}/net", name.to_string_lossy());
        if name.to_string_lossy().starts_with("virtio") && std::fs::symlink_metadata(&p).is_ok() {
            virtio.push(p);
        }
    }
    virtio.sort();
    virtio
        .into_iter()
        .next()
        .ok_or_else(|| Error::internal(format!("no net directory under pci device {pci}")))
}

/// The host device the config selects, in upstream's order of precedence.
fn find(c: &Config, host: &mut Handle) -> Result<Link> {
    let name = if !c.device.is_empty() {
        c.device.clone()
    } else if let Some(mac) = c.hwaddr {
        return host
            .links()?
            .into_iter()
            .find(|l| l.mac == Some(mac))
            .ok_or_else(|| Error::internal(format!("no interface has hwaddr {}", fmt_mac(&mac))));
    } else if !c.kernelpath.is_empty() {
        first_netdev(&format!("{}/net", c.kernelpath.trim_end_matches('/')))?
    } else if !c.pci.is_empty() {
        first_netdev(&pci_net_dir(&c.pci)?)?
    } else {
        first_netdev(&format!("{AUX}/{}/net", c.aux))?
    };
    host.link_by_name(&name)?
        .ok_or_else(|| Error::internal(format!("link {name:?} not found")))
}

/// A link's name and alias: what it has before a move, or what it gets.
type Names<'a> = (&'a str, &'a str);

/// In the namespace of `h`: give the (down) link `index` the name and alias `to` (the kernel
/// accepts the name a link already has).
fn rename(h: &mut Handle, index: u32, to: Names) -> Result<()> {
    h.rename(index, to.0)?;
    h.set_alias(index, to.1)?;
    Ok(())
}

/// In the namespace of `h`: rename the link `index` to `to` and move it to `ns`.
fn rename_and_move(h: &mut Handle, index: u32, to: Names, ns: &NetNs) -> Result<()> {
    rename(h, index, to)?;
    h.set_netns(index, ns)?;
    Ok(())
}

/// Move the link `index` from `src` (a handle in `src_ns`) to `dst_ns` through a temporary
/// namespace, where it is renamed from `from` to `to`: for a link whose name is taken on the
/// side it would be renamed on. Two moves where the direct paths make one. On failure it is
/// back in `src_ns` as `from` (down).
fn via_temporary(
    src: &mut Handle,
    index: u32,
    from: Names,
    to: Names,
    src_ns: &NetNs,
    dst_ns: &NetNs,
) -> Result<()> {
    let tmp = NetNs::temporary()?;
    src.set_netns(index, &tmp).ctx(format_args!(
        "failed to move {:?} to a temporary netns",
        from.0
    ))?;
    let mut t = Handle::in_netns(&tmp)?;
    // The index stays: the new namespace has only `lo`.
    if let Err(e) = rename_and_move(&mut t, index, to, dst_ns) {
        let e = e.ctx(format_args!("failed to move {:?} on as {:?}", from.0, to.0));
        return Err(and_undo(e, rename_and_move(&mut t, index, from, src_ns)));
    }
    Ok(())
}

/// `e`, with the failure of the undo `u` appended to its message.
fn and_undo(mut e: Error, u: Result<()>) -> Error {
    if let Err(u) = u {
        e.msg = format!("{} (and undo: {})", e.msg, u.msg);
    }
    e
}

/// Move the host device `dev` into `ns` (`cont`: a handle there) as `ifname`, its host name in
/// its alias, and set it up there. On failure it is back on the host under its name, with its
/// alias, up if it was.
///
/// It moves straight in under its host name and is renamed in the container: one namespace
/// move, and the new name is never seen on the host (by udev or NetworkManager, which is why
/// upstream renames out of the host's sight). Only when the container already has a link of
/// the host name, which would make that move fail, does it go through a temporary namespace.
fn move_in(
    host: &mut Handle,
    cont: &mut Handle,
    dev: &Link,
    ns: &NetNs,
    ifname: &str,
) -> Result<Link> {
    let host_ns = NetNs::current()?;
    let from = (dev.name.as_str(), dev.alias.as_deref().unwrap_or(""));
    let to = (ifname, dev.name.as_str());
    let moved = if dev.name != ifname && cont.link_by_name(&dev.name)?.is_some() {
        via_temporary(host, dev.index, from, to, &host_ns, ns)
    } else {
        move_then_rename(host, cont, dev.index, from, to, ns, &host_ns)
    };
    if let Err(e) = moved {
        return Err(and_undo(e, restore_up(host, dev)));
    }
    let up = cont.link(ifname).and_then(|l| {
        cont.set_up(l.index, true)?;
        cont.link(ifname)
    });
    up.map_err(|e| {
        let e = Error::from(e).ctx(format_args!("failed to set {ifname:?} up"));
        let u = just_moved(ns, ifname, &dev.name, &host_ns)
            .and_then(|m| back_to_host(ns, ifname, &host_ns, m.as_ref()))
            .and_then(|_| restore_up(host, dev));
        and_undo(e, u)
    })
}

/// ADD's direct path: move the host's link `index` (named `from.0`, free in `ns`) into `ns`,
/// then rename it there to `to`. On failure it is back on the host as `from`.
fn move_then_rename(
    host: &mut Handle,
    cont: &mut Handle,
    index: u32,
    from: Names,
    to: Names,
    ns: &NetNs,
    host_ns: &NetNs,
) -> Result<()> {
    host.set_netns(index, ns)
        .ctx(format_args!("failed to move {:?} to {}", from.0, ns.path()))?;
    // The index changes when the container has a link with the same one.
    let index = cont.link(from.0)?.index;
    rename(cont, index, to).map_err(|e| {
        let e = e.ctx(format_args!("failed to rename {:?} to {:?}", from.0, to.0));
        and_undo(e, rename_and_move(cont, index, from, host_ns))
    })
}

/// Set the host device up again after a failed ADD, when it was up before (moving a device
/// between namespaces takes it down).
fn restore_up(host: &mut Handle, dev: &Link) -> Result<()> {
    if dev.up
        && let Some(l) = host.link_by_name(&dev.name)?
    {
        host.set_up(l.index, true)?;
    }
    Ok(())
}

/// Kind of host-device's records of what ADD moved in
/// (`<state dir>/host-device/<network>/<cid>:<ifname>`, see [`crate::attachment`]).
const RECORD: &str = "host-device";

/// Where a link's peer (veth) or lower device (vlan, macvlan, ipvlan…) lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lower {
    /// It has none.
    None,
    /// On the host, with this index.
    Host(u32),
    /// In the container itself.
    Container,
    /// In some other namespace.
    Elsewhere,
}

impl Lower {
    /// `l`'s, as seen from `h`'s namespace, the host being `host_ns`.
    fn of(h: &mut Handle, l: &Link, host_ns: Option<&NetNs>) -> Result<Lower> {
        let Some(i) = l.link.filter(|&i| i != 0 && i != l.index) else {
            return Ok(Lower::None);
        };
        if l.link_netnsid.is_none() {
            return Ok(match host_ns {
                None => Lower::Host(i),
                Some(_) => Lower::Container,
            });
        }
        // The id is asked for after the link was read: reporting it is what assigns one.
        let host_id = match host_ns {
            Some(ns) => h.nsid_of(ns)?,
            None => None,
        };
        Ok(if host_id.is_some() && l.link_netnsid == host_id {
            Lower::Host(i)
        } else {
            Lower::Elsewhere
        })
    }

    fn item(self) -> String {
        match self {
            Lower::None => "none".into(),
            Lower::Host(i) => format!("host:{i}"),
            Lower::Container => "container".into(),
            Lower::Elsewhere => "elsewhere".into(),
        }
    }

    fn parse(s: &str) -> Option<Lower> {
        Some(match s {
            "none" => Lower::None,
            "container" => Lower::Container,
            "elsewhere" => Lower::Elsewhere,
            _ => Lower::Host(s.strip_prefix("host:")?.parse().ok()?),
        })
    }
}

/// What ADD moved into the container, recorded on the host for DEL: the container can rename
/// CNI_IFNAME, rewrite its alias or make another link of that name; it cannot change these.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Moved {
    /// Its name on the host (what DEL gives it back).
    name: String,
    /// Its index on the host, and in the container (where DEL looks for it).
    host_index: u32,
    index: u32,
    /// IFLA_INFO_KIND, empty for a driver's device (a NIC, a VF).
    kind: String,
    /// Permanent MAC address and parent bus device, when the kernel reports them.
    id: Identity,
    lower: Lower,
}

impl Moved {
    fn items(&self) -> Vec<String> {
        vec![
            format!("name {}", self.name),
            format!("host_index {}", self.host_index),
            format!("index {}", self.index),
            format!("kind {}", self.kind),
            format!("perm_addr {}", self.id.perm_addr),
            format!("parent {}", self.id.parent),
            format!("lower {}", self.lower.item()),
        ]
    }

    /// None for a record that is not one of ours as written by [`Moved::items`].
    fn parse(items: &[String]) -> Option<Moved> {
        let get = |k: &str| {
            items
                .iter()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
                .map(str::to_string)
        };
        let name = get("name")?;
        validate_config_ifname("name", &name).ok()?;
        Some(Moved {
            name,
            host_index: get("host_index")?.parse().ok()?,
            index: get("index")?.parse().ok()?,
            kind: get("kind")?,
            id: Identity {
                perm_addr: get("perm_addr")?,
                parent: get("parent")?,
            },
            lower: Lower::parse(&get("lower")?)?,
        })
    }

    fn recorded(req: &Request) -> Option<Moved> {
        let env = &req.env;
        let items = attachment::get(RECORD, &req.conf.name, &env.container_id, &env.ifname);
        if items.is_empty() {
            return None;
        }
        let m = Moved::parse(&items);
        if m.is_none() {
            crate::warn!("host-device: ignoring an unreadable record of what ADD moved in");
        }
        m
    }
}

/// The record of the link `ifname` this ADD has just moved into `ns` as it is there now, for
/// an undo before the record was written.
fn just_moved(ns: &NetNs, ifname: &str, host_name: &str, host_ns: &NetNs) -> Result<Option<Moved>> {
    let mut cont = Handle::in_netns(ns)?;
    let Some(l) = cont.link_by_name(ifname)? else {
        return Ok(None);
    };
    Ok(Some(Moved {
        name: host_name.to_string(),
        host_index: l.index,
        index: l.index,
        kind: l.kind.clone().unwrap_or_default(),
        id: cont.link_identity(l.index)?.unwrap_or_default(),
        lower: Lower::of(&mut cont, &l, Some(host_ns))?,
    }))
}

/// Why the container's link `l` must stay where it is, None when it may go to the host. With
/// a record it must be what ADD moved in (kind, permanent address, parent device, where its
/// peer or lower link lives); without one (the Go plugin's ADD) it must be something a
/// container cannot make: a driver's device with a parent device or a permanent address, or
/// a link whose peer or lower link is on the host. Never one whose peer is in the container.
fn distrust(
    cont: &mut Handle,
    l: &Link,
    rec: Option<&Moved>,
    host_ns: &NetNs,
) -> Result<Option<String>> {
    let id = cont.link_identity(l.index)?.unwrap_or_default();
    let kind = l.kind.clone().unwrap_or_default();
    let lower = Lower::of(cont, l, Some(host_ns))?;
    if lower == Lower::Container {
        return Ok(Some(format!(
            "it is a {kind} link whose peer or lower link is in the container"
        )));
    }
    let why = match rec {
        Some(r) if kind != r.kind => format!("it is a {kind:?} link, ADD moved in a {:?}", r.kind),
        Some(r) if !r.id.perm_addr.is_empty() && id.perm_addr != r.id.perm_addr => format!(
            "its permanent address is {:?}, not {:?}",
            id.perm_addr, r.id.perm_addr
        ),
        Some(r) if !r.id.parent.is_empty() && id.parent != r.id.parent => {
            format!(
                "its parent device is {:?}, not {:?}",
                id.parent, r.id.parent
            )
        }
        Some(r) if lower != r.lower => format!(
            "its peer or lower link is {}, ADD's was {}",
            lower.item(),
            r.lower.item()
        ),
        Some(_) => return Ok(None),
        None if kind.is_empty() && (!id.parent.is_empty() || !id.perm_addr.is_empty()) => {
            return Ok(None);
        }
        None if kind.is_empty() => {
            "it has neither a parent device nor a permanent address, and no record".into()
        }
        None if matches!(lower, Lower::Host(_)) => return Ok(None),
        None => format!(
            "it is a {kind} link whose peer or lower link is not on the host, and no record"
        ),
    };
    Ok(Some(why))
}

/// The host name for a link moved in without a record (the Go plugin's ADD): its alias, as
/// upstream, unless that is no interface name or taken on the host; then `dev<index>`, the
/// name the kernel gives a device coming back from a dying namespace to a taken name.
fn name_for_host(l: &Link) -> Result<String> {
    let alias = l.alias.as_deref().unwrap_or("");
    if !alias.is_empty()
        && validate_config_ifname("alias", alias).is_ok()
        && Handle::new()?.link_by_name(alias)?.is_none()
    {
        return Ok(alias.to_string());
    }
    let name = format!("dev{}", l.index);
    crate::warn!(
        "host-device: {:?} has alias {alias:?}, which names no free host interface; it goes back as {name:?}",
        l.name
    );
    Ok(name)
}

/// Move the device ADD moved in (`rec`; without a record: CNI_IFNAME, when [`distrust`] finds
/// nothing against it) from the container `ns` to `host_ns` under its host name, alias
/// cleared. `Ok(None)`: there is no such link, or it stays (with a note on stderr). On
/// failure the link is back in the container as it was.
///
/// It is renamed in the container, then moved out: one move, and the host sees only its own
/// name come back. Only when the container has another link of that name does it go through
/// a temporary namespace.
fn back_to_host(
    ns: &NetNs,
    ifname: &str,
    host_ns: &NetNs,
    rec: Option<&Moved>,
) -> Result<Option<String>> {
    let mut cont = Handle::in_netns(ns)?;
    let found = match rec {
        Some(r) => cont.link_by_index(r.index)?,
        None => cont.link_by_name(ifname)?,
    };
    let Some(l) = found else {
        return Ok(None);
    };
    if let Some(why) = distrust(&mut cont, &l, rec, host_ns)? {
        crate::warn!("host-device: {:?} stays in the container: {why}", l.name);
        return Ok(None);
    }
    let orig = match rec {
        Some(r) => r.name.clone(),
        None => name_for_host(&l)?,
    };
    let from = (l.name.as_str(), l.alias.as_deref().unwrap_or(""));
    let to = (orig.as_str(), "");
    let moved = if orig != l.name && cont.link_by_name(&orig)?.is_some() {
        via_temporary(&mut cont, l.index, from, to, ns, host_ns)
    } else {
        let r = (|| {
            // Only a link that is down can be renamed.
            if l.up {
                cont.set_up(l.index, false)?;
            }
            rename_and_move(&mut cont, l.index, to, host_ns)
        })();
        r.map_err(|e| {
            let e = e.ctx(format_args!("failed to move {:?} back as {orig:?}", l.name));
            and_undo(e, rename(&mut cont, l.index, from))
        })
    };
    if let Err(e) = moved {
        let u = (|| {
            if l.up {
                let i = cont.link(&l.name)?.index;
                cont.set_up(i, true)?;
            }
            Ok(())
        })();
        return Err(and_undo(e, u));
    }
    Ok(Some(orig))
}

fn add(req: &Request) -> Result<CniResult> {
    let mut c = load(req)?;
    c.resolve()?;
    let ns = req.netns()?;
    let ifname = &req.env.ifname;
    let mut result = CniResult {
        interfaces: vec![Interface {
            name: ifname.clone(),
            sandbox: req.env.netns.clone(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut undo = Undo::new("host-device");
    let r = (|| {
        let mut moved = None;
        if !c.dpdk {
            let mut host = Handle::new()?;
            let dev = find(&c, &mut host).map_err(|e| e.ctx("failed to find host device"))?;
            let mut cont = Handle::in_netns(&ns)?;
            if cont.link_by_name(ifname)?.is_some() {
                return Err(Error::internal(format!(
                    "container interface name provided ({ifname}) already exists"
                )));
            }
            let id = host.link_identity(dev.index)?.unwrap_or_default();
            let lower = Lower::of(&mut host, &dev, None)?;
            let link = move_in(&mut host, &mut cont, &dev, &ns, ifname)?;
            let rec = Moved {
                name: dev.name.clone(),
                host_index: dev.index,
                index: link.index,
                kind: dev.kind.clone().unwrap_or_default(),
                id,
                lower,
            };
            let items = rec.items();
            let ns_ref = &ns;
            undo.push(format!("move {ifname} back to {}", dev.name), move || {
                back_to_host(ns_ref, ifname, &NetNs::current()?, Some(&rec))?;
                restore_up(&mut host, &dev)
            });
            // On the host, where the container cannot touch it: what DEL may take back.
            let (net, cid) = (req.conf.name.as_str(), req.env.container_id.as_str());
            attachment::record(RECORD, net, cid, ifname, &items)?;
            undo.push("forget the record", move || {
                attachment::forget(RECORD, net, cid, ifname);
                Ok(())
            });
            result.interfaces[0].mac = link.mac.map(|m| fmt_mac(&m)).unwrap_or_default();
            moved = Some((cont, link.index));
        }
        let Some(ipam) = c.ipam else {
            return Ok(result);
        };
        let r = iface::ipam_add(ipam, req, &mut undo)?;
        result.ips = r.ips;
        result.routes = r.routes;
        for ip in &mut result.ips {
            ip.interface = Some(0);
        }
        if let Some((mut cont, index)) = moved {
            iface::configure(
                &ns,
                &mut cont,
                ifname,
                index,
                &result,
                0,
                super::shared::settle::Dad::Detect,
            )?;
        }
        result.dns = req.conf.dns.clone().unwrap_or_default();
        Ok(result)
    })();
    undo.finish(r)
}

fn del(req: &Request) -> Result<()> {
    let mut c = load(req)?;
    let mut errors = ErrorList::new();
    if let Some(ipam) = c.ipam {
        errors.check(delegate::del(ipam, req));
    }
    // A device that has gone from sysfs cannot be in DPDK mode: try to move CNI_IFNAME out.
    let dpdk = c.resolve().is_ok() && c.dpdk;
    if dpdk {
        return errors.into_result();
    }
    let env = &req.env;
    let forget = || attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
    match req.netns_if_exists() {
        Ok(Some(ns)) => {
            let rec = Moved::recorded(req);
            let back =
                NetNs::current().and_then(|h| back_to_host(&ns, &env.ifname, &h, rec.as_ref()));
            // Kept when the move failed: the next DEL needs it.
            if errors.check(back).is_some() {
                forget();
            }
        }
        // The namespace is gone, and what was in it with it.
        Ok(None) if !env.netns.is_empty() => forget(),
        Ok(None) => {}
        Err(e) => errors.push(e),
    }
    errors.into_result()
}

fn check(req: &Request) -> Result<()> {
    let mut c = load(req)?;
    c.resolve()?;
    let ns = req.netns()?;
    if let Some(ipam) = c.ipam {
        delegate::delegate(Command::Check, ipam, req)?;
    }
    if req.prev_result()?.is_none() {
        return Err(Error::config("Required prevResult missing"));
    }
    if c.dpdk {
        return Ok(());
    }
    let mut cont = Handle::in_netns(&ns)?;
    let (prev, pos, link) = checked_any_iface(req, &mut cont)?;
    iface::check(&mut cont, &link, &prev, pos)
}

fn status(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Status, req)
}

/// IPAM's GC, and the records of attachments the runtime no longer lists.
fn gc(req: &Request) -> Result<()> {
    let mut errors = ErrorList::new();
    errors.check(delegate::to_ipam(Command::Gc, req));
    if let Some(valid) = req.valid_attachments() {
        for (cid, ifname, _) in attachment::list(RECORD, &req.conf.name) {
            if !valid
                .iter()
                .any(|a| a.container_id == cid && a.ifname == ifname)
            {
                attachment::forget(RECORD, &req.conf.name, &cid, &ifname);
            }
        }
    }
    errors.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_refuse_what_they_did_not_write() {
        let m = Moved {
            name: "enp3s0f1".into(),
            host_index: 7,
            index: 3,
            kind: String::new(),
            id: Identity {
                perm_addr: "0242ac110002".into(),
                parent: "pci:0000:3b:00.1".into(),
            },
            lower: Lower::None,
        };
        assert_eq!(Moved::parse(&m.items()), Some(m.clone()));
        for lower in [Lower::Host(12), Lower::Elsewhere, Lower::Container] {
            let v = Moved {
                kind: "veth".into(),
                id: Identity::default(),
                lower,
                ..m.clone()
            };
            assert_eq!(Moved::parse(&v.items()), Some(v));
        }
        let mut bad = m.items();
        bad[0] = "name ../x".into();
        assert_eq!(Moved::parse(&bad), None, "a name that is no interface name");
        let mut bad = m.items();
        bad[2] = "index x".into();
        assert_eq!(Moved::parse(&bad), None);
        assert_eq!(Moved::parse(&m.items()[..3]), None, "a record cut short");
        assert_eq!(Lower::parse("host:"), None);
    }

    #[test]
    fn sysfs_entries_stay_in_their_directory() {
        for ok in ["", "0000:00:1f.6", "mlx5_core.sf.4"] {
            assert!(sysfs_entry("k", ok).is_ok(), "{ok}");
        }
        for bad in [".", "..", "a/b", "../x", "a\nb"] {
            let e = sysfs_entry("pciBusID", bad).unwrap_err();
            assert_eq!(e.code, 7);
            assert!(e.msg.contains("pciBusID"), "{}", e.msg);
        }
    }
}
