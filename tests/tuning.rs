//! tuning chained after a main plugin: a container namespace with `eth0` (a veth whose peer
//! stays in a throwaway node namespace) and a hand-made prevResult. Sysctls and interface
//! attributes after ADD, restored after DEL, the backup file byte for byte against the Go
//! plugin's, ADD by one implementation and DEL by the other, CHECK, a failed ADD undone, and
//! bad input refused before anything changes.

mod common;
use common::*;
use serde_json::{Value, json};

struct Box1 {
    node: NetNs,
    cont: NetNs,
    sb: Sandbox,
}

const ORIG_MAC: &str = "02:00:00:00:00:aa";

/// A container with `eth0` (MTU 1500, MAC 02:00:00:00:00:aa, txqueuelen 1000, promisc and
/// allmulti off); the applet links in the sandbox include `tuning`.
fn setup(tag: &str) -> Box1 {
    let sb = Sandbox::new(tag);
    let link = sb.bin.join("tuning");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), &link).unwrap();
    }
    let node = NetNs::create();
    let cont = NetNs::create();
    node.sh(&[
        "ip", "link", "add", "tn0", "type", "veth", "peer", "name", "eth0", "netns", &cont.name,
    ]);
    cont.sh(&[
        "ip", "link", "set", "eth0", "address", ORIG_MAC, "mtu", "1500",
    ]);
    cont.sh(&["ip", "link", "set", "eth0", "txqueuelen", "1000", "up"]);
    Box1 { node, cont, sb }
}

impl Box1 {
    fn env(&self, cid: &str) -> Env {
        Env {
            container_id: cid.into(),
            netns: self.cont.path(),
            ..Env::default()
        }
    }

