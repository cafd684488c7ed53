//! The one address-settling step shared by every applet that configures container addresses
//! (ptp, bridge, macvlan, ipvlan, vlan, host-device, dummy, tap; vrf for the addresses its
//! enslaving makes tentative again): when ADD returns, every IPv6 address it configured is
//! usable.
//!
//! [`Dad`] says whether another node can hold the address at all: on the container end of a
//! veth whose only peer is the plugin's own host end no duplicate can exist, so the addresses
//! are added with IFA_F_NODAD and are usable at once.

use crate::netlink::IFA_F_NODAD;

/// Whether duplicate address detection can find anything on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dad {
    /// No other node can hold the address (ptp's veth; bridge without `enabledad`, as
    /// upstream): IFA_F_NODAD, usable the moment it is added.
    Off,
    /// A duplicate can exist on the segment.
    Detect,
}

impl Dad {
    /// The IFA_F_* flags an IPv6 address of this link is added with.
    pub fn addr_flags(self) -> u32 {
        match self {
            Dad::Off => IFA_F_NODAD,
            Dad::Detect => 0,
        }
    }
}
