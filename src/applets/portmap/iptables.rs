//! portmap on iptables: the CNI-HOSTPORT-* chains and one CNI-DN-<hash> chain per container,
//! written with one `iptables-restore` per family, as upstream lays them out.

use super::{MARK_MASQ, Portmap, SETMARK, TOP_DNAT};
use crate::cni::{Error, Result};
use crate::hash::sha512_hex;
use crate::netfilter;
use crate::netfilter::iptables::{Iptables, Proto, Script};
use ipnet::IpNet;
use std::net::IpAddr;

pub(super) fn dnat_chain(network: &str, cid: &str) -> String {
    format!(
        "CNI-DN-{}",
        sha512_hex(format!("{network}{cid}").as_bytes(), 21)
    )
}

pub(super) fn old_snat_chain(network: &str, cid: &str) -> String {
    format!(
        "CNI-SN-{}",
        sha512_hex(format!("{network}{cid}").as_bytes(), 21)
    )
}

pub(super) fn dnat_comment(network: &str, cid: &str) -> String {
    // Trimmed to iptables' limit by iptables::comment, as upstream trims it.
    format!("dnat name: {network:?} id: {cid:?}")
}

pub(super) fn mark_def(mark: u32) -> String {
    format!("{mark:#x}/{mark:#x}")
}

// ---------------------------------------------------------------------------------------------
// iptables

/// The rules of the container's DNAT chain, in iptables-save's canonical form.
pub(super) fn dn_rules(pm: &Portmap, cip: &IpNet) -> Vec<String> {
    let v6 = cip.addr().is_ipv6();
    let host = Proto::of(&cip.addr()).host_bits();
    let mark_chain = pm.set_mark_chain.as_deref().unwrap_or(SETMARK);
    let mut rules = Vec::new();
    for m in &pm.maps {
        let Some(dst) = m.for_family(v6) else {
            continue;
        };
        let dst = dst.map(|d| format!("-d {d}/{host} ")).unwrap_or_default();
        let l4 = format!("-p {p} -m {p} --dport {}", m.host_port, p = m.proto);
        if pm.snat {
            let src = if pm.masq_all {
                String::new()
            } else {
                format!("-s {} ", cip.trunc())
            };
            rules.push(format!("{src}{dst}{l4} -j {mark_chain}"));
            if !v6 && !pm.masq_all {
                rules.push(format!("-s 127.0.0.1/32 {dst}{l4} -j {mark_chain}"));
            }
        }
        let to = match cip.addr() {
            IpAddr::V4(a) => format!("{a}:{}", m.container_port),
            IpAddr::V6(a) => format!("[{a}]:{}", m.container_port),
        };
        rules.push(format!("{dst}{l4} -j DNAT --to-destination {to}"));
    }
    rules
}

/// The jumps from CNI-HOSTPORT-DNAT: per protocol (sorted), ports in chunks of 15.
pub(super) fn entry_rules(pm: &Portmap, v6: bool) -> Vec<String> {
    let comment = netfilter::iptables::comment(&dnat_comment(&pm.network, &pm.cid));
    let mut protos: Vec<&str> = pm.maps.iter().map(|m| m.proto).collect();
    protos.sort_unstable();
    protos.dedup();
    let cond = if v6 { &pm.cond6 } else { &pm.cond4 };
    let cond: String = cond
        .iter()
        .map(|t| format!(" {}", netfilter::iptables::quote(t)))
        .collect();
    let mut out = Vec::new();
    for p in protos {
        let ports: Vec<String> = pm
            .maps
            .iter()
            .filter(|m| m.proto == p)
            .map(|m| m.host_port.to_string())
            .collect();
        for chunk in ports.chunks(15) {
            out.push(format!(
                "-p {p} {comment} -m multiport --dports {}{cond} -j {}",
                chunk.join(","),
                dnat_chain(&pm.network, &pm.cid)
            ));
        }
    }
    out
}

/// The rules every container's ADD ensures in the shared chains, `(chain, spec)`.
pub(super) fn shared_rules(pm: &Portmap) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if pm.snat && pm.set_mark_chain.is_none() {
        let def = mark_def(pm.mark);
        v.push((
            SETMARK,
            format!(
                "{} -j MARK --set-xmark {def}",
                netfilter::iptables::comment("CNI portfwd masquerade mark")
            ),
        ));
        v.push((MARK_MASQ, format!("-m mark --mark {def} -j MASQUERADE")));
        v.push((
            "POSTROUTING",
            format!(
                "{} -j {MARK_MASQ}",
                netfilter::iptables::comment("CNI portfwd requiring masquerade")
            ),
        ));
    }
    for entry in ["PREROUTING", "OUTPUT"] {
        v.push((entry, format!("-m addrtype --dst-type LOCAL -j {TOP_DNAT}")));
    }
    v
}

