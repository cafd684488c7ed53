//! Helpers several applets share, not applets: the container end of a link (`container`: the
//! temporary-name rename, CHECK's interface part, the requested MAC), applying an IPAM result to
//! it (`iface`), the veth pair of bridge and ptp (`veth`), and the one IPv6 address-settling step
//! (`settle`). Nothing here is in the applet table; nothing here names an applet.

pub(crate) mod container;
pub(crate) mod iface;
pub(crate) mod settle;
pub(crate) mod veth;
