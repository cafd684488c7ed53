//! tests/cnitool.rs, continued: the error paths (a plugin failing mid-chain, a missing plugin,
//! a corrupt cache file) against libcni, and GC and STATUS, which Debian's libcni lacks.

use super::recorded_list;
use super::support::{Tool, World, message, records};
use crate::common::family::{Fam, reservations};
use crate::common::lab::unique_n;
use crate::common::*;
use serde_json::json;

/// A missing plugin and a plugin failing in the middle of ADD: the plugins before it keep
/// what they did (libcni does not undo; the runtime's DEL does), nothing is cached, the error
/// names the plugin; the other tool's DEL cleans up.
#[test]
fn failing_plugins_as_libcni() {
    if !require_root("cnitool failing_plugins_as_libcni") {
        return;
    }
    let Some(w) = World::new("failing") else {
        return;
    };
    let n = unique_n();
    let data = w.sb.path("ipam");
    let net = format!("cf{n}");
    let bridge = json!({"type": "bridge", "bridge": format!("cfbr{n}"),
        "ipam": Fam::Dual.host_local(n, &data)});
    w.write(
        "10-f.conflist",
        &json!({"cniVersion": "1.0.0", "name": net, "plugins": [
        bridge, {"type": "rec-b", "fail": "ADD"}]}),
    );
    w.write(
        "20-m.conflist",
        &json!({"cniVersion": "1.0.0", "name": "missing", "plugins": [
        {"type": "rec-a"}, {"type": "no-such"}]}),
    );
    let mut msgs = Vec::new();
    for (tool, other) in [(Tool::Libcni, Tool::Cnibox), (Tool::Cnibox, Tool::Libcni)] {
        let pod = NetNs::create();
        let out = w.run(tool, "add", &net, &pod.path(), &[]);
        assert_eq!(out.json["code"], 11, "{tool:?}: {out:?}");
        msgs.push(message(&out));
        assert!(w.cache_files().is_empty(), "{tool:?} cached a failed ADD");
        assert_eq!(
            reservations(&data.join(&net)),
            2,
            "{tool:?}: bridge's ADD was kept"
        );
        assert!(pod.exec(&["ip", "link", "show", "eth0"]).status_ok);
        let del = w.run(other, "del", &net, &pod.path(), &[]);
        assert!(
            del.status_ok,
            "{other:?} DEL after {tool:?}'s failed ADD: {del:?}"
        );
        assert_eq!(reservations(&data.join(&net)), 0);
        assert!(
            w.node
                .sh(&["ip", "-o", "link", "show", "type", "veth"])
                .is_empty()
        );

        let out = w.run(tool, "add", "missing", &pod.path(), &[]);
        assert!(
            !out.status_ok && w.cache_files().is_empty(),
            "{tool:?}: {out:?}"
        );
        msgs.push(message(&out));
    }
    assert_eq!(
        msgs[0],
        "plugin type=\"rec-b\" failed (add): recorder asked to fail; at ADD"
    );
    assert_eq!(msgs[0], msgs[2]);
    let path = w.sb.bin.display();
    assert_eq!(
        msgs[1],
        format!(
            "plugin type=\"no-such\" failed (add): failed to find plugin \"no-such\" in path [{path}]"
        )
    );
    assert_eq!(msgs[1], msgs[3]);
}

/// A cache file that is not JSON: CHECK fails naming the cached result in both tools; DEL goes
/// on without a prevResult and removes it, in both (libcni 1.3; Debian 12's 1.1 failed).
#[test]
fn corrupt_cache_as_libcni() {
    if !require_root("cnitool corrupt_cache_as_libcni") {
        return;
    }
    let Some(w) = World::new("corrupt") else {
        return;
    };
    w.write("10-c.conflist", &recorded_list("1.0.0"));
    for (adder, other) in [(Tool::Libcni, Tool::Cnibox), (Tool::Cnibox, Tool::Libcni)] {
        let ns = "/run/netns/corrupt";
        assert!(w.run(adder, "add", "rec", ns, &[]).status_ok);
        let file = w.cache_dir().join(&w.cache_files()[0]);
        std::fs::write(&file, "{not json").unwrap();
        let mut checks = Vec::new();
        for tool in [adder, other] {
            let out = w.run(tool, "check", "rec", ns, &[]);
            assert!(
                !out.status_ok,
                "{tool:?} CHECK with a corrupt cache: {out:?}"
            );
            checks.push(message(&out));
        }
        for m in &checks {
            assert!(
                m.starts_with("failed to get network \"rec\" cached result: "),
                "{m}"
            );
        }
        // libcni 1.3 (cnibox follows it) drops the unreadable record and goes on without a
        // prevResult (1.1 failed here): the tool that did not ADD deletes, each way round.
        w.clear_records();
        let out = w.run(other, "del", "rec", ns, &[]);
        assert!(out.status_ok, "{other:?} DEL with a corrupt cache: {out:?}");
        let r = records(&w);
        assert_eq!(r["order"], "DEL rec-c\nDEL rec-b\nDEL rec-a\n");
        assert!(r["DEL-rec-a"]["conf"].get("prevResult").is_none(), "{r}");
        assert!(!file.exists(), "DEL left the corrupt cache file");
    }
}

