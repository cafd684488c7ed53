//! Kernel notifications as wake-ups: a NETLINK_ROUTE socket that joined multicast groups, so a
//! caller waiting for a state change (an IPv6 address leaving the tentative state, a link
//! getting its carrier) sleeps until the kernel announces a change instead of polling.
//!
//! Join before reading the state you wait on: a change after the read then always leaves a
//! message to wake the waiter. Messages are not decoded: every wake-up means "read again".

use super::{NlSocket, Result};
use crate::netns::NetNs;
use netlink_sys::protocols::NETLINK_ROUTE;
use std::time::{Duration, Instant};

/// RTNLGRP_LINK: links created, changed (flags, carrier), deleted.
pub const RTNLGRP_LINK: u32 = 1;
/// RTNLGRP_IPV6_IFADDR: IPv6 addresses added, changed (DAD done, DAD failed), removed.
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;

/// A socket subscribed to some rtnetlink groups of one network namespace.
pub struct Monitor {
    sock: NlSocket,
}

impl Monitor {
    /// Subscribed to `groups` in `ns` (the calling thread stays where it is).
    pub fn in_netns(ns: &NetNs, groups: &[u32]) -> Result<Monitor> {
        let sock = ns
            .enter(|| NlSocket::open(NETLINK_ROUTE, "rtnetlink monitor"))
            .map_err(|e| super::Error::new(0, e.to_string()))??;
        for &g in groups {
            sock.join(g)?;
        }
        Ok(Monitor { sock })
    }

    /// Sleep until the kernel sends a notification or `deadline` passes; `Ok(false)` on the
    /// deadline. Never blocks past it.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<bool> {
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if left > Duration::ZERO => self.sock.wait(left),
            _ => Ok(false),
        }
    }
}
