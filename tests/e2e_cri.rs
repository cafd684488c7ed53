//! containerd's CRI plugin drives cnibox as kubelet would: a private containerd (its own config,
//! sockets, root and state dirs in a temp dir, started in a throwaway "node" namespace with a
//! "client" namespace playing a second host) whose CRI `bin_dir` holds the applet links and
//! whose `conf_dir` holds a Kubernetes-style conflist: bridge + host-local, portmap
//! (portMappings), bandwidth (bandwidth), firewall. The sandbox image is built here (a static
//! pause from tests/e2e/cri/pause.c) and imported; a small CRI client in Python
//! (tests/e2e/cri/cri.py, runtime.v1 over gRPC) makes the calls kubelet makes:
//! RunPodSandbox with port mappings and bandwidth annotations, PodSandboxStatus,
//! StopPodSandbox, RemovePodSandbox.
//!
//! Covered: pod IPs, pod-to-pod traffic, a hostPort from another host, the qdiscs from the
//! annotations, 20 pods started at once, containerd killed and restarted with pods running,
//! and nothing left after teardown (links, ifbs, reservations, rules, pod namespaces); and a
//! dual-stack network (two host-local ranges): both addresses per pod, IPv6 pod-to-pod, the
//! hostPort over IPv6 from another host.
//!
//! The IPv4 test's `bin_dir` is installed by the installer image (Containerfile), run by podman
//! over the Go plugins with `--force`, as the DaemonSet of contrib/kubernetes/ does.
//!
//! The machine this runs on does not let a process lower its oom_score_adj, which the CRI
//! plugin does for sandboxes (-998): `restrict_oom_score_adj` keeps it at containerd's own.

mod common;
use common::dual::add_v6_link_ns;
use common::plugdir::Image;
use common::traffic::{answers, node_and_client};
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "cnibox.test/pause:1";
const APPLETS: &[&str] = &[
    "bridge",
    "host-local",
    "portmap",
    "bandwidth",
    "firewall",
    "loopback",
];

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// One private containerd in a node namespace, and everything it needs; all of it goes on drop.
struct Cri {
    tmp: PathBuf,
    sock: PathBuf,
    node: NetNs,
    client: NetNs,
    n: u8,
    /// The network has an IPv6 range (`fd00:N::/64`) besides its IPv4 one, and the node ↔
    /// client link carries IPv6 (tests/common/dual.rs).
    dual: bool,
    containerd: Option<Child>,
}

