//! The container's port on the bridge: the veth pair, VLANs on the host end, and waiting
//! for the port to come up.

use super::Bridge;
use crate::cni::{Error, Result};
use crate::netlink::{self, Handle, Link};
use std::time::Duration;

pub(super) fn setup_port_vlans(h: &mut Handle, index: u32, b: &Bridge) -> netlink::Result<()> {
    if b.c.vlan == 0 && b.trunk.is_empty() {
        return Ok(());
    }
    if !b.c.preserve_default_vlan {
        h.bridge_vlan_del(index, 1, false)?;
    }
    if b.c.vlan != 0 {
        h.bridge_vlan_add(index, b.c.vlan as u16, true, true, false)?;
    }
    for vid in &b.trunk {
        h.bridge_vlan_add(index, *vid, false, false, false)?;
    }
    // A trunk-only port: VLAN 1 is its native VLAN (PVID, untagged), as upstream, even when
    // the trunk lists it or the bridge's default PVID is another.
    if b.c.vlan == 0 {
        h.bridge_vlan_add(index, 1, true, true, false)?;
    }
    Ok(())
}

/// Wait (≈2.5 s, upstream's schedule: 0/50/500/1000/1000 ms) for the host veth to be
/// operationally up and return it as it is then; a port that never comes up fails the ADD with
/// upstream's "bridge port in error state".
pub(super) fn wait_oper_up(h: &mut Handle, index: u32, name: &str) -> Result<Link> {
    const IF_OPER_UP: u8 = 6;
    let mut state = None;
    for ms in [0u64, 50, 500, 1000, 1000] {
        std::thread::sleep(Duration::from_millis(ms));
        match h.link_by_index(index)? {
            Some(l) if l.operstate == IF_OPER_UP => return Ok(l),
            l => state = l.map(|l| l.operstate),
        }
    }
    let state = match state {
        None => "gone".to_string(),
        Some(s) => oper_state_name(s).to_string(),
    };
    Err(Error::internal(format!(
        "bridge port in error state: {state} (host veth {name:?})"
    )))
}

/// RFC 2863 operational states as the kernel numbers them (`IF_OPER_*`), named as `ip` does.
pub(super) fn oper_state_name(s: u8) -> &'static str {
    match s {
        1 => "notpresent",
        2 => "down",
        3 => "lowerlayerdown",
        4 => "testing",
        5 => "dormant",
        6 => "up",
        _ => "unknown",
    }
}
