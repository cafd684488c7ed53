//! cnibox's `cnitool` against libcni itself: the same network configurations run through
//! `tests/libcni/main.go` (a driver of Debian's libcni source, built here in GOPATH mode, calling
//! `AddNetworkList`/`CheckNetworkList`/`DelNetworkList` as containerd and podman do) and through
//! `cnibox cnitool`, inside a throwaway node namespace. Compared: the results, the host (links,
//! addresses, reservations, hostPort rules), the result cache files, and — through a recorder
//! plugin that keeps what it was given — the exact config and environment every plugin gets.
//! One tool ADDs and the other CHECKs and DELs, both ways.

mod common;
#[path = "cnitool/errors.rs"]
mod errors;
#[path = "cnitool/support.rs"]
mod support;
use common::family::{FAMILIES, Fam, assert_bindable, assert_result_family, reservations};
use common::lab::unique_n;
use common::*;
use serde_json::{Value, json};
use support::{Tool, World, message, records};

/// One pod of [`real_chain`]: its namespace and hostPort.
struct Pod {
    ns: NetNs,
    port: u16,
}

/// bridge (host-local) + portmap + tuning, cnibox's applets in-process: one pod ADDed by each
/// tool, CHECKed and DELeted by the other.
fn real_chain(fam: Fam) {
    if !require_root("cnitool real_chain") {
        return;
    }
    let Some(w) = World::new(&format!("real-{}", fam.tag())) else {
        return;
    };
    let n = unique_n();
    let data = w.sb.path("ipam");
    let net = format!("ct{n}");
    let list = json!({"cniVersion": "1.0.0", "name": net, "plugins": [
        {"type": "bridge", "bridge": format!("ctbr{n}"), "isGateway": true,
         "ipam": fam.host_local(n, &data)},
        {"type": "portmap", "backend": "nftables", "capabilities": {"portMappings": true}},
        {"type": "tuning", "capabilities": {"mac": true}}]});
    w.write("10-real.conflist", &list);
    let pods = [(Tool::Libcni, 8081u16), (Tool::Cnibox, 8082)].map(|(_, port)| Pod {
        ns: NetNs::create(),
        port,
    });
    let mac = |i: usize| format!("02:00:00:00:{n:02x}:{i:02x}");
    let caps = |i: usize, p: &Pod| {
        json!({"portMappings": [{"hostPort": p.port, "containerPort": 80, "protocol": "tcp"}],
               "mac": mac(i)})
        .to_string()
    };
    let mut results = Vec::new();
    for (i, (tool, pod)) in [Tool::Libcni, Tool::Cnibox].iter().zip(&pods).enumerate() {
        let c = caps(i, pod);
        let vars = [("CAP_ARGS", c.as_str()), ("CNI_ARGS", "IgnoreUnknown=1")];
        let out = w.run(*tool, "add", &net, &pod.ns.path(), &vars);
        assert!(out.status_ok, "{tool:?} ADD: {out:?}");
        let ips = assert_result_family(&out.json, fam);
        if *tool == Tool::Cnibox {
            assert_bindable(&pod.ns, &ips);
        }
        let link = pod.ns.sh(&["ip", "-br", "link", "show", "eth0"]);
        assert!(
            link.contains(&mac(i)),
            "{tool:?}: runtimeConfig.mac not applied: {link}"
        );
        // The record: libcni's fields, the printed result, the list's bytes.
        let rec = w.cache(&net, &pod.ns.path());
        assert_eq!(rec["kind"], "cniCacheV1");
        assert_eq!(
            rec["result"], out.json,
            "{tool:?}: cached result is not the printed one"
        );
        assert_eq!(
            rec["capabilityArgs"],
            serde_json::from_str::<Value>(&c).unwrap()
        );
        assert_eq!(rec["cniArgs"], json!([["IgnoreUnknown", "1"]]));
        // libcni 1.3 records the netns (1.1 did not); cnibox writes what 1.3 writes.
        assert_eq!(
            rec["netns"].as_str(),
            Some(pod.ns.path().as_str()),
            "{tool:?}: the cached netns"
        );
        results.push((out.json, rec));
    }
    let (a, b) = (&results[0], &results[1]);
    assert_eq!(
        a.1["config"], b.1["config"],
        "the list's bytes in the cache differ"
    );
    for key in ["routes", "dns"] {
        assert_eq!(
            a.0[key], b.0[key],
            "{key} differ between libcni's and cnitool's ADD"
        );
    }
    let shape = |r: &Value| -> Vec<String> {
        let ifs = r["interfaces"].as_array().unwrap();
        let mut s: Vec<String> = ifs
            .iter()
            .map(|i| i["sandbox"].is_string().to_string())
            .collect();
        s.extend(
            r["ips"]
                .as_array()
                .unwrap()
                .iter()
                .map(|ip| ip["gateway"].to_string()),
        );
        s
    };
    assert_eq!(shape(&a.0), shape(&b.0));
    let rules = w.node.sh(&["nft", "list", "ruleset"]);
    for p in &pods {
        assert!(
            rules.contains(&format!("dport {}", p.port)),
            "no hostPort {}: {rules}",
            p.port
        );
    }
    // The other tool CHECKs and DELs each pod, with the same arguments (as runtimes do).
    for (i, (tool, pod)) in [(Tool::Cnibox, &pods[0]), (Tool::Libcni, &pods[1])]
        .into_iter()
        .enumerate()
    {
        let c = caps(i, pod);
        let vars = [("CAP_ARGS", c.as_str()), ("CNI_ARGS", "IgnoreUnknown=1")];
        let out = w.run(tool, "check", &net, &pod.ns.path(), &vars);
        assert!(out.status_ok, "{tool:?} CHECK of the other's ADD: {out:?}");
        let out = w.run(tool, "del", &net, &pod.ns.path(), &vars);
        assert!(out.status_ok, "{tool:?} DEL of the other's ADD: {out:?}");
        assert!(
            pod.ns
                .exec(&["ip", "link", "show", "eth0"])
                .stdout
                .is_empty()
        );
    }
    assert_eq!(w.cache_files(), Vec::<String>::new());
    assert_eq!(reservations(&data.join(&net)), 0);
    let veths = w.node.sh(&["ip", "-o", "link", "show", "type", "veth"]);
    assert!(veths.is_empty(), "veths left: {veths}");
    let rules = w.node.sh(&["nft", "list", "ruleset"]);
    for p in &pods {
        assert!(
            !rules.contains(&format!("dport {}", p.port)),
            "hostPort {} left",
            p.port
        );
    }
}

