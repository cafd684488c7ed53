//! bridge, exec'd like a runtime does, inside throwaway "node" namespaces with real container
//! namespaces: traffic, CHECK/DEL behaviour, result shape per version, concurrency, undo on
//! failure, and side by side with the reference plugin.

mod common;
use common::env::env_for;
use common::wait::{eventually, secs};
use common::*;
use serde_json::{Value, json};
use std::collections::HashSet;

fn conf(sb: &Sandbox, version: &str, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": version,
        "name": "brnet",
        "type": "bridge",
        "bridge": "cni0",
        "isGateway": true,
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": "10.77.0.0/24"}], [{"subnet": "fd77::/64"}]],
            "dataDir": sb.path("ipam").display().to_string(),
        }
    });
    merge(&mut c, extra);
    c
}

fn merge(c: &mut Value, extra: Value) {
    if let Value::Object(m) = extra {
        for (k, v) in m {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(&k);
            } else {
                c[k] = v;
            }
        }
    }
}

fn links(node: &NetNs) -> Vec<String> {
    node.sh(&["ip", "-o", "link", "show"])
        .lines()
        .filter_map(|l| {
            l.split(": ")
                .nth(1)
                .map(|n| n.split('@').next().unwrap_or(n).to_string())
        })
        .collect()
}

fn ping(from: &NetNs, to: &str) -> bool {
    from.exec(&["ping", "-c1", "-W2", to]).status_ok
}

