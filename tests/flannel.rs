//! flannel with a subnet.env written by the test, in a throwaway node namespace: a dual-stack
//! lease through the bridge delegate (with masquerading, since flannel does not), a `delegate`
//! that picks ptp, the stored delegate config removed by DEL, a failed delegate ADD leaving
//! nothing, STATUS before and after flanneld's file exists, GC of a gone pod, bad input.
//! (k3s's conflist as it ships is in tests/conflists.rs.)

mod common;
use common::env::env_for;
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
                "FLANNEL_IPV6_NETWORK=fd00:{n}::/56\nFLANNEL_IPV6_SUBNET=fd00:{n}:0:7::1/64\n"
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
    /// host-local's reservations of the network (its directory must exist: see
    /// [`common::family::reservations`]).
    #[track_caller]
    fn reservations(&self) -> usize {
        common::family::reservations(&self.sb.path(&format!("ipam/flnet{}", self.n)))
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
    assert_eq!(nd.reservations(), 2, "one address per family");
    assert_eq!(r["cniVersion"], "1.1.0", "{r}");
    assert_eq!(r["ips"][0]["address"], format!("10.{n}.7.2/24"), "{r}");
    assert_eq!(r["ips"][1]["address"], format!("fd00:{n}:0:7::2/64"), "{r}");
    // Routes to the cluster networks, from subnet.env; MTU too.
    let routes = pod.sh(&["ip", "-4", "route"]);
    assert!(
        routes.contains(&format!("10.{n}.0.0/16 via 10.{n}.7.1")),
        "{routes}"
    );
    let routes6 = pod.sh(&["ip", "-6", "route"]);
    assert!(
        routes6.contains(&format!("fd00:{n}::/56 via fd00:{n}:0:7::1")),
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
        json!([[{"subnet": format!("10.{n}.7.0/24")}], [{"subnet": format!("fd00:{n}:0:7::/64")}]])
    );
    // CHECK through the delegate, then after a deliberate change.
    assert!(
        pl.check("flannel", &env_for(&pod, "f1"), &with_prev(&conf, &r))
            .status_ok
    );
    // One change: the IPv4 address goes; CHECK names it.
    let v4 = format!("10.{n}.7.2/24");
    pod.sh(&["ip", "addr", "del", &v4, "dev", "eth0"]);
    let bad = pl.check("flannel", &env_for(&pod, "f1"), &with_prev(&conf, &r));
    let msg = bad.err(999);
    assert!(msg.contains(&format!("address {v4} not found")), "{msg}");
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
    assert_eq!(nd.reservations(), 1);
    pl.del("flannel", &env_for(&pod, "p1"), &conf).ok();
    assert_eq!(nd.veths(), 0);
    assert!(nd.stored().is_empty());
    assert_eq!(nd.reservations(), 0);
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
    // A dataDir that is a file: code 7 naming it, for ADD and DEL; nothing made.
    let file = nd.sb.path("afile");
    std::fs::write(&file, "x").unwrap();
    let conf = nd.conf(json!({"dataDir": file.display().to_string()}));
    for cmd in ["ADD", "DEL"] {
        let msg = pl.cmd("flannel", cmd, &env, &conf).err(7);
        assert!(msg.contains("dataDir"), "{cmd}: {msg}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert_eq!(nd.veths(), 0);
    // flannel delegating to flannel, five deep: the nesting limit names delegate.type, and
    // every level's dataDir (made by this ADD) is gone again.
    let mut d = json!({"type": "bridge", "bridge": "flbr0"});
    for i in 0..5 {
        d = json!({"type": "flannel", "delegate": d,
            "subnetFile": nd.subnet_env().display().to_string(),
            "dataDir": nd.sb.path(&format!("nest{i}")).display().to_string()});
    }
    let msg = pl
        .add("flannel", &env, &nd.conf(json!({"delegate": d})))
        .err(7);
    assert!(
        msg.contains("delegate.type \"flannel\": delegation nested"),
        "{msg}"
    );
    assert!(!msg.contains("ipam.type"), "{msg}");
    for i in 0..5 {
        assert!(!nd.sb.path(&format!("nest{i}")).exists(), "nest{i} left");
    }
    assert!(nd.stored().is_empty(), "{:?}", nd.stored());
    assert_eq!(nd.veths(), 0);
    // DEL with nothing stored succeeds.
    pl.del("flannel", &env, &nd.conf(json!({}))).ok();
}

/// The delegate fails after it changed the host (bridge: the bridge, the veth, the address,
/// the reservation and the masquerading exist when the route to an unreachable gateway fails):
/// nothing of this ADD is left, the pod added before keeps everything, and `dataDir` goes only
/// when this ADD made it.
#[test]
fn failed_add_after_the_delegate_changed_the_host() {
    if !require_root("flannel failed_add_after_the_delegate_changed_the_host") {
        return;
    }
    let nd = node("flannel-late");
    nd.write_env(false, false);
    let pl = nd.plugin();
    let ok_conf = nd.conf(json!({}));
    let pod0 = NetNs::create();
    pl.add("flannel", &env_for(&pod0, "ok0"), &ok_conf).ok();
    assert_eq!(nd.reservations(), 1);
    let (veths, masq) = (nd.veths(), nd.masq_rules());
    assert_eq!(veths, 1);
    assert!(!masq.is_empty(), "no masquerading for the first pod");
    let ipam = json!({"dataDir": nd.sb.path("ipam").display().to_string(),
        "routes": [{"dst": "198.51.100.0/24", "gw": "192.0.2.1"}]});
    let fresh = nd.sb.path("fresh");
    let empty = nd.sb.path("empty");
    std::fs::create_dir(&empty).unwrap();
    for (what, data_dir) in [
        ("dataDir of the first pod", nd.data_dir()),
        ("dataDir this ADD makes", fresh.join("flannel")),
        ("empty dataDir that was there", empty.clone()),
    ] {
        let pod = NetNs::create();
        let conf = nd.conf(json!({"ipam": ipam,
            "dataDir": data_dir.display().to_string()}));
        let msg = pl.add("flannel", &env_for(&pod, "late1"), &conf).err(999);
        assert!(msg.contains("198.51.100.0/24"), "{what}: {msg}");
        assert_eq!(nd.reservations(), 1, "{what}: reservation left");
        assert_eq!(nd.veths(), veths, "{what}: veth left");
        assert_eq!(nd.masq_rules(), masq, "{what}: masquerading");
        assert!(
            !data_dir.join("late1").exists(),
            "{what}: stored config left"
        );
        assert_eq!(nd.stored(), ["ok0"], "{what}");
        assert_eq!(
            pod.sh(&["ip", "-o", "link"]).lines().count(),
            1,
            "{what}: link left in the pod"
        );
    }
    assert!(!fresh.exists(), "a dataDir this ADD made is left");
    assert!(empty.is_dir(), "an empty dataDir that was there is gone");
    pl.del("flannel", &env_for(&pod0, "ok0"), &ok_conf).ok();
    assert_eq!(nd.reservations(), 0);
    assert_eq!(nd.veths(), 0);
}

/// A delegate whose ADD and DEL both fail: the ADD's error names the failed undo too (not only
/// a warning on stderr), and the stored config stays for a later DEL.
#[test]
fn failed_undo_of_the_delegate_is_reported() {
    if !require_root("flannel failed_undo_of_the_delegate_is_reported") {
        return;
    }
    let nd = node("flannel-undo");
    nd.write_env(true, false);
    let script = nd.sb.bin.join("alwaysfails");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat >/dev/null\n\
         echo \"{\\\"cniVersion\\\":\\\"1.1.0\\\",\\\"code\\\":999,\\\"msg\\\":\\\"broke on $CNI_COMMAND\\\"}\"\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = nd.conf(json!({"delegate": {"type": "alwaysfails"}}));
    let pod = NetNs::create();
    let msg = nd
        .plugin()
        .add("flannel", &env_for(&pod, "u1"), &conf)
        .err(999);
    assert!(
        msg.starts_with("failed to delegate add: broke on ADD (and undo alwaysfails delegate: ")
            && msg.contains("broke on DEL"),
        "{msg}"
    );
    assert_eq!(
        nd.stored(),
        ["u1"],
        "the stored config is kept for a later DEL"
    );
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

/// GC runs the delegate's DEL (exec'd, with the gone attachment's container ID and CNI_IFNAME)
/// for a config cnibox's flannel stored and the runtime no longer lists, then drops it; it
/// leaves every file it did not store: a conflist and a bare `{"name": …}` file of the same
/// network, a stored config of the Go plugin's (no record), another network's.
#[test]
fn gc_deletes_only_what_flannel_stored() {
    if !require_root("flannel gc_deletes_only_what_flannel_stored") {
        return;
    }
    let nd = node("flannel-gcshape");
    nd.write_env(true, false);
    let log = nd.sb.path("delegate.log");
    // A delegate that logs each call and prints an empty result for ADD.
    let script = nd.sb.bin.join("logdel");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >/dev/null\necho \"$CNI_COMMAND ${{CNI_CONTAINERID:-}} ${{CNI_IFNAME:-}} ${{CNI_NETNS:-}}\" >> {}\n\
             [ \"$CNI_COMMAND\" = ADD ] && echo '{{\"cniVersion\":\"1.1.0\"}}'\nexit 0\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = nd.conf(json!({"delegate": {"type": "logdel"}}));
    let net = conf["name"].as_str().unwrap().to_string();
    let pl = nd.plugin();
    let pod = NetNs::create();
    pl.add("flannel", &env_for(&pod, "keep"), &conf).ok();
    pl.add("flannel", &env_for(&pod, "gone"), &conf).ok();
    let go_stored = std::fs::read(nd.data_dir().join("gone")).unwrap();
    let others = [
        (
            "conflist1",
            json!({"cniVersion": "1.0.0", "name": net, "plugins": [{"type": "bridge"}]})
                .to_string(),
        ),
        ("namefile", json!({"name": net}).to_string()),
        ("gostored", String::from_utf8(go_stored).unwrap()),
        (
            "other",
            json!({"name": "othernet", "type": "bridge", "ipam": {}}).to_string(),
        ),
    ];
    for (name, text) in &others {
        std::fs::write(nd.data_dir().join(name), text).unwrap();
    }
    std::fs::write(&log, "").unwrap();
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "keep", "ifname": "eth0"}]);
    pl.gc("flannel", &gc).ok();
    let mut stored = nd.stored();
    stored.sort();
    assert_eq!(
        stored,
        ["conflist1", "gostored", "keep", "namefile", "other"]
    );
    for (name, text) in &others {
        assert_eq!(
            &std::fs::read_to_string(nd.data_dir().join(name)).unwrap(),
            text
        );
    }
    // The calls' verbs, and for DEL its attachment (no CNI_NETNS: the pod is gone).
    let calls = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| {
                if l.starts_with("DEL") {
                    l.to_string()
                } else {
                    l[..2].to_string()
                }
            })
            .collect()
    };
    assert_eq!(
        calls(),
        ["DEL gone eth0 ", "GC"],
        "delegate calls of the GC"
    );
    // Done once: a second GC runs no DEL.
    std::fs::write(&log, "").unwrap();
    pl.gc("flannel", &gc).ok();
    assert_eq!(calls(), ["GC"]);
    pl.del("flannel", &env_for(&pod, "keep"), &conf).ok();
    assert!(!nd.data_dir().join("keep").exists());
}

