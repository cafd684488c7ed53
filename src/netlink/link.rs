//! Links: lookup, creation (bridge, veth, vlan, ifb, dummy), changes, bridge ports and bridge VLANs.

use super::{
    Error, Handle, NLM_F_CREATE, NLM_F_EXCL, RTM_DELLINK, RTM_GETLINK, RTM_NEWLINK, RTM_SETLINK,
    Result, request,
};
use crate::netlink::wire::{self, Writer};
use crate::netns::NetNs;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// IFLA_INFO_KIND (`bridge`, `veth`, ...); None for physical devices and loopback.
    pub kind: Option<String>,
    pub mtu: u32,
    pub mac: Option<[u8; 6]>,
    /// Index of the master (bridge) device.
    pub master: Option<u32>,
    /// Administratively up (IFF_UP).
    pub up: bool,
    /// The link has a carrier (IFF_LOWER_UP): frames can leave it, so IPv6 duplicate address
    /// detection can run (a tap with no reader, a macvlan whose master is down have none).
    pub carrier: bool,
    pub promisc: bool,
    /// IFF_ALLMULTI.
    pub allmulti: bool,
    /// RFC 2863 operational state (IF_OPER_*: 6 = up, 2 = down).
    pub operstate: u8,
    /// IFLA_LINK: the peer of a veth, the parent of a vlan (index in `link_netnsid`'s namespace).
    pub link: Option<u32>,
    /// Namespace id of the namespace `link` lives in, when that is another namespace.
    pub link_netnsid: Option<i32>,
    pub vlan_id: Option<u16>,
    /// IFLA_MACVLAN_MODE of a macvlan link.
    pub macvlan_mode: Option<u32>,
    /// IFLA_IPVLAN_MODE of an ipvlan link.
    pub ipvlan_mode: Option<u16>,
    /// IFLA_VRF_TABLE of a vrf link.
    pub vrf_table: Option<u32>,
    pub alias: Option<String>,
    pub txqlen: u32,
    /// Bridge port settings, when the link is a bridge port.
    pub port: Option<PortOpts>,
    /// IFLA_BRPORT_STATE, when the link is a bridge port ([`BR_STATE_FORWARDING`]: it passes
    /// frames).
    pub port_state: Option<u8>,
    /// The link's IPv6 `accept_ra` (None: no IPv6 on it).
    pub ipv6_accept_ra: Option<i32>,
}

/// A bridge port's state once it passes frames (linux/if_bridge.h); before, it is disabled
/// (0, until the kernel has processed its carrier), or under STP listening, learning or
/// blocking.
pub const BR_STATE_FORWARDING: u8 = 3;

/// Bridge port settings. For changes, `None` leaves a setting alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortOpts {
    pub hairpin: Option<bool>,
    pub learning: Option<bool>,
    pub isolated: Option<bool>,
}

