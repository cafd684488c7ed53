//! bandwidth in a node namespace joined to a container namespace by a veth pair, with a
//! hand-made prevResult as a main plugin would pass: qdiscs and ifb after ADD and gone after
//! DEL, CHECK, GC, the clsact conflict, shaped throughput, and the reference's view of it.

mod common;
use common::env::env_for;
use common::wait::{secs, wait_until};
use common::*;
use serde_json::{Value, json};

struct Pair {
    node: NetNs,
    cont: NetNs,
    host_veth: String,
}

fn pair(tag: &str) -> Pair {
    let node = NetNs::create();
    let cont = NetNs::create();
    let host_veth = format!("bw{tag}{}", std::process::id() % 10000);
    node.sh(&[
        "ip", "link", "add", &host_veth, "type", "veth", "peer", "name", "eth0", "netns",
        &cont.name,
    ]);
    node.sh(&["ip", "addr", "add", "10.90.0.1/24", "dev", &host_veth]);
    node.sh(&["ip", "link", "set", &host_veth, "up"]);
    cont.sh(&["ip", "addr", "add", "10.90.0.2/24", "dev", "eth0"]);
    cont.sh(&["ip", "link", "set", "eth0", "up"]);
    cont.sh(&["ip", "link", "set", "lo", "up"]);
    Pair {
        node,
        cont,
        host_veth,
    }
}

fn conf(p: &Pair, version: &str, limits: Value) -> Value {
    let mut c = json!({"cniVersion": version, "name": "bwnet", "type": "bandwidth",
        "prevResult": {"cniVersion": version,
            "interfaces": [{"name": p.host_veth}, {"name": "eth0", "sandbox": p.cont.path()}],
            "ips": [{"address": "10.90.0.2/24", "interface": 1}]}});
    for (k, v) in limits.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn env(p: &Pair, cid: &str) -> Env {
    env_for(&p.cont, cid)
}

const LIMITS: &str = r#"{"ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000}"#;

#[test]
fn add_check_del_gc() {
    if !require_root("add_check_del_gc") {
        return;
    }
    let sb = Sandbox::new("bw-basic");
    let p = pair("a");
    let pl = sb.plugin_in(Impl::Ours, &p.node);
    let c = conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap());
    let r = pl.add("bandwidth", &env(&p, "bw1"), &c).ok().clone();
    let ifb = r["interfaces"][2]["name"].as_str().unwrap().to_string();
    assert!(ifb.starts_with("bwp") && ifb.len() == 15, "{r}");
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &p.host_veth]);
    assert!(
        q.contains("qdisc tbf 1: root")
            && q.contains("rate 8Mbit")
            && q.contains("qdisc ingress ffff:"),
        "{q}"
    );
    let qi = p.node.sh(&["tc", "qdisc", "show", "dev", &ifb]);
    assert!(
        qi.contains("qdisc tbf 1: root") && qi.contains("rate 8Mbit"),
        "{qi}"
    );
    let f = p.node.sh(&[
        "tc",
        "filter",
        "show",
        "dev",
        &p.host_veth,
        "parent",
        "ffff:",
    ]);
    assert!(f.contains(&format!("Redirect to device {ifb}")), "{f}");
    assert!(
        p.node
            .sh(&["ip", "-d", "link", "show", &ifb])
            .contains("alias cnibox-bandwidth bwnet bw1")
    );
    // Upstream makes its ifb with txqueuelen 0 (not the driver's 32).
    assert_eq!(txqlen(&p.node, &ifb), 0);

    let chk = with_prev(&c, &r);
    pl.check("bandwidth", &env(&p, "bw1"), &chk).ok();
    // Compatibility: the reference's CHECK accepts our setup.
    if reference_available("bandwidth") {
        sb.plugin_in(Impl::Reference, &p.node)
            .check("bandwidth", &env(&p, "bw1"), &chk)
            .ok();
    }
    p.node.sh(&["tc", "qdisc", "del", "dev", &ifb, "root"]);
    assert!(
        pl.check("bandwidth", &env(&p, "bw1"), &chk)
            .err(999)
            .contains(&ifb)
    );

    pl.del("bandwidth", &env(&p, "bw1"), &c).ok();
    assert!(
        !p.node.exec(&["ip", "link", "show", &ifb]).status_ok,
        "ifb removed"
    );
    pl.del("bandwidth", &env(&p, "bw1"), &c).ok();
    // DEL also removes what ADD put on the host interface (upstream leaves it for the veth's
    // deletion, which a host interface that outlives the container never gets).
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &p.host_veth]);
    assert!(
        !q.contains("tbf") && !q.contains("ingress"),
        "DEL left qdiscs on {}: {q}",
        p.host_veth
    );
    // GC removes the ifb of an attachment that is no longer valid, keeps valid ones.
    pl.add("bandwidth", &env(&p, "bw2"), &c).ok();
    let mut gc = c.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc.as_object_mut().unwrap().remove("prevResult");
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "bw2", "ifname": "eth0"}]);
    pl.gc("bandwidth", &gc).ok();
    let ifb2 = pl_ifb("bwnet", "bw2");
    assert!(
        p.node.exec(&["ip", "link", "show", &ifb2]).status_ok,
        "valid ifb kept"
    );
    gc["cni.dev/valid-attachments"] = json!([]);
    pl.gc("bandwidth", &gc).ok();
    assert!(
        !p.node.exec(&["ip", "link", "show", &ifb2]).status_ok,
        "stale ifb collected"
    );
}

