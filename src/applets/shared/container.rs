//! What the applets that put a link into the container (vlan, macvlan, ipvlan, ptp,
//! host-device, dummy, tap) do alike after ADD: find CNI_IFNAME in CHECK's prevResult and
//! compare it with the kernel's, delete it in DEL, and read the MAC a runtime asks for. How the
//! link is made is in `link.rs`.

use crate::applets::shared::iface;
use crate::cni::result::CniResult;
use crate::cni::{Error, Request, Result};
use crate::netlink::{Handle, Link, fmt_mac};

/// What CHECK found for CNI_IFNAME: the prevResult (required), CNI_IFNAME's position in its
/// interfaces, and the link of that name in the container.
pub struct Checked {
    pub prev: CniResult,
    pub pos: usize,
    pub link: Link,
}

/// [`Checked`] with the handle in the container it was found through.
pub struct CheckedOwn {
    pub cont: Handle,
    pub prev: CniResult,
    pub pos: usize,
    pub link: Link,
}

impl CheckedOwn {
    /// CHECK's end: the prevResult's addresses and routes for the link are there
    /// ([`iface::check`]).
    pub fn check_addresses(mut self) -> Result<()> {
        iface::check(&mut self.cont, &self.link, &self.prev, self.pos)
    }
}

/// CHECK's start for an applet that makes one container interface of `kind`: CNI_NETNS opened
/// (a missing one is an error), the IPAM plugin's CHECK, then [`checked_iface`], in that order.
/// Returns a handle in the container with what `checked_iface` found.
pub fn check_own_iface(req: &Request, ipam: Option<&str>, kind: &str) -> Result<CheckedOwn> {
    let ns = req.netns()?;
    if let Some(ipam) = ipam {
        crate::cni::delegate::delegate(crate::cni::Command::Check, ipam, req)?;
    }
    let mut cont = Handle::in_netns(&ns)?;
    let Checked { prev, pos, link } = checked_iface(req, &mut cont, kind)?;
    Ok(CheckedOwn {
        cont,
        prev,
        pos,
        link,
    })
}

/// CHECK's common part: the prevResult (required), the position of CNI_IFNAME in it with
/// CNI_NETNS as its sandbox, and the link of that name in the container, which must be of
/// `kind` and have the MAC the prevResult recorded.
pub fn checked_iface(req: &Request, cont: &mut Handle, kind: &str) -> Result<Checked> {
    let found = checked_any_iface(req, cont)?;
    if found.link.kind.as_deref() != Some(kind) {
        return Err(Error::internal(format!(
            "Error: Container interface {} not of type {kind}",
            req.env.ifname
        )));
    }
    Ok(found)
}

/// [`checked_iface`] for a link of any kind (host-device moves in whatever it is given).
pub fn checked_any_iface(req: &Request, cont: &mut Handle) -> Result<Checked> {
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("required prevResult missing"))?;
    let ifname = &req.env.ifname;
    let pos = prev
        .interfaces
        .iter()
        .position(|i| &i.name == ifname && i.sandbox == req.env.netns)
        .ok_or_else(|| {
            Error::internal(format!(
                "Sandbox in prevResult doesn't match configured netns: {}",
                req.env.netns
            ))
        })?;
    let link = cont.link_by_name(ifname)?.ok_or_else(|| {
        Error::internal(format!(
            "Container Interface name in prevResult: {ifname} not found"
        ))
    })?;
    let want = &prev.interfaces[pos].mac;
    let mac = link.mac.map(|m| fmt_mac(&m)).unwrap_or_default();
    if !want.is_empty() && !want.eq_ignore_ascii_case(&mac) {
        return Err(Error::internal(format!(
            "Interface {ifname} Mac {want} doesn't match container Mac: {mac}"
        )));
    }
    Ok(Checked { prev, pos, link })
}

/// The MAC a runtime asks for as text, over `configured`: CNI_ARGS `MAC`, then
/// `runtimeConfig.mac` (later wins, as upstream reads them); empty values are ignored.
pub fn requested_mac(req: &Request, configured: String) -> Result<String> {
    let mut mac = configured;
    if let Some(m) = req
        .env
        .cni_args(&["MAC"])?
        .get("MAC")
        .filter(|m| !m.is_empty())
    {
        mac = m.to_string();
    }
    if let Some(m) = req.runtime_config_str("mac")?.filter(|m| !m.is_empty()) {
        mac = m.to_string();
    }
    Ok(mac)
}

/// DEL of an applet that makes one container interface of `kind`: the IPAM plugin's DEL first
/// (as upstream: its failure fails the DEL and leaves the interface for a retry), then the
/// interface.
pub fn delete_with_ipam(req: &Request, ipam: Option<&str>, applet: &str, kind: &str) -> Result<()> {
    if let Some(ipam) = ipam {
        crate::cni::delegate::del(ipam, req)?;
    }
    delete_own_link(req, applet, kind)
}

/// DEL's link part: delete CNI_IFNAME in the container when it is a `kind` link. A link of
/// another kind is not ours and is left alone with a note; a missing netns or link is fine.
pub fn delete_own_link(req: &Request, applet: &str, kind: &str) -> Result<()> {
    let Some(ns) = req.netns_if_exists()? else {
        return Ok(());
    };
    let mut cont = Handle::in_netns(&ns)?;
    let ifname = &req.env.ifname;
    match cont.link_by_name(ifname)? {
        None => Ok(()),
        Some(l) if l.kind.as_deref() != Some(kind) => {
            crate::warn!(
                "{applet}: {ifname} in {} is a {} link, not a {kind}: left alone",
                req.env.netns,
                l.kind.as_deref().unwrap_or("physical")
            );
            Ok(())
        }
        Some(l) => match cont.del_link_unlisted(l.index) {
            Err(e) if !e.is_not_found() => {
                Err(Error::from(e).ctx(format_args!("failed to delete {ifname}")))
            }
            _ => Ok(()),
        },
    }
}
