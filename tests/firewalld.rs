//! firewall's firewalld backend against a real firewalld: each test starts its own
//! `dbus-daemon` (a private system bus, root allowed, on a socket in the sandbox) and
//! `firewalld --nofork --nopid` on it, both inside a throwaway node namespace, with a config
//! directory of the test's own (nftables backend, so everything firewalld writes is in that
//! namespace's nf_tables). The plugins run in the node with `DBUS_SYSTEM_BUS_ADDRESS` pointing
//! at that bus — godbus (the Go plugin) and cnibox both read it. Asserted through firewalld's
//! own answers (`zone.getSources` with dbus-send): the zone's sources after ADD and after DEL,
//! ADD by one implementation and CHECK/DEL by the other, in IPv4, IPv6 and dual-stack; the
//! auto-detection (firewalld running, a bus without it, no bus) and upstream's fallback for an
//! unknown `backend`; a failed ADD undone; GC; a bus that never answers.

mod common;
use common::env::env_for;
use common::family::{FAMILIES, Fam};
use common::lab::unique_n;
use common::proc::Proc;
use common::wait::{eventually, secs, wait_until};
use common::{
    Env, Impl, NetNs, Output, Sandbox, go_references, reference_available, require_root, skip_note,
};
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The node with its bus and firewalld. Field order is drop order: the daemons go before
/// their namespace and sandbox.
struct Node {
    firewalld: Option<Proc>,
    _dbus: Proc,
    bus: String,
    cont: NetNs,
    node: NetNs,
    sb: Sandbox,
    n: u8,
}

fn installed(tool: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

/// A private bus config: a system bus (so firewalld takes it) that lets root do anything.
fn bus_conf(socket: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
        socket.display()
    )
}

impl Node {
    /// `None` (a skip note; a failure under CNIBOX_REQUIRE_ALL=1) without root or the tools.
    fn start(test: &str) -> Option<Node> {
        if !require_root(test) {
            return None;
        }
        for tool in ["firewalld", "dbus-daemon", "dbus-send"] {
            if !installed(tool) {
                skip_note(
                    test,
                    &format!("{tool} not installed (Debian: firewalld, dbus)"),
                );
                return None;
            }
        }
        let sb = Sandbox::new(test);
        let (node, cont) = (NetNs::create(), NetNs::create());
        node.sh(&["ip", "link", "set", "lo", "up"]);
        let etc = sb.path("firewalld");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("firewalld.conf"),
            "DefaultZone=public\nFirewallBackend=nftables\nCleanupOnExit=yes\n",
        )
        .unwrap();
        let conf = sb.path("bus.conf");
        std::fs::write(&conf, bus_conf(&sb.path("bus.sock"))).unwrap();
        let mut dbus = Command::new("ip")
            .args(["netns", "exec", &node.name, "dbus-daemon", "--nofork"])
            .arg(format!("--config-file={}", conf.display()))
            .arg("--print-address=1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        // The address line is printed once the bus listens.
        let mut bus = String::new();
        std::io::BufReader::new(dbus.stdout.take().unwrap())
            .read_line(&mut bus)
            .unwrap();
        let dbus = Proc(dbus);
        let bus = bus.trim().to_string();
        assert!(bus.starts_with("unix:path="), "dbus-daemon printed {bus:?}");
        // In a mount namespace of its own with an empty /run, so its runtime files (the host's
        // /run/firewalld) stay out of the machine's file systems too.
        let fw = Command::new("ip")
            .args([
                "netns",
                "exec",
                &node.name,
                "unshare",
                "--mount",
                "--propagation",
            ])
            .args([
                "private",
                "sh",
                "-c",
                "mount -t tmpfs tmpfs /run && exec \"$@\"",
                "sh",
            ])
            .args(["firewalld", "--nofork", "--nopid"])
            .arg(format!("--system-config={}", etc.display()))
            .args(["--log-target=file", "--log-file"])
            .arg(sb.path("firewalld.log"))
            .env("DBUS_SYSTEM_BUS_ADDRESS", &bus)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start firewalld");
        let n = Node {
            firewalld: Some(Proc(fw)),
            _dbus: dbus,
            bus,
            cont,
            node,
            sb,
            n: unique_n(),
        };
        let up = eventually(secs(60), || n.zone("getSources", &["trusted"]).status_ok);
        assert!(
            up,
            "firewalld did not come up: {}",
            std::fs::read_to_string(n.sb.path("firewalld.log")).unwrap_or_default()
        );
        Some(n)
    }