    fn conf(&self, version: &str, keys: Value) -> Value {
        let mut c = json!({
            "cniVersion": version, "name": "tunenet", "type": "tuning",
            "dataDir": self.sb.path("tuning").display().to_string(),
            "prevResult": {"cniVersion": version,
                "interfaces": [{"name": "tn0"}, {"name": "eth0", "mac": ORIG_MAC, "sandbox": self.cont.path()}],
                "ips": [{"address": "10.91.0.2/24", "interface": 1}]},
        });
        for (k, v) in keys.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    /// `ip -d link show eth0` in the container.
    fn link(&self) -> String {
        self.cont.sh(&["ip", "-d", "link", "show", "eth0"])
    }

    fn sysctl(&self, path: &str) -> String {
        self.cont.sh(&["cat", path]).trim().to_string()
    }

    fn backup(&self, cid: &str) -> Option<String> {
        std::fs::read_to_string(self.sb.path(&format!("tuning/{cid}_eth0.json"))).ok()
    }
}

const RP_FILTER: &str = "/proc/sys/net/ipv4/conf/eth0/rp_filter";

/// Everything tuning can change, except `txQLen` (the Go v1.1.1 reference predates it).
fn keys_v111() -> Value {
    json!({"mac": "02:00:00:00:00:bb", "mtu": 1400, "promisc": true, "allmulti": true,
           "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}})
}

fn assert_tuned(b: &Box1) {
    let l = b.link();
    assert!(
        l.contains("02:00:00:00:00:bb") && l.contains("mtu 1400"),
        "{l}"
    );
    assert!(l.contains("PROMISC") && l.contains("ALLMULTI"), "{l}");
    assert_eq!(b.sysctl(RP_FILTER), "2");
}

fn assert_restored(b: &Box1) {
    let l = b.link();
    assert!(l.contains(ORIG_MAC) && l.contains("mtu 1500"), "{l}");
    assert!(!l.contains("PROMISC") && !l.contains("ALLMULTI"), "{l}");
}

#[test]
fn add_check_del() {
    if !require_root("tuning add_check_del") {
        return;
    }
    let b = setup("tuning-basic");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_rp = b.sysctl(RP_FILTER);
    let mut keys = keys_v111();
    keys["txQLen"] = json!(500);
    let c = b.conf("1.0.0", keys);
    let r = pl.add("tuning", &b.env("t1"), &c).ok().clone();
    // The result is the prevResult with the new MAC on eth0.
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:bb", "{r}");
    assert_eq!(r["interfaces"][0]["name"], "tn0", "{r}");
    assert_eq!(r["ips"][0]["address"], "10.91.0.2/24", "{r}");
    assert_tuned(&b);
    assert!(b.link().contains("qlen 500"), "{}", b.link());
    let saved: Value = serde_json::from_str(&b.backup("t1").expect("backup file")).unwrap();
    assert_eq!(
        saved,
        json!({"mac": ORIG_MAC, "promisc": false, "mtu": 1500, "allmulti": false, "txQLen": 1000})
    );

    let checked = with_prev(&c, &r);
    assert!(pl.check("tuning", &b.env("t1"), &checked).status_ok);
    // CHECK sees a change behind its back, naming what differs.
    b.cont.sh(&["ip", "link", "set", "eth0", "mtu", "1450"]);
    let msg = pl.check("tuning", &b.env("t1"), &checked).err(999);
    assert!(
        msg.contains("MTU") && msg.contains("1400") && msg.contains("1450"),
        "{msg}"
    );
    b.cont.sh(&["ip", "link", "set", "eth0", "mtu", "1400"]);
    b.cont.sh(&["sh", "-c", &format!("echo 1 > {RP_FILTER}")]);
    let msg = pl.check("tuning", &b.env("t1"), &checked).err(999);
    assert!(msg.contains(RP_FILTER), "{msg}");

    pl.del("tuning", &b.env("t1"), &c).ok();
    assert_restored(&b);
    assert!(b.link().contains("qlen 1000"), "{}", b.link());
    assert!(b.backup("t1").is_none(), "DEL leaves the backup");
    // Sysctls are not restored on DEL (upstream neither): the namespace goes with the
    // container. DEL twice is fine.
    assert_ne!(before_rp, "");
    pl.del("tuning", &b.env("t1"), &c).ok();
}

/// The backup file is upstream's, byte for byte, and either implementation's DEL restores the
/// other's ADD.
#[test]
fn compat_with_reference() {
    if !require_root("tuning compat_with_reference") || !reference_available("tuning") {
        return;
    }
    let c_ref = setup("tuning-ref");
    let c_ours = setup("tuning-ours");
    let theirs = c_ref.sb.plugin_in(Impl::Reference, &c_ref.node);
    let ours = c_ours.sb.plugin_in(Impl::Ours, &c_ours.node);
    let r_ref = theirs
        .add(
            "tuning",
            &c_ref.env("tc"),
            &c_ref.conf("1.0.0", keys_v111()),
        )
        .ok()
        .clone();
    let r_ours = ours
        .add(
            "tuning",
            &c_ours.env("tc"),
            &c_ours.conf("1.0.0", keys_v111()),
        )
        .ok()
        .clone();
    assert_tuned(&c_ref);
    assert_tuned(&c_ours);
    assert_eq!(c_ref.backup("tc").unwrap(), c_ours.backup("tc").unwrap());
    // Same result but for the sandbox paths.
    let strip = |mut v: Value| {
        v["interfaces"][1]["sandbox"] = Value::Null;
        normalize(&v)
    };
    assert_eq!(strip(r_ref), strip(r_ours));

    // Crossed DELs: ours undoes the reference's ADD and the reference undoes ours.
    let ours_on_ref = c_ref.sb.plugin_in(Impl::Ours, &c_ref.node);
    let link = c_ref.sb.bin.join("tuning");
    assert!(link.exists());
    ours_on_ref
        .del(
            "tuning",
            &c_ref.env("tc"),
            &c_ref.conf("1.0.0", keys_v111()),
        )
        .ok();
    assert_restored(&c_ref);
    assert!(c_ref.backup("tc").is_none());
    let theirs_on_ours = c_ours.sb.plugin_in(Impl::Reference, &c_ours.node);
    theirs_on_ours
        .del(
            "tuning",
            &c_ours.env("tc"),
            &c_ours.conf("1.0.0", keys_v111()),
        )
        .ok();
    assert_restored(&c_ours);
    assert!(c_ours.backup("tc").is_none());
}

/// A failed ADD puts back what it changed: here the MTU is more than a veth takes, after the
/// sysctl and the MAC were already set.
#[test]
fn failed_add_is_undone() {
    if !require_root("tuning failed_add_is_undone") {
        return;
    }
    let b = setup("tuning-undo");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_rp = b.sysctl(RP_FILTER);
    let c = b.conf(
        "1.0.0",
        json!({"mac": "02:00:00:00:00:bb", "mtu": 70000, "promisc": true,
               "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
    );
    let msg = pl.add("tuning", &b.env("tu"), &c).err(999);
    assert!(msg.contains("MTU") && msg.contains("70000"), "{msg}");
    assert_restored(&b);
    assert_eq!(
        b.sysctl(RP_FILTER),
        before_rp,
        "the sysctl was not restored"
    );
    assert!(b.backup("tu").is_none(), "a failed ADD leaves its backup");
}

/// Bad input is refused with code 7 naming the key, before anything changes.
#[test]
fn bad_input_changes_nothing() {
    if !require_root("tuning bad_input_changes_nothing") {
        return;
    }
    let b = setup("tuning-bad");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_link = b.link();
    let before_rp = b.sysctl(RP_FILTER);
    let cases: &[(Value, &str)] = &[
        (
            json!({"mac": "02:00:00:00:00", "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
            "mac",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", "kernel.panic": "1"}}),
            "kernel.panic",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", "vm.swappiness": "1"}}),
            "vm.swappiness",
        ),
        (json!({"mtu": -1}), "mtu"),
        (json!({"txQLen": -5}), "txQLen"),
        (json!({"dataDir": "relative/dir", "mtu": 1400}), "dataDir"),
        (
            json!({"args": {"cni": {"mac": "zz:00:00:00:00:00"}}}),
            "mac",
        ),
    ];
    for (keys, name) in cases {
        let out = pl.add("tuning", &b.env("tb"), &b.conf("1.0.0", keys.clone()));
        let msg = out.err(7);
        assert!(msg.contains(name), "{keys}: {msg}");
    }
    // A key given twice: JSON allows it, upstream refuses it.
    let text = b
        .conf(
            "1.0.0",
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
        )
        .to_string()
        .replace(
            r#""net.ipv4.conf.IFNAME.rp_filter":"2""#,
            r#""net.ipv4.conf.IFNAME.rp_filter":"2","net.ipv4.conf.IFNAME.rp_filter":"0""#,
        );
    assert!(text.contains(r#""2","net"#), "{text}");
    let out = pl.run("tuning", "ADD", &b.env("tb"), &text);
    assert!(out.err(7).contains("duplicated sysctl keys"), "{out:?}");
    // No prevResult.
    let mut c = b.conf("1.0.0", json!({"mtu": 1400}));
    c.as_object_mut().unwrap().remove("prevResult");
    assert!(
        pl.add("tuning", &b.env("tb"), &c)
            .err(7)
            .contains("prevResult")
    );
    assert_eq!(b.link(), before_link);
    assert_eq!(b.sysctl(RP_FILTER), before_rp);
    assert!(b.backup("tb").is_none());
}

/// CNI_ARGS `MAC` < `runtimeConfig.mac` < `args.cni.mac`, and DEL without a namespace or link
/// succeeds and drops the backup.
#[test]
fn mac_precedence_and_tolerant_del() {
    if !require_root("tuning mac_precedence_and_tolerant_del") {
        return;
    }
    let b = setup("tuning-mac");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let env = b
        .env("tm")
        .with_args("IgnoreUnknown=1;MAC=02:00:00:00:00:01");
    let r = pl
        .add("tuning", &env, &b.conf("1.0.0", json!({})))
        .ok()
        .clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:01", "{r}");
    pl.del("tuning", &env, &b.conf("1.0.0", json!({}))).ok();
    let c = b.conf(
        "1.0.0",
        json!({"runtimeConfig": {"mac": "02:00:00:00:00:02"}}),
    );
    let r = pl.add("tuning", &env, &c).ok().clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:02", "{r}");
    pl.del("tuning", &env, &c).ok();
    let c = b.conf(
        "1.0.0",
        json!({"runtimeConfig": {"mac": "02:00:00:00:00:02"},
               "args": {"cni": {"mac": "02:00:00:00:00:03"}}}),
    );
    let r = pl.add("tuning", &env, &c).ok().clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:03", "{r}");
    assert!(b.link().contains("02:00:00:00:00:03"));
    // The container goes away before DEL: success, and no backup left behind.
    assert!(b.backup("tm").is_some());
    let gone = b.env("tm").with_netns("/run/netns/cnibox-no-such-ns");
    pl.del("tuning", &gone, &c).ok();
    assert!(b.backup("tm").is_none());
}
