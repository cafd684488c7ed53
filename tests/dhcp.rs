//! dhcp IPAM against a real DHCP server: dnsmasq in a throwaway "server" namespace on one end
//! of a veth whose other end, in the node namespace, is the master of the containers' macvlans
//! (`ipam.type: dhcp`); `cnibox dhcp daemon` is started per test on a socket of its own.
//! (macvlan, because its DEL releases the addresses before deleting the link; bridge deletes
//! the veth first, as upstream, and a DHCPRELEASE cannot leave through a deleted interface.) Asserts the lease (address in dnsmasq's range, on
//! the interface, router as gateway and default route, traffic to the router), a renewal seen
//! by both sides (dnsmasq sends T1 = 3 s), CHECK, DEL's DHCPRELEASE (dnsmasq's log and lease
//! file), DEL after the namespace is gone, a clean SIGTERM, and the errors without a daemon.
//! The Go plugin with its own daemon gets the same lease shape from the same server.

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

fn unique_n() -> u8 {
    static N: AtomicU8 = AtomicU8::new(60);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Poll `f` until it holds; fails after a minute (a bound for a hung test, not a timing).
#[track_caller]
fn wait_for(what: &str, f: impl FnMut() -> bool) {
    wait_or(what, f, String::new)
}

/// [`wait_for`], showing `why()` when it times out.
#[track_caller]
fn wait_or(what: &str, mut f: impl FnMut() -> bool, why: impl Fn() -> String) {
    let end = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}\n{}",
            why()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The node, and the server namespace with dnsmasq.
struct Lab {
    sb: Sandbox,
    node: NetNs,
    _srv: NetNs,
    n: u8,
    _server: Proc,
    server_log: PathBuf,
    leases: PathBuf,
}

fn lab(tag: &str) -> Lab {
    let sb = Sandbox::new(tag);
    let n = unique_n();
    let (node, srv) = (NetNs::create(), NetNs::create());
    node.sh(&[
        "ip", "link", "add", "up0", "type", "veth", "peer", "name", "srv0", "netns", &srv.name,
    ]);
    node.sh(&["ip", "link", "set", "up0", "up"]);
    srv.sh(&["ip", "link", "set", "lo", "up"]);
    srv.sh(&[
        "ip",
        "addr",
        "add",
        &format!("10.{n}.0.1/24"),
        "dev",
        "srv0",
    ]);
    srv.sh(&["ip", "link", "set", "srv0", "up"]);
    let server_log = sb.path("dnsmasq.log");
    let leases = sb.path("dnsmasq.leases");
    let log = std::fs::File::create(&server_log).unwrap();
    let child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &srv.name,
            "dnsmasq",
            "--no-daemon",
            "--conf-file=/dev/null",
        ])
        .args([
            "--port=0",
            "--interface=srv0",
            "--bind-interfaces",
            "--log-dhcp",
        ])
        .arg(format!(
            "--dhcp-range=10.{n}.0.50,10.{n}.0.99,255.255.255.0,2m"
        ))
        .arg(format!("--dhcp-option=option:router,10.{n}.0.1"))
        .arg("--dhcp-option=option:T1,3")
        .arg(format!("--dhcp-leasefile={}", leases.display()))
        .arg(format!("--pid-file={}", sb.path("dnsmasq.pid").display()))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start dnsmasq");
    let server = Proc(child);
    wait_for("dnsmasq to listen", || {
        read(&server_log).contains("DHCP, IP range")
    });
    Lab {
        sb,
        node,
        _srv: srv,
        n,
        _server: server,
        server_log,
        leases,
    }
}

/// `dhcp daemon` on a socket in the sandbox, started through the applet link.
struct Daemon {
    proc: Proc,
    socket: String,
    log: PathBuf,
}