/// Container IDs up to a file name's 255 bytes are stored under their own name, as flannel
/// stores them; longer ones (which flannel cannot store) under `~<hash>`; ADD, CHECK and DEL
/// work for both.
#[test]
fn long_container_ids() {
    if !require_root("flannel long_container_ids") {
        return;
    }
    let nd = node("flannel-longid");
    nd.write_env(true, false);
    let conf = nd.conf(json!({}));
    let pl = nd.plugin();
    for len in [255, 256, 1000] {
        let id: String = std::iter::repeat_n("0123456789abcdef", len / 16 + 1)
            .collect::<String>()
            .chars()
            .take(len)
            .collect();
        let pod = NetNs::create();
        let env = env_for(&pod, &id);
        let r = pl.add("flannel", &env, &conf).ok().clone();
        assert_eq!(nd.reservations(), 1, "{len}");
        let stored = nd.stored();
        assert_eq!(stored.len(), 1, "{len}: {stored:?}");
        if len <= 255 {
            assert_eq!(stored[0], id);
        } else {
            assert!(
                stored[0].starts_with('~') && stored[0].len() == 33,
                "{stored:?}"
            );
        }
        pl.check("flannel", &env, &with_prev(&conf, &r)).ok();
        pl.del("flannel", &env, &conf).ok();
        assert!(nd.stored().is_empty(), "{len}: {:?}", nd.stored());
        assert_eq!(nd.reservations(), 0, "{len}");
        assert_eq!(nd.veths(), 0, "{len}");
    }
}