/// The container's chain and its rules for `cip`'s family. Without the container's chain and
/// with the shared rules in place (the usual ADD), one `iptables-restore` checks the shared
/// rules and adds the container's ([`Iptables::transact_new`]); otherwise the nat table is
/// saved first.
pub(super) fn ipt_add(pm: &Portmap, cip: &IpNet) -> Result<()> {
    let ipt = Iptables::new(Proto::of(&cip.addr()))?;
    let v6 = cip.addr().is_ipv6();
    let chain = dnat_chain(&pm.network, &pm.cid);
    let rules = dn_rules(pm, cip);
    let entries = entry_rules(pm, v6);
    let shared = shared_rules(pm);
    let assumed: Vec<(&str, &str)> = shared.iter().map(|(c, r)| (*c, r.as_str())).collect();
    ipt.transact_new("nat", &[&chain], &assumed, |saved| {
        let mut s = Script::new();
        for (c, r) in &shared {
            match *c {
                SETMARK | MARK_MASQ => {
                    s.ensure_chain(saved, c).append_unique(saved, c, r);
                }
                "POSTROUTING" => {
                    s.insert_unique(saved, c, r);
                }
                _ => {}
            }
        }
        s.ensure_chain(saved, TOP_DNAT);
        for (c, r) in &shared {
            if ["PREROUTING", "OUTPUT"].contains(c) {
                s.append_unique(saved, c, r);
            }
        }
        // Replace whatever this container had (a repeated ADD must not duplicate rules).
        if saved.has_chain(&chain) {
            for (from, spec) in saved.jumps_to(&chain) {
                s.delete(from, spec);
            }
            s.flush(&chain);
        } else {
            s.new_chain(&chain);
        }
        let ext = pm.set_mark_chain.as_deref().filter(|_| pm.snat);
        if let Some(ext) = ext
            && !saved.has_chain(ext)
        {
            return Err(Error::config(format!(
                "externalSetMarkChain: chain {ext:?} does not exist in the {} nat table",
                if v6 { "ip6tables" } else { "iptables" }
            )));
        }
        let jump = ext.map(|c| format!(" -j {c}"));
        for r in &rules {
            match (ext, &jump) {
                (Some(ext), Some(j)) if r.ends_with(j.as_str()) => {
                    s.from_key("externalSetMarkChain", &[ext], |s| {
                        s.append(&chain, r);
                    });
                }
                _ => {
                    s.append(&chain, r);
                }
            }
        }
        let (key, cond) = if v6 {
            ("conditionsV6", &pm.cond6)
        } else {
            ("conditionsV4", &pm.cond4)
        };
        let values: Vec<&str> = cond.iter().map(String::as_str).collect();
        let add_entries = |s: &mut Script| {
            for e in &entries {
                s.append(TOP_DNAT, e);
            }
        };
        if values.is_empty() {
            add_entries(&mut s);
        } else {
            s.from_key(key, &values, add_entries);
        }
        Ok(s)
    })
}

pub(super) fn ipt_check(pm: &Portmap, cip: &IpNet) -> Result<()> {
    let ipt = Iptables::new(Proto::of(&cip.addr()))?;
    let saved = ipt.save("nat")?;
    let chain = dnat_chain(&pm.network, &pm.cid);
    if !saved.has_chain(&chain) {
        return Err(Error::internal(format!(
            "chain {chain} not found in iptables table nat"
        )));
    }
    for r in dn_rules(pm, cip) {
        if !saved.has_rule(&chain, &r) {
            return Err(Error::internal(format!(
                "rule {r:?} in chain {chain} not found in table nat"
            )));
        }
    }
    let want = entry_rules(pm, cip.addr().is_ipv6()).len();
    let have = saved
        .jumps_to(&chain)
        .filter(|(c, _)| *c == TOP_DNAT)
        .count();
    if have < want {
        return Err(Error::internal(format!(
            "{TOP_DNAT} has {have} of the {want} rules jumping to {chain}"
        )));
    }
    Ok(())
}

/// Remove the container's chains (`chains`: DNAT and the old SNAT chain) and every jump to
/// them. With `pm` (its mappings and conditions, as DEL gets them) and no old SNAT chain, one
/// restore deletes the entry rules ADD wrote by their exact spec, then flushes and deletes the
/// chain: it fails as a whole unless those were all the jumps to the chain (`-X` of a chain
/// still referenced fails), and the table is then saved and searched.
pub(super) fn ipt_remove(ipt: &Iptables, pm: Option<&Portmap>, chains: &[String]) -> Result<()> {
    let mut exact = Script::new();
    if let Some(pm) = pm
        && !pm.maps.is_empty()
        && !netfilter::iptables::may_hold(ipt.proto, "nat", &[&chains[1]])
    {
        for e in entry_rules(pm, ipt.proto == Proto::V6) {
            exact.delete(TOP_DNAT, &e);
        }
        exact.flush(&chains[0]).delete_chain(&chains[0]);
    }
    ipt.transact_exact("nat", &exact, |saved| {
        let mut s = Script::new();
        for c in chains {
            s.remove_chain(saved, c);
        }
        Ok(s)
    })
}

// ---------------------------------------------------------------------------------------------
// nftables
