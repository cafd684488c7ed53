//! Real clients' conflists, exactly as they ship, run through cnibox alone (as libcni runs a
//! list: tests/common/conflist.rs) in a throwaway node whose /run and /var/lib are the
//! sandbox's: kind's `10-kindnet.conflist` (ptp + host-local + portmap; IPv4, IPv6-only and
//! dual-stack, as kindnetd fills its template for each cluster family), k3s's
//! `10-flannel.conflist` (flannel delegating to bridge, portmap, bandwidth) and podman 4's
//! generated default (bridge, portmap, firewall, tuning). Each: pods reach each other and the
//! node, a hostPort answers from a second host, CHECK passes, and DEL leaves no link, address
//! reservation, stored config or per-pod rule.

mod common;
use common::conflist::{self, NodeRoot};
use common::dual::{self, add_v6_link};
use common::env::env_for;
use common::family::{FAMILIES, assert_bindable, assert_result_family, reservations, result_ips};
use common::lab::{Lab, OURS_UNSET};
use common::plugdir::{Tmp, pack, run};
use common::traffic::{answers, serve};
use common::*;
use serde_json::{Value, json};

fn pod_env(pod: &NetNs, id: &str) -> Env {
    env_for(pod, id)
}

fn addr(result: &Value, i: usize) -> String {
    let a = result["ips"][i]["address"].as_str().expect("address");
    a.split('/').next().unwrap().to_string()
}

fn veths(node: &NetNs) -> usize {
    node.sh(&["ip", "-o", "link", "show", "type", "veth"])
        .lines()
        .filter(|l| !l.contains("tocl"))
        .count()
}

