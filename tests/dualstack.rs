//! The dual-stack matrix of issue 23: every chained plugin and the traffic through it, each
//! scenario run for IPv4, IPv6 and dual-stack (tests/common/family.rs) in its own lab (a node
//! namespace and a client namespace playing a second host, joined by a veth that carries both
//! families: tests/common/dual.rs), for cnibox on each netfilter backend and for the reference
//! plugins in /usr/lib/cni where Debian ships them:
//!
//! - bridge and ptp: container ↔ container and container → node traffic in each family;
//! - bridge `ipMasq`: a container reaches a host behind the node that has no route back, and
//!   that host sees the node's address as the source; for ours, GC keeps only the valid pod's
//!   masquerading in each family;
//! - portmap: a hostPort answers from the client over each family, hairpin from the pod, from
//!   another pod and from the node, and a mapping with an IPv6 `hostIP` only on that address;
//! - firewall: its accept rules carry the IPv6 addresses, and carry the traffic when the node's
//!   FORWARD policy drops; ingressPolicy `same-bridge` drops traffic between bridges in every
//!   family;
//! - bandwidth: qdiscs on the host side, gone after DEL;
//! - tuning: IPv6 (and IPv4) per-interface sysctls applied in the container;
//! - sbr: a rule per address and a table with the routes, gone after DEL;
//! - flannel: subnet.env with FLANNEL_IPV6_* gives the addresses and routes of each family.
//!
//! For ours, CHECK of portmap and firewall fails (code 999, the message saying what) once one
//! IPv6 rule of the container is deleted, and DEL still removes the rest; GC of portmap,
//! firewall and ipMasq removes a gone pod's rules of every family and keeps the valid pod's.
//!
//! Every chain: the result lists one address per family, each bindable the moment ADD returns;
//! CHECK after ADD passes (the reference's v1.1.1 CHECKs of portmap, and of tuning with an
//! `IFNAME` sysctl, are broken and not run; after sbr only sbr's is); DEL leaves no veth, no host-local reservation, no iptables / ip6tables / nftables rule
//! naming the container, and no qdisc.

mod common;
use common::dual::{
    PEER_REPLY, add_v6_link, client_addr, delete_rule_naming, masq_chain, netfilter_lines,
    node_addr, parse_peer, pod_veths, route_client_to_containers, rules_naming, shaping_left,
    v6_flags,
};
use common::family::{FAMILIES, Fam, assert_bindable, assert_result_family, reservations};
use common::lab::{Lab, OURS_IPTABLES, OURS_NFTABLES, OURS_UNSET, REFERENCE, Variant, skip};
use common::traffic::{assert_answers, assert_silent, env_for, serve, talk};
use common::wait::{poll, secs};
use common::{Env, Impl, NetNs, Output, with_prev};
use serde_json::{Value, json};
use std::net::IpAddr;
use std::path::PathBuf;

// ---------------------------------------------------------------------------------------------
// Chains and pods

/// Run `scenario` for every family at once, each in its own lab: the scenarios mostly wait
/// (neighbour discovery, probes that must time out), so three at a time cost little more than
/// one. A panic in any family fails the test with that family's message.
fn per_family(scenario: impl Fn(Fam) + Sync) {
    std::thread::scope(|s| {
        let runs: Vec<_> = FAMILIES
            .iter()
            .map(|&fam| {
                let f = &scenario;
                std::thread::Builder::new()
                    .name(fam.tag().into())
                    .spawn_scoped(s, move || f(fam))
                    .expect("spawn a family's thread")
            })
            .collect();
        let failed: Vec<&str> = runs
            .into_iter()
            .zip(FAMILIES)
            .filter_map(|(r, fam)| r.join().is_err().then_some(fam.tag()))
            .collect();
        assert!(failed.is_empty(), "failed in {failed:?} (messages above)");
    });
}

/// One plugin of a chain: its type and its config (without `prevResult`).
struct Link {
    kind: &'static str,
    conf: Value,
}

/// A container namespace attached through a chain.
struct Pod {
    ns: NetNs,
    env: Env,
    result: Value,
    ips: Vec<IpAddr>,
}

/// One family's lab: the shared lab, the family, the network name and its IPAM directory.
struct Net {
    lab: Lab,
    fam: Fam,
    name: String,
}

impl Net {
    fn new(tag: &str, v: Variant, fam: Fam) -> Net {
        let lab = Lab::new(&format!("{tag}-{}", fam.tag()), v);
        add_v6_link(&lab);
        Net {
            name: format!("ds{}", lab.n),
            lab,
            fam,
        }
    }

    fn ipam_dir(&self) -> PathBuf {
        self.lab.sb.path("ipam")
    }

    /// host-local's reservations of this network.
    fn reservations(&self) -> usize {
        reservations(&self.ipam_dir().join(&self.name))
    }

