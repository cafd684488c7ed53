//! `vrf` (upstream `plugins/meta/vrf`, chained): puts CNI_IFNAME into a VRF in the container.
//!
//! Keys: `vrfname` (required), `table` (0 or absent: when the VRF is created, the first table
//! from 1 up that no VRF of the namespace uses). ADD creates the VRF (up) unless one of that
//! name exists (then a configured `table` must be its table), refuses an interface that already
//! has a master, enslaves it, puts back global IPv6 addresses the kernel dropped on the way
//! (waiting until their local route is in the VRF's table) and moves the interface's
//! universe-scope main-table routes into the VRF's table (v1.9 behaviour; older releases lost
//! them). The prevResult is passed through. DEL releases the interface and deletes the VRF
//! once no interface is left in it; it tolerates a missing namespace, VRF or interface. CHECK
//! asserts that the interface is in the VRF.
//!
//! Beyond upstream: the interface's IPv6 addresses, which the enslaving makes tentative again,
//! are usable when ADD returns (the shared settling step, `settle.rs`; a duplicate fails the
//! ADD); a failed ADD releases the interface (its routes and addresses restored)
//! and deletes a VRF it created; DEL releases the interface only from this VRF (upstream from
//! any master), succeeds when the interface is already gone (upstream fails) and leaves a
//! non-VRF link of that name alone with a note; CHECK also compares a configured `table`.
//!
//! This build machine's kernel has no vrf: the applet is tested in the qemu VM
//! (tests/vm/vrf.sh), against the Go plugin there.

use crate::applets::shared::settle::{Dad, Settle};
use crate::cni::env::validate_config_ifname;
use crate::cni::{Applet, CniResult, Context, Error, Request, Result, Version};
use crate::netlink::{Addr, Family, Handle, IFA_F_NODAD, IFA_F_NOPREFIXROUTE, Link, Route};
use crate::netlink::{SCOPE_UNIVERSE, TABLE_MAIN};
use crate::netns::NetNs;
use crate::undo::Undo;
use serde::Deserialize;
use std::time::Duration;

pub static APPLET: Applet = Applet {
    name: "vrf",
    versions: &[Version::V031, Version::V040, Version::V100, Version::V110],
    add,
    del,
    check,
    status: None,
    gc: None,
};

#[derive(Deserialize, Default)]
struct Conf {
    #[serde(default)]
    vrfname: String,
    #[serde(default)]
    table: u32,
}

fn load(req: &Request) -> Result<Conf> {
    let c: Conf = req.decode()?;
    if c.vrfname.is_empty() {
        return Err(Error::config(
            "vrfname: configuration is expected to have a valid vrf name",
        ));
    }
    validate_config_ifname("vrfname", &c.vrfname)?;
    Ok(c)
}

fn prev(req: &Request) -> Result<CniResult> {
    req.prev_result()?
        .ok_or_else(|| Error::config("prevResult: missing prevResult from earlier plugin"))
}

/// The VRF called `name`: None when absent, an error when the link is something else.
fn find(h: &mut Handle, name: &str) -> Result<Option<Link>> {
    match h.link_by_name(name)? {
        Some(l) if l.kind.as_deref() != Some("vrf") => {
            Err(Error::internal(format!("Netlink {name} is not a VRF")))
        }
        l => Ok(l),
    }
}

fn add(req: &Request) -> Result<CniResult> {
    let c = load(req)?;
    let prev = prev(req)?;
    let ns = req.netns()?;
    let mut h = Handle::in_netns(&ns)?;
    let mut undo = Undo::new("vrf");
    let r = attach(&c, &req.env.ifname, &ns, &mut h, &mut undo);
    undo.finish(r.ctx("cmdAdd failed").map(|()| prev))
}

