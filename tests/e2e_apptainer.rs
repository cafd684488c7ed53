//! End to end: apptainer 1.4 (Debian unstable's 1.4.5) drives cnibox, on each network
//! configuration it ships in /etc/apptainer/network/ and on dual-stack and IPv6 variants of them.
//!
//! Each test builds its own world and tears it down (also when it fails, from `Drop`):
//! - a throwaway "node" network namespace, a "client" namespace on a veth playing a second host
//!   (`tocl` 192.168.N.1 / fd00:N:1::1 on the node), and a "lan" namespace behind the node's
//!   `eth0` (the `master` of the shipped macvlan and ipvlan configs; 192.168.1.254, fd00:1::fe,
//!   the shipped configs' gateway);
//! - apptainer runs from a Debian unstable root (tests/e2e/apptainer/root.sh: unstable's
//!   apptainer needs glibc 2.38) under `ip netns exec <node>`, pivoted into that root by
//!   tests/e2e/apptainer/run.sh in the mount namespace of that one command, so its bridges,
//!   rules and sysctls land in the node and its files in the test's temp dir: apptainer.conf is
//!   the root's with `cni plugin path` (a dir of applet links to the cnibox binary under test,
//!   nothing else) and `cni configuration path` (the shipped conflists and the variants in
//!   tests/e2e/apptainer/) pointing into the temp dir, and /var/lib/cni (libcni's cache,
//!   host-local's reservations, cnibox's records) is the temp dir's too;
//! - the container is an apptainer sandbox directory holding busybox-static (no registry), which
//!   writes its PID and sleeps; the test attaches its network namespace (`ip netns attach`),
//!   drives traffic with socat through it, then kills it and apptainer tears the network down.
//!
//! What apptainer 1.4.5 calls (seen with logging wrappers in the plugin dir): ADD of the
//! conflist when the container starts, DEL of it when the container exits (also after a failed
//! ADD), nothing else: no CHECK, no GC, no STATUS. The cniVersion is the conflist's ("1.0.0" in
//! every shipped config); apptainer clears the plugins' environment but for PATH, and names the
//! container namespace by a bind mount in its session dir.
//!
//! Not covered, and why:
//! - `--fakeroot` with a network: Debian builds apptainer without its setuid starter, and such
//!   a build answers `--fakeroot --net` with the `none` network (launcher_linux.go: "fakeroot
//!   with unprivileged installation ... fallback to 'none' network"), so no plugin ever runs.
//!   The shipped `fakeroot` config (ptp + firewall + portmap) is run as root instead.
//! - ipvlan traffic needs a kernel with ipvlan. Where the kernel has none (the build machine),
//!   the shipped ipvlan config must fail cleanly: apptainer reports ipvlan's error, the
//!   container does not start, nothing is left. The VM runner (tests/vm) has ipvlan but cannot
//!   hold the ~350 MB unstable root apptainer needs; cnibox's ipvlan itself is tested there.
//! - `--drop-caps CAP_SYS_RESOURCE` on every run: the machine's capability bounding set lacks
//!   it, and apptainer's `root default capabilities = full` would otherwise refuse to start.

