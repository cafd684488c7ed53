//! macvlan links: created on a parent, directly in a target namespace.

use super::link::{
    IFLA_ADDRESS, IFLA_LINK, IFLA_MACVLAN_MODE, IFLA_NET_NS_FD, link_info, link_msg, name_mtu,
};
use super::wire::Writer;
use super::{Handle, RTM_NEWLINK, Result};
use crate::netns::NetNs;

const IFLA_MACVLAN_BC_QUEUE_LEN: u16 = 7;

/// `enum macvlan_mode` (linux/if_link.h).
pub const MACVLAN_MODE_PRIVATE: u32 = 1;
pub const MACVLAN_MODE_VEPA: u32 = 2;
pub const MACVLAN_MODE_BRIDGE: u32 = 4;
pub const MACVLAN_MODE_PASSTHRU: u32 = 8;

/// What a new macvlan gets.
pub struct Macvlan<'a> {
    pub name: &'a str,
    pub parent: u32,
    pub mode: u32,
    pub mtu: Option<u32>,
    pub mac: Option<[u8; 6]>,
    /// IFLA_MACVLAN_BC_QUEUE_LEN; 0 leaves the kernel's default.
    pub bc_queue_len: u32,
    /// Created directly in this namespace.
    pub ns: Option<&'a NetNs>,
}

impl Handle {
    pub fn add_macvlan(&mut self, m: &Macvlan) -> Result<()> {
        let req = link_msg(RTM_NEWLINK, 0, |w| {
            name_mtu(w, m.name, m.mtu);
            w.u32(IFLA_LINK, m.parent);
            if let Some(mac) = m.mac {
                w.attr(IFLA_ADDRESS, &mac);
            }
            if let Some(ns) = m.ns {
                w.u32(IFLA_NET_NS_FD, ns.fd() as u32);
            }
            let data = |w: &mut Writer| {
                w.u32(IFLA_MACVLAN_MODE, m.mode);
                if m.bc_queue_len > 0 {
                    w.u32(IFLA_MACVLAN_BC_QUEUE_LEN, m.bc_queue_len);
                }
            };
            link_info(w, "macvlan", Some(&data));
        });
        self.new_link(req, "macvlan", m.name)
    }
}
