//! bandwidth (chained): shapes a veth-attached container with TBF, over netlink.
//!
//! Mirrors upstream `plugins/meta/bandwidth` (the TBF implementation of v1.6+): ingress
//! (traffic into the container) is a TBF at the root of the host veth; egress is redirected
//! from the host veth's ingress qdisc by a u32 match-all mirred filter to an ifb named
//! `bwp` + 12 hex of sha512(network + containerID), shaped by a TBF there; the ifb is appended
//! to the result. Static limits win over runtimeConfig.bandwidth. Beyond upstream: the ifb
//! records its owner in its ifalias so GC can remove ifbs of containers that are gone; an
//! ingress or clsact qdisc someone else put on the host veth is named in the error instead of
//! "file exists"; a failed ADD removes what it added.

use crate::cni::error::code;
use crate::cni::gojson;
use crate::cni::result::{CniResult, Interface};
use crate::cni::{Applet, CodeContext, Context, Error, Request, Result, Version};
use crate::hash::sha512_hex;
use crate::netlink::tc::{self, Tbf};
use crate::netlink::{Handle, Link, fmt_mac};
use crate::undo::{ErrorList, Undo};
use serde::Deserialize;
use std::collections::HashSet;

pub static APPLET: Applet = Applet {
    name: "bandwidth",
    versions: &[
        Version::V030,
        Version::V031,
        Version::V040,
        Version::V100,
        Version::V110,
    ],
    add,
    del,
    check,
    status: None,
    gc: Some(gc),
};

const ALIAS_PREFIX: &str = "cnibox-bandwidth";

