//! macvlan on a master in a throwaway node namespace (one end of a veth pair stands in for the
//! physical NIC): two containers in bridge mode reach each other, the default-route master,
//! L2-only without IPAM, CHECK (mode), DEL, a failed ADD undone, and the Go plugin's view.

mod common;
use common::env::env_for;
use common::family::{FAMILIES, assert_same_routes, reservations, routes_as_configured};
use common::lab::unique_n;
use common::*;
use serde_json::{Value, json};

struct Node {
    node: NetNs,
    sb: Sandbox,
    n: u8,
}

fn node(tag: &str, n: u8) -> Node {
    let sb = Sandbox::new(tag);
    let link = sb.bin.join("macvlan");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), &link).unwrap();
    }
    let node = NetNs::create();
    node.sh(&[
        "ip", "link", "add", "mvup", "type", "veth", "peer", "name", "mvwire",
    ]);
    node.sh(&["ip", "link", "set", "mvup", "up"]);
    node.sh(&["ip", "link", "set", "mvwire", "up"]);
    node.sh(&[
        "ip",
        "addr",
        "add",
        &format!("192.168.{n}.1/24"),
        "dev",
        "mvup",
    ]);
    node.sh(&[
        "ip",
        "route",
        "add",
        "default",
        "via",
        &format!("192.168.{n}.254"),
    ]);
    Node { node, sb, n }
}

impl Node {
    fn conf(&self, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": "1.0.0", "name": "mvnet", "type": "macvlan", "master": "mvup",
            "ipam": {"type": "host-local", "subnet": format!("10.{}.0.0/24", self.n),
                     "dataDir": self.sb.path("ipam").display().to_string()}
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }
}

fn macvlans(ns: &NetNs) -> usize {
    ns.sh(&["ip", "-o", "link", "show", "type", "macvlan"])
        .lines()
        .count()
}

