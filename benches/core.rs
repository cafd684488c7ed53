//! In-process hot paths: config parse + result encode; host-local allocation (ADD+DEL of one
//! attachment through the on-disk store) with 10 and 5,000 existing reservations; planning an
//! iptables transaction against a busy node's `iptables-save` (kube-proxy-sized nat tables);
//! encoding a portmap ADD's nftables batch.

use cnibox::cni::Version;
use cnibox::cni::config::NetConf;
use cnibox::cni::result::{CniResult, Interface, IpConfig, Route};
use cnibox::ipam::store::{Owner, Store};
use cnibox::ipam::{RangeConf, RangeSet};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde::Deserialize;
use std::hint::black_box;
use std::path::PathBuf;

const CONF: &str = r#"{"cniVersion":"1.0.0","name":"mynet","type":"bridge","bridge":"cni0",
"isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.22.0.0/16"}],
[{"subnet":"fd00:22::/64"}]],"routes":[{"dst":"0.0.0.0/0"},{"dst":"::/0"}]},
"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}}"#;

fn protocol(c: &mut Criterion) {
    let result = CniResult {
        interfaces: vec![Interface {
            name: "eth0".into(),
            mac: "0a:58:0a:16:00:05".into(),
            sandbox: "/run/netns/x".into(),
            ..Default::default()
        }],
        ips: vec![IpConfig {
            version: None,
            interface: Some(0),
            address: "10.22.0.5/16".parse().unwrap(),
            gateway: Some("10.22.0.1".parse().unwrap()),
        }],
        routes: vec![Route::new("0.0.0.0/0".parse().unwrap(), None)],
        ..Default::default()
    };
    c.bench_function("config parse + result encode", |b| {
        b.iter(|| {
            let raw: serde_json::Value = serde_json::from_str(black_box(CONF)).unwrap();
            let conf = NetConf::deserialize(&raw).unwrap();
            let v = Version::parse(&conf.cni_version).unwrap();
            black_box(result.to_json(v).unwrap())
        })
    });
}

fn allocation(c: &mut Criterion) {
    let set = RangeSet::from_conf(&[RangeConf {
        subnet: Some("10.30.0.0/16".parse().unwrap()),
        ..Default::default()
    }])
    .unwrap();
    let mut g = c.benchmark_group("host-local ADD+DEL");
    for existing in [10usize, 5000] {
        let dir = PathBuf::from(format!(
            "/tmp/cnibox-bench-{}-{existing}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let mut s = Store::open(&dir, "net", true).unwrap().unwrap();
            for (i, (ip, _)) in set.candidates(None).take(existing).enumerate() {
                s.reserve(ip.addr(), &Owner::new(&format!("c{i}"), "eth0"), 0)
                    .unwrap();
            }
        }
        let owner = Owner::new("bench", "eth0");
        g.bench_with_input(BenchmarkId::from_parameter(existing), &existing, |b, _| {
            b.iter(|| {
                let mut s = Store::open(&dir, "net", true).unwrap().unwrap();
                assert!(s.owned_by(&owner).unwrap().is_empty());
                let last = s.last_reserved(0);
                let ip = set
                    .candidates(last)
                    .find(|(ip, _)| s.reserve(ip.addr(), &owner, 0).unwrap());
                black_box(ip);
                drop(s);
                let mut s = Store::open(&dir, "net", false).unwrap().unwrap();
                assert_eq!(s.release("bench", "eth0").unwrap(), 1);
            })
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
    g.finish();
}

/// `iptables-save -t nat` of a node with `rules` rules in many chains, as kube-proxy leaves it.
fn busy_nat(rules: usize) -> String {
    let mut t = String::from("*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n");
    for c in 0..rules / 10 {
        t.push_str(&format!(":KUBE-SEP-{c:016X} - [0:0]\n"));
    }
    for i in 0..rules {
        t.push_str(&format!(
            "-A KUBE-SEP-{:016X} -p tcp -m comment --comment \"ns/svc{i}\" -m tcp -j DNAT --to-destination 10.{}.{}.{}:8080\n",
            i / 10,
            i >> 16 & 255,
            i >> 8 & 255,
            i & 255
        ));
    }
    t.push_str("COMMIT\n");
    t
}

fn netfilter(c: &mut Criterion) {
    use cnibox::netfilter::iptables::{Saved, Script};
    use cnibox::netfilter::{Batch, Family, Rule, TCP, Table, UDP};
    let mut g = c.benchmark_group("iptables-save parse + plan");
    for rules in [100usize, 20_000] {
        let text = busy_nat(rules);
        g.bench_with_input(BenchmarkId::from_parameter(rules), &text, |b, text| {
            b.iter(|| {
                let saved = Saved::parse(black_box(text));
                let mut s = Script::new();
                s.ensure_chain(&saved, "CNI-HOSTPORT-DNAT")
                    .ensure_chain(&saved, "CNI-DN-0123456789abcdef01234")
                    .append_unique(
                        &saved,
                        "PREROUTING",
                        "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
                    )
                    .append_unique(
                        &saved,
                        "CNI-DN-0123456789abcdef01234",
                        "-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.22.0.5:80",
                    );
                black_box(s)
            })
        });
    }
    g.finish();
    let t = Table::new(Family::Ip, "cni_hostport");
    c.bench_function("nftables batch encode (portmap ADD, 2 mappings)", |b| {
        b.iter(|| {
            let mut batch = Batch::new();
            for (proto, port) in [(TCP, 8080u16), (UDP, 8053)] {
                batch.add_rule(
                    &t,
                    "hostports",
                    &Rule::new()
                        .l4proto(proto)
                        .dport(port)
                        .dnat("10.22.0.5".parse().unwrap(), Some(port - 8000))
                        .comment("container-id"),
                );
            }
            batch.add_rule(
                &t,
                "masquerading",
                &Rule::new()
                    .saddr("10.22.0.5".parse::<std::net::IpAddr>().unwrap())
                    .daddr("10.22.0.5".parse::<std::net::IpAddr>().unwrap())
                    .masquerade()
                    .comment("container-id"),
            );
            black_box(batch)
        })
    });
}

criterion_group!(benches, protocol, allocation, netfilter);
criterion_main!(benches);
