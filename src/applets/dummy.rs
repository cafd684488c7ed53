//! `dummy` (upstream `plugins/main/dummy`, since v1.2.0): a dummy link called CNI_IFNAME in the
//! container, with the addresses and routes of the IPAM plugin — an address of the container's
//! own that is not on `lo`, typically next to another plugin's interface.
//!
//! Keys: `ipam` (required: "dummy interface requires an IPAM configuration"); nothing else
//! (upstream has no `mtu`). The result has the link (name, MAC, sandbox), the IPs (all on it),
//! the routes and the IPAM plugin's DNS (upstream does not add the config's `dns`).
//!
//! ADD creates the link directly in the container namespace (a host link of the same name does
//! not clash), runs IPAM and applies its result; a failure deletes the link and releases the
//! addresses. DEL releases the addresses, then deletes CNI_IFNAME, tolerating a missing
//! namespace or link. CHECK runs the IPAM plugin's CHECK and compares the link (a dummy, the
//! MAC of the prevResult, up) and its addresses and routes with the prevResult. STATUS and GC go
//! to the IPAM plugin.
//!
//! Beyond upstream: DEL only deletes CNI_IFNAME when it is a dummy, and works without `ipam`;
//! CHECK also compares routes; GC is passed to the IPAM plugin (upstream's is a no-op). This
//! build machine's kernel has no dummy links: tested in the qemu VM (tests/vm/dummy.sh).

use super::shared::link::{self, Announce, Dns, Setup};
use crate::applets::shared::container::check_own_iface;
use crate::applets::shared::settle::Dad;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::netlink::Handle;
use crate::undo::ErrorList;

pub static APPLET: Applet = Applet {
    name: "dummy",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

fn load(req: &Request) -> Result<&str> {
    req.ipam_type()
        .ok_or_else(|| Error::config("dummy interface requires an IPAM configuration"))
}

fn add(req: &Request) -> Result<CniResult> {
    let ipam = load(req)?;
    let ns = req.netns()?;
    let ifname = &req.env.ifname;
    let create = |cont: &mut Handle| {
        cont.add_dummy(ifname).ctx("failed to create dummy")?;
        cont.link_by_name(ifname)?
            .ok_or_else(|| Error::internal(format!("failed to fetch dummy {ifname:?}")))
    };
    link::add(req, &ns, "dummy", create, |cont, link, undo| {
        let how = Setup {
            ipam: Some(ipam),
            chained: None,
            ipam_ctx: None,
            announce: Announce::Never,
            dad: Dad::Detect,
            dns: Dns::Ipam,
        };
        link::configure(req, &ns, cont, link, undo, how)
    })
}

fn del(req: &Request) -> Result<()> {
    let mut errors = ErrorList::new();
    if let Some(ipam) = req.ipam_type() {
        errors.check(delegate::del(ipam, req));
    }
    errors.check(super::shared::container::delete_own_link(
        req, "dummy", "dummy",
    ));
    errors.into_result()
}

fn check(req: &Request) -> Result<()> {
    let ipam = load(req)?;
    let own = check_own_iface(req, Some(ipam), "dummy")?;
    if !own.link.up {
        return Err(Error::internal(format!(
            "Interface {} is down",
            req.env.ifname
        )));
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