impl Cri {
    /// `None` (with a skip note, a failure under CNIBOX_REQUIRE_ALL=1) when a tool is missing.
    fn new(test: &str, n: u8, dual: bool) -> Option<Cri> {
        if !require_root(test) {
            return None;
        }
        for tool in [
            "containerd",
            "ctr",
            "runc",
            "nsenter",
            "gcc",
            "python3",
            "socat",
            "tc",
        ] {
            if !have(tool) {
                skip_note(test, &format!("{tool} missing"));
                return None;
            }
        }
        let grpc = Command::new("python3")
            .args(["-c", "import grpc, grpc_tools"])
            .status();
        if !grpc.is_ok_and(|s| s.success()) {
            skip_note(
                test,
                "python3 grpcio/grpcio-tools missing (pip install grpcio grpcio-tools)",
            );
            return None;
        }
        let tmp = std::env::temp_dir().join(format!("cnibox-cri-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        for d in ["bin", "net.d", "root", "state", "opt", "ipam", "py"] {
            std::fs::create_dir_all(tmp.join(d)).unwrap();
        }
        let (node, client) = node_and_client(n);
        let cri = Cri {
            sock: tmp.join("containerd.sock"),
            tmp,
            node,
            client,
            n,
            dual,
            containerd: None,
        };
        if dual {
            add_v6_link_ns(n, &cri.node, &cri.client);
        }
        let binary = std::env::var_os("CNIBOX_STATIC")
            .map(PathBuf::from)
            .unwrap_or_else(bin);
        // The IPv4 network's bin_dir is installed as a DaemonSet installs it: the installer
        // image (tests/image.rs) run over the Go plugins with --force. The dual-stack one links.
        let image = if dual { None } else { Image::build(test) };
        let dir = cri.tmp.join("bin");
        if let Some(image) = image {
            for a in APPLETS {
                let _ = std::fs::copy(reference_path(a), dir.join(a));
            }
            let out = image.install(&dir, &["--force"]);
            assert!(out.ok, "the installer image: {out:?}");
        } else {
            for a in APPLETS {
                std::os::unix::fs::symlink(&binary, dir.join(a)).unwrap();
            }
        }
        cri.write_config();
        cri.build_image();
        Some(cri)
    }

    fn path(&self, rel: &str) -> String {
        self.tmp.join(rel).display().to_string()
    }

    fn write_config(&self) {
        let t = self.tmp.display();
        let config = include_str!("e2e/cri/containerd.toml")
            .replace("@DIR@", &t.to_string())
            .replace("@IMAGE@", IMAGE);
        std::fs::write(self.tmp.join("config.toml"), config).unwrap();
        let n = self.n;
        let mut ranges = vec![serde_json::json!([{"subnet": format!("10.244.{n}.0/24")}])];
        let mut routes = vec![serde_json::json!({"dst": "0.0.0.0/0"})];
        if self.dual {
            ranges.push(serde_json::json!([{"subnet": format!("fd00:{n}::/64")}]));
            routes.push(serde_json::json!({"dst": "::/0"}));
        }
        let conflist = serde_json::json!({
            "cniVersion": "1.0.0", "name": "k8s-pod-network",
            "plugins": [
                {"type": "bridge", "bridge": format!("cni-e2e{n}"), "isGateway": true,
                 "ipMasq": true, "hairpinMode": true,
                 "ipam": {"type": "host-local", "ranges": ranges,
                          "routes": routes, "dataDir": self.path("ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}},
                {"type": "firewall"}
            ]
        });
        std::fs::write(
            self.tmp.join("net.d/10-k8s.conflist"),
            serde_json::to_string_pretty(&conflist).unwrap(),
        )
        .unwrap();
    }

    fn build_image(&self) {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/cri/pause.c");
        let pause = self.tmp.join("pause");
        let out = exec(
            Path::new("gcc"),
            &[
                "-static",
                "-Os",
                "-o",
                &pause.display().to_string(),
                &src.display().to_string(),
            ],
            &[],
            "",
        );
        assert!(out.status_ok, "building pause: {out:?}");
        let tar = self.path("pause.tar");
        let out = self.py_raw(&["build-image", &pause.display().to_string(), IMAGE, &tar]);
        assert!(out.status_ok, "building the image: {out:?}");
    }

    /// Start containerd in the node namespace (nsenter, not `ip netns exec`: the pod
    /// namespaces it bind-mounts under /run/netns must stay visible to everyone) and wait for
    /// its CRI to answer.
    fn start(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.tmp.join("containerd.log"))
            .unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net={}", self.node.path()))
            .args(["containerd", "--config", &self.path("config.toml")])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        self.containerd = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.sock.exists() {
            assert!(
                Instant::now() < deadline,
                "containerd socket never appeared"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The CRI plugin is up when Version answers (the client waits for the channel).
        let v = self.py(&["version"]);
        assert_eq!(v["runtime"], "containerd", "{v}");
    }

    fn import_image(&self) {
        let out = exec(
            Path::new("ctr"),
            &[
                "-a",
                &self.sock.display().to_string(),
                "-n",
                "k8s.io",
                "images",
                "import",
                "--snapshotter",
                "native",
                &self.path("pause.tar"),
            ],
            &[],
            "",
        );
        assert!(out.status_ok, "ctr images import: {out:?}");
    }

    /// Kill containerd at once (SIGKILL): pods keep running under their shims.
    fn kill(&mut self) {
        if let Some(mut c) = self.containerd.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.sock);
    }

    fn py_raw(&self, args: &[&str]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/cri/cri.py");
        let mut full = vec![script.display().to_string()];
        if args[0] != "build-image" {
            full.push(self.sock.display().to_string());
        }
        full.extend(args.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let py_out = self.path("py");
        exec(Path::new("python3"), &refs, &[("CRI_PY_OUT", &py_out)], "")
    }

    #[track_caller]
    fn py(&self, args: &[&str]) -> Value {
        let out = self.py_raw(args);
        assert!(out.status_ok, "cri.py {args:?}: {out:?}");
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    }

    fn status(&self, id: &str) -> Value {
        self.py(&["status", id])
    }

    fn node_sh(&self, cmd: &[&str]) -> String {
        self.node.sh(cmd)
    }

    /// Every trace pods can leave in the node: veths, ifbs, reservations, rules naming pod
    /// addresses, pod namespaces.
    fn traces(&self, ips: &[String], netns: &[String]) -> Vec<String> {
        let mut left = Vec::new();
        for l in self.node_sh(&["ip", "-o", "link", "show"]).lines() {
            let name = l
                .split(": ")
                .nth(1)
                .unwrap_or("")
                .split('@')
                .next()
                .unwrap_or("");
            if name.starts_with("veth") || name.starts_with("bwp") {
                left.push(format!("link {name}"));
            }
        }
        for e in std::fs::read_dir(self.tmp.join("ipam/k8s-pod-network"))
            .into_iter()
            .flatten()
        {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.parse::<std::net::IpAddr>().is_ok() {
                left.push(format!("reservation {name}"));
            }
        }
        let rules = format!(
            "{}{}{}",
            self.node_sh(&["iptables-save"]),
            self.node_sh(&["ip6tables-save"]),
            self.node_sh(&["nft", "list", "ruleset"])
        );
        for ip in ips {
            for l in rules.lines() {
                if l.contains(&format!("{ip}/"))
                    || l.contains(&format!("{ip}:"))
                    || l.contains(&format!("{ip} "))
                {
                    left.push(format!("rule {l}"));
                }
            }
        }
        for p in netns {
            if Path::new(p).exists() {
                left.push(format!("netns {p}"));
            }
        }
        left
    }
}

impl Drop for Cri {
    fn drop(&mut self) {
        // Pods first (their DELs run through cnibox), then containerd, its shims and mounts.
        if self.containerd.is_some()
            && let Ok(list) = serde_json::from_str::<Value>(&self.py_raw(&["list"]).stdout)
        {
            for p in list["items"].as_array().cloned().unwrap_or_default() {
                let id = p["id"].as_str().unwrap_or_default();
                let _ = self.py_raw(&["stop", id]);
                let _ = self.py_raw(&["remove", id]);
            }
        }
        self.kill();
        let tag = self.tmp.display().to_string();
        let _ = Command::new("pkill").args(["-9", "-f", &tag]).status();
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split(' ').nth(1))
            .filter(|m| m.starts_with(&tag))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// A socat server in a pod's network namespace (by path), killed on drop.
struct PodServer(Child);

impl PodServer {
    /// `v6`: one IPv6 socket that also takes IPv4 (mapped) connections.
    fn start(netns: &str, port: u16, reply: &str, v6: bool) -> PodServer {
        let listen = if v6 {
            format!("TCP6-LISTEN:{port},fork,reuseaddr,ipv6only=0")
        } else {
            format!("TCP4-LISTEN:{port},fork,reuseaddr")
        };
        let child = Command::new("nsenter")
            .arg(format!("--net={netns}"))
            .args(["socat", &listen])
            .arg(format!("SYSTEM:echo {reply}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("socat in the pod");
        let server = PodServer(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ss = Command::new("nsenter")
                .arg(format!("--net={netns}"))
                .args(["ss", "-Hltn", &format!("sport = :{port}")])
                .output()
                .unwrap();
            if !String::from_utf8_lossy(&ss.stdout).trim().is_empty() {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "server in {netns} did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for PodServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn in_pod(netns: &str, cmd: &[&str]) -> bool {
    Command::new("nsenter")
        .arg(format!("--net={netns}"))
        .args(cmd)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn kubernetes_pods_through_containerd_cri() {
    let Some(mut cri) = Cri::new("kubernetes_pods_through_containerd_cri", 131, false) else {
        return;
    };
    let n = cri.n;
    cri.start();
    cri.import_image();

    // Two pods, one with a hostPort and the bandwidth annotations, as kubelet sends them.
    let a = cri.py(&[
        "run",
        "pod-a",
        "--port",
        "8080:80/tcp",
        "--ingress",
        "10M",
        "--egress",
        "20M",
    ]);
    let b = cri.py(&["run", "pod-b"]);
    let (a, b) = (
        a["id"].as_str().unwrap().to_string(),
        b["id"].as_str().unwrap().to_string(),
    );
    let (sa, sb) = (cri.status(&a), cri.status(&b));
    for s in [&sa, &sb] {
        assert_eq!(s["state"], "SANDBOX_READY", "{s}");
        assert!(
            s["ip"]
                .as_str()
                .unwrap()
                .starts_with(&format!("10.244.{n}.")),
            "{s}"
        );
        assert!(
            s["netns"].as_str().unwrap().starts_with("/var/run/netns/"),
            "{s}"
        );
    }
    let (ip_a, ip_b) = (
        sa["ip"].as_str().unwrap().to_string(),
        sb["ip"].as_str().unwrap().to_string(),
    );
    let (ns_a, ns_b) = (
        sa["netns"].as_str().unwrap().to_string(),
        sb["netns"].as_str().unwrap().to_string(),
    );
    assert_ne!(ip_a, ip_b);

    // Pod to pod, and the hostPort from a second host through the node's address.
    assert!(
        in_pod(&ns_a, &["ping", "-c", "1", "-W", "5", &ip_b]),
        "pod a -> pod b"
    );
    assert!(
        in_pod(&ns_b, &["ping", "-c", "1", "-W", "5", &ip_a]),
        "pod b -> pod a"
    );
    let _srv = PodServer::start(&ns_a, 80, "hello-from-a", false);
    let node_ip = format!("192.168.{n}.1");
    assert!(
        answers(&cri.client, "tcp", &node_ip, 8080, "hello-from-a"),
        "hostPort 8080 from the second host"
    );

    // The annotations' limits: 10M ingress as a tbf on the pod's host veth, 20M egress on its
    // ifb.
    let qdiscs = cri.node_sh(&["tc", "qdisc", "show"]);
    assert!(
        qdiscs
            .lines()
            .any(|l| l.contains("tbf") && l.contains("dev veth") && l.contains("rate 10Mbit")),
        "{qdiscs}"
    );
    assert!(
        qdiscs
            .lines()
            .any(|l| l.contains("tbf") && l.contains("dev bwp") && l.contains("rate 20Mbit")),
        "{qdiscs}"
    );

    // Twenty pods at once.
    let many = cri.py(&["run-many", "burst", "20"]);
    assert_eq!(many["errors"], serde_json::json!([]), "{many}");
    let ids: Vec<String> = many["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut ips: Vec<String> = vec![ip_a.clone(), ip_b.clone()];
    let mut netns = vec![ns_a.clone(), ns_b.clone()];
    for id in &ids {
        let s = cri.status(id);
        assert_eq!(s["state"], "SANDBOX_READY", "{s}");
        ips.push(s["ip"].as_str().unwrap().to_string());
        netns.push(s["netns"].as_str().unwrap().to_string());
    }
    let mut distinct = ips.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 22, "pod IPs not distinct: {ips:?}");

    // containerd dies and comes back: the pods are still there and still served.
    cri.kill();
    cri.start();
    let list = cri.py(&["list"]);
    let listed = list["items"].as_array().unwrap();
    assert_eq!(listed.len(), 22, "{list}");
    assert!(
        listed.iter().all(|p| p["state"] == "SANDBOX_READY"),
        "{list}"
    );
    assert!(
        answers(&cri.client, "tcp", &node_ip, 8080, "hello-from-a"),
        "hostPort after the containerd restart"
    );
    assert!(
        !cri.traces(&ips, &netns).is_empty(),
        "the trace check sees nothing while pods run"
    );

    // Teardown as kubelet does it, through the restarted containerd.
    for id in ids.iter().chain([&a, &b]) {
        cri.py(&["stop", id]);
        cri.py(&["stop", id]);
        cri.py(&["remove", id]);
    }
    assert_eq!(cri.py(&["list"])["items"], serde_json::json!([]));
    let left = cri.traces(&ips, &netns);
    assert!(
        left.is_empty(),
        "left behind after teardown:\n{}",
        left.join("\n")
    );
}

/// A dual-stack cluster's pods: the conflist's host-local has an IPv4 and an IPv6 range (as
/// kubeadm and kind write for `--pod-network-cidr=v4,v6`); each pod gets both addresses
/// (PodSandboxStatus's `ip` and `additional_ips`), pods reach each other over IPv6, the hostPort
/// answers a second host on the node's IPv6 address as well as its IPv4 one, and teardown
/// leaves nothing of either family.
#[test]
fn dual_stack_pods_through_containerd_cri() {
    let n = common::lab::unique_n();
    let Some(mut cri) = Cri::new("dual_stack_pods_through_containerd_cri", n, true) else {
        return;
    };
    cri.start();
    cri.import_image();
    let a = cri.py(&["run", "dual-a", "--port", "8080:80/tcp"]);
    let b = cri.py(&["run", "dual-b"]);
    let (a, b) = (
        a["id"].as_str().unwrap().to_string(),
        b["id"].as_str().unwrap().to_string(),
    );
    let mut ips = Vec::new();
    let mut netns = Vec::new();
    let mut v6 = Vec::new();
    for id in [&a, &b] {
        let s = cri.status(id);
        assert_eq!(s["state"], "SANDBOX_READY", "{s}");
        let pod_ips: Vec<String> = s["ips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().to_string())
            .collect();
        assert_eq!(pod_ips.len(), 2, "two addresses: {s}");
        assert!(pod_ips[0].starts_with(&format!("10.244.{n}.")), "{s}");
        assert!(pod_ips[1].starts_with(&format!("fd00:{n}::")), "{s}");
        v6.push(pod_ips[1].clone());
        ips.extend(pod_ips);
        netns.push(s["netns"].as_str().unwrap().to_string());
    }
    assert!(
        in_pod(&netns[0], &["ping", "-c", "1", "-W", "5", &v6[1]]),
        "pod a -> pod b over IPv6"
    );
    assert!(
        in_pod(&netns[1], &["ping", "-c", "1", "-W", "5", &v6[0]]),
        "pod b -> pod a over IPv6"
    );
    let _srv = PodServer::start(&netns[0], 80, "hello-from-a", true);
    for node_ip in [format!("fd00:{n}:1::1"), format!("192.168.{n}.1")] {
        assert!(
            answers(&cri.client, "tcp", &node_ip, 8080, "hello-from-a"),
            "hostPort 8080 from the second host at {node_ip}"
        );
    }
    assert!(
        !cri.traces(&ips, &netns).is_empty(),
        "the trace check sees nothing while pods run"
    );
    for id in [&a, &b] {
        cri.py(&["stop", id]);
        cri.py(&["remove", id]);
    }
    let left = cri.traces(&ips, &netns);
    assert!(
        left.is_empty(),
        "left behind after teardown:\n{}",
        left.join("\n")
    );
}
