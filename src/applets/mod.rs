//! The applet table: one file per applet, one row here. `main` dispatches on argv[0] through
//! this table and delegation finds in-process IPAM applets in it.

use crate::cni::Applet;

mod bridge;
mod host_local;
mod static_ipam;

pub static TABLE: &[&Applet] = &[&bridge::APPLET, &host_local::APPLET, &static_ipam::APPLET];

pub fn find(name: &str) -> Option<&'static Applet> {
    TABLE.iter().copied().find(|a| a.name == name)
}
