//! End to end: rootful podman (Debian's 4.3, CNI network backend) drives cnibox.
//!
//! Each test builds its own world and tears it down (also when it fails, from `Drop`):
//! - a throwaway "node" network namespace with a "client" namespace on a veth playing a second
//!   host; podman runs under `nsenter --net=<node>`, so bridges, iptables/nft rules and sysctls
//!   land in the node, never in the machine's own namespace, and the tests run beside the rest of
//!   the suite. (`nsenter` rather than `ip netns exec`: podman bind-mounts the container
//!   namespaces under /run/netns, and the private mount namespace `ip netns exec` makes would
//!   hide them from the next podman command and from conmon's cleanup.)
//! - a temp dir with containers.conf and storage.conf (tests/e2e/podman/*.in, through
//!   CONTAINERS_CONF / CONTAINERS_STORAGE_CONF), the network config dir, a private storage root
//!   and runroot, libpod's tmp dir with file locks, cnibox's state dir (CNIBOX_STATE_DIR), and
//!   `cni_plugin_dirs` = a dir of applet links to the cnibox binary under test and nothing else;
//! - containers from a busybox-static root filesystem (`--rootfs`, no image pull).
//!
//! What cannot be private: podman's libcni keeps its cache in /var/lib/cni/results and
//! host-local its reservations in /var/lib/cni/networks/<network>, both keyed by the network
//! name, which is unique per test (`cnibox-e2e-<pid>-<n>`); the checks look at exactly those.
//!
//! Podman 4.3 chains a config-less `{"type": "tuning"}` after bridge, portmap and firewall in
//! every conflist it generates; the conflists are used exactly as podman writes them, so
//! cnibox's `tuning` applet runs in every ADD, CHECK and DEL. The in-memory default network
//! `podman` has the same chain and is never used here (`--network` is explicit).

mod common;
use common::dual::{PEER_REPLY, add_v6_link_ns, parse_peer};
use common::proc::{cnibox_binary, files_under, in_path};
use common::traffic::{node_and_client, serve};
use common::wait::{retry, secs};
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

const CONTAINERS_CONF: &str = include_str!("e2e/podman/containers.conf.in");
const STORAGE_CONF: &str = include_str!("e2e/podman/storage.conf.in");

/// Applets linked into the plugin dir podman searches.
const PLUGINS: &[&str] = &[
    "tuning",
    "bridge",
    "host-local",
    "portmap",
    "firewall",
    "loopback",
    "bandwidth",
    "static",
    "vlan",
];

const CNI_DATA: &str = "/var/lib/cni/networks";
const CNI_RESULTS: &str = "/var/lib/cni/results";
const BUSYBOX: &str = "/bin/busybox";
/// Podman's wish for nofile and nproc in rootful containers.
const PODMAN_ULIMIT: u64 = 1_048_576;
/// Chains podman's plugins share between all containers (left in place by DEL, as upstream).
const SHARED_CHAINS: &[&str] = &[
    "INPUT",
    "FORWARD",
    "OUTPUT",
    "PREROUTING",
    "POSTROUTING",
    "CNI-ADMIN",
    "CNI-FORWARD",
    "CNI-HOSTPORT-DNAT",
    "CNI-HOSTPORT-MASQ",
    "CNI-HOSTPORT-SETMARK",
];

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Whether `path` is an ELF executable without a program interpreter (statically linked).
fn is_static_elf(path: &str) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| {
        let o = phoff + i * phentsize;
        // PT_INTERP = 3
        b.get(o..o + 4).is_some_and(|t| t != 3u32.to_le_bytes())
    })
}

/// Why podman cannot run here, if it cannot.
fn missing_tools() -> Option<String> {
    let missing: Vec<&str> = [
        "podman",
        "runc",
        "nsenter",
        "timeout",
        "iptables-save",
        "ip6tables-save",
        "nft",
        "ping",
    ]
    .into_iter()
    .filter(|t| !in_path(t))
    .collect();
    if !missing.is_empty() {
        return Some(format!("missing {}", missing.join(", ")));
    }
    if !in_path("conmon") && !Path::new("/usr/libexec/podman/conmon").exists() {
        return Some("conmon missing".into());
    }
    if !is_static_elf(BUSYBOX) {
        return Some(format!(
            "{BUSYBOX} is not a static busybox (install busybox-static)"
        ));
    }
    None
}

