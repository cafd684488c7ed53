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

use crate::applets::shared::iface;
use crate::applets::shared::settle::Dad;
use crate::cni::delegate;
use crate::cni::env::validate_config_ifname;
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version};
use crate::netlink::{Handle, Link};
use crate::netns::NetNs;
use crate::random;
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
    master: String,
    vid: u16,
    /// 0: inherit the master's MTU.
    mtu: u32,
    in_container: bool,
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
    validate_config_ifname("master", &c.master)?;
    let vid = u16::try_from(c.vlan_id)
        .ok()
        .filter(|&v| v <= 4094)
        .ok_or_else(|| {
            Error::config(format!(
                "invalid VLAN ID {} (must be between 0 and 4094 inclusive)",
                c.vlan_id
            ))
        })?;
    let mtu = u32::try_from(c.mtu)
        .map_err(|_| Error::config(format!("invalid MTU {}, must be [0, master MTU]", c.mtu)))?;
    let ipam = req
        .ipam_type()
        .ok_or_else(|| Error::config("vlan: an \"ipam\" section with a \"type\" is required"))?
        .to_string();
    Ok(Vlan {
        master: c.master,
        vid,
        mtu,
        in_container: c.link_in_container,
        ipam,
    })
}

/// Look up the master in the handle's namespace and check the MTU against it.
fn master(v: &Vlan, h: &mut Handle) -> Result<Link> {
    let m = h
        .link_by_name(&v.master)
        .ctx(format_args!("failed to lookup master {:?}", v.master))?
        .ok_or_else(|| {
            let where_ = if v.in_container {
                "in the container namespace"
            } else {
                "on the host"
            };
            Error::internal(format!(
                "failed to lookup master {:?}: no such interface {where_}",
                v.master
            ))
        })?;
    if v.mtu > m.mtu {
        return Err(Error::config(format!(
            "invalid MTU {}, must be [0, master MTU({})]",
            v.mtu, m.mtu
        )));
    }
    Ok(m)
}

fn open_ns(req: &Request) -> Result<NetNs> {
    NetNs::open(&req.env.netns).map_err(Error::from)
}

/// Create the VLAN in the container under a temporary name, rename it to CNI_IFNAME and return
/// it (re-read after the rename). On failure nothing is left behind.
fn create(v: &Vlan, req: &Request, ns: &NetNs, cont: &mut Handle) -> Result<Link> {
    let ifname = &req.env.ifname;
    if cont.link_by_name(ifname)?.is_some() {
        return Err(Error::internal(format!(
            "container veth name provided ({ifname}) already exists"
        )));
    }
    let tmp = format!("veth{}", random::hex(8));
    let mtu = (v.mtu > 0).then_some(v.mtu);
    let created = if v.in_container {
        let m = master(v, cont)?;
        cont.add_vlan(&tmp, m.index, v.vid, mtu, None)
    } else {
        let mut host = Handle::new()?;
        let m = master(v, &mut host)?;
        host.add_vlan(&tmp, m.index, v.vid, mtu, Some(ns))
    };
    created.map_err(|e| {
        let hint = if e.is_exists() {
            format!(" (is VLAN {} already in use on {}?)", v.vid, v.master)
        } else {
            String::new()
        };
        Error::internal(format!("failed to create vlan: {e}{hint}"))
    })?;
    super::shared::container::rename_into_place(cont, "vlan", &tmp, ifname)
}

fn add(req: &Request) -> Result<CniResult> {
    let v = load(req)?;
    let ns = open_ns(req)?;
    let mut cont = Handle::in_netns(&ns)?;
    let link = create(&v, req, &ns, &mut cont)?;
    let mut undo = Undo::new("vlan");
    let index = link.index;
    let ns_ref = &ns;
    undo.push(format!("vlan {}", req.env.ifname), move || {
        Ok(Handle::in_netns(ns_ref)?.del_link(index)?)
    });
    let r = delegate::add(&v.ipam, req)
        .ctx("failed to execute IPAM delegate")
        .and_then(|ipam| {
            let ipam_type = v.ipam.clone();
            undo.push(format!("IPAM {ipam_type}"), move || {
                delegate::del(&ipam_type, req)
            });
            finish(req, &ns, &mut cont, &link, ipam, v.mtu > 0)
        });
    undo.finish(r)
}

/// Turn the IPAM result into ours and apply it to the link.
fn finish(
    req: &Request,
    ns: &NetNs,
    cont: &mut Handle,
    link: &Link,
    mut result: CniResult,
    mtu_configured: bool,
) -> Result<CniResult> {
    if result.ips.is_empty() {
        return Err(Error::internal("IPAM plugin returned missing IP config"));
    }
    // 1.1.0 results carry the MTU when one was configured.
    iface::sole_interface(&mut result, req, link).mtu = mtu_configured.then_some(link.mtu);
    iface::configure(
        ns,
        cont,
        &req.env.ifname,
        link.index,
        &result,
        0,
        Dad::Detect,
    )?;
    result.dns = req.conf.dns.clone().unwrap_or_default();
    Ok(result)
}

fn del(req: &Request) -> Result<()> {
    let v = load(req)?;
    super::shared::container::delete_with_ipam(req, Some(&v.ipam), "vlan", "vlan")
}

fn check(req: &Request) -> Result<()> {
    let v = load(req)?;
    let (mut cont, prev, pos, link) =
        super::shared::container::check_own_iface(req, Some(&v.ipam), "vlan")?;
    let ifname = &req.env.ifname;
    let m = if v.in_container {
        master(&v, &mut cont)?
    } else {
        master(&v, &mut Handle::new()?)?
    };
    if link.vlan_id != Some(v.vid) {
        return Err(Error::internal(format!(
            "container interface {ifname:?} has VLAN ID {}, configured {}",
            link.vlan_id.map_or("none".into(), |i| i.to_string()),
            v.vid
        )));
    }
    // IFLA_LINK names the parent in its own namespace: the master's index in either case.
    if link.link.is_some_and(|p| p != m.index) {
        return Err(Error::internal(format!(
            "container interface {ifname:?} is not a VLAN of master {:?}",
            v.master
        )));
    }
    if v.mtu != 0 && link.mtu != v.mtu {
        return Err(Error::internal(format!(
            "container interface {ifname:?} has MTU {}, configured {}",
            link.mtu, v.mtu
        )));
    }
    iface::check(&mut cont, &link, &prev, pos)
}

fn status(req: &Request) -> Result<()> {
    let v = load(req)?;
    delegate::delegate(Command::Status, &v.ipam, req)?;
    Ok(())
}

fn gc(req: &Request) -> Result<()> {
    let v = load(req)?;
    delegate::delegate(Command::Gc, &v.ipam, req)?;
    Ok(())
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
        assert_eq!((v.vid, v.mtu, v.in_container), (100, 0, false));
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
