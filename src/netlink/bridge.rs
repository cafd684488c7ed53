//! A link's life as a bridge port: port options (hairpin, isolation, learning) and 802.1Q VLAN
//! membership with bridge VLAN filtering.

#[cfg(test)]
use super::RTM_GETLINK;
use super::link::{
    AF_BRIDGE, BRIDGE_FLAGS_SELF, BRIDGE_VLAN_INFO_PVID, BRIDGE_VLAN_INFO_UNTAGGED, IFINFOMSG_LEN,
    IFLA_AF_SPEC, IFLA_BRIDGE_FLAGS, IFLA_BRIDGE_VLAN_INFO, IFLA_BRPORT_ISOLATED,
    IFLA_BRPORT_LEARNING, IFLA_BRPORT_MODE, IFLA_INFO_SLAVE_DATA, IFLA_LINKINFO, PortOpts,
    ifinfomsg, link_msg,
};
#[cfg(test)]
use super::link::{IFLA_EXT_MASK, RTEXT_FILTER_BRVLAN, index_of};
use super::{Handle, RTM_DELLINK, RTM_NEWLINK, RTM_SETLINK, Result, request, wire};

/// A VLAN on a bridge port (or on the bridge itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeVlan {
    pub vid: u16,
    pub pvid: bool,
    pub untagged: bool,
}

/// The VLAN entries (IFLA_AF_SPEC / IFLA_BRIDGE_VLAN_INFO) of an AF_BRIDGE RTM_NEWLINK payload.
pub(super) fn parse_vlans(body: &[u8]) -> Vec<BridgeVlan> {
    let mut out = Vec::new();
    for (ty, spec) in wire::attrs(body.get(IFINFOMSG_LEN..).unwrap_or_default()) {
        if ty != IFLA_AF_SPEC {
            continue;
        }
        for (ty, v) in wire::attrs(spec) {
            if let (IFLA_BRIDGE_VLAN_INFO, Some(flags), Some(vid)) =
                (ty, wire::get_u16(v, 0), wire::get_u16(v, 2))
            {
                out.push(BridgeVlan {
                    vid,
                    pvid: flags & BRIDGE_VLAN_INFO_PVID != 0,
                    untagged: flags & BRIDGE_VLAN_INFO_UNTAGGED != 0,
                });
            }
        }
    }
    out
}

/// AF_BRIDGE message (RTM_SETLINK to add, RTM_DELLINK to remove) carrying one VLAN entry for
/// port `index`.
pub(super) fn vlan_filter_msg(
    ty: u16,
    index: u32,
    vid: u16,
    pvid: bool,
    untagged: bool,
    on_self: bool,
) -> Vec<u8> {
    let mut flags = 0;
    if pvid {
        flags |= BRIDGE_VLAN_INFO_PVID;
    }
    if untagged {
        flags |= BRIDGE_VLAN_INFO_UNTAGGED;
    }
    request(ty, &ifinfomsg(AF_BRIDGE, index, 0, 0), |w| {
        w.nest(IFLA_AF_SPEC, |w| {
            if on_self {
                w.u16(IFLA_BRIDGE_FLAGS, BRIDGE_FLAGS_SELF);
            }
            let mut info = [0u8; 4];
            info[..2].copy_from_slice(&flags.to_ne_bytes());
            info[2..].copy_from_slice(&vid.to_ne_bytes());
            w.attr(IFLA_BRIDGE_VLAN_INFO, &info);
        })
    })
}

impl Handle {
    /// Change bridge port settings of `index` (which must be a bridge port): IFLA_LINKINFO /
    /// IFLA_INFO_SLAVE_DATA, handled by the master's (the bridge's) slave_changelink.
    pub fn set_bridge_port(&mut self, index: u32, opts: &PortOpts) -> Result<()> {
        let req = link_msg(RTM_NEWLINK, index, |w| {
            w.nest(IFLA_LINKINFO, |w| {
                w.nest(IFLA_INFO_SLAVE_DATA, |w| {
                    for (ty, v) in [
                        (IFLA_BRPORT_MODE, opts.hairpin),
                        (IFLA_BRPORT_LEARNING, opts.learning),
                        (IFLA_BRPORT_ISOLATED, opts.isolated),
                    ] {
                        if let Some(on) = v {
                            w.u8(ty, u8::from(on));
                        }
                    }
                })
            })
        });
        self.request_ack(req, 0)
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
            vlan_filter_msg(RTM_SETLINK, index, vid, pvid, untagged, on_self),
            0,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("add bridge vlan {vid} (link {index})")))
    }

    /// Remove VLAN `vid` from bridge port `index` (or from the bridge itself with `on_self`).
    pub fn bridge_vlan_del(&mut self, index: u32, vid: u16, on_self: bool) -> Result<()> {
        self.request_ack(
            vlan_filter_msg(RTM_DELLINK, index, vid, false, false, on_self),
            0,
        )
        .map(drop)
        .map_err(|e| e.ctx(format_args!("delete bridge vlan {vid} (link {index})")))
    }

    /// The VLANs configured on bridge port (or bridge) `index` (only the tests read them back).
    #[cfg(test)]
    pub fn bridge_vlans(&mut self, index: u32) -> Result<Vec<BridgeVlan>> {
        let req = request(RTM_GETLINK, &ifinfomsg(AF_BRIDGE, 0, 0, 0), |w| {
            w.u32(IFLA_EXT_MASK, RTEXT_FILTER_BRVLAN)
        });
        let r = self.dump(req).map_err(|e| e.ctx("list bridge vlans"))?;
        Ok(r.iter()
            .filter(|m| m.ty == RTM_NEWLINK && index_of(&m.body) == Some(index))
            .flat_map(|m| parse_vlans(&m.body))
            .collect())
    }
}