mod common;
use common::dual::{PEER_REPLY, add_v6_link_ns, parse_peer, rules_naming};
use common::lab::unique_n;
use common::proc::{cnibox_binary, files_under};
use common::traffic::{node_and_client, serve, talk};
use common::wait::{eventually, poll, secs};
use common::*;
use serde_json::Value;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const RUN_SH: &str = include_str!("e2e/apptainer/run.sh");
/// Variants of the shipped configs for the families those cannot express.
const VARIANTS: &[(&str, &str)] = &[
    (
        "01_bridge-v6.conflist",
        include_str!("e2e/apptainer/01_bridge-v6.conflist"),
    ),
    (
        "02_bridge-dual.conflist",
        include_str!("e2e/apptainer/02_bridge-dual.conflist"),
    ),
    (
        "11_ptp-dual.conflist",
        include_str!("e2e/apptainer/11_ptp-dual.conflist"),
    ),
    (
        "31_macvlan-dual.conflist",
        include_str!("e2e/apptainer/31_macvlan-dual.conflist"),
    ),
];
/// Where tests/e2e/apptainer/root.sh puts the root (`CNIBOX_APPTAINER_ROOT` overrides).
const DEFAULT_ROOT: &str = "/var/cache/cnibox-unstable/apptainer-root";
/// Applets linked into the plugin dir: every type the configs name.
const PLUGINS: &[&str] = &[
    "bridge",
    "ptp",
    "macvlan",
    "ipvlan",
    "host-local",
    "static",
    "firewall",
    "portmap",
];
const HOST_PORT: u16 = 8080;
const CONTAINER_PORT: u16 = 80;
/// A server on the node (the container's gateway) and one on the peer.
const NODE_PORT: u16 = 7001;
const PEER_PORT: u16 = 7002;
/// The container: record its PID where the test finds it (apptainer binds the root's /tmp,
/// the test's DIR/tmp, into the container), then stay until killed (bounded all the same).
const CONTAINER_SCRIPT: &str =
    "echo $$ >/tmp/pid.tmp && mv /tmp/pid.tmp /tmp/pid && exec sleep 600";
/// How long apptainer may take to start a container or to end after it.
const START: Duration = Duration::from_secs(60);
const STOP: Duration = Duration::from_secs(60);

