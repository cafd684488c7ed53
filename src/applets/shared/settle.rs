//! The one address-settling step shared by every applet that configures container addresses
//! (ptp, bridge, macvlan, ipvlan, vlan, host-device, dummy, tap through
//! [`crate::applets::shared::iface::configure`]; vrf for the addresses its enslaving makes tentative
//! again): when ADD returns, every IPv6 address it configured is usable, and an address another
//! node already holds fails the ADD (which the applet then undoes).
//!
//! Upstream v1.9 (`ip.SettleAddresses`) polls every 50 ms until no IPv6 address of the link is
//! tentative, which costs an IPv6 ADD 1–2 s: the kernel waits a random 0–1 s
//! (`router_solicitation_delay`) before its one probe, then 1 s (`retrans_time_ms`) for an
//! answer. Here:
//!
//! * [`Dad::Off`] where no duplicate can exist — the container end of a veth whose only peer is
//!   the plugin's own host end (ptp; bridge unless `enabledad`, which upstream also runs without
//!   DAD through `accept_dad=0`): the addresses get IFA_F_NODAD and are usable the moment they
//!   are added, whatever the link's carrier. Nothing is waited for.
//! * [`Dad::Detect`] where a duplicate can exist (macvlan, ipvlan, vlan, host-device, dummy,
//!   bridge with `enabledad`): detection still runs and is waited for, but fast. For the time of
//!   the ADD only, the interface gets `optimistic_dad`/`use_optimistic` (the addresses are added
//!   IFA_F_OPTIMISTIC: probed at once, with no random delay), `router_solicitation_delay=0` (the
//!   same for addresses the kernel re-probes, as after vrf's enslaving) and
//!   `retrans_time_ms` = [`PROBE_WAIT_MS`] (how long an answer is waited for); the old values
//!   are put back when the step ends, however it ends. The wait sleeps on the kernel's
//!   RTNLGRP_IPV6_IFADDR/RTNLGRP_LINK notifications, never longer than [`LIMIT`]. A duplicate
//!   (IFA_F_DADFAILED) fails at once, naming address and interface. The verdict is the
//!   kernel's: the window for an answer starts when its probe is sent, and it holds only if the
//!   probe can reach the other nodes then — so where the link leads into a bridge port, the
//!   bridge applet adds the addresses once that port forwards (`bridge::port::
//!   wait_port_forwarding`: a port not yet enabled, or held by STP, drops the probe).
//! * [`Dad::Deferred`] (tap): as `Detect`, but a link with no carrier — a tap whose reader (the
//!   VM) attaches after ADD — is not waited for: detection cannot send anything before the
//!   carrier comes. The optimistic addresses are usable (bindable) at once; the kernel probes
//!   when the carrier comes and marks a duplicate `dadfailed` then. Upstream waits 5 s and
//!   returns the addresses tentative (unusable) in that case.
//!
//! `Detect` on a link without a carrier (a macvlan on a master that is down) waits for one up to
//! [`LIMIT`] and then succeeds with the optimistic addresses, as upstream (v1.9, #1207) succeeds
//! after its 5 s with tentative ones. A link with a carrier still tentative at [`LIMIT`] fails.

use crate::error::{Context, Error, Result};
use crate::netlink::monitor::{RTNLGRP_IPV6_IFADDR, RTNLGRP_LINK};
use crate::netlink::{
    Family, Handle, IFA_F_DADFAILED, IFA_F_NODAD, IFA_F_OPTIMISTIC, IFA_F_TENTATIVE, Monitor,
};
use crate::netns::NetNs;
use crate::sysctl;
use ipnet::IpNet;
use std::time::{Duration, Instant};

/// How long an address may stay tentative (upstream's ConfigureIface bound).
pub const LIMIT: Duration = Duration::from_secs(5);

/// How long the kernel waits for an answer to its duplicate-address probe during the ADD (the
/// kernel's default is 1000 ms). A node holding the address answers as soon as the probe
/// arrives (well under 1 ms on a LAN); what answers later — a proxy-NDP router, which delays
/// its answers by up to `proxy_delay` (0.8 s) — may be missed. See benches/NOTES.md.
pub const PROBE_WAIT_MS: &str = "100";

/// Whether duplicate address detection can find anything on the link, and whether to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dad {
    /// No other node can hold the address: IFA_F_NODAD, usable at once, nothing waited for.
    Off,
    /// A duplicate can exist: fast detection, waited for; a duplicate fails the ADD.
    Detect,
    /// As `Detect`, but a link without a carrier (a tap before its reader attaches) is not
    /// waited for: its optimistic addresses are usable, detection runs when the carrier comes.
    Deferred,
}

impl Dad {
    /// The IFA_F_* flags an IPv6 address of this link is added with.
    pub fn addr_flags(self) -> u32 {
        match self {
            Dad::Off => IFA_F_NODAD,
            Dad::Detect | Dad::Deferred => IFA_F_OPTIMISTIC,
        }
    }
}