/// The VRF, created (up) with the configured or first free table when absent.
fn vrf<'a>(c: &'a Conf, ns: &'a NetNs, h: &mut Handle, undo: &mut Undo<'a>) -> Result<Link> {
    if let Some(v) = find(h, &c.vrfname)? {
        if c.table != 0 && v.vrf_table != Some(c.table) {
            return Err(Error::internal(format!(
                "VRF {} already exist with different routing table {}",
                c.vrfname,
                v.vrf_table.unwrap_or(0)
            )));
        }
        return Ok(v);
    }
    let mut table = c.table;
    if table == 0 {
        let taken: Vec<u32> = h.links()?.iter().filter_map(|l| l.vrf_table).collect();
        table = (1..u32::MAX)
            .find(|t| !taken.contains(t))
            .ok_or_else(|| Error::internal("Failed to find an available routing id"))?;
    }
    match h.add_vrf(&c.vrfname, table) {
        // Another ADD in this namespace made it meanwhile.
        Err(e) if e.is_exists() => return vrf(c, ns, h, undo),
        r => r.ctx(format_args!("could not add VRF {}", c.vrfname))?,
    }
    let v = h.link(&c.vrfname)?;
    let index = v.index;
    undo.push(format!("vrf {}", c.vrfname), move || {
        let mut h = Handle::in_netns(ns)?;
        if h.links()?.iter().all(|l| l.master != Some(index)) {
            h.del_link(index)?;
        }
        Ok(())
    });
    h.set_up(index, true).map_err(|e| {
        Error::from(e).ctx(format_args!("could not set link up for VRF {}", c.vrfname))
    })?;
    Ok(v)
}

/// Global (universe-scope) IPv6 addresses of `index`: the kernel drops them when enslaving
/// unless keep_addr_on_down is set.
fn global6(h: &mut Handle, index: u32) -> Result<Vec<Addr>> {
    let mut a = h.addrs(Some(index), Family::V6)?;
    a.retain(|a| a.scope == SCOPE_UNIVERSE);
    Ok(a)
}

/// Put back the addresses of `before` that `index` lost, with their NODAD and NOPREFIXROUTE
/// flags; `probe` (the settling step's flags) is added to the others.
fn restore_addrs(h: &mut Handle, index: u32, before: &[Addr], probe: u32) -> Result<Vec<Addr>> {
    let now = global6(h, index)?;
    let mut readded = Vec::new();
    for a in before
        .iter()
        .filter(|a| !now.iter().any(|n| n.net == a.net))
    {
        let kept = a.flags & (IFA_F_NODAD | IFA_F_NOPREFIXROUTE);
        let flags = if kept & IFA_F_NODAD != 0 {
            kept
        } else {
            kept | probe
        };
        h.add_addr(index, a.net, flags)?;
        readded.push(a.clone());
    }
    Ok(readded)
}

