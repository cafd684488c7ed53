//! cnibox: the standard CNI plugins as one multi-call binary.
//!
//! Layers point one way: `applets` use `cni` (the protocol), `ipam`, `netlink`, `netns`,
//! `netfilter`, `tc` and `sysctl`; none of those know about applets.

pub mod applets;
pub mod attachment;
pub mod cni;
pub mod error;
pub mod hash;
pub mod ipam;
pub mod netfilter;
pub mod netlink;
pub mod netns;
pub mod overlap;
pub mod random;
pub mod sysctl;
#[cfg(test)]
pub(crate) mod testing;
pub mod tuntap;
pub mod undo;
