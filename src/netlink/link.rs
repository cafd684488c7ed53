//! Links: lookup, creation (bridge, veth, vlan, ifb), changes, bridge ports and bridge VLANs.

use netlink_packet_core::{NLM_F_CREATE, NLM_F_EXCL};
use netlink_packet_route::link::{
    AfSpecBridge, BridgeFlag, BridgeVlanInfo, BridgeVlanInfoFlags, InfoBridge, InfoBridgePort,
    InfoData, InfoKind, InfoPortData, InfoVeth, InfoVlan, LinkAttribute, LinkExtentMask, LinkFlags,
    LinkInfo, LinkMessage,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage as Rt};

use super::{Error, Handle, Result};
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
    pub promisc: bool,
    /// RFC 2863 operational state (IF_OPER_*: 6 = up, 2 = down).
    pub operstate: u8,
    /// IFLA_LINK: the peer of a veth, the parent of a vlan (index in `link_netnsid`'s namespace).
    pub link: Option<u32>,
    /// Namespace id of the namespace `link` lives in, when that is another namespace.
    pub link_netnsid: Option<i32>,
    pub vlan_id: Option<u16>,
    pub alias: Option<String>,
    pub txqlen: u32,
    /// Bridge port settings, when the link is a bridge port.
    pub port: Option<PortOpts>,
}

/// Bridge port settings. For changes, `None` leaves a setting alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortOpts {
    pub hairpin: Option<bool>,
    pub learning: Option<bool>,
    pub isolated: Option<bool>,
}

/// A VLAN on a bridge port (or on the bridge itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeVlan {
    pub vid: u16,
    pub pvid: bool,
    pub untagged: bool,
}

fn msg(index: u32, attributes: Vec<LinkAttribute>) -> LinkMessage {
    let mut m = LinkMessage::default();
    m.header.index = index;
    m.attributes = attributes;
    m
}

fn info(kind: InfoKind, data: Option<InfoData>) -> LinkAttribute {
    let mut v = vec![LinkInfo::Kind(kind)];
    v.extend(data.map(LinkInfo::Data));
    LinkAttribute::LinkInfo(v)
}

fn name_mtu(name: &str, mtu: Option<u32>) -> Vec<LinkAttribute> {
    let mut a = vec![LinkAttribute::IfName(name.into())];
    a.extend(mtu.filter(|&m| m > 0).map(LinkAttribute::Mtu));
    a
}

/// RTM_NEWLINK for a bridge.
pub(super) fn bridge_msg(name: &str, mtu: Option<u32>, vlan_filtering: bool) -> LinkMessage {
    let mut a = name_mtu(name, mtu);
    // Only sent when wanted: kernels without CONFIG_BRIDGE_VLAN_FILTERING refuse the attribute
    // whatever its value.
    let data = vlan_filtering.then(|| InfoData::Bridge(vec![InfoBridge::VlanFiltering(true)]));
    a.push(info(InfoKind::Bridge, data));
    msg(0, a)
}

/// RTM_NEWLINK for a veth pair; the peer goes to `peer_ns` when given.
pub(super) fn veth_msg(
    name: &str,
    peer: &str,
    mtu: Option<u32>,
    mac: Option<[u8; 6]>,
    peer_ns: Option<&NetNs>,
) -> LinkMessage {
    let mut p = name_mtu(peer, mtu);
    p.extend(peer_ns.map(|ns| LinkAttribute::NetNsFd(ns.fd())));
    let mut a = name_mtu(name, mtu);
    a.extend(mac.map(|m| LinkAttribute::Address(m.to_vec())));
    a.push(info(
        InfoKind::Veth,
        Some(InfoData::Veth(InfoVeth::Peer(msg(0, p)))),
    ));
    msg(0, a)
}

/// RTM_NEWLINK for a vlan on `parent`, created directly in `ns` when given.
pub(super) fn vlan_msg(
    name: &str,
    parent: u32,
    vid: u16,
    mtu: Option<u32>,
    ns: Option<&NetNs>,
) -> LinkMessage {
    let mut a = name_mtu(name, mtu);
    a.push(LinkAttribute::Link(parent));
    a.extend(ns.map(|ns| LinkAttribute::NetNsFd(ns.fd())));
    a.push(info(
        InfoKind::Vlan,
        Some(InfoData::Vlan(vec![InfoVlan::Id(vid)])),
    ));
    msg(0, a)
}

fn port_attrs(o: &PortOpts) -> Vec<InfoBridgePort> {
    let mut v = Vec::new();
    v.extend(o.hairpin.map(InfoBridgePort::HairpinMode));
    v.extend(o.learning.map(InfoBridgePort::Learning));
    v.extend(o.isolated.map(InfoBridgePort::Isolated));
    v
}