fn daemon(lab: &Lab, extra: &[&str]) -> Daemon {
    let socket = lab.sb.path("run/dhcp.sock").display().to_string();
    let log = lab.sb.path("daemon.log");
    let link = lab.sb.bin.join("dhcp");
    let child = Command::new(&link)
        .args([
            "daemon",
            "-socketpath",
            &socket,
            "-timeout=2s",
            "--resendtimeout",
            "6s",
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start dhcp daemon");
    wait_for("the daemon's socket", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    Daemon {
        proc: Proc(child),
        socket,
        log,
    }
}

fn conf(socket: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": "dhcpnet", "type": "macvlan", "master": "up0",
           "ipam": {"type": "dhcp", "daemonSocketPath": socket}})
}

fn env(c: &NetNs, id: &str) -> Env {
    Env {
        container_id: id.into(),
        netns: c.path(),
        ..Env::default()
    }
}

/// The address of a lease result, checked to be in dnsmasq's range.
#[track_caller]
fn leased(lab: &Lab, r: &Value) -> String {
    let addr = r["ips"][0]["address"]
        .as_str()
        .expect("an address")
        .to_string();
    let (ip, prefix) = addr.split_once('/').unwrap();
    assert_eq!(prefix, "24", "{r}");
    let last: u8 = ip.rsplit('.').next().unwrap().parse().unwrap();
    assert!(
        ip.starts_with(&format!("10.{}.0.", lab.n)) && (50..=99).contains(&last),
        "{r}"
    );
    ip.to_string()
}

#[test]
fn lease_renew_check_release() {
    if !require_root("dhcp lease_renew_check_release") || !have("dnsmasq") {
        return;
    }
    let lab = lab("dhcp-lease");
    let d = daemon(&lab, &[]);
    let c = NetNs::create();
    let plugin = lab.sb.plugin_in(Impl::Ours, &lab.node);
    let conf = conf(&d.socket);
    let r = plugin
        .add("macvlan", &env(&c, "dhcp-c1"), &conf)
        .ok()
        .clone();
    let ip = leased(&lab, &r);
    let gw = format!("10.{}.0.1", lab.n);
    assert_eq!(r["ips"][0]["gateway"], json!(gw), "{r}");
    assert_eq!(r["routes"], json!([{"dst": "0.0.0.0/0", "gw": gw}]), "{r}");
    // On the interface, with the default route, and the router answers.
    assert!(
        c.sh(&["ip", "-4", "addr", "show", "eth0"])
            .contains(&format!("{ip}/24"))
    );
    assert!(
        c.sh(&["ip", "route"])
            .contains(&format!("default via {gw}"))
    );
    c.sh(&["ping", "-c1", "-W5", &gw]);
    assert!(read(&lab.leases).contains(&ip), "dnsmasq holds the lease");
    // The client identifier is upstream's: containerID/network/ifname (type 0).
    let id_hex: String = b"dhcp-c1/dhcpnet/eth0"
        .iter()
        .map(|b| format!("{b:02x}:"))
        .collect();
    assert!(read(&lab.leases).contains(&format!("00:{}", id_hex.trim_end_matches(':'))));

    // A second ADD of the same attachment returns the lease held.
    let again = plugin
        .cmd("dhcp", "ADD", &env(&c, "dhcp-c1"), &conf)
        .ok()
        .clone();
    assert_eq!(again["ips"][0]["address"], r["ips"][0]["address"]);

    // Renewal at T1 (3 s): the daemon says so and dnsmasq acknowledges a second time.
    wait_for("a renewal", || {
        read(&d.log).contains("lease renewed")
            && read(&lab.server_log)
                .matches(&format!("DHCPACK(srv0) {ip}"))
                .count()
                >= 2
    });

    // CHECK: the daemon holds the lease; it does not for another interface.
    let prev = with_prev(&conf, &r);
    plugin.check("macvlan", &env(&c, "dhcp-c1"), &prev).ok();
    let mut other = env(&c, "dhcp-c1");
    other.ifname = "eth9".into();
    let msg = plugin.cmd("dhcp", "CHECK", &other, &prev).err(999);
    assert!(
        msg.contains("no DHCP lease held for dhcp-c1/dhcpnet/eth9"),
        "{msg}"
    );
    // STATUS: the daemon answers.
    let st = json!({"cniVersion": "1.1.0", "name": "dhcpnet", "type": "dhcp",
                    "ipam": {"type": "dhcp", "daemonSocketPath": d.socket}});
    plugin.status("dhcp", &st).ok();

    // DEL releases: dnsmasq logs the DHCPRELEASE and drops the lease.
    plugin.del("macvlan", &env(&c, "dhcp-c1"), &conf).ok();
    let logs = || {
        let (s, l, d) = (read(&lab.server_log), read(&lab.leases), read(&d.log));
        format!("dnsmasq:\n{s}\nleases:\n{l}\ndaemon:\n{d}")
    };
    wait_or(
        "the release",
        || {
            read(&lab.server_log).contains(&format!("DHCPRELEASE(srv0) {ip}"))
                && !read(&lab.leases).contains(&ip)
        },
        logs,
    );
    assert!(read(&d.log).contains("releasing lease"));
    // DEL again: nothing held, still fine.
    plugin.del("macvlan", &env(&c, "dhcp-c1"), &conf).ok();
    plugin.check("dhcp", &env(&c, "dhcp-c1"), &prev).err(999);
}

#[test]
fn del_after_the_namespace_is_gone_and_sigterm() {
    if !require_root("dhcp del_after_the_namespace_is_gone_and_sigterm") || !have("dnsmasq") {
        return;
    }
    let lab = lab("dhcp-gone");
    let pidfile = lab.sb.path("daemon.pid");
    let mut d = daemon(&lab, &["-pidfile", pidfile.to_str().unwrap(), "-broadcast"]);
    let plugin = lab.sb.plugin_in(Impl::Ours, &lab.node);
    let conf = conf(&d.socket);
    let c = NetNs::create();
    let path = c.path();
    let r = plugin
        .add("macvlan", &env(&c, "dhcp-c2"), &conf)
        .ok()
        .clone();
    let ip = leased(&lab, &r);
    // The runtime removed the namespace before DEL: the daemon still releases the lease.
    drop(c);
    let gone = Env {
        container_id: "dhcp-c2".into(),
        netns: path,
        ..Env::default()
    };
    plugin.del("macvlan", &gone, &conf).ok();
    wait_for("the release", || {
        read(&lab.server_log).contains(&format!("DHCPRELEASE(srv0) {ip}"))
    });

    // SIGTERM: exit status 0, socket and pidfile gone.
    let pid = read(&pidfile);
    assert_eq!(pid.trim(), d.proc.0.id().to_string());
    let c = NetNs::create();
    plugin.add("macvlan", &env(&c, "dhcp-c3"), &conf).ok();
    exec(Path::new("kill"), &["-TERM", pid.trim()], &[], "");
    let status = d.proc.0.wait().unwrap();
    assert!(status.success(), "{status:?}: {}", read(&d.log));
    assert!(!Path::new(&d.socket).exists(), "socket removed");
    assert!(!pidfile.exists(), "pidfile removed");

    // Without a daemon: ADD fails clearly, DEL succeeds (no daemon holds no lease).
    let c = NetNs::create();
    let out = plugin.add("macvlan", &env(&c, "dhcp-c4"), &conf);
    let msg = out.err(999);
    assert!(
        msg.contains("error dialing DHCP daemon at") && msg.contains(&d.socket),
        "{out:?}"
    );
    assert!(
        out.json["details"]
            .as_str()
            .unwrap_or_default()
            .contains("dhcp daemon"),
        "{out:?}"
    );
    assert_eq!(
        c.sh(&["ip", "-o", "link", "show"]).lines().count(),
        1,
        "ADD undone"
    );
    plugin.del("macvlan", &env(&c, "dhcp-c4"), &conf).ok();
    let st = json!({"cniVersion": "1.1.0", "name": "dhcpnet", "type": "dhcp",
                    "ipam": {"type": "dhcp", "daemonSocketPath": d.socket}});
    plugin.status("dhcp", &st).err(50);
}

#[test]
fn daemon_flags_and_socket_errors() {
    if !require_root("dhcp daemon_flags_and_socket_errors") {
        return;
    }
    let sb = Sandbox::new("dhcp-flags");
    let out = cnibox(&["dhcp", "daemon", "-nope"]);
    assert_eq!(out.code, Some(2));
    assert!(
        out.stderr.contains("flag provided but not defined: -nope"),
        "{out:?}"
    );
    assert!(out.stderr.contains("-socketpath string"), "{out:?}");
    let out = cnibox(&["dhcp", "daemon", "-h"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let out = cnibox(&["dhcp", "daemon", "-timeout", "ten"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    let out = cnibox(&["dhcp", "daemon", "-pidfile", "rel.pid"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("path not absolute"), "{out:?}");
    // A second daemon on a live socket is refused; the first keeps it.
    let socket = sb.path("d.sock").display().to_string();
    let first = Proc(
        Command::new(bin())
            .args(["dhcp", "daemon", "--socketpath", &socket])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the socket", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let out = cnibox(&["dhcp", "daemon", &format!("-socketpath={socket}")]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("another daemon is listening"),
        "{out:?}"
    );
    drop(first);
    // A stale socket file (its daemon was killed) is replaced.
    assert!(Path::new(&socket).exists());
    let second = Proc(
        Command::new(bin())
            .args(["dhcp", "daemon", "--socketpath", &socket])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the socket", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    drop(second);
}

/// The Go plugin and daemon (Debian's v1.1.1) against the same server: the same lease shape.
#[test]
fn same_result_as_the_go_plugin() {
    if !require_root("dhcp same_result_as_the_go_plugin")
        || !have("dnsmasq")
        || !reference_available("dhcp")
    {
        return;
    }
    let lab = lab("dhcp-ref");
    let ours = daemon(&lab, &[]);
    let go_socket = lab.sb.path("go/dhcp.sock").display().to_string();
    let _go = Proc(
        Command::new(reference_path("dhcp"))
            .args(["daemon", "-socketpath", &go_socket])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("the Go daemon's socket", || {
        std::os::unix::net::UnixStream::connect(&go_socket).is_ok()
    });
    let (c1, c2) = (NetNs::create(), NetNs::create());
    let a = lab.sb.plugin_in(Impl::Ours, &lab.node).add(
        "macvlan",
        &env(&c1, "dhcp-o"),
        &conf(&ours.socket),
    );
    let b = lab.sb.plugin_in(Impl::Reference, &lab.node).add(
        "macvlan",
        &env(&c2, "dhcp-g"),
        &conf(&go_socket),
    );
    let (mut a, mut b) = (a.ok().clone(), b.ok().clone());
    leased(&lab, &a);
    leased(&lab, &b);
    for r in [&mut a, &mut b] {
        r["ips"][0]["address"] = json!("x");
        r["interfaces"] = json!("x");
    }
    assert_eq!(a, b);
    lab.sb
        .plugin_in(Impl::Ours, &lab.node)
        .del("macvlan", &env(&c1, "dhcp-o"), &conf(&ours.socket))
        .ok();
    lab.sb
        .plugin_in(Impl::Reference, &lab.node)
        .del("macvlan", &env(&c2, "dhcp-g"), &conf(&go_socket))
        .ok();
}

/// dnsmasq is installed (a failure under CNIBOX_REQUIRE_ALL=1).
fn have(tool: &str) -> bool {
    let found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists());
    if !found {
        skip_note(
            &format!("dhcp ({tool})"),
            &format!("needs {tool} (apt-get install dnsmasq-base)"),
        );
    }
    found
}