// Link attributes (linux/if_link.h, linux/veth.h, linux/rtnetlink.h).
pub(super) const IFLA_ADDRESS: u16 = 1;
pub(super) const IFLA_IFNAME: u16 = 3;
pub(super) const IFLA_MTU: u16 = 4;
pub(super) const IFLA_LINK: u16 = 5;
pub(super) const IFLA_MASTER: u16 = 10;
pub(super) const IFLA_TXQLEN: u16 = 13;
pub(super) const IFLA_OPERSTATE: u16 = 16;
pub(super) const IFLA_LINKINFO: u16 = 18;
pub(super) const IFLA_IFALIAS: u16 = 20;
pub(super) const IFLA_AF_SPEC: u16 = 26;
pub(super) const IFLA_LINK_NETNSID: u16 = 37;
pub(super) const IFLA_NET_NS_FD: u16 = 28;
pub(super) const IFLA_EXT_MASK: u16 = 29;
pub(super) const IFLA_BR_VLAN_FILTERING: u16 = 7;
pub(super) const VETH_INFO_PEER: u16 = 1;
pub(super) const IFLA_BRIDGE_FLAGS: u16 = 0;
pub(super) const BRIDGE_FLAGS_SELF: u16 = 2;
#[cfg(test)]
pub(super) const RTEXT_FILTER_BRVLAN: u32 = 1 << 1;
pub(super) const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;
pub(super) const AF_UNSPEC: u8 = 0;
pub(super) const AF_BRIDGE: u8 = 7;
pub(super) const IFLA_INFO_KIND: u16 = 1;
pub(super) const IFLA_INFO_DATA: u16 = 2;
pub(super) const IFLA_INFO_SLAVE_KIND: u16 = 4;
pub(super) const IFLA_INFO_SLAVE_DATA: u16 = 5;
pub(super) const IFLA_VLAN_ID: u16 = 1;
/// The per-kind attributes of IFLA_INFO_DATA that `parse` reads, beside the link core so that
/// the kind modules (`macvlan`, `ipvlan`, `vrf`) import it and it imports none of them.
pub(super) const IFLA_IPVLAN_MODE: u16 = 1;
pub(super) const IFLA_VRF_TABLE: u16 = 1;
pub(super) const IFLA_MACVLAN_MODE: u16 = 1;
/// IFLA_INET6_CONF (inside IFLA_AF_SPEC/AF_INET6): the IPv6 devconf of a link, an array of s32
/// indexed by DEVCONF_*.
const IFLA_INET6_CONF: u16 = 5;
/// DEVCONF_ACCEPT_RA (linux/ipv6.h).
const DEVCONF_ACCEPT_RA: usize = 3;
pub(super) const IFLA_BRPORT_STATE: u16 = 1;
pub(super) const IFLA_BRPORT_MODE: u16 = 4;
pub(super) const IFLA_BRPORT_LEARNING: u16 = 8;
pub(super) const IFLA_BRPORT_ISOLATED: u16 = 33;
pub(super) const IFLA_BRIDGE_VLAN_INFO: u16 = 2;
pub(super) const BRIDGE_VLAN_INFO_PVID: u16 = 1 << 1;
pub(super) const BRIDGE_VLAN_INFO_UNTAGGED: u16 = 1 << 2;
pub(super) const IFF_UP: u32 = 0x1;
pub(super) const IFF_PROMISC: u32 = 0x100;
pub(super) const IFF_ALLMULTI: u32 = 0x200;
pub(super) const IFF_LOWER_UP: u32 = 0x10000;
/// struct ifinfomsg: family, pad, type, index, flags, change.
pub(super) const IFINFOMSG_LEN: usize = 16;

/// The index of an RTM_NEWLINK payload.
pub(super) fn index_of(body: &[u8]) -> Option<u32> {
    wire::get_u32(body, 4)
}