#[test]
fn add_check_del_with_real_traffic() {
    if !require_root("add_check_del_with_real_traffic") {
        return;
    }
    let sb = Sandbox::new("br-traffic");
    let (node, c1, c2) = (NetNs::create(), NetNs::create(), NetNs::create());
    let p = sb.plugin_in(Impl::Ours, &node);
    let cf = conf(&sb, "1.0.0", json!({}));
    let r1 = p.add("bridge", &env_for(&c1, "c1"), &cf).ok().clone();
    let r2 = p.add("bridge", &env_for(&c2, "c2"), &cf).ok().clone();
    assert_eq!(r1["interfaces"][0]["name"], "cni0");
    assert!(
        r1["interfaces"][1]["name"]
            .as_str()
            .unwrap()
            .starts_with("veth")
    );
    assert_eq!(r1["interfaces"][1]["name"].as_str().unwrap().len(), 12);
    assert_eq!(r1["interfaces"][2]["sandbox"], json!(c1.path()));
    assert_eq!(r1["ips"][0]["interface"], 2);
    let ip2 = r2["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let ip2v6 = r2["ips"][1]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    // IPv6 DAD on the bridge's own gateway address can take a moment.
    assert!(ping(&c1, "10.77.0.1"), "container -> gateway");
    assert!(ping(&c1, &ip2), "container -> container");
    // Until DAD is over: a generous deadline, not a fixed number of tries.
    let until = |host: &str| eventually(secs(30), || ping(&c1, host));
    assert!(until(&ip2v6), "v6 container -> container");
    assert!(until("fd77::1"), "v6 container -> gateway");
    assert_eq!(
        node.sh(&["sysctl", "-n", "net.ipv4.ip_forward"]).trim(),
        "1"
    );

    let chk = with_prev(&cf, &r1);
    p.check("bridge", &env_for(&c1, "c1"), &chk).ok();
    let addr = r1["ips"][0]["address"].as_str().unwrap();
    c1.sh(&["ip", "addr", "del", addr, "dev", "eth0"]);
    let msg = p.check("bridge", &env_for(&c1, "c1"), &chk).err(999);
    assert!(msg.contains(addr), "{msg}");

    let host_veth = r1["interfaces"][1]["name"].as_str().unwrap();
    p.del("bridge", &env_for(&c1, "c1"), &cf).ok();
    assert!(
        !links(&node).iter().any(|l| l == host_veth),
        "host veth removed"
    );
    assert!(
        !sb.path(&format!("ipam/brnet/{}", addr.split('/').next().unwrap()))
            .exists(),
        "IP released"
    );
    p.del("bridge", &env_for(&c1, "c1"), &cf).ok();
    // DEL with an empty CNI_NETNS still releases the IPAM reservation.
    p.del(
        "bridge",
        &Env {
            netns: String::new(),
            ..env_for(&c2, "c2")
        },
        &cf,
    )
    .ok();
    assert!(!sb.path(&format!("ipam/brnet/{ip2}")).exists());
}

#[test]
fn result_shape_for_every_version() {
    if !require_root("result_shape_for_every_version") {
        return;
    }
    let sb = Sandbox::new("br-versions");
    let node = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    for v in ALL_VERSIONS {
        let c = NetNs::create();
        let id = format!("v{}", v.replace('.', ""));
        let cf = conf(&sb, v, json!({}));
        let r = p.add("bridge", &env_for(&c, &id), &cf).ok().clone();
        assert_eq!(r["cniVersion"], json!(v));
        if v.starts_with("0.1") || v.starts_with("0.2") {
            assert!(
                r["ip4"]["ip"].as_str().unwrap().starts_with("10.77.0."),
                "{v}: {r}"
            );
            assert_eq!(r["ip4"]["gateway"], "10.77.0.1");
            assert!(
                r["ip6"]["ip"].as_str().unwrap().starts_with("fd77::"),
                "{v}: {r}"
            );
            assert!(r.get("interfaces").is_none());
        } else {
            assert_eq!(r["interfaces"].as_array().unwrap().len(), 3, "{v}");
            assert_eq!(r["ips"][0]["interface"], 2);
            assert_eq!(
                r["ips"][0].get("version").is_some(),
                v.starts_with("0."),
                "{v}: {r}"
            );
        }
        if *v >= "0.4.0" {
            p.check("bridge", &env_for(&c, &id), &with_prev(&cf, &r))
                .ok();
        } else {
            p.check("bridge", &env_for(&c, &id), &cf).err(1);
        }
        if *v == "1.1.0" {
            p.status("bridge", &cf).ok();
        } else {
            p.status("bridge", &cf).err(1);
        }
        p.del("bridge", &env_for(&c, &id), &cf).ok();
        // L2-only: no IPAM. Below 0.3.0 this cannot be expressed, and nothing is created.
        let l2 = conf(
            &sb,
            v,
            json!({"ipam": null, "isGateway": false, "bridge": "l2br"}),
        );
        let before = links(&node);
        let out = p.add("bridge", &env_for(&c, &id), &l2);
        if v.starts_with("0.1") || v.starts_with("0.2") {
            assert!(
                out.err(999)
                    .contains("cannot convert: no valid IP addresses")
            );
            // Refused before anything is made: no veth, not even the bridge.
            assert_eq!(links(&node), before, "the refused ADD left links");
        } else {
            let r = out.ok().clone();
            assert!(r.get("ips").is_none(), "{r}");
            if *v >= "0.4.0" {
                p.check("bridge", &env_for(&c, &id), &with_prev(&l2, &r))
                    .ok();
            }
        }
        p.del("bridge", &env_for(&c, &id), &l2).ok();
    }
}

#[test]
fn twenty_concurrent_adds_on_a_new_bridge() {
    if !require_root("twenty_concurrent_adds_on_a_new_bridge") {
        return;
    }
    let sb = Sandbox::new("br-concurrent");
    let node = NetNs::create();
    let cf = conf(&sb, "1.0.0", json!({"bridge": "br-race"}));
    let conts: Vec<NetNs> = (0..20).map(|_| NetNs::create()).collect();
    let results: Vec<Value> = std::thread::scope(|s| {
        let hs: Vec<_> = conts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (sb, cf, node) = (&sb, &cf, &node);
                s.spawn(move || {
                    sb.plugin_in(Impl::Ours, node)
                        .add("bridge", &env_for(c, &format!("c{i}")), cf)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap().ok().clone())
            .collect()
    });
    let ips: HashSet<String> = results
        .iter()
        .map(|r| r["ips"][0]["address"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ips.len(), 20, "distinct addresses");
    let addrs = node.sh(&["ip", "-4", "-o", "addr", "show", "dev", "br-race"]);
    assert_eq!(addrs.lines().count(), 1, "one gateway address: {addrs}");
    assert!(ping(
        &conts[0],
        results[19]["ips"][0]["address"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
    ));
}

#[test]
fn failed_add_leaves_no_veth_and_no_reservation() {
    if !require_root("failed_add_leaves_no_veth_and_no_reservation") {
        return;
    }
    let sb = Sandbox::new("br-undo");
    let node = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    // A /30 has one allocatable address besides the gateway.
    let cf = conf(
        &sb,
        "1.0.0",
        json!({"ipam": {"type": "host-local", "subnet": "10.78.0.0/30",
        "dataDir": sb.path("ipam").display().to_string()}, "bridge": "br-undo"}),
    );
    let (c1, c2) = (NetNs::create(), NetNs::create());
    p.add("bridge", &env_for(&c1, "c1"), &cf).ok();
    let before = links(&node);
    let msg = p.add("bridge", &env_for(&c2, "c2"), &cf).err(999);
    assert!(msg.contains("no IP addresses available"), "{msg}");
    assert_eq!(links(&node), before, "no host veth left");
    assert!(
        !c2.sh(&["ip", "-o", "link"]).contains("eth0"),
        "no container veth left"
    );

    // Address conflict on the bridge with forceAddress=false.
    let cf2 = conf(&sb, "1.0.0", json!({"bridge": "br-conflict"}));
    node.sh(&["ip", "link", "add", "br-conflict", "type", "bridge"]);
    node.sh(&["ip", "addr", "add", "10.99.0.1/24", "dev", "br-conflict"]);
    let before = links(&node);
    let msg = p.add("bridge", &env_for(&c2, "c2"), &cf2).err(7);
    assert!(
        msg.contains("already has an IP address different from"),
        "{msg}"
    );
    assert_eq!(links(&node), before);
    let left: Vec<_> = std::fs::read_dir(sb.path("ipam/brnet"))
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| s.starts_with("c2")))
        .collect();
    assert!(left.is_empty(), "reservation released: {left:?}");
    // With forceAddress the old address is replaced.
    let cf3 = conf(
        &sb,
        "1.0.0",
        json!({"bridge": "br-conflict", "forceAddress": true}),
    );
    p.add("bridge", &env_for(&c2, "c2"), &cf3).ok();
    let a = node.sh(&["ip", "-4", "-o", "addr", "show", "dev", "br-conflict"]);
    assert!(
        a.contains("10.77.0.1/24") && !a.contains("10.99.0.1"),
        "{a}"
    );
}

#[test]
fn port_options_and_validation() {
    if !require_root("port_options_and_validation") {
        return;
    }
    let sb = Sandbox::new("br-opts");
    let node = NetNs::create();
    let c = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    let bad = conf(
        &sb,
        "1.0.0",
        json!({"hairpinMode": true, "promiscMode": true}),
    );
    p.add("bridge", &env_for(&c, "x"), &bad).err(7);
    p.add(
        "bridge",
        &env_for(&c, "x"),
        &conf(&sb, "1.0.0", json!({"vlan": 5000})),
    )
    .err(7);
    p.add(
        "bridge",
        &env_for(&c, "x"),
        &conf(&sb, "1.0.0", json!({"disableContainerInterface": true})),
    )
    .err(7);
    let cf = conf(
        &sb,
        "1.0.0",
        json!({"hairpinMode": true, "portIsolation": true, "mtu": 1400,
        "runtimeConfig": {"mac": "0a:58:0a:4d:00:99"}, "dns": {"nameservers": ["10.77.0.53"]}}),
    );
    let r = p.add("bridge", &env_for(&c, "x"), &cf).ok().clone();
    assert_eq!(r["interfaces"][2]["mac"], "0a:58:0a:4d:00:99");
    assert_eq!(r["dns"]["nameservers"][0], "10.77.0.53");
    let hv = r["interfaces"][1]["name"].as_str().unwrap();
    let d = node.sh(&["ip", "-d", "link", "show", hv]);
    assert!(
        d.contains("hairpin on") && d.contains("isolated on") && d.contains("mtu 1400"),
        "{d}"
    );
}

/// Same config in twin node namespaces: same result modulo random names and MACs, same host
/// state.
#[test]
fn matches_reference_bridge() {
    if !require_root("matches_reference_bridge") || !reference_available("bridge") {
        return;
    }
    let sb = Sandbox::new("br-ref");
    let mut results = Vec::new();
    let mut states = Vec::new();
    for imp in [Impl::Ours, Impl::Reference] {
        let node = NetNs::create();
        let c = NetNs::create();
        let mut cf = conf(
            &sb,
            "1.0.0",
            json!({"isDefaultGateway": true, "hairpinMode": true}),
        );
        cf["ipam"]["dataDir"] = json!(sb.path(&format!("ipam-{imp:?}")).display().to_string());
        let p = sb.plugin_in(imp, &node);
        let mut r = p.add("bridge", &env_for(&c, "ref1"), &cf).ok().clone();
        for i in r["interfaces"].as_array_mut().unwrap() {
            i["mac"] = json!("<mac>");
        }
        r["interfaces"][1]["name"] = json!("<veth>");
        r["interfaces"][2]["sandbox"] = json!("<netns>");
        results.push(normalize(&r));
        let probe = NetNs::create();
        let hv = p.add("bridge", &env_for(&probe, "probe"), &cf).ok()["interfaces"][1]["name"]
            .as_str()
            .unwrap()
            .to_string();
        states.push((
            node.sh(&["ip", "-o", "addr", "show", "dev", "cni0"])
                .lines()
                .filter(|l| !l.contains("fe80"))
                .map(|l| {
                    l.split_whitespace()
                        .skip(1)
                        .take(3)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>(),
            node.sh(&[
                "sysctl",
                "-n",
                "net.ipv4.ip_forward",
                "net.ipv6.conf.all.forwarding",
            ]),
            node.sh(&["ip", "-d", "link", "show", &hv])
                .contains("hairpin on"),
            c.sh(&["ip", "route"])
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>(),
            // What cnibox sets over netlink (arp_notify) or only when not already so
            // (the bridge's accept_ra, forwarding) must end up as the reference's writes do.
            node.sh(&[
                "sysctl",
                "-n",
                "net.ipv6.conf.cni0.accept_ra",
                &format!("net.ipv6.conf.{hv}.accept_ra"),
            ]) + &c.sh(&[
                "sysctl",
                "-n",
                "net.ipv4.conf.eth0.arp_notify",
                "net.ipv6.conf.eth0.accept_dad",
            ]),
        ));
        p.del("bridge", &env_for(&c, "ref1"), &cf).ok();
    }
    assert_eq!(results[0], results[1], "result JSON, ours vs reference");
    assert_eq!(states[0], states[1], "host state, ours vs reference");
}

/// macspoofchk: frames with another source MAC are dropped; the nftables layout equals the
/// reference's, and DEL removes it (also what the reference created).
#[test]
fn macspoofchk_drops_spoofed_frames() {
    if !require_root("macspoofchk_drops_spoofed_frames") {
        return;
    }
    let sb = Sandbox::new("br-spoof");
    let node = NetNs::create();
    let c = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    let cf = conf(&sb, "1.0.0", json!({"macspoofchk": true}));
    let r = p.add("bridge", &env_for(&c, "sp1"), &cf).ok().clone();
    let table = node.sh(&["nft", "list", "table", "bridge", "nat"]);
    assert!(
        table.contains("chain cni-br-iface-sp1-eth0-mac")
            && table.contains("comment \"macspoofchk-sp1-eth0\""),
        "{table}"
    );
    assert!(ping(&c, "10.77.0.1"));
    c.sh(&["ip", "link", "set", "eth0", "address", "02:11:22:33:44:55"]);
    c.sh(&["ip", "neigh", "flush", "all"]);
    assert!(!ping(&c, "10.77.0.1"), "spoofed MAC must be dropped");
    p.del("bridge", &env_for(&c, "sp1"), &cf).ok();
    let table = node.sh(&["nft", "list", "table", "bridge", "nat"]);
    assert!(!table.contains("sp1"), "{table}");

    if reference_available("bridge") && reference_available("host-local") {
        let normalize_listing =
            |s: String, veth: &str| s.replace(veth, "<veth>").replace(char::is_whitespace, "");
        let mut listings = Vec::new();
        for imp in [Impl::Ours, Impl::Reference] {
            let node = NetNs::create();
            let c = NetNs::create();
            let mut cf = cf.clone();
            cf["ipam"]["dataDir"] = json!(sb.path(&format!("spoof-{imp:?}")).display().to_string());
            let r = sb
                .plugin_in(imp, &node)
                .add("bridge", &env_for(&c, "sp2"), &cf)
                .ok()
                .clone();
            let veth = r["interfaces"][1]["name"].as_str().unwrap().to_string();
            let mac = r["interfaces"][2]["mac"].as_str().unwrap().to_string();
            let listing = node
                .sh(&["nft", "list", "table", "bridge", "nat"])
                .replace(&mac, "<mac>");
            listings.push(normalize_listing(listing, &veth));
            // The other implementation's DEL removes it.
            let other = if imp == Impl::Ours {
                Impl::Reference
            } else {
                Impl::Ours
            };
            sb.plugin_in(other, &node)
                .del("bridge", &env_for(&c, "sp2"), &cf)
                .ok();
            assert!(
                !node
                    .sh(&["nft", "list", "table", "bridge", "nat"])
                    .contains("sp2"),
                "{imp:?} rules removed by {other:?}"
            );
        }
        assert_eq!(listings[0], listings[1], "nft layout, ours vs reference");
    }
    let _ = r;
}

/// The node's nftables ruleset, for "nothing left" comparisons.
fn nft_rules(node: &NetNs) -> String {
    node.sh(&["nft", "list", "ruleset"])
}

/// A bridge ADD that fails after macspoofchk (and IPAM) were set up removes the macspoofchk
/// rules too (the undo used to skip them).
#[test]
fn failed_add_removes_macspoofchk_rules() {
    if !require_root("failed_add_removes_macspoofchk_rules") {
        return;
    }
    let sb = Sandbox::new("br-undo-spoof");
    let node = NetNs::create();
    let c = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    // The bridge holds another address: setting the gateway fails after macspoofchk.
    node.sh(&["ip", "link", "add", "br-spoof", "type", "bridge"]);
    node.sh(&["ip", "addr", "add", "10.99.0.1/24", "dev", "br-spoof"]);
    let cf = conf(
        &sb,
        "1.0.0",
        json!({"bridge": "br-spoof", "macspoofchk": true, "ipMasq": true}),
    );
    let before = links(&node);
    let msg = p.add("bridge", &env_for(&c, "spoof1"), &cf).err(7);
    assert!(msg.contains("already has an IP address"), "{msg}");
    assert_eq!(links(&node), before, "ADD left links");
    // Only the shared, empty base chain (as upstream's DEL leaves it) may remain: no per-port
    // chain, no rule, no masquerading.
    let nft = nft_rules(&node);
    let chains = nft.matches("chain ").count();
    assert!(
        chains <= 1
            && !nft.contains("ether saddr")
            && !nft.contains("jump")
            && !nft.contains("masquerade"),
        "ADD left nftables state:\n{nft}"
    );
    let ipt = node.sh(&["iptables-save", "-t", "nat"]);
    assert!(
        !ipt.contains("spoof1") && !ipt.contains("CNI-"),
        "ADD left iptables state:\n{ipt}"
    );
}

/// A second network on a container whose IPAM returns a route the first network already
/// installed (the default route): the first one wins, as upstream, instead of `File exists`.
#[test]
fn second_network_with_the_same_default_route() {
    if !require_root("second_network_with_the_same_default_route") {
        return;
    }
    let sb = Sandbox::new("br-second");
    let node = NetNs::create();
    let net = |n: u8, bridge: &str| {
        json!({"cniVersion": "1.0.0", "name": format!("net{n}"), "type": "bridge",
            "bridge": bridge, "isGateway": true,
            "ipam": {"type": "host-local", "subnet": format!("10.8{n}.0.0/24"),
                     "routes": [{"dst": "0.0.0.0/0"}],
                     "dataDir": sb.path("ipam").display().to_string()}})
    };
    for imp in [Impl::Ours, Impl::Reference] {
        if imp == Impl::Reference && !reference_available("bridge") {
            continue;
        }
        let c = NetNs::create();
        let p = sb.plugin_in(imp, &node);
        let (a, b) = (net(1, "br-first"), net(2, "br-second"));
        let id = format!("second-{imp:?}");
        p.add("bridge", &env_for(&c, &id), &a).ok();
        let mut e2 = env_for(&c, &id);
        e2.ifname = "eth1".into();
        let r = p.add("bridge", &e2, &b);
        assert!(r.status_ok, "{imp:?}: second network: {r:?}");
        let routes = c.sh(&["ip", "-4", "route", "show", "default"]);
        // (The reference adds a second default route beside the first; we keep the first.)
        assert!(
            routes.contains("via 10.81.0.1 dev eth0")
                && (imp == Impl::Reference || !routes.contains("eth1")),
            "{imp:?}: the first network's default route stays: {routes}"
        );
        assert!(p.del("bridge", &e2, &b).status_ok);
        assert!(p.del("bridge", &env_for(&c, &id), &a).status_ok);
    }
}

/// isDefaultGateway when IPAM already returns a default route with a gateway keeps IPAM's
/// route (upstream), rather than failing.
#[test]
fn default_gateway_keeps_ipam_default_route() {
    if !require_root("default_gateway_keeps_ipam_default_route") {
        return;
    }
    let sb = Sandbox::new("br-defgw");
    let node = NetNs::create();
    let c = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    let cf = json!({"cniVersion": "1.0.0", "name": "defgw", "type": "bridge",
        "bridge": "br-defgw", "isDefaultGateway": true,
        "ipam": {"type": "host-local", "subnet": "10.83.0.0/24",
                 "routes": [{"dst": "0.0.0.0/0", "gw": "10.83.0.254"}],
                 "dataDir": sb.path("ipam").display().to_string()}});
    let r = p.add("bridge", &env_for(&c, "defgw"), &cf).ok().clone();
    let defaults: Vec<&Value> = r["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["dst"] == "0.0.0.0/0")
        .collect();
    assert_eq!(defaults.len(), 1, "{r}");
    assert_eq!(defaults[0]["gw"], "10.83.0.254", "{r}");
    let routes = c.sh(&["ip", "-4", "route", "show", "default"]);
    assert!(routes.contains("via 10.83.0.254"), "{routes}");
    assert!(p.del("bridge", &env_for(&c, "defgw"), &cf).status_ok);
}

/// Route attributes survive every result version from 0.3.0 (as the Go library keeps them), so
/// a route with a table and a metric from host-local is installed there in a 0.4.0 or 1.0.0
/// config too; a 1.1.0 result reports the configured MTU of each interface.
#[test]
fn route_attributes_and_mtu_in_results() {
    if !require_root("route_attributes_and_mtu_in_results") {
        return;
    }
    let sb = Sandbox::new("br-rtattr");
    let node = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    for (i, v) in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"].iter().enumerate() {
        let c = NetNs::create();
        let cf = json!({"cniVersion": v, "name": "rtattr", "type": "bridge",
            "bridge": "br-rtattr", "isGateway": true, "mtu": 1400,
            "ipam": {"type": "host-local", "subnet": "10.84.0.0/24",
                     "routes": [{"dst": "192.168.50.0/24", "gw": "10.84.0.1", "table": 100, "priority": 50}],
                     "dataDir": sb.path("ipam").display().to_string()}});
        let id = format!("rtattr{i}");
        let r = p.add("bridge", &env_for(&c, &id), &cf).ok().clone();
        assert_eq!(r["routes"][0]["table"], 100, "{v}: {r}");
        assert_eq!(r["routes"][0]["priority"], 50, "{v}: {r}");
        let t = c.sh(&["ip", "route", "show", "table", "100"]);
        assert!(
            t.contains("192.168.50.0/24 via 10.84.0.1 dev eth0") && t.contains("metric 50"),
            "{v}: route not in table 100 with metric 50: {t}"
        );
        let mtus: Vec<&Value> = r["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| &i["mtu"])
            .collect();
        if *v == "1.1.0" || *v == "1.0.0" {
            assert!(mtus.iter().all(|m| **m == 1400), "{v}: {r}");
        } else {
            assert!(mtus.iter().all(|m| m.is_null()), "{v}: {r}");
        }
        assert!(p.del("bridge", &env_for(&c, &id), &cf).status_ok);
    }
}

/// Chained after another plugin, bridge keeps the received prevResult's interfaces and IPs and
/// appends its own, re-indexing its IPs (CONVENTIONS.md; upstream drops them).
#[test]
fn prev_result_is_passed_through() {
    if !require_root("prev_result_is_passed_through") {
        return;
    }
    let sb = Sandbox::new("br-chain");
    let node = NetNs::create();
    let c = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "tap0"}, {"name": "net9", "sandbox": c.path()}],
        "ips": [{"address": "192.168.9.5/24", "interface": 1}],
        "routes": [{"dst": "192.168.0.0/16"}]});
    let mut cf = conf(&sb, "1.0.0", json!({"bridge": "br-chain"}));
    cf["prevResult"] = prev;
    let r = p.add("bridge", &env_for(&c, "chain1"), &cf).ok().clone();
    let names: Vec<&str> = r["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(&names[..2], &["tap0", "net9"], "{r}");
    assert_eq!(names[2], "br-chain", "{r}");
    assert_eq!(names[4], "eth0", "{r}");
    assert_eq!(r["ips"][0]["address"], "192.168.9.5/24", "{r}");
    assert_eq!(r["ips"][0]["interface"], 1, "{r}");
    assert_eq!(
        r["ips"][1]["interface"], 4,
        "our address points at our eth0: {r}"
    );
    assert_eq!(r["routes"][0]["dst"], "192.168.0.0/16", "{r}");
    assert!(p.del("bridge", &env_for(&c, "chain1"), &cf).status_ok);
}

/// SPEC.md: after a delegated IPAM ADD fails, the plugin runs the IPAM plugin's DEL before it
/// returns the error (a half-done allocation is released); the error is the IPAM plugin's.
#[test]
fn failed_ipam_add_is_followed_by_ipam_del() {
    use std::os::unix::fs::PermissionsExt;
    if !require_root("failed_ipam_add_is_followed_by_ipam_del") {
        return;
    }
    let sb = Sandbox::new("br-ipamdel");
    let node = NetNs::create();
    let c = NetNs::create();
    let dir = sb.path("plugins");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(bin(), dir.join("bridge")).unwrap();
    let log = sb.path("ipam.log");
    let script = dir.join("recorder");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$CNI_COMMAND\" >> {}\n[ \"$CNI_COMMAND\" = ADD ] || exit 0\n\
             echo '{{\"cniVersion\":\"1.0.0\",\"code\":11,\"msg\":\"recorder: no address now\"}}'\nexit 1\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cf = json!({"cniVersion": "1.0.0", "name": "ipamdel", "type": "bridge",
        "bridge": "br-ipamdel", "ipam": {"type": "recorder"}});
    let env = Env {
        path: Some(dir.display().to_string()),
        ..env_for(&c, "ipamdel")
    };
    let before = links(&node);
    let msg = sb
        .plugin_in(Impl::Ours, &node)
        .add("bridge", &env, &cf)
        .err(11);
    assert!(msg.contains("recorder: no address now"), "{msg}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "ADD\nDEL\n",
        "IPAM DEL after the failed ADD"
    );
    let after: Vec<String> = links(&node)
        .into_iter()
        .filter(|l| l != "br-ipamdel")
        .collect();
    assert_eq!(after, before, "no veth left");
}