/// `subnetFile` that is a FIFO, a character device, a directory or larger than flanneld ever
/// writes: code 7 naming it, at once (the FIFO run is bounded by `timeout`, so a hang fails
/// instead of blocking the suite). A byte that is not UTF-8 on a line flannel does not parse
/// is read as flanneld's Go reader reads it.
#[test]
fn subnet_file_must_be_a_small_regular_file() {
    if !require_root("flannel subnet_file_must_be_a_small_regular_file") {
        return;
    }
    let nd = node("flannel-subnetfile");
    let pod = NetNs::create();
    let env = env_for(&pod, "s1");
    let fifo = nd.sb.path("fifo");
    let made = exec(
        std::path::Path::new("mkfifo"),
        &[&fifo.display().to_string()],
        &[],
        "",
    );
    assert!(made.status_ok, "{made:?}");
    let big = nd.sb.path("big.env");
    std::fs::write(&big, "#".repeat(70 * 1024)).unwrap();
    let prog = nd.sb.bin.join("flannel").display().to_string();
    let path = nd.sb.bin.display().to_string();
    let state = nd.sb.state_dir();
    for file in [
        fifo.display().to_string(),
        "/dev/zero".to_string(),
        nd.sb.path("").display().to_string(),
        big.display().to_string(),
    ] {
        let conf = nd.conf(json!({"subnetFile": file}));
        let out = exec(
            std::path::Path::new("timeout"),
            &["10", "ip", "netns", "exec", &nd.node.name, &prog],
            &[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "s1"),
                ("CNI_NETNS", &env.netns),
                ("CNI_IFNAME", "eth0"),
                ("CNI_PATH", &path),
                ("CNIBOX_STATE_DIR", &state),
            ],
            &conf.to_string(),
        );
        assert_ne!(out.code, Some(124), "{file}: timed out");
        let msg = out.err(7);
        assert!(
            msg.contains("subnetFile") && msg.contains(&file),
            "{file}: {msg}"
        );
    }
    assert!(nd.stored().is_empty());
    assert_eq!(nd.veths(), 0);

    let n = nd.n;
    let mut text = b"# written by flanneld \xff\xfe\n".to_vec();
    text.extend_from_slice(
        format!("FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.7.1/24\nFLANNEL_MTU=1400\n")
            .as_bytes(),
    );
    text.extend_from_slice(b"FLANNEL_NOTE=caf\xe9\nFLANNEL_IPMASQ=true\n");
    std::fs::write(nd.subnet_env(), &text).unwrap();
    let conf = nd.conf(json!({}));
    let pl = nd.plugin();
    let r = pl.add("flannel", &env, &conf).ok().clone();
    assert_eq!(r["ips"][0]["address"], format!("10.{n}.7.2/24"), "{r}");
    pl.del("flannel", &env, &conf).ok();
    assert_eq!(nd.veths(), 0);
}
