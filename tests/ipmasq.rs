//! bridge `ipMasq` (src/netfilter/masq.rs) end to end, inside throwaway "node" namespaces, for
//! ours with `ipMasqBackend` iptables / nftables / unset and the reference bridge (iptables):
//!
//! 1. traffic: a container reaches an "outside" host with no route back to the container subnet
//!    only through masquerading (the outside and conntrack see the node's address); a neighbour
//!    on the same bridge without ipMasq cannot; after DEL the container is cut off again;
//! 2. rules: the exact iptables nat layout / nftables rules (names and comments recomputed here
//!    from sha512), all gone after DEL with an empty CNI_NETNS, after the netns was deleted, and
//!    with the other backend in the DEL config; DEL twice is fine; parallel ADD/DEL;
//!    DEL by recorded nftables handles / prevResult addresses, safe when those hints are wrong;
//! 3. GC with `cni.dev/valid-attachments` keeps the valid container's rules only;
//! 4. the reference's rules are removed by our DEL/GC and ours by the reference's DEL; both write
//!    identical nat tables (IPv4 and IPv6) for the same network and container IDs.
//!
//! Each test has its own number N: node namespace with bridge `cniimN`, network `ipmasqN`
//! (10.N.0.0/24, fdNN::/64), outside namespace 192.168.N.2 on a veth from the node
//! (192.168.N.1). Everything lives in namespaces removed on drop, so tests run in parallel.

mod common;
use common::env::env_without_netns;
use common::lab::{
    self, Lab, OURS_IPTABLES as IPT, OURS_NFTABLES as NFT, OURS_UNSET as UNSET, REFERENCE as REF,
    Variant, skip,
};
use common::traffic::*;
use common::*;
use serde_json::{Value, json};
use std::path::Path;

const NFT_TABLE: &str = "cni_plugins_masquerade";

/// The first `len` hex digits of sha512(`s`), computed with coreutils, independently of src/.
fn sha512_hex(s: &str, len: usize) -> String {
    let out = exec(Path::new("sha512sum"), &[], &[], s);
    assert!(out.status_ok, "sha512sum: {out:?}");
    out.stdout[..len].to_string()
}

/// Upstream's masquerade chain: `CNI-` + 24 hex of sha512(network + containerID).
fn chain_name(net: &str, cid: &str) -> String {
    format!("CNI-{}", sha512_hex(&format!("{net}{cid}"), 24))
}

/// The comment match of the iptables rules, as iptables-save prints it.
fn ipt_comment(net: &str, cid: &str) -> String {
    format!(r#"-m comment --comment "name: \"{net}\" id: \"{cid}\"""#)
}

/// The nftables owner comment: `<16 hex sha512(net)>-<16 hex sha512(if:cid)>, net: …`.
fn nft_comment(net: &str, ifname: &str, cid: &str) -> String {
    format!(
        "{}-{}, net: {net}, if: {ifname}, id: {cid}",
        sha512_hex(net, 16),
        sha512_hex(&format!("{ifname}:{cid}"), 16)
    )
}

/// `iptables-save` text without comments and with chain counters zeroed.
fn normalize_save(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match (l.starts_with(':'), l.rfind(" [")) {
            (true, Some(i)) => format!("{} [0:0]", &l[..i]),
            _ => l.to_string(),
        })
        .collect()
}

/// Whether one of `tries` single pings from `from` to `host` is answered.
fn pings(from: &NetNs, host: &str, tries: usize) -> bool {
    (0..tries).any(|_| from.exec(&["ping", "-c1", "-W1", host]).status_ok)
}

/// The reference plugins a scenario needs.
const NEEDS: &[&str] = &["bridge", "host-local"];

// ---------------------------------------------------------------------------------------------
// The lab

/// Node and outside (the lab's client) namespaces; the outside has no route to 10.N.0.0/24.
impl Lab {
    /// The "outside" host: the lab's client namespace.
    fn outside(&self) -> &NetNs {
        &self.client
    }

    fn net(&self) -> String {
        format!("ipmasq{}", self.n)
    }