/// Whether `line` names `addr` (not merely a longer address starting with it).
fn mentions(line: &str, addr: &str) -> bool {
    line.match_indices(addr).any(|(i, _)| {
        !line[i + addr.len()..].starts_with(|c: char| c.is_ascii_hexdigit() || c == ':')
    })
}

/// One podman world (see the module doc).
struct Pod {
    test: String,
    tmp: PathBuf,
    rootfs: PathBuf,
    state: PathBuf,
    networks: std::cell::RefCell<Vec<String>>,
    node: NetNs,
    client: NetNs,
    /// Node address on the veth to the client (192.168.N.1), the "host address" of `-p`.
    node_ip: String,
}

impl Pod {
    /// `None` (after a skip note) when not root or podman's tools are missing.
    fn new(test: &str, n: u8) -> Option<Pod> {
        if !require_root(test) {
            return None;
        }
        if let Some(why) = missing_tools() {
            skip_note(test, &why);
            return None;
        }
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = std::env::temp_dir().join(format!("cnibox-podman-{}-{k}", std::process::id()));
        let (node, client) = node_and_client(n);
        let pod = Pod {
            test: test.into(),
            rootfs: tmp.join("rootfs"),
            state: tmp.join("cnibox-state"),
            tmp,
            networks: Default::default(),
            node,
            client,
            node_ip: format!("192.168.{n}.1"),
        };
        let bin = pod.tmp.join("cni-bin");
        for d in [
            &bin,
            &pod.tmp.join("net.d"),
            &pod.state,
            &pod.rootfs.join("bin"),
        ] {
            std::fs::create_dir_all(d).expect("create podman test dirs");
        }
        let cnibox = cnibox_binary();
        for p in PLUGINS {
            std::os::unix::fs::symlink(&cnibox, bin.join(p)).expect("link applet");
        }
        // The root filesystem: busybox-static and a link per applet it lists.
        std::fs::copy(BUSYBOX, pod.rootfs.join("bin/busybox")).expect("copy busybox");
        let list = exec(Path::new(BUSYBOX), &["--list"], &[], "");
        assert!(list.status_ok, "busybox --list: {list:?}");
        for a in list
            .stdout
            .lines()
            .filter(|a| !a.is_empty() && *a != "busybox")
        {
            std::os::unix::fs::symlink("busybox", pod.rootfs.join("bin").join(a))
                .expect("link busybox applet");
        }
        let fill = |t: &str| {
            t.replace("@TMP@", &pod.tmp.display().to_string())
                .replace("@BIN@", &bin.display().to_string())
                .replace("@ULIMITS@", &ulimits())
        };
        std::fs::write(pod.tmp.join("containers.conf"), fill(CONTAINERS_CONF)).unwrap();
        std::fs::write(pod.tmp.join("storage.conf"), fill(STORAGE_CONF)).unwrap();
        Some(pod)
    }

    /// `podman ARGS…` in the node namespace (killed after 60 s, so a hang fails the test).
    fn podman_raw(&self, args: &[&str]) -> Output {
        let t = |rel: &str| self.tmp.join(rel).display().to_string();
        let (root, runroot, netns) = (
            t("root"),
            t("runroot"),
            format!("--net={}", self.node.path()),
        );
        let mut argv = vec![
            "60",
            "nsenter",
            &netns,
            "podman",
            "--root",
            &root,
            "--runroot",
            &runroot,
        ];
        argv.extend_from_slice(args);
        let (conf, sconf, state, home, log) = (
            t("containers.conf"),
            t("storage.conf"),
            t("cnibox-state"),
            t(""),
            t("cnibox.log"),
        );
        exec(
            Path::new("timeout"),
            &argv,
            &[
                ("CONTAINERS_CONF", &conf),
                ("CONTAINERS_STORAGE_CONF", &sconf),
                ("CNIBOX_STATE_DIR", &state),
                ("HOME", &home),
                // README's podman recipe: the call log through podman's environment.
                ("CNIBOX_LOG", &log),
            ],
            "",
        )
    }