/// The per-interface keys set for the time of the step (see the module documentation).
fn fast_dad(ifname: &str) -> [(String, &'static str); 4] {
    let conf = |leaf| sysctl::iface("net/ipv6/conf", ifname, leaf);
    [
        (conf("optimistic_dad"), "1"),
        (conf("use_optimistic"), "1"),
        (conf("router_solicitation_delay"), "0"),
        (
            sysctl::iface("net/ipv6/neigh", ifname, "retrans_time_ms"),
            PROBE_WAIT_MS,
        ),
    ]
}

/// One settling step for one interface: [`Settle::begin`] before its IPv6 addresses are added
/// (or it is cycled), [`Settle::wait`] once it is up. The interface's own settings are put back
/// when the value is dropped, also on an early return.
pub struct Settle<'a> {
    ns: &'a NetNs,
    ifname: String,
    index: u32,
    dad: Dad,
    /// Subscribed before the addresses exist, so no change can slip between a read and a wait.
    monitor: Option<Monitor>,
    /// (key, value before the step) of every key changed.
    saved: Vec<(String, String)>,
}

impl<'a> Settle<'a> {
    /// Start settling `ifname` (index `index` in `ns`): for `Detect`/`Deferred`, subscribe to
    /// address and link changes and make detection fast on this interface.
    pub fn begin(ns: &'a NetNs, ifname: &str, index: u32, dad: Dad) -> Result<Settle<'a>> {
        let mut s = Settle {
            ns,
            ifname: ifname.to_string(),
            index,
            dad,
            monitor: None,
            saved: Vec::new(),
        };
        if dad == Dad::Off {
            return Ok(s);
        }
        s.monitor = Some(
            Monitor::in_netns(ns, &[RTNLGRP_IPV6_IFADDR, RTNLGRP_LINK])
                .ctx("failed to watch IPv6 address changes")?,
        );
        s.saved = ns.enter(|| {
            let mut saved = Vec::new();
            for (key, value) in fast_dad(ifname) {
                // Best effort: a kernel without optimistic DAD lacks its keys and detection
                // is then only slower; the wait below still holds the guarantee.
                if let Ok(old) = sysctl::get(&key)
                    && old.trim() != value
                    && sysctl::set(&key, value).is_ok()
                {
                    saved.push((key, old.trim().to_string()));
                }
            }
            saved
        })?;
        Ok(s)
    }

    /// The IFA_F_* flags to add this interface's IPv6 addresses with.
    pub fn addr_flags(&self) -> u32 {
        self.dad.addr_flags()
    }

    /// Wait until none of the IPv6 addresses `addrs` of the interface is tentative (IPv4 ones
    /// are ignored). An address found duplicate, or gone, fails at once.
    pub fn wait(mut self, h: &mut Handle, addrs: &[IpNet]) -> Result<()> {
        let want: Vec<IpNet> = addrs
            .iter()
            .filter(|a| a.addr().is_ipv6())
            .copied()
            .collect();
        let Some(monitor) = self.monitor.as_mut() else {
            return Ok(());
        };
        if want.is_empty() {
            return Ok(());
        }
        let (ifname, index) = (&self.ifname, self.index);
        let deadline = Instant::now() + LIMIT;
        loop {
            let have = h.addrs(Some(index), Family::V6)?;
            let mut pending = false;
            for a in &want {
                let Some(found) = have.iter().find(|x| x.net.addr() == a.addr()) else {
                    return Err(Error::internal(format!(
                        "IPv6 address {a} disappeared from {ifname:?} while waiting for duplicate address detection"
                    )));
                };
                if found.flags & IFA_F_DADFAILED != 0 {
                    return Err(Error::internal(format!(
                        "IPv6 address {a} on {ifname:?} is already in use on the link (duplicate address detection failed)"
                    )));
                }
                pending |= found.flags & IFA_F_TENTATIVE != 0;
            }
            if !pending {
                return Ok(());
            }
            let carrier = h
                .link_by_index(index)?
                .ok_or_else(|| Error::internal(format!("{ifname:?} disappeared")))?
                .carrier;
            if !carrier && self.dad == Dad::Deferred {
                return Ok(());
            }
            if !monitor.wait_until(deadline)? {
                if !carrier {
                    // Detection cannot run without a carrier; it will once one comes.
                    return Ok(());
                }
                return Err(Error::internal(format!(
                    "IPv6 addresses of {ifname:?} still tentative after {} s",
                    LIMIT.as_secs()
                )));
            }
        }
    }
}

impl Drop for Settle<'_> {
    fn drop(&mut self) {
        if self.saved.is_empty() {
            return;
        }
        let saved = std::mem::take(&mut self.saved);
        // Best effort: the interface may be gone (a failed ADD deleted it) or have left the
        // namespace, which resets its settings anyway.
        let _ = self.ns.enter(|| {
            for (key, old) in &saved {
                let _ = sysctl::set(key, old);
            }
        });
    }
}
