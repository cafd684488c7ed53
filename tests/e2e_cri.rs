//! containerd's CRI plugin drives cnibox as kubelet would, for containerd 1.6 (Debian 12's
//! package) and containerd 2.1 (Debian unstable's, unpacked by `.ci/fetch-unstable
//! containerd`), each from its own package with its own shim (`containerd-shim-runc-v2`) and
//! `ctr`, and its own config form (tests/e2e/cri/containerd.toml, version 2;
//! containerd-v3.toml, version 3): a private containerd (its own config, sockets, root and state
//! dirs in a temp dir, started in a throwaway "node" namespace with a "client" namespace
//! playing a second host) whose CRI `bin_dir` holds the applet links and whose `conf_dir` holds
//! a Kubernetes-style conflist: bridge + host-local, portmap (portMappings), bandwidth
//! (bandwidth), firewall. The sandbox image is built here (a static pause from
//! tests/e2e/cri/pause.c) and imported; a small CRI client in Python (tests/e2e/cri/cri.py,
//! runtime.v1 over gRPC) makes the calls kubelet makes: RunPodSandbox with port mappings and
//! bandwidth annotations, PodSandboxStatus, StopPodSandbox, RemovePodSandbox, Status.
//!
//! Covered for each containerd, in IPv4, IPv6 and dual-stack: pod addresses, pod-to-pod
//! traffic, a hostPort from another host, the qdiscs from the annotations, the bridge's `dns`
//! in the CNI result containerd keeps (it replaces host-local's `resolvConf`), 20 pods started
//! at once, containerd killed and restarted with pods running, and nothing left after
//! teardown (links, ifbs, reservations, rules, pod namespaces).
//!
//! What only 2.x does: its CRI `Status` (what kubelet polls for the node's NetworkReady) runs
//! CNI STATUS on a 1.1.0 network (go-cni `Status` → libcni `GetStatusNetworkList`). Covered: a
//! host-local range full of reservations nobody confirmed leaves the node Ready (as v1.9.1's
//! host-local does) until a GC confirms them; flannel without `subnet.env` and dhcp without
//! its daemon make it NotReady with the plugin's message, and Ready again once they are there.
//! containerd 2.1 runs no CNI GC (go-cni v1.1.12's `CNI` interface has no GC; nothing in
//! containerd calls libcni's `GCNetworkList`), so nothing here waits for one.
//!
//! The IPv4 tests' `bin_dir` is installed by the installer image (Containerfile), run by podman
//! over the Go plugins with `--force`, as the DaemonSet of contrib/kubernetes/ does.
//!
//! The machine this runs on does not let a process lower its oom_score_adj, which the CRI
//! plugin does for sandboxes (-998): `restrict_oom_score_adj` keeps it at containerd's own.

mod common;
use common::dual::add_v6_link_ns;
use common::family::{FAMILIES, Fam};
use common::lab::unique_n;
use common::plugdir::Image;
use common::traffic::{answers, node_and_client};
use common::wait::wait_for;
use common::*;
use serde_json::{Value, json};
use std::cell::RefCell;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

const IMAGE: &str = "cnibox.test/pause:1";
const NETWORK: &str = "k8s-pod-network";
/// The applets the node installs for its networks (a subset: what the CRI conflists use).
const PLUGINS: &[&str] = &[
    "bridge",
    "host-local",
    "portmap",
    "bandwidth",
    "firewall",
    "loopback",
    "flannel",
    "dhcp",
];
/// The bridge's `dns` (what a cluster DNS service would be), and host-local's `resolvConf`
/// DNS that it replaces in the result.
const CLUSTER_DNS: &str = "10.96.0.10";
const CLUSTER_SEARCH: &str = "svc.cluster.local";
const HOST_DNS: &str = "10.0.0.99";

/// Which containerd runs the node: each from its own package, with its own shim and `ctr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Containerd {
    /// Debian 12's containerd 1.6 (`/usr/bin`): config version 2; its libcni knows CNI spec
    /// versions up to 1.0.0 only, and its CRI `Status` runs no plugin.
    V16,
    /// containerd 2.1 from Debian unstable (`.ci/fetch-unstable containerd`): config version
    /// 3, networks in CNI 1.1.0, so its CRI `Status` runs the plugins' STATUS.
    V21,
}

