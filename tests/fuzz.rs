//! A mutation fuzzer over valid configs of every applet, run through the real binary inside a
//! throwaway node namespace: types flipped, keys deleted, duplicated or re-cased, hostile
//! strings, numbers at their limits, truncation, deep nesting, other verbs and versions; and
//! the rest of what a runtime hands a plugin: `args`, `runtimeConfig` and `prevResult` (each
//! applet has seeds carrying them), CNI_ARGS, long container IDs and, now and then, a CNI_NETNS
//! that is no network namespace. Each ADD that succeeds is followed by DEL of the same input.
//! The properties: no execution crashes — ends by a signal, panics (the driver's panic marker,
//! see `common::Output::crash`, the same check every other test runs) or runs longer than 5 s —
//! and stdout is always valid JSON (or empty where the spec allows it: a successful DEL, CHECK,
//! STATUS or GC).
//!
//! Deterministic: `FUZZ_SEED` (default fixed) and `FUZZ_EXECS` (default 3000 here; `make fuzz`
//! runs 50,000). A failure prints the seed, the execution number and the input. The parsers of
//! bytes from outside the host have in-process fuzzers of their own: tests/fuzz_parsers.rs.

mod common;
use common::bounded::wait_within_polling;
use common::rng::Rng;
use common::*;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn seeds(data: &str, cont: &str) -> Vec<(&'static str, Value)> {
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "brfz"}, {"name": "vethfz0"}, {"name": "eth0", "sandbox": cont}],
        "ips": [{"address": "10.73.0.2/24", "gateway": "10.73.0.1", "interface": 2}]});
    let ipam = json!({"type": "host-local", "ranges": [[{"subnet": "10.73.0.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}], "dataDir": data});
    let prev6 = json!({"cniVersion": "1.1.0",
        "interfaces": [{"name": "brfz", "mac": "02:00:00:00:7f:10"}, {"name": "vethfz1"},
                       {"name": "eth1", "sandbox": cont, "mac": "02:00:00:00:7f:11", "mtu": 1400}],
        "ips": [{"address": "10.73.0.2/24", "gateway": "10.73.0.1", "interface": 2},
                {"address": "fd73::2/64", "gateway": "fd73::1", "interface": 2}],
        "routes": [{"dst": "0.0.0.0/0", "gw": "10.73.0.1"}, {"dst": "::/0", "gw": "fd73::1", "priority": 10}],
        "dns": {"nameservers": ["10.73.0.53"]}});
    let ipam6 = json!({"type": "host-local", "dataDir": data,
        "ranges": [[{"subnet": "fd73::/64", "rangeStart": "fd73::10", "rangeEnd": "fd73::ff"}]],
        "routes": [{"dst": "::/0"}]});
    vec![
        (
            "bridge",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "bridge", "bridge": "brfz",
            "isGateway": true, "ipMasq": true, "mtu": 1400, "hairpinMode": false,
            "ipam": ipam.clone()}),
        ),
        (
            "bridge",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "bridge", "bridge": "brfzt",
            "vlanTrunk": [{"id": 10, "minID": 20, "maxID": 22}, {}], "promiscMode": true,
            "dns": {"nameservers": []}}),
        ),
        (
            "host-local",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "host-local", "ipam": ipam.clone(),
            "args": {"cni": {"ips": ["10.73.0.40"]}}, "runtimeConfig": {"ips": ["10.73.0.41"]}}),
        ),
        (
            "static",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "static",
            "ipam": {"type": "static", "addresses": [{"address": "10.74.0.2/24", "gateway": "10.74.0.1"}],
                     "routes": [{"dst": "0.0.0.0/0", "gw": "10.74.0.1"}], "dns": {"nameservers": ["1.1.1.1"]}}}),
        ),
        (
            "vlan",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "vlan", "master": "brfz",
            "vlanId": 7, "mtu": 1400, "ipam": ipam.clone()}),
        ),
        (
            "loopback",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "loopback"}),
        ),
        (
            "bandwidth",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "bandwidth",
            "ingressRate": 8000000, "ingressBurst": 80000, "egressRate": 8000000, "egressBurst": 80000,
            "prevResult": prev.clone()}),
        ),
        (
            "portmap",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "portmap", "snat": true,
            "conditionsV4": ["-s", "10.0.0.0/8"],
            "runtimeConfig": {"portMappings": [{"hostPort": 18090, "containerPort": 80, "protocol": "tcp"},
                                               {"HostPort": 18091, "ContainerPort": 53, "Protocol": "udp", "HostIP": ""}]},
            "prevResult": prev.clone()}),
        ),
        // nftables conditions as users write them (lane parity, issue 26): parsed, never pasted.
        (
            "portmap",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "portmap", "backend": "nftables",
            "conditionsV4": ["fib daddr type local", "ct state new,untracked", "meta iif \"lo\"",
                             "ip daddr != { 10.9.9.9, 10.8.0.0/16 }", "tcp dport != 22"],
            "conditionsV6": ["fib saddr type != broadcast ct state != invalid oif lo ip6 daddr fd00::/8"],
            "runtimeConfig": {"portMappings": [{"hostPort": 18092, "containerPort": 80, "protocol": "tcp"}]},
            "prevResult": prev.clone()}),
        ),
        (
            "firewall",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "firewall",
            "backend": "nftables", "ingressPolicy": "same-bridge", "firewalldZone": "trusted",
            "prevResult": prev.clone()}),
        ),
        (
            "tuning",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "tuning", "mtu": 1400,
            "mac": "02:00:00:00:7f:01", "promisc": true, "txQLen": 500,
            "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}, "dataDir": format!("{data}/tuning"),
            "args": {"cni": {"allmulti": true}}, "prevResult": prev.clone()}),
        ),
        (
            "sbr",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "sbr", "table": 200,
            "prevResult": prev.clone()}),
        ),
        (
            "sbr",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "sbr",
            "gateways": ["10.73.0.254", "fd73::fe"], "addSourceHints": true,
            "prevResult": prev.clone()}),
        ),
        (
            "vrf",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "vrf", "vrfname": "vrffz",
            "table": 20, "prevResult": prev}),
        ),
        (
            "ptp",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "ptp", "mtu": 1400,
            "ipMasq": true, "ipMasqBackend": "nftables", "ipam": ipam.clone()}),
        ),
        (
            "ipvlan",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "ipvlan", "master": "brfz",
            "mode": "l3", "mtu": 1400, "ipam": ipam.clone()}),
        ),
        (
            "flannel",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "flannel",
            "subnetFile": format!("{data}/subnet.env"), "dataDir": format!("{data}/flannel"),
            "delegate": {"bridge": "brfz", "hairpinMode": true, "isDefaultGateway": true},
            "ipam": {"dataDir": data}}),
        ),
        (
            "macvlan",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "macvlan", "master": "brfz",
            "mode": "bridge", "mtu": 1400, "runtimeConfig": {"mac": "02:00:00:00:7f:02"},
            "ipam": ipam.clone()}),
        ),
        (
            "host-device",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "host-device", "device": "hdfz0",
            "hwaddr": "02:00:00:00:7f:03", "kernelpath": "/sys/devices/virtual/net/hdfz0",
            "pciBusID": "0000:00:1f.6", "runtimeConfig": {"deviceID": "0000:00:1f.7"},
            "ipam": ipam.clone()}),
        ),
        (
            "dummy",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "dummy", "ipam": ipam.clone()}),
        ),
        (
            "tap",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "tap", "mtu": 1400,
            "multiQueue": true, "owner": 0, "group": 0, "mac": "02:00:00:00:7f:03",
            "ipam": ipam.clone()}),
        ),
        (
            "dhcp",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "dhcp",
            "ipam": {"type": "dhcp", "daemonSocketPath": format!("{data}/no-dhcp.sock"),
                     "provide": [{"option": "host-name", "fromArg": "K8S_POD_NAME"}],
                     "request": [{"option": "121"}, {"skipDefault": true}], "priority": 5}}),
        ),
        // The same applets again with what a runtime adds: args (pod annotations),
        // runtimeConfig (capabilities), prevResult (chaining), IPv6 and dual-stack IPAM.
        (
            "ptp",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "ptp", "mtu": 1400,
            "dns": {"nameservers": ["10.73.0.53"], "search": ["svc"]},
            "args": {"cni": {"ips": ["10.73.0.42", "fd73::42"]}},
            "runtimeConfig": {"ips": ["10.73.0.43/24"], "ipRanges": [[{"subnet": "10.73.1.0/24"}]]},
            "ipam": {"type": "host-local", "dataDir": data,
                     "ranges": [[{"subnet": "10.73.0.0/24", "gateway": "10.73.0.1"}],
                                [{"subnet": "fd73::/64", "gateway": "fd73::1"}]],
                     "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}}),
        ),
        (
            "macvlan",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "macvlan", "master": "brfz",
            "mode": "private", "mac": "02:00:00:00:7f:04", "bcqueuelen": 100,
            "linkInContainer": false, "args": {"cni": {"ips": ["10.73.0.44"]}},
            "runtimeConfig": {"mac": "02:00:00:00:7f:05", "ips": ["10.73.0.45/24"]},
            "prevResult": prev6.clone(), "ipam": ipam6.clone()}),
        ),
        (
            "ipvlan",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "ipvlan", "master": "brfz",
            "mode": "l2", "linkInContainer": true, "prevResult": prev6.clone(),
            "runtimeConfig": {"ips": ["fd73::46/64"]}}),
        ),
        (
            "tuning",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "tuning", "allmulti": false,
            "txQLen": 1000, "sysctl": {"net.ipv6.conf.IFNAME.accept_ra": "0"},
            "runtimeConfig": {"mac": "02:00:00:00:7f:06"},
            "args": {"cni": {"mac": "02:00:00:00:7f:07", "mtu": 1300, "promisc": false,
                             "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}}},
            "dataDir": format!("{data}/tuning"), "prevResult": prev6.clone()}),
        ),
        (
            "host-device",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "host-device",
            "pciBusID": "0000:00:1f.6", "DPDKMode": true, "prevResult": prev6.clone(),
            "runtimeConfig": {"deviceID": "0000:00:1f.6"}, "ipam": ipam6.clone()}),
        ),
        (
            "dummy",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "dummy",
            "runtimeConfig": {"ips": ["fd73::47/64"]}, "args": {"cni": {"ips": ["fd73::48"]}},
            "ipam": ipam6.clone()}),
        ),
        (
            "tap",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "tap", "bridge": "brfz",
            "selinuxContext": "system_u:system_r:container_t:s0", "owner": 1000, "group": 1000,
            "runtimeConfig": {"mac": "02:00:00:00:7f:08"}, "args": {"cni": {"ips": ["10.73.0.49"]}},
            "ipam": ipam6.clone()}),
        ),
        (
            "sbr",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "sbr", "table": 300,
            "prevResult": prev6.clone()}),
        ),
        (
            "vrf",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "vrf", "vrfname": "vrffz6",
            "table": 30, "prevResult": prev6.clone()}),
        ),
        (
            "flannel",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "flannel",
            "subnetFile": format!("{data}/subnet6.env"), "dataDir": format!("{data}/flannel"),
            "runtimeConfig": {"portMappings": [{"hostPort": 18092, "containerPort": 80, "protocol": "tcp"}]},
            "args": {"cni": {"ips": ["10.73.0.50"]}},
            "delegate": {"type": "bridge", "bridge": "brfz6", "mtu": 1300, "ipMasq": false},
            "ipam": {"dataDir": data, "routes": [{"dst": "10.80.0.0/16"}]}}),
        ),
        (
            "dhcp",
            json!({"cniVersion": "1.1.0", "name": "fznet", "type": "dhcp",
            "args": {"cni": {"ips": ["10.73.0.51"]}}, "runtimeConfig": {"ips": ["10.73.0.52/24"]},
            "ipam": {"type": "dhcp", "daemonSocketPath": format!("{data}/no-dhcp.sock"),
                     "provide": [{"option": "dhcp-client-identifier", "value": "fz"},
                                 {"option": "user-class", "fromArg": "K8S_POD_UID"}],
                     "request": [{"option": "routers"}, {"option": "33"}], "priority": 0}}),
        ),
    ]
}