    fn bridge_name(&self) -> String {
        format!("cnids{}", self.lab.n)
    }

    /// A bridge with the gateways on it and the family's default routes; `extra` merged in.
    fn bridge(&self, extra: Value) -> Link {
        let mut c = json!({
            "cniVersion": "1.0.0",
            "name": self.name,
            "type": "bridge",
            "bridge": self.bridge_name(),
            "isGateway": true,
            "ipam": self.fam.host_local(self.lab.n, &self.ipam_dir()),
        });
        merge(&mut c, extra);
        Link {
            kind: "bridge",
            conf: c,
        }
    }

    /// A second bridge network on the same node, numbered `k` (from `unique_n`): bridge
    /// `cnidsK`, network `dsK`, the family's subnets of `k`.
    fn other_bridge(&self, k: u8, extra: Value) -> Link {
        let mut c = json!({
            "cniVersion": "1.0.0",
            "name": format!("ds{k}"),
            "type": "bridge",
            "bridge": format!("cnids{k}"),
            "isGateway": true,
            "ipam": self.fam.host_local(k, &self.ipam_dir()),
        });
        merge(&mut c, extra);
        Link {
            kind: "bridge",
            conf: c,
        }
    }

    /// A chained plugin `kind` of this network with `extra` keys.
    fn chained(&self, kind: &'static str, extra: Value) -> Link {
        let mut c = json!({"cniVersion": "1.0.0", "name": self.name, "type": kind});
        merge(&mut c, extra);
        Link { kind, conf: c }
    }

    fn plugin(&self) -> common::Plugin<'_> {
        self.lab.plugin()
    }

    /// ADD through `chain` for a new container `id`: the result lists one address per family,
    /// each usable at once; every chained plugin passes the addresses through.
    #[track_caller]
    fn add(&self, chain: &[Link], id: &str) -> Pod {
        let ns = NetNs::create();
        ns.sh(&["ip", "link", "set", "lo", "up"]);
        let env = env_for(&ns, &format!("{id}-{}", self.lab.n));
        let mut prev: Option<Value> = None;
        for l in chain {
            let conf = match &prev {
                Some(p) => with_prev(&l.conf, p),
                None => l.conf.clone(),
            };
            let out = self.plugin().add(l.kind, &env, &conf);
            let res = self.ok(&out, l.kind, "ADD").clone();
            if let Some(p) = &prev {
                assert_eq!(res["ips"], p["ips"], "{} ADD changed the addresses", l.kind);
            }
            prev = Some(res);
        }
        let result = prev.expect("a chain has plugins");
        let ips = assert_result_family(&result, self.fam);
        assert_bindable(&ns, &ips);
        Pod {
            ns,
            env,
            result,
            ips,
        }
    }

    /// CHECK through the chain with the final result: every plugin passes.
    #[track_caller]
    fn check(&self, chain: &[Link], pod: &Pod) {
        for l in chain {
            // The reference portmap (v1.1.1) fails CHECK whenever ip6tables is usable (see
            // tests/portmap.rs `pm_check`); ours must pass.
            if self.lab.imp == Impl::Reference && l.kind == "portmap" {
                continue;
            }
            // The reference tuning (v1.1.1) CHECK reads the sysctl path with `IFNAME` left in
            // ("open /proc/sys/net/ipv4/conf/IFNAME/rp_filter: no such file"); ours must pass.
            if self.lab.imp == Impl::Reference
                && l.kind == "tuning"
                && l.conf.to_string().contains("IFNAME")
            {
                continue;
            }
            let out = self
                .plugin()
                .check(l.kind, &pod.env, &with_prev(&l.conf, &pod.result));
            self.ok(&out, l.kind, "CHECK");
        }
    }

    /// DEL through the chain in reverse with the final result.
    #[track_caller]
    fn del(&self, chain: &[Link], pod: &Pod) {
        for l in chain.iter().rev() {
            let out = self
                .plugin()
                .del(l.kind, &pod.env, &with_prev(&l.conf, &pod.result));
            self.ok(&out, l.kind, "DEL");
        }
    }

    #[track_caller]
    fn ok<'o>(&self, out: &'o Output, kind: &str, cmd: &str) -> &'o Value {
        assert!(
            out.status_ok,
            "{} {}: {kind} {cmd}: {out:?}",
            self.lab.variant().tag(),
            self.fam.tag()
        );
        &out.json
    }

    /// After every pod's DEL: no veth, reservation, rule naming a pod (ID or address), or qdisc.
    #[track_caller]
    fn assert_clean(&self, pods: &[&Pod]) {
        let what = format!("{} {}", self.lab.variant().tag(), self.fam.tag());
        assert_eq!(
            pod_veths(&self.lab.node),
            Vec::<String>::new(),
            "{what}: veths left"
        );
        assert_eq!(self.reservations(), 0, "{what}: reservations left");
        let needles: Vec<String> = pods
            .iter()
            .flat_map(|p| {
                p.ips
                    .iter()
                    .map(|a| a.to_string())
                    .chain([p.env.container_id.clone()])
            })
            .collect();
        assert_eq!(
            rules_naming(&self.lab.node, &needles),
            Vec::<String>::new(),
            "{what}: rules left"
        );
        assert_eq!(
            shaping_left(&self.lab.node),
            Vec::<String>::new(),
            "{what}: qdiscs left"
        );
    }
}