    /// A zone method of firewalld through dbus-send, string arguments.
    fn zone(&self, method: &str, args: &[&str]) -> Output {
        let mut a = vec![
            "--system".to_string(),
            "--print-reply".into(),
            "--dest=org.fedoraproject.FirewallD1".into(),
            "/org/fedoraproject/FirewallD1".into(),
            format!("org.fedoraproject.FirewallD1.zone.{method}"),
        ];
        a.extend(args.iter().map(|s| format!("string:{s}")));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::exec(
            Path::new("dbus-send"),
            &a,
            &[("DBUS_SYSTEM_BUS_ADDRESS", &self.bus)],
            "",
        )
    }

    /// The zone's sources, sorted.
    #[track_caller]
    fn sources(&self, zone: &str) -> Vec<String> {
        let out = self.zone("getSources", &[zone]);
        assert!(out.status_ok, "getSources {zone}: {out:?}");
        let mut v: Vec<String> = out
            .stdout
            .lines()
            .filter_map(|l| l.trim().strip_prefix("string \"")?.strip_suffix('"'))
            .map(String::from)
            .collect();
        v.sort();
        v
    }

    /// The environment of container `id`, on our bus.
    fn env(&self, id: &str) -> Env {
        self.env_on(id, &self.bus)
    }

    fn env_on(&self, id: &str, bus: &str) -> Env {
        env_for(&self.cont, id).with_var("DBUS_SYSTEM_BUS_ADDRESS", bus)
    }

    fn run(&self, imp: Impl, cmd: &str, id: &str, conf: &Value) -> Output {
        self.sb
            .plugin_in(imp, &self.node)
            .cmd("firewall", cmd, &self.env(id), conf)
    }

    /// A prevResult with host `host` of each of `fam`'s subnets, and the sources upstream adds
    /// for it (sorted).
    fn prev(&self, fam: Fam, host: u8) -> (Value, Vec<String>) {
        let n = self.n;
        let mut ips = Vec::new();
        let mut want = Vec::new();
        if fam.has_v4() {
            ips.push(json!({"address": format!("10.{n}.0.{host}/24")}));
            want.push(format!("10.{n}.0.{host}/32"));
        }
        if fam.has_v6() {
            ips.push(json!({"address": format!("fd00:{n}::{host}/64")}));
            want.push(format!("fd00:{n}::{host}/128"));
        }
        want.sort();
        (json!({"cniVersion": "1.0.0", "ips": ips}), want)
    }

    /// `iptables-save`/`ip6tables-save` of the node's filter table.
    fn iptables(&self) -> String {
        ["iptables-save", "ip6tables-save"]
            .map(|t| self.node.sh(&[t, "-t", "filter"]))
            .concat()
    }
}