/// A link from an RTM_NEWLINK payload (None if too short to be one).
pub(super) fn parse(body: &[u8]) -> Option<Link> {
    let flags = wire::get_u32(body, 8)?;
    let mut l = Link {
        index: index_of(body)?,
        up: flags & IFF_UP != 0,
        carrier: flags & IFF_LOWER_UP != 0,
        promisc: flags & IFF_PROMISC != 0,
        allmulti: flags & IFF_ALLMULTI != 0,
        ..Link::default()
    };
    let bool_of = |v: &[u8]| wire::get_u8(v).map(|b| b != 0);
    for (ty, v) in wire::attrs(body.get(IFINFOMSG_LEN..)?) {
        match ty {
            IFLA_IFNAME => l.name = wire::get_str(v),
            IFLA_MTU => l.mtu = wire::get_u32(v, 0).unwrap_or(0),
            IFLA_ADDRESS => l.mac = v.try_into().ok(),
            IFLA_MASTER => l.master = wire::get_u32(v, 0).filter(|&m| m != 0),
            IFLA_OPERSTATE => l.operstate = wire::get_u8(v).unwrap_or(0),
            IFLA_LINK => l.link = wire::get_u32(v, 0),
            IFLA_LINK_NETNSID => l.link_netnsid = wire::get_u32(v, 0).map(|n| n as i32),
            IFLA_IFALIAS => l.alias = Some(wire::get_str(v)),
            IFLA_TXQLEN => l.txqlen = wire::get_u32(v, 0).unwrap_or(0),
            IFLA_AF_SPEC => l.ipv6_accept_ra = ipv6_accept_ra(v),
            IFLA_LINKINFO => {
                let (mut data, mut slave_kind, mut slave_data) = (None, None, None);
                for (ty, v) in wire::attrs(v) {
                    match ty {
                        IFLA_INFO_KIND => l.kind = Some(wire::get_str(v)),
                        IFLA_INFO_DATA => data = Some(v),
                        IFLA_INFO_SLAVE_KIND => slave_kind = Some(wire::get_str(v)),
                        IFLA_INFO_SLAVE_DATA => slave_data = Some(v),
                        _ => {}
                    }
                }
                if let (Some("vlan"), Some(d)) = (l.kind.as_deref(), data) {
                    l.vlan_id = wire::attrs(d)
                        .find(|(ty, _)| *ty == IFLA_VLAN_ID)
                        .and_then(|(_, v)| wire::get_u16(v, 0));
                }
                if let (Some("ipvlan"), Some(d)) = (l.kind.as_deref(), data) {
                    l.ipvlan_mode = wire::attrs(d)
                        .find(|(ty, _)| *ty == IFLA_IPVLAN_MODE)
                        .and_then(|(_, v)| wire::get_u16(v, 0));
                }
                if let (Some("vrf"), Some(d)) = (l.kind.as_deref(), data) {
                    l.vrf_table = wire::attrs(d)
                        .find(|(ty, _)| *ty == IFLA_VRF_TABLE)
                        .and_then(|(_, v)| wire::get_u32(v, 0));
                }
                if let (Some("macvlan"), Some(d)) = (l.kind.as_deref(), data) {
                    l.macvlan_mode = wire::attrs(d)
                        .find(|(ty, _)| *ty == IFLA_MACVLAN_MODE)
                        .and_then(|(_, v)| wire::get_u32(v, 0));
                }
                if let (Some("bridge"), Some(d)) = (slave_kind.as_deref(), slave_data) {
                    let mut o = PortOpts::default();
                    for (ty, v) in wire::attrs(d) {
                        match ty {
                            IFLA_BRPORT_STATE => l.port_state = wire::get_u8(v),
                            IFLA_BRPORT_MODE => o.hairpin = bool_of(v),
                            IFLA_BRPORT_LEARNING => o.learning = bool_of(v),
                            IFLA_BRPORT_ISOLATED => o.isolated = bool_of(v),
                            _ => {}
                        }
                    }
                    l.port = Some(o);
                }
            }
            _ => {}
        }
    }
    Some(l)
}

/// The IPv6 `accept_ra` of a link from its `IFLA_AF_SPEC` payload (None: the link has no IPv6,
/// or the attribute is not there).
fn ipv6_accept_ra(af_spec: &[u8]) -> Option<i32> {
    let (_, v6) = wire::attrs(af_spec).find(|(ty, _)| *ty == libc::AF_INET6 as u16)?;
    let (_, conf) = wire::attrs(v6).find(|(ty, _)| *ty == IFLA_INET6_CONF)?;
    wire::get_u32(conf, DEVCONF_ACCEPT_RA * 4).map(|v| v as i32)
}

/// struct ifinfomsg for `index` in `family`, setting the `change` flags to `flags`.
pub(super) fn ifinfomsg(family: u8, index: u32, flags: u32, change: u32) -> [u8; IFINFOMSG_LEN] {
    let mut h = [0u8; IFINFOMSG_LEN];
    h[0] = family;
    h[4..8].copy_from_slice(&index.to_ne_bytes());
    h[8..12].copy_from_slice(&flags.to_ne_bytes());
    h[12..16].copy_from_slice(&change.to_ne_bytes());
    h
}

/// A link request for `index` (0: by name or new) with attributes `f`.
pub(super) fn link_msg(ty: u16, index: u32, f: impl FnOnce(&mut Writer)) -> Vec<u8> {
    request(ty, &ifinfomsg(AF_UNSPEC, index, 0, 0), f)
}

pub(super) fn name_mtu(w: &mut Writer, name: &str, mtu: Option<u32>) {
    w.str(IFLA_IFNAME, name);
    if let Some(m) = mtu.filter(|&m| m > 0) {
        w.u32(IFLA_MTU, m);
    }
}

/// IFLA_LINKINFO with IFLA_INFO_KIND `kind` and, when `data` writes any, IFLA_INFO_DATA.
pub(super) fn link_info(w: &mut Writer, kind: &str, data: Option<&dyn Fn(&mut Writer)>) {
    w.nest(IFLA_LINKINFO, |w| {
        w.str(IFLA_INFO_KIND, kind);
        if let Some(d) = data {
            w.nest(IFLA_INFO_DATA, d);
        }
    });
}