fn merge(c: &mut Value, extra: Value) {
    if let Value::Object(m) = extra {
        for (k, v) in m {
            c[k] = v;
        }
    }
}

/// The pod's address of a family.
fn addr_of(pod: &Pod, v6: bool) -> String {
    pod.ips
        .iter()
        .find(|a| a.is_ipv6() == v6)
        .unwrap_or_else(|| {
            panic!(
                "no {} address in {}",
                if v6 { "IPv6" } else { "IPv4" },
                pod.result
            )
        })
        .to_string()
}

/// The gateway of a family in the result (`ips[].gateway`).
fn gateway_of(pod: &Pod, v6: bool) -> String {
    pod.result["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["gateway"].as_str())
        .find(|g| g.contains(':') == v6)
        .unwrap_or_else(|| panic!("no gateway of that family in {}", pod.result))
        .to_string()
}

/// The backend keys of a variant for bridge (`ipMasqBackend`) and the netfilter plugins
/// (`backend`).
fn backend_key(v: Variant, key: &str) -> Value {
    match v.backend {
        Some(b) => json!({ key: b }),
        None => json!({}),
    }
}

// ---------------------------------------------------------------------------------------------
// 1. bridge and ptp: container <-> container, container -> node

fn pod_traffic(net: &Net, a: &Pod, b: &Pod) {
    let what = format!("{} {}", net.lab.variant().tag(), net.fam.tag());
    for v6 in v6_flags(net.fam) {
        let _srv = serve(&b.ns, "tcp", v6, 80, "b");
        assert_answers(
            &a.ns,
            "tcp",
            &addr_of(b, v6),
            80,
            "b",
            &format!("{what}: pod a -> pod b"),
        );
        let _node = serve(&net.lab.node, "tcp", v6, 81, "node");
        assert_answers(
            &a.ns,
            "tcp",
            &gateway_of(a, v6),
            81,
            "node",
            &format!("{what}: pod a -> node"),
        );
    }
}

fn bridge_traffic(v: Variant) {
    if skip("bridge_traffic", v, &["bridge", "host-local"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-bridge", v, fam);
        let chain = [net.bridge(json!({}))];
        let (a, b) = (net.add(&chain, "a"), net.add(&chain, "b"));
        pod_traffic(&net, &a, &b);
        net.check(&chain, &a);
        net.del(&chain, &a);
        net.del(&chain, &b);
        net.assert_clean(&[&a, &b]);
    });
}

variants!(bridge_traffic:
    bridge_traffic_reference => REFERENCE,
    bridge_traffic_ours => OURS_UNSET,
);

/// ptp: each pod on its own veth, the node routing between them.
fn ptp_traffic(v: Variant) {
    if skip("ptp_traffic", v, &["ptp", "host-local"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-ptp", v, fam);
        let chain = [Link {
            kind: "ptp",
            conf: json!({
                "cniVersion": "1.0.0",
                "name": net.name,
                "type": "ptp",
                "ipMasq": false,
                "ipam": fam.host_local(net.lab.n, &net.ipam_dir()),
            }),
        }];
        let (a, b) = (net.add(&chain, "a"), net.add(&chain, "b"));
        pod_traffic(&net, &a, &b);
        net.check(&chain, &a);
        net.del(&chain, &a);
        net.del(&chain, &b);
        net.assert_clean(&[&a, &b]);
    });
}

variants!(ptp_traffic:
    ptp_traffic_reference => REFERENCE,
    ptp_traffic_ours => OURS_UNSET,
);

// ---------------------------------------------------------------------------------------------
// 2. bridge ipMasq: the far side sees the node's address

fn masquerade(v: Variant) {
    if skip("masquerade", v, &["bridge", "host-local"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-masq", v, fam);
        let mut extra = json!({"ipMasq": true});
        merge(&mut extra, backend_key(v, "ipMasqBackend"));
        let chain = [net.bridge(extra)];
        let pod = net.add(&chain, "m");
        let what = format!("{} {}", v.tag(), fam.tag());
        let mut servers = Vec::new();
        for v6 in v6_flags(fam) {
            // The outside host has no route to the container subnets: only a masqueraded
            // connection gets an answer, and the answer names the source it saw.
            servers.push(serve(&net.lab.client, "tcp", v6, 9000, PEER_REPLY));
            let far = client_addr(&net.lab, v6);
            let seen = retry_talk(&pod.ns, &far, 9000);
            let want: IpAddr = node_addr(&net.lab, v6).parse().unwrap();
            assert_eq!(
                seen.as_deref().and_then(parse_peer),
                Some(want),
                "{what}: the outside host saw {seen:?} as the source, not the node's {want}"
            );
        }
        if v.imp == Impl::Ours {
            // GC with only `pod` valid: a second pod's masquerading goes in every family
            // (it is cut off from the outside host), `pod` keeps its own.
            let gone = net.add(&chain, "g");
            let mut gc = chain[0].conf.clone();
            gc["cniVersion"] = json!("1.1.0");
            gc["cni.dev/valid-attachments"] =
                json!([{"containerID": pod.env.container_id, "ifname": "eth0"}]);
            net.plugin().gc("bridge", &gc).ok();
            let chain_of = |p: &Pod| masq_chain(&net.name, &p.env.container_id);
            let left: Vec<String> = netfilter_lines(&net.lab.node)
                .into_iter()
                .filter(|l| l.contains(&gone.env.container_id) || l.contains(&chain_of(&gone)))
                .collect();
            assert_eq!(left, Vec::<String>::new(), "{what}: rules left after GC");
            if v.backend == Some("iptables") {
                let nat = netfilter_lines(&net.lab.node);
                assert!(
                    nat.iter().any(|l| l.contains(&chain_of(&pod))),
                    "{what}: GC removed the valid pod's chain"
                );
            }
            for v6 in v6_flags(fam) {
                let far = client_addr(&net.lab, v6);
                assert_silent(&gone.ns, "tcp", &far, 9000, &format!("{what}: after GC"));
                assert!(
                    retry_talk(&pod.ns, &far, 9000).is_some(),
                    "{what}: the valid pod lost its masquerading in GC"
                );
            }
            net.del(&chain, &gone);
        }
        drop(servers);
        net.check(&chain, &pod);
        net.del(&chain, &pod);
        net.assert_clean(&[&pod]);
    });
}

/// GC of `kind` with only `keep` valid: a second pod attached through the same chain loses every
/// rule naming it or its addresses, in each family.
#[track_caller]
fn gc_keeps_only(net: &Net, chain: &[Link], keep: &Pod, kind: &str) {
    let what = format!("{} {} {kind} GC", net.lab.variant().tag(), net.fam.tag());
    let mut chain2: Vec<Link> = chain
        .iter()
        .map(|l| Link {
            kind: l.kind,
            conf: l.conf.clone(),
        })
        .collect();
    // The second pod maps another host port, so both can coexist.
    if let Some(maps) = chain2
        .iter_mut()
        .find(|l| l.kind == "portmap")
        .and_then(|l| l.conf["runtimeConfig"]["portMappings"].as_array_mut())
    {
        for m in maps {
            m["hostPort"] = json!(m["hostPort"].as_u64().unwrap() + 100);
        }
    }
    let gone = net.add(&chain2, "gc");
    let needles: Vec<String> = gone
        .ips
        .iter()
        .map(|a| a.to_string())
        .chain([gone.env.container_id.clone()])
        .collect();
    assert!(
        !rules_naming(&net.lab.node, &needles).is_empty(),
        "{what}: no rule of the second pod before GC"
    );
    let conf = &chain2.iter().find(|l| l.kind == kind).unwrap().conf;
    let mut gc = conf.clone();
    gc["cniVersion"] = json!("1.1.0");
    gc["cni.dev/valid-attachments"] =
        json!([{"containerID": keep.env.container_id, "ifname": "eth0"}]);
    net.plugin().gc(kind, &gc).ok();
    let left: Vec<String> = netfilter_lines(&net.lab.node)
        .into_iter()
        .filter(|l| needles.iter().any(|n| l.contains(n.as_str())))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "{what}: rules left");
    net.del(&chain2, &gone);
}

