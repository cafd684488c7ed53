//! Chained onto an existing interface (CONVENTIONS.md, "Chained Plugins"): when the prevResult
//! already lists CNI_IFNAME — a tap made by `tap`, a host-side interface a VM runtime made —
//! the bridge attaches that interface instead of creating a veth. Upstream's bridge has no such
//! mode (it fails: "container veth name provided (eth0) already exists").
//!
//! The interface joins a bridge where it lives: an entry without `sandbox` is on the host and
//! joins the host's bridge; one whose sandbox is CNI_NETNS is in the container and joins a
//! bridge of that name in the container (created if missing, as on the host). Only the L2 keys
//! apply (`bridge`, `mtu` of a new bridge, `promiscMode`, `hairpinMode`, `portIsolation`,
//! `vlan`, `vlanTrunk`, `preserveDefaultVlan`); keys that need our veth or addresses are a
//! config error. The result is the prevResult with the bridge appended — after the interface,
//! which is how CHECK and DEL tell this mode from ours (there the bridge comes first). DEL
//! detaches the interface and never deletes it: its creator does.

use super::port::setup_port_vlans;
use super::{Bridge, ensure_bridge, iface_of};
use crate::cni::result::CniResult;
use crate::cni::{Context, Error, Request, Result};
use crate::netlink::{Handle, PortOpts};
use crate::undo::Undo;

/// ADD: whether the prevResult lists CNI_IFNAME, and then whether it is in the container.
pub(super) fn attach_target(req: &Request, prev: &CniResult) -> Result<Option<bool>> {
    let Some(i) = prev.interfaces.iter().find(|i| i.name == req.env.ifname) else {
        return Ok(None);
    };
    match i.sandbox.as_str() {
        "" => Ok(Some(false)),
        s if s == req.env.netns => Ok(Some(true)),
        s => Err(Error::config(format!(
            "prevResult interface {:?} is in sandbox {s:?}, not in CNI_NETNS",
            i.name
        ))),
    }
}

/// CHECK/DEL: `Some(in_container)` when `prev` is a result of this mode.
pub(super) fn attached_in(prev: &CniResult, b: &Bridge, ifname: &str) -> Option<bool> {
    let pos = |name: &str| prev.interfaces.iter().position(|i| i.name == name);
    let (i, br) = (pos(ifname)?, pos(&b.c.bridge)?);
    (br > i).then(|| !prev.interfaces[i].sandbox.is_empty())
}

/// Run `f` with a handle in the namespace of the attached interface (sysctls included).
fn in_place<T>(req: &Request, in_container: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if in_container {
        req.netns()?.enter(f)?
    } else {
        f()
    }
}

pub(super) fn add(req: &Request, b: &Bridge, prev: CniResult, in_cont: bool) -> Result<CniResult> {
    let c = &b.c;
    for (set, key) in [
        (req.ipam_type().is_some(), "ipam"),
        (c.is_gateway, "isGateway"),
        (c.ip_masq, "ipMasq"),
        (c.macspoofchk, "macspoofchk"),
        (c.disable_container_interface, "disableContainerInterface"),
    ] {
        if set {
            return Err(Error::config(format!(
                "{key} is not supported when bridge attaches {:?} from prevResult",
                req.env.ifname
            )));
        }
    }
    in_place(req, in_cont, || {
        let ifname = &req.env.ifname;
        let mut h = Handle::new()?;
        let br = ensure_bridge(&mut h, b)?;
        let l = h.link_by_name(ifname)?.ok_or_else(|| {
            Error::internal(format!("interface {ifname:?} from prevResult not found"))
        })?;
        let mut undo = Undo::new("bridge");
        h.set_master(l.index, Some(br.index)).ctx(format_args!(
            "failed to connect {ifname:?} to bridge {}",
            c.bridge
        ))?;
        let index = l.index;
        undo.push(format!("port {ifname}"), move || {
            Ok(Handle::new()?.set_master(index, None)?)
        });
        let r = (|| {
            if c.hairpin_mode || c.port_isolation {
                let opts = PortOpts {
                    hairpin: c.hairpin_mode.then_some(true),
                    isolated: c.port_isolation.then_some(true),
                    ..Default::default()
                };
                h.set_bridge_port(index, &opts)
                    .ctx(format_args!("failed to set port options on {ifname:?}"))?;
            }
            setup_port_vlans(&mut h, index, b)
                .ctx(format_args!("failed to set VLANs on {ifname:?}"))?;
            h.set_up(index, true)
                .ctx(format_args!("failed to set {ifname:?} up"))?;
            let br = h.link(&c.bridge)?;
            let mut out = prev;
            let sandbox = if in_cont { req.env.netns.as_str() } else { "" };
            let mut i = iface_of(&br, sandbox);
            i.mtu = c.mtu.map(|_| br.mtu);
            out.interfaces.push(i);
            Ok(out)
        })();
        undo.finish(r)
    })
}

/// DEL of this mode: take the interface off the bridge if it is still on it.
pub(super) fn detach(req: &Request, b: &Bridge, in_container: bool) -> Result<()> {
    if in_container && req.netns_if_exists()?.is_none() {
        return Ok(());
    }
    in_place(req, in_container, || {
        let mut h = Handle::new()?;
        let (Some(l), Some(br)) = (
            h.link_by_name(&req.env.ifname)?,
            h.link_by_name(&b.c.bridge)?,
        ) else {
            return Ok(());
        };
        if l.master == Some(br.index) {
            h.set_master(l.index, None)
                .ctx(format_args!("failed to detach {:?}", l.name))?;
        }
        Ok(())
    })
}

/// CHECK of this mode: the bridge exists where the interface is, and the interface is on it.
pub(super) fn check(req: &Request, b: &Bridge, in_container: bool) -> Result<()> {
    in_place(req, in_container, || {
        let mut h = Handle::new()?;
        let ifname = &req.env.ifname;
        let br = h
            .link_by_name(&b.c.bridge)?
            .filter(|l| l.kind.as_deref() == Some("bridge"))
            .ok_or_else(|| Error::internal(format!("bridge {:?} not found", b.c.bridge)))?;
        match h.link_by_name(ifname)? {
            Some(l) if l.master == Some(br.index) => Ok(()),
            _ => Err(Error::internal(format!(
                "{ifname:?} is not attached to bridge {:?}",
                b.c.bridge
            ))),
        }
    })
}