fn conf(extra: Value, prev: Option<&Value>) -> Value {
    let mut c = json!({"cniVersion": "1.0.0", "name": "fwdnet", "type": "firewall"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    c
}

#[track_caller]
fn ok(out: &Output, what: &str) {
    assert!(out.status_ok, "{what}: {out:?}");
}

/// ADD by one implementation, CHECK by both, DEL by the other (and the reverse), per family,
/// with the zone unset (trusted) and chosen; cnibox's DEL without prevResult through its
/// record. Both ADDs must leave the same sources. The Go side is v1.9.1 and v1.1.1 in turn.
#[test]
fn both_implementations_both_ways() {
    let Some(n) = Node::start("both_implementations_both_ways") else {
        return;
    };
    let gos = go_references("firewall");
    let mut host = 10;
    for fam in FAMILIES {
        for zone in ["trusted", "internal"] {
            let extra = if zone == "trusted" {
                json!({})
            } else {
                json!({"firewalldZone": zone})
            };
            host += 1;
            let (prev, want) = n.prev(fam, host);
            let c = conf(extra.clone(), Some(&prev));
            let id = format!("both-{}-{zone}", fam.tag());
            let tag = format!("{} {zone}", fam.tag());
            // ours ADD (backend unset: firewalld found on the bus), CHECK, DEL without prevResult.
            ok(
                &n.run(Impl::Ours, "ADD", &id, &c),
                &format!("ours ADD {tag}"),
            );
            assert_eq!(n.sources(zone), want, "after ours ADD {tag}");
            ok(
                &n.run(Impl::Ours, "CHECK", &id, &c),
                &format!("ours CHECK {tag}"),
            );
            ok(
                &n.run(Impl::Ours, "DEL", &id, &conf(extra.clone(), None)),
                &format!("ours DEL without prevResult {tag}"),
            );
            assert!(n.sources(zone).is_empty(), "after ours DEL {tag}");
            for &g in &gos {
                // ours ADD, Go CHECK and DEL; then Go ADD (same sources), ours CHECK and DEL.
                ok(
                    &n.run(Impl::Ours, "ADD", &id, &c),
                    &format!("ours ADD {tag} ({})", g.label()),
                );
                ok(
                    &n.run(g, "CHECK", &id, &c),
                    &format!("Go CHECK {tag} ({})", g.label()),
                );
                ok(
                    &n.run(g, "DEL", &id, &c),
                    &format!("Go DEL {tag} ({})", g.label()),
                );
                assert!(
                    n.sources(zone).is_empty(),
                    "after Go DEL of ours {tag} ({})",
                    g.label()
                );
                ok(
                    &n.run(Impl::Ours, "DEL", &id, &c),
                    &format!("ours DEL again {tag} ({})", g.label()),
                );
                ok(
                    &n.run(g, "ADD", &id, &c),
                    &format!("Go ADD {tag} ({})", g.label()),
                );
                assert_eq!(n.sources(zone), want, "after Go ADD {tag} ({})", g.label());
                ok(
                    &n.run(Impl::Ours, "CHECK", &id, &c),
                    &format!("ours CHECK of Go {tag} ({})", g.label()),
                );
                ok(
                    &n.run(Impl::Ours, "DEL", &id, &c),
                    &format!("ours DEL of Go {tag} ({})", g.label()),
                );
                assert!(
                    n.sources(zone).is_empty(),
                    "after ours DEL of Go {tag} ({})",
                    g.label()
                );
            }
        }
    }
    assert!(n.iptables().lines().all(|l| !l.contains("CNI-FORWARD")));
}

/// A repeated ADD is fine (ZONE_ALREADY_SET); CHECK fails once a source left the zone; an ADD
/// that firewalld refuses half-way removes the source it added and its record.
#[test]
fn check_and_refusals() {
    let Some(n) = Node::start("check_and_refusals") else {
        return;
    };
    let (prev, want) = n.prev(Fam::Dual, 5);
    let c = conf(json!({"backend": "firewalld"}), Some(&prev));
    ok(&n.run(Impl::Ours, "ADD", "c1", &c), "ADD");
    ok(&n.run(Impl::Ours, "ADD", "c1", &c), "ADD again");
    assert_eq!(n.sources("trusted"), want);
    ok(
        &n.zone("removeSource", &["trusted", &want[1]]),
        "removeSource",
    );
    let out = n.run(Impl::Ours, "CHECK", "c1", &c);
    let msg = out.err(999);
    assert!(
        msg.contains(&format!(
            "failed to find the address {} in trusted zone",
            want[1]
        )),
        "{msg}"
    );
    ok(&n.run(Impl::Ours, "DEL", "c1", &c), "DEL");
    assert!(n.sources("trusted").is_empty());

    // The IPv6 source already belongs to another zone: firewalld refuses the second addSource.
    let v6 = want.iter().find(|s| s.contains(':')).unwrap().clone();
    ok(&n.zone("addSource", &["public", &v6]), "addSource public");
    let out = n.run(Impl::Ours, "ADD", "c2", &c);
    let msg = out.err(999);
    assert!(
        msg.contains(&format!("failed to add the address {v6} to trusted zone"))
            && msg.contains("ZONE_CONFLICT"),
        "{msg}"
    );
    assert!(
        n.sources("trusted").is_empty(),
        "the failed ADD left sources"
    );
    assert_eq!(n.sources("public"), std::slice::from_ref(&v6));
    let records = n.sb.path("cnibox-state/firewall-ipt/fwdnet");
    assert!(
        std::fs::read_dir(&records).map_or(true, |d| d.count() == 0),
        "the failed ADD left its record in {}",
        records.display()
    );
    // A zone firewalld does not know: refused, nothing left.
    let bad = conf(json!({"firewalldZone": "nosuchzone"}), Some(&prev));
    let msg = n.run(Impl::Ours, "ADD", "c3", &bad).err(999);
    assert!(msg.contains("INVALID_ZONE"), "{msg}");
}

/// Upstream's choice of backend: unset or unknown means firewalld while it owns its name
/// (iptables otherwise), for both implementations; `iptables` stays iptables; with
/// `ingressPolicy` the isolation rules are iptables rules even with firewalld.
#[test]
fn backend_choice() {
    let Some(n) = Node::start("backend_choice") else {
        return;
    };
    let go = reference_available("firewall");
    let (prev, want) = n.prev(Fam::Dual, 7);
    let imps: &[Impl] = if go {
        &[Impl::Ours, Impl::Reference]
    } else {
        &[Impl::Ours]
    };
    for &imp in imps {
        let c = conf(json!({"backend": "pf"}), Some(&prev));
        ok(
            &n.run(imp, "ADD", "c1", &c),
            &format!("{imp:?} ADD backend pf"),
        );
        assert_eq!(n.sources("trusted"), want, "{imp:?} with backend pf");
        assert!(
            !n.iptables().contains("CNI-FORWARD"),
            "{imp:?} wrote iptables rules"
        );
        ok(&n.run(imp, "DEL", "c1", &c), &format!("{imp:?} DEL"));
        assert!(n.sources("trusted").is_empty());
    }
    // No bus at the address: iptables, for an unknown backend as for none.
    let nobus = n.sb.path("nobus.sock").display().to_string();
    let env = n.env_on("c2", &format!("unix:path={nobus}"));
    let c = conf(json!({"backend": "pf"}), Some(&prev));
    let p = n.sb.plugin_in(Impl::Ours, &n.node);
    ok(&p.add("firewall", &env, &c), "ADD without a bus");
    let rules = n.iptables();
    assert!(
        rules.contains(&format!("-s 10.{}.0.7/32 -j ACCEPT", n.n)),
        "{rules}"
    );
    assert!(
        rules.contains(&format!("-s fd00:{}::7/128 -j ACCEPT", n.n)),
        "{rules}"
    );
    ok(&p.del("firewall", &env, &c), "DEL without a bus");
    assert!(!n.iptables().contains("-s 10."), "{}", n.iptables());
    // Explicit iptables with firewalld running: no sources.
    let c = conf(json!({"backend": "iptables"}), Some(&prev));
    ok(&n.run(Impl::Ours, "ADD", "c3", &c), "ADD iptables");
    assert!(n.sources("trusted").is_empty());
    ok(&n.run(Impl::Ours, "DEL", "c3", &c), "DEL iptables");
    // ingressPolicy with firewalld: sources plus upstream's iptables isolation chains.
    let mut p = prev.clone();
    p["interfaces"] = json!([{"name": "cnifwd0"}]);
    let c = conf(json!({"ingressPolicy": "same-bridge"}), Some(&p));
    ok(&n.run(Impl::Ours, "ADD", "c4", &c), "ADD same-bridge");
    assert_eq!(n.sources("trusted"), want);
    let rules = n.iptables();
    assert!(
        rules.contains("-A CNI-ISOLATION-STAGE-2 -o cnifwd0 ")
            && !rules.contains(&format!("-s 10.{}.0.7/32", n.n)),
        "{rules}"
    );
    ok(&n.run(Impl::Ours, "DEL", "c4", &c), "DEL same-bridge");
    assert!(n.sources("trusted").is_empty());
}

/// A system bus without firewalld (the usual node): with `backend` unset both implementations
/// ask the bus, find no owner and write iptables rules; DEL removes them.
#[test]
fn bus_without_firewalld() {
    let Some(mut n) = Node::start("bus_without_firewalld") else {
        return;
    };
    n.firewalld = None; // killed and reaped: its name goes with its connection
    wait_until("firewalld to stop answering", secs(30), || {
        !n.zone("getSources", &["trusted"]).status_ok
    });
    let go = reference_available("firewall");
    let (prev, _) = n.prev(Fam::Dual, 9);
    let c = conf(json!({}), Some(&prev));
    let v4 = format!("-A CNI-FORWARD -s 10.{}.0.9/32 -j ACCEPT", n.n);
    let v6 = format!("-A CNI-FORWARD -s fd00:{}::9/128 -j ACCEPT", n.n);
    for imp in [Impl::Ours, Impl::Reference] {
        if imp == Impl::Reference && !go {
            continue;
        }
        ok(&n.run(imp, "ADD", "w1", &c), &format!("{imp:?} ADD"));
        let rules = n.iptables();
        assert!(
            rules.contains(&v4) && rules.contains(&v6),
            "{imp:?}: {rules}"
        );
        ok(&n.run(imp, "CHECK", "w1", &c), &format!("{imp:?} CHECK"));
        ok(&n.run(imp, "DEL", "w1", &c), &format!("{imp:?} DEL"));
        let rules = n.iptables();
        assert!(
            !rules.contains(&v4) && !rules.contains(&v6),
            "{imp:?} DEL: {rules}"
        );
    }
}

/// GC removes the recorded sources of attachments that are gone, and keeps the others'.
#[test]
fn gc_removes_sources_of_gone_attachments() {
    let Some(n) = Node::start("gc_removes_sources_of_gone_attachments") else {
        return;
    };
    let (p1, w1) = n.prev(Fam::Dual, 21);
    let (p2, _) = n.prev(Fam::Dual, 22);
    ok(
        &n.run(Impl::Ours, "ADD", "k1", &conf(json!({}), Some(&p1))),
        "ADD k1",
    );
    ok(
        &n.run(Impl::Ours, "ADD", "k2", &conf(json!({}), Some(&p2))),
        "ADD k2",
    );
    let mut gc = conf(json!({"cniVersion": "1.1.0"}), None);
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "k1", "ifname": "eth0"}]);
    ok(&n.run(Impl::Ours, "GC", "k1", &gc), "GC");
    assert_eq!(n.sources("trusted"), w1);
}