/// RTM_NEWLINK for a bridge.
pub(super) fn bridge_msg(name: &str, mtu: Option<u32>, vlan_filtering: bool) -> Vec<u8> {
    link_msg(RTM_NEWLINK, 0, |w| {
        name_mtu(w, name, mtu);
        // Only sent when wanted: kernels without CONFIG_BRIDGE_VLAN_FILTERING refuse the
        // attribute whatever its value.
        let filtering = |w: &mut Writer| w.u8(IFLA_BR_VLAN_FILTERING, 1);
        link_info(
            w,
            "bridge",
            vlan_filtering.then_some(&filtering as &dyn Fn(&mut Writer)),
        );
    })
}

/// RTM_NEWLINK for a veth pair; the peer goes to `peer_ns` when given.
pub(super) fn veth_msg(
    name: &str,
    peer: &str,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
    peer_ns: Option<&NetNs>,
) -> Vec<u8> {
    link_msg(RTM_NEWLINK, 0, |w| {
        name_mtu(w, name, mtu);
        if let Some(m) = mac {
            w.attr(IFLA_ADDRESS, &m);
        }
        // VETH_INFO_PEER holds a whole ifinfomsg followed by the peer's attributes.
        let data = |w: &mut Writer| {
            w.nest(VETH_INFO_PEER, |w| {
                w.buf.extend_from_slice(&ifinfomsg(AF_UNSPEC, 0, 0, 0));
                name_mtu(w, peer, mtu);
                if let Some(ns) = peer_ns {
                    w.u32(IFLA_NET_NS_FD, ns.fd() as u32);
                }
            })
        };
        link_info(w, "veth", Some(&data));
    })
}

/// RTM_NEWLINK for a vlan on `parent`, created directly in `ns` when given.
pub(super) fn vlan_msg(
    name: &str,
    parent: u32,
    vid: u16,
    mtu: Option<u32>,
    ns: Option<&NetNs>,
) -> Vec<u8> {
    link_msg(RTM_NEWLINK, 0, |w| {
        name_mtu(w, name, mtu);
        w.u32(IFLA_LINK, parent);
        if let Some(ns) = ns {
            w.u32(IFLA_NET_NS_FD, ns.fd() as u32);
        }
        link_info(w, "vlan", Some(&|w: &mut Writer| w.u16(IFLA_VLAN_ID, vid)));
    })
}

impl Handle {
    pub(super) fn get_link(&mut self, req: Vec<u8>) -> Result<Option<Link>> {
        match self.request_ack(req, 0) {
            Ok(Some(r)) if r.ty == RTM_NEWLINK => Ok(parse(&r.body)),
            Ok(_) => Ok(None),
            Err(e) if e.errno == libc::ENODEV => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The link called `name`, or None.
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>> {
        self.get_link(link_msg(RTM_GETLINK, 0, |w| {
            w.str(IFLA_IFNAME, name);
            w.u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
        }))
        .map_err(|e| e.ctx(format_args!("get link {name}")))
    }

    /// The link with index `index`, or None.
    pub fn link_by_index(&mut self, index: u32) -> Result<Option<Link>> {
        self.get_link(link_msg(RTM_GETLINK, index, |w| {
            w.u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)
        }))
        .map_err(|e| e.ctx(format_args!("get link {index}")))
    }

    /// The link called `name`; a missing link is an ENODEV error naming it.
    pub fn link(&mut self, name: &str) -> Result<Link> {
        self.link_by_name(name)?
            .ok_or_else(|| Error::new(libc::ENODEV, format!("link {name}")))
    }

    /// All links.
    pub fn links(&mut self) -> Result<Vec<Link>> {
        let r = self
            .dump(link_msg(RTM_GETLINK, 0, |w| {
                w.u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS)
            }))
            .map_err(|e| e.ctx("list links"))?;
        Ok(r.iter()
            .filter(|m| m.ty == RTM_NEWLINK)
            .filter_map(|m| parse(&m.body))
            .collect())
    }