const HOSTILE: &[&str] = &[
    "",
    "\n-A INPUT -j DROP",
    "../../../../etc/passwd",
    "a/b",
    "\u{0}",
    "'; rm -rf / #",
    "ééééééééééééééééééééé",
    "-j ACCEPT",
    "{ 1.2.3.4, 5.6.7.8 }",
    "0.0.0.0/0",
    "::/0",
    "255.255.255.255",
    "10.73.0.0/24",
    "averyveryverylongname0123456789",
    // Applet names: `ipam.type` naming a main plugin once recursed until the stack overflowed.
    "bridge",
    "vlan",
    "host-local",
    "flannel",
    "cnibox",
    "dhcp",
    // Addresses of the other family, MACs, sysctl keys and paths the newest applets read.
    "fd73::1",
    "10.73.0.1",
    "02:00:00:00:7f:ff",
    "ff:ff:ff:ff:ff:ff",
    "net.ipv4.conf",
    "net.ipv4.conf.IFNAME.rp_filter",
    "/dev/zero",
    "/proc/self/ns/mnt",
    "relative.sock",
];

fn interesting_number(r: &mut Rng) -> Value {
    let n: [Value; 14] = [
        json!(0),
        json!(-1),
        json!(1),
        json!(65535),
        json!(65536),
        json!(4094),
        json!(4095),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1.5),
        json!(1e308),
        json!(4_294_967_295u64),
        json!(4_294_967_296u64),
    ];
    r.pick(&n).clone()
}

