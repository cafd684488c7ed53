//! What ADD moved in, recorded on the host ([`Moved`]), and the checks DEL makes before it
//! moves a link of the container to the host: it must be what ADD moved in, or, without a
//! record, something a container cannot make.

use crate::attachment;
use crate::cni::env::validate_config_ifname;
use crate::cni::{Request, Result};
use crate::netlink::{Handle, Identity, Link};
use crate::netns::NetNs;

/// Kind of host-device's records of what ADD moved in
/// (`<state dir>/host-device/<network>/<cid>:<ifname>`, see [`crate::attachment`]).
pub(super) const RECORD: &str = "host-device";

/// Where a link's peer (veth) or lower device (vlan, macvlan, ipvlan…) lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lower {
    /// It has none.
    None,
    /// On the host, with this index.
    Host(u32),
    /// In the container itself.
    Container,
    /// In some other namespace.
    Elsewhere,
}

impl Lower {
    /// `l`'s, as seen from `h`'s namespace, the host being `host_ns`.
    pub(super) fn of(h: &mut Handle, l: &Link, host_ns: Option<&NetNs>) -> Result<Lower> {
        let Some(i) = l.link.filter(|&i| i != 0 && i != l.index) else {
            return Ok(Lower::None);
        };
        if l.link_netnsid.is_none() {
            return Ok(match host_ns {
                None => Lower::Host(i),
                Some(_) => Lower::Container,
            });
        }
        // The id is asked for after the link was read: reporting it is what assigns one.
        let host_id = match host_ns {
            Some(ns) => h.nsid_of(ns)?,
            None => None,
        };
        Ok(if host_id.is_some() && l.link_netnsid == host_id {
            Lower::Host(i)
        } else {
            Lower::Elsewhere
        })
    }

    pub(super) fn item(self) -> String {
        match self {
            Lower::None => "none".into(),
            Lower::Host(i) => format!("host:{i}"),
            Lower::Container => "container".into(),
            Lower::Elsewhere => "elsewhere".into(),
        }
    }

    pub(super) fn parse(s: &str) -> Option<Lower> {
        Some(match s {
            "none" => Lower::None,
            "container" => Lower::Container,
            "elsewhere" => Lower::Elsewhere,
            _ => Lower::Host(s.strip_prefix("host:")?.parse().ok()?),
        })
    }
}

/// What ADD moved into the container, recorded on the host for DEL: the container can rename
/// CNI_IFNAME, rewrite its alias or make another link of that name; it cannot change these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Moved {
    /// Its name on the host (what DEL gives it back).
    pub(super) name: String,
    /// Its index on the host, and in the container (where DEL looks for it).
    pub(super) host_index: u32,
    pub(super) index: u32,
    /// IFLA_INFO_KIND, empty for a driver's device (a NIC, a VF).
    pub(super) kind: String,
    /// Permanent MAC address and parent bus device, when the kernel reports them.
    pub(super) id: Identity,
    pub(super) lower: Lower,
}

impl Moved {
    pub(super) fn items(&self) -> Vec<String> {
        vec![
            format!("name {}", self.name),
            format!("host_index {}", self.host_index),
            format!("index {}", self.index),
            format!("kind {}", self.kind),
            format!("perm_addr {}", self.id.perm_addr),
            format!("parent {}", self.id.parent),
            format!("lower {}", self.lower.item()),
        ]
    }

    /// None for a record that is not one of ours as written by [`Moved::items`].
    pub(super) fn parse(items: &[String]) -> Option<Moved> {
        let get = |k: &str| {
            items
                .iter()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' '))
                .map(str::to_string)
        };
        let name = get("name")?;
        validate_config_ifname("name", &name).ok()?;
        Some(Moved {
            name,
            host_index: get("host_index")?.parse().ok()?,
            index: get("index")?.parse().ok()?,
            kind: get("kind")?,
            id: Identity {
                perm_addr: get("perm_addr")?,
                parent: get("parent")?,
            },
            lower: Lower::parse(&get("lower")?)?,
        })
    }

    pub(super) fn recorded(req: &Request) -> Option<Moved> {
        let env = &req.env;
        let items = attachment::get(RECORD, &req.conf.name, &env.container_id, &env.ifname);
        if items.is_empty() {
            return None;
        }
        let m = Moved::parse(&items);
        if m.is_none() {
            crate::warn!("host-device: ignoring an unreadable record of what ADD moved in");
        }
        m
    }
}

