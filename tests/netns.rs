//! CNI_NETNS naming something that is not a network namespace, for every applet, ADD and DEL:
//! a FIFO (opening it used to block every applet forever, waiting for a writer), another
//! namespace type (`/proc/self/ns/mnt`), a procfs file that is no namespace, a device. Each run
//! has a deadline (a hang fails the test, it does not hang CI) and must answer code 8 naming
//! CNI_NETNS, or succeed where the applet has no business in the container (IPAM, portmap,
//! firewall; DEL of dhcp, which only releases a lease by its key); the node is unchanged.

mod common;
use common::bounded::exec_within;
use common::lab::unique_n;
use common::{NetNs, Output, Sandbox, applets, require_root};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Far more than any of these runs needs (milliseconds), far less than CI's patience.
const DEADLINE: Duration = Duration::from_secs(20);

/// What an applet must answer for a CNI_NETNS that is not a network namespace.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    /// Code 8, the message naming CNI_NETNS and what the path is.
    NotNetns,
    /// Success: the verb does not use the container's namespace.
    Ok,
}

/// The hostile paths, with what the error says they are.
fn bad_paths(sb: &Sandbox) -> Vec<(String, &'static str)> {
    let fifo = sb.path("ns-fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    vec![
        (fifo.display().to_string(), "a FIFO"),
        ("/proc/self/ns/mnt".into(), "a mnt namespace"),
        ("/proc/self/status".into(), "a procfs file"),
        ("/dev/null".into(), "a character device"),
    ]
}

/// A config for `applet` that gets as far as the container namespace: masters and devices
/// exist in the node, chained applets have a prevResult naming the interface in `netns`.
fn conf(applet: &str, n: u8, sb: &Sandbox, netns: &str) -> (Value, Want, Want) {
    use Want::{NotNetns, Ok};
    let ipam = json!({"type": "host-local", "ranges": [[{"subnet": format!("10.{n}.0.0/24")}]],
                      "dataDir": sb.path("ipam")});
    let prev = json!({"cniVersion": "1.0.0",
                      "interfaces": [{"name": "eth0", "sandbox": netns}],
                      "ips": [{"address": format!("10.{n}.0.5/24"), "interface": 0}]});
    let (body, add, del) = match applet {
        "bridge" => (
            json!({"bridge": format!("nsbr{n}"), "ipam": ipam}),
            NotNetns,
            NotNetns,
        ),
        "host-local" => (json!({"ipam": ipam}), Ok, Ok),
        "static" => (
            json!({"ipam": {"type": "static",
                            "addresses": [{"address": format!("10.{n}.1.5/24")}]}}),
            Ok,
            Ok,
        ),
        "vlan" => (
            json!({"master": "up0", "vlanId": 5, "ipam": ipam}),
            NotNetns,
            NotNetns,
        ),
        "loopback" => (json!({}), NotNetns, NotNetns),
        "portmap" => (json!({"prevResult": prev}), Ok, Ok),
        "bandwidth" => (
            json!({"ingressRate": 8000, "ingressBurst": 8000, "prevResult": prev}),
            NotNetns,
            Ok,
        ),
        "firewall" => (json!({"prevResult": prev}), Ok, Ok),
        // DEL puts back saved sysctls where it can and gives up quietly where it cannot.
        "tuning" => (
            json!({"sysctl": {"net.ipv4.conf.eth0.forwarding": "1"}, "prevResult": prev}),
            NotNetns,
            Ok,
        ),
        "ptp" => (json!({"ipam": ipam}), NotNetns, NotNetns),
        "macvlan" => (json!({"master": "up0", "ipam": ipam}), NotNetns, NotNetns),
        "ipvlan" => (json!({"master": "up0", "ipam": ipam}), NotNetns, NotNetns),
        "flannel" => {
            let env = sb.path("subnet.env");
            std::fs::write(
                &env,
                format!(
                    "FLANNEL_NETWORK=10.{n}.0.0/16\nFLANNEL_SUBNET=10.{n}.3.1/24\n\
                     FLANNEL_MTU=1450\nFLANNEL_IPMASQ=false\n"
                ),
            )
            .unwrap();
            (
                json!({"subnetFile": env, "dataDir": sb.path("flannel"),
                       "delegate": {"bridge": format!("nsfl{n}")}}),
                NotNetns,
                // The refused ADD stored no delegate config: DEL has nothing to hand on.
                Ok,
            )
        }
        "host-device" => (json!({"device": "hdev0"}), NotNetns, NotNetns),
        "dummy" => (json!({"ipam": ipam}), NotNetns, NotNetns),
        "tap" => (json!({"ipam": ipam}), NotNetns, NotNetns),
        "sbr" => (json!({"prevResult": prev}), NotNetns, NotNetns),
        "vrf" => (
            json!({"vrfname": "vrf0", "prevResult": prev}),
            NotNetns,
            NotNetns,
        ),
        // ADD hands the namespace to the daemon and checks it first; DEL releases by key and
        // succeeds with no daemon listening.
        "dhcp" => (
            json!({"ipam": {"type": "dhcp", "daemonSocketPath": sb.path("none.sock")}}),
            NotNetns,
            Ok,
        ),
        a => panic!("no config for applet {a}: add one here"),
    };
    let mut c = body;
    c["cniVersion"] = json!("1.0.0");
    c["name"] = json!(format!("nsnet{n}"));
    c["type"] = json!(applet);
    (c, add, del)
}