/// CHECK compares the bridge's promiscuous mode with `promiscMode` both ways, as upstream's
/// CHECK does: promisc turned off under `promiscMode: true`, or on under `false`, is an error.
#[test]
fn check_compares_promisc_both_ways() {
    if !require_root("check_compares_promisc_both_ways") {
        return;
    }
    let sb = Sandbox::new("br-promisc");
    let node = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    for (i, promisc) in [true, false].into_iter().enumerate() {
        let c = NetNs::create();
        let br = format!("br-pm{i}");
        let cf = json!({"cniVersion": "1.0.0", "name": format!("pm{i}"), "type": "bridge",
            "bridge": br, "promiscMode": promisc});
        let env = env_for(&c, &format!("pm{i}"));
        let r = p.add("bridge", &env, &cf).ok().clone();
        let chk = with_prev(&cf, &r);
        p.check("bridge", &env, &chk).ok();
        let flip = if promisc { "off" } else { "on" };
        node.sh(&["ip", "link", "set", &br, "promisc", flip]);
        let msg = p.check("bridge", &env, &chk).err(999);
        assert!(
            msg.contains(&br) && msg.contains(&format!("promiscMode is {promisc}")),
            "{promisc}: {msg}"
        );
        node.sh(&[
            "ip",
            "link",
            "set",
            &br,
            "promisc",
            if promisc { "on" } else { "off" },
        ]);
        p.check("bridge", &env, &chk).ok();
        assert!(p.del("bridge", &env, &cf).status_ok);
    }
}

