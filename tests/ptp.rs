//! ptp with host-local in a throwaway node namespace: two containers reach each other and the
//! node through the node's routing, the addressing and routes match the Go plugin's on the same
//! input, CHECK, DEL leaves nothing (veths, reservations, masquerading), a failed ADD is undone,
//! and DEL without a namespace still removes the masquerading.

mod common;
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
        std::fs::read_dir(self.sb.path(&format!("ipam/ptpnet{}", self.n)))
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with("10.")
                })
                .count()
            })
            .unwrap_or(0)
    }

    fn veths(&self) -> usize {
        self.node
            .sh(&["ip", "-o", "link", "show", "type", "veth"])
            .lines()
            .count()
    }
}

fn env_for(cont: &NetNs, id: &str) -> Env {
    Env {
        container_id: id.into(),
        netns: cont.path(),
        ..Env::default()
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
    // CHECK with the result as prevResult.
    assert!(
        pl.check("ptp", &env_for(&c1, "p1"), &with_prev(&conf, &r1))
            .status_ok
    );
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
    let (r, cr, hr) = run_ptp(Impl::Ours, 93);
    // Upstream's addressing: the container keeps the /24 but reaches it through the gateway.
    assert_eq!(r["ips"][0]["address"], "10.93.0.2/24", "{r}");
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
        cr.contains("10.93.0.0/24 via 10.93.0.1 dev eth0 src 10.93.0.2"),
        "{cr}"
    );
    assert!(
        cr.contains("10.93.0.1 dev eth0 scope link src 10.93.0.2"),
        "{cr}"
    );
    assert!(
        !cr.contains("proto kernel"),
        "the kernel's subnet route stayed: {cr}"
    );
    assert!(hr.contains("10.93.0.2 dev VETH scope host"), "{hr}");
    assert!(hr.ends_with("addr 10.93.0.1/32"), "{hr}");
    if !reference_available("ptp") {
        return;
    }
    let (rr, crr, hrr) = run_ptp(Impl::Reference, 93);
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

/// ipMasq on nftables: the rules exist after ADD, and DEL without CNI_NETNS removes them.
#[test]
fn ipmasq_and_del_without_netns() {
    if !require_root("ptp ipmasq_and_del_without_netns") {
        return;
    }
    let nd = node("ptp-masq", Impl::Ours, 94);
    let c1 = NetNs::create();
    let conf = nd.conf(
        "1.0.0",
        json!({"ipMasq": true, "ipMasqBackend": "nftables"}),
    );
    let pl = nd.plugin();
    pl.add("ptp", &env_for(&c1, "m1"), &conf).ok();
    let rules = nd.node.sh(&["nft", "list", "ruleset"]);
    assert!(
        rules.contains("masquerade") && rules.contains("10.94.0.0/24"),
        "{rules}"
    );
    drop(c1);
    let gone = Env {
        container_id: "m1".into(),
        netns: String::new(),
        ..Env::default()
    };
    pl.del("ptp", &gone, &conf).ok();
    let rules = nd.node.sh(&["nft", "list", "ruleset"]);
    assert!(
        !rules.contains("10.94.0.0/24"),
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
    let nd = node("ptp-masq-ipt", Impl::Ours, 96);
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
            .filter(|l| l.contains("ptpnet96"))
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
    let nd = node("ptp-undo", Impl::Ours, 95);
    let c1 = NetNs::create();
    c1.sh(&["ip", "link", "set", "lo", "up"]);
    c1.sh(&["ip", "route", "add", "10.95.0.1/32", "dev", "lo"]);
    let conf = nd.conf("1.0.0", json!({}));
    let pl = nd.plugin();
    let msg = pl.add("ptp", &env_for(&c1, "u1"), &conf).err(999);
    assert!(msg.contains("10.95.0.1"), "{msg}");
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
