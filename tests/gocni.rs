//! The objects Go runtimes really send. containerd's CRI plugin passes capability arguments
//! through go-cni from Go structs without JSON tags, so keys arrive in Go's field spelling
//! (`HostPort`, `IngressRate`); Go's encoding/json in the reference plugins matches keys
//! case-insensitively. Each test runs the exact object through cnibox and asserts the effect
//! on the host (rules, qdiscs), and where the reference is installed, that it accepts the same
//! input with the same result.

mod common;
use common::env::env_for;
use common::*;
use serde_json::{Value, json};

/// go-cni's `PortMapping{HostPort, ContainerPort int32; Protocol, HostIP string}` as JSON.
fn go_cni_port_mappings() -> Value {
    json!([
        {"HostPort": 18080, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""},
        {"HostPort": 18053, "ContainerPort": 53, "Protocol": "udp", "HostIP": ""}
    ])
}

/// go-cni's `BandWidth` as containerd fills it from the Kubernetes annotations: the rate from
/// the annotation, the burst `math.MaxUint32`.
fn go_cni_bandwidth() -> Value {
    json!({"IngressRate": 8_000_000u64, "IngressBurst": 4_294_967_295u64,
           "EgressRate": 16_000_000u64, "EgressBurst": 4_294_967_295u64})
}

struct Pod {
    node: NetNs,
    /// Kept alive for the pod's lifetime.
    _cont: NetNs,
    sb: Sandbox,
    bridge_conf: Value,
    env: Env,
    result: Value,
}

fn pod(tag: &str, n: u8) -> Pod {
    let sb = Sandbox::new(tag);
    let node = NetNs::create();
    let cont = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    let bridge_conf = json!({"cniVersion": "1.0.0", "name": format!("gocni{n}"), "type": "bridge",
        "bridge": format!("gocni{n}"), "isGateway": true, "ipMasq": false,
        "ipam": {"type": "host-local", "subnet": format!("10.77.{n}.0/24"),
                 "dataDir": sb.path("ipam").display().to_string()}});
    let env = env_for(&cont, &format!("gocni-{tag}"));
    let result = sb
        .plugin_in(Impl::Ours, &node)
        .add("bridge", &env, &bridge_conf)
        .ok()
        .clone();
    Pod {
        node,
        _cont: cont,
        sb,
        bridge_conf,
        env,
        result,
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        let _ =
            self.sb
                .plugin_in(Impl::Ours, &self.node)
                .del("bridge", &self.env, &self.bridge_conf);
    }
}

fn rules(node: &NetNs, backend: &str) -> String {
    match backend {
        "nftables" => node.sh(&["nft", "list", "ruleset"]),
        _ => node.sh(&["iptables-save", "-t", "nat"]),
    }
}

fn portmap(backend: &str, n: u8) {
    if !require_root("portmap_go_cni_keys") {
        return;
    }
    let p = pod(&format!("pm-{backend}"), n);
    let conf = json!({"cniVersion": "1.0.0", "name": p.bridge_conf["name"], "type": "portmap",
        "backend": backend, "capabilities": {"portMappings": true},
        "runtimeConfig": {"portMappings": go_cni_port_mappings()},
        "prevResult": p.result});
    let pl = p.sb.plugin_in(Impl::Ours, &p.node);
    let before = rules(&p.node, backend);
    assert!(!before.contains("18080"), "{before}");
    let out = pl.add("portmap", &p.env, &conf);
    assert!(out.status_ok, "ADD with go-cni keys: {out:?}");
    let after = rules(&p.node, backend);
    assert!(
        after.contains("18080") && after.contains("18053"),
        "no DNAT for the go-cni mappings:\n{after}"
    );
    assert!(pl.check("portmap", &p.env, &conf).status_ok);
    let out = pl.del("portmap", &p.env, &conf);
    assert!(out.status_ok, "DEL with go-cni keys: {out:?}");
    let gone = rules(&p.node, backend);
    assert!(!gone.contains("18080"), "DEL left rules:\n{gone}");
    // DEL again (runtimes retry) still succeeds.
    assert!(pl.del("portmap", &p.env, &conf).status_ok);
}

#[test]
fn portmap_go_cni_keys_iptables() {
    portmap("iptables", 1);
}

#[test]
fn portmap_go_cni_keys_nftables() {
    portmap("nftables", 2);
}

/// The reference plugin accepts the same object: we are matching real behaviour, not a guess.
#[test]
fn portmap_go_cni_keys_reference() {
    if !require_root("portmap_go_cni_keys_reference") || !reference_available("portmap") {
        return;
    }
    let p = pod("pm-ref", 3);
    let conf = json!({"cniVersion": "1.0.0", "name": p.bridge_conf["name"], "type": "portmap",
        "runtimeConfig": {"portMappings": go_cni_port_mappings()}, "prevResult": p.result});
    let pl = p.sb.plugin_in(Impl::Reference, &p.node);
    let out = pl.add("portmap", &p.env, &conf);
    assert!(out.status_ok, "{out:?}");
    assert!(rules(&p.node, "iptables").contains("18080"));
    // And cnibox removes what the reference made from it.
    let ours = p.sb.plugin_in(Impl::Ours, &p.node);
    assert!(ours.del("portmap", &p.env, &conf).status_ok);
    assert!(!rules(&p.node, "iptables").contains("18080"));
}

