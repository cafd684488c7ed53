//! The one path of a link made for the container: the ADD every applet that makes one
//! container link follows (vlan, macvlan, ipvlan, tap, dummy: create, then configure, the link
//! deleted again when configuring fails), and for a link on a master interface (vlan, macvlan,
//! ipvlan) the master lookup and the creation under a temporary name, renamed to CNI_IFNAME.

use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
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

/// How a kind's ADD gives its new link its addresses ([`configure`]): what upstream does
/// differently per kind, nothing else.
pub struct Setup<'a> {
    /// The IPAM plugin; without one, the result is `chained` (ipvlan's prevResult) or empty
    /// (a link without addresses).
    pub ipam: Option<&'a str>,
    pub chained: Option<CniResult>,
    /// Prefix of an IPAM ADD failure (vlan's `failed to execute IPAM delegate`).
    pub ipam_ctx: Option<&'static str>,
    /// Tell the neighbours of the addresses ([`announce`]), when there are any.
    pub announce: Announce,
    pub dad: Dad,
    /// The result's DNS: the config's, or the IPAM plugin's (dummy, as upstream).
    pub dns: Dns,
}

/// Which announcements a kind makes for its addresses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Announce {
    Never,
    /// `arp_notify` only (tap).
    Arp,
    /// `arp_notify` and `ndisc_notify` (macvlan, ipvlan).
    ArpNdisc,
}

/// Where the result's DNS comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dns {
    Config,
    Ipam,
}

/// The end of a container link's ADD, the same for every kind: IPAM ADD (its DEL pushed onto
/// `undo`), the neighbours told, the result applied to `link` ([`iface::apply`]) with its DNS.
pub fn configure<'a>(
    req: &'a Request,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    undo: &mut Undo<'a>,
    how: Setup<'a>,
) -> Result<CniResult> {
    let result = match how.ipam {
        Some(ipam) => {
            let r = iface::ipam_add(ipam, req, undo);
            match how.ipam_ctx {
                Some(what) => r.ctx(what)?,
                None => r?,
            }
        }
        None => how.chained.unwrap_or_default(),
    };
    if how.announce != Announce::Never && !result.ips.is_empty() {
        announce(ns, cont, link, how.announce == Announce::ArpNdisc)?;
    }
    let mut result = iface::apply(req, ns, cont, link, result, how.dad)?;
    if how.dns == Dns::Config {
        result.dns = req.conf.dns.clone().unwrap_or_default();
    }
    Ok(result)
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