fn apptainer_root(test: &str) -> Option<PathBuf> {
    let root = std::env::var_os("CNIBOX_APPTAINER_ROOT")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_ROOT), PathBuf::from);
    if root.join("usr/bin/apptainer").is_file() && root.join("var/lib/cni").is_dir() {
        Some(root)
    } else {
        skip_note(
            test,
            &format!(
                "no apptainer root at {} (make it with tests/e2e/apptainer/root.sh)",
                root.display()
            ),
        );
        None
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// See the module documentation.
struct World {
    n: u8,
    root: PathBuf,
    node: NetNs,
    client: NetNs,
    lan: NetNs,
    /// The temp dir (plugins, conflists, image, apptainer.conf, /tmp, /var/lib/cni); removed
    /// last.
    sb: Sandbox,
}

impl World {
    fn new(test: &str) -> Option<World> {
        if !require_root(test) {
            return None;
        }
        let root = apptainer_root(test)?;
        let sb = Sandbox::new(&format!("apptainer-{test}"));
        let dir = sb.root.clone();
        for d in [
            "tmp",
            "home",
            "etc",
            "var-lib-cni",
            "cni/bin",
            "cni/conf",
            "img/bin",
            "img/etc",
            "img/tmp",
            "img/var/tmp",
        ] {
            std::fs::create_dir_all(dir.join(d)).expect("create test dirs");
        }
        // The plugin dir: applet links to a copy of cnibox inside the dir apptainer sees (a
        // hard link when the file system allows).
        let cnibox = dir.join("cni/cnibox");
        if std::fs::hard_link(cnibox_binary(), &cnibox).is_err() {
            std::fs::copy(cnibox_binary(), &cnibox).expect("copy cnibox");
        }
        for p in PLUGINS {
            std::os::unix::fs::symlink("../cnibox", dir.join("cni/bin").join(p))
                .expect("applet link");
        }
        // The shipped configs, as shipped, and the variants.
        let shipped = root.join("etc/apptainer/network");
        let mut names = 0;
        for e in std::fs::read_dir(&shipped).expect("the root's /etc/apptainer/network") {
            let p = e.expect("read dir").path();
            std::fs::copy(
                &p,
                dir.join("cni/conf").join(p.file_name().expect("a file")),
            )
            .expect("copy conflist");
            names += 1;
        }
        assert_eq!(names, 5, "apptainer ships five network configs");
        for (name, text) in VARIANTS {
            write(&dir.join("cni/conf").join(name), text);
        }
        let conf = std::fs::read_to_string(root.join("etc/apptainer/apptainer.conf"))
            .expect("the root's apptainer.conf");
        write(
            &dir.join("etc/apptainer.conf"),
            &format!(
                "{conf}\ncni configuration path = /mnt/cni/conf\ncni plugin path = /mnt/cni/bin\n"
            ),
        );
        // The image: busybox-static and what apptainer wants to bind into a container.
        std::fs::copy("/bin/busybox", dir.join("img/bin/busybox")).expect("busybox-static");
        for a in ["sh", "sleep", "mv"] {
            std::os::unix::fs::symlink("busybox", dir.join("img/bin").join(a)).expect("link");
        }
        write(
            &dir.join("img/etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\n",
        );
        write(&dir.join("img/etc/group"), "root:x:0:\n");

        let n = unique_n();
        let (node, client) = node_and_client(n);
        add_v6_link_ns(n, &node, &client);
        let lan = NetNs::create();
        lan.sh(&["ip", "link", "set", "lo", "up"]);
        node.sh(&[
            "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", &lan.name,
        ]);
        node.sh(&["ip", "link", "set", "eth0", "up"]);
        lan.sh(&["ip", "addr", "add", "192.168.1.254/24", "dev", "eth0"]);
        lan.sh(&["ip", "addr", "add", "fd00:1::fe/64", "dev", "eth0", "nodad"]);
        lan.sh(&["ip", "link", "set", "eth0", "up"]);
        Some(World {
            n,
            root,
            node,
            client,
            lan,
            sb,
        })
    }

    fn dir(&self) -> &Path {
        &self.sb.root
    }

    /// `apptainer exec` of the container script on network `net`, publishing
    /// HOST_PORT → CONTAINER_PORT when `publish`.
    fn command(&self, net: &str, publish: bool) -> Command {
        let mut c = Command::new("ip");
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["netns", "exec", &self.node.name, "sh", "-c", RUN_SH, "sh"])
            .arg(&self.root)
            .arg(self.dir())
            .args([
                "exec",
                "--drop-caps",
                "CAP_SYS_RESOURCE",
                "--net",
                "--network",
                net,
            ]);
        if publish {
            c.args([
                "--network-args",
                &format!("portmap={HOST_PORT}:{CONTAINER_PORT}/tcp"),
            ]);
        }
        c.args(["/mnt/img", "/bin/sh", "-c", CONTAINER_SCRIPT]);
        c
    }

    /// Start the container and wait until it runs (its network is then set up).
    fn start(&self, net: &str, publish: bool) -> Container {
        let log = self.dir().join(format!("apptainer-{net}.log"));
        let f = std::fs::File::create(&log).expect("log file");
        let child = self
            .command(net, publish)
            .stdin(Stdio::null())
            .stdout(f.try_clone().expect("log file"))
            .stderr(f)
            .process_group(0)
            .spawn()
            .expect("spawn apptainer");
        let mut c = Container {
            net: net.to_string(),
            child,
            log,
            pid: None,
            ns: None,
        };
        let pidfile = self.dir().join("tmp/pid");
        let started = poll(START, || {
            if let Ok(s) = std::fs::read_to_string(&pidfile)
                && let Ok(pid) = s.trim().parse::<i32>()
            {
                let _ = std::fs::remove_file(&pidfile);
                return Some(pid);
            }
            if let Ok(Some(st)) = c.child.try_wait() {
                panic!(
                    "apptainer on {net} ended before the container ran ({st}):\n{}",
                    c.output()
                );
            }
            None
        });
        let Some(pid) = started else {
            panic!(
                "the container on {net} did not start in {START:?}:\n{}",
                c.output()
            )
        };
        c.pid = Some(pid);
        let name = format!("cnibox-apt-{}-{pid}", std::process::id());
        let out = exec(
            Path::new("ip"),
            &["netns", "attach", &name, &pid.to_string()],
            &[],
            "",
        );
        assert!(out.status_ok, "ip netns attach {name} {pid}: {out:?}");
        c.ns = Some(NetNs { name });
        c
    }

    /// Run apptainer on `net` to its end (for a config that must fail).
    fn run_to_end(&self, net: &str) -> Output {
        with_deadline(START + STOP, || {
            let c = self.command(net, false);
            let args: Vec<String> = c
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            exec(Path::new("ip"), &args, &[], "")
        })
    }

    fn var_lib_cni(&self) -> PathBuf {
        self.dir().join("var-lib-cni")
    }

    /// host-local's reservations of network `net`: the files named by an address.
    fn reservations(&self, net: &str) -> Vec<String> {
        files_under(&self.var_lib_cni().join("networks").join(net))
            .iter()
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .filter(|f| f.parse::<IpAddr>().is_ok())
            .collect()
    }

    /// Nothing of a container on `net` with `addrs` is left on the node: no veth but the
    /// test's own links, no reservation, no libcni cache file, no cnibox record, no rule naming
    /// its addresses or the published port, no per-container chain.
    #[track_caller]
    fn assert_clean(&self, net: &str, addrs: &[IpAddr]) {
        let veths: Vec<String> = self
            .node
            .sh(&["ip", "-o", "link", "show", "type", "veth"])
            .lines()
            .filter(|l| !l.contains(" tocl@") && !l.contains(" eth0@"))
            .map(str::to_string)
            .collect();
        assert!(veths.is_empty(), "{net}: veths left on the node: {veths:?}");
        let links = self.node.sh(&["ip", "-o", "link", "show"]);
        assert!(
            !links.contains("macvlan") && !links.contains("ipvlan"),
            "{net}: links left on the node:\n{links}"
        );
        let left = self.reservations(net);
        assert!(
            left.is_empty(),
            "{net}: host-local reservations left: {left:?}"
        );
        let cache = files_under(&self.var_lib_cni().join("results"));
        assert!(
            cache.is_empty(),
            "{net}: libcni cache files left: {cache:?}"
        );
        let records = files_under(&self.var_lib_cni().join("cnibox"));
        assert!(
            records.is_empty(),
            "{net}: cnibox records left: {records:?}"
        );
        let mut needles: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
        needles.push(format!("dport {HOST_PORT}"));
        let rules = rules_naming(&self.node, &needles);
        assert!(rules.is_empty(), "{net}: rules left on the node: {rules:?}");
    }
}

/// One running container; killed (and apptainer ended) on drop when a test fails midway.
struct Container {
    net: String,
    child: Child,
    log: PathBuf,
    pid: Option<i32>,
    /// The container's network namespace, attached under /run/netns for the traffic helpers.
    ns: Option<NetNs>,
}

impl Container {
    fn ns(&self) -> &NetNs {
        self.ns.as_ref().expect("attached")
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The container's global addresses on eth0.
    fn addrs(&self) -> Vec<IpAddr> {
        self.ns()
            .sh(&["ip", "-o", "addr", "show", "dev", "eth0", "scope", "global"])
            .lines()
            .filter_map(|l| l.split_whitespace().nth(3))
            .filter_map(|a| a.split('/').next()?.parse().ok())
            .collect()
    }

    /// The container's default gateway of one family.
    fn gateway(&self, v6: bool) -> String {
        let fam = if v6 { "-6" } else { "-4" };
        let out = self.ns().sh(&["ip", fam, "-o", "route", "show", "default"]);
        let mut words = out.split_whitespace();
        words
            .by_ref()
            .find(|w| *w == "via")
            .and_then(|_| words.next())
            .unwrap_or_else(|| {
                panic!(
                    "{}: no {fam} default route in the container: {out}",
                    self.net
                )
            })
            .to_string()
    }

    /// End the container's process and wait for apptainer to tear its network down. Fails on
    /// an error apptainer reports (a failed DEL) or a plugin panic.
    fn stop(mut self) {
        self.ns = None;
        if let Some(pid) = self.pid.take() {
            // SAFETY: kill(2) has no memory preconditions; `pid` is the container's process,
            // alive (apptainer, its parent, has not ended: checked before).
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let ended = eventually(STOP, || matches!(self.child.try_wait(), Ok(Some(_))));
        assert!(
            ended,
            "apptainer on {} did not end in {STOP:?} after its container:\n{}",
            self.net,
            self.output()
        );
        let out = self.output();
        assert!(
            !out.contains(PANIC_MARKER),
            "{}: a plugin panicked:\n{out}",
            self.net
        );
        assert!(
            !out.contains("ERROR") && !out.contains("FATAL"),
            "{}: apptainer reported an error:\n{out}",
            self.net
        );
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.ns = None;
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // The container's process when it is known, else apptainer's group (it forwards the
        // signal to its container): either way apptainer then tears the network down.
        let target = self.pid.unwrap_or(-(self.child.id() as i32));
        // SAFETY: kill(2) has no memory preconditions; `target` is the container's process or
        // the group spawn() made for apptainer, both alive while apptainer runs (checked above).
        unsafe { libc::kill(target, libc::SIGTERM) };
        if eventually(STOP, || matches!(self.child.try_wait(), Ok(Some(_)))) {
            return;
        }
        // SAFETY: as above; the group is the one spawn() made for apptainer.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// The source address `host:port` reports seeing (a [`PEER_REPLY`] server) when `from` talks
/// to it, retrying while nothing answers (DAD, ARP, a loaded machine).
fn peer_seen(from: &NetNs, host: &str, port: u16) -> Option<IpAddr> {
    poll(secs(30), || {
        talk(from, "tcp", host, port)
            .as_deref()
            .and_then(parse_peer)
    })
}

#[track_caller]
fn assert_seen(from: &NetNs, host: &str, port: u16, want: IpAddr, what: &str) {
    let got = peer_seen(from, host, port);
    assert_eq!(
        got,
        Some(want),
        "{what}: {host}:{port} from {} should answer and see {want}",
        from.name
    );
}

/// How the container reaches the outside.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// bridge, ptp: a gateway on the node, masquerading to the client, a published port.
    Routed,
    /// macvlan, ipvlan: on the lan behind the node's eth0, no published port in the config.
    Lan,
}

/// One container on `net`: the families `fams` (v6 flags) are there and no other; traffic for
/// each; nothing left after it exits.
fn scenario(test: &str, net: &str, fams: &[bool], kind: Kind) {
    let Some(w) = World::new(test) else {
        return;
    };
    let c = w.start(net, kind == Kind::Routed);
    let addrs = c.addrs();
    let mut got: Vec<bool> = addrs.iter().map(IpAddr::is_ipv6).collect();
    got.sort();
    assert_eq!(got, fams, "{net}: the container's families: {addrs:?}");
    let addr = |v6: bool| -> IpAddr {
        *addrs
            .iter()
            .find(|a| a.is_ipv6() == v6)
            .expect("checked above")
    };

    if kind == Kind::Routed {
        // While it runs: its reservations and libcni's cache (of the conflist's cniVersion),
        // so the clean checks below look where the state really is.
        let mut held = w.reservations(net);
        held.sort();
        let mut want: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
        want.sort();
        assert_eq!(held, want, "{net}: host-local's reservations while it runs");
        let cache = files_under(&w.var_lib_cni().join("results"));
        assert_eq!(cache.len(), 1, "{net}: libcni's cache: {cache:?}");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&cache[0]).expect("cache"))
            .expect("cache JSON");
        assert_eq!(
            v["result"]["cniVersion"], "1.0.0",
            "{net}: cached result {v}"
        );
    }

    for &v6 in fams {
        let me = addr(v6);
        match kind {
            Kind::Routed => {
                // The container reaches the node (its gateway) from its own address.
                let _srv = serve(&w.node, "tcp", v6, NODE_PORT, PEER_REPLY);
                let gw = c.gateway(v6);
                assert_seen(
                    c.ns(),
                    &gw,
                    NODE_PORT,
                    me,
                    &format!("{net}: container → node"),
                );
                // … and the client, masqueraded behind the node's address.
                let _peer = serve(&w.client, "tcp", v6, PEER_PORT, PEER_REPLY);
                let (client, node): (IpAddr, IpAddr) = if v6 {
                    (
                        format!("fd00:{}:1::2", w.n).parse().expect("v6"),
                        format!("fd00:{}:1::1", w.n).parse().expect("v6"),
                    )
                } else {
                    (
                        format!("192.168.{}.2", w.n).parse().expect("v4"),
                        format!("192.168.{}.1", w.n).parse().expect("v4"),
                    )
                };
                assert_seen(
                    c.ns(),
                    &client.to_string(),
                    PEER_PORT,
                    node,
                    &format!("{net}: container → client (masqueraded)"),
                );
                // The published port: the client reaches the container through the node.
                let _web = serve(c.ns(), "tcp", v6, CONTAINER_PORT, PEER_REPLY);
                assert_seen(
                    &w.client,
                    &node.to_string(),
                    HOST_PORT,
                    client,
                    &format!("{net}: client → node:{HOST_PORT} → container:{CONTAINER_PORT}"),
                );
            }
            Kind::Lan => {
                let peer: IpAddr = if v6 {
                    "fd00:1::fe".parse().expect("v6")
                } else {
                    "192.168.1.254".parse().expect("v4")
                };
                let gw = c.gateway(v6);
                assert_eq!(gw, peer.to_string(), "{net}: the config's gateway");
                let _srv = serve(&w.lan, "tcp", v6, PEER_PORT, PEER_REPLY);
                assert_seen(
                    c.ns(),
                    &gw,
                    PEER_PORT,
                    me,
                    &format!("{net}: container → lan"),
                );
                let _web = serve(c.ns(), "tcp", v6, CONTAINER_PORT, PEER_REPLY);
                assert_seen(
                    &w.lan,
                    &me.to_string(),
                    CONTAINER_PORT,
                    peer,
                    &format!("{net}: lan → container"),
                );
            }
        }
    }
    c.stop();
    w.assert_clean(net, &addrs);
}

const V4: &[bool] = &[false];
const V6: &[bool] = &[true];
const DUAL: &[bool] = &[false, true];

#[test]
fn apptainer_bridge_shipped_v4() {
    scenario("apptainer_bridge_shipped_v4", "bridge", V4, Kind::Routed);
}

#[test]
fn apptainer_bridge_v6() {
    scenario("apptainer_bridge_v6", "bridge-v6", V6, Kind::Routed);
}

#[test]
fn apptainer_bridge_dual() {
    scenario("apptainer_bridge_dual", "bridge-dual", DUAL, Kind::Routed);
}

#[test]
fn apptainer_ptp_shipped_v4() {
    scenario("apptainer_ptp_shipped_v4", "ptp", V4, Kind::Routed);
}

#[test]
fn apptainer_ptp_dual() {
    scenario("apptainer_ptp_dual", "ptp-dual", DUAL, Kind::Routed);
}

#[test]
fn apptainer_fakeroot_shipped_v4() {
    scenario(
        "apptainer_fakeroot_shipped_v4",
        "fakeroot",
        V4,
        Kind::Routed,
    );
}

#[test]
fn apptainer_macvlan_shipped_v4() {
    scenario("apptainer_macvlan_shipped_v4", "macvlan", V4, Kind::Lan);
}

#[test]
fn apptainer_macvlan_dual() {
    scenario("apptainer_macvlan_dual", "macvlan-dual", DUAL, Kind::Lan);
}

/// The shipped ipvlan config: traffic where the kernel has ipvlan, else a clean failure.
#[test]
fn apptainer_ipvlan_shipped_v4() {
    let test = "apptainer_ipvlan_shipped_v4";
    let probe = {
        let Some(w) = World::new(test) else {
            return;
        };
        let ok = w
            .node
            .exec(&[
                "ip",
                "link",
                "add",
                "ipvl-probe",
                "link",
                "eth0",
                "type",
                "ipvlan",
            ])
            .status_ok;
        if !ok {
            // No ipvlan in this kernel: apptainer must say so and leave nothing.
            let out = w.run_to_end("ipvlan");
            assert!(
                !out.status_ok,
                "ipvlan without kernel support started: {out:?}"
            );
            assert!(
                !out.stderr.contains(PANIC_MARKER),
                "a plugin panicked: {out:?}"
            );
            // EOPNOTSUPP's text is libc's: "Operation not supported" (glibc, the debug
            // build), "Not supported" (musl, the static build CI runs).
            assert!(
                out.stderr.contains("plugin type=\"ipvlan\" failed (add)")
                    && out.stderr.to_lowercase().contains("not supported"),
                "apptainer reports ipvlan's error: {out:?}"
            );
            assert!(
                !w.dir().join("tmp/pid").exists(),
                "the container ran without its network"
            );
            w.assert_clean("ipvlan", &["192.168.1.1".parse().expect("v4")]);
        }
        ok
    };
    if probe {
        scenario(test, "ipvlan", V4, Kind::Lan);
    }
}