    fn id(&self, tag: &str) -> String {
        format!("ipmasq-{}-{tag}", self.n)
    }

    fn uses_nft(&self) -> bool {
        self.backend == Some("nftables")
    }

    fn conf(&self, masq: bool) -> Value {
        let n = self.n;
        let mut c = json!({
            "cniVersion": "1.0.0",
            "name": self.net(),
            "type": "bridge",
            "bridge": format!("cniim{n}"),
            "isGateway": true,
            "isDefaultGateway": true,
            "ipMasq": masq,
            "ipam": {
                "type": "host-local",
                "ranges": self.ranges(),
                "dataDir": self.sb.path("ipam").display().to_string(),
            }
        });
        if let Some(b) = self.backend {
            c["ipMasqBackend"] = json!(b);
        }
        c
    }

    /// The config for GC of network `net` (cniVersion 1.1.0), `valid` on eth0.
    fn gc_conf(&self, net: &str, valid: &[&str]) -> Value {
        let mut c = self.conf(true);
        c["cniVersion"] = json!("1.1.0");
        c["name"] = json!(net);
        c["cni.dev/valid-attachments"] = valid
            .iter()
            .map(|id| json!({"containerID": id, "ifname": "eth0"}))
            .collect();
        c
    }

    /// bridge ADD of `cont` as `id`; the container's IPv4 address.
    fn attach(&self, cont: &NetNs, id: &str, masq: bool) -> String {
        cont.sh(&["ip", "link", "set", "lo", "up"]);
        let out = self
            .plugin()
            .add("bridge", &env_for(cont, id), &self.conf(masq));
        assert!(out.status_ok, "bridge ADD for {id}: {out:?}");
        cont_ip(&out.json, false)
    }

    #[track_caller]
    fn del(&self, imp: Impl, env: &Env) {
        let out = self.plugin_as(imp).del("bridge", env, &self.conf(true));
        assert!(
            out.status_ok,
            "{imp:?} DEL of {}: {out:?}",
            env.container_id
        );
    }

    fn nat(&self, v6: bool) -> Vec<String> {
        normalize_save(&self.node.sh(&[
            if v6 {
                "ip6tables-save"
            } else {
                "iptables-save"
            },
            "-t",
            "nat",
        ]))
    }

    /// IPv4 nat lines that belong to container `cid`: its chain and the rules commented with it.
    fn ipt_lines(&self, cid: &str) -> Vec<String> {
        let (chain, comment) = (chain_name(&self.net(), cid), ipt_comment(&self.net(), cid));
        self.nat(false)
            .into_iter()
            .filter(|l| l.contains(&chain) || l.contains(&comment))
            .collect()
    }

    fn nft(&self) -> Vec<Value> {
        let out = self.node.sh(&["nft", "-j", "list", "ruleset"]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("nft -j: {e}: {out}"));
        v["nftables"].as_array().cloned().unwrap_or_default()
    }

    /// The rules of `inet cni_plugins_masquerade` (all chains when `chain` is None).
    fn nft_rules(&self, chain: Option<&str>) -> Vec<Value> {
        self.nft()
            .into_iter()
            .filter_map(|o| o.get("rule").cloned())
            .filter(|r| r["family"] == "inet" && r["table"] == NFT_TABLE)
            .filter(|r| chain.is_none_or(|c| r["chain"] == c))
            .collect()
    }

    fn nft_rules_of(&self, cid: &str) -> Vec<Value> {
        let tail = format!(", id: {cid}");
        self.nft_rules(None)
            .into_iter()
            .filter(|r| r["comment"].as_str().is_some_and(|c| c.ends_with(&tail)))
            .collect()
    }

