//! VRF (l3mdev) links: a device owning a routing table; its slaves route through that table.

use super::link::{IFLA_VRF_TABLE, link_info, link_msg, name_mtu};
use super::wire::Writer;
use super::{Handle, RTM_NEWLINK, Result};

pub(super) fn vrf_msg(name: &str, table: u32) -> Vec<u8> {
    link_msg(RTM_NEWLINK, 0, |w| {
        name_mtu(w, name, None);
        let data = |w: &mut Writer| w.u32(IFLA_VRF_TABLE, table);
        link_info(w, "vrf", Some(&data));
    })
}

impl Handle {
    /// Create VRF `name` bound to routing table `table` (down, as the kernel makes it).
    pub fn add_vrf(&mut self, name: &str, table: u32) -> Result<()> {
        self.new_link(vrf_msg(name, table), "vrf", name)
    }
}
