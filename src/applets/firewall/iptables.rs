//! firewall on iptables: CNI-FORWARD with the admin chain and per-address rules, and the
//! CNI-ISOLATION-STAGE-1/2 chains of `ingressPolicy`, as upstream lays them out.

use super::{FORWARD_CHAIN, Firewall, Policy, STAGE1, STAGE2, by_family};
use crate::cni::{Error, Result};
use crate::netfilter;
use crate::netfilter::iptables::{Iptables, Proto, Saved, Script};
use std::net::IpAddr;

pub(super) fn forward_jump() -> String {
    format!(
        "{} -j {FORWARD_CHAIN}",
        netfilter::iptables::comment("CNI firewall plugin rules")
    )
}

pub(super) fn admin_jump(admin: &str) -> String {
    format!(
        "{} -j {admin}",
        netfilter::iptables::comment("CNI firewall plugin admin overrides")
    )
}

/// The two per-address rules, in iptables-save form.
pub(super) fn ip_rules(ip: IpAddr) -> [String; 2] {
    let host = format!("{ip}/{}", Proto::of(&ip).host_bits());
    [
        format!("-d {host} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"),
        format!("-s {host} -j ACCEPT"),
    ]
}

pub(super) fn policy_comment(policy: &str) -> String {
    netfilter::iptables::comment(&format!(
        "CNI firewall plugin rules (ingressPolicy: {policy})"
    ))
}

/// The isolation rules for `bridge`: (chain, rule, insert at head?), in upstream's order.
pub(super) fn isolation_rules(bridge: &str, policy: Policy) -> Vec<(&'static str, String, bool)> {
    let both = policy_comment("same-bridge|isolated");
    let this = policy_comment(policy.name());
    let mut v = vec![
        ("FORWARD", format!("{both} -j {STAGE1}"), true),
        (
            STAGE1,
            format!("-i {bridge} ! -o {bridge} {this} -j {STAGE2}"),
            true,
        ),
    ];
    if policy == Policy::Isolated {
        v.push((
            STAGE1,
            format!("-i {bridge} -o {bridge} {this} -j DROP"),
            true,
        ));
    }
    v.push((STAGE1, format!("{both} -j RETURN"), false));
    v.push((STAGE2, format!("-o {bridge} {both} -j DROP"), true));
    v.push((STAGE2, format!("{both} -j RETURN"), false));
    v
}

/// ADD's rules; `forward: false` writes only the isolation rules (the firewalld backend).
pub(super) fn ipt_add(
    fw: &Firewall,
    ips: &[IpAddr],
    bridge: Option<&str>,
    forward: bool,
) -> Result<()> {
    for (proto, mine) in by_family(ips) {
        let ipt = Iptables::new(proto)?;
        ipt.transact("filter", |saved| {
            let mut s = Script::new();
            if forward {
                forward_rules(&mut s, saved, fw, &mine);
            }
            if let Some(br) = bridge {
                s.ensure_chain(saved, STAGE1).ensure_chain(saved, STAGE2);
                s.from_key("prevResult.interfaces[0].name", &[br], |s| {
                    for (chain, rule, head) in isolation_rules(br, fw.policy) {
                        if head {
                            s.insert_unique(saved, chain, &rule);
                        } else {
                            s.append_unique(saved, chain, &rule);
                        }
                    }
                });
            }
            Ok(s)
        })?;
    }
    Ok(())
}

/// CNI-FORWARD with its jumps, and the rules of `mine`.
fn forward_rules(s: &mut Script, saved: &Saved, fw: &Firewall, mine: &[IpAddr]) {
    s.ensure_chain(saved, FORWARD_CHAIN)
        .insert_unique(saved, "FORWARD", &forward_jump())
        .from_key("iptablesAdminChainName", &[&fw.admin], |s| {
            s.ensure_chain(saved, &fw.admin).insert_unique(
                saved,
                FORWARD_CHAIN,
                &admin_jump(&fw.admin),
            );
        });
    for ip in mine {
        for r in ip_rules(*ip) {
            s.append_unique(saved, FORWARD_CHAIN, &r);
        }
    }
}

pub(super) fn ipt_check(fw: &Firewall, ips: &[IpAddr]) -> Result<()> {
    for (proto, mine) in by_family(ips) {
        let saved = Iptables::new(proto)?.save("filter")?;
        let mut want = vec![
            ("FORWARD", forward_jump()),
            (FORWARD_CHAIN, admin_jump(&fw.admin)),
        ];
        for ip in &mine {
            for r in ip_rules(*ip) {
                want.push((FORWARD_CHAIN, r));
            }
        }
        for (chain, rule) in want {
            if !saved.has_rule(chain, &rule) {
                return Err(Error::internal(format!(
                    "expected {chain} rule {rule:?} not found"
                )));
            }
        }
    }
    Ok(())
}

/// Delete the per-address rules of `ips` that exist: first all of them by their exact spec in
/// one restore (which fails as a whole if any is missing), then, if that failed, those a
/// saved table shows.
pub(super) fn ipt_remove(ips: &[IpAddr]) -> Result<()> {
    for (proto, mine) in by_family(ips) {
        if !netfilter::iptables::may_hold(proto, "filter", &[FORWARD_CHAIN]) {
            continue;
        }
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        let mut exact = Script::new();
        for ip in &mine {
            for r in ip_rules(*ip) {
                exact.delete(FORWARD_CHAIN, &r);
            }
        }
        ipt.transact_exact("filter", &exact, |saved: &Saved| {
            let mut s = Script::new();
            for ip in &mine {
                for r in ip_rules(*ip) {
                    if saved.has_rule(FORWARD_CHAIN, &r) {
                        s.delete(FORWARD_CHAIN, &r);
                    }
                }
            }
            Ok(s)
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// nftables
