//! host-local exec'd through symlinks against temporary data directories: every verb, requested
//! addresses, concurrency, exhaustion and STATUS, GC, malformed input leaving the disk untouched,
//! and compatibility with the reference plugin on the same store.

mod common;
use common::env::env_id;
use common::family::{FAMILIES, Fam, assert_result_family, reservations, result_ips};
use common::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

fn conf(sb: &Sandbox, version: &str, ipam: Value) -> Value {
    let mut c = json!({"cniVersion": version, "name": "hlnet", "type": "bridge",
        "ipam": {"type": "host-local", "dataDir": sb.path("data").display().to_string()}});
    for (k, v) in ipam.as_object().unwrap() {
        c["ipam"][k] = v.clone();
    }
    c
}

fn id(cid: &str) -> Env {
    env_id(cid)
}

/// File name → content of the network directory (what upstream keeps on disk).
/// The store's files and contents. The directory must exist: a check on a store that was
/// never written would otherwise pass on an empty map.
#[track_caller]
fn store(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("store {}: {e}", dir.display()))
        .flatten()
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

fn addr(r: &Value, i: usize) -> String {
    r["ips"][i]["address"].as_str().unwrap().to_string()
}

#[test]
fn add_check_del_in_every_version() {
    let sb = Sandbox::new("hl-verbs");
    let p = sb.ours();
    for v in ALL_VERSIONS {
        let c = conf(
            &sb,
            v,
            json!({"ranges": [[{"subnet": "10.1.0.0/24"}], [{"subnet": "fd01::/64"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}),
        );
        let e = id(&format!("c{}", v.replace('.', "")));
        let r = p.add("host-local", &e, &c).ok().clone();
        if v.starts_with("0.1") || v.starts_with("0.2") {
            assert!(
                r["ip4"]["ip"].as_str().unwrap().starts_with("10.1.0."),
                "{r}"
            );
            assert_eq!(r["ip4"]["routes"][0]["dst"], "0.0.0.0/0");
            assert!(r["ip6"]["ip"].as_str().unwrap().starts_with("fd01::"));
        } else {
            assert_eq!(r["ips"][0]["gateway"], "10.1.0.1");
            assert_eq!(r["ips"][1]["gateway"], "fd01::1");
            assert_eq!(r["ips"][0].get("version").is_some(), v.starts_with("0."));
        }
        if *v >= "0.4.0" {
            p.check("host-local", &e, &c).ok();
        }
        p.del("host-local", &e, &c).ok();
        p.del("host-local", &e, &c).ok();
        if *v >= "0.4.0" {
            assert!(
                p.check("host-local", &e, &c)
                    .err(999)
                    .contains("Failed to find address")
            );
        }
    }
    let files = store(&sb.path("data/hlnet"));
    assert!(
        files
            .keys()
            .all(|k| k == "lock" || k.starts_with("last_reserved_ip.")),
        "{files:?}"
    );
}

#[test]
fn legacy_keys_requested_ips_and_resolv_conf() {
    let sb = Sandbox::new("hl-inputs");
    let p = sb.ours();
    std::fs::write(
        sb.path("resolv.conf"),
        "# c\nnameserver 10.0.0.53\nsearch a.example b.example\noptions ndots:2\ndomain example\n",
    )
    .unwrap();
    let c = conf(
        &sb,
        "1.0.0",
        json!({"subnet": "10.2.0.0/24", "rangeStart": "10.2.0.10", "rangeEnd": "10.2.0.20",
        "gateway": "10.2.0.254", "resolvConf": sb.path("resolv.conf").display().to_string()}),
    );
    let r = p.add("host-local", &id("a"), &c).ok().clone();
    assert_eq!(addr(&r, 0), "10.2.0.10/24");
    assert_eq!(r["ips"][0]["gateway"], "10.2.0.254");
    assert_eq!(
        r["dns"],
        json!({"nameservers": ["10.0.0.53"], "domain": "example",
        "search": ["a.example", "b.example"], "options": ["ndots:2"]})
    );
    // CNI_ARGS IP (other keys need IgnoreUnknown), args.cni.ips, runtimeConfig.ips.
    let r = p
        .add(
            "host-local",
            &id("b").with_args("IgnoreUnknown=1;K8S_POD_NAME=x;IP=10.2.0.15"),
            &c,
        )
        .ok()
        .clone();
    assert_eq!(addr(&r, 0), "10.2.0.15/24");
    p.add(
        "host-local",
        &id("b2").with_args("K8S_POD_NAME=x;IP=10.2.0.16"),
        &c,
    )
    .err(4);
    let mut c2 = c.clone();
    c2["args"] = json!({"cni": {"ips": ["10.2.0.17"]}});
    assert_eq!(
        addr(p.add("host-local", &id("c"), &c2).ok(), 0),
        "10.2.0.17/24"
    );
    let mut c3 = c.clone();
    c3["runtimeConfig"] = json!({"ips": ["10.2.0.18/24"]});
    assert_eq!(
        addr(p.add("host-local", &id("d"), &c3).ok(), 0),
        "10.2.0.18/24"
    );
    // The gateway, a taken address, or one outside every range: error and nothing kept.
    let before = store(&sb.path("data/hlnet"));
    c3["runtimeConfig"] = json!({"ips": ["10.2.0.254"]});
    assert!(
        p.add("host-local", &id("e"), &c3)
            .err(7)
            .contains("failed to allocate all requested IPs: 10.2.0.254")
    );
    let mut gw = conf(&sb, "1.0.0", json!({"subnet": "10.2.1.0/24"}));
    gw["runtimeConfig"] = json!({"ips": ["10.2.1.1"]});
    assert!(
        p.add("host-local", &id("e"), &gw)
            .err(7)
            .contains("requested ip 10.2.1.1 is subnet's gateway")
    );
    c3["runtimeConfig"] = json!({"ips": ["10.2.0.18"]});
    p.add("host-local", &id("e"), &c3).err(999);
    c3["runtimeConfig"] = json!({"ips": ["10.9.9.9"]});
    assert!(
        p.add("host-local", &id("e"), &c3)
            .err(7)
            .contains("10.9.9.9")
    );
    let after = store(&sb.path("data/hlnet"));
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    // runtimeConfig.ipRanges is prepended to the ranges.
    let mut c4 = conf(
        &sb,
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.3.0.0/24"}]]}),
    );
    c4["runtimeConfig"] = json!({"ipRanges": [[{"subnet": "10.4.0.0/24"}]]});
    let r = p.add("host-local", &id("f"), &c4).ok().clone();
    assert_eq!(
        (addr(&r, 0).as_str(), addr(&r, 1).as_str()),
        ("10.4.0.2/24", "10.3.0.2/24")
    );
    // A second ADD of the same attachment is refused; another ifname is fine.
    assert!(
        p.add("host-local", &id("f"), &c4)
            .err(999)
            .contains("duplicate allocation is not allowed")
    );
    p.add(
        "host-local",
        &Env {
            ifname: "net1".into(),
            ..id("f")
        },
        &c4,
    )
    .ok();
}

#[test]
fn fifty_concurrent_adds_get_distinct_addresses() {
    let sb = Sandbox::new("hl-concurrent");
    let c = conf(&sb, "1.0.0", json!({"subnet": "10.5.0.0/24"}));
    let results: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..50)
            .map(|i| {
                let (sb, c) = (&sb, &c);
                s.spawn(move || {
                    addr(
                        sb.ours().add("host-local", &id(&format!("c{i}")), c).ok(),
                        0,
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().collect::<HashSet<_>>().len(), 50);
    let files = store(&sb.path("data/hlnet"));
    let owners: HashSet<&String> = files
        .iter()
        .filter(|(k, _)| k.starts_with("10."))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        owners.len(),
        50,
        "50 reservation files with distinct owners"
    );
    assert!(
        owners
            .iter()
            .all(|o| o.starts_with('c') && o.ends_with("\r\neth0"))
    );
    for i in 0..50 {
        sb.ours().del("host-local", &id(&format!("c{i}")), &c).ok();
    }
    assert!(
        store(&sb.path("data/hlnet"))
            .keys()
            .all(|k| !k.starts_with("10."))
    );
}

#[test]
fn exhaustion_status_and_gc() {
    let sb = Sandbox::new("hl-gc");
    let p = sb.ours();
    let c = conf(&sb, "1.1.0", json!({"subnet": "10.6.0.0/29"})); // .2 … .6 allocatable
    p.status("host-local", &c).ok();
    for i in 0..5 {
        p.add("host-local", &id(&format!("c{i}")), &c).ok();
    }
    let msg = p.add("host-local", &id("c5"), &c).err(999);
    assert!(
        msg.contains("no IP addresses available in range set: 10.6.0.1-10.6.0.6"),
        "{msg}"
    );
    // Full, but no GC has vouched for these reservations (they may have leaked): STATUS
    // passes, so a containerd node is not marked NotReady over leaks; stderr says why.
    let out = p.status("host-local", &c);
    out.ok();
    assert!(
        out.stderr
            .contains("no IP addresses available in range set 0")
            && out.stderr.contains("no GC has confirmed"),
        "{out:?}"
    );
    // A GC that keeps all five (the runtime says every one is in use): now the range is
    // really exhausted, and STATUS says so. The reservations are dated a second back so the
    // GC is after them whatever the filesystem clock's granularity.
    let dir = sb.path("data/hlnet");
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(1);
    for k in store(&dir).keys().filter(|k| k.starts_with("10.")) {
        let f = std::fs::File::options()
            .write(true)
            .open(dir.join(k))
            .unwrap();
        f.set_modified(past).unwrap();
    }
    let mut all = c.clone();
    all["cni.dev/valid-attachments"] = json!(
        (0..5)
            .map(|i| json!({"containerID": format!("c{i}"), "ifname": "eth0"}))
            .collect::<Vec<_>>()
    );
    p.gc("host-local", &all).ok();
    assert_eq!(
        store(&dir).keys().filter(|k| k.starts_with("10.")).count(),
        5
    );
    let msg = p.status("host-local", &c).err(50);
    assert!(
        msg.contains("no IP addresses available in range set 0: 10.6.0.1-10.6.0.6")
            && msg.contains("confirmed in use by the last GC"),
        "{msg}"
    );
    p.del("host-local", &id("c0"), &c).ok();
    p.status("host-local", &c).ok();
    // Full again, by an ADD after the GC: not confirmed, STATUS passes.
    p.add("host-local", &id("c5"), &c).ok();
    p.status("host-local", &c).ok();

    std::fs::write(dir.join("10.6.0.20"), "legacy-keep").unwrap();
    std::fs::write(dir.join("10.6.0.21"), "legacy-drop").unwrap();
    std::fs::write(dir.join("10.6.0.22"), "").unwrap();
    let mut gc = c.clone();
    // No list: nothing is collected.
    p.gc("host-local", &gc).ok();
    assert_eq!(store(&dir).len(), 5 + 3 + 2);
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "c1", "ifname": "eth0"},
        {"containerID": "c5", "ifname": "eth0"}, {"containerID": "legacy-keep", "ifname": "eth0"}]);
    p.gc("host-local", &gc).ok();
    let left: BTreeMap<String, String> = store(&dir);
    let owners: HashSet<&str> = left
        .values()
        .map(|v| v.split("\r\n").next().unwrap())
        .collect();
    assert!(
        owners.contains("c1") && owners.contains("c5") && owners.contains("legacy-keep"),
        "{left:?}"
    );
    assert!(
        !owners.contains("c2")
            && !owners.contains("legacy-drop")
            && !left.contains_key("10.6.0.22"),
        "{left:?}"
    );
    assert!(left.contains_key("lock") && left.contains_key("last_reserved_ip.0"));
    gc["cni.dev/valid-attachments"] = json!([]);
    p.gc("host-local", &gc).ok();
    assert!(store(&dir).keys().all(|k| !k.starts_with("10.")));
    // GC is a 1.1.0 verb.
    p.gc(
        "host-local",
        &conf(&sb, "1.0.0", json!({"subnet": "10.6.0.0/29"})),
    )
    .err(1);
}

#[test]
fn malformed_input_changes_nothing_on_disk() {
    let sb = Sandbox::new("hl-bad");
    let p = sb.ours();
    let data = sb.path("data");
    let e = id("x");
    assert_eq!(p.run("host-local", "ADD", &e, "{not json").code, Some(1));
    p.run("host-local", "ADD", &e, "{not json").err(6);
    let cases: Vec<(Value, u64)> = vec![
        (
            json!({"cniVersion": "1.0.0", "name": "hlnet", "type": "bridge"}),
            7,
        ),
        (
            json!({"cniVersion": "1.0.0", "name": "../x", "type": "bridge", "ipam": {"subnet": "10.7.0.0/24", "dataDir": data}}),
            7,
        ),
        (conf(&sb, "1.0.0", json!({"subnet": "10.7.0.1/24"})), 7),
        (conf(&sb, "1.0.0", json!({"subnet": "10.7.0.0/31"})), 7),
        (
            conf(
                &sb,
                "1.0.0",
                json!({"ranges": [[{"subnet": "10.7.0.0/24"}], [{"subnet": "10.7.0.0/25"}]]}),
            ),
            7,
        ),
        (
            conf(
                &sb,
                "0.2.0",
                json!({"ranges": [[{"subnet": "10.7.0.0/24"}], [{"subnet": "10.8.0.0/24"}]]}),
            ),
            7,
        ),
        (conf(&sb, "9.9.9", json!({"subnet": "10.7.0.0/24"})), 1),
    ];
    for (c, code) in cases {
        let msg = p.add("host-local", &e, &c).err(code);
        assert!(!msg.is_empty());
    }
    p.add(
        "host-local",
        &e.clone().with_args("FOO=1"),
        &conf(&sb, "1.0.0", json!({"subnet": "10.7.0.0/24"})),
    )
    .err(4);
    p.add(
        "host-local",
        &Env {
            container_id: "-bad".into(),
            ..e.clone()
        },
        &conf(&sb, "1.0.0", json!({"subnet": "10.7.0.0/24"})),
    )
    .err(4);
    assert!(!data.exists(), "nothing written for rejected requests");
}

/// Same config on two fresh stores: identical output and files; then each side releases what
/// the other reserved, and round-robin continues across implementations.
#[test]
fn compatible_with_reference_store() {
    compatible_with_store_of(Impl::Reference);
}

/// The same with v1.1.1's host-local (a node of 2022 switching to cnibox and back).
#[test]
fn compatible_with_older_reference_store() {
    compatible_with_store_of(Impl::OlderReference);
}

fn compatible_with_store_of(go: Impl) {
    if !impl_available(go, "host-local") {
        return;
    }
    let sb = Sandbox::new(&format!("hl-ref-{}", go.label()));
    let ranges = json!({"ranges": [[{"subnet": "10.9.0.0/24"}], [{"subnet": "fd09::/64"}]], "routes": [{"dst": "0.0.0.0/0"}]});
    let mut outs = Vec::new();
    for (imp, dir) in [(Impl::Ours, "ours"), (go, "ref")] {
        let mut c = conf(&sb, "0.4.0", ranges.clone());
        c["ipam"]["dataDir"] = json!(sb.path(dir).display().to_string());
        let p = sb.plugin(imp);
        let mut texts = Vec::new();
        for cid in ["a", "b", "c"] {
            let out = p.add("host-local", &id(cid), &c);
            out.ok();
            texts.push(out.stdout.clone());
        }
        p.del("host-local", &id("b"), &c).ok();
        let out = p.add("host-local", &id("d"), &c);
        out.ok();
        texts.push(out.stdout.clone());
        outs.push((texts, store(&sb.path(&format!("{dir}/hlnet")))));
    }
    assert_eq!(outs[0].0, outs[1].0, "result text, ours vs reference");
    assert_eq!(
        outs[0].1, outs[1].1,
        "store files and contents, ours vs reference"
    );

    // Mixed operation on one store.
    let c = conf(&sb, "0.4.0", ranges);
    let (ours, theirs) = (sb.ours(), sb.plugin(go));
    let r1 = theirs.add("host-local", &id("m1"), &c).ok().clone();
    ours.check("host-local", &id("m1"), &c).ok();
    let r2 = ours.add("host-local", &id("m2"), &c).ok().clone();
    assert_ne!(addr(&r1, 0), addr(&r2, 0));
    assert_eq!(
        addr(&r2, 0),
        "10.9.0.3/24",
        "round-robin continues after the reference's reservation"
    );
    ours.del("host-local", &id("m1"), &c).ok();
    theirs.del("host-local", &id("m2"), &c).ok();
    let left = store(&sb.path("data/hlnet"));
    assert!(
        left.keys()
            .all(|k| !k.starts_with("10.") && !k.starts_with("fd09")),
        "{left:?}"
    );
    let r3 = ours.add("host-local", &id("m3"), &c).ok().clone();
    assert_eq!(addr(&r3, 0), "10.9.0.4/24");
}

/// Ranges that would hand out addresses outside the subnet, or its network address, are
/// config errors naming the range, and nothing is written.
#[test]
fn ranges_outside_the_subnet_are_refused() {
    let sb = Sandbox::new("hl-badrange");
    for (range, needle) in [
        (
            json!({"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.255"}),
            "rangeStart 10.0.0.255 is the broadcast address",
        ),
        (
            json!({"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.0"}),
            "rangeStart 10.0.0.0 is the network address",
        ),
        (
            json!({"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.9", "rangeEnd": "10.0.0.5"}),
            "rangeStart 10.0.0.9 is after rangeEnd 10.0.0.5",
        ),
        (
            json!({"subnet": "10.0.0.0/24", "rangeEnd": "10.0.0.0"}),
            "rangeEnd 10.0.0.0 is the network address",
        ),
    ] {
        let c = conf(&sb, "1.0.0", json!({"ranges": [[range]]}));
        let msg = sb.ours().add("host-local", &id("bad"), &c).err(7);
        assert!(msg.contains("range set 0") && msg.contains(needle), "{msg}");
        // Refused at load: the store is not even created.
        assert!(
            !sb.path("data/hlnet").exists(),
            "a refused config created the store"
        );
    }
    // rangeEnd at the broadcast address is accepted (as upstream), but never handed out.
    let c = conf(
        &sb,
        "1.0.0",
        json!({"ranges": [[{"subnet": "10.0.0.0/30", "rangeEnd": "10.0.0.3"}]]}),
    );
    let r = sb.ours().add("host-local", &id("b1"), &c).ok().clone();
    assert_eq!(addr(&r, 0), "10.0.0.2/30");
    let out = sb.ours().add("host-local", &id("b2"), &c);
    assert!(
        out.err_code().is_some() && !out.stdout.contains("10.0.0.3"),
        "{out:?}"
    );
}

/// CONVENTIONS.md: `args.cni.ips` wins over CNI_ARGS `IP` when both are given.
#[test]
fn args_ips_win_over_cni_args_ip() {
    let sb = Sandbox::new("hl-args");
    let mut c = conf(&sb, "1.0.0", json!({"subnet": "10.3.0.0/24"}));
    c["args"] = json!({"cni": {"ips": ["10.3.0.20"]}});
    let env = id("a1").with_args("IP=10.3.0.30");
    let r = sb.ours().add("host-local", &env, &c).ok().clone();
    assert_eq!(r["ips"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(addr(&r, 0), "10.3.0.20/24");
    // Without args.cni.ips, CNI_ARGS IP is used.
    let c2 = conf(&sb, "1.0.0", json!({"subnet": "10.3.0.0/24"}));
    let r = sb
        .ours()
        .add("host-local", &id("a2").with_args("IP=10.3.0.30"), &c2)
        .ok()
        .clone();
    assert_eq!(addr(&r, 0), "10.3.0.30/24");
}

/// Issue 11 items 4 and 5 with the real Go plugin changing the store between cnibox's
/// operations: whatever it adds or deletes, and whatever an admin removes, cnibox's DEL
/// releases exactly the attachment's reservations and CHECK reports exactly what exists.
#[test]
fn owner_index_stays_right_when_go_and_admins_change_the_store() {
    if !reference_available("host-local") {
        return;
    }
    let sb = Sandbox::new("hl-stale");
    let (ours, go) = (sb.ours(), sb.reference());
    let c = conf(&sb, "0.4.0", json!({"subnet": "10.12.0.0/24"}));
    let dir = sb.path("data/hlnet");
    let holders = || -> BTreeMap<String, String> {
        store(&dir)
            .into_iter()
            .filter(|(k, _)| k.parse::<std::net::IpAddr>().is_ok())
            .map(|(k, v)| (k, v.split("\r\n").next().unwrap().to_string()))
            .collect()
    };
    let held_by = |cid: &str| -> Vec<String> {
        holders()
            .into_iter()
            .filter(|(_, o)| o == cid)
            .map(|(ip, _)| ip)
            .collect()
    };
    let ip_of = |r: &Value| addr(r, 0).split('/').next().unwrap().to_string();

    let a = ip_of(ours.add("host-local", &id("a"), &c).ok());
    ours.add("host-local", &id("b"), &c).ok();
    // Go releases a's address and hands it to d; then gives a a new one.
    go.del("host-local", &id("a"), &c).ok();
    go.add("host-local", &id("d").with_args(&format!("IP={a}")), &c)
        .ok();
    let a2 = ip_of(go.add("host-local", &id("a"), &c).ok());
    assert_ne!(a, a2);
    // cnibox's index still says a holds `a`: DEL must release a2, not d's address.
    ours.del("host-local", &id("a"), &c).ok();
    assert!(held_by("a").is_empty(), "{:?}", holders());
    assert_eq!(held_by("d"), [a], "d's reservation kept");
    assert_eq!(held_by("b").len(), 1, "b's reservation kept");
    // Reservations only Go wrote are found by CHECK and released by DEL.
    ours.check("host-local", &id("d"), &c).ok();
    ours.del("host-local", &id("d"), &c).ok();
    assert!(held_by("d").is_empty());
    // An admin removes b's reservation: DEL succeeds and releases nothing else.
    let e = ip_of(ours.add("host-local", &id("e"), &c).ok());
    let b = held_by("b").pop().unwrap();
    std::fs::remove_file(dir.join(&b)).unwrap();
    ours.check("host-local", &id("b"), &c).err(999);
    ours.del("host-local", &id("b"), &c).ok();
    assert_eq!(held_by("e"), std::slice::from_ref(&e));
    // An admin removes cnibox's whole index, or one entry, or garbles one.
    let index = sb.path("data/.cnibox/hlnet");
    std::fs::remove_dir_all(&index).unwrap();
    ours.check("host-local", &id("e"), &c).ok();
    ours.add("host-local", &id("f"), &c).ok();
    let entry = |prefix: &str| {
        std::fs::read_dir(&index)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(prefix))
            .unwrap()
            .path()
    };
    // Garbled in place (the directory times do not change): the checksum catches it.
    std::fs::write(entry("f:"), "owner f:eth0\n10.12.0.200\n").unwrap();
    ours.check("host-local", &id("f"), &c).ok();
    ours.del("host-local", &id("f"), &c).ok();
    assert!(held_by("f").is_empty(), "{:?}", holders());
    assert_eq!(held_by("e"), std::slice::from_ref(&e));
    // One entry removed.
    std::fs::remove_file(entry("e:")).unwrap();
    ours.check("host-local", &id("e"), &c).ok();
    ours.del("host-local", &id("e"), &c).ok();
    assert!(held_by("e").is_empty(), "{:?}", holders());
    // A reservation rewritten in place for another owner: the old owner's DEL must not take
    // it, and from then on the new owner's DEL finds it.
    let g = ip_of(ours.add("host-local", &id("g"), &c).ok());
    let keep = ip_of(ours.add("host-local", &id("k"), &c).ok());
    std::fs::write(dir.join(&g), "z\r\neth0").unwrap();
    ours.del("host-local", &id("g"), &c).ok();
    assert_eq!(held_by("z"), [g], "{:?}", holders());
    ours.del("host-local", &id("z"), &c).ok();
    assert!(held_by("z").is_empty(), "{:?}", holders());
    assert_eq!(held_by("k"), [keep]);
    ours.del("host-local", &id("k"), &c).ok();
    // Issue 11 item 4: Go writes an owner longer than a file name; the network keeps working.
    let long = id(&"g".repeat(300));
    go.add("host-local", &long, &c).ok();
    ours.add("host-local", &id("h"), &c).ok();
    ours.check("host-local", &long, &c).ok();
    ours.del("host-local", &long, &c).ok();
    ours.del("host-local", &id("h"), &c).ok();
    assert!(holders().is_empty(), "{:?}", holders());
    // Go's own DEL still finds what cnibox reserves, and the reverse.
    ours.add("host-local", &id("i"), &c).ok();
    go.del("host-local", &id("i"), &c).ok();
    assert!(holders().is_empty());
    ours.check("host-local", &id("i"), &c).err(999);
}

/// dataDir must be an absolute path: a relative one would be created wherever the runtime runs.
#[test]
fn relative_data_dir_is_refused() {
    let sb = Sandbox::new("hl-reldir");
    for dir in ["relative/dir", "'; rm -rf /", "/tmp/a\nb"] {
        let c = conf(
            &sb,
            "1.0.0",
            json!({"subnet": "10.4.0.0/24", "dataDir": dir}),
        );
        let msg = sb.ours().add("host-local", &id("r1"), &c).err(7);
        assert!(msg.contains("ipam.dataDir"), "{msg}");
    }
}

/// `ranges` for `fam` with lab number `n`, each range set's first range given `gateway(set
/// index, is_v4)` when it returns one.
fn ranges_with_gateways(fam: Fam, n: u8, gateway: impl Fn(usize, bool) -> Option<String>) -> Value {
    let mut sets = fam.ranges(n);
    for (i, set) in sets.as_array_mut().unwrap().iter_mut().enumerate() {
        let v4 = set[0]["subnet"].as_str().unwrap().contains('.');
        if let Some(g) = gateway(i, v4) {
            set[0]["gateway"] = json!(g);
        }
    }
    sets
}

/// A range whose gateway is of the other family is refused at load (code 7 naming the range
/// set and the subnet), in `ranges` and in `runtimeConfig.ipRanges`, before the store exists
/// (issue 24, item 6: ptp panicked on such a result). The same ranges with gateways of their
/// own family work.
#[test]
fn gateway_of_the_other_family_is_refused() {
    for fam in FAMILIES {
        let sb = Sandbox::new(&format!("hl-gwfam-{}", fam.tag()));
        let p = sb.ours();
        let n = lab::unique_n();
        let data = sb.path("data");
        let other = |v4: bool| {
            if v4 {
                format!("fd00:{n}::1")
            } else {
                format!("10.{n}.0.1")
            }
        };
        for bad_set in 0..fam.addr_count() {
            let ranges = ranges_with_gateways(fam, n, |i, v4| (i == bad_set).then(|| other(v4)));
            let subnet = ranges[bad_set][0]["subnet"].as_str().unwrap().to_string();
            let msg = p
                .add(
                    "host-local",
                    &id("gw"),
                    &conf(&sb, "1.0.0", json!({"ranges": ranges})),
                )
                .err(7);
            assert!(
                msg.contains(&format!("range set {bad_set}"))
                    && msg.contains(&subnet)
                    && msg.contains("gateway"),
                "{}: {msg}",
                fam.tag()
            );
            // The same ranges from the runtime.
            let mut c = conf(&sb, "1.0.0", json!({}));
            c["runtimeConfig"] = json!({"ipRanges": ranges});
            let msg = p.add("host-local", &id("gw"), &c).err(7);
            assert!(msg.contains(&subnet), "{}: {msg}", fam.tag());
        }
        assert!(
            !data.exists(),
            "{}: a refused ADD made the store",
            fam.tag()
        );
        let own = |v4: bool| {
            if v4 {
                format!("10.{n}.0.9")
            } else {
                format!("fd00:{n}::9")
            }
        };
        let c = conf(
            &sb,
            "1.0.0",
            json!({"ranges": ranges_with_gateways(fam, n, |_, v4| Some(own(v4)))}),
        );
        let r = p.add("host-local", &id("gw"), &c).ok().clone();
        assert_result_family(&r, fam);
        for ip in r["ips"].as_array().unwrap() {
            let a = ip["address"].as_str().unwrap();
            let gw = ip["gateway"].as_str().unwrap();
            assert_eq!(a.contains('.'), gw.contains('.'), "{r}");
            assert_eq!(gw, own(a.contains('.')), "{r}");
        }
        assert_eq!(reservations(&data.join("hlnet")), fam.addr_count());
        p.del("host-local", &id("gw"), &c).ok();
        assert_eq!(reservations(&data.join("hlnet")), 0);
    }
}

/// An address outside every range in `ipam.ranges`: refused with code 7 naming it, and the
/// store is left exactly as it was, `last_reserved_ip.N` included (issue 24, item 11: the
/// other range sets were allocated first and moved it).
#[test]
fn requested_ip_in_no_range_leaves_the_store_as_it_was() {
    for fam in FAMILIES {
        let sb = Sandbox::new(&format!("hl-outside-{}", fam.tag()));
        let p = sb.ours();
        let n = lab::unique_n();
        let c = conf(&sb, "1.0.0", json!({"ranges": fam.ranges(n)}));
        // A first container makes the store and its last_reserved_ip files.
        let r = p.add("host-local", &id("first"), &c).ok().clone();
        assert_result_family(&r, fam);
        let dir = sb.path("data/hlnet");
        let before = store(&dir);
        assert_eq!(
            before
                .keys()
                .filter(|k| k.starts_with("last_reserved_ip."))
                .count(),
            fam.addr_count(),
            "{before:?}"
        );
        // Outside the last range set's subnet (10.n.1.x / fd00:n:1::x), the others free.
        let outside = if fam.has_v6() {
            format!("fd00:{n}:1::5")
        } else {
            format!("10.{n}.1.5")
        };
        let mut bad = c.clone();
        bad["args"] = json!({"cni": {"ips": [outside]}});
        let msg = p.add("host-local", &id("second"), &bad).err(7);
        assert!(msg.contains(&outside), "{}: {msg}", fam.tag());
        assert_eq!(store(&dir), before, "{}: the store changed", fam.tag());
        // The next ADD continues where the first left off.
        let r2 = p.add("host-local", &id("second"), &c).ok().clone();
        for (a, b) in result_ips(&r).iter().zip(result_ips(&r2)) {
            assert_eq!(
                ipam_next(*a),
                b,
                "{}: allocation did not continue after {a}",
                fam.tag()
            );
        }
    }
}

/// A later range set that fails (its requested address is taken) undoes the earlier sets'
/// reservations and their `last_reserved_ip.N`: the store is as before.
#[test]
fn failed_later_range_set_leaves_the_store_as_it_was() {
    for fam in FAMILIES {
        let sb = Sandbox::new(&format!("hl-laterset-{}", fam.tag()));
        let p = sb.ours();
        let n = lab::unique_n();
        let mut ranges = fam.ranges(n);
        // Two range sets in every family: a second subnet of the same family for V4 and V6.
        match fam {
            Fam::V4 => ranges
                .as_array_mut()
                .unwrap()
                .push(json!([{"subnet": format!("10.{n}.1.0/24")}])),
            Fam::V6 => ranges
                .as_array_mut()
                .unwrap()
                .push(json!([{"subnet": format!("fd00:{n}:1::/64")}])),
            Fam::Dual => {}
        }
        let c = conf(&sb, "1.0.0", json!({"ranges": ranges}));
        let first = p.add("host-local", &id("first"), &c).ok().clone();
        let taken = result_ips(&first)[1].to_string();
        let dir = sb.path("data/hlnet");
        let before = store(&dir);
        let mut bad = c.clone();
        bad["args"] = json!({"cni": {"ips": [taken]}});
        let msg = p.add("host-local", &id("second"), &bad).err(999);
        assert!(msg.contains(&taken), "{}: {msg}", fam.tag());
        assert_eq!(store(&dir), before, "{}: the store changed", fam.tag());
    }
}

/// The address after `a` (the next one round-robin allocation hands out in a fresh /24 or /64).
fn ipam_next(a: std::net::IpAddr) -> std::net::IpAddr {
    match a {
        std::net::IpAddr::V4(v) => std::net::Ipv4Addr::from(u32::from(v) + 1).into(),
        std::net::IpAddr::V6(v) => std::net::Ipv6Addr::from(u128::from(v) + 1).into(),
    }
}

/// `ipam.dataDir` that is a file, or has one in its path, is a config error (code 7 naming
/// the key) and nothing is written; one the host cannot create is code 5; DEL succeeds.
#[test]
fn data_dir_that_is_a_file() {
    let sb = Sandbox::new("hl-datafile");
    let p = sb.ours();
    let file = sb.path("afile");
    std::fs::write(&file, "x").unwrap();
    let n = lab::unique_n();
    for dir in [file.clone(), file.join("sub")] {
        let c = conf(
            &sb,
            "1.0.0",
            json!({"ranges": Fam::V4.ranges(n), "dataDir": dir}),
        );
        let msg = p.add("host-local", &id("f"), &c).err(7);
        assert!(
            msg.contains("ipam.dataDir") && msg.contains("not a directory"),
            "{msg}"
        );
        p.del("host-local", &id("f"), &c).ok();
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    // sysfs takes no new directories, even from root: the host's failure, code 5.
    let c = conf(
        &sb,
        "1.0.0",
        json!({"ranges": Fam::V4.ranges(n), "dataDir": "/sys/cnibox-no-such-dir"}),
    );
    let msg = p.add("host-local", &id("f"), &c).err(5);
    assert!(msg.contains("/sys/cnibox-no-such-dir"), "{msg}");
}

/// `ipam.type: cnibox` (the binary itself, not an applet) is a config error naming the key;
/// exec'd it printed its usage text, read as "failed with no error message" (issue 24, item 10).
#[test]
fn ipam_type_naming_the_cnibox_binary() {
    let sb = Sandbox::new("hl-ipam-cnibox");
    sb.link("cnibox");
    for applet in ["macvlan", "ptp", "host-device", "bridge"] {
        let c = json!({"cniVersion": "1.1.0", "name": "hlnet", "type": applet,
                       "master": "eth0", "device": "eth0", "ipam": {"type": "cnibox"}});
        let msg = sb.ours().status(applet, &c).err(7);
        assert!(
            msg.contains("ipam.type") && msg.contains("cnibox") && msg.contains("host-local"),
            "{applet}: {msg}"
        );
    }
}
