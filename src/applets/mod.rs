//! The applet table: one file per applet, one row here. `main` dispatches on argv[0] through
//! this table and delegation finds in-process IPAM applets in it.

use crate::cni::Applet;

mod static_ipam;

pub static TABLE: &[Applet] = &[static_ipam::APPLET];

pub fn find(name: &str) -> Option<&'static Applet> {
    TABLE.iter().find(|a| a.name == name)
}
