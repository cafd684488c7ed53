//! flannel with a subnet.env written by the test, in a throwaway node namespace: a dual-stack
//! lease through the bridge delegate (with masquerading, since flannel does not), a `delegate`
//! that picks ptp, the stored delegate config removed by DEL, a failed delegate ADD leaving
//! nothing, STATUS before and after flanneld's file exists, GC of a gone pod, bad input.
//! (k3s's conflist as it ships is in tests/conflists.rs.)

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;

struct Node {
    node: NetNs,
    sb: Sandbox,
    n: u8,
}

fn node(tag: &str) -> Node {
    let n = common::lab::unique_n();
    let node = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    Node {
        node,
        sb: Sandbox::new(tag),
        n,
    }
}

impl Node {
    fn subnet_env(&self) -> PathBuf {
        self.sb.path("subnet.env")
    }
    fn data_dir(&self) -> PathBuf {
        self.sb.path("flannel")
    }
    fn write_env(&self, ipmasq: bool, v6: bool) {
        let n = self.n;
        let mut s = format!(
            "FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.7.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ={ipmasq}\n"
        );
        if v6 {
            s += &format!(
                "FLANNEL_IPV6_NETWORK=fd{n:02x}::/56\nFLANNEL_IPV6_SUBNET=fd{n:02x}:0:0:7::1/64\n"
            );
        }
        std::fs::write(self.subnet_env(), s).unwrap();
    }
    fn conf(&self, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": "1.1.0", "name": format!("flnet{}", self.n), "type": "flannel",
            "subnetFile": self.subnet_env().display().to_string(),
            "dataDir": self.data_dir().display().to_string(),
            "ipam": {"dataDir": self.sb.path("ipam").display().to_string()},
            "delegate": {"bridge": "flbr0"}
        });
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }
    fn plugin(&self) -> Plugin<'_> {
        self.sb.plugin_in(Impl::Ours, &self.node)
    }
    fn stored(&self) -> Vec<String> {
        std::fs::read_dir(self.data_dir())
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
    fn reservations(&self) -> usize {
        std::fs::read_dir(self.sb.path(&format!("ipam/flnet{}", self.n)))
            .map(|d| {
                d.filter(|e| {
                    let name = e.as_ref().unwrap().file_name();
                    let name = name.to_string_lossy();
                    name.starts_with("10.") || name.starts_with("fd")
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
    /// The masquerading rules of the node, both backends.
    fn masq_rules(&self) -> String {
        let nat = self.node.sh(&["iptables-save", "-t", "nat"]);
        let nft = self.node.sh(&["nft", "list", "ruleset"]);
        format!("{nat}{nft}")
            .lines()
            .filter(|l| l.contains("masquerade") || l.contains("MASQUERADE"))
            .map(|l| format!("{l}\n"))
            .collect()
    }
}

fn env_for(pod: &NetNs, id: &str) -> Env {
    Env {
        container_id: id.into(),
        netns: pod.path(),
        ..Env::default()
    }
}

#[test]
fn dual_stack_bridge_with_masquerading() {
    if !require_root("flannel dual_stack_bridge_with_masquerading") {
        return;
    }
    let nd = node("flannel-dual");
    let n = nd.n;
    nd.write_env(false, true);
    let pod = NetNs::create();
    let conf = nd.conf(json!({}));
    let pl = nd.plugin();
    let r = pl.add("flannel", &env_for(&pod, "f1"), &conf).ok().clone();
    assert_eq!(r["cniVersion"], "1.1.0", "{r}");
    assert_eq!(r["ips"][0]["address"], format!("10.{n}.7.2/24"), "{r}");
    assert_eq!(
        r["ips"][1]["address"],
        format!("fd{n:02x}:0:0:7::2/64"),
        "{r}"
    );
    // Routes to the cluster networks, from subnet.env; MTU too.
    let routes = pod.sh(&["ip", "-4", "route"]);
    assert!(
        routes.contains(&format!("10.{n}.0.0/16 via 10.{n}.7.1")),
        "{routes}"
    );
    let routes6 = pod.sh(&["ip", "-6", "route"]);
    assert!(
        routes6.contains(&format!("fd{n:02x}::/56 via fd{n:02x}:0:0:7::1")),
        "{routes6}"
    );
    assert!(pod.sh(&["ip", "link", "show", "eth0"]).contains("mtu 1400"));
    // FLANNEL_IPMASQ=false: the delegate masquerades.
    assert!(!nd.masq_rules().is_empty(), "no masquerading after ADD");
    pod.sh(&["ping", "-c", "1", "-W", "5", &format!("10.{n}.7.1")]);
    let stored: Value =
        serde_json::from_slice(&std::fs::read(nd.data_dir().join("f1")).unwrap()).unwrap();
    assert_eq!(stored["ipMasq"], true);
    assert_eq!(stored["bridge"], "flbr0");
    assert_eq!(
        stored["ipam"]["ranges"],
        json!([[{"subnet": format!("10.{n}.7.0/24")}], [{"subnet": format!("fd{n:02x}:0:0:7::/64")}]])
    );
    // CHECK through the delegate, then after a deliberate change.
    assert!(
        pl.check("flannel", &env_for(&pod, "f1"), &with_prev(&conf, &r))
            .status_ok
    );
    pod.sh(&["ip", "link", "set", "eth0", "mtu", "1300"]);
    pod.sh(&["ip", "addr", "flush", "dev", "eth0"]);
    let bad = pl.check("flannel", &env_for(&pod, "f1"), &with_prev(&conf, &r));
    assert!(!bad.status_ok, "CHECK passed after the address was removed");
    // DEL: nothing left, stored config gone; DEL again is fine.
    pl.del("flannel", &env_for(&pod, "f1"), &conf).ok();
    assert!(
        nd.stored().is_empty(),
        "stored config left: {:?}",
        nd.stored()
    );
    assert_eq!(nd.reservations(), 0);
    assert_eq!(nd.veths(), 0);
    assert!(
        nd.masq_rules().is_empty(),
        "masquerading left:\n{}",
        nd.masq_rules()
    );
    pl.del("flannel", &env_for(&pod, "f1"), &conf).ok();
}

#[test]
fn delegate_ptp() {
    if !require_root("flannel delegate_ptp") {
        return;
    }
    let nd = node("flannel-ptp");
    let n = nd.n;
    nd.write_env(true, false);
    let pod = NetNs::create();
    let conf = nd.conf(json!({"delegate": {"type": "ptp"}}));
    let pl = nd.plugin();
    let r = pl.add("flannel", &env_for(&pod, "p1"), &conf).ok().clone();
    let host_veth = r["interfaces"][0]["name"].as_str().unwrap();
    // ptp's addressing: the gateway as a /32 on the host end; no bridge.
    let a = nd
        .node
        .sh(&["ip", "-4", "-o", "addr", "show", "dev", host_veth]);
    assert!(a.contains(&format!("10.{n}.7.1/32")), "{a}");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(nd.data_dir().join("p1")).unwrap()).unwrap();
    assert_eq!(stored["type"], "ptp");
    assert_eq!(
        stored["ipMasq"], false,
        "flannel masquerades: the delegate must not"
    );
    assert!(
        stored.get("isGateway").is_none(),
        "isGateway is for bridge only"
    );
    pod.sh(&["ping", "-c", "1", "-W", "5", &format!("10.{n}.7.1")]);
    pl.del("flannel", &env_for(&pod, "p1"), &conf).ok();
    assert_eq!(nd.veths(), 0);
    assert!(nd.stored().is_empty());
}

#[test]
fn failures_leave_nothing() {
    if !require_root("flannel failures_leave_nothing") {
        return;
    }
    let nd = node("flannel-fail");
    let pod = NetNs::create();
    let pl = nd.plugin();
    let env = env_for(&pod, "x1");
    // flanneld has not written the subnet file yet: try again later; STATUS not available.
    let conf = nd.conf(json!({}));
    let msg = pl.add("flannel", &env, &conf).err(11);
    assert!(msg.contains("subnet.env"), "{msg}");
    let msg = pl.status("flannel", &conf).err(50);
    assert!(msg.contains("subnet.env"), "{msg}");
    nd.write_env(true, false);
    assert!(pl.status("flannel", &conf).status_ok);
    // Bad config: code 7 naming the key; nothing stored.
    for (extra, code, key) in [
        (json!({"delegate": {"name": "x"}}), 7, "name"),
        (json!({"delegate": {"ipam": {}}}), 7, "ipam"),
        (json!({"delegate": {"type": 3}}), 7, "type"),
        (
            json!({"delegate": {"type": "../bridge"}}),
            7,
            "delegate.type",
        ),
        (
            json!({"delegate": {"type": "no-such-plugin"}}),
            7,
            "no-such-plugin",
        ),
        (
            json!({"subnetFile": "relative/subnet.env"}),
            7,
            "subnetFile",
        ),
        (json!({"dataDir": "var/lib"}), 7, "dataDir"),
        (json!({"delegate": "bridge"}), 6, "delegate"),
    ] {
        let msg = pl.add("flannel", &env, &nd.conf(extra.clone())).err(code);
        assert!(msg.contains(key), "{extra}: {msg}");
    }
    // The delegate fails after the config was stored (the bridge refuses its mtu): undone.
    let conf = nd.conf(json!({"delegate": {"mtu": 10}}));
    let msg = pl.add("flannel", &env, &conf).err(7);
    assert!(msg.contains("mtu"), "{msg}");
    assert!(
        nd.stored().is_empty(),
        "stored config left: {:?}",
        nd.stored()
    );
    assert_eq!(nd.reservations(), 0);
    assert_eq!(nd.veths(), 0);
    // DEL with nothing stored succeeds.
    pl.del("flannel", &env, &conf).ok();
}

#[test]
fn gc_drops_gone_pods() {
    if !require_root("flannel gc_drops_gone_pods") {
        return;
    }
    let nd = node("flannel-gc");
    nd.write_env(true, false);
    let (p1, p2) = (NetNs::create(), NetNs::create());
    let conf = nd.conf(json!({}));
    let pl = nd.plugin();
    pl.add("flannel", &env_for(&p1, "keep"), &conf).ok();
    pl.add("flannel", &env_for(&p2, "gone"), &conf).ok();
    // Another network's stored config in the same dataDir is not this GC's to drop.
    std::fs::write(
        nd.data_dir().join("other"),
        r#"{"name":"othernet","type":"bridge"}"#,
    )
    .unwrap();
    assert_eq!(nd.reservations(), 2);
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": "eth0"}]);
    pl.gc("flannel", &gc).ok();
    let mut stored = nd.stored();
    stored.sort();
    assert_eq!(stored, ["keep", "other"]);
    assert_eq!(
        nd.reservations(),
        1,
        "the gone pod's address was not collected"
    );
    pl.del("flannel", &env_for(&p1, "keep"), &conf).ok();
    drop(p2);
    pl.del("flannel", &env_for(&NetNs::create(), "gone"), &conf)
        .ok();
    assert_eq!(nd.reservations(), 0);
}