#[test]
fn real_chain_v4() {
    real_chain(FAMILIES[0]);
}

#[test]
fn real_chain_v6() {
    real_chain(FAMILIES[1]);
}

#[test]
fn real_chain_dual() {
    real_chain(FAMILIES[2]);
}

/// The recorder chain: three exec'd plugins, capabilities declared differently, CAP_ARGS with
/// more keys than any declares, CNI_ARGS; the first answers in another version than the list.
fn recorded_list(version: &str) -> Value {
    json!({"cniVersion": version, "name": "rec", "plugins": [
        {"type": "rec-a", "capabilities": {"portMappings": true, "mac": false},
         "result": {"cniVersion": "0.4.0", "interfaces": [{"name": "eth0", "sandbox": "/x"}],
                    "ips": [{"version": "4", "address": "10.1.2.3/24", "gateway": "10.1.2.1", "interface": 0}],
                    "dns": {}}},
        {"type": "rec-b", "capabilities": {"bandwidth": true}},
        {"type": "rec-c", "runtimeConfig": {"kept": "unless a capability replaces it"}}]})
}

const CAPS: &str = r#"{"portMappings":[{"hostPort":1,"containerPort":2,"protocol":"tcp"}],"mac":"02:00:00:00:00:01","bandwidth":{"ingressRate":1000},"ipRanges":[]}"#;

