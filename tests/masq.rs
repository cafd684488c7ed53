//! bridge `ipMasq` and the GC of netfilter rules, inside throwaway "node" namespaces: a
//! container reaches an "outside" host that has no route back to the container subnet only
//! through masquerading (the outside sees the node's address); the rules are gone after a DEL
//! without netns; GC keeps only the valid attachments' rules (ipMasq, portmap, firewall); the
//! reference bridge's masquerading is removed by our DEL and the other way round, and both write
//! the same iptables rules.
//!
//! Each test gets its own node namespace, numbers (subnet 10.N.0.0/24, outside link
//! 192.168.N.0/24) and network name, so everything runs in parallel.

mod common;
use common::traffic::*;
use common::*;
use serde_json::{Value, json};

struct Lab {
    imp: Impl,
    backend: Option<&'static str>,
    n: u8,
    node: NetNs,
    outside: NetNs,
    sb: Sandbox,
}

impl Lab {
    /// A node namespace and an "outside" namespace on a veth (node 192.168.N.1, outside
    /// 192.168.N.2, no route back to 10.N.0.0/24).
    fn new(tag: &str, imp: Impl, backend: Option<&'static str>, n: u8) -> Lab {
        let sb = Sandbox::new(tag);
        let (node, outside) = node_and_client(n);
        Lab {
            imp,
            backend,
            n,
            node,
            outside,
            sb,
        }
    }

    fn plugin(&self) -> Plugin<'_> {
        self.sb.plugin_in(self.imp, &self.node)
    }

    fn net(&self) -> String {
        format!("masqnet{}", self.n)
    }

    fn bridge_conf(&self) -> Value {
        let mut c = json!({
            "cniVersion": "1.0.0",
            "name": self.net(),
            "type": "bridge",
            "bridge": format!("cnimq{}", self.n),
            "isGateway": true,
            "isDefaultGateway": true,
            "ipMasq": true,
            "ipam": {
                "type": "host-local",
                "subnet": format!("10.{}.0.0/24", self.n),
                "dataDir": self.sb.path("ipam").display().to_string(),
            }
        });
        if let Some(b) = self.backend {
            c["ipMasqBackend"] = json!(b);
        }
        c
    }

    fn attach(&self, cont: &NetNs, id: &str) -> Value {
        cont.sh(&["ip", "link", "set", "lo", "up"]);
        let out = self
            .plugin()
            .add("bridge", &env_for(cont, id), &self.bridge_conf());
        assert!(out.status_ok, "bridge ADD for {id}: {out:?}");
        out.json
    }

    fn gc_conf(&self, plugin: Value, valid: &[&str]) -> Value {
        let mut c = plugin;
        c["cniVersion"] = json!("1.1.0");
        c["cni.dev/valid-attachments"] = valid
            .iter()
            .map(|id| json!({"containerID": id, "ifname": "eth0"}))
            .collect();
        c
    }

    /// Lines of `iptables-save -t nat` and the nftables ruleset that mention container `id`.
    fn rules_of(&self, id: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .node
            .sh(&["iptables-save", "-t", "nat"])
            .lines()
            .filter(|l| l.contains(id))
            .map(str::to_string)
            .collect();
        v.extend(
            self.node
                .sh(&["nft", "list", "ruleset"])
                .lines()
                .filter(|l| l.contains(id))
                .map(str::to_string),
        );
        v
    }
}

fn skip(test: &str, imp: Impl) -> bool {
    if !require_root(test) {
        return true;
    }
    imp == Impl::Reference && !(reference_available("bridge") && reference_available("host-local"))
}

// ---------------------------------------------------------------------------------------------
// 1. Masquerading: traffic, rules, DEL without netns