/// GC and STATUS (libcni 1.1 has neither, so cnitool alone): every plugin of a 1.1.0 list gets
/// the cached attachments of the network as valid ones; host-local, in-process, collects a
/// reservation no cached attachment owns and keeps the others.
#[test]
fn gc_and_status() {
    if !require_root("cnitool gc_and_status") {
        return;
    }
    let Some(w) = World::new("gc") else {
        return;
    };
    let n = unique_n();
    let data = w.sb.path("ipam");
    let mut list = recorded_list("1.1.0");
    list["plugins"][1]["ipam"] = json!({"type": "host-local", "subnet": v4(n), "dataDir": data});
    list["plugins"][1]["type"] = json!("host-local");
    w.write("10-gc.conflist", &list);
    for pod in ["a", "b"] {
        let out = w.run(
            Tool::Cnibox,
            "add",
            "rec",
            &format!("/run/netns/gc-{pod}"),
            &[],
        );
        assert!(out.status_ok, "{out:?}");
    }
    let stale = data.join("rec").join(format!("10.{n}.0.200"));
    std::fs::write(&stale, "gone\r\neth0").unwrap();
    assert_eq!(reservations(&data.join("rec")), 3);
    w.clear_records();
    let out = w.run(Tool::Cnibox, "gc", "rec", "", &[]);
    assert!(out.status_ok, "{out:?}");
    assert_eq!(
        reservations(&data.join("rec")),
        2,
        "GC kept the stale reservation"
    );
    let r = records(&w);
    let valid = &r["GC-rec-a"]["conf"]["cni.dev/valid-attachments"];
    let ids: Vec<&str> = valid
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["containerID"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{valid}");
    assert!(ids.iter().all(|i| i.starts_with("cnitool-")), "{valid}");
    assert_eq!(r["GC-rec-a"]["conf"]["cni.dev/attachments"], *valid);
    assert_eq!(r["GC-rec-a"]["env"]["CNI_CONTAINERID"], "");
    assert_eq!(r["order"], "GC rec-a\nGC rec-c\n");
    w.clear_records();
    assert!(w.run(Tool::Cnibox, "status", "rec", "", &[]).status_ok);
    assert_eq!(records(&w)["order"], "STATUS rec-a\nSTATUS rec-c\n");
    // disableGC; a 1.0.0 list has neither verb; a failing STATUS is the answer.
    list["disableGC"] = json!(true);
    list["plugins"][2]["fail"] = json!("STATUS");
    w.write("10-gc.conflist", &list);
    w.clear_records();
    assert!(w.run(Tool::Cnibox, "gc", "rec", "", &[]).status_ok);
    assert_eq!(records(&w)["order"], "");
    let out = w.run(Tool::Cnibox, "status", "rec", "", &[]);
    assert_eq!(
        (out.json["code"].as_u64(), message(&out)),
        (Some(11), "recorder asked to fail; at STATUS".into())
    );
    list["cniVersion"] = json!("1.0.0");
    w.write("10-gc.conflist", &list);
    w.clear_records();
    assert!(w.run(Tool::Cnibox, "status", "rec", "", &[]).status_ok);
    assert_eq!(records(&w)["order"], "");
    for pod in ["a", "b"] {
        assert!(
            w.run(
                Tool::Cnibox,
                "del",
                "rec",
                &format!("/run/netns/gc-{pod}"),
                &[]
            )
            .status_ok
        );
    }
}

fn v4(n: u8) -> String {
    crate::common::family::v4_subnet(n)
}