    /// `podman ARGS…`, asserting success; returns stdout trimmed.
    #[track_caller]
    fn pm(&self, args: &[&str]) -> String {
        let out = self.podman_raw(args);
        assert!(out.status_ok, "{}: podman {args:?}: {out:?}", self.test);
        out.stdout.trim().to_string()
    }

    /// `podman network create EXTRA… <unique name>`; the generated conflist is checked to be
    /// podman 4.3's chain and used as it is.
    fn network(&self, extra: &[&str]) -> String {
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("cnibox-e2e-{}-{k}", std::process::id());
        self.networks.borrow_mut().push(name.clone());
        let mut args = vec!["network", "create"];
        args.extend_from_slice(extra);
        args.push(&name);
        assert_eq!(self.pm(&args), name);
        let path = self.tmp.join("net.d").join(format!("{name}.conflist"));
        let list: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let text = list.to_string();
        let plugins = list["plugins"]
            .as_array()
            .expect("plugins in podman's conflist");
        let types: Vec<&str> = plugins.iter().filter_map(|p| p["type"].as_str()).collect();
        assert_eq!(
            types,
            ["bridge", "portmap", "firewall", "tuning"],
            "podman 4.3's chain: {text}"
        );
        name
    }

    fn network_inspect(&self, net: &str) -> Value {
        let v: Value = serde_json::from_str(&self.pm(&["network", "inspect", net])).unwrap();
        v[0].clone()
    }

    /// `podman run -d --name NAME --network NET EXTRA… --rootfs <busybox> CMD…`; returns the ID.
    fn run(&self, name: &str, net: &str, extra: &[&str], cmd: &[&str]) -> String {
        let rootfs = self.rootfs.display().to_string();
        let mut args = vec!["run", "-d", "--name", name, "--network", net];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--rootfs", &rootfs]);
        args.extend_from_slice(cmd);
        let id = self.pm(&args);
        assert_eq!(id.len(), 64, "container ID from podman run: {id}");
        id
    }

    fn inspect(&self, ctr: &str) -> Value {
        let v: Value = serde_json::from_str(&self.pm(&["inspect", ctr])).unwrap();
        v[0].clone()
    }

    /// The container's (IPv4, IPv6) addresses on `net` ("" where it has none), as podman reports.
    fn ips(&self, ctr: &str, net: &str) -> (String, String) {
        let n = &self.inspect(ctr)["NetworkSettings"]["Networks"][net];
        assert!(n.is_object(), "{ctr} is not on {net}: {n}");
        let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
        (s("IPAddress"), s("GlobalIPv6Address"))
    }

    /// The IPv4 addresses the container's `ifname` really has (from inside).
    fn addrs_in(&self, ctr: &str, ifname: &str) -> String {
        self.podman_raw(&["exec", ctr, "ip", "addr", "show", "dev", ifname])
            .stdout
    }

    #[track_caller]
    fn ping_from(&self, ctr: &str, ip: &str) {
        retry(format!("{}: {ctr} pings {ip}", self.test), secs(20), || {
            let out = self.podman_raw(&["exec", ctr, "ping", "-c1", "-W1", ip]);
            if out.status_ok {
                Ok(())
            } else {
                Err(format!("{out:?}"))
            }
        })
    }

    /// HTTP GET of `url` from namespace `ns` (busybox wget; its `-T` crashes, hence `timeout`).
    fn get(ns: &NetNs, url: &str) -> Output {
        ns.exec(&["timeout", "5", BUSYBOX, "wget", "-qO-", url])
    }