/// The record of the link `ifname` this ADD has just moved into `ns` as it is there now, for
/// an undo before the record was written.
pub(super) fn just_moved(
    ns: &NetNs,
    ifname: &str,
    host_name: &str,
    host_ns: &NetNs,
) -> Result<Option<Moved>> {
    let mut cont = Handle::in_netns(ns)?;
    let Some(l) = cont.link_by_name(ifname)? else {
        return Ok(None);
    };
    Ok(Some(Moved {
        name: host_name.to_string(),
        host_index: l.index,
        index: l.index,
        kind: l.kind.clone().unwrap_or_default(),
        id: cont.link_identity(l.index)?.unwrap_or_default(),
        lower: Lower::of(&mut cont, &l, Some(host_ns))?,
    }))
}

/// Why the container's link `l` must stay where it is, None when it may go to the host. With
/// a record it must be what ADD moved in (kind, permanent address, parent device, where its
/// peer or lower link lives); without one (the Go plugin's ADD) it must be something a
/// container cannot make: a driver's device with a parent device or a permanent address, or
/// a link whose peer or lower link is on the host. Never one whose peer is in the container.
pub(super) fn distrust(
    cont: &mut Handle,
    l: &Link,
    rec: Option<&Moved>,
    host_ns: &NetNs,
) -> Result<Option<String>> {
    let id = cont.link_identity(l.index)?.unwrap_or_default();
    let kind = l.kind.clone().unwrap_or_default();
    let lower = Lower::of(cont, l, Some(host_ns))?;
    if lower == Lower::Container {
        return Ok(Some(format!(
            "it is a {kind} link whose peer or lower link is in the container"
        )));
    }
    let why = match rec {
        Some(r) if kind != r.kind => format!("it is a {kind:?} link, ADD moved in a {:?}", r.kind),
        Some(r) if !r.id.perm_addr.is_empty() && id.perm_addr != r.id.perm_addr => format!(
            "its permanent address is {:?}, not {:?}",
            id.perm_addr, r.id.perm_addr
        ),
        Some(r) if !r.id.parent.is_empty() && id.parent != r.id.parent => {
            format!(
                "its parent device is {:?}, not {:?}",
                id.parent, r.id.parent
            )
        }
        Some(r) if lower != r.lower => format!(
            "its peer or lower link is {}, ADD's was {}",
            lower.item(),
            r.lower.item()
        ),
        Some(_) => return Ok(None),
        None if kind.is_empty() && (!id.parent.is_empty() || !id.perm_addr.is_empty()) => {
            return Ok(None);
        }
        None if kind.is_empty() => {
            "it has neither a parent device nor a permanent address, and no record".into()
        }
        None if matches!(lower, Lower::Host(_)) => return Ok(None),
        None => format!(
            "it is a {kind} link whose peer or lower link is not on the host, and no record"
        ),
    };
    Ok(Some(why))
}

/// The host name for a link moved in without a record (the Go plugin's ADD): its alias, as
/// upstream, unless that is no interface name or taken on the host; then `dev<index>`, the
/// name the kernel gives a device coming back from a dying namespace to a taken name.
pub(super) fn name_for_host(l: &Link) -> Result<String> {
    let alias = l.alias.as_deref().unwrap_or("");
    if !alias.is_empty()
        && validate_config_ifname("alias", alias).is_ok()
        && Handle::new()?.link_by_name(alias)?.is_none()
    {
        return Ok(alias.to_string());
    }
    let name = format!("dev{}", l.index);
    crate::warn!(
        "host-device: {:?} has alias {alias:?}, which names no free host interface; it goes back as {name:?}",
        l.name
    );
    Ok(name)
}