fn attach<'a>(
    c: &'a Conf,
    ifname: &str,
    ns: &'a NetNs,
    h: &mut Handle,
    undo: &mut Undo<'a>,
) -> Result<()> {
    let v = vrf(c, ns, h, undo)?;
    let table = v.vrf_table.unwrap_or(c.table);
    let link = h
        .link_by_name(ifname)?
        .ok_or_else(|| Error::internal(format!("could not get link by name {ifname}")))?;
    if let Some(m) = link.master {
        let name = h.link_by_index(m)?.map(|l| l.name).unwrap_or_default();
        return Err(Error::internal(format!(
            "interface {ifname} has already a master set: {name}"
        )));
    }
    let before = global6(h, link.index)?;
    // Enslaving cycles the link down and up: the kernel runs duplicate address detection again
    // for every IPv6 address it kept (keep_addr_on_down) or that is put back below, and they are
    // unusable until it is over (upstream returns them so). The shared settling step makes that
    // fast and waits for it; a link without a carrier (a tap) is not waited for, as before.
    let settle = (!before.is_empty())
        .then(|| Settle::begin(ns, ifname, link.index, Dad::Deferred))
        .transpose()?;
    let probe = settle.as_ref().map_or(0, Settle::addr_flags);
    let routes: Vec<Route> = h
        .routes(Family::All, Some(TABLE_MAIN))?
        .into_iter()
        .filter(|r| r.oif == Some(link.index) && r.scope == SCOPE_UNIVERSE)
        .collect();
    h.set_master(link.index, Some(v.index)).map_err(|e| {
        Error::from(e).ctx(format_args!(
            "could not set vrf {} as master of {ifname}",
            c.vrfname
        ))
    })?;
    let (index, saved, kept) = (link.index, routes.clone(), before.clone());
    undo.push(format!("{ifname} in vrf {}", c.vrfname), move || {
        let mut h = Handle::in_netns(ns)?;
        h.set_master(index, None)?;
        restore_addrs(&mut h, index, &kept, 0)?;
        for r in &saved {
            h.route_replace(r)?;
        }
        Ok(())
    });
    let readded = restore_addrs(h, link.index, &before, probe)?;
    if let Some(s) = settle {
        let nets: Vec<_> = before.iter().map(|a| a.net).collect();
        s.wait(h, &nets)?;
    }
    for a in readded {
        wait_local_route(h, &a, table, link.index)?;
    }
    for r in routes {
        let r = Route { table, ..r };
        h.route_replace(&r)
            .ctx(format_args!("could not add route '{}'", r.dst))?;
    }
    Ok(())
}

/// Wait (10 ms doubling, about 2.5 s in all, as upstream) until the local route of a restored
/// address is in the VRF's table: routes through it can only be added after that.
fn wait_local_route(h: &mut Handle, a: &Addr, table: u32, index: u32) -> Result<()> {
    let host = ipnet::IpNet::from(a.net.addr());
    for i in 0..=8 {
        if h.routes(Family::V6, Some(table))?
            .iter()
            .any(|r| r.dst == host && r.oif == Some(index))
        {
            return Ok(());
        }
        if i < 8 {
            std::thread::sleep(Duration::from_millis(10 << i));
        }
    }
    Err(Error::internal(format!(
        "failed getting local/host addresses for link {index} in table {table} with dst {}",
        a.net
    )))
}

fn del(req: &Request) -> Result<()> {
    let c = load(req)?;
    let Some(ns) = req.netns_if_exists()? else {
        return Ok(());
    };
    let mut h = Handle::in_netns(&ns)?;
    let v = match h.link_by_name(&c.vrfname)? {
        None => return Ok(()),
        Some(l) if l.kind.as_deref() != Some("vrf") => {
            crate::warn!("vrf: {} is not a VRF: left alone", c.vrfname);
            return Ok(());
        }
        Some(v) => v,
    };
    if let Some(l) = h.link_by_name(&req.env.ifname)?
        && l.master == Some(v.index)
    {
        h.set_master(l.index, None).map_err(|e| {
            Error::from(e).ctx(format_args!(
                "resetMaster: could not reset master of {}",
                l.name
            ))
        })?;
    }
    if h.links()?.iter().all(|l| l.master != Some(v.index)) {
        match h.del_link(v.index) {
            Err(e) if !e.is_not_found() => return Err(e.into()),
            _ => {}
        }
    }
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let c = load(req)?;
    prev(req)?;
    let ns = req.netns()?;
    let mut h = Handle::in_netns(&ns)?;
    let v = find(&mut h, &c.vrfname)?
        .ok_or_else(|| Error::internal(format!("Link not found: vrf {}", c.vrfname)))?;
    if c.table != 0 && v.vrf_table != Some(c.table) {
        return Err(Error::internal(format!(
            "VRF {} has routing table {}, not {}",
            c.vrfname,
            v.vrf_table.unwrap_or(0),
            c.table
        )));
    }
    let ifname = &req.env.ifname;
    match h.link_by_name(ifname)? {
        Some(l) if l.master == Some(v.index) => Ok(()),
        _ => Err(Error::internal(format!(
            "failed to find {ifname} associated to vrf {}",
            c.vrfname
        ))),
    }
}
