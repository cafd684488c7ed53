//! ptp with host-local in a throwaway node namespace: two containers reach each other and the
//! node through the node's routing, the addressing and routes match the Go plugin's on the same
//! input, CHECK, DEL leaves nothing (veths, reservations, masquerading), a failed ADD is undone,
//! and DEL without a namespace still removes the masquerading.

mod common;
use common::env::{env_for, env_without_netns};
use common::family::{FAMILIES, assert_same_routes, reservations, routes_as_configured};
use common::lab::unique_n;
use common::*;
use serde_json::{Value, json};

struct Node {
    node: NetNs,
    sb: Sandbox,
    imp: Impl,
    n: u8,
}

fn node(tag: &str, imp: Impl, n: u8) -> Node {
    let sb = Sandbox::new(tag);
    let link = sb.bin.join("ptp");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), &link).unwrap();
    }
    let node = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    Node { node, sb, imp, n }
}

impl Node {
    fn conf(&self, version: &str, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": version, "name": format!("ptpnet{}", self.n), "type": "ptp",
            "ipam": {"type": "host-local", "subnet": format!("10.{}.0.0/24", self.n),
                     "dataDir": self.sb.path("ipam").display().to_string()}
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn plugin(&self) -> Plugin<'_> {
        self.sb.plugin_in(self.imp, &self.node)
    }

    fn reservations(&self) -> usize {
        reservations(&self.sb.path(&format!("ipam/ptpnet{}", self.n)))
    }

    fn veths(&self) -> usize {
        self.node
            .sh(&["ip", "-o", "link", "show", "type", "veth"])
            .lines()
            .count()
    }
}