/// Every verb of the recorder chain through both tools (each with its own cache): the stdin and
/// CNI_* variables of every plugin call, their order and the cache files are the same.
#[test]
fn plugins_get_what_libcni_gives_them() {
    if !require_root("cnitool plugins_get_what_libcni_gives_them") {
        return;
    }
    let Some(w) = World::new("recorded") else {
        return;
    };
    for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        w.write("10-rec.conflist", &recorded_list(version));
        let mut outs = Vec::new();
        for tool in [Tool::Libcni, Tool::Cnibox] {
            w.clear_records();
            let vars = [
                ("CAP_ARGS", CAPS),
                ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAME=p"),
            ];
            let netns = "/run/netns//rec-pod/";
            let add = w.run(tool, "add", "rec", netns, &vars);
            assert!(add.status_ok, "{version} {tool:?} add: {add:?}");
            let cache = w.cache("rec", "/run/netns/rec-pod");
            let cache_text = w.cache_text("rec", "/run/netns/rec-pod");
            let check = w.run(tool, "check", "rec", netns, &vars);
            let del = w.run(tool, "del", "rec", netns, &vars);
            assert!(del.status_ok, "{version} {tool:?} del: {del:?}");
            assert!(
                w.cache_files().is_empty(),
                "{version} {tool:?}: DEL left the cache file"
            );
            outs.push((
                add.stdout,
                cache,
                check.status_ok,
                message(&check),
                records(&w),
                cache_text,
            ));
        }
        let (theirs, ours) = (&outs[0], &outs[1]);
        assert_eq!(theirs.0, ours.0, "{version}: printed result");
        // libcni 1.3 records the netns as cnibox does (1.1 did not).
        assert_eq!(ours.1["netns"], "/run/netns/rec-pod");
        assert_eq!(theirs.1, ours.1, "{version}: cache file");
        assert_eq!(theirs.5, ours.5, "{version}: cache file, byte for byte");
        assert_eq!((theirs.2, &theirs.3), (ours.2, &ours.3), "{version}: CHECK");
        assert_eq!(theirs.4, ours.4, "{version}: what the plugins were given");
        // What that is, spelled out for 1.0.0.
        if version == "1.0.0" {
            let r = &ours.4;
            assert_eq!(
                r["order"],
                "ADD rec-a\nADD rec-b\nADD rec-c\nCHECK rec-a\nCHECK rec-b\nCHECK rec-c\nDEL rec-c\nDEL rec-b\nDEL rec-a\n"
            );
            let conf = |k: &str| &r[k]["conf"];
            assert_eq!(
                conf("ADD-rec-a")["runtimeConfig"],
                json!({"portMappings": [{"hostPort":1,"containerPort":2,"protocol":"tcp"}]})
            );
            assert_eq!(
                conf("ADD-rec-b")["runtimeConfig"],
                json!({"bandwidth": {"ingressRate": 1000}})
            );
            assert_eq!(
                conf("ADD-rec-c")["runtimeConfig"],
                json!({"kept": "unless a capability replaces it"})
            );
            // ADD chains the result as the plugin answered it (0.4.0); CHECK and DEL get the
            // cached one converted to the list's version.
            assert_eq!(conf("ADD-rec-b")["prevResult"]["cniVersion"], "0.4.0");
            assert_eq!(conf("DEL-rec-a")["prevResult"]["cniVersion"], "1.0.0");
            assert_eq!(
                conf("CHECK-rec-c")["prevResult"]["ips"][0]["address"],
                "10.1.2.3/24"
            );
            assert_eq!(
                r["ADD-rec-a"]["env"]["CNI_ARGS"],
                "IgnoreUnknown=1;K8S_POD_NAME=p"
            );
        }
        if version == "0.3.1" {
            assert!(
                ours.3.contains("does not support the CHECK command"),
                "{}",
                ours.3
            );
        }
    }
}

/// .conflist before .conf/.json, file name order, `disableCheck`, a missing network.
#[test]
fn loading_matches_libcni() {
    if !require_root("cnitool loading_matches_libcni") {
        return;
    }
    let Some(w) = World::new("loading") else {
        return;
    };
    let rec = |marker: &str| json!({"type": "rec-a", "marker": marker});
    let list = |name: &str, marker: &str| json!({"cniVersion": "1.0.0", "name": name, "plugins": [rec(marker)]});
    let single = |name: &str, marker: &str| {
        let mut c = rec(marker);
        c["name"] = json!(name);
        c["cniVersion"] = json!("1.0.0");
        c
    };
    w.write("20-a.conflist", &list("dup", "20-a"));
    w.write("10-b.conflist", &list("dup", "10-b"));
    w.write("05-dup.conf", &single("dup", "05-conf"));
    w.write("40-single.conf", &single("single", "40-conf"));
    w.write("30-single.json", &single("single", "30-json"));
    std::fs::create_dir_all(w.conf_dir.join("00-dir.conflist")).unwrap();
    let mut nocheck = list("nocheck", "nocheck");
    // libcni 1.1 takes only a boolean here (1.3 also "true"/"false", as cnibox: unit test).
    nocheck["disableCheck"] = json!(true);
    nocheck["plugins"][0]["fail"] = json!("CHECK");
    w.write("50-nocheck.conflist", &nocheck);
    for (net, marker) in [
        ("dup", "10-b"),
        ("single", "30-json"),
        ("nocheck", "nocheck"),
    ] {
        let mut caches = Vec::new();
        for tool in [Tool::Libcni, Tool::Cnibox] {
            w.clear_records();
            let ns = format!("/run/netns/{net}-{tool:?}");
            let out = w.run(tool, "add", net, &ns, &[]);
            assert!(out.status_ok, "{net} {tool:?}: {out:?}");
            assert_eq!(
                records(&w)["ADD-rec-a"]["conf"]["marker"],
                marker,
                "{net} {tool:?}"
            );
            let check = w.run(tool, "check", net, &ns, &[]);
            assert!(check.status_ok, "{net} {tool:?} CHECK: {check:?}");
            caches.push(w.cache(net, &ns)["config"].clone());
            assert!(w.run(tool, "del", net, &ns, &[]).status_ok);
        }
        assert_eq!(caches[0], caches[1], "{net}: the config bytes cached");
    }
    let dir = w.conf_dir.display().to_string();
    for tool in [Tool::Libcni, Tool::Cnibox] {
        let out = w.run(tool, "add", "nope", "/run/netns/x", &[]);
        assert!(!out.status_ok);
        assert_eq!(
            message(&out),
            format!("no net configuration with name \"nope\" in {dir}")
        );
    }
}

