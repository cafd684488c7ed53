//! The applet table: one file per applet, one row here. `main` dispatches on argv[0] through
//! this table and delegation finds in-process IPAM applets in it.

use crate::cni::Applet;

mod bandwidth;
mod bridge;
mod container;
mod dhcp;
mod firewall;
mod host_local;
pub(crate) mod iface;
mod ipvlan;
mod loopback;
mod macvlan;
mod portmap;
mod ptp;
mod static_ipam;
mod tuning;
mod veth;
mod vlan;

pub static TABLE: &[&Applet] = &[
    &bandwidth::APPLET,
    &bridge::APPLET,
    &dhcp::APPLET,
    &firewall::APPLET,
    &host_local::APPLET,
    &ipvlan::APPLET,
    &loopback::APPLET,
    &macvlan::APPLET,
    &portmap::APPLET,
    &ptp::APPLET,
    &static_ipam::APPLET,
    &tuning::APPLET,
    &vlan::APPLET,
];

/// `APPLET daemon ARGS…` for applets that are also daemons (`dhcp daemon`): its exit status,
/// `None` for the others.
pub fn daemon(applet: &str, args: &[String]) -> Option<i32> {
    (applet == "dhcp").then(|| dhcp::daemon::main(args))
}

pub fn find(name: &str) -> Option<&'static Applet> {
    TABLE.iter().copied().find(|a| a.name == name)
}
