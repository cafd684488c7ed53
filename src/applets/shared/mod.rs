//! Helpers several applets share, not applets: how a container link is made (`link`: the ADD
//! with its undo, the master lookup, the temporary-name rename), its CHECK and DEL part and the
//! requested MAC (`container`), applying an IPAM result to it (`iface`), the veth pair of bridge
//! and ptp (`veth`), and the one IPv6 address-settling step (`settle`). Nothing here is in the
//! applet table; nothing here names an applet.

pub(crate) mod container;
pub(crate) mod iface;
pub(crate) mod link;
pub(crate) mod settle;
pub(crate) mod veth;