/// A file over 1 MiB in NETCONFPATH — another network's list, a single-plugin file, a plugin
/// file in another network's directory — is skipped with a line on stderr naming it, and the
/// wanted network loads (libcni reads files of any size and loads it too). Over 1 MiB in the
/// wanted network's own plugin directory, the load is refused naming that file: skipping it
/// would run the list without that plugin.
#[test]
fn oversized_files_are_skipped_alone() {
    if !require_root("cnitool oversized_files_are_skipped_alone") {
        return;
    }
    let Some(w) = World::new("oversized") else {
        return;
    };
    let pad = "x".repeat((1 << 20) + 1);
    let big = |name: &str| json!({"cniVersion": "1.0.0", "name": name, "plugins": [{"type": "rec-b", "pad": pad}]});
    w.write("00-big.conflist", &big("other"));
    w.write(
        "01-big.conf",
        &json!({"cniVersion": "1.0.0", "name": "single", "type": "rec-b", "pad": pad}),
    );
    w.write(
        "05-other2.conflist",
        &json!({"cniVersion": "1.0.0", "name": "other2", "plugins": [{"type": "rec-b"}]}),
    );
    std::fs::create_dir_all(w.conf_dir.join("other2")).unwrap();
    w.write("other2/big.conf", &json!({"type": "rec-c", "pad": pad}));
    w.write("10-want.conflist", &json!({"cniVersion": "1.0.0", "name": "want", "plugins": [{"type": "rec-a", "marker": "want"}]}));
    let big_files = ["00-big.conflist", "01-big.conf", "other2/big.conf"];
    for tool in [Tool::Libcni, Tool::Cnibox] {
        w.clear_records();
        let ns = format!("/run/netns/want-{tool:?}");
        let out = w.run(tool, "add", "want", &ns, &[]);
        assert!(out.status_ok, "{tool:?}: {out:?}");
        assert_eq!(
            records(&w)["ADD-rec-a"]["conf"]["marker"],
            "want",
            "{tool:?}"
        );
        if tool == Tool::Cnibox {
            // Read on the way to `want`: the big list and other2's plugin file (before it in
            // name order), not the single-plugin file (lists come first).
            for f in [big_files[0], big_files[2]] {
                let path = w.conf_dir.join(f).display().to_string();
                assert!(
                    out.stderr
                        .contains(&format!("{path}: larger than 1048576 bytes; file skipped")),
                    "no line naming {path}: {}",
                    out.stderr
                );
            }
        }
        assert!(
            w.run(tool, "del", "want", &ns, &[]).status_ok,
            "{tool:?} DEL"
        );
    }
    // A single-plugin file is reached only when no list matches.
    std::fs::write(
        w.conf_dir.join("20-single.json"),
        json!({"cniVersion": "1.0.0", "name": "single2", "type": "rec-a", "marker": "single2"})
            .to_string(),
    )
    .unwrap();
    let out = w.run(Tool::Cnibox, "add", "single2", "/run/netns/single2", &[]);
    assert!(out.status_ok, "{out:?}");
    for f in big_files {
        let path = w.conf_dir.join(f).display().to_string();
        assert!(
            out.stderr
                .contains(&format!("{path}: larger than 1048576 bytes; file skipped")),
            "no line naming {path}: {}",
            out.stderr
        );
    }
    assert!(
        w.run(Tool::Cnibox, "del", "single2", "/run/netns/single2", &[])
            .status_ok
    );
    // The wanted network's own plugin file: refused, naming it, and nothing ran.
    w.clear_records();
    let out = w.run(Tool::Cnibox, "add", "other2", "/run/netns/other2", &[]);
    assert!(!out.status_ok, "{out:?}");
    let path = w.conf_dir.join("other2/big.conf").display().to_string();
    assert_eq!(out.json["code"], 5, "{out:?}");
    assert!(
        message(&out).contains(&format!("{path}: larger than 1048576 bytes")),
        "{out:?}"
    );
    assert_eq!(records(&w)["order"], "", "a plugin ran: {:?}", records(&w));
}

