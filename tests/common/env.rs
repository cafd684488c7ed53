//! The CNI_* environments tests build: one place, so no test file spells out
//! `Env { container_id, netns, ..Env::default() }` again (`tests/testkit.rs` checks).

use super::{Env, NetNs};

/// The environment for container `id` whose namespace is `ns` (ifname `eth0`).
pub fn env_for(ns: &NetNs, id: &str) -> Env {
    Env {
        container_id: id.into(),
        netns: ns.path(),
        ..Env::default()
    }
}

/// The environment for container `id` with no namespace (CNI_NETNS unset): IPAM plugins, and
/// DEL/GC after the namespace is gone.
pub fn env_without_netns(id: &str) -> Env {
    Env {
        container_id: id.into(),
        netns: String::new(),
        ..Env::default()
    }
}

/// [`Env::default`] with container ID `id` (the default, dummy netns path kept).
pub fn env_id(id: &str) -> Env {
    Env {
        container_id: id.into(),
        ..Env::default()
    }
}

impl Env {
    /// The same environment with CNI_IFNAME `ifname`.
    pub fn with_ifname(mut self, ifname: &str) -> Env {
        self.ifname = ifname.into();
        self
    }

    /// The same environment with one more variable (e.g. `DBUS_SYSTEM_BUS_ADDRESS`).
    pub fn with_var(mut self, key: &str, value: &str) -> Env {
        self.extra.push((key.into(), value.into()));
        self
    }
}
