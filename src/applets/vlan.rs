//! `vlan`: an 802.1Q sub-interface of a master link, placed in the container namespace
//! (upstream `plugins/main/vlan`).
//!
//! Keys: `master` (required; a host interface, or with `linkInContainer` one inside the
//! container namespace), `vlanId` (0–4094), `mtu` (0 = inherit, at most the master's MTU),
//! `linkInContainer`, `ipam` (required) and `dns` (the result's DNS is always this one; what the
//! IPAM plugin returns for DNS is dropped, as upstream).
//!
//! * ADD creates the VLAN under a random temporary name (`veth` + 8 hex) directly in the target
//!   namespace, so it cannot clash with a host interface called CNI_IFNAME, renames it, runs the
//!   IPAM ADD and applies the addresses and routes. Any failure after the link exists deletes it,
//!   and a failure after IPAM ADD also releases the addresses (upstream leaves the link to the
//!   runtime's DEL).
//! * DEL releases the addresses first, then deletes the link. A missing namespace or link is
//!   success. Unlike upstream, DEL does not need the master to exist (a master that disappeared,
//!   or a `linkInContainer` master whose namespace is gone, does not block cleanup), and it only
//!   deletes CNI_IFNAME when that is a VLAN link.
//! * CHECK runs the IPAM CHECK, then compares `prevResult` with the container: the interface is
//!   a VLAN with the configured id, MTU (when set), MAC, parent (the master), addresses, routes.
//! * STATUS and GC are forwarded to the IPAM plugin.

use crate::applets::shared::container::{check_own_iface, delete_with_ipam};
use crate::applets::shared::link::{self, Announce, Dns, Master, Setup};
use crate::applets::shared::settle::Dad;
use crate::cni::delegate;
use crate::cni::{Applet, CniResult, Command, Error, Request, Result, Version};
use crate::netlink::{Handle, Link};
use crate::netns::NetNs;
use crate::undo::Undo;
use serde::Deserialize;

pub static APPLET: Applet = Applet {
    name: "vlan",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conf {
    #[serde(default)]
    master: String,
    #[serde(default)]
    vlan_id: i64,
    #[serde(default)]
    mtu: i64,
    #[serde(default)]
    link_in_container: bool,
}

/// A validated configuration.
struct Vlan {
    master: Master,
    vid: u16,
    ipam: String,
}

/// Decode and validate the keys that need no kernel lookup.
fn load(req: &Request) -> Result<Vlan> {
    let c: Conf = req.decode()?;
    if c.master.is_empty() {
        return Err(Error::config(
            "\"master\" field is required. It specifies the host interface name to create the VLAN for",
        ));
    }
    let vid = u16::try_from(c.vlan_id)
        .ok()
        .filter(|&v| v <= 4094)
        .ok_or_else(|| {
            Error::config(format!(
                "invalid VLAN ID {} (must be between 0 and 4094 inclusive)",
                c.vlan_id
            ))
        })?;
    let master = Master::load(c.master, c.mtu, c.link_in_container)?;
    let ipam = req
        .ipam_type()
        .ok_or_else(|| Error::config("vlan: an \"ipam\" section with a \"type\" is required"))?
        .to_string();
    Ok(Vlan { master, vid, ipam })
}

/// Create the VLAN in the container under a temporary name, rename it to CNI_IFNAME and return
/// it (re-read after the rename). On failure nothing is left behind.
fn create(v: &Vlan, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let mtu = (v.master.mtu > 0).then_some(v.master.mtu);
    v.master
        .create_renamed(req, ns, cont, "vlan", |h, name, parent, ns| {
            h.add_vlan(name, parent, v.vid, mtu, ns).map_err(|e| {
                let hint = if e.is_exists() {
                    format!(" (is VLAN {} already in use on {}?)", v.vid, v.master.name)
                } else {
                    String::new()
                };
                Error::internal(format!("failed to create vlan: {e}{hint}"))
            })
        })
}

fn add(req: &Request) -> Result<CniResult> {
    let v = load(req)?;
    let ns = req.netns()?;
    link::add(
        req,
        &ns,
        "vlan",
        |cont| create(&v, req, &ns, cont),
        |cont, link, undo| configure(req, &v, &ns, cont, link, undo),
    )
}

/// The IPAM result applied to the link; a 1.1.0 result carries the MTU when one was
/// configured.
fn configure<'a>(
    req: &'a Request,
    v: &'a Vlan,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    undo: &mut Undo<'a>,
) -> Result<CniResult> {
    let how = Setup {
        ipam: Some(&v.ipam),
        chained: None,
        ipam_ctx: Some("failed to execute IPAM delegate"),
        announce: Announce::Never,
        dad: Dad::Detect,
        dns: Dns::Config,
    };
    let mut result = link::configure(req, ns, cont, link, undo, how)?;
    for i in &mut result.interfaces {
        i.mtu = (v.master.mtu > 0).then_some(link.mtu);
    }
    Ok(result)
}

