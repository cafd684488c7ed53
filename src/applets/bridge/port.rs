//! The container's port on the bridge: the veth pair, VLANs on the host end, and waiting
//! for the port to come up.

use super::Bridge;
use crate::applets::shared::settle;
use crate::cni::{Error, Result};
use crate::netlink::{self, BR_STATE_FORWARDING, Handle, Link, Monitor};
use std::time::{Duration, Instant};

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

/// Wait until the host veth `index` is operationally up and its bridge port forwarding: then a
/// frame the container end sends reaches the bridge's other ports.
///
/// Why: the container end's duplicate address detection sends its one probe as soon as the
/// container end comes up with its addresses, and takes the address for unique when no answer
/// comes within the probe's window. A bridge drops what a port receives before it forwards:
/// while the kernel has not yet processed the host end's carrier (a worker, linkwatch, that
/// races with the worker sending the probe — and loses more often on a loaded machine), or
/// while STP holds a new port listening and learning (2 × forward_delay). A dropped probe is
/// never answered, so a duplicate passes. Hence the container end comes up first, this waits
/// for the port, and only then are the addresses added (and probed). `monitor` joined
/// RTNLGRP_LINK in the host's namespace before the container end came up, so a change cannot
/// slip between a read and the wait. A port still not forwarding after [`settle::LIMIT`] (STP
/// with a long forward_delay, a blocked port) is not waited for longer: detection then runs
/// as upstream's does, which never waits for the port, and a line on stderr says so.
pub(super) fn wait_port_forwarding(
    h: &mut Handle,
    monitor: &mut Monitor,
    index: u32,
    name: &str,
) -> Result<()> {
    const IF_OPER_UP: u8 = 6;
    let deadline = Instant::now() + settle::LIMIT;
    loop {
        let Some(l) = h.link_by_index(index)? else {
            return Err(Error::internal(format!("host veth {name:?} disappeared")));
        };
        if l.operstate == IF_OPER_UP && l.port_state == Some(BR_STATE_FORWARDING) {
            return Ok(());
        }
        if !monitor.wait_until(deadline)? {
            crate::warn!(
                "bridge: port {name:?} not forwarding after {} s (operstate {}, port state {:?}): \
                 duplicate address detection may not reach the bridge",
                settle::LIMIT.as_secs(),
                oper_state_name(l.operstate),
                l.port_state
            );
            return Ok(());
        }
    }
}