/// The node's state that a failed or no-op run must leave as it was.
fn node_state(node: &NetNs, sb: &Sandbox) -> String {
    let mut s = String::new();
    for cmd in [
        &["ip", "-o", "link"][..],
        &["ip", "-o", "addr"],
        &["ip", "route", "show", "table", "all"],
        &["ip", "rule"],
    ] {
        s += &node.sh(cmd);
    }
    // Reservations (not host-local's bookkeeping: lock, last_reserved_ip, `.cnibox`). Not
    // flannel's dataDir: it keeps the delegate's config while the delegate's DEL fails, for the
    // DEL the runtime retries.
    s += &files(&sb.path("ipam"));
    s
}

/// The files under `dir`, recursively, but for host-local's bookkeeping.
fn files(dir: &Path) -> String {
    let mut s = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let (p, name) = (e.path(), e.file_name().to_string_lossy().into_owned());
        if name == ".cnibox" {
            continue;
        }
        if p.is_dir() {
            s += &files(&p);
        } else if name != "lock" && !name.starts_with("last_reserved_ip") {
            s += &format!("file {}\n", p.display());
        }
    }
    s
}

fn run(sb: &Sandbox, node: &NetNs, applet: &str, verb: &str, netns: &str, c: &Value) -> Output {
    let prog = sb.bin.join(applet).display().to_string();
    let path = sb.bin.display().to_string();
    let state = sb.state_dir();
    let vars = [
        ("CNI_COMMAND", verb),
        ("CNI_CONTAINERID", "ns-test-1"),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", path.as_str()),
        ("CNIBOX_STATE_DIR", state.as_str()),
    ];
    exec_within(
        Path::new("ip"),
        &["netns", "exec", &node.name, &prog],
        &vars,
        &c.to_string(),
        DEADLINE,
    )
    .unwrap_or_else(|hung| panic!("{applet} {verb} with CNI_NETNS={netns:?} hangs: {hung}"))
}

#[test]
fn every_applet_refuses_a_netns_that_is_not_one_without_hanging() {
    if !require_root("netns every_applet_refuses_a_netns_that_is_not_one") {
        return;
    }
    let sb = Sandbox::new("netns-bad");
    let n = unique_n();
    let node = NetNs::create();
    node.sh(&[
        "ip", "link", "add", "up0", "type", "veth", "peer", "name", "up1",
    ]);
    node.sh(&[
        "ip", "link", "add", "hdev0", "type", "veth", "peer", "name", "hdev1",
    ]);
    let paths = bad_paths(&sb);
    let mut failures = Vec::new();
    for &applet in applets() {
        for (netns, what) in &paths {
            let before = node_state(&node, &sb);
            let (c, add, del) = conf(applet, n, &sb, netns);
            let want_msg = format!("CNI_NETNS {netns:?} is not a network namespace (it is {what})");
            for (verb, want) in [("ADD", add), ("DEL", del)] {
                let out = run(&sb, &node, applet, verb, netns, &c);
                let ok = match want {
                    Want::Ok => out.status_ok,
                    Want::NotNetns => {
                        !out.status_ok
                            && out.err_code() == Some(8)
                            // flannel says which step failed: "failed to delegate add: …".
                            && out.json["msg"]
                                .as_str()
                                .is_some_and(|m| m.ends_with(&want_msg))
                    }
                };
                if !ok {
                    failures.push(format!("{applet} {verb} {netns}: want {want:?}: {out:?}"));
                }
            }
            let after = node_state(&node, &sb);
            if after != before {
                failures.push(format!(
                    "{applet} with {netns}: node changed\n--- before ---\n{before}\n--- after ---\n{after}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