    /// Container `cid` (IPv4 `ip`) has exactly its masquerade rules, in the lab's backend only.
    #[track_caller]
    fn assert_masq(&self, cid: &str, ip: &str) {
        let (net, n) = (self.net(), self.n);
        let (ipt, nft) = (self.ipt_lines(cid), self.nft_rules_of(cid));
        if !self.uses_nft() {
            assert!(nft.is_empty(), "iptables backend wrote nft rules: {nft:?}");
            let (chain, c) = (chain_name(&net, cid), ipt_comment(&net, cid));
            let want = [
                format!(":{chain} - [0:0]"),
                format!("-A POSTROUTING -s {ip}/32 {c} -j {chain}"),
                format!("-A {chain} -d 10.{n}.0.0/24 {c} -j ACCEPT"),
                format!("-A {chain} ! -d 224.0.0.0/4 {c} -j MASQUERADE"),
            ];
            assert_eq!(ipt, want, "iptables nat rules of {cid}");
            return;
        }
        assert!(
            ipt.is_empty(),
            "nftables backend wrote iptables rules: {ipt:?}"
        );
        assert_eq!(nft.len(), 1, "nft rules of {cid}: {nft:?}");
        assert_eq!(nft[0]["chain"], "masq_checks");
        assert_eq!(nft[0]["comment"], nft_comment(&net, "eth0", cid));
        let payload = |f: &str| json!({"payload": {"protocol": "ip", "field": f}});
        let want = json!([
            {"match": {"op": "==", "left": payload("saddr"), "right": ip}},
            {"match": {"op": "!=", "left": payload("daddr"),
                       "right": {"prefix": {"addr": format!("10.{n}.0.0"), "len": 24}}}},
            {"masquerade": null},
        ]);
        assert_eq!(nft[0]["expr"], want, "nft rule of {cid}");
        // The shared base chain: multicast untouched, everything else through masq_checks.
        let base = self
            .nft()
            .into_iter()
            .filter_map(|o| o.get("chain").cloned())
            .find(|c| c["table"] == NFT_TABLE && c["name"] == "postrouting")
            .expect("chain postrouting");
        assert_eq!(
            (&base["type"], &base["hook"], &base["prio"]),
            (&json!("nat"), &json!("postrouting"), &json!(100))
        );
        let skip_multicast = |proto: &str, addr: &str, len: u8| {
            json!([{"match": {"op": "==",
                "left": {"payload": {"protocol": proto, "field": "daddr"}},
                "right": {"prefix": {"addr": addr, "len": len}}}}, {"return": null}])
        };
        let exprs: Vec<Value> = self
            .nft_rules(Some("postrouting"))
            .into_iter()
            .map(|r| r["expr"].clone())
            .collect();
        assert_eq!(
            exprs,
            [
                skip_multicast("ip", "224.0.0.0", 4),
                skip_multicast("ip6", "ff00::", 8),
                json!([{"goto": {"target": "masq_checks"}}]),
            ]
        );
    }

    #[track_caller]
    fn assert_gone(&self, cid: &str, what: &str) {
        let (ipt, nft) = (self.ipt_lines(cid), self.nft_rules_of(cid));
        assert!(
            ipt.is_empty() && nft.is_empty(),
            "{what}: rules of {cid} left: {ipt:?} {nft:?}"
        );
    }