/// The txqueuelen of `link` in `node` (sysfs: `ip -j` omits a 0).
fn txqlen(node: &NetNs, link: &str) -> u64 {
    let out = node.sh(&["cat", &format!("/sys/class/net/{link}/tx_queue_len")]);
    out.trim().parse().unwrap()
}

fn pl_ifb(net: &str, cid: &str) -> String {
    // Same derivation as upstream: bwp + 12 hex of sha512(network + containerID).
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("printf %s '{net}{cid}' | sha512sum | cut -c1-12"),
        ])
        .output()
        .unwrap();
    format!("bwp{}", String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn validation_passthrough_and_conflicts() {
    if !require_root("validation_passthrough_and_conflicts") {
        return;
    }
    let sb = Sandbox::new("bw-valid");
    let p = pair("b");
    let pl = sb.plugin_in(Impl::Ours, &p.node);
    pl.add(
        "bandwidth",
        &env(&p, "v"),
        &conf(&p, "1.0.0", json!({"ingressRate": 1000})),
    )
    .err(7);
    pl.add(
        "bandwidth",
        &env(&p, "v"),
        &conf(&p, "1.0.0", json!({"egressBurst": 1000})),
    )
    .err(7);
    pl.add("bandwidth", &env(&p, "v"), &conf(&p, "0.2.0", json!({})))
        .err(1);
    // No limits: prevResult passes through untouched.
    let c = conf(&p, "1.0.0", json!({}));
    let r = pl.add("bandwidth", &env(&p, "v"), &c).ok().clone();
    assert_eq!(r["interfaces"], c["prevResult"]["interfaces"]);
    // runtimeConfig is used only when no static key is set.
    let mut rc = conf(
        &p,
        "1.0.0",
        json!({"runtimeConfig": {"bandwidth": {"ingressRate": 16000000, "ingressBurst": 160000}}}),
    );
    pl.add("bandwidth", &env(&p, "v"), &rc).ok();
    assert!(
        p.node
            .sh(&["tc", "qdisc", "show", "dev", &p.host_veth])
            .contains("rate 16Mbit")
    );
    p.node
        .sh(&["tc", "qdisc", "del", "dev", &p.host_veth, "root"]);
    rc["ingressRate"] = json!(4000000);
    rc["ingressBurst"] = json!(40000);
    pl.add("bandwidth", &env(&p, "v"), &rc).ok();
    assert!(
        p.node
            .sh(&["tc", "qdisc", "show", "dev", &p.host_veth])
            .contains("rate 4Mbit")
    );
    p.node
        .sh(&["tc", "qdisc", "del", "dev", &p.host_veth, "root"]);
    // Someone else's clsact: a clear error, and no ifb left behind.
    p.node
        .sh(&["tc", "qdisc", "add", "dev", &p.host_veth, "clsact"]);
    let msg = pl
        .add(
            "bandwidth",
            &env(&p, "v2"),
            &conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap()),
        )
        .err(999);
    assert!(
        msg.contains("clsact") && msg.contains(&p.host_veth),
        "{msg}"
    );
    assert!(
        !p.node
            .exec(&["ip", "link", "show", &pl_ifb("bwnet", "v2")])
            .status_ok
    );
}