#[test]
fn bridge_mode_traffic_check_del() {
    if !require_root("macvlan bridge_mode_traffic_check_del") {
        return;
    }
    let nd = node("mv-basic", unique_n());
    let (c1, c2) = (NetNs::create(), NetNs::create());
    let pl = nd.sb.plugin_in(Impl::Ours, &nd.node);
    let conf = nd.conf(json!({"mode": "bridge", "mtu": 1400}));
    let r1 = pl.add("macvlan", &env_for(&c1, "v1"), &conf).ok().clone();
    let r2 = pl.add("macvlan", &env_for(&c2, "v2"), &conf).ok().clone();
    assert_eq!(r1["interfaces"][0]["name"], "eth0", "{r1}");
    assert_eq!(r1["ips"][0]["interface"], 0, "{r1}");
    let ip2 = r2["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    c1.sh(&["ping", "-c", "1", "-W", "5", &ip2]);
    let l = c1.sh(&["ip", "-d", "link", "show", "eth0"]);
    assert!(
        l.contains("macvlan mode bridge") && l.contains("mtu 1400"),
        "{l}"
    );
    assert_eq!(
        c1.sh(&["sysctl", "-n", "net.ipv4.conf.eth0.arp_notify"])
            .trim(),
        "1"
    );
    assert_eq!(reservations(&nd.sb.path("ipam/mvnet")), 2);
    let checked = with_prev(&conf, &r1);
    let out = pl.check("macvlan", &env_for(&c1, "v1"), &checked);
    assert!(out.status_ok, "{out:?}");
    // CHECK names a mode that differs.
    let other = with_prev(&nd.conf(json!({"mode": "vepa", "mtu": 1400})), &r1);
    let msg = pl.check("macvlan", &env_for(&c1, "v1"), &other).err(999);
    assert!(msg.contains("bridge") && msg.contains("vepa"), "{msg}");
    for (c, id) in [(&c1, "v1"), (&c2, "v2")] {
        pl.del("macvlan", &env_for(c, id), &conf).ok();
        pl.del("macvlan", &env_for(c, id), &conf).ok();
        assert_eq!(macvlans(c), 0);
    }
    let left = reservations(&nd.sb.path("ipam/mvnet"));
    assert_eq!(left, 0, "reservations left");
}

/// No `master`: the default route's interface. No `ipam`: L2 only, link up, no addresses.
/// `runtimeConfig.mac` sets the MAC.
#[test]
fn default_master_and_l2_only() {
    if !require_root("macvlan default_master_and_l2_only") {
        return;
    }
    let nd = node("mv-l2", unique_n());
    let c1 = NetNs::create();
    let pl = nd.sb.plugin_in(Impl::Ours, &nd.node);
    let conf = json!({"cniVersion": "1.0.0", "name": "mvl2", "type": "macvlan",
                      "runtimeConfig": {"mac": "02:00:00:00:98:01"}});
    let r = pl.add("macvlan", &env_for(&c1, "l2"), &conf).ok().clone();
    assert_eq!(r["interfaces"][0]["mac"], "02:00:00:00:98:01", "{r}");
    assert!(r.get("ips").is_none(), "{r}");
    let l = c1.sh(&["ip", "-d", "link", "show", "eth0"]);
    assert!(l.contains("state UP") || l.contains(",UP"), "{l}");
    // Its parent is the node's mvup.
    let idx = nd.node.sh(&["cat", "/sys/class/net/mvup/ifindex"]);
    assert!(
        l.contains(&format!("eth0@if{}", idx.trim())),
        "{l}\nmvup index {idx}"
    );
    pl.del("macvlan", &env_for(&c1, "l2"), &conf).ok();
    assert_eq!(macvlans(&c1), 0);
}

/// A failure after the link exists (an IPAM plugin that cannot be found) removes it; bad keys
/// change nothing.
#[test]
fn failed_add_and_bad_input() {
    if !require_root("macvlan failed_add_and_bad_input") {
        return;
    }
    let nd = node("mv-bad", unique_n());
    let c1 = NetNs::create();
    let pl = nd.sb.plugin_in(Impl::Ours, &nd.node);
    let mut conf = nd.conf(json!({}));
    conf["ipam"] = json!({"type": "no-such-ipam"});
    let msg = pl.add("macvlan", &env_for(&c1, "f1"), &conf).err(7);
    assert!(msg.contains("no-such-ipam"), "{msg}");
    assert_eq!(macvlans(&c1), 0, "macvlan left behind");
    assert!(
        !c1.sh(&["ip", "link"]).contains("veth"),
        "temporary link left behind"
    );
    for (extra, code, says) in [
        (
            json!({"mode": "weird"}),
            7,
            "unknown macvlan mode: \"weird\"",
        ),
        // Upstream knows no source mode (such a link would receive nothing: no key sets the
        // MACs it accepts).
        (
            json!({"mode": "source"}),
            7,
            "unknown macvlan mode: \"source\" (as upstream",
        ),
        (json!({"mtu": 9000}), 7, "invalid MTU 9000"),
        (json!({"mac": "nope"}), 7, "invalid MAC address \"nope\""),
        (
            json!({"master": "no-such-if"}),
            999,
            "failed to lookup master \"no-such-if\"",
        ),
        (json!({"master": "a/b"}), 7, "master"),
    ] {
        let out = pl.add("macvlan", &env_for(&c1, "f2"), &nd.conf(extra.clone()));
        assert_eq!(out.err_code(), Some(code), "{extra}: {out:?}");
        assert!(
            out.json["msg"].as_str().unwrap_or("").contains(says),
            "{extra}: {out:?}"
        );
        assert_eq!(macvlans(&c1), 0);
    }
    // The reference refuses source mode too (with 999, after its IPAM ran).
    if reference_available("macvlan") {
        let out = nd.sb.plugin_in(Impl::Reference, &nd.node).add(
            "macvlan",
            &env_for(&c1, "f3"),
            &nd.conf(json!({"mode": "source"})),
        );
        assert!(
            out.err(999).contains("unknown macvlan mode: \"source\""),
            "{out:?}"
        );
    }
}

/// The Go plugin on the same input gives the same result shape and link.
#[test]
fn matches_reference() {
    if !require_root("macvlan matches_reference") || !reference_available("macvlan") {
        return;
    }
    let mut out = Vec::new();
    let n = unique_n();
    for imp in [Impl::Ours, Impl::Reference] {
        let nd = node(&format!("mv-ref-{imp:?}"), n);
        let c1 = NetNs::create();
        let pl = nd.sb.plugin_in(imp, &nd.node);
        let conf = nd.conf(json!({"mode": "private"}));
        let mut r = pl.add("macvlan", &env_for(&c1, "r1"), &conf).ok().clone();
        r["interfaces"][0]["mac"] = Value::Null;
        r["interfaces"][0]["sandbox"] = Value::Null;
        let l = c1.sh(&["ip", "-d", "-o", "link", "show", "eth0"]);
        let mode = l
            .split("macvlan mode ")
            .nth(1)
            .unwrap_or("")
            .split(' ')
            .next()
            .unwrap_or("")
            .to_string();
        let routes = c1.sh(&["ip", "route"]);
        pl.del("macvlan", &env_for(&c1, "r1"), &conf).ok();
        out.push((normalize(&r), mode, routes));
    }
    assert_eq!(out[0], out[1]);
    assert_eq!(out[0].1, "private");
}

/// Every route the IPAM config asks for (each family's default route without `gw`, a prefix
/// with the gateway as `gw`) is in the container via the gateway on eth0, in IPv4, IPv6 and
/// dual-stack, and the container's routes are the reference's on the same input.
#[test]
fn ipam_routes_in_every_family() {
    if !require_root("macvlan ipam_routes_in_every_family") {
        return;
    }
    for fam in FAMILIES {
        let n = unique_n();
        let mut views = Vec::new();
        for imp in [Impl::Ours, Impl::Reference] {
            if imp == Impl::Reference && !reference_available("macvlan") {
                continue;
            }
            let nd = node(&format!("mv-routes-{}-{imp:?}", fam.tag()), n);
            let c1 = NetNs::create();
            let mut ipam = fam.host_local(n, &nd.sb.path("ipam"));
            ipam["routes"] = fam.routes(n);
            let conf = nd.conf(json!({ "ipam": ipam }));
            let pl = nd.sb.plugin_in(imp, &nd.node);
            let r = pl.add("macvlan", &env_for(&c1, "rt1"), &conf).ok().clone();
            views.push(routes_as_configured(&c1, &conf, &r));
            pl.del("macvlan", &env_for(&c1, "rt1"), &conf).ok();
            assert_eq!(macvlans(&c1), 0, "{}: macvlan left behind", fam.tag());
            let left = reservations(&nd.sb.path("ipam/mvnet"));
            assert_eq!(left, 0, "{}: reservation left", fam.tag());
        }
        assert_same_routes(fam, &views);
    }
}
