//! GC of every netfilter user at once, inside a throwaway "node" namespace: two containers with
//! bridge ipMasq, a port mapping and firewall rules each; GC naming both (or another network)
//! removes nothing, GC naming one removes the other's masquerading, DNAT and firewall rules,
//! and the remaining container's port mapping still answers. Both backends. (ipMasq alone, its
//! traffic and its compatibility with the reference: tests/ipmasq.rs.)

mod common;
use common::lab::{Lab, OURS_IPTABLES, OURS_NFTABLES, Variant, skip};
use common::traffic::*;
use common::*;
use serde_json::{Value, json};

/// The lab's node and client (the "outside" host: no route back to 10.N.0.0/24), with this
/// file's masquerading bridge network.
impl Lab {
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

// ---------------------------------------------------------------------------------------------
// GC: ipMasq, portmap and firewall keep only the valid attachments' rules

fn gc(v: Variant) {
    if skip("gc", v, &[]) {
        return;
    }
    let lab = Lab::new("masq-gc", v);
    let (n, backend) = (lab.n, v.backend);
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
    // Both host ports work before GC, so B's silence after it is GC's doing.
    let node_ip = format!("192.168.{n}.1");
    let _sa = serve(&a, "tcp", false, 80, "a");
    let _sb = serve(&b, "tcp", false, 80, "b");
    assert_answers(
        &lab.client,
        "tcp",
        &node_ip,
        8082,
        "b",
        "B's hostPort before GC",
    );

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
    let msg = p.check("firewall", &env_for(&b, &idb), &fw(&rb)).err(999);
    // B's rules are gone: CHECK names what it misses (an address rule, or B's nftables rules).
    assert!(
        msg.contains("not found") && (msg.contains(&ip_b) || msg.contains(&idb)),
        "B's firewall CHECK after GC: {msg}"
    );
    // A's port mapping still works, B's is gone.
    assert_answers(
        &lab.client,
        "tcp",
        &node_ip,
        8081,
        "a",
        "A's hostPort after GC",
    );
    assert_silent(&lab.client, "tcp", &node_ip, 8082, "B's hostPort after GC");
}

variants!(gc:
    gc_ours_iptables => OURS_IPTABLES,
    gc_ours_nftables => OURS_NFTABLES,
);