fn del(req: &Request) -> Result<()> {
    let v = load(req)?;
    delete_with_ipam(req, Some(&v.ipam), "vlan", "vlan")
}

fn check(req: &Request) -> Result<()> {
    let v = load(req)?;
    let mut own = check_own_iface(req, Some(&v.ipam), "vlan")?;
    let ifname = &req.env.ifname;
    let m = v.master.find(&mut own.cont)?;
    if own.link.vlan_id != Some(v.vid) {
        return Err(Error::internal(format!(
            "container interface {ifname:?} has VLAN ID {}, configured {}",
            own.link.vlan_id.map_or("none".into(), |i| i.to_string()),
            v.vid
        )));
    }
    // IFLA_LINK names the parent in its own namespace: the master's index in either case.
    if own.link.link.is_some_and(|p| p != m.index) {
        return Err(Error::internal(format!(
            "container interface {ifname:?} is not a VLAN of master {:?}",
            v.master.name
        )));
    }
    if v.master.mtu != 0 && own.link.mtu != v.master.mtu {
        return Err(Error::internal(format!(
            "container interface {ifname:?} has MTU {}, configured {}",
            own.link.mtu, v.master.mtu
        )));
    }
    own.check_addresses()
}

fn status(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Status, req)
}

fn gc(req: &Request) -> Result<()> {
    load(req)?;
    delegate::to_ipam(Command::Gc, req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::env::Env;
    use crate::cni::error::code;

    fn req(conf: serde_json::Value) -> Request {
        let env = Env::from_lookup(|k| {
            Some(
                match k {
                    "CNI_COMMAND" => "ADD",
                    "CNI_CONTAINERID" => "c1",
                    "CNI_NETNS" => "/run/netns/x",
                    "CNI_IFNAME" => "eth0",
                    "CNI_PATH" => "/opt/cni/bin",
                    _ => return None,
                }
                .to_string(),
            )
        })
        .ok()
        .flatten()
        .expect("env");
        let conf_common = serde_json::from_value(conf.clone()).expect("netconf");
        Request {
            env,
            stdin: conf.to_string().into_bytes(),
            raw: conf,
            conf: conf_common,
            version: Version::V100,
            applets: crate::applets::TABLE,
        }
    }

    fn base() -> serde_json::Value {
        serde_json::json!({
            "cniVersion": "1.0.0", "name": "n", "type": "vlan",
            "master": "eth0", "vlanId": 100, "ipam": {"type": "host-local"}
        })
    }

    #[test]
    fn valid_config() {
        let v = load(&req(base())).expect("valid");
        assert_eq!(
            (v.vid, v.master.mtu, v.master.in_container),
            (100, 0, false)
        );
        assert_eq!(v.ipam, "host-local");
    }

    #[test]
    fn rejects_bad_values() {
        for (key, val) in [
            ("vlanId", serde_json::json!(4095)),
            ("vlanId", serde_json::json!(-1)),
            ("mtu", serde_json::json!(-5)),
            ("master", serde_json::json!("")),
            ("ipam", serde_json::json!({})),
        ] {
            let mut c = base();
            c[key] = val;
            let e = load(&req(c)).err().expect("must fail");
            assert_eq!(e.code, code::INVALID_CONFIG, "{key}: {e}");
        }
        let mut c = base();
        c["vlanId"] = serde_json::json!("100");
        assert_eq!(
            load(&req(c)).err().map(|e| e.code),
            Some(code::DECODE_FAILURE)
        );
        let mut c = base();
        c["vlanId"] = serde_json::json!(4094);
        assert_eq!(load(&req(c)).map(|v| v.vid).ok(), Some(4094));
    }
}