fn random_value(r: &mut Rng, depth: u32) -> Value {
    match r.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(r.below(2) == 0),
        2 => interesting_number(r),
        3 | 4 => json!(r.pick(HOSTILE)),
        5 => Value::Array(
            (0..r.below(3))
                .map(|_| random_value(r, depth + 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..r.below(3) {
                m.insert(r.pick(HOSTILE).to_string(), random_value(r, depth + 1));
            }
            Value::Object(m)
        }
    }
}

/// All paths to values in `v` (object keys and array indexes).
fn paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                out.push(at.clone());
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(i.to_string());
                out.push(at.clone());
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let mut at = v;
    for k in path {
        at = match at {
            Value::Object(m) => m.get_mut(k)?,
            Value::Array(a) => a.get_mut(k.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(at)
}

/// One to three mutations of `seed`, as text (some mutations are not JSON any more).
fn mutate(r: &mut Rng, seed: &Value, specials: &[String]) -> String {
    let mut v = seed.clone();
    for _ in 0..1 + r.below(3) {
        let mut ps = Vec::new();
        paths(&v, &mut Vec::new(), &mut ps);
        if ps.is_empty() {
            break;
        }
        let p = r.pick(&ps).clone();
        let (parent, last) = p.split_at(p.len() - 1);
        match r.below(10) {
            // A path the plugin reads replaced by a special file (a FIFO, /dev/zero, a
            // directory, another namespace type): must not block, be read forever or crash.
            9 => {
                let nv = json!(r.pick(specials));
                if let Some(x) = get_mut(&mut v, &p) {
                    *x = nv;
                }
            }
            // Type confusion: `type` or `ipam.type` names another applet (a main plugin as
            // IPAM once recursed until the stack overflowed).
            8 => {
                let name = *r.pick(&[
                    "bridge",
                    "vlan",
                    "host-local",
                    "static",
                    "loopback",
                    "portmap",
                    "firewall",
                    "bandwidth",
                    "ptp",
                    "macvlan",
                    "tuning",
                    "flannel",
                    "dhcp",
                    "cnibox",
                ]);
                if r.below(2) == 0 {
                    v["type"] = json!(name);
                } else if v.get("ipam").is_some_and(Value::is_object) {
                    v["ipam"]["type"] = json!(name);
                }
            }
            // Replace a value by anything.
            0 | 1 => {
                let nv = random_value(r, 0);
                if let Some(x) = get_mut(&mut v, &p) {
                    *x = nv;
                }
            }
            // Delete a key.
            2 => {
                if let Some(Value::Object(m)) = get_mut(&mut v, parent) {
                    m.remove(&last[0]);
                }
            }
            // Re-case a key (Go matches keys case-insensitively).
            3 => {
                if let Some(Value::Object(m)) = get_mut(&mut v, parent)
                    && let Some(x) = m.remove(&last[0])
                {
                    let k = if r.below(2) == 0 {
                        last[0].to_uppercase()
                    } else {
                        last[0].to_lowercase()
                    };
                    m.insert(k, x);
                }
            }
            // Duplicate a subtree under another key.
            4 => {
                let x = get_mut(&mut v, &p).cloned();
                if let (Some(x), Some(Value::Object(m))) = (x, get_mut(&mut v, parent)) {
                    m.insert(format!("{}2", last[0]), x);
                }
            }
            // Nest deeply.
            5 => {
                let mut deep = json!(1);
                for _ in 0..r.below(200) {
                    deep = json!([deep]);
                }
                if let Some(x) = get_mut(&mut v, &p) {
                    *x = deep;
                }
            }
            // A number at its limits.
            6 => {
                let nv = interesting_number(r);
                if let Some(x) = get_mut(&mut v, &p) {
                    *x = nv;
                }
            }
            // A hostile string.
            _ => {
                let nv = json!(r.pick(HOSTILE));
                if let Some(x) = get_mut(&mut v, &p) {
                    *x = nv;
                }
            }
        }
    }
    let text = v.to_string();
    match r.below(20) {
        0 => {
            let mut cut = r.below(text.len().max(1));
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_string()
        }
        1 => format!("{text}{text}"),
        _ => text,
    }
}

/// Run in `cwd` (relative paths in mutated configs land in the sandbox, not the source tree).
/// A mutation that drops `dataDir` sends host-local to its default, /var/lib/cni/networks:
/// `ip netns exec` gives the run a mount namespace of its own, and a tmpfs over /var/lib/cni
/// there keeps those files off the machine.
fn run(
    node: &NetNs,
    cwd: &std::path::Path,
    prog: &std::path::Path,
    vars: &[(&str, String)],
    stdin: &str,
) -> Output {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &node.name])
        .args([
            "/bin/sh",
            "-c",
            "/bin/mount -t tmpfs cnibox-fuzz /var/lib/cni || exit 97; exec \"$0\"",
        ])
        .arg(prog)
        .current_dir(cwd)
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let status = wait_within_polling(&mut child, Duration::from_secs(5), Duration::from_millis(1));
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let read = |p: Option<&mut dyn std::io::Read>| {
        let mut b = Vec::new();
        if let Some(p) = p {
            let _ = p.read_to_end(&mut b);
        }
        String::from_utf8_lossy(&b).into_owned()
    };
    let stdout = read(child.stdout.as_mut().map(|o| o as &mut dyn std::io::Read));
    let mut stderr = read(child.stderr.as_mut().map(|o| o as &mut dyn std::io::Read));
    use std::os::unix::process::ExitStatusExt;
    // Noted as common::exec notes them, for `Output::crash`.
    match status {
        None => stderr.push_str(&format!("\n{DEADLINE_NOTE}\n")),
        Some(s) => {
            if let Some(sig) = s.signal() {
                stderr.push_str(&format!("\n{SIGNAL_NOTE} {sig}]\n"));
            }
        }
    }
    // The harness's own Output, so `Output::crash` judges it as it judges every other test's
    // runs (the driver's panic marker, a signal, the deadline).
    Output {
        status_ok: status.is_some_and(|s| s.success()),
        code: status.and_then(|s| s.code()),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
        stderr,
    }
}

#[test]
fn mutation_fuzzer() {
    if !require_root("mutation_fuzzer") {
        return;
    }
    let execs: usize = std::env::var("FUZZ_EXECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x00c0_ffee_cafe_f00d);
    let sb = Sandbox::new("fuzz");
    // The mount point of the per-run tmpfs (see `run`).
    std::fs::create_dir_all("/var/lib/cni").unwrap();
    let node = NetNs::create();
    let cont = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    let data = sb.path("data").display().to_string();
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        format!("{data}/subnet.env"),
        "FLANNEL_NETWORK=10.73.0.0/16\nFLANNEL_SUBNET=10.73.0.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\n",
    )
    .unwrap();
    std::fs::write(
        format!("{data}/subnet6.env"),
        "FLANNEL_NETWORK=10.74.0.0/16\nFLANNEL_SUBNET=10.74.1.1/24\nFLANNEL_IPV6_NETWORK=fd74::/56\n\
         FLANNEL_IPV6_SUBNET=fd74:0:0:1::1/64\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n",
    )
    .unwrap();
    let seeds = seeds(&data, &cont.path());
    // Special files for path-valued keys and CNI_NETNS, outside dataDir.
    let special = sb.path("special");
    std::fs::create_dir_all(special.join("dir")).unwrap();
    std::fs::write(special.join("file"), "x\n").unwrap();
    let fifo = special.join("fifo").display().to_string();
    assert!(exec(std::path::Path::new("mkfifo"), &[&fifo], &[], "").status_ok);
    let specials: Vec<String> = [
        fifo.clone(),
        special.join("file").display().to_string(),
        special.join("dir").display().to_string(),
        "/dev/zero".into(),
        "/dev/null".into(),
        "/proc/self/ns/mnt".into(),
    ]
    .into();
    let cni_args = [
        "IgnoreUnknown=1;K8S_POD_NAME=pod;K8S_POD_NAMESPACE=ns;K8S_POD_UID=u1",
        "IgnoreUnknown=true;IP=10.73.0.60",
        "MAC=02:00:00:00:7f:20",
        "IP=fd73::60",
        "K8S_POD_NAME",
        "=;;=",
        "IgnoreUnknown=maybe",
        "NOSUCH=1",
    ];
    let mut counts = [0usize; 4]; // executions, signals, panics, hangs
    let verbs = [
        "ADD", "ADD", "ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION",
    ];
    let mut r = Rng(seed | 1);
    let mut failures = Vec::new();
    let mut n = 0;
    let t0 = Instant::now();
    while n < execs {
        let (applet, base) = r.pick(&seeds);
        let input = mutate(&mut r, base, &specials);
        let verb = *r.pick(&verbs);
        let prog = sb.bin.join(applet);
        // Mostly a few recurring IDs (so DEL, CHECK and GC meet earlier ADDs); now and then
        // one longer than a file name.
        let cid = match r.below(40) {
            0 => format!("fz{}{}", n % 50, "l".repeat(300)),
            1 => format!("fz{}{}", n % 50, "L".repeat(5000)),
            _ => format!("fz{}", n % 50),
        };
        // Rarely (each costs up to the deadline while the FIFO case still hangs) a CNI_NETNS
        // that is no network namespace.
        let netns = if r.below(400) == 0 {
            r.pick(&specials).clone()
        } else {
            cont.path()
        };
        let mut vars = vec![
            ("CNI_COMMAND", verb.to_string()),
            ("CNI_CONTAINERID", cid),
            ("CNI_NETNS", netns),
            ("CNI_IFNAME", "eth1".to_string()),
            ("CNI_PATH", sb.bin.display().to_string()),
            ("CNIBOX_STATE_DIR", sb.path("state").display().to_string()),
        ];
        if r.below(4) == 0 {
            vars.push(("CNI_ARGS", r.pick(&cni_args).to_string()));
        }
        let mut verbs_run = vec![verb];
        if verb == "ADD" {
            verbs_run.push("DEL");
        }
        for v in verbs_run {
            let mut vars = vars.clone();
            vars[0].1 = v.to_string();
            let out = run(&node, &sb.root, &prog, &vars, &input);
            n += 1;
            counts[0] += 1;
            let json_ok = serde_json::from_str::<Value>(&out.stdout).is_ok();
            let empty_ok =
                out.status_ok && out.stdout.trim().is_empty() && v != "ADD" && v != "VERSION";
            let crash = out.crash();
            if out.timed_out() {
                counts[3] += 1;
            } else if out.code.is_none() {
                counts[1] += 1;
            } else if crash.is_some() {
                counts[2] += 1;
            }
            let problem = if let Some(c) = crash {
                Some(c)
            } else if !json_ok && !empty_ok {
                Some("stdout is not JSON".to_string())
            } else {
                None
            };
            if let Some(p) = problem {
                let shown: String = input.chars().take(400).collect();
                failures.push(format!(
                    "exec {n} (seed {seed}): {applet} {v}: {p}\n  env: {:?}\n  input: {shown}\n  stdout: {}",
                    vars.iter()
                        .filter(|(k, _)| *k != "CNI_PATH" && *k != "CNIBOX_STATE_DIR")
                        .map(|(k, v)| format!("{k}={}", v.chars().take(40).collect::<String>()))
                        .collect::<Vec<_>>(),
                    out.stdout.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    let _ = std::io::stderr().write_all(
        format!(
            "fuzz: {} executions over {} seeds of {} applets, seed {seed}: {} signals, {} panics, \
             {} hangs, {} failures in all, {:.1} s\n",
            counts[0],
            seeds.len(),
            {
                let mut a: Vec<&str> = seeds.iter().map(|(a, _)| *a).collect();
                a.sort();
                a.dedup();
                a.len()
            },
            counts[1],
            counts[2],
            counts[3],
            failures.len(),
            t0.elapsed().as_secs_f64()
        )
        .as_bytes(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
