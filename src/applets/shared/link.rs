//! The one path of a link made for the container: the ADD every applet that makes one
//! container link follows (vlan, macvlan, ipvlan, tap, dummy: create, then configure, the link
//! deleted again when configuring fails), and for a link on a master interface (vlan, macvlan,
//! ipvlan) the master lookup and the creation under a temporary name, renamed to CNI_IFNAME.

use crate::cni::env::validate_config_ifname;
use crate::cni::{CniResult, Context, Error, Request, Result};
use crate::netlink::{Family, Handle, Link};
use crate::netns::NetNs;
use crate::undo::{Undo, and_undo};
use crate::{random, sysctl};

/// ADD of an applet that makes one container link of `kind` in `ns`: `create` makes it (and
/// leaves nothing behind when it fails), then `configure` gives it what it needs; when that
/// fails, what `configure` pushed onto the undo list is taken back and the link deleted.
pub fn add<'a>(
    req: &Request,
    ns: &'a NetNs,
    kind: &'static str,
    create: impl FnOnce(&mut Handle) -> Result<Link>,
    configure: impl FnOnce(&mut Handle, &Link, &mut Undo<'a>) -> Result<CniResult>,
) -> Result<CniResult> {
    let mut cont = Handle::in_netns(ns)?;
    let link = create(&mut cont)?;
    let mut undo = Undo::new(kind);
    let index = link.index;
    undo.push(format!("{kind} {}", req.env.ifname), move || {
        Ok(Handle::in_netns(ns)?.del_link(index)?)
    });
    let r = configure(&mut cont, &link, &mut undo);
    undo.finish(r)
}

/// CNI_IFNAME must not be taken in the container yet.
pub fn ensure_free(cont: &mut Handle, ifname: &str) -> Result<()> {
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::internal(format!(
            "container interface name provided ({ifname}) already exists"
        )));
    }
    Ok(())
}

/// Let the neighbours learn the new link's addresses at once (`arp_notify`, over netlink, and
/// with `v6` `ndisc_notify`), best effort as upstream. `cont` is a handle in `ns`.
pub fn announce(ns: &NetNs, cont: &mut Handle, link: &Link, v6: bool) -> Result<()> {
    let _ = cont.set_arp_notify(link.index);
    if v6 {
        ns.enter(|| {
            let key = sysctl::iface("net/ipv6/conf", &link.name, "ndisc_notify");
            let _ = sysctl::set(&key, "1");
        })?;
    }
    Ok(())
}

/// The mode called `name` in `modes` (`kind`'s name → value table; empty: its first entry,
/// the default), or code 7 naming it.
pub fn mode<T: Copy>(modes: &[(&str, T)], name: &str, kind: &str) -> Result<T> {
    modes
        .iter()
        .find(|(n, _)| name.is_empty() || *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| Error::config(format!("unknown {kind} mode: {name:?}")))
}

/// CHECK: the container link's mode `have` is the configured `want` (named from `modes`).
pub fn check_mode<T: Copy + PartialEq>(
    modes: &[(&str, T)],
    kind: &str,
    have: Option<T>,
    want: T,
) -> Result<()> {
    if have == Some(want) {
        return Ok(());
    }
    let name = |m: Option<T>| {
        modes
            .iter()
            .find(|(_, v)| Some(*v) == m)
            .map_or("unknown", |(n, _)| *n)
    };
    Err(Error::internal(format!(
        "Error: Container {kind} mode {} does not match expected value: {}",
        name(have),
        name(Some(want))
    )))
}

/// The master a link is made on, as configured.
pub struct Master {
    /// Empty: the interface of the default route.
    pub name: String,
    /// `linkInContainer`: the master is in the container namespace, not on the host.
    pub in_container: bool,
    /// The link's configured MTU (0: inherit), which may not exceed the master's.
    pub mtu: u32,
}