fn masquerade(imp: Impl, backend: Option<&'static str>, n: u8) {
    if skip("masquerade", imp) {
        return;
    }
    let lab = Lab::new("masq", imp, backend, n);
    let c1 = NetNs::create();
    let id = format!("masq-c1-{n}");
    lab.attach(&c1, &id);
    let outside_ip = format!("192.168.{n}.2");
    // The outside answers with the address it saw the connection come from.
    let _srv = serve(&lab.outside, "tcp", false, 80, "$SOCAT_PEERADDR");
    assert_answers(
        &c1,
        "tcp",
        &outside_ip,
        80,
        &format!("192.168.{n}.1"),
        "container -> outside, masqueraded to the node's address",
    );
    let rules = lab.rules_of(&id);
    assert!(!rules.is_empty(), "no masquerade rules name {id}");
    if backend == Some("nftables") {
        let nat = lab.node.sh(&["iptables-save", "-t", "nat"]);
        assert!(
            !nat.contains(&id),
            "nftables backend wrote iptables rules:\n{nat}"
        );
    }

    // The runtime lost the netns: DEL with an empty CNI_NETNS still removes the rules.
    drop(c1);
    let env = Env {
        container_id: id.clone(),
        ..Env::default()
    }
    .with_netns("");
    lab.plugin().del("bridge", &env, &lab.bridge_conf()).ok();
    if imp == Impl::Reference && !lab.rules_of(&id).is_empty() {
        // Upstream's DEL needs the netns to learn the addresses and leaks the rules; ours
        // finds them by name, so running our DEL cleans up what the reference left.
        eprintln!("note: the reference leaks masquerade rules on DEL without netns");
        lab.sb
            .plugin_in(Impl::Ours, &lab.node)
            .del("bridge", &env, &lab.bridge_conf())
            .ok();
    }
    assert!(
        lab.rules_of(&id).is_empty(),
        "rules left after DEL: {:?}",
        lab.rules_of(&id)
    );
    lab.plugin().del("bridge", &env, &lab.bridge_conf()).ok();
}

#[test]
fn masquerade_ours_iptables() {
    masquerade(Impl::Ours, Some("iptables"), 101);
}
#[test]
fn masquerade_ours_nftables() {
    masquerade(Impl::Ours, Some("nftables"), 102);
}
#[test]
fn masquerade_reference() {
    masquerade(Impl::Reference, None, 103);
}

// ---------------------------------------------------------------------------------------------
// 2. GC: ipMasq, portmap and firewall keep only the valid attachments' rules

fn gc(backend: &'static str, n: u8) {
    if skip("gc", Impl::Ours) {
        return;
    }
    let lab = Lab::new("masq-gc", Impl::Ours, Some(backend), n);
    let (a, b) = (NetNs::create(), NetNs::create());
    let (ida, idb) = (format!("gc-a-{n}"), format!("gc-b-{n}"));
    let ra = lab.attach(&a, &ida);
    let rb = lab.attach(&b, &idb);
    let pm = |port: u16, prev: &Value| {
        json!({
            "cniVersion": "1.0.0", "name": lab.net(), "type": "portmap", "backend": backend,
            "runtimeConfig": {"portMappings": [
                {"hostPort": port, "containerPort": 80, "protocol": "tcp"}]},
            "prevResult": prev,
        })
    };
    let fw = |prev: &Value| {
        json!({"cniVersion": "1.0.0", "name": lab.net(), "type": "firewall",
               "backend": backend, "prevResult": prev})
    };
    let p = lab.plugin();
    for (ns, id, r, port) in [(&a, &ida, &ra, 8081), (&b, &idb, &rb, 8082)] {
        let env = env_for(ns, id);
        p.add("portmap", &env, &pm(port, r)).ok();
        p.add("firewall", &env, &fw(r)).ok();
    }
    let ip_b = cont_ip(&rb, false);
    let filter_has = |ip: &str| {
        let mut t = lab.node.sh(&["iptables-save", "-t", "filter"]);
        t.push_str(&lab.node.sh(&["nft", "list", "ruleset"]));
        t.contains(&format!("{ip}/32")) || t.contains(&format!("{ip} "))
    };
    assert!(!lab.rules_of(&idb).is_empty() && filter_has(&ip_b));

    // GC naming both, or another network, removes nothing.
    for plugin in ["bridge", "portmap", "firewall"] {
        let conf = match plugin {
            "bridge" => lab.bridge_conf(),
            "portmap" => pm(8081, &Value::Null),
            _ => fw(&Value::Null),
        };
        let mut conf = conf;
        conf.as_object_mut().unwrap().remove("prevResult");
        p.gc(plugin, &lab.gc_conf(conf.clone(), &[&ida, &idb])).ok();
        let mut other = conf.clone();
        other["name"] = json!("some-other-net");
        p.gc(plugin, &lab.gc_conf(other, &[])).ok();
    }
    assert!(
        !lab.rules_of(&idb).is_empty() && filter_has(&ip_b),
        "GC removed valid rules"
    );

    // GC naming only A removes B's masquerading, port mappings and firewall rules.
    for plugin in ["bridge", "portmap", "firewall"] {
        let mut conf = match plugin {
            "bridge" => lab.bridge_conf(),
            "portmap" => pm(8081, &Value::Null),
            _ => fw(&Value::Null),
        };
        conf.as_object_mut().unwrap().remove("prevResult");
        p.gc(plugin, &lab.gc_conf(conf, &[&ida])).ok();
    }
    assert!(
        lab.rules_of(&idb).is_empty(),
        "B's rules after GC: {:?}",
        lab.rules_of(&idb)
    );
    assert!(!filter_has(&ip_b), "B's firewall rules after GC");
    assert!(!lab.rules_of(&ida).is_empty(), "A's rules went with GC");
    p.check("firewall", &env_for(&a, &ida), &fw(&ra)).ok();
    assert!(!p.check("firewall", &env_for(&b, &idb), &fw(&rb)).status_ok);
    // A's port mapping still works, B's is gone.
    let node_ip = format!("192.168.{n}.1");
    let _sa = serve(&a, "tcp", false, 80, "a");
    let _sb = serve(&b, "tcp", false, 80, "b");
    assert_answers(
        &lab.outside,
        "tcp",
        &node_ip,
        8081,
        "a",
        "A's hostPort after GC",
    );
    assert_silent(&lab.outside, "tcp", &node_ip, 8082, "B's hostPort after GC");
}