    pub(super) fn new_link(&mut self, req: Vec<u8>, what: &str, name: &str) -> Result<()> {
        self.request_ack(req, NLM_F_CREATE | NLM_F_EXCL)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("add {what} {name}")))
    }

    /// Create a bridge.
    pub fn add_bridge(&mut self, name: &str, mtu: Option<u32>, vlan_filtering: bool) -> Result<()> {
        self.new_link(bridge_msg(name, mtu, vlan_filtering), "bridge", name)
    }

    /// Create a veth pair `name` <-> `peer`. `mac` is for `name`. With `peer_ns` the peer is
    /// created directly in that namespace (the CNI bridge plugin creates the pair from inside
    /// the container with the peer going to the host).
    pub fn add_veth(
        &mut self,
        name: &str,
        peer: &str,
        mtu: Option<u32>,
        mac: Option<[u8; 6]>,
        peer_ns: Option<&NetNs>,
    ) -> Result<()> {
        self.new_link(veth_msg(name, peer, mtu, mac, peer_ns), "veth", name)
    }

    /// Create a vlan `vid` on `parent` (an index in this handle's namespace), placed directly
    /// into `ns` when given.
    pub fn add_vlan(
        &mut self,
        name: &str,
        parent: u32,
        vid: u16,
        mtu: Option<u32>,
        ns: Option<&NetNs>,
    ) -> Result<()> {
        self.new_link(vlan_msg(name, parent, vid, mtu, ns), "vlan", name)
    }

    /// Create a dummy link (down).
    pub fn add_dummy(&mut self, name: &str) -> Result<()> {
        let req = link_msg(RTM_NEWLINK, 0, |w| {
            w.str(IFLA_IFNAME, name);
            link_info(w, "dummy", None);
        });
        self.new_link(req, "dummy", name)
    }

    /// Create an ifb device (down) and set its alias; returns its index.
    pub fn add_ifb(
        &mut self,
        name: &str,
        mtu: Option<u32>,
        txqlen: Option<u32>,
        alias: Option<&str>,
    ) -> Result<u32> {
        let req = link_msg(RTM_NEWLINK, 0, |w| {
            name_mtu(w, name, mtu);
            if let Some(q) = txqlen {
                w.u32(IFLA_TXQLEN, q);
            }
            link_info(w, "ifb", None);
        });
        self.new_link(req, "ifb", name)?;
        let index = self.link(name)?.index;
        if let Some(al) = alias {
            self.set_alias(index, al)?;
        }
        Ok(index)
    }

    /// RTM_SETLINK on `index` with attributes `f`.
    pub(super) fn set_link(
        &mut self,
        index: u32,
        what: std::fmt::Arguments,
        f: impl FnOnce(&mut Writer),
    ) -> Result<()> {
        self.request_ack(link_msg(RTM_SETLINK, index, f), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("{what} (link {index})")))
    }

    pub(super) fn set_flag(
        &mut self,
        index: u32,
        flag: u32,
        on: bool,
        what: std::fmt::Arguments,
    ) -> Result<()> {
        let req = request(
            RTM_SETLINK,
            &ifinfomsg(AF_UNSPEC, index, if on { flag } else { 0 }, flag),
            |_| {},
        );
        self.request_ack(req, 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("{what} (link {index})")))
    }

    /// Set the link administratively up or down.
    pub fn set_up(&mut self, index: u32, up: bool) -> Result<()> {
        self.set_flag(
            index,
            IFF_UP,
            up,
            format_args!("set link {}", if up { "up" } else { "down" }),
        )
    }

    /// Turn promiscuous mode on or off.
    pub fn set_promisc(&mut self, index: u32, on: bool) -> Result<()> {
        self.set_flag(
            index,
            IFF_PROMISC,
            on,
            format_args!("set promisc {}", if on { "on" } else { "off" }),
        )
    }

    /// Turn all-multicast mode on or off.
    pub fn set_allmulti(&mut self, index: u32, on: bool) -> Result<()> {
        self.set_flag(
            index,
            IFF_ALLMULTI,
            on,
            format_args!("set allmulticast {}", if on { "on" } else { "off" }),
        )
    }

    /// Enslave to `master`, or release from its master with None.
    pub fn set_master(&mut self, index: u32, master: Option<u32>) -> Result<()> {
        let m = master.unwrap_or(0);
        self.set_link(index, format_args!("set master {m}"), |w| {
            w.u32(IFLA_MASTER, m)
        })
    }

    pub fn set_mtu(&mut self, index: u32, mtu: u32) -> Result<()> {
        self.set_link(index, format_args!("set mtu {mtu}"), |w| {
            w.u32(IFLA_MTU, mtu)
        })
    }

    pub fn set_txqlen(&mut self, index: u32, qlen: u32) -> Result<()> {
        self.set_link(index, format_args!("set txqueuelen {qlen}"), |w| {
            w.u32(IFLA_TXQLEN, qlen)
        })
    }

    pub fn set_mac(&mut self, index: u32, mac: [u8; 6]) -> Result<()> {
        let s = super::fmt_mac(&mac);
        self.set_link(index, format_args!("set mac {s}"), |w| {
            w.attr(IFLA_ADDRESS, &mac)
        })
    }

    /// Rename (the link must be down).
    pub fn rename(&mut self, index: u32, name: &str) -> Result<()> {
        self.set_link(index, format_args!("rename to {name}"), |w| {
            w.str(IFLA_IFNAME, name)
        })
    }

    /// Move the link into namespace `ns`.
    pub fn set_netns(&mut self, index: u32, ns: &NetNs) -> Result<()> {
        self.set_link(index, format_args!("move to netns {}", ns.path()), |w| {
            w.u32(IFLA_NET_NS_FD, ns.fd() as u32)
        })
    }

    /// Set IFLA_IFALIAS (an empty alias removes it: sent empty, as `ip link set alias ""`).
    pub fn set_alias(&mut self, index: u32, alias: &str) -> Result<()> {
        self.set_link(index, format_args!("set alias {alias:?}"), |w| {
            if alias.is_empty() {
                w.attr(IFLA_IFALIAS, &[])
            } else {
                w.str(IFLA_IFALIAS, alias)
            }
        })
    }

    /// Delete a link (a veth takes its peer with it).
    pub fn del_link(&mut self, index: u32) -> Result<()> {
        self.request_ack(link_msg(RTM_DELLINK, index, |_| {}), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("delete link {index}")))
    }

    /// Delete a link like [`Handle::del_link`], returning once the kernel has unlisted it (its
    /// RTM_DELLINK notification: gone from the namespace, a veth's peer with it, the name free)
    /// rather than after the RCU barrier that ends a deletion, which a detached child process
    /// waits out ([`NlSocket::request_until`](super::NlSocket::request_until)). For DEL, whose
    /// caller waits for the process: the Go plugins wait for that barrier, cnibox does not.
    pub fn del_link_unlisted(&mut self, index: u32) -> Result<()> {
        self.sock.join(super::monitor::RTNLGRP_LINK)?;
        let gone = |ty: u16, body: &[u8]| {
            // ifinfomsg: family, pad, type (u16), then the index (i32) at offset 4.
            ty == RTM_DELLINK
                && body
                    .get(4..8)
                    .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    == Some(index)
        };
        let r = self
            .sock
            .request_until(link_msg(RTM_DELLINK, index, |_| {}), gone);
        let _ = self.sock.leave(super::monitor::RTNLGRP_LINK);
        r.map_err(|e| e.ctx(format_args!("delete link {index}")))
    }

    /// [`Handle::del_link_unlisted`] of the link called `name`; `false` when there is none.
    pub fn del_link_by_name_unlisted(&mut self, name: &str) -> Result<bool> {
        let Some(l) = self.link_by_name(name)? else {
            return Ok(false);
        };
        match self.del_link_unlisted(l.index) {
            Ok(()) => Ok(true),
            Err(e) if e.errno == libc::ENODEV => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Delete the link called `name` (upstream's `DelLinkByName`), in one request; `false`
    /// when there is none, which DEL and undo steps take as done.
    pub fn del_link_by_name(&mut self, name: &str) -> Result<bool> {
        match self.request_ack(link_msg(RTM_DELLINK, 0, |w| w.str(IFLA_IFNAME, name)), 0) {
            Ok(_) => Ok(true),
            Err(e) if e.errno == libc::ENODEV => Ok(false),
            Err(e) => Err(e.ctx(format_args!("delete link {name}"))),
        }
    }
}
