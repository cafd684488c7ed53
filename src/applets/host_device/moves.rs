//! Moving a host device between the host and the container: renames, the direct paths (one
//! namespace move each way) and the temporary namespace for a name taken on the far side;
//! each leaves the device where it was on failure.

use super::record::{Moved, distrust, just_moved, name_for_host};
use crate::cni::{Context, Error, Result};
use crate::netlink::{Handle, Link};
use crate::netns::NetNs;
use crate::undo::and_undo;

/// A link's name and alias: what it has before a move, or what it gets.
pub(super) type Names<'a> = (&'a str, &'a str);

/// In the namespace of `h`: give the (down) link `index` the name and alias `to` (the kernel
/// accepts the name a link already has).
pub(super) fn rename(h: &mut Handle, index: u32, to: Names) -> Result<()> {
    h.rename(index, to.0)?;
    h.set_alias(index, to.1)?;
    Ok(())
}

/// In the namespace of `h`: rename the link `index` to `to` and move it to `ns`.
pub(super) fn rename_and_move(h: &mut Handle, index: u32, to: Names, ns: &NetNs) -> Result<()> {
    rename(h, index, to)?;
    h.set_netns(index, ns)?;
    Ok(())
}

/// Move the link `index` from `src` (a handle in `src_ns`) to `dst_ns` through a temporary
/// namespace, where it is renamed from `from` to `to`: for a link whose name is taken on the
/// side it would be renamed on. Two moves where the direct paths make one. On failure it is
/// back in `src_ns` as `from` (down).
pub(super) fn via_temporary(
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
        return Err(and_undo(
            e,
            rename_and_move(&mut t, index, from, src_ns).ctx("undo"),
        ));
    }
    Ok(())
}

/// Move the host device `dev` into `ns` (`cont`: a handle there) as `ifname`, its host name in
/// its alias, and set it up there. On failure it is back on the host under its name, with its
/// alias, up if it was.
///
/// It moves straight in under its host name and is renamed in the container: one namespace
/// move, and the new name is never seen on the host (by udev or NetworkManager, which is why
/// upstream renames out of the host's sight). Only when the container already has a link of
/// the host name, which would make that move fail, does it go through a temporary namespace.
pub(super) fn move_in(
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
        return Err(and_undo(e, restore_up(host, dev).ctx("undo")));
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
        and_undo(e, u.ctx("undo"))
    })
}

/// ADD's direct path: move the host's link `index` (named `from.0`, free in `ns`) into `ns`,
/// then rename it there to `to`. On failure it is back on the host as `from`.
pub(super) fn move_then_rename(
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
        and_undo(e, rename_and_move(cont, index, from, host_ns).ctx("undo"))
    })
}

/// Set the host device up again after a failed ADD, when it was up before (moving a device
/// between namespaces takes it down).
pub(super) fn restore_up(host: &mut Handle, dev: &Link) -> Result<()> {
    if dev.up
        && let Some(l) = host.link_by_name(&dev.name)?
    {
        host.set_up(l.index, true)?;
    }
    Ok(())
}

/// Move the device ADD moved in (`rec`; without a record: CNI_IFNAME, when [`distrust`] finds
/// nothing against it) from the container `ns` to `host_ns` under its host name, alias
/// cleared. `Ok(None)`: there is no such link, or it stays (with a note on stderr). On
/// failure the link is back in the container as it was.
///
/// It is renamed in the container, then moved out: one move, and the host sees only its own
/// name come back. Only when the container has another link of that name does it go through
/// a temporary namespace.
pub(super) fn back_to_host(
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
            and_undo(e, rename(&mut cont, l.index, from).ctx("undo"))
        })
    };
    if let Err(e) = moved {
        let u = (|| -> Result<()> {
            if l.up {
                let i = cont.link(&l.name)?.index;
                cont.set_up(i, true)?;
            }
            Ok(())
        })();
        return Err(and_undo(e, u.ctx("undo")));
    }
    Ok(Some(orig))
}