#[test]
fn gc_ours_iptables() {
    gc("iptables", 104);
}
#[test]
fn gc_ours_nftables() {
    gc("nftables", 105);
}

// ---------------------------------------------------------------------------------------------
// 3. Compatibility with the reference bridge (iptables)

/// The nat-table lines of the masquerade chain of `id`, with counters and the chain-specific
/// hash left as they are (both implementations derive them the same way).
fn masq_lines(lab: &Lab, id: &str) -> Vec<String> {
    let nat = lab.node.sh(&["iptables-save", "-t", "nat"]);
    let chain = nat
        .lines()
        .find(|l| l.starts_with("-A POSTROUTING") && l.contains(id))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no masquerade jump for {id}:\n{nat}"))
        .to_string();
    nat.lines()
        .filter(|l| l.contains(&chain))
        .map(str::to_string)
        .collect()
}

#[test]
fn compat_with_reference_bridge() {
    if skip("compat_with_reference_bridge", Impl::Reference) {
        return;
    }
    let ours = Lab::new("masq-compat-o", Impl::Ours, Some("iptables"), 106);
    let theirs = Lab::new("masq-compat-r", Impl::Reference, None, 106);
    let id = "masq-compat-106";
    let (co, cr) = (NetNs::create(), NetNs::create());
    ours.attach(&co, id);
    theirs.attach(&cr, id);
    // Same network name, container ID and subnet: the same chain, rules and comments.
    assert_eq!(masq_lines(&ours, id), masq_lines(&theirs, id));

    // Each one's DEL (without netns) removes the other's rules.
    let env = Env {
        container_id: id.into(),
        ..Env::default()
    }
    .with_netns("");
    theirs
        .sb
        .plugin_in(Impl::Ours, &theirs.node)
        .del("bridge", &env, &theirs.bridge_conf())
        .ok();
    assert!(
        theirs.rules_of(id).is_empty(),
        "reference rules left after our DEL"
    );
    let mut conf = ours.bridge_conf();
    conf.as_object_mut().unwrap().remove("ipMasqBackend");
    let out =
        ours.sb
            .plugin_in(Impl::Reference, &ours.node)
            .del("bridge", &env_for(&co, id), &conf);
    assert!(out.status_ok, "reference DEL: {out:?}");
    assert!(
        ours.rules_of(id).is_empty(),
        "our rules left after reference DEL"
    );
}