    #[track_caller]
    fn assert_serves(&self, ns: &NetNs, url: &str, body: &str) {
        retry(
            format!("{}: GET {url} from {}", self.test, ns.name),
            secs(30),
            || {
                let out = Self::get(ns, url);
                if out.status_ok && out.stdout.trim() == body {
                    Ok(())
                } else {
                    Err(format!("{out:?}"))
                }
            },
        )
    }

    /// The node's netfilter state: iptables-save, ip6tables-save, nft list ruleset.
    fn rules(&self) -> String {
        ["iptables-save", "ip6tables-save"]
            .iter()
            .map(|c| self.node.sh(&[c]))
            .chain([self.node.sh(&["nft", "list", "ruleset"])])
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What of container `cid`'s attachment to `net` exists: its host-local reservation(s), its
    /// cnibox IPAM record, libcni's cached result, cnibox state files naming it, rules naming
    /// its ID or one of `ips`. Empty once it is torn down.
    fn traces(&self, cid: &str, net: &str, ips: &[&str]) -> Vec<String> {
        let mut found = Vec::new();
        let data = Path::new(CNI_DATA);
        for f in files_under(&data.join(net)) {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let owner = std::fs::read_to_string(&f).unwrap_or_default();
            if owner.contains(cid) || ips.contains(&name.as_str()) {
                found.push(format!("reservation {}", f.display()));
            }
        }
        let state = files_under(&self.state).into_iter().filter(|f| {
            // <state>/<kind>/<network>/<cid>:<ifname>
            f.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|d| d == net)
        });
        for f in files_under(&data.join(".cnibox").join(net))
            .into_iter()
            .chain(state)
            .filter(|f| f.to_string_lossy().contains(cid))
            .chain(files_under(Path::new(CNI_RESULTS)).into_iter().filter(|f| {
                (f.file_name().unwrap().to_string_lossy()).starts_with(&format!("{net}-{cid}-"))
            }))
        {
            found.push(format!("file {}", f.display()));
        }
        // Rules naming one of the addresses, or the container and this network (portmap's and
        // bridge's comments name both).
        let owner = format!("\\\"{net}\\\"");
        for l in self.rules().lines() {
            if ips.iter().any(|i| !i.is_empty() && mentions(l, i))
                || l.contains(cid) && l.contains(&owner)
            {
                found.push(format!("rule {l}"));
            }
        }
        found
    }