impl Containerd {
    fn tag(self) -> &'static str {
        match self {
            Containerd::V16 => "1.6",
            Containerd::V21 => "2.1",
        }
    }

    /// Where the package put containerd, its shim and ctr.
    fn bin_dir(self) -> PathBuf {
        match self {
            Containerd::V16 => PathBuf::from("/usr/bin"),
            Containerd::V21 => {
                let base = std::env::var("CNIBOX_UNSTABLE")
                    .ok()
                    .filter(|b| !b.is_empty())
                    .unwrap_or_else(|| "/var/cache/cnibox-unstable".into());
                Path::new(&base).join("containerd/usr/bin")
            }
        }
    }

    fn exe(self, name: &str) -> PathBuf {
        self.bin_dir().join(name)
    }

    /// The config template (`@DIR@`, `@IMAGE@`), one copy each, shared with benches/cri.sh.
    fn config(self) -> &'static str {
        match self {
            Containerd::V16 => include_str!("e2e/cri/containerd.toml"),
            Containerd::V21 => include_str!("e2e/cri/containerd-v3.toml"),
        }
    }

    /// The highest CNI spec version its libcni runs.
    fn cni_version(self) -> &'static str {
        match self {
            Containerd::V16 => "1.0.0",
            Containerd::V21 => "1.1.0",
        }
    }
}

/// How the test's `bin_dir` gets its plugins.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Install {
    /// The installer image over the Go plugins (`--force`), as the DaemonSet does.
    Image,
    /// Links to the binary under test.
    Links,
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pids of the processes whose command line names `needle` (a path only this test uses).
fn processes_naming(needle: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// Pids of the processes inside one of the network namespaces at `paths` (pause processes,
/// servers started in pods).
fn processes_in(paths: &[String]) -> Vec<i32> {
    let inodes: Vec<u64> = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.ino())
        .collect();
    if inodes.is_empty() {
        return Vec::new();
    }
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| inodes.contains(&m.ino()))
        })
        .collect()
}

