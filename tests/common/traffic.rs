//! Real traffic for the netfilter tests: socat servers inside namespaces and one-shot clients,
//! with retrying assertions; and small helpers on results.

use super::{Env, NetNs, Output, exec};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Servers and clients (socat)

/// A background socat server inside a namespace, in its own process group; the whole group is
/// killed on drop.
pub struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the group is the one we created.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Start `socat` listening on `port` (`proto` "tcp" or "udp", IPv4 or IPv6) in `ns`, answering
/// every connection / datagram with `reply`; returns once the socket is bound.
pub fn serve(ns: &NetNs, proto: &str, v6: bool, port: u16, reply: &str) -> Server {
    let fam = if v6 { "6" } else { "4" };
    let listen = match proto {
        "tcp" => format!("TCP{fam}-LISTEN:{port},fork,reuseaddr"),
        "udp" => format!("UDP{fam}-RECVFROM:{port},fork"),
        _ => panic!("unknown protocol {proto}"),
    };
    let listen = if v6 {
        format!("{listen},ipv6only=1")
    } else {
        listen
    };
    let child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "socat", &listen])
        .arg(format!("SYSTEM:echo {reply}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn socat server");
    let server = Server { child };
    let flag = if proto == "tcp" { "-Hltn" } else { "-Hlun" };
    let filter = format!("sport = :{port}");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let out = ns.exec(&["ss", flag, &filter]);
        if out.status_ok && !out.stdout.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "socat {proto} server on port {port} in {} did not start listening",
            ns.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// One client exchange from `from` to `host:port`: sends "ping\n" and returns what came back
/// (trimmed), or None when nothing did within ~2 s.
pub fn talk(from: &NetNs, proto: &str, host: &str, port: u16) -> Option<String> {
    let s = talk_raw(from, proto, host, port).stdout.trim().to_string();
    if s.is_empty() { None } else { Some(s) }
}

/// The socat client run of [`talk`], for callers that must tell "no answer" from "the probe
/// could not run".
fn talk_raw(from: &NetNs, proto: &str, host: &str, port: u16) -> Output {
    let v6 = host.contains(':');
    let (fam, h) = if v6 {
        ("6", format!("[{host}]"))
    } else {
        ("4", host.to_string())
    };
    let addr = match proto {
        "tcp" => format!("TCP{fam}:{h}:{port},connect-timeout=2"),
        "udp" => format!("UDP{fam}:{h}:{port}"),
        _ => panic!("unknown protocol {proto}"),
    };
    exec(
        Path::new("ip"),
        &[
            "netns", "exec", &from.name, "timeout", "6", "socat", "-T2", "-t2", "-", &addr,
        ],
        &[],
        "ping\n",
    )
}

/// Whether `from` gets `expect` back from `host:port`, retrying (address DAD, ARP, a server
/// under load). The window is generous: on a loaded 2-core CI machine one UDP exchange through
/// `ip netns exec` and a forking socat can take seconds, and a pass costs only one try.
pub fn answers(from: &NetNs, proto: &str, host: &str, port: u16, expect: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if talk(from, proto, host, port).as_deref() == Some(expect) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Asserts that `host:port` gives no answer (one attempt, ~2 s). The probe itself must have run:
/// socat ending with a network failure (status 1) or the timeout (124) counts as silence; a
/// missing tool or namespace (126, 127, 255 …) fails the test instead of passing it. Callers
/// also prove the same path answers when nothing blocks it (before the rule, or after), so a
/// silence cannot come from broken routing.
#[track_caller]
pub fn assert_silent(from: &NetNs, proto: &str, host: &str, port: u16, what: &str) {
    let out = talk_raw(from, proto, host, port);
    let got = out.stdout.trim();
    assert!(
        got.is_empty(),
        "{what}: {proto} {host}:{port} from {} should not answer, got {got:?}",
        from.name
    );
    assert!(
        matches!(out.code, Some(0 | 1 | 124)),
        "{what}: the probe from {} did not run (socat or the namespace missing?): {out:?}",
        from.name
    );
}

#[track_caller]
pub fn assert_answers(from: &NetNs, proto: &str, host: &str, port: u16, expect: &str, what: &str) {
    assert!(
        answers(from, proto, host, port, expect),
        "{what}: {proto} {host}:{port} from {} should answer {expect:?}, last try: {:?}",
        from.name,
        talk(from, proto, host, port)
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile configs

/// Every rule of the node: `iptables-save`, `ip6tables-save` (comment lines dropped) and
/// `nft list ruleset`, for "nothing changed" comparisons.
pub fn netfilter_state(node: &NetNs) -> String {
    let mut s = String::new();
    for cmd in [
        &["iptables-save"][..],
        &["ip6tables-save"],
        &["nft", "list", "ruleset"],
    ] {
        let out = node.exec(cmd);
        assert!(out.status_ok, "{cmd:?}: {out:?}");
        for l in out.stdout.lines().filter(|l| !l.starts_with('#')) {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

/// The hostile-config scenario: with `benign` attached as `ids.0`, ADD of `hostile` as `ids.1`
/// fails with code 7 naming `key` and changes no rule (in particular adds no injected
/// `-A INPUT -j DROP`); DEL with the hostile config succeeds and changes nothing either; then
/// the benign attachment is removed.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn assert_hostile_refused(
    test: &str,
    p: &super::Plugin,
    node: &NetNs,
    applet: &str,
    env: &mut Env,
    ids: (&str, &str),
    (benign, hostile): (&Value, &Value),
    key: &str,
) {
    env.container_id = ids.0.into();
    p.add(applet, env, benign).ok();
    let before = netfilter_state(node);
    env.container_id = ids.1.into();
    let msg = p.add(applet, env, hostile).err(7);
    assert!(msg.contains(key), "{test}: message names {key}: {msg}");
    let after = netfilter_state(node);
    assert!(
        !after.contains("-A INPUT -j DROP"),
        "{test}: injected rule applied:\n{after}"
    );
    assert_eq!(before, after, "{test}: the node's rules changed");
    // DEL with that config succeeds (nothing of it was applied) and removes nothing else.
    p.del(applet, env, hostile).ok();
    assert_eq!(
        before,
        netfilter_state(node),
        "{test}: DEL changed other rules"
    );
    env.container_id = ids.0.into();
    p.del(applet, env, benign).ok();
}

// ---------------------------------------------------------------------------------------------
// Scenario variants

// ---------------------------------------------------------------------------------------------
// Namespaces

/// A "node" namespace and a "client" namespace playing a second host, joined by a veth (node
/// side `tocl` 192.168.N.1/24, client side `eth0` 192.168.N.2/24), loopbacks up. Routes from
/// the client to container subnets are the caller's choice.
pub fn node_and_client(n: u8) -> (NetNs, NetNs) {
    let (node, client) = (NetNs::create(), NetNs::create());
    node.sh(&["ip", "link", "set", "lo", "up"]);
    client.sh(&["ip", "link", "set", "lo", "up"]);
    node.sh(&[
        "ip",
        "link",
        "add",
        "tocl",
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        &client.name,
    ]);
    node.sh(&[
        "ip",
        "addr",
        "add",
        &format!("192.168.{n}.1/24"),
        "dev",
        "tocl",
    ]);
    node.sh(&["ip", "link", "set", "tocl", "up"]);
    client.sh(&[
        "ip",
        "addr",
        "add",
        &format!("192.168.{n}.2/24"),
        "dev",
        "eth0",
    ]);
    client.sh(&["ip", "link", "set", "eth0", "up"]);
    (node, client)
}

// ---------------------------------------------------------------------------------------------
// Results

/// The environment for a container namespace (kept here for the files that import it from
/// `traffic`; it lives in [`super::env`]).
#[allow(unused_imports)]
pub use super::env::env_for;

/// The address (without prefix) of the first IPv4 (or IPv6) entry of a result.
pub fn cont_ip(r: &Value, v6: bool) -> String {
    r["ips"]
        .as_array()
        .unwrap_or_else(|| panic!("result has no ips: {r}"))
        .iter()
        .filter_map(|i| i["address"].as_str())
        .map(|a| a.split('/').next().unwrap().to_string())
        .find(|a| a.contains(':') == v6)
        .unwrap_or_else(|| panic!("no {} address in {r}", if v6 { "IPv6" } else { "IPv4" }))
}