/// `talk` retried for a few seconds (neighbour discovery on a fresh link); the last reply.
fn retry_talk(from: &NetNs, host: &str, port: u16) -> Option<String> {
    poll(secs(15), || talk(from, "tcp", host, port))
}

variants!(masquerade:
    masquerade_reference => REFERENCE,
    masquerade_ours_iptables => OURS_IPTABLES,
    masquerade_ours_nftables => OURS_NFTABLES,
);

// ---------------------------------------------------------------------------------------------
// 3. portmap: a hostPort from outside in each family

fn portmap(v: Variant) {
    if skip("portmap", v, &["bridge", "host-local", "portmap"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-portmap", v, fam);
        let mut pm = json!({
            "snat": true,
            "runtimeConfig": {"portMappings": [
                {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
                {"hostPort": 8053, "containerPort": 53, "protocol": "udp"},
            ]},
        });
        if fam.has_v6() {
            // A mapping bound to the node's IPv6 address only.
            pm["runtimeConfig"]["portMappings"]
                .as_array_mut()
                .unwrap()
                .push(
                    json!({"hostPort": 8081, "containerPort": 80, "protocol": "tcp",
                             "hostIP": node_addr(&net.lab, true)}),
                );
        }
        merge(&mut pm, backend_key(v, "backend"));
        let chain = [
            net.bridge(json!({"hairpinMode": true})),
            net.chained("portmap", pm),
        ];
        let pod = net.add(&chain, "p");
        let what = format!("{} {}", v.tag(), fam.tag());
        let mut servers = Vec::new();
        for v6 in v6_flags(fam) {
            let tag = if v6 { "6" } else { "4" };
            servers.push(serve(&pod.ns, "tcp", v6, 80, &format!("tcp{tag}")));
            servers.push(serve(&pod.ns, "udp", v6, 53, &format!("udp{tag}")));
        }
        for v6 in v6_flags(fam) {
            let tag = if v6 { "6" } else { "4" };
            let host = node_addr(&net.lab, v6);
            assert_answers(
                &net.lab.client,
                "tcp",
                &host,
                8080,
                &format!("tcp{tag}"),
                &format!("{what}: TCP hostPort"),
            );
            assert_answers(
                &net.lab.client,
                "udp",
                &host,
                8053,
                &format!("udp{tag}"),
                &format!("{what}: UDP hostPort"),
            );
        }
        if fam.has_v6() {
            assert_answers(
                &net.lab.client,
                "tcp",
                &node_addr(&net.lab, true),
                8081,
                "tcp6",
                &format!("{what}: IPv6 hostIP mapping"),
            );
        }
        if fam == Fam::Dual {
            assert_silent(
                &net.lab.client,
                "tcp",
                &node_addr(&net.lab, false),
                8081,
                &format!("{what}: the IPv6 hostIP mapping on the IPv4 address"),
            );
        }
        // Hairpin: the pod reaches its own hostPort through the node's address (bridge
        // hairpinMode, portmap's snat), and so do a second pod and the node itself.
        let other = net.add(&chain[..1], "o");
        for v6 in v6_flags(fam) {
            let tag = if v6 { "6" } else { "4" };
            let host = node_addr(&net.lab, v6);
            for (who, from) in [
                ("itself", &pod.ns),
                ("another pod", &other.ns),
                ("the node", &net.lab.node),
            ] {
                assert_answers(
                    from,
                    "tcp",
                    &host,
                    8080,
                    &format!("tcp{tag}"),
                    &format!("{what}: hairpin from {who}"),
                );
            }
        }
        net.del(&chain[..1], &other);
        if v.imp == Impl::Ours {
            gc_keeps_only(&net, &chain, &pod, "portmap");
            // The valid pod's hostPort still answers in every family.
            for v6 in v6_flags(fam) {
                let tag = if v6 { "6" } else { "4" };
                assert_answers(
                    &net.lab.client,
                    "tcp",
                    &node_addr(&net.lab, v6),
                    8080,
                    &format!("tcp{tag}"),
                    &format!("{what}: the valid pod's hostPort after GC"),
                );
            }
        }
        net.check(&chain, &pod);
        if v.imp == Impl::Ours && fam.has_v6() {
            let nft = v.backend == Some("nftables");
            let gone = delete_rule_naming(&net.lab.node, nft, &addr_of(&pod, true));
            let out =
                net.plugin()
                    .check("portmap", &pod.env, &with_prev(&chain[1].conf, &pod.result));
            let msg = out.err(999);
            assert!(
                if nft {
                    msg.starts_with("missing hostport rules in ")
                } else {
                    msg.ends_with(" not found in table nat")
                },
                "{what}: CHECK after deleting `{gone}`: {msg}"
            );
        }
        net.del(&chain, &pod);
        for v6 in v6_flags(fam) {
            assert_silent(
                &net.lab.client,
                "tcp",
                &node_addr(&net.lab, v6),
                8080,
                &format!("{what}: hostPort after DEL"),
            );
        }
        drop(servers);
        net.assert_clean(&[&pod, &other]);
    });
}

variants!(portmap:
    portmap_reference => REFERENCE,
    portmap_ours_iptables => OURS_IPTABLES,
    portmap_ours_nftables => OURS_NFTABLES,
);

// ---------------------------------------------------------------------------------------------
// 4. firewall with IPv6 addresses

fn firewall(v: Variant) {
    if skip("firewall", v, &["bridge", "host-local", "firewall"]) {
        return;
    }
    let nft = v.backend == Some("nftables");
    per_family(|fam| {
        let net = Net::new("ds-firewall", v, fam);
        route_client_to_containers(&net.lab, fam);
        // With iptables, the node drops forwarded traffic unless a rule accepts it: the
        // firewall's rules must carry each family's traffic. (With nftables an accept in the
        // firewall's table cannot override another table's drop, so there the rules are read.)
        if !nft {
            for prog in ["iptables", "ip6tables"] {
                net.lab.node.sh(&[prog, "-P", "FORWARD", "DROP"]);
            }
        }
        let chain = [
            net.bridge(json!({})),
            net.chained("firewall", backend_key(v, "backend")),
        ];
        let pod = net.add(&chain, "f");
        let what = format!("{} {}", v.tag(), fam.tag());
        for a in &pod.ips {
            let s = a.to_string();
            if nft {
                let table =
                    net.lab
                        .node
                        .sh(&["nft", "list", "table", "inet", "cni_plugins_firewall"]);
                let fam_kw = if a.is_ipv6() { "ip6" } else { "ip" };
                for dir in ["saddr", "daddr"] {
                    assert!(
                        table.contains(&format!("{fam_kw} {dir} {s} ")),
                        "{what}: no `{fam_kw} {dir} {s}` rule:\n{table}"
                    );
                }
            } else {
                let prog = if a.is_ipv6() {
                    "ip6tables-save"
                } else {
                    "iptables-save"
                };
                let plen = if a.is_ipv6() { 128 } else { 32 };
                let rules = net.lab.node.sh(&[prog, "-t", "filter"]);
                for rule in [
                    format!("-A CNI-FORWARD -s {s}/{plen} -j ACCEPT"),
                    format!(
                        "-A CNI-FORWARD -d {s}/{plen} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
                    ),
                ] {
                    assert!(rules.contains(&rule), "{what}: no `{rule}`:\n{rules}");
                }
            }
        }
        let mut servers = Vec::new();
        for v6 in v6_flags(fam) {
            servers.push(serve(&net.lab.client, "tcp", v6, 9000, "outside"));
            assert_answers(
                &pod.ns,
                "tcp",
                &client_addr(&net.lab, v6),
                9000,
                "outside",
                &format!("{what}: pod -> outside through the firewall"),
            );
        }
        net.check(&chain, &pod);
        if v.imp == Impl::Ours && fam.has_v6() {
            let a6 = addr_of(&pod, true);
            let gone = delete_rule_naming(&net.lab.node, nft, &a6);
            let out = net.plugin().check(
                "firewall",
                &pod.env,
                &with_prev(&chain[1].conf, &pod.result),
            );
            let msg = out.err(999);
            let want = if nft {
                format!(
                    "expected firewall rules for {} in nftables table",
                    pod.env.container_id
                )
            } else {
                "expected CNI-FORWARD rule \"".to_string()
            };
            assert!(
                msg.starts_with(&want) && (nft || msg.contains(&a6)),
                "{what}: CHECK after deleting `{gone}`: {msg}"
            );
        }
        if v.imp == Impl::Ours {
            gc_keeps_only(&net, &chain, &pod, "firewall");
            let lines = netfilter_lines(&net.lab.node);
            for a in &pod.ips {
                assert!(
                    lines.iter().any(|l| l.contains(&a.to_string())),
                    "{what}: GC removed the valid pod's firewall rules for {a}"
                );
            }
        }
        // Without the firewall's rules the drop policy applies again.
        let fw = &chain[1..];
        net.del(fw, &pod);
        if !nft {
            for v6 in v6_flags(fam) {
                assert_silent(
                    &pod.ns,
                    "tcp",
                    &client_addr(&net.lab, v6),
                    9000,
                    &format!("{what}: pod -> outside after the firewall's DEL"),
                );
            }
        }
        net.del(&chain[..1], &pod);
        drop(servers);
        net.assert_clean(&[&pod]);
    });
}

variants!(firewall:
    firewall_reference => REFERENCE,
    firewall_ours_iptables => OURS_IPTABLES,
    firewall_ours_nftables => OURS_NFTABLES,
);

/// ingressPolicy `same-bridge` with IPv6: two bridges reach each other through the node until a
/// firewall attachment with that policy is on each; then traffic between them is dropped in
/// every family while pods on one bridge still talk.
fn isolation(v: Variant) {
    if skip("isolation", v, &["bridge", "host-local", "firewall"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-isolation", v, fam);
        let k = common::lab::unique_n();
        let mut fw = backend_key(v, "backend");
        fw["ingressPolicy"] = json!("same-bridge");
        let (bra, brb) = (net.bridge(json!({})), net.other_bridge(k, json!({})));
        let fwa = net.chained("firewall", fw.clone());
        let mut fwb = net.chained("firewall", fw);
        fwb.conf["name"] = brb.conf["name"].clone();
        let what = format!("{} {}", v.tag(), fam.tag());
        let a1 = net.add(std::slice::from_ref(&bra), "a1");
        let b1 = net.add(std::slice::from_ref(&brb), "b1");
        let mut servers = Vec::new();
        for v6 in v6_flags(fam) {
            servers.push(serve(&b1.ns, "tcp", v6, 80, "b1"));
            servers.push(serve(&a1.ns, "tcp", v6, 80, "a1"));
            assert_answers(
                &a1.ns,
                "tcp",
                &addr_of(&b1, v6),
                80,
                "b1",
                &format!("{what}: across bridges before isolation"),
            );
        }
        let chain_a = [bra, fwa];
        let chain_b = [brb, fwb];
        let a2 = net.add(&chain_a, "a2");
        let b2 = net.add(&chain_b, "b2");
        for v6 in v6_flags(fam) {
            assert_answers(
                &a2.ns,
                "tcp",
                &addr_of(&a1, v6),
                80,
                "a1",
                &format!("{what}: within a bridge"),
            );
            let tag = format!("{what}: across isolated bridges");
            assert_silent(&a1.ns, "tcp", &addr_of(&b1, v6), 80, &tag);
            assert_silent(&b1.ns, "tcp", &addr_of(&a1, v6), 80, &tag);
        }
        drop(servers);
        net.del(&chain_a, &a2);
        net.del(&chain_b, &b2);
        net.del(&chain_a[..1], &a1);
        net.del(&chain_b[..1], &b1);
        net.assert_clean(&[&a1, &a2, &b1, &b2]);
        assert_eq!(
            reservations(&net.ipam_dir().join(format!("ds{k}"))),
            0,
            "{what}: reservations left on the second network"
        );
    });
}

variants!(isolation:
    isolation_reference => REFERENCE,
    isolation_ours_iptables => OURS_IPTABLES,
    isolation_ours_nftables => OURS_NFTABLES,
);

// ---------------------------------------------------------------------------------------------
// 5. bandwidth, tuning, sbr on each family

fn bandwidth(v: Variant) {
    if skip("bandwidth", v, &["bridge", "host-local", "bandwidth"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-bandwidth", v, fam);
        let chain = [
            net.bridge(json!({})),
            net.chained(
                "bandwidth",
                json!({"ingressRate": 8000000, "ingressBurst": 80000,
                       "egressRate": 8000000, "egressBurst": 80000}),
            ),
        ];
        let (a, b) = (net.add(&chain, "a"), net.add(&chain, "b"));
        let what = format!("{} {}", v.tag(), fam.tag());
        let shaping = shaping_left(&net.lab.node);
        // Per pod: a tbf on the host veth (ingress) and an ifb with its tbf (egress).
        assert_eq!(
            shaping
                .iter()
                .filter(|l| l.starts_with("qdisc tbf"))
                .count(),
            4,
            "{what}: tbf qdiscs: {shaping:#?}"
        );
        pod_traffic(&net, &a, &b);
        net.check(&chain, &a);
        net.del(&chain, &a);
        net.del(&chain, &b);
        net.assert_clean(&[&a, &b]);
    });
}

variants!(bandwidth:
    bandwidth_reference => REFERENCE,
    bandwidth_ours => OURS_UNSET,
);

fn tuning(v: Variant) {
    if skip("tuning", v, &["bridge", "host-local", "tuning"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-tuning", v, fam);
        let mut sysctls = Vec::new();
        if fam.has_v4() {
            sysctls.push(("net.ipv4.conf.IFNAME.rp_filter", "2"));
        }
        if fam.has_v6() {
            sysctls.push(("net.ipv6.conf.IFNAME.hop_limit", "33"));
            sysctls.push(("net.ipv6.conf.IFNAME.accept_ra", "0"));
        }
        let map: serde_json::Map<String, Value> = sysctls
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let chain = [
            net.bridge(json!({})),
            net.chained("tuning", json!({ "sysctl": map })),
        ];
        let pod = net.add(&chain, "t");
        for (k, want) in &sysctls {
            let key = k.replace("IFNAME", "eth0");
            let got = pod.ns.sh(&["sysctl", "-n", &key]);
            assert_eq!(
                got.trim(),
                *want,
                "{} {}: {key} in the container",
                v.tag(),
                fam.tag()
            );
        }
        net.check(&chain, &pod);
        net.del(&chain, &pod);
        net.assert_clean(&[&pod]);
    });
}

variants!(tuning:
    tuning_reference => REFERENCE,
    tuning_ours => OURS_UNSET,
);

fn sbr(v: Variant) {
    if skip("sbr", v, &["bridge", "host-local", "sbr"]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-sbr", v, fam);
        let chain = [net.bridge(json!({})), net.chained("sbr", json!({}))];
        let pod = net.add(&chain, "s");
        let what = format!("{} {}", v.tag(), fam.tag());
        for v6 in v6_flags(fam) {
            let f = if v6 { "-6" } else { "-4" };
            let a = addr_of(&pod, v6);
            let rules = pod.ns.sh(&["ip", f, "rule"]);
            let line = rules
                .lines()
                .find(|l| l.contains(&format!("from {a} lookup ")))
                .unwrap_or_else(|| panic!("{what}: no rule from {a}:\n{rules}"));
            let table = line.rsplit(' ').next().unwrap().trim().to_string();
            let routes = pod.ns.sh(&["ip", f, "route", "show", "table", &table]);
            let gw = gateway_of(&pod, v6);
            assert!(
                routes.contains(&format!("default via {gw} dev eth0")),
                "{what}: table {table} has no default route via {gw}:\n{routes}"
            );
            // The main table lost the interface's routes: traffic from the address goes by
            // the table, and it still reaches the gateway.
            assert!(
                pings_from(&pod.ns, &a, &gw),
                "{what}: no ping from {a} to {gw} by table {table}"
            );
        }
        // bridge's CHECK looks for its routes in the main table, where sbr took them from
        // (the reference fails it the same way: "Failed to find Gateway"): CHECK sbr itself.
        net.check(&chain[1..], &pod);
        net.del(&chain, &pod);
        // DEL removes the rules (the container is still there to look at).
        for v6 in v6_flags(fam) {
            let f = if v6 { "-6" } else { "-4" };
            let a = addr_of(&pod, v6);
            let rules = pod.ns.sh(&["ip", f, "rule"]);
            assert!(
                !rules.contains(&format!("from {a} ")),
                "{what}: sbr rule of {a} left:\n{rules}"
            );
        }
        net.assert_clean(&[&pod]);
    });
}