/// `dns` replaces IPAM's DNS when a list is given, even empty, or a domain; `{}` and `null`
/// lists keep IPAM's (upstream's `dnsConfSet`, bridge and ptp alike), in every family.
#[test]
fn dns_with_empty_lists_overrides_ipam() {
    if !require_root("dns_with_empty_lists_overrides_ipam") {
        return;
    }
    let sb = Sandbox::new("br-dns");
    let node = NetNs::create();
    let p = sb.plugin_in(Impl::Ours, &node);
    let resolv = sb.path("resolv.conf");
    std::fs::write(&resolv, "nameserver 10.0.0.53\nsearch ipam.example\n").unwrap();
    let ipam_dns = json!({"nameservers": ["10.0.0.53"], "search": ["ipam.example"]});
    let cases = [
        (Value::Null, ipam_dns.clone()),
        (json!({}), ipam_dns.clone()),
        (
            json!({"nameservers": null, "search": null}),
            ipam_dns.clone(),
        ),
        // Replaced by an empty DNS, which a 1.x result leaves out (as v1.9.1 prints it).
        (json!({"nameservers": []}), Value::Null),
        (json!({"Search": []}), Value::Null),
        (json!({"options": []}), Value::Null),
        (
            json!({"domain": "d.example"}),
            json!({"domain": "d.example"}),
        ),
        (
            json!({"nameservers": ["10.9.9.9"]}),
            json!({"nameservers": ["10.9.9.9"]}),
        ),
    ];
    for applet in ["bridge", "ptp"] {
        for fam in family::FAMILIES {
            let n = lab::unique_n();
            let mut ipam = fam.host_local(n, &sb.path(&format!("ipam{n}")));
            ipam["resolvConf"] = json!(resolv);
            for (i, (dns, want)) in cases.iter().enumerate() {
                let c = NetNs::create();
                let mut cf = json!({"cniVersion": "1.0.0", "name": format!("dns{n}"),
                    "type": applet, "bridge": format!("br-dns{n}"), "ipam": ipam});
                if !dns.is_null() {
                    cf["dns"] = dns.clone();
                }
                let env = env_for(&c, &format!("dns{i}"));
                let r = p.add(applet, &env, &cf).ok().clone();
                assert_eq!(&r["dns"], want, "{applet} {} dns {dns}: {r}", fam.tag());
                assert!(p.del(applet, &env, &cf).status_ok);
            }
        }
    }
}