/// `runtimeConfig.bandwidth`. Unknown keys are refused: a misspelt limit must fail the ADD, not
/// leave the pod unshaped (Go's spellings such as `IngressRate` match, see `cni::gojson`).
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Limits {
    #[serde(default)]
    ingress_rate: u64,
    #[serde(default)]
    ingress_burst: u64,
    #[serde(default)]
    egress_rate: u64,
    #[serde(default)]
    egress_burst: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Conf {
    #[serde(default)]
    ingress_rate: Option<u64>,
    #[serde(default)]
    ingress_burst: Option<u64>,
    #[serde(default)]
    egress_rate: Option<u64>,
    #[serde(default)]
    egress_burst: Option<u64>,
}

/// The config, validated: the limits in force, from the static keys if any is present, else
/// from runtimeConfig.bandwidth.
fn load(req: &Request) -> Result<Limits> {
    let c: Conf = req.decode()?;
    let any_static = c
        .ingress_rate
        .or(c.ingress_burst)
        .or(c.egress_rate)
        .or(c.egress_burst)
        .is_some();
    // Errors name the keys the limits came from.
    let prefix = if any_static {
        ""
    } else {
        "runtimeConfig.bandwidth."
    };
    let l = if any_static {
        Limits {
            ingress_rate: c.ingress_rate.unwrap_or(0),
            ingress_burst: c.ingress_burst.unwrap_or(0),
            egress_rate: c.egress_rate.unwrap_or(0),
            egress_burst: c.egress_burst.unwrap_or(0),
        }
    } else if let Some(v) = req.runtime_config("bandwidth") {
        gojson::from_value::<Limits>(v).ctx_code(code::DECODE_FAILURE, "runtimeConfig.bandwidth")?
    } else {
        Limits::default()
    };
    for (dir, rate, burst) in [
        ("ingress", l.ingress_rate, l.ingress_burst),
        ("egress", l.egress_rate, l.egress_burst),
    ] {
        // upstream's messages, after the keys.
        let err = |key: &str, why: &str| Err(Error::config(format!("{prefix}{dir}{key}: {why}")));
        if burst == 0 && rate != 0 {
            return err("Burst", "if rate is set, burst must also be set");
        }
        if rate == 0 && burst != 0 {
            return err("Rate", "if burst is set, rate must also be set");
        }
        if burst / 8 >= u64::from(u32::MAX) {
            return err("Burst", "burst cannot be more than 4GB");
        }
    }
    Ok(l)
}

pub fn ifb_name(network: &str, container_id: &str) -> String {
    format!(
        "bwp{}",
        sha512_hex(format!("{network}{container_id}").as_bytes(), 12)
    )
}

fn alias(network: &str, container_id: &str) -> String {
    format!("{ALIAS_PREFIX} {network} {container_id}")
}

/// The host end of the container's veth, which must be listed in prevResult without sandbox.
/// A container interface that is no veth (bandwidth chained after macvlan, ipvlan, tap…) or
/// whose peer prevResult does not list is a configuration error (code 7): upstream's 999
/// would say "try something else" to nobody.
fn host_veth(req: &Request, prev: &CniResult, host: &mut Handle) -> Result<Link> {
    let ns = req.netns()?;
    let mut cont = Handle::in_netns(&ns)?;
    let ifname = &req.env.ifname;
    let iface = cont.link_by_name(ifname)?.ok_or_else(|| {
        Error::internal(format!(
            "container interface {ifname} (CNI_IFNAME) not found"
        ))
    })?;
    let kind = iface.kind.as_deref().unwrap_or("device");
    let peer = iface.link.filter(|_| kind == "veth").ok_or_else(|| {
        Error::config(format!(
            "container interface {ifname} (CNI_IFNAME) is a {kind}, not a veth: \
                 bandwidth shapes the host end of a veth (chain it after bridge or ptp)"
        ))
    })?;
    if iface.link_netnsid.is_none() {
        // Both ends in the container: the index names nothing on the host.
        return Err(Error::config(format!(
            "prevResult.interfaces: container interface {ifname} is a veth whose peer is in \
             the container too, not on the host"
        )));
    }
    let listed = |name: &str| {
        prev.interfaces
            .iter()
            .any(|i| i.sandbox.is_empty() && i.name == name)
    };
    match host.link_by_index(peer)? {
        Some(link) if listed(&link.name) => Ok(link),
        found => Err(Error::config(format!(
            "prevResult.interfaces: no host interface is the veth peer of container interface \
             {ifname} (peer index {peer}{})",
            found.map_or_else(
                || ", not in the host namespace".to_string(),
                |l| format!(": {}, not listed without sandbox", l.name)
            )
        ))),
    }
}

fn add(req: &Request) -> Result<CniResult> {
    let l = load(req)?;
    let prev = req.prev_result()?;
    if l == Limits::default() {
        return Ok(prev.unwrap_or_default());
    }
    let mut result =
        prev.ok_or_else(|| Error::config("must be called as chained plugin (no prevResult)"))?;
    let mut host = Handle::new()?;
    let hv = host_veth(req, &result, &mut host)?;
    if l.egress_rate > 0
        && let Some(kind) = tc::ingress_user(&mut host, hv.index)?
    {
        return Err(Error::internal(format!(
            "host veth {} already has an {kind:?} qdisc (another tc user such as an eBPF agent); \
             bandwidth cannot add its ingress qdisc for egress shaping",
            hv.name
        )));
    }
    let ifb = ifb_name(&req.conf.name, &req.env.container_id);
    let (hv_index, hv_name) = (hv.index, hv.name.clone());
    let mut undo = Undo::new("bandwidth");
    let r = (|| -> Result<()> {
        if l.ingress_rate > 0 {
            // One request each: a failed add leaves nothing, and someone else's qdisc that made
            // it fail must stay.
            tc::add_tbf(
                &mut host,
                hv.index,
                Tbf::from_bits(l.ingress_rate, l.ingress_burst),
            )
            .ctx(format_args!("create ingress qdisc on {}", hv.name))?;
            undo.push(format!("root qdisc on {hv_name}"), move || {
                Ok(tc::del_qdisc(&mut Handle::new()?, hv_index, false)?)
            });
        }
        if l.egress_rate > 0 {
            // Queue length 0, as upstream makes it (the ifb driver's default is 32).
            let index = host.add_ifb(
                &ifb,
                Some(hv.mtu),
                Some(0),
                Some(&alias(&req.conf.name, &req.env.container_id)),
            )?;
            // Removing the ifb also removes the filter's target.
            undo.push(format!("ifb {ifb}"), move || {
                Ok(Handle::new()?.del_link(index)?)
            });
            host.set_up(index, true)?;
            let link = host.link(&ifb)?;
            tc::add_ingress(&mut host, hv.index)
                .ctx(format_args!("create ingress qdisc on {}", hv.name))?;
            undo.push(format!("ingress qdisc on {hv_name}"), move || {
                Ok(tc::del_qdisc(&mut Handle::new()?, hv_index, true)?)
            });
            tc::add_redirect(&mut host, hv.index, index).ctx("add filter")?;
            tc::add_tbf(
                &mut host,
                index,
                Tbf::from_bits(l.egress_rate, l.egress_burst),
            )
            .ctx(format_args!("create ifb qdisc on {ifb}"))?;
            result.interfaces.push(Interface {
                name: ifb.clone(),
                mac: link.mac.map(|m| fmt_mac(&m)).unwrap_or_default(),
                ..Default::default()
            });
        }
        Ok(())
    })();
    undo.finish(r)?;
    Ok(result)
}

fn del(req: &Request) -> Result<()> {
    let l = load(req)?;
    let mut host = Handle::new()?;
    // What ADD put on the host veth goes too (upstream leaves it for the veth's deletion,
    // which a host interface that outlives the container never gets). Best effort: the
    // container and its veth may already be gone.
    if let Ok(Some(prev)) = req.prev_result()
        && let Ok(hv) = host_veth(req, &prev, &mut host)
    {
        if l.ingress_rate > 0 {
            tc::del_qdisc(&mut host, hv.index, false)
                .ctx(format_args!("delete qdisc on {}", hv.name))?;
        }
        if l.egress_rate > 0 {
            tc::del_qdisc(&mut host, hv.index, true)
                .ctx(format_args!("delete qdisc on {}", hv.name))?;
        }
    }
    // The runtime waits for DEL, not for the kernel to free the ifb: returned once unlisted
    // (its name free), as the container links' DEL does (`del_link_unlisted`).
    let ifb = ifb_name(&req.conf.name, &req.env.container_id);
    host.del_link_by_name_unlisted(&ifb)
        .ctx(format_args!("delete {ifb}"))?;
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let l = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("must be called as a chained plugin"))?;
    let mut host = Handle::new()?;
    let hv = host_veth(req, &prev, &mut host)?;
    let mut want = Vec::new();
    if l.ingress_rate > 0 {
        want.push((
            hv.index,
            hv.name.clone(),
            Tbf::from_bits(l.ingress_rate, l.ingress_burst),
        ));
    }
    if l.egress_rate > 0 {
        let ifb = ifb_name(&req.conf.name, &req.env.container_id);
        let link = host
            .link_by_name(&ifb)?
            .ok_or_else(|| Error::internal(format!("get ifb device: {ifb} not found")))?;
        want.push((
            link.index,
            ifb,
            Tbf::from_bits(l.egress_rate, l.egress_burst),
        ));
    }
    for (index, name, w) in want {
        let have = tc::root_tbf(&mut host, index)?
            .ok_or_else(|| Error::internal(format!("Failed to find tbf qdisc on {name}")))?;
        for (what, a, b) in [
            ("Rate", have.rate, w.rate),
            ("Limit", have.limit.into(), w.limit.into()),
            ("Buffer", have.buffer.into(), w.buffer.into()),
        ] {
            if a != b {
                return Err(Error::internal(format!(
                    "{what} doesn't match on {name}: {a} != {b}"
                )));
            }
        }
    }
    Ok(())
}

/// Remove the ifbs this network created for containers that are no longer valid attachments
/// (only ifbs whose alias names their owner, i.e. created by cnibox).
fn gc(req: &Request) -> Result<()> {
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let keep: HashSet<&str> = valid.iter().map(|a| a.container_id.as_str()).collect();
    let prefix = format!("{ALIAS_PREFIX} {} ", req.conf.name);
    let mut host = Handle::new()?;
    let mut errors = ErrorList::new();
    for l in host.links()? {
        let Some(cid) = l.alias.as_deref().and_then(|a| a.strip_prefix(&prefix)) else {
            continue;
        };
        if l.kind.as_deref() == Some("ifb")
            && l.name.starts_with("bwp")
            && !keep.contains(cid)
            && let Err(e) = host.del_link(l.index)
        {
            errors.push(Error::from(e).ctx(format_args!("delete {}", l.name)));
        }
    }
    errors.into_result()
}
