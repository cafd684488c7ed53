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

mod moves;
mod record;

use super::shared::container::{Checked, checked_any_iface};
use super::shared::iface;
use crate::attachment;
use crate::cni::env::validate_config_ifname;
use crate::cni::result::Interface;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netlink::{Handle, Link, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::undo::{ErrorList, Undo};
use moves::{back_to_host, move_in, restore_up};
use record::{Lower, Moved, RECORD};
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
        m => Some(parse_mac(m).ctx("hwaddr")?),
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
            let dev = find(&c, &mut host).ctx("failed to find host device")?;
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
    let Checked { prev, pos, link } = checked_any_iface(req, &mut cont)?;
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
    use crate::netlink::Identity;

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
