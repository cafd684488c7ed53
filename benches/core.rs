//! In-process hot paths: config parse + result encode, and host-local allocation (ADD+DEL of one
//! attachment through the on-disk store) with 10 and 5,000 existing reservations.

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
                assert!(s.owned_by(&owner).is_empty());
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

criterion_group!(benches, protocol, allocation);
criterion_main!(benches);