impl Master {
    /// The configured keys, checked: `master` (when set) an interface name, `mtu` in range.
    pub fn load(name: String, mtu: i64, in_container: bool) -> Result<Master> {
        if !name.is_empty() {
            validate_config_ifname("master", &name)?;
        }
        let mtu = u32::try_from(mtu)
            .map_err(|_| Error::config(format!("invalid MTU {mtu}, must be [0, master MTU]")))?;
        Ok(Master {
            name,
            in_container,
            mtu,
        })
    }

    fn where_(&self) -> &'static str {
        if self.in_container {
            "in the container namespace"
        } else {
            "on the host"
        }
    }

    /// The master link in `h`'s namespace, its MTU checked against the configured one.
    pub fn lookup(&self, h: &mut Handle) -> Result<Link> {
        let found = if self.name.is_empty() {
            let index = h
                .routes(Family::All, None)?
                .into_iter()
                .find(|r| r.dst.prefix_len() == 0 && r.oif.is_some())
                .and_then(|r| r.oif)
                .ok_or_else(|| {
                    Error::config(format!(
                        "master: not set, and no default route interface found {}",
                        self.where_()
                    ))
                })?;
            h.link_by_index(index)?
        } else {
            h.link_by_name(&self.name)
                .ctx(format_args!("failed to lookup master {:?}", self.name))?
        };
        let m = found.ok_or_else(|| {
            Error::internal(format!(
                "failed to lookup master {:?}: no such interface {}",
                self.name,
                self.where_()
            ))
        })?;
        if self.mtu > m.mtu {
            return Err(Error::config(format!(
                "invalid MTU {}, must be [0, master MTU({})]",
                self.mtu, m.mtu
            )));
        }
        Ok(m)
    }

    /// [`Master::lookup`] where the master is: through `cont` with `linkInContainer`, else on
    /// the host.
    pub fn find(&self, cont: &mut Handle) -> Result<Link> {
        if self.in_container {
            self.lookup(cont)
        } else {
            self.lookup(&mut Handle::new()?)
        }
    }

    /// Make a link on this master directly in the container `ns` (handle `cont`) under a
    /// temporary name (`veth` + 8 hex: a host interface called CNI_IFNAME cannot clash) and
    /// rename it to CNI_IFNAME (`kind` for messages); returns it, re-read after the rename.
    /// `make(handle, name, master index, target)` creates it through a handle in the master's
    /// namespace, in `target` when that is not the same. On failure nothing is left behind.
    pub fn create_renamed(
        &self,
        req: &Request,
        ns: &NetNs,
        cont: &mut Handle,
        kind: &str,
        make: impl FnOnce(&mut Handle, &str, u32, Option<&NetNs>) -> Result<()>,
    ) -> Result<Link> {
        let ifname = &req.env.ifname;
        ensure_free(cont, ifname)?;
        let tmp = format!("veth{}", random::hex(8));
        if self.in_container {
            let m = self.lookup(cont)?;
            make(cont, &tmp, m.index, None)?;
        } else {
            let mut host = Handle::new()?;
            let m = self.lookup(&mut host)?;
            make(&mut host, &tmp, m.index, Some(ns))?;
        }
        rename_into_place(cont, kind, &tmp, ifname)
    }
}

/// Rename the link created as `tmp` (`kind` for messages) to CNI_IFNAME and return it, re-read
/// after the rename. On failure the link is deleted again, and a failed delete is reported too.
fn rename_into_place(cont: &mut Handle, kind: &str, tmp: &str, ifname: &str) -> Result<Link> {
    let tmp_link = cont
        .link_by_name(tmp)?
        .ok_or_else(|| Error::internal(format!("{kind} {tmp} vanished after creation")))?;
    let renamed = cont
        .rename(tmp_link.index, ifname)
        .ctx(format_args!("failed to rename {kind} to {ifname:?}"))
        .and_then(|()| {
            cont.link_by_index(tmp_link.index)?
                .ok_or_else(|| Error::internal(format!("failed to refetch {kind} {ifname:?}")))
        });
    renamed.map_err(|e| {
        let undo = cont.del_link(tmp_link.index);
        and_undo(e, undo.ctx(format_args!("undo {kind} {tmp}")))
    })
}