/// `cnitool add` whose result cannot be written (stdout on /dev/full) takes the ADD back: the
/// list's DEL runs (the recorder sees it), and no cache record and no reservation stay.
#[test]
fn unwritable_result_undoes_the_add() {
    if !require_root("cnitool unwritable_result_undoes_the_add") {
        return;
    }
    let Some(w) = World::new("fullout") else {
        return;
    };
    let data = w.sb.path("ipam").display().to_string();
    let list = json!({"cniVersion": "1.0.0", "name": "full", "plugins": [
        {"type": "rec-a", "ipam": {"type": "host-local", "subnet": "10.231.0.0/24", "dataDir": data}},
        {"type": "host-local", "ipam": {"type": "host-local", "subnet": "10.232.0.0/24", "dataDir": data}}]});
    w.write("10-full.conflist", &list);
    let ns = NetNs::create();
    let out = w.run_under(
        &["sh", "-c", "exec \"$0\" \"$@\" >/dev/full"],
        Tool::Cnibox,
        "add",
        "full",
        &ns.path(),
        &[],
    );
    assert!(!out.status_ok, "{out:?}");
    assert_eq!(
        records(&w)["order"],
        "ADD rec-a\nDEL rec-a\n",
        "{:?}",
        records(&w)
    );
    assert_eq!(w.cache_files(), Vec::<String>::new(), "cache record left");
    assert_eq!(reservations(&w.sb.path("ipam/full")), 0, "reservation left");
    assert!(
        out.stderr.contains("cnitool: the ADD was undone"),
        "{out:?}"
    );
}

/// A plugin found in CNI_PATH that is this binary runs in-process (bridge, and its host-local
/// through delegation); any other is exec'd (the Go tuning of /usr/lib/cni): strace sees one
/// execve besides cnitool's own.
#[test]
fn own_applets_in_process_others_exec() {
    if !require_root("cnitool own_applets_in_process_others_exec") || !reference_available("tuning")
    {
        return;
    }
    let Some(w) = World::new("inproc") else {
        return;
    };
    let n = unique_n();
    let mixed = w.sb.path("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    for a in ["bridge", "host-local"] {
        std::os::unix::fs::symlink(bin(), mixed.join(a)).unwrap();
    }
    let path = format!("{}:{}", mixed.display(), reference_dir());
    let data = w.sb.path("ipam");
    let net = format!("ci{n}");
    w.write(
        "10-mixed.conflist",
        &json!({"cniVersion": "1.0.0", "name": net, "plugins": [
        {"type": "bridge", "bridge": format!("cibr{n}"), "ipam": Fam::V4.host_local(n, &data)},
        {"type": "tuning", "capabilities": {"mac": true}}]}),
    );
    let pod = NetNs::create();
    let trace = w.sb.path("execve.trace").display().to_string();
    let mac = format!("02:00:00:00:{n:02x}:01");
    let caps = json!({"mac": mac}).to_string();
    let vars = [("CNI_PATH", path.as_str()), ("CAP_ARGS", caps.as_str())];
    let strace = ["strace", "-f", "-qq", "-e", "trace=execve", "-o", &trace];
    let out = w.run_under(&strace, Tool::Cnibox, "add", &net, &pod.path(), &vars);
    assert!(out.status_ok, "{out:?}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let execs: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("execve(\"") && l.trim_end().ends_with("= 0"))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    let cnitool = w.sb.bin.join("cnitool").display().to_string();
    let tuning = format!("{}/tuning", reference_dir());
    assert_eq!(execs, [cnitool.as_str(), tuning.as_str()], "{text}");
    assert!(
        pod.sh(&["ip", "-br", "link", "show", "eth0"])
            .contains(&mac)
    );
    let out = w.run(Tool::Cnibox, "del", &net, &pod.path(), &vars);
    assert!(out.status_ok, "{out:?}");
    assert_eq!(reservations(&data.join(&net)), 0);
    assert!(
        w.node
            .sh(&["ip", "-o", "link", "show", "type", "veth"])
            .is_empty()
    );
}
