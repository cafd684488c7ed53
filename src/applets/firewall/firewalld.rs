//! firewall on firewalld, as upstream: each container address (`IP/32`, `IP/128`) becomes a
//! source of a zone (`firewalldZone`, default `trusted`) through firewalld's D-Bus zone
//! interface; `ZONE_ALREADY_SET` counts as done. Beyond upstream: ADD records the addresses
//! and the zone first (mod.rs), so DEL and GC remove them without prevResult and whatever the
//! backend says by then; a failed ADD removes the sources it added; CHECK fails when a source
//! is not in the zone (upstream only looks at whether the query itself failed).

use super::Firewall;
use crate::cni::{Error, Result};
use crate::dbus::{Bus, Value, system_address};
use crate::undo::Undo;
use std::net::IpAddr;
use std::time::Duration;

const NAME: &str = "org.fedoraproject.FirewallD1";
const PATH: &str = "/org/fedoraproject/FirewallD1";
const ZONE: &str = "org.fedoraproject.FirewallD1.zone";
/// How long one D-Bus call may take (godbus, upstream's client, waits forever).
const TIMEOUT: Duration = Duration::from_secs(10);

/// A zone name as firewalld accepts it: letters, digits, `_`, `-`, at most one inner `/`
/// (ASCII letters only: Unicode's tables would cost the binary ~17 KB).
pub(super) fn valid_zone(z: &str) -> bool {
    !z.is_empty()
        && z.len() <= 64
        && z.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/'))
        && !z.starts_with('/')
        && !z.ends_with('/')
        && z.matches('/').count() <= 1
}

/// The source upstream adds for an address.
pub(super) fn source(ip: &IpAddr) -> String {
    format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 })
}

/// The system bus, if one listens.
pub(super) fn bus() -> Result<Option<Bus>> {
    Bus::system(TIMEOUT)
}

/// The system bus when firewalld owns its name there (upstream's auto-detection).
pub(super) fn running() -> Result<Option<Bus>> {
    let Some(mut bus) = bus()? else {
        return Ok(None);
    };
    Ok(bus.has_owner(NAME)?.then_some(bus))
}

fn zone_call(bus: &mut Bus, method: &str, zone: &str, src: &str) -> Result<Result<Value, String>> {
    bus.call(NAME, PATH, ZONE, method, &[zone, src])
}

/// The bus the firewalld backend needs (`backend: firewalld` on a node without one is an error).
pub(super) fn need() -> Result<Bus> {
    bus()?.ok_or_else(|| {
        Error::internal(format!(
            "firewalld backend: no D-Bus system bus at {}",
            system_address()
        ))
    })
}

/// Add the sources of `ips` to the zone; `undo` learns to remove those this call added, also
/// when it fails half-way.
pub(super) fn add<'a>(
    fw: &'a Firewall,
    mut bus: Bus,
    ips: &[IpAddr],
    undo: &mut Undo<'a>,
) -> Result<()> {
    let zone = fw.zone.as_str();
    let mut added = Vec::new();
    let mut result = Ok(());
    for src in ips.iter().map(source) {
        match zone_call(&mut bus, "addSource", zone, &src) {
            Ok(Ok(_)) => added.push(src),
            Ok(Err(e)) if e.contains("ZONE_ALREADY_SET") => {}
            Ok(Err(e)) => {
                result = Err(Error::internal(format!(
                    "failed to add the address {src} to {zone} zone: {e}"
                )));
                break;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    undo.push("firewalld sources", move || remove(&mut bus, zone, &added));
    result
}

/// CHECK: every source is in the zone.
pub(super) fn check(fw: &Firewall, mut bus: Bus, ips: &[IpAddr]) -> Result<()> {
    for src in ips.iter().map(source) {
        let r = zone_call(&mut bus, "querySource", &fw.zone, &src)?;
        if r != Ok(Value::Bool(true)) {
            let why = r.err().map(|e| format!(": {e}")).unwrap_or_default();
            return Err(Error::internal(format!(
                "failed to find the address {src} in {} zone{why}",
                fw.zone
            )));
        }
    }
    Ok(())
}

/// Remove sources from a zone. firewalld's refusals (not there, no such zone, not running)
/// are ignored as upstream ignores them; a bus that fails is an error.
pub(super) fn remove(bus: &mut Bus, zone: &str, sources: &[String]) -> Result<()> {
    for src in sources {
        zone_call(bus, "removeSource", zone, src)?.ok();
    }
    Ok(())
}

/// Remove the sources of `ips` from `zone`, if there is a bus (without one there is no
/// firewalld, and nothing to remove).
pub(super) fn remove_from(zone: &str, ips: &[IpAddr]) -> Result<()> {
    if ips.is_empty() {
        return Ok(());
    }
    match bus()? {
        Some(mut bus) => remove(&mut bus, zone, &ips.iter().map(source).collect::<Vec<_>>()),
        None => Ok(()),
    }
}