#[test]
fn bandwidth_go_cni_keys() {
    if !require_root("bandwidth_go_cni_keys") {
        return;
    }
    let p = pod("bw", 4);
    let conf = json!({"cniVersion": "1.0.0", "name": p.bridge_conf["name"], "type": "bandwidth",
        "capabilities": {"bandwidth": true},
        "runtimeConfig": {"bandwidth": go_cni_bandwidth()}, "prevResult": p.result});
    let host_veth = p.result["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i.get("sandbox").is_none() && i["name"] != p.bridge_conf["bridge"])
        .and_then(|i| i["name"].as_str())
        .unwrap()
        .to_string();
    let pl = p.sb.plugin_in(Impl::Ours, &p.node);
    let r = pl.add("bandwidth", &p.env, &conf).ok().clone();
    let q = p.node.sh(&["tc", "qdisc", "show", "dev", &host_veth]);
    assert!(
        q.contains("qdisc tbf 1: root") && q.contains("rate 8Mbit"),
        "ingress limit from IngressRate not applied:\n{q}"
    );
    let ifb = r["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .find(|n| n.starts_with("bwp"))
        .unwrap_or_else(|| panic!("no ifb for EgressRate in {r}"))
        .to_string();
    let qi = p.node.sh(&["tc", "qdisc", "show", "dev", &ifb]);
    assert!(qi.contains("rate 16Mbit"), "{qi}");
    assert!(pl.check("bandwidth", &p.env, &conf).status_ok);
    assert!(pl.del("bandwidth", &p.env, &conf).status_ok);
    let links = p.node.sh(&["ip", "link"]);
    assert!(!links.contains(&ifb), "{links}");
}

/// A bandwidth object whose keys name no limit is an error, never a silently unshaped pod.
#[test]
fn bandwidth_unknown_key_is_an_error() {
    let sb = Sandbox::new("bw-unknown");
    let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "bandwidth",
        "runtimeConfig": {"bandwidth": {"ingress_rate": 1000, "IngressBurst": 10}},
        "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "h"}]}});
    let out = sb.ours().add("bandwidth", &sb.env(), &conf);
    let msg = out.err(6);
    assert!(
        msg.contains("runtimeConfig.bandwidth") && msg.contains("ingress_rate"),
        "{msg}"
    );
}

/// Go's spelling of every key of the network config, the IPAM config and `args`: the result
/// equals the one for the canonical spelling, and the reference's.
#[test]
fn host_local_any_key_case() {
    let sb = Sandbox::new("hl-case");
    let dir = sb.path("data").display().to_string();
    let canonical = json!({"cniVersion": "1.0.0", "name": "casenet", "type": "host-local",
        "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.78.0.0/24", "rangeStart": "10.78.0.10",
                 "gateway": "10.78.0.1"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": dir},
        "args": {"cni": {"ips": ["10.78.0.20"]}}});
    let go = json!({"CNIVersion": "1.0.0", "Name": "casenet", "TYPE": "host-local",
        "IPAM": {"Type": "host-local", "Ranges": [[{"Subnet": "10.78.0.0/24", "RANGESTART": "10.78.0.10",
                 "Gateway": "10.78.0.1"}]], "Routes": [{"Dst": "0.0.0.0/0"}], "DataDir": dir},
        "Args": {"CNI": {"IPs": ["10.78.0.21"]}}});
    let ours = sb.ours();
    let a = ours
        .add("host-local", &sb.env().with_args(""), &canonical)
        .ok()
        .clone();
    let mut env2 = sb.env();
    env2.container_id = "cnibox-test-2".into();
    let b = ours.add("host-local", &env2, &go).ok().clone();
    assert_eq!(a["ips"][0]["address"], "10.78.0.20/24");
    assert_eq!(b["ips"][0]["address"], "10.78.0.21/24", "{b}");
    assert_eq!(a["routes"], b["routes"]);
    assert_eq!(a["ips"][0]["gateway"], b["ips"][0]["gateway"]);
    assert!(ours.del("host-local", &env2, &go).status_ok);
    assert!(ours.del("host-local", &sb.env(), &canonical).status_ok);
    if reference_available("host-local") {
        let rdir = sb.path("rdata").display().to_string();
        let mut go_ref = go.clone();
        go_ref["IPAM"]["DataDir"] = json!(rdir);
        let theirs = sb
            .reference()
            .add("host-local", &env2, &go_ref)
            .ok()
            .clone();
        assert_eq!(normalize(&theirs), normalize(&b));
    }
}

/// The top-level `cniVersion` in any case selects the version (Go reads `CNIVersion` too).
#[test]
fn version_key_any_case() {
    let sb = Sandbox::new("ver-case");
    let conf = json!({"CniVersion": "0.3.1", "name": "n", "type": "loopback"});
    let out = sb.ours().add("loopback", &sb.env(), &conf);
    // Fails on the dummy netns, but the error is printed in the requested version.
    assert_eq!(out.json["cniVersion"], "0.3.1", "{out:?}");
}
