//! A mutation fuzzer over valid configs of every applet, run through the real binary inside a
//! throwaway node namespace: types flipped, keys deleted, duplicated or re-cased, hostile
//! strings, numbers at their limits, truncation, deep nesting, other verbs and versions. Each
//! ADD that succeeds is followed by DEL of the same input. The properties: no execution ends by
//! a signal, none runs longer than 5 s, stdout is always valid JSON (or empty where the spec
//! allows it: a successful DEL, CHECK, STATUS or GC).
//!
//! Deterministic: `FUZZ_SEED` (default fixed) and `FUZZ_EXECS` (default 3000 here; `make fuzz`
//! runs 20,000). A failure prints the seed, the execution number and the input.

mod common;
use common::*;
use serde_json::{Map, Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn seeds(data: &str, cont: &str) -> Vec<(&'static str, Value)> {
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "brfz"}, {"name": "vethfz0"}, {"name": "eth0", "sandbox": cont}],
        "ips": [{"address": "10.73.0.2/24", "gateway": "10.73.0.1", "interface": 2}]});
    let ipam = json!({"type": "host-local", "ranges": [[{"subnet": "10.73.0.0/24"}]],
        "routes": [{"dst": "0.0.0.0/0"}], "dataDir": data});
    vec![
        (
            "bridge",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "bridge", "bridge": "brfz",
            "isGateway": true, "ipMasq": true, "mtu": 1400, "hairpinMode": false,
            "ipam": ipam.clone()}),
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
        (
            "firewall",
            json!({"cniVersion": "1.0.0", "name": "fznet", "type": "firewall",
            "backend": "nftables", "ingressPolicy": "same-bridge", "prevResult": prev.clone()}),
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
fn mutate(r: &mut Rng, seed: &Value) -> String {
    let mut v = seed.clone();
    for _ in 0..1 + r.below(3) {
        let mut ps = Vec::new();
        paths(&v, &mut Vec::new(), &mut ps);
        if ps.is_empty() {
            break;
        }
        let p = r.pick(&ps).clone();
        let (parent, last) = p.split_at(p.len() - 1);
        match r.below(9) {
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

struct Run {
    signal: bool,
    timed_out: bool,
    ok: bool,
    stdout: String,
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
) -> Run {
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
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let mut stdout = String::new();
    if let Some(mut o) = child.stdout.take() {
        use std::io::Read;
        let _ = o.read_to_string(&mut stdout);
    }
    use std::os::unix::process::ExitStatusExt;
    Run {
        signal: status.is_some_and(|s| s.signal().is_some()),
        timed_out: status.is_none(),
        ok: status.is_some_and(|s| s.success()),
        stdout,
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
    let seeds = seeds(&data, &cont.path());
    let verbs = [
        "ADD", "ADD", "ADD", "DEL", "CHECK", "STATUS", "GC", "VERSION",
    ];
    let mut r = Rng(seed | 1);
    let mut failures = Vec::new();
    let mut n = 0;
    let t0 = Instant::now();
    while n < execs {
        let (applet, base) = r.pick(&seeds);
        let input = mutate(&mut r, base);
        let verb = *r.pick(&verbs);
        let prog = sb.bin.join(applet);
        let cid = format!("fz{}", n % 50);
        let vars = vec![
            ("CNI_COMMAND", verb.to_string()),
            ("CNI_CONTAINERID", cid),
            ("CNI_NETNS", cont.path()),
            ("CNI_IFNAME", "eth1".to_string()),
            ("CNI_PATH", sb.bin.display().to_string()),
            ("CNIBOX_STATE_DIR", sb.path("state").display().to_string()),
        ];
        let mut verbs_run = vec![verb];
        if verb == "ADD" {
            verbs_run.push("DEL");
        }
        for v in verbs_run {
            let mut vars = vars.clone();
            vars[0].1 = v.to_string();
            let out = run(&node, &sb.root, &prog, &vars, &input);
            n += 1;
            let json_ok = serde_json::from_str::<Value>(&out.stdout).is_ok();
            let empty_ok = out.ok && out.stdout.trim().is_empty() && v != "ADD" && v != "VERSION";
            let problem = if out.signal {
                Some("killed by a signal")
            } else if out.timed_out {
                Some("ran longer than 5 s")
            } else if !json_ok && !empty_ok {
                Some("stdout is not JSON")
            } else {
                None
            };
            if let Some(p) = problem {
                let shown: String = input.chars().take(400).collect();
                failures.push(format!(
                    "exec {n} (seed {seed}): {applet} {v}: {p}\n  input: {shown}\n  stdout: {}",
                    out.stdout.chars().take(300).collect::<String>()
                ));
            }
        }
    }
    let _ = std::io::stderr().write_all(
        format!(
            "fuzz: {n} executions, seed {seed}, {} failures, {:.1} s\n",
            failures.len(),
            t0.elapsed().as_secs_f64()
        )
        .as_bytes(),
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