/// AF_BRIDGE message carrying one VLAN entry for port `index`.
pub(super) fn vlan_filter_msg(
    index: u32,
    vid: u16,
    pvid: bool,
    untagged: bool,
    on_self: bool,
) -> LinkMessage {
    let mut flags = BridgeVlanInfoFlags::empty();
    if pvid {
        flags |= BridgeVlanInfoFlags::Pvid;
    }
    if untagged {
        flags |= BridgeVlanInfoFlags::Untagged;
    }
    let mut spec = Vec::new();
    if on_self {
        spec.push(AfSpecBridge::Flags(BridgeFlag::LowerDev));
    }
    spec.push(AfSpecBridge::VlanInfo(BridgeVlanInfo { flags, vid }));
    let mut m = msg(index, vec![LinkAttribute::AfSpecBridge(spec)]);
    m.header.interface_family = AddressFamily::Bridge;
    m
}

pub(super) fn parse(m: LinkMessage) -> Link {
    let mut l = Link {
        index: m.header.index,
        up: m.header.flags.contains(LinkFlags::Up),
        promisc: m.header.flags.contains(LinkFlags::Promisc),
        ..Link::default()
    };
    for a in m.attributes {
        match a {
            LinkAttribute::IfName(n) => l.name = n,
            LinkAttribute::Mtu(v) => l.mtu = v,
            LinkAttribute::Address(a) => l.mac = a.as_slice().try_into().ok(),
            LinkAttribute::Controller(v) => l.master = Some(v).filter(|&v| v != 0),
            LinkAttribute::OperState(s) => l.operstate = s.into(),
            LinkAttribute::Link(v) => l.link = Some(v),
            LinkAttribute::LinkNetNsId(v) => l.link_netnsid = Some(v),
            LinkAttribute::IfAlias(s) => l.alias = Some(s),
            LinkAttribute::TxQueueLen(v) => l.txqlen = v,
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    match i {
                        LinkInfo::Kind(k) => l.kind = Some(k.to_string()),
                        LinkInfo::Data(InfoData::Vlan(v)) => {
                            for x in v {
                                if let InfoVlan::Id(id) = x {
                                    l.vlan_id = Some(id);
                                }
                            }
                        }
                        LinkInfo::PortData(InfoPortData::BridgePort(p)) => {
                            let mut o = PortOpts::default();
                            for x in p {
                                match x {
                                    InfoBridgePort::HairpinMode(b) => o.hairpin = Some(b),
                                    InfoBridgePort::Learning(b) => o.learning = Some(b),
                                    InfoBridgePort::Isolated(b) => o.isolated = Some(b),
                                    _ => {}
                                }
                            }
                            l.port = Some(o);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    l
}

fn skip_stats() -> LinkAttribute {
    LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats])
}

impl Handle {
    fn get_link(&mut self, m: LinkMessage) -> Result<Option<Link>> {
        match self.request_ack(Rt::GetLink(m), 0) {
            Ok(Some(Rt::NewLink(m))) => Ok(Some(parse(m))),
            Ok(_) => Ok(None),
            Err(e) if e.errno == libc::ENODEV => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The link called `name`, or None.
    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>> {
        self.get_link(msg(
            0,
            vec![LinkAttribute::IfName(name.into()), skip_stats()],
        ))
        .map_err(|e| e.ctx(format_args!("get link {name}")))
    }

    /// The link with index `index`, or None.
    pub fn link_by_index(&mut self, index: u32) -> Result<Option<Link>> {
        self.get_link(msg(index, vec![skip_stats()]))
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
            .dump(Rt::GetLink(msg(0, vec![skip_stats()])))
            .map_err(|e| e.ctx("list links"))?;
        Ok(r.into_iter()
            .filter_map(|m| {
                if let Rt::NewLink(m) = m {
                    Some(parse(m))
                } else {
                    None
                }
            })
            .collect())
    }

    fn new_link(&mut self, m: LinkMessage, what: &str, name: &str) -> Result<()> {
        self.request_ack(Rt::NewLink(m), NLM_F_CREATE | NLM_F_EXCL)
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

    /// Create an ifb device (down) and set its alias; returns its index.
    pub fn add_ifb(
        &mut self,
        name: &str,
        mtu: Option<u32>,
        txqlen: Option<u32>,
        alias: Option<&str>,
    ) -> Result<u32> {
        let mut a = name_mtu(name, mtu);
        a.extend(txqlen.map(LinkAttribute::TxQueueLen));
        a.push(info(InfoKind::Ifb, None));
        self.new_link(msg(0, a), "ifb", name)?;
        let index = self.link(name)?.index;
        if let Some(al) = alias {
            self.set_alias(index, al)?;
        }
        Ok(index)
    }

    fn set_link(&mut self, m: LinkMessage, what: std::fmt::Arguments) -> Result<()> {
        let index = m.header.index;
        self.request_ack(Rt::SetLink(m), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("{what} (link {index})")))
    }

    fn set_flag(
        &mut self,
        index: u32,
        flag: LinkFlags,
        on: bool,
        what: std::fmt::Arguments,
    ) -> Result<()> {
        let mut m = msg(index, vec![]);
        m.header.change_mask = flag;
        if on {
            m.header.flags = flag;
        }
        self.set_link(m, what)
    }

    /// Set the link administratively up or down.
    pub fn set_up(&mut self, index: u32, up: bool) -> Result<()> {
        self.set_flag(
            index,
            LinkFlags::Up,
            up,
            format_args!("set link {}", if up { "up" } else { "down" }),
        )
    }

    /// Turn promiscuous mode on or off.
    pub fn set_promisc(&mut self, index: u32, on: bool) -> Result<()> {
        self.set_flag(
            index,
            LinkFlags::Promisc,
            on,
            format_args!("set promisc {}", if on { "on" } else { "off" }),
        )
    }

    /// Enslave to `master`, or release from its master with None.
    pub fn set_master(&mut self, index: u32, master: Option<u32>) -> Result<()> {
        let m = master.unwrap_or(0);
        self.set_link(
            msg(index, vec![LinkAttribute::Controller(m)]),
            format_args!("set master {m}"),
        )
    }

    pub fn set_mtu(&mut self, index: u32, mtu: u32) -> Result<()> {
        self.set_link(
            msg(index, vec![LinkAttribute::Mtu(mtu)]),
            format_args!("set mtu {mtu}"),
        )
    }

    pub fn set_txqlen(&mut self, index: u32, qlen: u32) -> Result<()> {
        self.set_link(
            msg(index, vec![LinkAttribute::TxQueueLen(qlen)]),
            format_args!("set txqueuelen {qlen}"),
        )
    }

    pub fn set_mac(&mut self, index: u32, mac: [u8; 6]) -> Result<()> {
        let s = super::fmt_mac(&mac);
        self.set_link(
            msg(index, vec![LinkAttribute::Address(mac.to_vec())]),
            format_args!("set mac {s}"),
        )
    }

    /// Rename (the link must be down).
    pub fn rename(&mut self, index: u32, name: &str) -> Result<()> {
        self.set_link(
            msg(index, vec![LinkAttribute::IfName(name.into())]),
            format_args!("rename to {name}"),
        )
    }

    /// Move the link into namespace `ns`.
    pub fn set_netns(&mut self, index: u32, ns: &NetNs) -> Result<()> {
        self.set_link(
            msg(index, vec![LinkAttribute::NetNsFd(ns.fd())]),
            format_args!("move to netns {}", ns.path()),
        )
    }

    /// Set IFLA_IFALIAS (an empty alias removes it).
    pub fn set_alias(&mut self, index: u32, alias: &str) -> Result<()> {
        self.set_link(
            msg(index, vec![LinkAttribute::IfAlias(alias.into())]),
            format_args!("set alias {alias:?}"),
        )
    }

    /// Change bridge port settings of `index` (which must be a bridge port).
    pub fn set_bridge_port(&mut self, index: u32, opts: &PortOpts) -> Result<()> {
        let a = vec![LinkAttribute::LinkInfo(vec![LinkInfo::PortData(
            InfoPortData::BridgePort(port_attrs(opts)),
        )])];
        self.request_ack(Rt::NewLink(msg(index, a)), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("set bridge port options (link {index})")))
    }

    /// Add VLAN `vid` to bridge port `index` (with `on_self`: to the bridge device itself).
    pub fn bridge_vlan_add(
        &mut self,
        index: u32,
        vid: u16,
        pvid: bool,
        untagged: bool,
        on_self: bool,
    ) -> Result<()> {
        self.request_ack(
            Rt::SetLink(vlan_filter_msg(index, vid, pvid, untagged, on_self)),
            0,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add bridge vlan {vid} (link {index})")))
    }

    /// Remove VLAN `vid` from bridge port `index` (or from the bridge itself with `on_self`).
    pub fn bridge_vlan_del(&mut self, index: u32, vid: u16, on_self: bool) -> Result<()> {
        self.request_ack(
            Rt::DelLink(vlan_filter_msg(index, vid, false, false, on_self)),
            0,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("delete bridge vlan {vid} (link {index})")))
    }

    /// The VLANs configured on bridge port (or bridge) `index`.
    pub fn bridge_vlans(&mut self, index: u32) -> Result<Vec<BridgeVlan>> {
        let mut m = msg(
            0,
            vec![LinkAttribute::ExtMask(vec![LinkExtentMask::Brvlan])],
        );
        m.header.interface_family = AddressFamily::Bridge;
        let r = self
            .dump(Rt::GetLink(m))
            .map_err(|e| e.ctx("list bridge vlans"))?;
        let mut out = Vec::new();
        for m in r {
            let Rt::NewLink(m) = m else { continue };
            if m.header.index != index {
                continue;
            }
            for a in m.attributes {
                let LinkAttribute::AfSpecBridge(spec) = a else {
                    continue;
                };
                for s in spec {
                    if let AfSpecBridge::VlanInfo(v) = s {
                        out.push(BridgeVlan {
                            vid: v.vid,
                            pvid: v.flags.contains(BridgeVlanInfoFlags::Pvid),
                            untagged: v.flags.contains(BridgeVlanInfoFlags::Untagged),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// Delete a link (a veth takes its peer with it).
    pub fn del_link(&mut self, index: u32) -> Result<()> {
        self.request_ack(Rt::DelLink(msg(index, vec![])), 0)
            .map(drop)
            .map_err(|e| e.ctx(format_args!("delete link {index}")))
    }
}
