//! The applet table: one file per applet, one row here. `main` dispatches on argv[0] through
//! this table and delegation finds in-process IPAM applets in it.

use crate::cni::Applet;

mod bandwidth;
mod bridge;
mod dhcp;
mod dummy;
mod firewall;
mod flannel;
#[doc(hidden)]
pub mod fuzz;
mod host_device;
mod host_local;
mod ipvlan;
mod loopback;
mod macvlan;
mod portmap;
mod ptp;
mod sbr;
pub(crate) mod shared;
mod static_ipam;
mod tap;
mod tuning;
mod vlan;
mod vrf;

pub static TABLE: &[&Applet] = &[
    &bandwidth::APPLET,
    &bridge::APPLET,
    &dummy::APPLET,
    &dhcp::APPLET,
    &firewall::APPLET,
    &flannel::APPLET,
    &host_device::APPLET,
    &host_local::APPLET,
    &ipvlan::APPLET,
    &loopback::APPLET,
    &macvlan::APPLET,
    &portmap::APPLET,
    &ptp::APPLET,
    &sbr::APPLET,
    &static_ipam::APPLET,
    &tap::APPLET,
    &tuning::APPLET,
    &vlan::APPLET,
    &vrf::APPLET,
];

/// `APPLET daemon ARGS…` for applets that are also daemons (`dhcp daemon`): its exit status,
/// `None` for the others.
pub fn daemon(applet: &str, args: &[String]) -> Option<i32> {
    (applet == "dhcp").then(|| dhcp::daemon::main(args))
}

pub fn find(name: &str) -> Option<&'static Applet> {
    TABLE.iter().copied().find(|a| a.name == name)
}