/// Entries of a directory as the node sees it (missing: none).
fn entries(root: &NodeRoot, node_path: &str) -> Vec<String> {
    std::fs::read_dir(root.host_path(node_path))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Two pods on `list`; pod 1 serves a hostPort. Returns after DEL, having checked that
/// nothing of either pod is left. Every address family the result has is checked: pods reach
/// each other and the node over each, and the hostPort answers the second host over each (the
/// lab's client link then carries IPv6 too: tests/common/dual.rs).
fn two_pods(lab: &Lab, list: &Value, ipam_dir: &str, per_pod: impl Fn(&NodeRoot, &Value)) {
    let root = NodeRoot {
        sb: &lab.sb,
        node: &lab.node,
    };
    let (p1, p2) = (NetNs::create(), NetNs::create());
    let rc1 = json!({"portMappings": [
        {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]});
    let rc2 = json!({"bandwidth": {"ingressRate": 8000000, "ingressBurst": 100000,
        "egressRate": 8000000, "egressBurst": 100000}});
    let run1 = |k: &str, c: &str, conf: &Value| root.run(k, c, &pod_env(&p1, "pod1"), conf);
    let run2 = |k: &str, c: &str, conf: &Value| root.run(k, c, &pod_env(&p2, "pod2"), conf);
    let r1 = conflist::add(list, &rc1, &run1);
    let r2 = conflist::add(list, &rc2, &run2);
    per_pod(&root, &r1);
    let (ips1, ips2) = (result_ips(&r1), result_ips(&r2));
    assert_eq!(ips1.len(), ips2.len(), "{r1}\n{r2}");
    assert_bindable(&p1, &ips1);
    assert_bindable(&p2, &ips2);
    let has_v6 = ips1.iter().any(|a| a.is_ipv6());
    if has_v6 {
        add_v6_link(lab);
    }
    let mut servers = Vec::new();
    for (a1, a2) in ips1.iter().zip(&ips2) {
        let (a1, a2) = (a1.to_string(), a2.to_string());
        p1.sh(&["ping", "-c", "1", "-W", "5", &a2]);
        p2.sh(&["ping", "-c", "1", "-W", "5", &a1]);
        lab.node.sh(&["ping", "-c", "1", "-W", "5", &a1]);
        servers.push(serve(&p1, "tcp", a1.contains(':'), 80, "pod1"));
    }
    for a in &ips1 {
        let host = dual::node_addr(lab, a.is_ipv6());
        assert!(
            answers(&lab.client, "tcp", &host, 8080, "pod1"),
            "hostPort 8080 from a second host at {host}"
        );
    }
    if list["cniVersion"] != "0.3.1" {
        assert!(
            conflist::check(list, &rc1, &r1, &run1).is_none(),
            "CHECK pod1"
        );
        // A deliberate change: CHECK must notice the missing address, and say which.
        p2.sh(&["ip", "addr", "flush", "dev", "eth0"]);
        let bad = conflist::check(list, &rc2, &r2, &run2).expect("CHECK after a flush fails");
        let first = r2["ips"][0]["address"].as_str().expect("an address");
        assert_eq!(
            bad.err(999),
            format!("address {first} not found on \"eth0\""),
            "{bad:?}"
        );
    }
    let reserved = reservations(&root.host_path(ipam_dir));
    assert_eq!(reserved, ips1.len() * 2, "reservations after ADD");
    conflist::del(list, &rc1, &r1, &run1);
    conflist::del(list, &rc2, &r2, &run2);
    // A repeated DEL is fine.
    conflist::del(list, &rc2, &r2, &run2);
    drop(servers);
    assert_eq!(veths(&lab.node), 0, "veths left behind");
    assert_eq!(
        reservations(&root.host_path(ipam_dir)),
        0,
        "reservations left"
    );
    for save in ["iptables-save", "ip6tables-save"] {
        let nat = lab.node.sh(&[save, "-t", "nat"]);
        assert!(!nat.contains("CNI-DN-"), "per-pod DNAT chain left:\n{nat}");
    }
    let nft = lab.node.sh(&["nft", "list", "ruleset"]);
    assert!(!nft.contains("8080"), "hostPort rule left:\n{nft}");
    let qd = lab.node.sh(&["tc", "qdisc", "show"]);
    assert!(!qd.contains("tbf"), "bandwidth qdisc left:\n{qd}");
}

#[test]
fn kind_kindnet() {
    if !require_root("conflists kind_kindnet") {
        return;
    }
    let lab = Lab::new("conflist-kind", OURS_UNSET);
    let n = lab.n;
    // kindnetd's template with its values filled in.
    let list = json!({
        "cniVersion": "0.3.1",
        "name": "kindnet",
        "plugins": [
            {"type": "ptp", "ipMasq": false,
             "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
                      "routes": [{"dst": "0.0.0.0/0"}],
                      "ranges": [[{"subnet": format!("10.{n}.1.0/24")}]]},
             "mtu": 1500},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    two_pods(&lab, &list, "/run/cni-ipam-state/kindnet", |_, r| {
        assert_eq!(r["cniVersion"], "0.3.1", "{r}");
        assert!(addr(r, 0).starts_with(&format!("10.{n}.1.")), "{r}");
    });
}

/// kind's dual-stack cluster: the same kindnet template filled with one range and one default
/// route per family (kindnetd writes `[ { "subnet": … } ]` per pod CIDR and `{ "dst": … }` per
/// family's default route).
#[test]
fn kind_kindnet_dual_stack() {
    if !require_root("conflists kind_kindnet_dual_stack") {
        return;
    }
    let lab = Lab::new("conflist-kind-dual", OURS_UNSET);
    let n = lab.n;
    let list = json!({
        "cniVersion": "0.3.1",
        "name": "kindnet",
        "plugins": [
            {"type": "ptp", "ipMasq": false,
             "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
                      "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
                      "ranges": [[{"subnet": format!("10.{n}.1.0/24")}],
                                 [{"subnet": format!("fd00:{n}:0:1::/64")}]]},
             "mtu": 1500},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    two_pods(&lab, &list, "/run/cni-ipam-state/kindnet", |_, r| {
        assert_eq!(r["cniVersion"], "0.3.1", "{r}");
        assert!(addr(r, 0).starts_with(&format!("10.{n}.1.")), "{r}");
        assert!(addr(r, 1).starts_with(&format!("fd00:{n}:0:1:")), "{r}");
    });
}

/// kind's IPv6-only cluster: one IPv6 range and `::/0` (kind's nodes get
/// `fd00:10:244:N::/64`; here the lab's own subnet).
#[test]
fn kind_kindnet_ipv6() {
    if !require_root("conflists kind_kindnet_ipv6") {
        return;
    }
    let lab = Lab::new("conflist-kind-v6", OURS_UNSET);
    let n = lab.n;
    let list = json!({
        "cniVersion": "0.3.1",
        "name": "kindnet",
        "plugins": [
            {"type": "ptp", "ipMasq": false,
             "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
                      "routes": [{"dst": "::/0"}],
                      "ranges": [[{"subnet": format!("fd00:{n}:0:1::/64")}]]},
             "mtu": 1500},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    two_pods(&lab, &list, "/run/cni-ipam-state/kindnet", |_, r| {
        assert_eq!(r["ips"].as_array().map(Vec::len), Some(1), "{r}");
        assert!(addr(r, 0).starts_with(&format!("fd00:{n}:0:1:")), "{r}");
    });
}

#[test]
fn k3s_flannel() {
    if !require_root("conflists k3s_flannel") {
        return;
    }
    let lab = Lab::new("conflist-k3s", OURS_UNSET);
    let n = lab.n;
    // k3s's pkg/agent/flannel cniConf, unchanged.
    let list = json!({
        "name": "cbr0",
        "cniVersion": "1.0.0",
        "plugins": [
            {"type": "flannel",
             "delegate": {"hairpinMode": true, "forceAddress": true, "isDefaultGateway": true}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "bandwidth", "capabilities": {"bandwidth": true}}
        ]
    });
    let root = NodeRoot {
        sb: &lab.sb,
        node: &lab.node,
    };
    let env_file = root.host_path("/run/flannel/subnet.env");
    std::fs::create_dir_all(env_file.parent().unwrap()).unwrap();
    std::fs::write(
        &env_file,
        format!(
            "FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
        ),
    )
    .unwrap();
    two_pods(&lab, &list, "/var/lib/cni/networks/cbr0", |root, r| {
        assert!(addr(r, 0).starts_with(&format!("10.{n}.1.")), "{r}");
        // What flannel stored for DEL: Go's json.Marshal of the delegate map.
        let stored = std::fs::read_to_string(root.host_path("/var/lib/cni/flannel/pod1"))
            .expect("stored delegate config");
        assert_eq!(
            stored,
            format!(
                "{{\"cniVersion\":\"1.0.0\",\"forceAddress\":true,\"hairpinMode\":true,\
                 \"ipMasq\":false,\"ipam\":{{\"ranges\":[[{{\"subnet\":\"10.{n}.1.0/24\"}}]],\
                 \"routes\":[{{\"dst\":\"10.{n}.0.0/16\"}}],\"type\":\"host-local\"}},\
                 \"isDefaultGateway\":true,\"isGateway\":true,\"mtu\":1450,\"name\":\"cbr0\",\
                 \"type\":\"bridge\"}}"
            )
        );
        // flannel's delegate: the bridge cni0 with the gateway, MTU from subnet.env.
        let gw = lab
            .node
            .sh(&["ip", "-4", "-o", "addr", "show", "dev", "cni0"]);
        assert!(gw.contains(&format!("10.{n}.1.1/24")), "{gw}");
    });
    assert!(
        entries(&root, "/var/lib/cni/flannel").is_empty(),
        "stored delegate configs left"
    );
}

#[test]
fn podman_default() {
    if !require_root("conflists podman_default") {
        return;
    }
    let lab = Lab::new("conflist-podman", OURS_UNSET);
    let n = lab.n;
    // podman 4's generated default network (CNI backend).
    let list = json!({
        "cniVersion": "0.4.0",
        "name": "podman",
        "plugins": [
            {"type": "bridge", "bridge": "cni-podman0", "isGateway": true, "ipMasq": true,
             "hairpinMode": true,
             "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}],
                      "ranges": [[{"subnet": format!("10.{n}.0.0/16"),
                                   "gateway": format!("10.{n}.0.1")}]]}},
            {"type": "portmap", "capabilities": {"portMappings": true}},
            {"type": "firewall"},
            {"type": "tuning"}
        ]
    });
    two_pods(&lab, &list, "/var/lib/cni/networks/podman", |_, r| {
        assert_eq!(r["cniVersion"], "0.4.0", "{r}");
    });
}

/// The iptables backend's rules are written in-process where iptables is iptables-nft: podman's
/// default chain (bridge with ipMasq, portmap, firewall, tuning; no `backend` key, so iptables
/// as upstream) in a dual-stack network runs no iptables tool for ADD, CHECK and DEL, and the
/// rules the real `iptables-save`/`ip6tables-save` show are there after ADD and gone after
/// DEL. The tools in PATH are a wrapper named `xtables-nft-multi` (what the backend looks for)
/// that logs every run before running the real one; with `CNIBOX_IPTABLES=exec` the same chain
/// runs them, and the log shows it (the wrapper is seen).
#[test]
fn podman_default_runs_no_iptables_tool() {
    if !require_root("conflists podman_default_runs_no_iptables_tool") {
        return;
    }
    let real = std::fs::canonicalize("/usr/sbin/iptables-restore").expect("iptables installed");
    assert!(
        real.ends_with("xtables-nft-multi"),
        "iptables here is not iptables-nft: {}",
        real.display()
    );
    let t = Tmp::new("iptables_direct");
    let log = t.0.join("ran.log");
    let wrapper = t.0.join("xtables-nft-multi");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/bash\nname=$(basename \"$0\")\necho \"$name $*\" >> {}\nexec -a \"$name\" {} \"$@\"\n",
            log.display(),
            real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    for tool in ["iptables", "ip6tables"] {
        for what in ["save", "restore"] {
            std::os::unix::fs::symlink("xtables-nft-multi", t.0.join(format!("{tool}-{what}")))
                .unwrap();
        }
    }
    let path = format!(
        "{}:{}",
        t.0.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for exec_tools in [false, true] {
        let _ = std::fs::remove_file(&log);
        let lab = Lab::new("conflist-ipt-direct", OURS_UNSET);
        let n = lab.n;
        let list = json!({
            "cniVersion": "1.0.0",
            "name": format!("podman{n}"),
            "plugins": [
                {"type": "bridge", "bridge": format!("cni-podman{n}"), "isGateway": true,
                 "ipMasq": true, "hairpinMode": true,
                 "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
                          "ranges": [[{"subnet": format!("10.{n}.0.0/16")}],
                                     [{"subnet": format!("fd00:{n}::/64")}]]}},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "firewall"},
                {"type": "tuning"}
            ]
        });
        let root = NodeRoot {
            sb: &lab.sb,
            node: &lab.node,
        };
        let pod = NetNs::create();
        let mut env = pod_env(&pod, "pod1");
        env.extra.push(("PATH".into(), path.clone()));
        if exec_tools {
            env.extra.push(("CNIBOX_IPTABLES".into(), "exec".into()));
        }
        let rc = json!({"portMappings": [
            {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]});
        let run = |k: &str, c: &str, conf: &Value| root.run(k, c, &env, conf);
        let r = conflist::add(&list, &rc, &run);
        let ips = result_ips(&r);
        assert_eq!(ips.len(), 2, "{r}");
        for (save, ip) in ["iptables-save", "ip6tables-save"].iter().zip(&ips) {
            let nat = lab.node.sh(&[save, "-t", "nat"]);
            let filter = lab.node.sh(&[save, "-t", "filter"]);
            let host = format!("{ip}/{}", if ip.is_ipv6() { 128 } else { 32 });
            assert!(
                nat.contains(&format!("-A POSTROUTING -s {host} ")),
                "{save} ipMasq:\n{nat}"
            );
            assert!(
                nat.contains("--dports 8080 -j CNI-DN-"),
                "{save} hostPort:\n{nat}"
            );
            assert!(nat.contains("--dport 8080 -j DNAT"), "{save} DNAT:\n{nat}");
            assert!(
                filter.contains(&format!("-A CNI-FORWARD -s {host} -j ACCEPT")),
                "{save} firewall:\n{filter}"
            );
        }
        assert!(conflist::check(&list, &rc, &r, &run).is_none(), "CHECK");
        conflist::del(&list, &rc, &r, &run);
        // Nothing of the pod is left in either family: no DNAT chain, masquerade or firewall
        // rule, and its address in no rule.
        for (save, ip) in ["iptables-save", "ip6tables-save"].iter().zip(&ips) {
            let nat = lab.node.sh(&[save, "-t", "nat"]);
            let filter = lab.node.sh(&[save, "-t", "filter"]);
            let ip = ip.to_string();
            assert!(
                !nat.contains("CNI-DN-")
                    && !nat.contains("-s 10.")
                    && !nat.contains("-s fd00:")
                    && !nat.contains(&ip),
                "{save} after DEL:\n{nat}"
            );
            assert!(!filter.contains(&ip), "{save} after DEL:\n{filter}");
        }
        let ran = std::fs::read_to_string(&log).unwrap_or_default();
        if exec_tools {
            assert!(
                ran.contains("iptables-restore") && ran.contains("ip6tables-restore"),
                "the wrapper saw no run of the tools: {ran:?}"
            );
        } else {
            assert_eq!(ran, "", "iptables tools ran");
        }
    }
}

/// The amd64 release archive (contrib/release.sh; of CNIBOX_STATIC, the static build `make test`
/// makes, else the test build), unpacked as install guides unpack upstream's archive, runs
/// bridge + host-local + portmap: IPv4, IPv6 and dual-stack.
#[test]
fn from_the_release_archive() {
    if !require_root("conflists from_the_release_archive") {
        return;
    }
    let binary = std::env::var_os("CNIBOX_STATIC")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(bin);
    let t = Tmp::new("conflist_archive");
    let tgz = pack(&binary, "amd64", &t.0, "022");
    for fam in FAMILIES {
        let lab = Lab::new(&format!("conflist-archive-{}", fam.tag()), OURS_UNSET);
        for e in std::fs::read_dir(&lab.sb.bin).unwrap() {
            std::fs::remove_file(e.unwrap().path()).unwrap();
        }
        let out = run(std::process::Command::new("tar")
            .arg("-xzf")
            .arg(&tgz)
            .arg("-C")
            .arg(&lab.sb.bin));
        assert!(out.ok, "{out:?}");
        let list = json!({
            "cniVersion": "1.0.0",
            "name": "archive",
            "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
                 "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
                          "ranges": fam.ranges(lab.n), "routes": fam.default_routes()}},
                {"type": "portmap", "capabilities": {"portMappings": true}}
            ]
        });
        two_pods(&lab, &list, "/run/cni-ipam-state/archive", |_, r| {
            assert_result_family(r, fam);
        });
    }
}