/// The reference's ADD is removed by our DEL.
#[test]
fn del_removes_reference_ifb() {
    if !require_root("del_removes_reference_ifb") || !reference_available("bandwidth") {
        return;
    }
    let sb = Sandbox::new("bw-ref");
    let p = pair("c");
    let c = conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap());
    let r = sb
        .plugin_in(Impl::Reference, &p.node)
        .add("bandwidth", &env(&p, "rf"), &c)
        .ok()
        .clone();
    let ifb = r["interfaces"][2]["name"].as_str().unwrap().to_string();
    assert_eq!(ifb, pl_ifb("bwnet", "rf"));
    assert_eq!(txqlen(&p.node, &ifb), 0, "the reference's ifb queue length");
    sb.plugin_in(Impl::Ours, &p.node)
        .check("bandwidth", &env(&p, "rf"), &with_prev(&c, &r))
        .ok();
    sb.plugin_in(Impl::Ours, &p.node)
        .del("bandwidth", &env(&p, "rf"), &c)
        .ok();
    assert!(!p.node.exec(&["ip", "link", "show", &ifb]).status_ok);
}

/// Throughput through the shaper is within ±20% of the configured rate in both directions.
#[test]
fn shaped_throughput() {
    if !require_root("shaped_throughput") {
        return;
    }
    if !std::path::Path::new("/usr/bin/iperf3").exists() {
        skip_note("shaped_throughput", "needs iperf3");
        return;
    }
    let sb = Sandbox::new("bw-rate");
    let p = pair("d");
    let measure = |reverse: bool| -> f64 {
        let node = p.node.name.as_str();
        let mut server = std::process::Command::new("ip")
            .args(["netns", "exec", node, "iperf3", "-s", "-1", "-p", "5301"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Ready when it listens, however long that takes on a loaded machine.
        wait_until("the iperf3 server to listen", secs(30), || {
            p.node
                .sh(&["ss", "-ltnH", "sport", "= :5301"])
                .contains("5301")
        });
        let mut args = vec![
            "iperf3",
            "-c",
            "10.90.0.1",
            "-p",
            "5301",
            "-t",
            "4",
            "-O",
            "1",
            "-J",
        ];
        if reverse {
            args.push("-R");
        }
        let out = p.cont.sh(&args);
        let _ = server.wait();
        let v: Value = serde_json::from_str(&out).unwrap();
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap()
    };
    let unshaped = measure(false);
    let c = conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap());
    sb.plugin_in(Impl::Ours, &p.node)
        .add("bandwidth", &env(&p, "tp"), &c)
        .ok();
    let egress = measure(false);
    let ingress = measure(true);
    eprintln!("unshaped: {:.1} Mbit/s", unshaped / 1e6);
    assert!(
        unshaped > 50e6,
        "unshaped {unshaped} bit/s should be far above the limit"
    );
    eprintln!(
        "shaped at 8 Mbit/s: egress {:.2} Mbit/s, ingress {:.2} Mbit/s",
        egress / 1e6,
        ingress / 1e6
    );
    for (dir, r) in [("egress", egress), ("ingress", ingress)] {
        assert!(
            (6.4e6..=9.6e6).contains(&r),
            "{dir} {r} bit/s not within 20% of 8 Mbit/s"
        );
    }
}

/// DEL removes only the qdiscs ADD makes (tbf 1: at the root, ingress ffff:): someone else's
/// qdiscs in those slots, with the same handles but other kinds, stay on the host veth.
#[test]
fn del_leaves_foreign_qdiscs() {
    if !require_root("del_leaves_foreign_qdiscs") {
        return;
    }
    let sb = Sandbox::new("bw-foreign");
    let p = pair("f");
    let pl = sb.plugin_in(Impl::Ours, &p.node);
    let c = conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap());
    p.node.sh(&[
        "tc",
        "qdisc",
        "add",
        "dev",
        &p.host_veth,
        "root",
        "handle",
        "1:",
        "pfifo",
    ]);
    p.node
        .sh(&["tc", "qdisc", "add", "dev", &p.host_veth, "clsact"]);
    pl.del("bandwidth", &env(&p, "bwf"), &c).ok();
    pl.del("bandwidth", &env(&p, "bwf"), &c).ok();
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &p.host_veth]);
    assert!(
        q.contains("qdisc pfifo 1: root") && q.contains("qdisc clsact ffff:"),
        "DEL removed qdiscs it did not make from {}:\n{q}",
        p.host_veth
    );
}