/// The container's and the host's routes, with the random veth name replaced.
fn routes(n: &Node, cont: &NetNs, host_veth: &str) -> (String, String) {
    let c = cont.sh(&["ip", "-4", "route", "show"]);
    // Host veth names are random: `veth` + 8 hex.
    let h: String = n
        .node
        .sh(&["ip", "-4", "route", "show"])
        .split(' ')
        .map(|w| {
            if w.starts_with("veth") && w.len() == 12 {
                "VETH"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let a = n
        .node
        .sh(&["ip", "-4", "-o", "addr", "show", "dev", host_veth])
        .split_whitespace()
        .nth(3)
        .unwrap_or_default()
        .to_string();
    (c, format!("{h}addr {a}"))
}

fn run_ptp(imp: Impl, n: u8) -> (Value, String, String) {
    let nd = node(&format!("ptp-{n}"), imp, n);
    let c1 = NetNs::create();
    let c2 = NetNs::create();
    let conf = nd.conf("1.0.0", json!({"mtu": 1400}));
    let pl = nd.plugin();
    let r1 = pl.add("ptp", &env_for(&c1, "p1"), &conf).ok().clone();
    let r2 = pl.add("ptp", &env_for(&c2, "p2"), &conf).ok().clone();
    let ip2 = r2["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let gw = r1["ips"][0]["gateway"].as_str().unwrap().to_string();
    // Container to container (through the node) and node to container.
    c1.sh(&["ping", "-c", "1", "-W", "5", &ip2]);
    nd.node.sh(&["ping", "-c", "1", "-W", "5", &ip2]);
    c2.sh(&["ping", "-c", "1", "-W", "5", &gw]);
    let veth = r1["interfaces"][0]["name"].as_str().unwrap().to_string();
    let (cr, hr) = routes(&nd, &c1, &veth);
    assert!(c1.sh(&["ip", "link", "show", "eth0"]).contains("mtu 1400"));
    // CHECK with the result as prevResult passes, and names what is missing once the
    // address is gone.
    let checked = with_prev(&conf, &r1);
    let out = pl.check("ptp", &env_for(&c1, "p1"), &checked);
    assert!(out.status_ok, "{out:?}");
    if imp == Impl::Ours {
        let addr = r1["ips"][0]["address"].as_str().unwrap();
        c1.sh(&["ip", "addr", "del", addr, "dev", "eth0"]);
        let msg = pl.check("ptp", &env_for(&c1, "p1"), &checked).err(999);
        assert!(
            msg.contains(&format!("address {addr} not found on \"eth0\"")),
            "{msg}"
        );
        let out = pl.check("ptp", &env_for(&c2, "p1"), &checked);
        assert_eq!(out.err_code(), Some(999), "{out:?}");
    }
    for (c, id) in [(&c1, "p1"), (&c2, "p2")] {
        pl.del("ptp", &env_for(c, id), &conf).ok();
        pl.del("ptp", &env_for(c, id), &conf).ok();
    }
    assert_eq!(nd.veths(), 0, "veths left behind");
    assert_eq!(nd.reservations(), 0, "reservations left behind");
    (r1, cr, hr)
}

#[test]
fn connects_and_matches_the_reference() {
    if !require_root("ptp connects_and_matches_the_reference") {
        return;
    }
    let n = unique_n();
    let (r, cr, hr) = run_ptp(Impl::Ours, n);
    // Upstream's addressing: the container keeps the /24 but reaches it through the gateway.
    assert_eq!(r["ips"][0]["address"], format!("10.{n}.0.2/24"), "{r}");
    assert_eq!(r["ips"][0]["interface"], 1, "{r}");
    assert_eq!(r["interfaces"][1]["name"], "eth0", "{r}");
    assert!(
        r["interfaces"][0]["name"]
            .as_str()
            .unwrap()
            .starts_with("veth"),
        "{r}"
    );
    assert!(
        cr.contains(&format!(
            "10.{n}.0.0/24 via 10.{n}.0.1 dev eth0 src 10.{n}.0.2"
        )),
        "{cr}"
    );
    assert!(
        cr.contains(&format!("10.{n}.0.1 dev eth0 scope link src 10.{n}.0.2")),
        "{cr}"
    );
    assert!(
        !cr.contains("proto kernel"),
        "the kernel's subnet route stayed: {cr}"
    );
    assert!(
        hr.contains(&format!("10.{n}.0.2 dev VETH scope host")),
        "{hr}"
    );
    assert!(hr.ends_with(&format!("addr 10.{n}.0.1/32")), "{hr}");
    if !reference_available("ptp") {
        return;
    }
    let (rr, crr, hrr) = run_ptp(Impl::Reference, n);
    assert_eq!(cr, crr, "container routes differ from the reference");
    assert_eq!(hr, hrr, "host routes differ from the reference");
    let strip = |mut v: Value| {
        for i in v["interfaces"].as_array_mut().unwrap() {
            i["mac"] = Value::Null;
            i["sandbox"] = Value::Null;
            i["name"] = Value::Null;
        }
        v
    };
    assert_eq!(normalize(&strip(r)), normalize(&strip(rr)));
}

/// Every route the IPAM config asks for (each family's default route without `gw`, a prefix
/// with the gateway as `gw`) is in the container via the gateway on eth0, in IPv4, IPv6 and
/// dual-stack, and the container's routes are the reference's on the same input.
#[test]
fn ipam_routes_in_every_family() {
    if !require_root("ptp ipam_routes_in_every_family") {
        return;
    }
    for fam in FAMILIES {
        let n = unique_n();
        let mut views = Vec::new();
        for imp in [Impl::Ours, Impl::Reference] {
            if imp == Impl::Reference && !reference_available("ptp") {
                continue;
            }
            let nd = node(&format!("ptp-routes-{}-{imp:?}", fam.tag()), imp, n);
            let c1 = NetNs::create();
            let mut ipam = fam.host_local(n, &nd.sb.path("ipam"));
            ipam["routes"] = fam.routes(n);
            let conf = nd.conf("1.0.0", json!({ "ipam": ipam }));
            let pl = nd.plugin();
            let r = pl.add("ptp", &env_for(&c1, "rt1"), &conf).ok().clone();
            views.push(routes_as_configured(&c1, &conf, &r));
            pl.del("ptp", &env_for(&c1, "rt1"), &conf).ok();
            assert_eq!(nd.veths(), 0, "{}: veth left behind", fam.tag());
            assert_eq!(nd.reservations(), 0, "{}: reservation left", fam.tag());
        }
        assert_same_routes(fam, &views);
    }
}

/// ipMasq on nftables: the rules exist after ADD, and DEL without CNI_NETNS removes them.
#[test]
fn ipmasq_and_del_without_netns() {
    if !require_root("ptp ipmasq_and_del_without_netns") {
        return;
    }
    let nd = node("ptp-masq", Impl::Ours, unique_n());
    let subnet = format!("10.{}.0.0/24", nd.n);
    let c1 = NetNs::create();
    let conf = nd.conf(
        "1.0.0",
        json!({"ipMasq": true, "ipMasqBackend": "nftables"}),
    );
    let pl = nd.plugin();
    pl.add("ptp", &env_for(&c1, "m1"), &conf).ok();
    let rules = nd.node.sh(&["nft", "list", "ruleset"]);
    assert!(
        rules.contains("masquerade") && rules.contains(&subnet),
        "{rules}"
    );
    drop(c1);
    let gone = env_without_netns("m1");
    pl.del("ptp", &gone, &conf).ok();
    let rules = nd.node.sh(&["nft", "list", "ruleset"]);
    assert!(
        !rules.contains(&subnet),
        "masquerading left behind: {rules}"
    );
    assert_eq!(nd.reservations(), 0);
}

/// ipMasq on iptables: DEL with the ADD's result as prevResult (as runtimes send it) removes
/// exactly that container's masquerade chain and POSTROUTING jump; the other's stay.
#[test]
fn ipmasq_iptables_del_with_prev_result() {
    if !require_root("ptp ipmasq_iptables_del_with_prev_result") {
        return;
    }
    let nd = node("ptp-masq-ipt", Impl::Ours, unique_n());
    let net = format!("ptpnet{}", nd.n);
    let (c1, c2) = (NetNs::create(), NetNs::create());
    let conf = nd.conf(
        "1.0.0",
        json!({"ipMasq": true, "ipMasqBackend": "iptables"}),
    );
    let pl = nd.plugin();
    let r1 = pl.add("ptp", &env_for(&c1, "i1"), &conf).ok().clone();
    let r2 = pl.add("ptp", &env_for(&c2, "i2"), &conf).ok().clone();
    let masq_lines = || {
        nd.node
            .sh(&["iptables-save", "-t", "nat"])
            .lines()
            .filter(|l| l.contains(&net))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let before = masq_lines();
    let ip = |r: &Value| {
        r["ips"][0]["address"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_string()
    };
    assert!(before.iter().any(|l| l.contains(&ip(&r1))), "{before:?}");
    pl.del("ptp", &env_for(&c1, "i1"), &with_prev(&conf, &r1))
        .ok();
    let after = masq_lines();
    assert!(!after.iter().any(|l| l.contains(&ip(&r1))), "{after:?}");
    assert!(after.iter().any(|l| l.contains(&ip(&r2))), "{after:?}");
    assert_eq!(after.len() * 2, before.len(), "{before:?}\n{after:?}");
    pl.del("ptp", &env_for(&c2, "i2"), &with_prev(&conf, &r2))
        .ok();
    assert!(masq_lines().is_empty(), "{:?}", masq_lines());
}

/// A failure after the veth exists (the gateway's route is taken in the container) removes
/// the veth and releases the address; missing IPAM is a config error.
#[test]
fn failed_add_is_undone() {
    if !require_root("ptp failed_add_is_undone") {
        return;
    }
    let nd = node("ptp-undo", Impl::Ours, unique_n());
    let gw = format!("10.{}.0.1", nd.n);
    let c1 = NetNs::create();
    c1.sh(&["ip", "link", "set", "lo", "up"]);
    c1.sh(&["ip", "route", "add", &format!("{gw}/32"), "dev", "lo"]);
    let conf = nd.conf("1.0.0", json!({}));
    let pl = nd.plugin();
    let msg = pl.add("ptp", &env_for(&c1, "u1"), &conf).err(999);
    assert!(msg.contains(&gw), "{msg}");
    assert_eq!(nd.veths(), 0, "veth left behind");
    assert!(!c1.sh(&["ip", "link"]).contains("eth0"));
    assert_eq!(nd.reservations(), 0, "address not released");
    let mut c = nd.conf("1.0.0", json!({}));
    c.as_object_mut().unwrap().remove("ipam");
    assert!(
        pl.add("ptp", &env_for(&c1, "u2"), &c)
            .err(7)
            .contains("ipam")
    );
    let c = nd.conf("1.0.0", json!({"mtu": 20}));
    assert!(
        pl.add("ptp", &env_for(&c1, "u3"), &c)
            .err(7)
            .contains("mtu")
    );
    assert_eq!(nd.veths(), 0);
}

/// Whatever an IPAM plugin returns reaches ptp: a gateway of the other family (an IPv6 address
/// with an IPv4 gateway, or the reverse) or the address itself as gateway is a CNI error naming
/// both, never a panic, and the undo runs (the IPAM DEL is called, no veth is left). The plugin
/// here is a script that answers ADD with a fixed result, so no IPAM's own checks stand between.
#[test]
fn bad_ipam_results_are_errors_and_undone() {
    if !require_root("ptp bad_ipam_results_are_errors_and_undone") {
        return;
    }
    let nd = node("ptp-badipam", Impl::Ours, unique_n());
    let n = nd.n;
    let c1 = NetNs::create();
    let (result, dels) = (nd.sb.path("result.json"), nd.sb.path("dels"));
    let script = nd.sb.bin.join("fixedipam");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$CNI_COMMAND\" in\nADD) cat {};;\nDEL) echo del >> {};;\nesac\n",
            result.display(),
            dels.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = json!({
        "cniVersion": "1.0.0", "name": format!("ptpnet{n}"), "type": "ptp",
        "ipam": {"type": "fixedipam"}
    });
    for (i, (address, gateway, says)) in [
        (
            format!("fd00:{n}::5/64"),
            format!("10.{n}.0.1"),
            "not of the same address family",
        ),
        (
            format!("10.{n}.0.5/24"),
            format!("fd00:{n}::1"),
            "not of the same address family",
        ),
        (
            format!("fd00:{n}::5/64"),
            format!("fd00:{n}::5"),
            "with itself as gateway",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let r = json!({"cniVersion": "1.0.0",
                       "ips": [{"address": address, "gateway": gateway}]});
        std::fs::write(&result, r.to_string()).unwrap();
        let msg = nd
            .plugin()
            .add("ptp", &env_for(&c1, &format!("b{i}")), &conf)
            .err(999);
        assert!(
            msg.contains(&address) && msg.contains(&gateway) && msg.contains(says),
            "{msg}"
        );
        assert!(!msg.contains("panicked"), "{msg}");
        let called = std::fs::read_to_string(&dels).unwrap_or_default();
        assert_eq!(called.lines().count(), i + 1, "IPAM DEL not run: {msg}");
        assert_eq!(nd.veths(), 0, "veth left behind");
        assert!(!c1.sh(&["ip", "link"]).contains("eth0"));
    }
}