/// A bus that accepts connections and never answers: ADD fails with code 11 after the
/// client's deadline instead of hanging, and writes nothing; one that hangs up at once is an
/// error too. (No firewalld needed.)
#[test]
fn silent_bus_is_a_bounded_wait() {
    if !require_root("silent_bus_is_a_bounded_wait") {
        return;
    }
    let sb = Sandbox::new("silent_bus");
    let node = NetNs::create();
    let cont = NetNs::create();
    let prev = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.9.0.2/24"}]});
    for (hang, backend) in [(true, ""), (true, "firewalld"), (false, "")] {
        let sock = sb.path(&format!("bus-{hang}-{backend}.sock"));
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        // Held open (returned to the join below) or closed at once.
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            hang.then_some(s)
        });
        let env = env_for(&cont, "s1").with_var(
            "DBUS_SYSTEM_BUS_ADDRESS",
            &format!("unix:path={}", sock.display()),
        );
        let start = Instant::now();
        let c = conf(json!({"backend": backend}), Some(&prev));
        let out = sb.plugin_in(Impl::Ours, &node).add("firewall", &env, &c);
        let took = start.elapsed();
        if hang {
            let msg = out.err(11);
            assert!(msg.contains("no answer within"), "{msg}");
            assert!(took < Duration::from_secs(14), "took {took:?}");
        } else {
            assert!(!out.status_ok && out.err_code() == Some(999), "{out:?}");
        }
        let rules = node.sh(&["iptables-save"]);
        assert!(!rules.contains("CNI-FORWARD"), "{rules}");
        t.join().unwrap();
    }
}