/// A failed ADD takes back what it already did: here the ifb cannot be created (a link of its
/// name exists), after the ingress tbf went onto the host veth. Nothing of bandwidth's may stay
/// on the host veth, and the foreign link is left alone.
#[test]
fn failed_add_leaves_no_qdisc() {
    if !require_root("failed_add_leaves_no_qdisc") {
        return;
    }
    let sb = Sandbox::new("bw-undo");
    let p = pair("u");
    let pl = sb.plugin_in(Impl::Ours, &p.node);
    let c = conf(&p, "1.0.0", serde_json::from_str(LIMITS).unwrap());
    // Learn the ifb's name from a first ADD, then take it back.
    let r = pl.add("bandwidth", &env(&p, "bwu"), &c).ok().clone();
    let ifb = r["interfaces"][2]["name"].as_str().unwrap().to_string();
    pl.del("bandwidth", &env(&p, "bwu"), &c).ok();
    // Squat the name with a veth pair.
    p.node.sh(&[
        "ip", "link", "add", &ifb, "type", "veth", "peer", "name", "bwsquat",
    ]);
    let out = pl.add("bandwidth", &env(&p, "bwu"), &c);
    let msg = out.err(999);
    assert!(msg.contains(&ifb) || msg.contains("exists"), "{msg}");
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &p.host_veth]);
    assert!(
        !q.contains("tbf") && !q.contains("ingress"),
        "the failed ADD left qdiscs on the host veth:\n{q}"
    );
    let squat = p.node.sh(&["ip", "-o", "link", "show", &ifb]);
    assert!(squat.contains("veth") || squat.contains(&ifb), "{squat}");
}

/// Config errors are code 7 naming what is wrong, with nothing changed on the host (issue 24,
/// item 11: they were 999): a container interface that is no veth, a veth whose peer is in
/// the container too, a peer prevResult does not list, and limits given by halves (the
/// message names the key, in `runtimeConfig.bandwidth` too). Type errors are decode errors
/// (code 6) naming the key.
#[test]
fn wrong_interfaces_and_bad_limits_are_config_errors() {
    if !require_root("wrong_interfaces_and_bad_limits_are_config_errors") {
        return;
    }
    let sb = Sandbox::new("bw-config");
    let p = pair("c");
    let pl = sb.plugin_in(Impl::Ours, &p.node);
    p.cont.sh(&[
        "ip", "link", "add", "cn1", "type", "veth", "peer", "name", "cn2",
    ]);
    p.cont.sh(&["ip", "link", "add", "cbr0", "type", "bridge"]);
    let limits: Value = serde_json::from_str(LIMITS).unwrap();
    let on = |ifname: &str| Env {
        ifname: ifname.into(),
        ..env(&p, "w")
    };
    for (ifname, want) in [
        ("lo", "lo (CNI_IFNAME) is a device, not a veth"),
        ("cbr0", "cbr0 (CNI_IFNAME) is a bridge, not a veth"),
        ("cn1", "peer is in the container too"),
    ] {
        let msg = pl
            .add("bandwidth", &on(ifname), &conf(&p, "1.0.0", limits.clone()))
            .err(7);
        assert!(msg.contains(want), "{ifname}: {msg}");
        let msg = pl
            .check("bandwidth", &on(ifname), &conf(&p, "1.0.0", limits.clone()))
            .err(7);
        assert!(msg.contains(want), "{ifname}: {msg}");
    }
    // The right veth, but prevResult lists another host interface.
    let mut c = conf(&p, "1.0.0", limits.clone());
    c["prevResult"]["interfaces"][0]["name"] = json!("someother0");
    let msg = pl.add("bandwidth", &env(&p, "w"), &c).err(7);
    assert!(
        msg.contains("prevResult.interfaces") && msg.contains(&p.host_veth),
        "{msg}"
    );
    for (limits, code, key) in [
        (json!({"ingressRate": 1000}), 7, "ingressBurst"),
        (json!({"egressBurst": 1000}), 7, "egressRate"),
        (
            json!({"ingressRate": 1000, "ingressBurst": 1u64 << 40}),
            7,
            "ingressBurst",
        ),
        (
            json!({"runtimeConfig": {"bandwidth": {"egressRate": 1000}}}),
            7,
            "runtimeConfig.bandwidth.egressBurst",
        ),
        (
            json!({"runtimeConfig": {"bandwidth": {"ingressBurst": 1000}}}),
            7,
            "runtimeConfig.bandwidth.ingressRate",
        ),
        (
            json!({"runtimeConfig": {"bandwidth": {"ingressRate": "fast"}}}),
            6,
            "ingressRate",
        ),
        (
            json!({"runtimeConfig": {"bandwidth": 5}}),
            6,
            "runtimeConfig.bandwidth",
        ),
    ] {
        let msg = pl
            .add(
                "bandwidth",
                &env(&p, "w"),
                &conf(&p, "1.0.0", limits.clone()),
            )
            .err(code);
        assert!(msg.contains(key), "{limits}: {msg}");
    }
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &p.host_veth]);
    assert!(!q.contains("tbf") && !q.contains("ingress"), "{q}");
    assert!(
        !p.node
            .exec(&["ip", "link", "show", &pl_ifb("bwnet", "w")])
            .status_ok
    );
}
