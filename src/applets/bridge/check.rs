//! CHECK: the container's interface, addresses and routes against the prevResult, the host
//! veth on the bridge, as upstream checks them.

use super::load;
use crate::applets::shared::iface;
use crate::cni::{Command, Error, Request, Result, delegate};
use crate::netlink::{Handle, fmt_mac};

pub(super) fn check(req: &Request) -> Result<()> {
    let b = load(req)?;
    if let Some(name) = req.ipam_type() {
        delegate::delegate(Command::Check, name, req)?;
    }
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("bridge: required prevResult missing"))?;
    if let Some(in_container) = super::chain::attached_in(&prev, &b, &req.env.ifname) {
        return super::chain::check(req, &b, in_container);
    }
    let mut host = Handle::new()?;
    let br = host
        .link_by_name(&b.c.bridge)?
        .filter(|l| l.kind.as_deref() == Some("bridge"))
        .ok_or_else(|| Error::internal(format!("bridge {:?} not found", b.c.bridge)))?;
    // Both ways, as upstream: promiscMode false with a promiscuous bridge is a mismatch too.
    if b.c.promisc_mode != br.promisc {
        return Err(Error::internal(format!(
            "bridge {:?}: promiscMode is {} but promiscuous mode is {}",
            b.c.bridge,
            b.c.promisc_mode,
            if br.promisc { "on" } else { "off" }
        )));
    }
    let ifname = &req.env.ifname;
    let pos = prev
        .interfaces
        .iter()
        .position(|i| &i.name == ifname && !i.sandbox.is_empty())
        .ok_or_else(|| Error::internal(format!("interface {ifname:?} not found in prevResult")))?;
    let want = &prev.interfaces[pos];
    if want.sandbox != req.env.netns {
        return Err(Error::internal(format!(
            "sandbox in prevResult {} doesn't match configured netns {}",
            want.sandbox, req.env.netns
        )));
    }
    let ns = req.netns()?;
    let mut cont = Handle::in_netns(&ns)?;
    let cv = cont
        .link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("container interface {ifname:?} not found")))?;
    if cv.kind.as_deref() != Some("veth") {
        return Err(Error::internal(format!(
            "container interface {ifname:?} is not a veth"
        )));
    }
    let mac = cv.mac.map(|m| fmt_mac(&m)).unwrap_or_default();
    if !want.mac.is_empty() && !want.mac.eq_ignore_ascii_case(&mac) {
        return Err(Error::internal(format!(
            "interface {ifname:?} has MAC {mac}, prevResult says {}",
            want.mac
        )));
    }
    let peer = cv
        .link
        .ok_or_else(|| Error::internal(format!("cannot find the host peer of {ifname:?}")))?;
    let hv = host
        .link_by_index(peer)?
        .filter(|l| l.master == Some(br.index))
        .ok_or_else(|| {
            Error::internal(format!(
                "host veth of {ifname:?} is not attached to bridge {:?}",
                b.c.bridge
            ))
        })?;
    if !prev
        .interfaces
        .iter()
        .any(|i| i.name == hv.name && i.sandbox.is_empty())
    {
        return Err(Error::internal(format!(
            "host veth {:?} not found in prevResult",
            hv.name
        )));
    }
    iface::check(&mut cont, &cv, &prev, pos)?;
    Ok(())
}