    /// No masquerade chain or rule of any container is left in either backend.
    #[track_caller]
    fn assert_clean(&self) {
        let nat: Vec<String> = [false, true]
            .into_iter()
            .flat_map(|v6| self.nat(v6))
            .filter(|l| l.contains("CNI-") || l.contains("MASQUERADE"))
            .collect();
        assert!(nat.is_empty(), "nat rules left: {nat:?}");
        let nft = self.nft_rules(Some("masq_checks"));
        assert!(nft.is_empty(), "masq_checks rules left: {nft:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Traffic leaves the node masqueraded, and only with ipMasq

fn traffic(v: Variant) {
    if skip("traffic", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-traffic", v);
    let n = lab.n;
    let (plain, masq) = (NetNs::create(), NetNs::create());
    let (outside, node_ip) = (format!("192.168.{n}.2"), format!("192.168.{n}.1"));
    let _tcp = serve(lab.outside(), "tcp", false, 80, "$SOCAT_PEERADDR");
    let _udp = serve(lab.outside(), "udp", false, 53, "$SOCAT_PEERADDR");

    // Same bridge and subnet without ipMasq: packets get out, answers cannot come back.
    lab.attach(&plain, &lab.id("plain"), false);
    // The container's own wiring works (its gateway answers), so the silence below is the
    // missing masquerading's doing; the server is proven by the ipMasq container further down.
    assert!(
        pings(&plain, &format!("10.{n}.0.1"), 5),
        "container without ipMasq cannot reach its gateway"
    );
    assert_silent(&plain, "tcp", &outside, 80, "without ipMasq");
    assert!(!pings(&plain, &outside, 1), "ping without ipMasq answered");

    let id = lab.id("masq");
    let ip = lab.attach(&masq, &id, true);
    let what = "ipMasq container -> outside, seen from the node's address";
    assert_answers(&masq, "tcp", &outside, 80, &node_ip, what);
    assert_answers(&masq, "udp", &outside, 53, &node_ip, what);
    assert!(pings(&masq, &outside, 5), "ping with ipMasq not answered");
    // The node's conntrack agrees: the reply goes to the node, not to the container.
    let ct = lab
        .node
        .exec(&["conntrack", "-L", "-p", "tcp", "-s", &ip, "--dport", "80"]);
    if ct.status_ok {
        let reply = format!("src={outside} dst={node_ip} sport=80");
        assert!(ct.stdout.contains(&reply), "conntrack: {}", ct.stdout);
    } else {
        skip_note(
            "ipmasq conntrack check",
            &format!("conntrack unavailable: {}", ct.stderr.trim()),
        );
    }
    // Masquerading is per container address, not for the whole subnet.
    assert_silent(&plain, "tcp", &outside, 80, "neighbour without ipMasq");

    if v.imp == Impl::Ours {
        // DEL without netns (the runtime lost it): the container keeps its wiring but not the
        // masquerading, so it is cut off again.
        lab.del(Impl::Ours, &env_without_netns(&id));
        assert_silent(&masq, "tcp", &outside, 80, "after DEL without netns");
    } else {
        lab.del(Impl::Reference, &env_for(&masq, &id));
    }
    lab.assert_gone(&id, "after DEL");
}

variants!(traffic:
    traffic_ours_iptables => IPT,
    traffic_ours_nftables => NFT,
    traffic_reference => REF,
);

// ---------------------------------------------------------------------------------------------
// 2. Rule layout, and DEL in every situation removes it

fn rules(v: Variant) {
    if skip("rules", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-rules", v);
    let (c1, c2) = (NetNs::create(), NetNs::create());
    let (id1, id2) = (lab.id("one"), lab.id("two"));
    let ip1 = lab.attach(&c1, &id1, true);
    let ip2 = lab.attach(&c2, &id2, true);
    lab.assert_masq(&id1, &ip1);
    lab.assert_masq(&id2, &ip2);

    if v.imp == Impl::Ours {
        // DEL with CNI_NETNS empty while the container still exists.
        lab.del(Impl::Ours, &env_without_netns(&id1));
        lab.assert_gone(&id1, "DEL without netns");
        lab.assert_masq(&id2, &ip2);
        // The netns is deleted before DEL, which names the stale path; the DEL config names
        // the other backend: teardown finds the rules in both by name.
        let path = c2.path();
        drop(c2);
        let mut conf = lab.conf(true);
        conf["ipMasqBackend"] = json!(if lab.uses_nft() {
            "iptables"
        } else {
            "nftables"
        });
        let env = env_without_netns(&id2).with_netns(&path);
        let out = lab.plugin().del("bridge", &env, &conf);
        assert!(out.status_ok, "DEL after netns deletion: {out:?}");
        lab.assert_gone(&id2, "DEL after the netns was deleted");
    } else {
        // Upstream needs the netns to find the addresses; the ordinary DEL.
        lab.del(Impl::Reference, &env_for(&c1, &id1));
        lab.assert_gone(&id1, "reference DEL");
        lab.assert_masq(&id2, &ip2);
        lab.del(Impl::Reference, &env_for(&c2, &id2));
    }
    lab.assert_clean();
    // DEL again (with and without netns), and of a container never added: still fine.
    for env in [
        env_for(&c1, &id1),
        env_without_netns(&id1),
        env_without_netns(&lab.id("never")),
    ] {
        lab.del(v.imp, &env);
    }
    lab.assert_clean();
}

variants!(rules:
    rules_ours_iptables => IPT,
    rules_ours_nftables => NFT,
    rules_ours_backend_unset_is_iptables => UNSET,
    rules_reference => REF,
);

/// O(1) DEL: nftables rules are deleted by the handles ADD recorded, iptables jumps by the
/// exact rules built from prevResult's addresses. Wrong hints cost only speed: a record naming
/// another container's rule, or a prevResult with another container's address, still removes
/// exactly this container's rules; the record is gone after DEL.
fn hints(v: Variant) {
    if skip("hints", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-hints", v);
    let (c1, c2) = (NetNs::create(), NetNs::create());
    let (id1, id2) = (lab.id("one"), lab.id("two"));
    let mut res = Vec::new();
    for (c, id) in [(&c1, &id1), (&c2, &id2)] {
        let out = lab.plugin().add("bridge", &env_for(c, id), &lab.conf(true));
        assert!(out.status_ok, "bridge ADD for {id}: {out:?}");
        res.push(out.json);
    }
    let (ip1, ip2) = (cont_ip(&res[0], false), cont_ip(&res[1], false));
    lab.assert_masq(&id1, &ip1);
    lab.assert_masq(&id2, &ip2);
    let state = lab.sb.state_dir();
    let record = |id: &str| Path::new(&state).join(format!("ipmasq/{}/{id}:eth0", lab.net()));
    if lab.uses_nft() {
        let handle = |id: &str| lab.nft_rules_of(id)[0]["handle"].to_string();
        let rec = std::fs::read_to_string(record(&id1)).expect("handle record of ADD");
        assert_eq!(rec.trim(), handle(&id1), "recorded handle");
        // The record names the other container's rule: DEL must not trust it.
        std::fs::write(record(&id1), format!("{}\n", handle(&id2))).unwrap();
    }
    let del = |c: &NetNs, id: &str, prev: &Value| {
        let mut conf = lab.conf(true);
        conf["prevResult"] = prev.clone();
        let out = lab.plugin().del("bridge", &env_for(c, id), &conf);
        assert!(out.status_ok, "DEL of {id}: {out:?}");
    };
    // prevResult of the other container: the quick iptables DEL finds no such jump.
    del(&c1, &id1, &res[1]);
    lab.assert_gone(&id1, "DEL with wrong hints");
    lab.assert_masq(&id2, &ip2);
    assert!(!record(&id1).exists(), "record left after DEL");
    del(&c2, &id2, &res[1]);
    lab.assert_gone(&id2, "DEL with its own hints");
    assert!(!record(&id2).exists(), "record left after DEL");
    lab.assert_clean();
}

variants!(hints:
    hints_ours_iptables => IPT,
    hints_ours_nftables => NFT,
);

/// Eight containers ADDed and DELeted at once: every one gets exactly its rules (the shared
/// nftables base chain is not duplicated), and all are removed.
fn concurrent(v: Variant) {
    if skip("concurrent", v, NEEDS) {
        return;
    }
    let lab = &Lab::new("ipmasq-par", v);
    let conts: Vec<(NetNs, String)> = (0..8)
        .map(|i| (NetNs::create(), lab.id(&format!("p{i}"))))
        .collect();
    let ips: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = conts
            .iter()
            .map(|(ns, id)| s.spawn(move || lab.attach(ns, id, true)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((_, id), ip) in conts.iter().zip(&ips) {
        lab.assert_masq(id, ip);
    }
    std::thread::scope(|s| {
        for (ns, id) in &conts {
            s.spawn(move || lab.del(v.imp, &env_for(ns, id)));
        }
    });
    lab.assert_clean();
}

variants!(concurrent:
    concurrent_ours_iptables => IPT,
    concurrent_ours_nftables => NFT,
);

// ---------------------------------------------------------------------------------------------
// 3. GC keeps only the valid attachments' masquerading

fn gc(v: Variant) {
    if skip("gc", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-gc", v);
    let n = lab.n;
    let (a, b) = (NetNs::create(), NetNs::create());
    let (ida, idb) = (lab.id("a"), lab.id("b"));
    let ipa = lab.attach(&a, &ida, true);
    let ipb = lab.attach(&b, &idb, true);
    let p = lab.plugin();
    let net = lab.net();

    // Both valid, or another network (whose name is a prefix of ours) with nothing valid:
    // nothing of ours goes.
    p.gc("bridge", &lab.gc_conf(&net, &[&ida, &idb])).ok();
    p.gc("bridge", &lab.gc_conf(&net[..net.len() - 1], &[]))
        .ok();
    lab.assert_masq(&ida, &ipa);
    lab.assert_masq(&idb, &ipb);

    p.gc("bridge", &lab.gc_conf(&net, &[&ida])).ok();
    lab.assert_gone(&idb, "GC with only A valid");
    lab.assert_masq(&ida, &ipa);
    // And in traffic: A still gets out, B no longer.
    let (outside, node_ip) = (format!("192.168.{n}.2"), format!("192.168.{n}.1"));
    let _srv = serve(lab.outside(), "tcp", false, 80, "$SOCAT_PEERADDR");
    assert_answers(&a, "tcp", &outside, 80, &node_ip, "A after GC");
    assert_silent(&b, "tcp", &outside, 80, "B after GC");

    p.gc("bridge", &lab.gc_conf(&net, &[])).ok();
    lab.assert_clean();
}

variants!(gc:
    gc_ours_iptables => IPT,
    gc_ours_nftables => NFT,
);

// ---------------------------------------------------------------------------------------------
// 4. Compatibility with the reference bridge

/// A Go bridge's ADDs (v1.9.1, or v1.1.1 on an older node), then cnibox's DELs and GC.
fn reference_add_ours_del_and_gc(go: Impl) {
    let v = Variant {
        imp: go,
        backend: None,
    };
    if skip("compat_reference_add_ours_del_and_gc", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-compat-r", v);
    let conts: Vec<NetNs> = (0..3).map(|_| NetNs::create()).collect();
    let ids: Vec<String> = (0..3).map(|i| lab.id(&format!("r{i}"))).collect();
    let ips: Vec<String> = conts
        .iter()
        .zip(&ids)
        .map(|(c, id)| lab.attach(c, id, true))
        .collect();
    for (id, ip) in ids.iter().zip(&ips) {
        lab.assert_masq(id, ip);
    }
    // Our DEL with the netns removes the reference's rules and interface.
    lab.del(Impl::Ours, &env_for(&conts[0], &ids[0]));
    lab.assert_gone(&ids[0], "our DEL of a reference ADD");
    assert!(!conts[0].exec(&["ip", "link", "show", "eth0"]).status_ok);
    lab.assert_masq(&ids[1], &ips[1]);
    // … and without it.
    lab.del(Impl::Ours, &env_without_netns(&ids[1]));
    lab.assert_gone(&ids[1], "our DEL without netns of a reference ADD");
    // The reference's DEL without netns leaks; our GC finds the leftovers by their comment.
    lab.del(go, &env_without_netns(&ids[2]));
    lab.plugin_as(Impl::Ours)
        .gc("bridge", &lab.gc_conf(&lab.net(), &[]))
        .ok();
    lab.assert_clean();
    // The reference's own DEL after ours is fine once the interface is gone (with the
    // interface still there it fails: v1.1.1 does not take iptables-nft's exit status 2 for a
    // missing chain as "already gone"). Our DEL finishes the others, as often as called.
    lab.del(go, &env_for(&conts[0], &ids[0]));
    for (c, id) in conts.iter().zip(&ids) {
        lab.del(Impl::Ours, &env_for(c, id));
    }
    lab.assert_clean();
}

variants!(reference_add_ours_del_and_gc:
    compat_reference_add_ours_del_and_gc => Impl::Reference,
    compat_older_reference_add_ours_del_and_gc => Impl::OlderReference,
);

/// cnibox's ADD, a Go bridge's DEL (v1.9.1, or v1.1.1 on an older node).
fn ours_add_reference_del(go: Impl) {
    let v = Variant {
        imp: go,
        backend: None,
    };
    if skip("compat_ours_add_reference_del", v, NEEDS) {
        return;
    }
    for v in [IPT, UNSET] {
        let lab = Lab::new("ipmasq-compat-o", v);
        let c = NetNs::create();
        let id = lab.id("o");
        let ip = lab.attach(&c, &id, true);
        lab.assert_masq(&id, &ip);
        lab.del(go, &env_for(&c, &id));
        lab.assert_gone(&id, "reference DEL of our ADD");
        assert!(!c.exec(&["ip", "link", "show", "eth0"]).status_ok);
        lab.assert_clean();
        lab.del(Impl::Ours, &env_for(&c, &id));
    }
}

variants!(ours_add_reference_del:
    compat_ours_add_reference_del => Impl::Reference,
    compat_ours_add_older_reference_del => Impl::OlderReference,
);

#[test]
fn compat_identical_nat_tables() {
    if skip("compat_identical_nat_tables", REF, NEEDS) {
        return;
    }
    // Three nodes with the same number (one allocated, shared on purpose), network and
    // container IDs, dual-stack: their nat tables must be identical.
    let n = lab::unique_n();
    let labs: Vec<Lab> = [REF, IPT, UNSET]
        .into_iter()
        .map(|v| Lab::with_n("ipmasq-same", v, n).with_v6())
        .collect();
    let _conts: Vec<Vec<NetNs>> = labs
        .iter()
        .map(|lab| {
            let cs = vec![NetNs::create(), NetNs::create()];
            lab.attach(&cs[0], &format!("ipmasq-{n}-x"), true);
            lab.attach(&cs[1], &format!("ipmasq-{n}-y"), true);
            cs
        })
        .collect();
    for v6 in [false, true] {
        let theirs = labs[0].nat(v6);
        assert_eq!(
            theirs.iter().filter(|l| l.contains("MASQUERADE")).count(),
            2,
            "reference nat table: {theirs:#?}"
        );
        for lab in &labs[1..] {
            assert_eq!(
                lab.nat(v6),
                theirs,
                "{:?} vs reference (v6: {v6})",
                lab.backend
            );
            assert!(
                lab.nft_rules(None).is_empty(),
                "nft masquerade with iptables"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 5. A container ID longer than iptables' comment limit (valid: the spec sets no limit)

fn long_container_id(v: Variant) {
    if skip("long_container_id", v, NEEDS) {
        return;
    }
    let lab = Lab::new("ipmasq-longid", v);
    let n = lab.n;
    let cont = NetNs::create();
    let id = "c".repeat(300);
    lab.attach(&cont, &id, true);
    let (outside, node_ip) = (format!("192.168.{n}.2"), format!("192.168.{n}.1"));
    let _srv = serve(lab.outside(), "tcp", false, 80, "$SOCAT_PEERADDR");
    assert_answers(&cont, "tcp", &outside, 80, &node_ip, "masqueraded");
    // Comments are cut to the comment match's limit, in saved form as written.
    for l in lab.nat(false).iter().filter(|l| l.contains("--comment \"")) {
        let quoted = l.split("--comment \"").nth(1).unwrap_or_default();
        let (mut text, mut esc) = (String::new(), false);
        for c in quoted.chars() {
            match (esc, c) {
                (false, '\\') => esc = true,
                (false, '"') => break,
                _ => {
                    text.push(c);
                    esc = false;
                }
            }
        }
        assert!(text.len() <= 255, "comment over the limit: {l}");
    }
    let p = lab.plugin();
    p.gc("bridge", &lab.gc_conf(&lab.net(), &[&id])).ok();
    assert_answers(&cont, "tcp", &outside, 80, &node_ip, "kept by GC");
    p.gc("bridge", &lab.gc_conf(&lab.net(), &[])).ok();
    lab.assert_clean();
    lab.del(v.imp, &env_for(&cont, &id));
    lab.assert_clean();
}

variants!(long_container_id:
    long_container_id_ours_iptables => IPT,
    long_container_id_ours_nftables => NFT,
);