/// IPAM's default route without `gw` plus `isDefaultGateway`: upstream's calcGateways appends a
/// second default route via the gateway, and its ConfigureIface, which also gives the gw-less
/// route that gateway, then fails the ADD on the duplicate ("file exists", v1.1.1 to v1.9.1
/// alike). cnibox gives IPAM's route the gateway and adds it once: one default route per family
/// in the result and in the container, and CHECK passes. In every family.
#[test]
fn default_gateway_fills_ipam_default_route_without_gw() {
    if !require_root("default_gateway_fills_ipam_default_route_without_gw") {
        return;
    }
    let sb = Sandbox::new("br-defnogw");
    for fam in family::FAMILIES {
        let n = lab::unique_n();
        let node = NetNs::create();
        let cf = json!({"cniVersion": "1.0.0", "name": format!("dng{n}"), "type": "bridge",
            "bridge": "br-dng", "isDefaultGateway": true,
            "ipam": fam.host_local(n, &sb.path(&format!("ipam{n}")))});
        let c = NetNs::create();
        let p = sb.plugin_in(Impl::Ours, &node);
        let env = env_for(&c, "dng");
        let r = p.add("bridge", &env, &cf).ok().clone();
        let routes = r["routes"].as_array().unwrap();
        assert_eq!(routes.len(), fam.addr_count(), "{}: {r}", fam.tag());
        for ip in &r["ips"].as_array().unwrap()[..] {
            let gw = ip["gateway"].as_str().unwrap();
            let v4 = !gw.contains(':');
            let dst = if v4 { "0.0.0.0/0" } else { "::/0" };
            assert!(
                routes.iter().any(|x| x["dst"] == dst && x["gw"] == gw),
                "{}: {r}",
                fam.tag()
            );
            let shown = c.sh(&[
                "ip",
                if v4 { "-4" } else { "-6" },
                "route",
                "show",
                "default",
            ]);
            assert_eq!(shown.lines().count(), 1, "{}: {shown}", fam.tag());
            assert!(shown.contains(&format!("via {gw} dev eth0")), "{shown}");
        }
        p.check("bridge", &env, &with_prev(&cf, &r)).ok();
        assert!(p.del("bridge", &env, &cf).status_ok);
        if reference_available("bridge") && reference_available("host-local") {
            let c = NetNs::create();
            let env = env_for(&c, "dngref");
            let out = sb
                .plugin_in(Impl::Reference, &node)
                .add("bridge", &env, &cf);
            assert!(
                out.err(999).contains("file exists"),
                "{}: {out:?}",
                fam.tag()
            );
            sb.plugin_in(Impl::Reference, &node)
                .del("bridge", &env, &cf);
        }
    }
}