fn kill_pids(pids: &[i32]) {
    for &pid in pids {
        // SAFETY: kill has no memory-safety preconditions; the pids were just found naming
        // this test's own paths or namespaces.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// A pod as PodSandboxStatus reports it.
struct Pod {
    ips: Vec<String>,
    netns: String,
    dns: Value,
}

/// One private containerd in a node namespace, and everything it needs; all of it goes on drop.
struct Cri {
    tmp: PathBuf,
    sock: PathBuf,
    node: NetNs,
    client: NetNs,
    n: u8,
    cd: Containerd,
    fam: Fam,
    containerd: Option<Child>,
    /// Every pod namespace a status showed: removed on drop if containerd did not.
    netns_seen: RefCell<Vec<String>>,
    /// Extra environment for containerd (what a systemd drop-in's `Environment=` gives it).
    env: Vec<(String, String)>,
}

impl Cri {
    /// `None` (with a skip note, a failure under CNIBOX_REQUIRE_ALL=1) when a tool is missing.
    fn new(test: &str, cd: Containerd, fam: Fam, install: Install) -> Option<Cri> {
        if !require_root(test) {
            return None;
        }
        for tool in ["runc", "nsenter", "gcc", "python3", "socat", "tc"] {
            if !have(tool) {
                skip_note(test, &format!("{tool} missing"));
                return None;
            }
        }
        for exe in ["containerd", "containerd-shim-runc-v2", "ctr"] {
            if !cd.exe(exe).is_file() {
                let why = format!(
                    "{} missing (containerd {})",
                    cd.exe(exe).display(),
                    cd.tag()
                );
                skip_note(test, &why);
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
        let n = unique_n();
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
            cd,
            fam,
            containerd: None,
            netns_seen: RefCell::new(Vec::new()),
            env: Vec::new(),
        };
        if fam.has_v6() {
            add_v6_link_ns(n, &cri.node, &cri.client);
        }
        let binary = std::env::var_os("CNIBOX_STATIC")
            .map(PathBuf::from)
            .unwrap_or_else(bin);
        let image = match install {
            Install::Image => Image::build(test),
            Install::Links => None,
        };
        let dir = cri.tmp.join("bin");
        if let Some(image) = image {
            for a in PLUGINS {
                let _ = std::fs::copy(reference_path(a), dir.join(a));
            }
            let out = image.install(&dir, &["--force"]);
            assert!(out.ok, "the installer image: {out:?}");
        } else {
            for a in PLUGINS {
                std::os::unix::fs::symlink(&binary, dir.join(a)).unwrap();
            }
        }
        let t = cri.tmp.display().to_string();
        let config = cd.config().replace("@DIR@", &t).replace("@IMAGE@", IMAGE);
        std::fs::write(cri.tmp.join("config.toml"), config).unwrap();
        std::fs::write(
            cri.tmp.join("resolv.conf"),
            format!("nameserver {HOST_DNS}\n"),
        )
        .unwrap();
        cri.set_network(&cri.pod_network());
        cri.build_image();
        Some(cri)
    }

    fn path(&self, rel: &str) -> String {
        self.tmp.join(rel).display().to_string()
    }

    /// The Kubernetes-style network of the pod tests, in this test's families.
    fn pod_network(&self) -> Value {
        let n = self.n;
        json!({
            "cniVersion": self.cd.cni_version(), "name": NETWORK,
            "plugins": [
                {"type": "bridge", "bridge": format!("cni-e2e{n}"), "isGateway": true,
                 "ipMasq": true, "hairpinMode": true,
                 "dns": {"nameservers": [CLUSTER_DNS], "search": [CLUSTER_SEARCH]},
                 "ipam": {"type": "host-local", "ranges": self.fam.ranges(n),
                          "routes": self.fam.default_routes(), "dataDir": self.path("ipam"),
                          "resolvConf": self.path("resolv.conf")}},
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}},
                {"type": "firewall"}
            ]
        })
    }

    /// Put `conflist` in `conf_dir` as the node's one network. Written in place: containerd's
    /// watcher reloads on writes and ignores files created (or renamed) into the directory; a
    /// half-written file it may read fails that load, and the write's end triggers the next.
    fn set_network(&self, conflist: &Value) {
        let text = serde_json::to_string_pretty(conflist).unwrap();
        std::fs::write(self.tmp.join("net.d/10-k8s.conflist"), text).unwrap();
    }

    /// [`Cri::set_network`] on a running containerd, and wait until its CRI plugin has loaded
    /// it (its verbose Status names the network).
    fn switch_network(&self, conflist: &Value) {
        self.set_network(conflist);
        let name = conflist["name"].as_str().unwrap();
        wait_for(
            format!("containerd to load network {name}"),
            Duration::from_secs(60),
            || {
                let s = self.runtime_status();
                s["networks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n == name)
                    .then_some(())
            },
        );
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
    /// namespaces it bind-mounts under /run/netns must stay visible to everyone), its package's
    /// directory first in PATH so that it starts its own shim, and wait for its CRI to answer.
    fn start(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.tmp.join("containerd.log"))
            .unwrap();
        let path = format!(
            "{}:{}",
            self.cd.bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let child = Command::new("nsenter")
            .arg(format!("--net={}", self.node.path()))
            .arg(self.cd.exe("containerd"))
            .args(["--config", &self.path("config.toml")])
            .env("PATH", path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start containerd");
        self.containerd = Some(child);
        wait_for("the containerd socket", Duration::from_secs(60), || {
            self.sock.exists().then_some(())
        });
        // The CRI plugin is up when Version answers (the client waits for the channel).
        let v = self.py(&["version"]);
        assert_eq!(v["runtime"], "containerd", "{v}");
        let version = v["version"].as_str().unwrap();
        assert!(
            version.starts_with(&format!("{}.", self.cd.tag())),
            "containerd {} expected: {v}",
            self.cd.tag()
        );
    }

    fn import_image(&self) {
        let out = exec(
            &self.cd.exe("ctr"),
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

    /// The executables of the shims serving this containerd (their command line names its
    /// socket).
    fn shims(&self) -> Vec<PathBuf> {
        let sock = self.sock.display().to_string();
        processes_naming(&sock)
            .into_iter()
            .filter_map(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
            .filter(|exe| exe.ends_with("containerd-shim-runc-v2"))
            .collect()
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

    /// RunPodSandbox; the pod's id.
    #[track_caller]
    fn run(&self, args: &[&str]) -> String {
        let mut full = vec!["run"];
        full.extend(args);
        self.py(&full)["id"].as_str().unwrap().to_string()
    }

    /// PodSandboxStatus of a pod that must be ready with one address of each family of the
    /// network (IPv4 first), in its ranges.
    #[track_caller]
    fn pod(&self, id: &str) -> Pod {
        let s = self.py(&["status", id]);
        assert_eq!(s["state"], "SANDBOX_READY", "{s}");
        let netns = s["netns"].as_str().unwrap().to_string();
        assert!(netns.starts_with("/var/run/netns/"), "{s}");
        self.netns_seen.borrow_mut().push(netns.clone());
        let ips: Vec<String> = s["ips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().to_string())
            .collect();
        let mut want = Vec::new();
        if self.fam.has_v4() {
            want.push(format!("10.{}.0.", self.n));
        }
        if self.fam.has_v6() {
            want.push(format!("fd00:{}::", self.n));
        }
        assert_eq!(ips.len(), want.len(), "{}: {s}", self.fam.tag());
        for (ip, prefix) in ips.iter().zip(&want) {
            assert!(ip.starts_with(prefix.as_str()), "{ip} not in {prefix}: {s}");
        }
        Pod {
            ips,
            netns,
            dns: s["dns"].clone(),
        }
    }

    /// The CRI runtime Status, verbose: conditions by type, and the loaded networks' names.
    fn runtime_status(&self) -> Value {
        self.py(&["runtime-status"])
    }

    /// The NetworkReady condition ({status, reason, message}).
    fn network_ready(&self) -> Value {
        self.runtime_status()["conditions"]["NetworkReady"].clone()
    }

    /// The node's addresses on the client link, one per family of the test.
    fn node_ips(&self) -> Vec<String> {
        let mut ips = Vec::new();
        if self.fam.has_v4() {
            ips.push(format!("192.168.{}.1", self.n));
        }
        if self.fam.has_v6() {
            ips.push(format!("fd00:{}:1::1", self.n));
        }
        ips
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
        for e in std::fs::read_dir(self.tmp.join("ipam").join(NETWORK))
            .into_iter()
            .flatten()
        {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if name.parse::<IpAddr>().is_ok() {
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
        // Pods first (their DELs run through cnibox), then containerd, its shims, whatever still
        // runs in a pod's namespace, and the mounts: pod namespaces and the snapshots.
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
        kill_pids(&processes_naming(&tag));
        let seen = self.netns_seen.borrow().clone();
        kill_pids(&processes_in(&seen));
        for p in seen.iter().filter(|p| Path::new(p).exists()) {
            let _ = Command::new("umount").args(["-l", p]).status();
            let _ = std::fs::remove_file(p);
        }
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
        wait_for(
            format!("the server in {netns} to listen"),
            Duration::from_secs(30),
            || {
                let ss = Command::new("nsenter")
                    .arg(format!("--net={netns}"))
                    .args(["ss", "-Hltn", &format!("sport = :{port}")])
                    .output()
                    .unwrap();
                (!String::from_utf8_lossy(&ss.stdout).trim().is_empty()).then_some(())
            },
        );
        server
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

/// The whole life of a node's pods under one containerd, in one family: two pods (one with a
/// hostPort and the bandwidth annotations, as kubelet sends them), traffic between them and
/// from a second host, twenty pods at once, containerd killed and restarted with the pods
/// running, and a teardown that leaves nothing.
fn pods_through_cri(test: &str, cd: Containerd, fam: Fam) {
    let install = if fam == Fam::V4 {
        Install::Image
    } else {
        Install::Links
    };
    let Some(mut cri) = Cri::new(test, cd, fam, install) else {
        return;
    };
    cri.start();
    cri.import_image();

    let a = cri.run(&[
        "pod-a",
        "--port",
        "8080:80/tcp",
        "--ingress",
        "10M",
        "--egress",
        "20M",
    ]);
    let b = cri.run(&["pod-b"]);
    let (pa, pb) = (cri.pod(&a), cri.pod(&b));
    assert_ne!(pa.ips, pb.ips);

    // Every sandbox runs under this containerd's own shim.
    let shims = cri.shims();
    assert!(!shims.is_empty(), "no shim serves containerd {}", cd.tag());
    let own = cd.exe("containerd-shim-runc-v2");
    assert!(
        shims.iter().all(|s| *s == own),
        "containerd {} runs shims {shims:?}, not {}",
        cd.tag(),
        own.display()
    );

    // The CNI result containerd keeps has the bridge's dns, not host-local's resolvConf.
    for p in [&pa, &pb] {
        assert_eq!(
            p.dns,
            json!([{"nameservers": [CLUSTER_DNS], "search": [CLUSTER_SEARCH]}]),
            "the pod's DNS in containerd {}'s CNI result",
            cd.tag()
        );
    }

    // Pod to pod in each family, and the hostPort from a second host at each node address.
    for (from, to) in [(&pa, &pb), (&pb, &pa)] {
        for ip in &to.ips {
            assert!(
                in_pod(&from.netns, &["ping", "-c", "1", "-W", "5", ip]),
                "{} -> {ip}",
                from.ips[0]
            );
        }
    }
    let _srv = PodServer::start(&pa.netns, 80, "hello-from-a", fam.has_v6());
    for node_ip in cri.node_ips() {
        assert!(
            answers(&cri.client, "tcp", &node_ip, 8080, "hello-from-a"),
            "hostPort 8080 from the second host at {node_ip}"
        );
    }

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
    assert_eq!(many["errors"], json!([]), "{many}");
    let ids: Vec<String> = many["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut ips: Vec<String> = pa.ips.iter().chain(&pb.ips).cloned().collect();
    let mut netns = vec![pa.netns.clone(), pb.netns.clone()];
    for id in &ids {
        let p = cri.pod(id);
        ips.extend(p.ips);
        netns.push(p.netns);
    }
    let mut distinct = ips.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        22 * fam.addr_count(),
        "pod IPs not distinct: {ips:?}"
    );

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
    for node_ip in cri.node_ips() {
        assert!(
            answers(&cri.client, "tcp", &node_ip, 8080, "hello-from-a"),
            "hostPort at {node_ip} after the containerd restart"
        );
    }
    assert!(
        !cri.traces(&ips, &netns).is_empty(),
        "the trace check sees nothing while pods run"
    );

    // Teardown as kubelet does it (StopPodSandbox twice), through the restarted containerd.
    for id in ids.iter().chain([&a, &b]) {
        cri.py(&["stop", id]);
        cri.py(&["stop", id]);
        cri.py(&["remove", id]);
    }
    assert_eq!(cri.py(&["list"])["items"], json!([]));
    let left = cri.traces(&ips, &netns);
    assert!(
        left.is_empty(),
        "left behind after teardown:\n{}",
        left.join("\n")
    );
}

#[test]
fn containerd16_v4_pods() {
    pods_through_cri("containerd16_v4_pods", Containerd::V16, Fam::V4);
}

#[test]
fn containerd16_v6_pods() {
    pods_through_cri("containerd16_v6_pods", Containerd::V16, Fam::V6);
}

#[test]
fn containerd16_dual_stack_pods() {
    pods_through_cri("containerd16_dual_stack_pods", Containerd::V16, Fam::Dual);
}

#[test]
fn containerd21_v4_pods() {
    pods_through_cri("containerd21_v4_pods", Containerd::V21, Fam::V4);
}

#[test]
fn containerd21_v6_pods() {
    pods_through_cri("containerd21_v6_pods", Containerd::V21, Fam::V6);
}

#[test]
fn containerd21_dual_stack_pods() {
    pods_through_cri("containerd21_dual_stack_pods", Containerd::V21, Fam::Dual);
}

/// A containerd 2.1 node with a bare network for the STATUS tests (no image import needed
/// unless a pod is run).
fn status_node(test: &str) -> Option<Cri> {
    let mut cri = Cri::new(test, Containerd::V21, Fam::Dual, Install::Links)?;
    cri.start();
    Some(cri)
}

#[track_caller]
fn assert_ready(cri: &Cri, what: &str) {
    let c = cri.network_ready();
    assert_eq!(c["status"], true, "NetworkReady {what}: {c}");
}

/// NetworkReady false as kubelet sees it, with the plugin's message in it.
#[track_caller]
fn assert_not_ready(cri: &Cri, what: &str, message: &[&str]) {
    let c = cri.network_ready();
    assert_eq!(c["status"], false, "NetworkReady {what}: {c}");
    assert_eq!(c["reason"], "NetworkPluginNotReady", "{what}: {c}");
    let m = c["message"].as_str().unwrap();
    for part in message {
        assert!(m.contains(part), "{what}: {part:?} not in the message: {c}");
    }
}

/// The config a plugin of `conflist` gets for its first plugin (name and version added; GC
/// and STATUS send no runtimeConfig).
fn first_plugin(conflist: &Value) -> Value {
    let mut conf = conflist["plugins"][0].clone();
    conf["name"] = conflist["name"].clone();
    conf["cniVersion"] = conflist["cniVersion"].clone();
    conf
}

/// host-local GC on `conflist`'s first plugin, keeping the attachments `valid` (container IDs,
/// eth0), as a runtime's GC would (containerd 2.1 runs none).
fn host_local_gc(cri: &Cri, conflist: &Value, valid: &[String]) {
    let mut conf = first_plugin(conflist);
    let attachments: Vec<Value> = valid
        .iter()
        .map(|c| json!({"containerID": c, "ifname": "eth0"}))
        .collect();
    conf["cni.dev/valid-attachments"] = json!(attachments);
    let bin_dir = cri.path("bin");
    let out = exec(
        &cri.tmp.join("bin/host-local"),
        &[],
        &[("CNI_COMMAND", "GC"), ("CNI_PATH", &bin_dir)],
        &conf.to_string(),
    );
    assert!(out.status_ok, "host-local GC: {out:?}");
}

/// A host-local range full of reservations no pod of this node holds (the DELs that never
/// came): containerd 2.1's CRI Status says NetworkReady, as it would over v1.9.1's host-local
/// (checked on the same network), while RunPodSandbox fails on its own for want of an address.
/// Once a GC has confirmed every reservation in use the node is NotReady with host-local's
/// message; a GC that keeps none frees the range, the node is Ready and a pod runs. In each
/// family.
#[test]
fn containerd21_status_full_host_local_range() {
    let test = "containerd21_status_full_host_local_range";
    let Some(cri) = status_node(test) else {
        return;
    };
    if !reference_available("host-local") {
        return;
    }
    cri.import_image();
    let n = cri.n;
    for fam in FAMILIES {
        let name = format!("full-{}", fam.tag());
        // Two addresses per family (.10 and .11 of its subnet), each held by a leaked pod.
        let mut ranges = Vec::new();
        let mut leaked: Vec<(String, String)> = Vec::new();
        let families = [
            (fam.has_v4(), format!("10.{n}.0."), format!("10.{n}.0.0/24")),
            (
                fam.has_v6(),
                format!("fd00:{n}::"),
                format!("fd00:{n}::/64"),
            ),
        ];
        for (_, prefix, subnet) in families.into_iter().filter(|f| f.0) {
            ranges.push(json!([{"subnet": subnet,
                "rangeStart": format!("{prefix}10"), "rangeEnd": format!("{prefix}11")}]));
            leaked.push(("leaked-0".into(), format!("{prefix}10")));
            leaked.push(("leaked-1".into(), format!("{prefix}11")));
        }
        let conflist = json!({
            "cniVersion": "1.1.0", "name": name,
            "plugins": [{"type": "bridge", "bridge": format!("cni-full{n}"), "isGateway": true,
                "ipam": {"type": "host-local", "ranges": ranges,
                         "routes": fam.default_routes(), "dataDir": cri.path("ipam")}}]
        });
        // The leaked reservations, in the on-disk format both implementations share, written
        // a minute ago (before any GC of this test).
        let store = cri.tmp.join("ipam").join(&name);
        std::fs::create_dir_all(&store).unwrap();
        let then = SystemTime::now() - Duration::from_secs(60);
        for (cid, ip) in &leaked {
            let file = store.join(ip);
            std::fs::write(&file, format!("{cid}\r\neth0")).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(then)
                .unwrap();
        }
        cri.switch_network(&conflist);
        let what = format!("{}: full range, reservations unconfirmed", fam.tag());
        assert_ready(&cri, &what);

        // v1.9.1's host-local passes STATUS on the same full range.
        let conf = first_plugin(&conflist);
        let bin_dir = cri.path("bin");
        let reference = exec(
            &reference_path("host-local"),
            &[],
            &[("CNI_COMMAND", "STATUS"), ("CNI_PATH", &bin_dir)],
            &conf.to_string(),
        );
        assert!(
            reference.status_ok,
            "{what}: v1.9.1's host-local STATUS: {reference:?}"
        );

        // The range is really full: the pod's ADD fails on its own.
        let out = cri.py_raw(&["run", &format!("late-{}", fam.tag())]);
        assert!(!out.status_ok, "{what}: a pod got an address: {out:?}");
        assert!(
            out.stderr.contains("no IP addresses available"),
            "{what}: RunPodSandbox: {out:?}"
        );

        // A GC that keeps every leaked attachment confirms them in use: NotReady.
        let cids: Vec<String> = leaked.iter().map(|(c, _)| c.clone()).collect();
        host_local_gc(&cri, &conflist, &cids);
        assert_not_ready(
            &cri,
            &format!("{}: full range, every reservation confirmed", fam.tag()),
            &["no IP addresses available in range set", "confirmed in use"],
        );

        // A GC that keeps none frees the range: Ready, and a pod gets an address.
        host_local_gc(&cri, &conflist, &[]);
        assert_eq!(
            common::family::reservations(&store),
            0,
            "{}: after GC",
            fam.tag()
        );
        assert_ready(&cri, &format!("{}: range freed by GC", fam.tag()));
        let id = cri.run(&[&format!("after-gc-{}", fam.tag())]);
        cri.py(&["stop", &id]);
        cri.py(&["remove", &id]);
    }
}

/// flannel before flanneld has written the node's `subnet.env`: NotReady with flannel's
/// message naming the file; Ready once it is there (the delegate's STATUS passes).
#[test]
fn containerd21_status_flannel_subnet_env() {
    let Some(cri) = status_node("containerd21_status_flannel_subnet_env") else {
        return;
    };
    let n = cri.n;
    let subnet_env = cri.path("flannel/subnet.env");
    let conflist = json!({
        "cniVersion": "1.1.0", "name": "cbr0",
        "plugins": [
            {"type": "flannel", "subnetFile": subnet_env, "dataDir": cri.path("flannel/data"),
             "ipam": {"dataDir": cri.path("ipam")},
             "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    cri.switch_network(&conflist);
    assert_not_ready(
        &cri,
        "flannel without subnet.env",
        &["subnet.env", &subnet_env],
    );
    std::fs::create_dir_all(cri.tmp.join("flannel")).unwrap();
    std::fs::write(
        &subnet_env,
        format!(
            "FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.1.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"
        ),
    )
    .unwrap();
    assert_ready(&cri, "flannel with subnet.env");
}

/// The dhcp daemon, started through the applet link, killed on drop.
struct DhcpDaemon(Child);

impl Drop for DhcpDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// dhcp IPAM with its daemon down: NotReady with dhcp's message; Ready while the daemon runs;
/// NotReady again once it is gone.
#[test]
fn containerd21_status_dhcp_daemon() {
    let Some(cri) = status_node("containerd21_status_dhcp_daemon") else {
        return;
    };
    let n = cri.n;
    let sock = cri.path("dhcp.sock");
    let conflist = json!({
        "cniVersion": "1.1.0", "name": "dhcp-net",
        "plugins": [{"type": "bridge", "bridge": format!("cni-dh{n}"),
                     "ipam": {"type": "dhcp", "daemonSocketPath": sock}}]
    });
    cri.switch_network(&conflist);
    assert_not_ready(&cri, "dhcp without its daemon", &[&sock]);

    let child = Command::new(cri.tmp.join("bin/dhcp"))
        .args(["daemon", "-socketpath", &sock])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the dhcp daemon");
    let daemon = DhcpDaemon(child);
    wait_for("the dhcp daemon's socket", Duration::from_secs(30), || {
        std::os::unix::net::UnixStream::connect(&sock).ok()
    });
    assert_ready(&cri, "dhcp with its daemon");
    drop(daemon);
    assert_not_ready(&cri, "dhcp after its daemon stopped", &[&sock]);
}

/// README's containerd recipe for `CNIBOX_LOG` ("Turning `CNIBOX_LOG` on"), run as written
/// with its two paths moved into `root` (the systemd unit directory and the log): the drop-in
/// file it makes. The last line must be the restart that applies it, which the test does itself.
fn readme_dropin(root: &Path, log: &Path) -> PathBuf {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split_once("**Turning `CNIBOX_LOG` on.**")
        .expect("README has the CNIBOX_LOG recipes")
        .1;
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("```"))
        .expect("the containerd recipe is a sh block")
        .0;
    let lines: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        lines.last().copied(),
        Some("systemctl daemon-reload && systemctl restart containerd"),
        "{block}"
    );
    let units = root.join("systemd");
    let script = lines[..lines.len() - 1]
        .join("\n")
        .replace("/etc/systemd/system", &units.display().to_string())
        .replace("/var/log/cnibox.log", &log.display().to_string());
    let out = exec(Path::new("sh"), &["-ec", &script], &[], "");
    assert!(out.status_ok, "README's recipe: {out:?}\n{script}");
    let dir = units.join("containerd.service.d");
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].extension().is_some_and(|e| e == "conf"),
        "{files:?}"
    );
    files[0].clone()
}

/// The `Environment=` assignments of a unit file's `[Service]` section, as systemd reads them
/// (systemd.exec(5): whitespace-separated `KEY=VALUE` words, double quotes group), strictly:
/// anything else in the file fails the test.
fn service_environment(unit: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(unit).unwrap();
    let mut section = "";
    let mut env = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') {
            section = line;
            continue;
        }
        assert_eq!(section, "[Service]", "{unit:?}: {line}");
        let value = line
            .strip_prefix("Environment=")
            .unwrap_or_else(|| panic!("{unit:?}: not an Environment= line: {line}"));
        let (mut word, mut quoted, mut words) = (String::new(), false, Vec::new());
        for c in value.chars() {
            match c {
                '"' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        assert!(!quoted, "{unit:?}: unbalanced quotes: {line}");
        words.extend((!word.is_empty()).then_some(word));
        for w in words {
            let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("{unit:?}: {w}"));
            env.push((k.to_string(), v.to_string()));
        }
    }
    env
}

/// The call log's lines for one container.
fn log_lines(log: &Path, id: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|l| l["containerID"] == id)
        .collect()
}

/// Issue 38 item 2: README's systemd drop-in gives containerd `CNIBOX_LOG`, and every plugin
/// call of a pod lands in the log — through a restart of containerd with the pod running (the
/// recipe's `systemctl restart`): the pod keeps running, and its DEL goes through the restarted
/// containerd into the same log. k3s's containerd is k3s's child and inherits k3s's
/// environment the same way (k3s is in no Debian archive: not run here).
fn call_log_through_dropin(test: &str, cd: Containerd) {
    let Some(mut cri) = Cri::new(test, cd, Fam::Dual, Install::Links) else {
        return;
    };
    let log = cri.tmp.join("log/cnibox.log");
    let dropin = readme_dropin(&cri.tmp, &log);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    cri.env = service_environment(&dropin);
    assert_eq!(
        cri.env,
        vec![("CNIBOX_LOG".to_string(), log.display().to_string())]
    );
    cri.start();
    cri.import_image();
    let id = cri.run(&["pod-logged", "--port", "8080:80/tcp"]);
    let pod = cri.pod(&id);
    // The pod network's plugins on eth0 (bridge's ADD runs host-local in-process: one line per
    // plugin of the list), and containerd's own loopback network on lo, in `netns`.
    let calls = |lines: &[Value], verb: &str, netns: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l["verb"] == verb && l["netns"] == netns)
            .map(|l| {
                assert!(l.get("error").is_none(), "{l}");
                let (applet, ifname) = (l["applet"].as_str().unwrap(), &l["ifname"]);
                assert_eq!(
                    ifname,
                    if applet == "loopback" { "lo" } else { "eth0" },
                    "{l}"
                );
                applet.to_string()
            })
            .collect()
    };
    let mut chain = vec!["loopback", "bridge", "portmap", "bandwidth", "firewall"];
    let lines = log_lines(&log, &id);
    assert_eq!(calls(&lines, "ADD", &pod.netns), chain, "{lines:#?}");
    assert_eq!(lines.len(), chain.len(), "{lines:#?}");

    // The recipe's restart, with the pod running.
    cri.kill();
    cri.start();
    assert_eq!(cri.pod(&id).netns, pod.netns);
    cri.py(&["stop", &id]);
    cri.py(&["remove", &id]);
    // StopPodSandbox's DELs in the pod's namespace (the pod network's plugins in reverse order,
    // loopback first), then RemovePodSandbox's repeat of them with the namespace gone (CNI
    // allows a DEL without one).
    let lines = log_lines(&log, &id);
    chain[1..].reverse();
    assert_eq!(calls(&lines, "DEL", &pod.netns), chain, "{lines:#?}");
    assert_eq!(calls(&lines, "DEL", ""), chain, "{lines:#?}");
    assert_eq!(lines.len(), 3 * chain.len(), "{lines:#?}");
}

#[test]
fn containerd16_call_log_from_readme_dropin() {
    call_log_through_dropin("containerd16_call_log_from_readme_dropin", Containerd::V16);
}

#[test]
fn containerd21_call_log_from_readme_dropin() {
    call_log_through_dropin("containerd21_call_log_from_readme_dropin", Containerd::V21);
}

/// Issue 38 item 1: `cnibox status --gc --yes` beside a running containerd 2.1 removes the
/// leaked reservations of a dual-stack network and touches none of its live pods: both stay
/// ready, keep their addresses and reservations, and still reach each other. The network has a
/// name of its own so that the doctor sees only this test's attachments in libcni's shared
/// cache (/var/lib/cni).
#[test]
fn containerd21_doctor_leaves_live_pods_alone() {
    let test = "containerd21_doctor_leaves_live_pods_alone";
    let Some(mut cri) = Cri::new(test, Containerd::V21, Fam::Dual, Install::Links) else {
        return;
    };
    cri.start();
    cri.import_image();
    let mut net = cri.pod_network();
    let name = format!("k8s-doctor-{}", cri.n);
    net["name"] = json!(name);
    cri.switch_network(&net);
    let (a, b) = (cri.run(&["pod-a"]), cri.run(&["pod-b"]));
    let (pa, pb) = (cri.pod(&a), cri.pod(&b));
    let store = cri.tmp.join("ipam").join(&name);
    let files = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&store)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| f.parse::<IpAddr>().is_ok())
            .collect();
        v.sort();
        v
    };
    let live = files();
    assert_eq!(live.len(), 4, "{live:?}");
    // Leaks: one reservation per family whose owner is gone, old enough not to be in flight.
    let n = cri.n;
    let ghosts = [format!("10.{n}.0.200"), format!("fd00:{n}::200")];
    for g in &ghosts {
        let p = store.join(g);
        std::fs::write(&p, "ghost-pod\r\neth0").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    let binary = std::env::var_os("CNIBOX_STATIC")
        .map(PathBuf::from)
        .unwrap_or_else(bin);
    let (conf, plugins) = (cri.path("net.d"), cri.path("bin"));
    let status = |args: &[&str]| {
        let mut a = vec![
            format!("--net={}", cri.node.path()),
            binary.display().to_string(),
            "status".to_string(),
            "--json".to_string(),
        ];
        a.extend(args.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        exec_unchecked(
            Path::new("nsenter"),
            &refs,
            &[("NETCONFPATH", &conf), ("CNI_PATH", &plugins)],
            "",
        )
    };
    let out = status(&[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let orphans = v["orphans"].to_string();
    for g in &ghosts {
        assert!(orphans.contains(g.as_str()), "{g}: {v:#}");
    }
    for id in [&a, &b] {
        assert!(
            !orphans.contains(id.as_str()),
            "live pod {id} judged orphan: {v:#}"
        );
    }
    let out = status(&["--gc", "--yes"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(files(), live, "only the leaks go");
    for (id, p) in [(&a, &pa), (&b, &pb)] {
        let now = cri.pod(id);
        assert_eq!(now.ips, p.ips, "{id}");
    }
    for (from, to) in [(&pa, &pb), (&pb, &pa)] {
        for ip in &to.ips {
            assert!(
                in_pod(&from.netns, &["ping", "-c", "1", "-W", "5", ip]),
                "{} -> {ip} after the doctor's GC",
                from.ips[0]
            );
        }
    }
}
