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
//! DEL releases the addresses, then renames CNI_IFNAME in the container to the name in its
//! alias, clears the alias and moves it back to the host (through a temporary namespace only
//! when the container has another link of that name); it is left down, as upstream (its
//! earlier state is unknown); addresses went with the move. A missing namespace
//! or device is success (upstream fails), and a DEL without CNI_NETNS still releases the
//! addresses (upstream does nothing). CHECK runs IPAM's CHECK, then (not for DPDK devices)
//! compares CNI_IFNAME's MAC, addresses and routes with the prevResult. STATUS and GC go to
//! the IPAM plugin (upstream's GC is a no-op).
//!
//! Deviations: paths from `kernelpath`, `pciBusID` and `deviceID` are refused at load when
//! they could leave their directory (`..`, `/`); MAC addresses are 6 bytes (an InfiniBand
//! device's 20-byte address is neither matched by `hwaddr` nor reported).

use super::container::checked_any_iface;
use super::iface;
use crate::cni::env::validate_config_ifname;
use crate::cni::result::Interface;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netlink::{Handle, Link, fmt_mac, parse_mac};
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
        let u = back_to_host(ns, ifname, &host_ns).and_then(|_| restore_up(host, dev));
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

/// Move CNI_IFNAME from the container `ns` to `host_ns` under the name in its alias (cleared).
/// `Ok(None)`: there is no such link. On failure the link is back in the container as it was.
///
/// It is renamed in the container, then moved out: one move, and the host sees only its own
/// name come back. Only when the container has another link of that name does it go through
/// a temporary namespace.
fn back_to_host(ns: &NetNs, ifname: &str, host_ns: &NetNs) -> Result<Option<String>> {
    let mut cont = Handle::in_netns(ns)?;
    let Some(l) = cont.link_by_name(ifname)? else {
        return Ok(None);
    };
    let orig = l.alias.clone().filter(|a| !a.is_empty()).ok_or_else(|| {
        Error::internal(format!(
            "failed to find original ifname for {ifname:?} (alias is not set)"
        ))
    })?;
    let from = (ifname, orig.as_str());
    let to = (orig.as_str(), "");
    let moved = if orig != ifname && cont.link_by_name(&orig)?.is_some() {
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
            let e = e.ctx(format_args!("failed to move {ifname:?} back as {orig:?}"));
            and_undo(e, rename(&mut cont, l.index, from))
        })
    };
    if let Err(e) = moved {
        let u = (|| {
            if l.up {
                let i = cont.link(ifname)?.index;
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
    let ns = NetNs::open(&req.env.netns).map_err(Error::from)?;
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
            let link = move_in(&mut host, &mut cont, &dev, &ns, ifname)?;
            let ns_ref = &ns;
            undo.push(format!("move {ifname} back to {}", dev.name), move || {
                back_to_host(ns_ref, ifname, &NetNs::current()?)?;
                restore_up(&mut host, &dev)
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
                super::settle::Dad::Detect,
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
    if !dpdk && let Some(ns) = errors.check(NetNs::open_existing(&req.env.netns)).flatten() {
        errors.check(NetNs::current().and_then(|h| back_to_host(&ns, &req.env.ifname, &h)));
    }
    errors.into_result()
}

fn check(req: &Request) -> Result<()> {
    let mut c = load(req)?;
    c.resolve()?;
    let ns = NetNs::open(&req.env.netns).map_err(Error::from)?;
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

fn gc(req: &Request) -> Result<()> {
    delegate::to_ipam(Command::Gc, req)
}

#[cfg(test)]
mod tests {
    use super::*;

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