variants!(sbr:
    sbr_reference => REFERENCE,
    sbr_ours => OURS_UNSET,
);

/// Whether one of a few pings from source address `src` to `dst` is answered.
fn pings_from(ns: &NetNs, src: &str, dst: &str) -> bool {
    (0..10).any(|_| ns.exec(&["ping", "-c1", "-W1", "-I", src, dst]).status_ok)
}

// ---------------------------------------------------------------------------------------------
// 6. flannel with a dual-stack subnet.env

#[test]
fn flannel_families() {
    if skip("flannel_families", OURS_UNSET, &[]) {
        return;
    }
    per_family(|fam| {
        let net = Net::new("ds-flannel", OURS_UNSET, fam);
        let n = net.lab.n;
        let mut env = String::from("FLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\n");
        if fam.has_v4() {
            env += &format!("FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.7.1/24\n");
        }
        if fam.has_v6() {
            env += &format!(
                "FLANNEL_IPV6_NETWORK=fd00:{n}::/56\nFLANNEL_IPV6_SUBNET=fd00:{n}:0:7::1/64\n"
            );
        }
        let subnet_env = net.lab.sb.path("subnet.env");
        std::fs::write(&subnet_env, env).unwrap();
        let chain = [net.chained(
            "flannel",
            json!({
                "subnetFile": subnet_env,
                "dataDir": net.lab.sb.path("flannel"),
                "ipam": {"dataDir": net.ipam_dir()},
                "delegate": {"bridge": net.bridge_name()},
            }),
        )];
        let (a, b) = (net.add(&chain, "a"), net.add(&chain, "b"));
        let what = format!("flannel {}", fam.tag());
        for v6 in v6_flags(fam) {
            let (prefix, network, gw) = if v6 {
                (
                    format!("fd00:{n}:0:7:"),
                    format!("fd00:{n}::/56"),
                    format!("fd00:{n}:0:7::1"),
                )
            } else {
                (
                    format!("10.{n}.7."),
                    format!("10.{n}.0.0/16"),
                    format!("10.{n}.7.1"),
                )
            };
            assert!(
                addr_of(&a, v6).starts_with(&prefix),
                "{what}: address outside the lease: {}",
                a.result
            );
            let routes = a.result["routes"].as_array().cloned().unwrap_or_default();
            assert!(
                routes.iter().any(|r| r["dst"] == json!(network)),
                "{what}: no route to {network} in {}",
                a.result
            );
            let f = if v6 { "-6" } else { "-4" };
            let table = a.ns.sh(&["ip", f, "route"]);
            assert!(
                table.contains(&format!("{network} via {gw} dev eth0")),
                "{what}: route to {network} not in the container:\n{table}"
            );
        }
        pod_traffic(&net, &a, &b);
        net.check(&chain, &a);
        net.del(&chain, &a);
        net.del(&chain, &b);
        net.assert_clean(&[&a, &b]);
        let stored = std::fs::read_dir(net.lab.sb.path("flannel"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(stored, 0, "{what}: stored delegate configs left");
    });
}