    /// Everything podman made is gone: no link but the node's own, no container namespace, no
    /// chain but the shared ones (and no DNAT in them), no file in cnibox's state dir, nothing
    /// per container in the IPAM dirs or libcni's cache.
    #[track_caller]
    fn assert_clean(&self, netns_paths: &[String]) {
        let links = self.node.sh(&["ip", "-o", "link", "show"]);
        let names: Vec<&str> = links
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap())
            .collect();
        assert_eq!(names, ["lo", "tocl"], "links left in the node: {links}");
        for p in netns_paths {
            assert!(!Path::new(p).exists(), "container namespace {p} left");
        }
        let rules = self.rules();
        for l in rules.lines() {
            let chain = l
                .strip_prefix(':')
                .map(|c| c.split(' ').next().unwrap())
                .or_else(|| {
                    l.trim()
                        .strip_prefix("chain ")
                        .map(|c| c.trim_end_matches(" {"))
                });
            if let Some(c) = chain {
                assert!(
                    SHARED_CHAINS.contains(&c),
                    "chain {c} left in the node:\n{rules}"
                );
            }
            assert!(
                !l.starts_with("-A CNI-HOSTPORT-DNAT"),
                "DNAT rule left: {l}"
            );
        }
        let state = files_under(&self.state);
        assert!(state.is_empty(), "cnibox state files left: {state:?}");
        for net in self.networks.borrow().iter() {
            for f in files_under(&Path::new(CNI_DATA).join(net)) {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                assert!(
                    name == "lock" || name.starts_with("last_reserved_ip."),
                    "host-local file left: {}",
                    f.display()
                );
            }
            let rec = files_under(&Path::new(CNI_DATA).join(".cnibox").join(net));
            assert!(rec.is_empty(), "cnibox IPAM records left: {rec:?}");
            let cached: Vec<_> = files_under(Path::new(CNI_RESULTS))
                .into_iter()
                .filter(|f| {
                    f.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(&format!("{net}-"))
                })
                .collect();
            assert!(cached.is_empty(), "libcni results left: {cached:?}");
        }
    }

    /// `podman rm -af`, `podman network rm` of every network: the normal teardown.
    fn teardown(&self) {
        let out = self.podman_raw(&["rm", "-af", "-t", "0"]);
        assert!(out.status_ok, "{}: podman rm -af: {out:?}", self.test);
        for net in self.networks.borrow().iter() {
            self.pm(&["network", "rm", net]);
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        // Best effort, also after a failed assertion: containers, networks, per-network files,
        // mounts under the temp dir, the temp dir; the namespaces go with their own Drop.
        let _ = self.podman_raw(&["rm", "-af", "-t", "0"]);
        for net in self.networks.borrow().iter() {
            let _ = self.podman_raw(&["network", "rm", "-f", net]);
            let data = Path::new(CNI_DATA);
            let _ = std::fs::remove_dir_all(data.join(net));
            let _ = std::fs::remove_dir_all(data.join(".cnibox").join(net));
            let _ = std::fs::remove_file(data.join(".cnibox/.sealed").join(net));
            for f in files_under(Path::new(CNI_RESULTS)) {
                if f.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("{net}-"))
                {
                    let _ = std::fs::remove_file(f);
                }
            }
        }
        let prefix = self.tmp.display().to_string();
        let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .filter(|m| m.starts_with(&prefix))
            .collect();
        mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in mounts {
            let _ = exec(Path::new("umount"), &["-l", &m], &[], "");
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// containers.conf `default_ulimits`: podman asks for 1048576 open files and processes; where
/// the hard limit is lower, runc cannot raise it (without CAP_SYS_RESOURCE it failed with EPERM
/// even at exactly the hard limit on the development machine), so ask for far less.
fn ulimits() -> String {
    let mut out = Vec::new();
    for (name, res) in [
        ("nofile", libc::RLIMIT_NOFILE),
        ("nproc", libc::RLIMIT_NPROC),
    ] {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we pass.
        let hard = if unsafe { libc::getrlimit(res, &mut l) } == 0 {
            l.rlim_max
        } else {
            0
        };
        if hard < PODMAN_ULIMIT {
            let v = hard.min(4096);
            out.push(format!("\"{name}={v}:{v}\""));
        }
    }
    out.join(", ")
}

/// `podman network create` with podman's defaults; two containers ping each other; `-p` from
/// the node's address, from a second host and from 127.0.0.1; `podman network reload` restores
/// flushed port forwarding; `podman restart` re-attaches without leaking the old address; stop
/// releases everything of one container while the other keeps serving; rm and network rm leave
/// nothing behind.
#[test]
fn podman_bridge_ping_ports_reload_restart() {
    let Some(pod) = Pod::new("podman_bridge_ping_ports_reload_restart", 201) else {
        return;
    };
    let net = pod.network(&[]);
    let info = pod.network_inspect(&net);
    let subnet = info["subnets"][0]["subnet"].as_str().unwrap().to_string();
    let bridge = info["network_interface"].as_str().unwrap().to_string();

    let web = pod.run(
        "web",
        &net,
        &["--tmpfs", "/www", "-p", "8080:80"],
        &[
            "sh",
            "-c",
            "echo hello-from-web > /www/index.html && exec httpd -f -p 80 -h /www",
        ],
    );
    let peer = pod.run("peer", &net, &[], &["sleep", "600"]);
    let (web_ip, _) = pod.ips(&web, &net);
    let (peer_ip, _) = pod.ips(&peer, &net);
    let prefix = subnet.rsplit_once(".0/").unwrap().0;
    for ip in [&web_ip, &peer_ip] {
        assert!(
            ip.starts_with(&format!("{prefix}.")),
            "{ip} outside {subnet}"
        );
    }
    assert!(pod.addrs_in(&peer, "eth0").contains(&format!("{peer_ip}/")));
    let links = pod
        .node
        .sh(&["ip", "-o", "link", "show", "master", &bridge]);
    assert_eq!(links.lines().count(), 2, "two veths on {bridge}: {links}");
    let netns: Vec<String> = [&web, &peer]
        .iter()
        .map(|c| {
            pod.inspect(c)["NetworkSettings"]["SandboxKey"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();

    pod.ping_from(&peer, &web_ip);
    pod.ping_from(&web, &peer_ip);

    let node_url = format!("http://{}:8080/", pod.node_ip);
    pod.assert_serves(&pod.node, &node_url, "hello-from-web");
    pod.assert_serves(&pod.client, &node_url, "hello-from-web");
    pod.assert_serves(&pod.node, "http://127.0.0.1:8080/", "hello-from-web");

    let t = pod.traces(&web, &net, &[&web_ip]);
    for what in ["reservation ", "file /var/lib/cni/results/", "rule "] {
        assert!(
            t.iter().any(|l| l.starts_with(what)),
            "no {what}trace of web while it runs: {t:?}"
        );
    }

    // network reload: a firewall reload wiped the node's nat table; podman puts the rules back.
    // (Without DNAT the connection lands on the socket podman binds to reserve the host port
    // and conmon holds: accepted, never answered, so this GET times out; only the container
    // serves the body the positive checks want.)
    pod.node.sh(&["iptables", "-t", "nat", "-F"]);
    let out = Pod::get(&pod.node, &node_url);
    assert!(
        !out.status_ok,
        "port 8080 answered with the nat table flushed: {out:?}"
    );
    pod.pm(&["network", "reload", "--all"]);
    pod.assert_serves(&pod.node, &node_url, "hello-from-web");
    pod.assert_serves(&pod.client, &node_url, "hello-from-web");
    assert_eq!(pod.ips(&web, &net).0, web_ip, "reload keeps the address");

    // restart: DEL then ADD; exactly one reservation afterwards.
    pod.pm(&["restart", "-t", "0", "web"]);
    let (web_ip2, _) = pod.ips(&web, &net);
    pod.assert_serves(&pod.node, "http://127.0.0.1:8080/", "hello-from-web");
    pod.assert_serves(&pod.client, &node_url, "hello-from-web");
    pod.ping_from(&peer, &web_ip2);
    let res: Vec<_> = pod
        .traces(&web, &net, &[&web_ip, &web_ip2])
        .into_iter()
        .filter(|l| l.starts_with("reservation "))
        .collect();
    assert_eq!(res.len(), 1, "reservations of web after restart: {res:?}");

    // stop: everything of peer goes, web keeps serving.
    pod.pm(&["stop", "-t", "0", "peer"]);
    let left = pod.traces(&peer, &net, &[&peer_ip]);
    assert!(left.is_empty(), "peer stopped, yet: {left:?}");
    let links = pod
        .node
        .sh(&["ip", "-o", "link", "show", "master", &bridge]);
    assert_eq!(
        links.lines().count(),
        1,
        "one veth left on {bridge}: {links}"
    );
    pod.assert_serves(&pod.client, &node_url, "hello-from-web");

    pod.teardown();
    for (c, ips) in [
        (&web, vec![web_ip.as_str(), web_ip2.as_str()]),
        (&peer, vec![peer_ip.as_str()]),
    ] {
        let left = pod.traces(c, &net, &ips);
        assert!(left.is_empty(), "after rm: {left:?}");
    }
    pod.assert_clean(&netns);
}

/// `podman network create --subnet` and `--ipv6`; a requested address (`--ip`); IPv6 from the node to a container and back;
/// `podman network connect` of a second network to a running container (eth1, traffic on it),
/// `podman network disconnect` releasing it; rm and network rm leave nothing behind.
#[test]
fn podman_subnet_ipv6_connect_disconnect() {
    let Some(pod) = Pod::new("podman_subnet_ipv6_connect_disconnect", 202) else {
        return;
    };
    let subnet = format!("10.77.{}.0/24", std::process::id() % 250);
    let net_s = pod.network(&["--subnet", &subnet]);
    let info = pod.network_inspect(&net_s);
    assert_eq!(info["subnets"][0]["subnet"], subnet.as_str(), "{info}");
    let net6 = pod.network(&["--ipv6"]);
    let info6 = pod.network_inspect(&net6);
    assert_eq!(info6["ipv6_enabled"], true, "{info6}");
    let gw6 = info6["subnets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["gateway"].as_str())
        .find(|g| g.contains(':'))
        .unwrap_or_else(|| panic!("no IPv6 subnet in {info6}"))
        .to_string();

    let a = pod.run("a", &net6, &[], &["sleep", "600"]);
    // b asks for its address (`--ip`: podman passes it as the `ips` capability).
    let want = format!("{}.50", subnet.rsplit_once(".0/").unwrap().0);
    let b = pod.run("b", &net_s, &["--ip", &want], &["sleep", "600"]);
    let (a4, a6) = pod.ips(&a, &net6);
    let (b4, _) = pod.ips(&b, &net_s);
    assert_eq!(b4, want, "b's requested address");
    assert!(pod.addrs_in(&b, "eth0").contains(&format!("{want}/24")));
    assert!(
        !a4.is_empty() && a6.starts_with("fd"),
        "a on {net6}: {a4} {a6}"
    );
    let inside = pod
        .podman_raw(&["exec", &a, "ip", "-6", "addr", "show", "dev", "eth0"])
        .stdout;
    assert!(
        inside.contains(&format!("{a6}/64")),
        "{a6} not on a's eth0: {inside}"
    );

    pod.ping_from(&a, &gw6);
    retry("node pings a over IPv6", secs(20), || {
        let out = pod.node.exec(&["ping", "-6", "-c1", "-W1", &a6]);
        if out.status_ok {
            Ok(())
        } else {
            Err(format!("{out:?}"))
        }
    });

    // connect: a gets eth1 on net_s and reaches b over it, and b reaches a.
    pod.pm(&["network", "connect", &net_s, "a"]);
    let (a4s, _) = pod.ips(&a, &net_s);
    assert!(
        pod.addrs_in(&a, "eth1").contains(&format!("{a4s}/24")),
        "{a4s} not on a's eth1"
    );
    pod.ping_from(&a, &b4);
    pod.ping_from(&b, &a4s);
    assert!(
        !pod.traces(&a, &net_s, &[&a4s]).is_empty(),
        "no trace of a's attachment to {net_s}"
    );

    // disconnect: eth1 and everything of a on net_s go; a stays on net6.
    pod.pm(&["network", "disconnect", &net_s, "a"]);
    let eth1 = pod.podman_raw(&["exec", &a, "ip", "link", "show", "eth1"]);
    assert!(!eth1.status_ok, "eth1 still in a: {eth1:?}");
    let left = pod.traces(&a, &net_s, &[&a4s]);
    assert!(
        left.is_empty(),
        "a disconnected from {net_s}, yet: {left:?}"
    );
    pod.ping_from(&a, &gw6);

    let netns: Vec<String> = [&a, &b]
        .iter()
        .map(|c| {
            pod.inspect(c)["NetworkSettings"]["SandboxKey"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    pod.teardown();
    assert!(pod.traces(&a, &net6, &[&a4, &a6]).is_empty());
    assert!(pod.traces(&b, &net_s, &[&b4]).is_empty());
    pod.assert_clean(&netns);
}

/// A dual-stack `podman network create --ipv6` used as a user would: two containers reach each
/// other over IPv6, `-p` answers a second host on the node's IPv6 address (and IPv4), a
/// container reaches a host behind the node over each family masqueraded to the node's address
/// (podman's bridge sets `ipMasq`), and nothing is left after rm.
#[test]
fn podman_ipv6_ports_and_masquerade() {
    let n = common::lab::unique_n();
    let Some(pod) = Pod::new("podman_ipv6_ports_and_masquerade", n) else {
        return;
    };
    add_v6_link_ns(n, &pod.node, &pod.client);
    let net = pod.network(&["--ipv6"]);
    let web = pod.run(
        "web",
        &net,
        &["--tmpfs", "/www", "-p", "8080:80"],
        &[
            "sh",
            "-c",
            "echo hello-from-web > /www/index.html && exec httpd -f -p 80 -h /www",
        ],
    );
    let peer = pod.run("peer", &net, &[], &["sleep", "600"]);
    let (web4, web6) = pod.ips(&web, &net);
    let (peer4, peer6) = pod.ips(&peer, &net);
    assert!(
        !web4.is_empty() && !web6.is_empty() && !peer6.is_empty(),
        "dual-stack addresses: web {web4} {web6}, peer {peer4} {peer6}"
    );
    let netns: Vec<String> = [&web, &peer]
        .iter()
        .map(|c| {
            pod.inspect(c)["NetworkSettings"]["SandboxKey"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    pod.ping_from(&peer, &web6);
    pod.ping_from(&web, &peer6);

    // -p from the second host, over each family.
    pod.assert_serves(
        &pod.client,
        &format!("http://[fd00:{n}:1::1]:8080/"),
        "hello-from-web",
    );
    pod.assert_serves(
        &pod.client,
        &format!("http://{}:8080/", pod.node_ip),
        "hello-from-web",
    );

    // Out through the node: the far host (no route to the container subnets) sees the node.
    for (far, node) in [
        (format!("fd00:{n}:1::2"), format!("fd00:{n}:1::1")),
        (format!("192.168.{n}.2"), pod.node_ip.clone()),
    ] {
        let _srv = serve(&pod.client, "tcp", far.contains(':'), 9000, PEER_REPLY);
        let seen = retry(format!("peer -> {far}:9000"), secs(20), || {
            let out = pod.podman_raw(&[
                "exec",
                &peer,
                "sh",
                "-c",
                &format!("echo ping | nc -w 3 {far} 9000"),
            ]);
            parse_peer(&out.stdout).ok_or(format!("{out:?}"))
        });
        assert_eq!(
            seen,
            node.parse::<std::net::IpAddr>().unwrap(),
            "the far host saw {seen}, not the node's {node}"
        );
    }

    pod.teardown();
    for (c, ips) in [
        (&web, vec![web4.as_str(), web6.as_str()]),
        (&peer, vec![peer4.as_str(), peer6.as_str()]),
    ] {
        let left = pod.traces(c, &net, &ips);
        assert!(left.is_empty(), "after rm: {left:?}");
    }
    pod.assert_clean(&netns);
}

/// Issue 38 item 2, README's podman recipe (`CNIBOX_LOG=… podman run …`; every podman call
/// of these tests runs with it, and conmon's `podman container cleanup` through containers.conf's
/// `conmon_env_vars`, which often runs the DELs before `podman rm` does): one log line per plugin
/// of podman's chain for the container's ADD, and its DELs in reverse order when it is removed,
/// in a dual-stack network.
#[test]
fn podman_call_log_from_its_environment() {
    let Some(pod) = Pod::new(
        "podman_call_log_from_its_environment",
        common::lab::unique_n(),
    ) else {
        return;
    };
    let net = pod.network(&["--ipv6"]);
    let id = pod.run("logged", &net, &[], &["sleep", "600"]);
    let (v4, v6) = pod.ips(&id, &net);
    assert!(!v4.is_empty() && !v6.is_empty(), "dual-stack: {v4} {v6}");
    let log = pod.tmp.join("cnibox.log");
    let lines = |verb: &str| -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .filter(|l| l["containerID"] == id.as_str() && l["verb"] == verb)
            .map(|l| {
                assert!(l.get("error").is_none(), "{l}");
                assert_eq!(l["ifname"], "eth0", "{l}");
                l["applet"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let chain = ["bridge", "portmap", "firewall", "tuning"];
    assert_eq!(lines("ADD"), chain);
    pod.pm(&["rm", "-f", "-t", "0", &id]);
    let mut del = lines("DEL");
    del.reverse();
    assert_eq!(del, chain, "DELs in reverse order");
}
