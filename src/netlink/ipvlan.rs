//! ipvlan links: created on a parent, directly in a target namespace.

use super::link::{IFLA_IPVLAN_MODE, IFLA_LINK, IFLA_NET_NS_FD, link_info, link_msg, name_mtu};
use super::wire::Writer;
use super::{Handle, RTM_NEWLINK, Result};
use crate::netns::NetNs;

/// `enum ipvlan_mode` (linux/if_link.h).
pub const IPVLAN_MODE_L2: u16 = 0;
pub const IPVLAN_MODE_L3: u16 = 1;
pub const IPVLAN_MODE_L3S: u16 = 2;

impl Handle {
    /// Create ipvlan `name` in `mode` on `parent` (an index in this handle's namespace),
    /// directly in `ns` when given.
    pub fn add_ipvlan(
        &mut self,
        name: &str,
        parent: u32,
        mode: u16,
        mtu: Option<u32>,
        ns: Option<&NetNs>,
    ) -> Result<()> {
        let req = link_msg(RTM_NEWLINK, 0, |w| {
            name_mtu(w, name, mtu);
            w.u32(IFLA_LINK, parent);
            if let Some(ns) = ns {
                w.u32(IFLA_NET_NS_FD, ns.fd() as u32);
            }
            let data = |w: &mut Writer| w.u16(IFLA_IPVLAN_MODE, mode);
            link_info(w, "ipvlan", Some(&data));
        });
        self.new_link(req, "ipvlan", name)
    }
}
