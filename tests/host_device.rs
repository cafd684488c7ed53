//! host-device in a throwaway node namespace: one end of a veth pair (`hdN`, fixed MAC, up)
//! stands in for the NIC, its peer stays in the node as `eth0` with 10.N.0.1/24 — so the node
//! already has an interface called CNI_IFNAME. ADD by every selector (device, hwaddr, and
//! kernelpath, pciBusID and runtimeConfig.deviceID through a fake sysfs bind-mounted over /sys
//! for the plugin alone), traffic through the moved device, CHECK passing then failing, DEL
//! putting it back under its name, DPDK devices left alone, failed ADDs undone, DEL tolerating a
//! missing netns or device, and the Go plugin side by side (same results, each DEL undoing the
//! other's ADD). The common case makes no temporary namespace (strace: no unshare); a container
//! that already has a link of the device's host name makes one, a device named like CNI_IFNAME
//! does not; a DEL whose name is taken on the host again leaves the device as it was.

mod common;
use common::env::env_for;
use common::lab::unique_n;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

struct Node {
    node: NetNs,
    sb: Sandbox,
    n: u8,
    /// The device the tests move: `hdN`.
    dev: String,
    mac: String,
    /// A fake sysfs tree (see [`fake_sysfs`]).
    sys: PathBuf,
}

fn node(tag: &str) -> Node {
    let n = unique_n();
    let sb = Sandbox::new(tag);
    let node = NetNs::create();
    let dev = format!("hd{n}");
    let mac = format!("02:00:00:00:{n:02x}:01");
    node.sh(&["ip", "link", "set", "lo", "up"]);
    node.sh(&[
        "ip", "link", "add", &dev, "address", &mac, "type", "veth", "peer", "name", "eth0",
    ]);
    node.sh(&["ip", "link", "set", &dev, "up"]);
    node.sh(&["ip", "link", "set", "eth0", "up"]);
    node.sh(&[
        "ip",
        "addr",
        "add",
        &format!("10.{n}.0.1/24"),
        "dev",
        "eth0",
    ]);
    let sys = sb.path("sys");
    fake_sysfs(&sys, &dev);
    Node {
        node,
        sb,
        n,
        dev,
        mac,
        sys,
    }
}

/// A sysfs look-alike for `dev`: a kernel path, a PCI NIC, a virtio NIC, an auxiliary device
/// (all with `dev` in their `net/`), and a PCI NIC bound to vfio-pci (DPDK, no netdev).
fn fake_sysfs(root: &Path, dev: &str) {
    let mk = |p: &str| std::fs::create_dir_all(root.join(p)).unwrap();
    let ln = |target: &str, p: &str| std::os::unix::fs::symlink(target, root.join(p)).unwrap();
    mk(&format!("devices/platform/nic0/net/{dev}"));
    for d in ["ixgbe", "virtio-pci", "vfio-pci"] {
        mk(&format!("bus/pci/drivers/{d}"));
    }
    mk(&format!("bus/pci/devices/0000:00:00.1/net/{dev}"));
    ln("../../drivers/ixgbe", "bus/pci/devices/0000:00:00.1/driver");
    mk(&format!("bus/pci/devices/0000:00:00.2/virtio3/net/{dev}"));
    ln(
        "../../drivers/virtio-pci",
        "bus/pci/devices/0000:00:00.2/driver",
    );
    mk("bus/pci/devices/0000:00:00.9");
    ln(
        "../../drivers/vfio-pci",
        "bus/pci/devices/0000:00:00.9/driver",
    );
    mk(&format!("bus/auxiliary/devices/mlx5_core.sf.2/net/{dev}"));
}

impl Node {
    fn conf(&self, extra: Value) -> Value {
        let mut c = json!({
            "cniVersion": "1.0.0", "name": "hdnet", "type": "host-device", "device": self.dev,
            "ipam": {"type": "host-local", "subnet": format!("10.{}.0.0/24", self.n),
                     "dataDir": self.sb.path("ipam").display().to_string()}
        });
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    }

    fn plugin(&self, imp: Impl) -> Plugin<'_> {
        self.sb.plugin_in(imp, &self.node)
    }

    /// Run `imp` inside the node with the fake sysfs mounted over /sys (its own mount
    /// namespace, so nothing else sees it).
    fn run_fake_sys(&self, imp: Impl, cmd: &str, env: &Env, conf: &Value) -> Output {
        let pl = self.plugin(imp);
        let prog = pl.program("host-device").display().to_string();
        let path = match imp {
            Impl::Ours => self.sb.bin.display().to_string(),
            Impl::Reference => reference_dir(),
            Impl::OlderReference => OLDER_REFERENCE_DIR.to_string(),
        };
        let sys = self.sys.display().to_string();
        let vars = [
            ("CNI_COMMAND", cmd),
            ("CNI_CONTAINERID", env.container_id.as_str()),
            ("CNI_NETNS", env.netns.as_str()),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", path.as_str()),
        ];
        exec(
            Path::new("ip"),
            &[
                "netns",
                "exec",
                &self.node.name,
                "unshare",
                "-m",
                "sh",
                "-c",
                r#"mount --bind "$0" /sys && exec "$@""#,
                &sys,
                &prog,
            ],
            &vars,
            &conf.to_string(),
        )
    }

    /// Run our `cmd` in the node under strace: its output, and whether it created a network
    /// namespace (`unshare`). None for the latter when strace cannot run (a skip note).
    fn run_traced(&self, cmd: &str, env: &Env, conf: &Value) -> (Output, Option<bool>) {
        let strace = Path::new("/usr/bin/strace");
        if !strace.exists() || !exec(strace, &["-qq", "-o", "/dev/null", "true"], &[], "").status_ok
        {
            skip_note(
                "host-device namespace count",
                "strace missing or not allowed to trace",
            );
            let pl = self.plugin(Impl::Ours);
            return (pl.run("host-device", cmd, env, &conf.to_string()), None);
        }
        let prog = self.sb.bin.join("host-device").display().to_string();
        let path = self.sb.bin.display().to_string();
        let state = self.sb.state_dir();
        let log = self.sb.path("unshare.log");
        let log_s = log.display().to_string();
        let vars = [
            ("CNI_COMMAND", cmd),
            ("CNI_CONTAINERID", env.container_id.as_str()),
            ("CNI_NETNS", env.netns.as_str()),
            ("CNI_IFNAME", env.ifname.as_str()),
            ("CNI_PATH", path.as_str()),
            ("CNIBOX_STATE_DIR", state.as_str()),
        ];
        let out = exec(
            Path::new("ip"),
            &[
                "netns",
                "exec",
                &self.node.name,
                "strace",
                "-f",
                "-qq",
                "-o",
                &log_s,
                "-e",
                "trace=unshare,clone,clone3",
                "-e",
                "signal=none",
                &prog,
            ],
            &vars,
            &conf.to_string(),
        );
        // strace ran: a missing log is a failure, not "no namespace created".
        let log = std::fs::read_to_string(&log)
            .unwrap_or_else(|e| panic!("strace log {}: {e}; {out:?}", log.display()));
        (out, Some(log.contains("CLONE_NEWNET")))
    }

    /// The device is back in the node under its name, without the alias ADD gave it.
    #[track_caller]
    fn assert_home(&self) {
        let l = self.node.sh(&["ip", "-d", "link", "show", &self.dev]);
        assert!(l.contains(&self.mac), "{l}");
        assert!(!l.contains("alias"), "alias left: {l}");
    }

    /// host-local's reservations of `hdnet` (its directory must exist: see
    /// [`common::family::reservations`]).
    #[track_caller]
    fn reservations(&self) -> usize {
        common::family::reservations(&self.sb.path("ipam/hdnet"))
    }
}

/// The container holds the device as eth0, its host name in the alias, up.
#[track_caller]
fn assert_moved_in(nd: &Node, cont: &NetNs) {
    let l = cont.sh(&["ip", "-d", "link", "show", "eth0"]);
    assert!(l.contains(&nd.mac), "{l}");
    assert!(l.contains(&format!("alias {}", nd.dev)), "{l}");
    assert!(l.contains(",UP"), "{l}");
    assert!(
        !nd.node.exec(&["ip", "link", "show", &nd.dev]).status_ok,
        "{} still in the node",
        nd.dev
    );
}

fn only_lo(ns: &NetNs) -> bool {
    ns.sh(&["ip", "-o", "link"]).lines().count() == 1
}

#[test]
fn device_traffic_check_del() {
    if !require_root("host-device device_traffic_check_del") {
        return;
    }
    let nd = node("hd-basic");
    let cont = NetNs::create();
    let pl = nd.plugin(Impl::Ours);
    let conf = nd.conf(json!({"dns": {"nameservers": ["10.9.9.9"]}}));
    let env = env_for(&cont, "b1");
    let r = pl.add("host-device", &env, &conf).ok().clone();
    let ip = format!("10.{}.0.2/24", nd.n);
    assert_eq!(
        r,
        json!({"cniVersion": "1.0.0",
            "interfaces": [{"name": "eth0", "mac": nd.mac, "sandbox": cont.path()}],
            "ips": [{"interface": 0, "address": ip, "gateway": format!("10.{}.0.1", nd.n)}],
            "dns": {"nameservers": ["10.9.9.9"]}})
    );
    assert_moved_in(&nd, &cont);
    assert!(cont.sh(&["ip", "addr", "show", "eth0"]).contains(&ip));
    cont.sh(&["ping", "-c", "1", "-W", "5", &format!("10.{}.0.1", nd.n)]);
    assert_eq!(nd.reservations(), 1);

    let checked = with_prev(&conf, &r);
    assert!(pl.check("host-device", &env, &checked).status_ok);
    cont.sh(&["ip", "addr", "del", &ip, "dev", "eth0"]);
    let msg = pl.check("host-device", &env, &checked).err(999);
    assert!(msg.contains(&ip), "{msg}");

    pl.del("host-device", &env, &conf).ok();
    nd.assert_home();
    assert!(only_lo(&cont), "{}", cont.sh(&["ip", "link"]));
    assert_eq!(nd.reservations(), 0);
    pl.del("host-device", &env, &conf).ok();
    nd.assert_home();
}

/// Every selector finds the device; without `ipam` the link is just moved and up.
#[test]
fn selectors() {
    if !require_root("host-device selectors") {
        return;
    }
    let nd = node("hd-sel");
    let cont = NetNs::create();
    let env = env_for(&cont, "s1");
    let cases = [
        json!({"device": null, "hwaddr": nd.mac.to_uppercase()}),
        json!({"device": null, "kernelpath": "/sys/devices/platform/nic0"}),
        json!({"device": null, "kernelpath": "/sys/devices/platform/nic0/"}),
        json!({"device": null, "pciBusID": "0000:00:00.1"}),
        json!({"device": null, "pciBusID": "0000:00:00.2"}),
        json!({"device": null, "runtimeConfig": {"deviceID": "0000:00:00.1"}}),
        json!({"device": null, "runtimeConfig": {"deviceID": "mlx5_core.sf.2"}}),
        json!({"device": "nosuch", "runtimeConfig": {"deviceID": "0000:00:00.1"}, "ipam": null}),
    ];
    for (i, extra) in cases.iter().enumerate() {
        let mut conf = nd.conf(extra.clone());
        if i == 7 {
            // `device` wins over deviceID: a missing device is an error, nothing moves.
            let out = nd.run_fake_sys(Impl::Ours, "ADD", &env, &conf);
            assert!(out.err(999).contains("nosuch"), "{out:?}");
            nd.assert_home();
            continue;
        }
        if i % 2 == 1 {
            conf.as_object_mut().unwrap().remove("ipam");
        }
        let r = nd.run_fake_sys(Impl::Ours, "ADD", &env, &conf).ok().clone();
        assert_eq!(nd.reservations(), usize::from(i % 2 == 0), "{extra}");
        assert_eq!(r["interfaces"][0]["mac"], nd.mac.as_str(), "{extra}: {r}");
        assert_moved_in(&nd, &cont);
        assert_eq!(r.get("ips").is_some(), i % 2 == 0, "{extra}: {r}");
        let checked = with_prev(&conf, &r);
        nd.run_fake_sys(Impl::Ours, "CHECK", &env, &checked).ok();
        nd.run_fake_sys(Impl::Ours, "DEL", &env, &conf).ok();
        nd.assert_home();
        assert!(only_lo(&cont), "{extra}");
        assert_eq!(nd.reservations(), 0, "{extra}");
    }
    // An unknown deviceID, a PCI device without a netdev.
    let out = nd.run_fake_sys(
        Impl::Ours,
        "ADD",
        &env,
        &nd.conf(json!({"runtimeConfig": {"deviceID": "0000:99:00.0"}})),
    );
    assert!(out.err(999).contains("0000:99:00.0"), "{out:?}");
    let out = nd.run_fake_sys(
        Impl::Ours,
        "ADD",
        &env,
        &nd.conf(json!({"device": null, "pciBusID": "0000:00:00.7"})),
    );
    assert!(out.err(999).contains("0000:00:00.7"), "{out:?}");
    nd.assert_home();
    assert_eq!(nd.reservations(), 0);
}

/// A PCI device bound to vfio-pci is not moved: the result names CNI_IFNAME (and the IPAM
/// addresses), CHECK and DEL succeed, the node keeps its devices.
#[test]
fn dpdk_device_is_not_moved() {
    if !require_root("host-device dpdk_device_is_not_moved") {
        return;
    }
    let nd = node("hd-dpdk");
    let cont = NetNs::create();
    let env = env_for(&cont, "d1");
    let mut results = Vec::new();
    let imps: &[Impl] = if reference_available("host-device") {
        &[Impl::Ours, Impl::Reference]
    } else {
        &[Impl::Ours]
    };
    for &imp in imps {
        for ipam in [true, false] {
            let mut conf = nd.conf(json!({"device": null, "pciBusID": "0000:00:00.9",
                "ipam": {"type": "static", "addresses": [{"address": "10.1.2.3/24"}]}}));
            if !ipam {
                conf.as_object_mut().unwrap().remove("ipam");
            }
            let r = nd.run_fake_sys(imp, "ADD", &env, &conf).ok().clone();
            // v1.2.0 and later name the interface (the reference, v1.1.1, does not).
            if imp == Impl::Ours {
                assert_eq!(
                    r["interfaces"],
                    json!([{"name": "eth0", "sandbox": cont.path()}]),
                    "{r}"
                );
                // The IPAM addresses are reported, not applied anywhere.
                let want = if ipam {
                    json!([{"interface": 0, "address": "10.1.2.3/24"}])
                } else {
                    Value::Null
                };
                assert_eq!(r["ips"], want, "{r}");
            }
            assert!(only_lo(&cont));
            nd.run_fake_sys(imp, "CHECK", &env, &with_prev(&conf, &r))
                .ok();
            nd.run_fake_sys(imp, "DEL", &env, &conf).ok();
            nd.assert_home();
            results.push(r);
        }
    }
    if results.len() == 4 {
        // The reference reports the same addresses.
        assert_eq!(results[0]["ips"], results[2]["ips"]);
    }
}

/// A failure after the move (an IPAM plugin that does not exist) puts the device back, up as
/// it was; a taken CNI_IFNAME or a missing device changes nothing.
#[test]
fn failed_add_is_undone() {
    if !require_root("host-device failed_add_is_undone") {
        return;
    }
    let nd = node("hd-undo");
    let cont = NetNs::create();
    let env = env_for(&cont, "f1");
    let pl = nd.plugin(Impl::Ours);
    let mut conf = nd.conf(json!({}));
    conf["ipam"] = json!({"type": "no-such-ipam"});
    let out = pl.add("host-device", &env, &conf);
    let msg = out.err(7);
    assert!(
        msg.contains("failed to find plugin \"no-such-ipam\""),
        "{msg}"
    );
    nd.assert_home();
    let l = nd.node.sh(&["ip", "link", "show", &nd.dev]);
    assert!(l.contains(",UP"), "not up again: {l}");
    assert!(only_lo(&cont));

    // IPAM succeeded but the addresses cannot be applied (the same address twice): the
    // reservation goes too.
    let ip = format!("10.{}.0.5/24", nd.n);
    let conf = nd.conf(json!({"ipam": {"type": "static",
        "addresses": [{"address": ip}, {"address": ip}]}}));
    let out = pl.add("host-device", &env, &conf);
    let msg = out.err(999);
    assert!(msg.contains(&ip), "{msg}");
    nd.assert_home();
    assert!(only_lo(&cont));

    // host-local allocated, then a route to an unreachable gateway fails: the reservation is
    // released, the device home (and the directory the count reads exists: host-local made it).
    let conf = nd.conf(json!({"ipam": {"type": "host-local",
        "subnet": format!("10.{}.0.0/24", nd.n),
        "routes": [{"dst": "198.51.100.0/24", "gw": "192.0.2.1"}],
        "dataDir": nd.sb.path("ipam").display().to_string()}}));
    let msg = pl.add("host-device", &env, &conf).err(999);
    assert!(msg.contains("198.51.100.0/24"), "{msg}");
    assert_eq!(nd.reservations(), 0, "reservation left");
    nd.assert_home();
    assert!(only_lo(&cont));

    cont.sh(&[
        "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "x0",
    ]);
    let out = pl.add("host-device", &env, &nd.conf(json!({})));
    assert!(out.err(999).contains("already exists"), "{out:?}");
    nd.assert_home();
    cont.sh(&["ip", "link", "del", "eth0"]);

    for extra in [
        json!({"device": "nosuch"}),
        json!({"device": null, "hwaddr": "02:00:00:00:00:99"}),
    ] {
        let out = pl.add("host-device", &env, &nd.conf(extra.clone()));
        assert!(
            out.err(999).contains("failed to find host device"),
            "{extra}: {out:?}"
        );
    }
    nd.assert_home();
    assert!(only_lo(&cont));
    assert_eq!(nd.reservations(), 0);

    // A device the kernel will not move (a bridge is local to its namespace): the move fails,
    // the bridge stays as it was.
    let br = format!("hdbr{}", nd.n);
    nd.node.sh(&["ip", "link", "add", &br, "type", "bridge"]);
    nd.node.sh(&["ip", "link", "set", &br, "up"]);
    let out = pl.add("host-device", &env, &nd.conf(json!({"device": br})));
    assert!(
        out.err(999).contains(&format!("failed to move {br:?}")),
        "{out:?}"
    );
    let l = nd.node.sh(&["ip", "-d", "link", "show", &br]);
    assert!(l.contains(",UP") && !l.contains("alias"), "{l}");
    assert!(only_lo(&cont));
    assert_eq!(nd.reservations(), 0);
}

/// DEL succeeds when the container netns is gone (the veth went with it), when CNI_NETNS is
/// unset (the reservation is still released) and when the device is not there.
#[test]
fn del_tolerates_missing_netns_and_device() {
    if !require_root("host-device del_tolerates_missing_netns_and_device") {
        return;
    }
    let nd = node("hd-del");
    let pl = nd.plugin(Impl::Ours);
    let conf = nd.conf(json!({}));
    let cont = NetNs::create();
    let env = env_for(&cont, "m1");
    pl.add("host-device", &env, &conf).ok();
    assert_eq!(nd.reservations(), 1);
    pl.del(
        "host-device",
        &Env {
            netns: String::new(),
            ..env.clone()
        },
        &conf,
    )
    .ok();
    assert_eq!(
        nd.reservations(),
        0,
        "DEL without netns releases the addresses"
    );
    drop(cont);
    pl.del("host-device", &env, &conf).ok();
    let cont = NetNs::create();
    pl.del("host-device", &env_for(&cont, "m2"), &conf).ok();
}

/// The Go plugin (v1.1.1) prints the same results for every version it has, and each side's
/// CHECK and DEL accept the other's ADD.
#[test]
fn matches_reference() {
    if !require_root("host-device matches_reference") || !reference_available("host-device") {
        return;
    }
    let nd = node("hd-ref");
    let cont = NetNs::create();
    let env = env_for(&cont, "r1");
    let ours = nd.plugin(Impl::Ours);
    let theirs = nd.plugin(Impl::Reference);
    for v in ["0.2.0", "0.3.1", "0.4.0", "1.0.0"] {
        for ipam in [true, false] {
            if !ipam && v == "0.2.0" {
                continue;
            }
            let mut conf = nd.conf(json!({"cniVersion": v, "dns": {"domain": "example"},
                "ipam": {"type": "static",
                    "addresses": [{"address": format!("10.{}.0.7/24", nd.n),
                                   "gateway": format!("10.{}.0.1", nd.n)}],
                    "routes": [{"dst": "10.200.0.0/16", "gw": format!("10.{}.0.1", nd.n)}]}}));
            if !ipam {
                conf.as_object_mut().unwrap().remove("ipam");
            }
            let a = ours.add("host-device", &env, &conf).ok().clone();
            assert_moved_in(&nd, &cont);
            if v == "0.4.0" || v == "1.0.0" {
                theirs
                    .check("host-device", &env, &with_prev(&conf, &a))
                    .ok();
            }
            theirs.del("host-device", &env, &conf).ok();
            // The Go plugin before v1.2 leaves the alias: only the name and MAC matter here.
            let l = nd.node.sh(&["ip", "link", "show", &nd.dev]);
            assert!(l.contains(&nd.mac) && only_lo(&cont), "{v}: {l}");
            nd.node.sh(&["ip", "link", "set", &nd.dev, "alias", ""]);

            let b = theirs.add("host-device", &env, &conf).ok().clone();
            assert_moved_in(&nd, &cont);
            if v == "0.4.0" || v == "1.0.0" {
                ours.check("host-device", &env, &with_prev(&conf, &b)).ok();
            }
            ours.del("host-device", &env, &conf).ok();
            nd.assert_home();
            assert!(only_lo(&cont));
            assert_eq!(normalize(&a), normalize(&b), "{v} ipam {ipam}");
        }
    }
}

/// `ns` has `name`, a veth whose peer is `peer`, not the moved device.
#[track_caller]
fn assert_own_veth(ns: &NetNs, name: &str, peer: &str) {
    let l = ns.sh(&["ip", "-o", "link", "show", name]);
    assert!(l.contains(&format!("{name}@{peer}")), "{l}");
}

/// The common case takes one namespace move each way and no temporary namespace; a container
/// that has a link of the device's host name makes ADD (and DEL) go through one, and the
/// container's own link is left alone. A link of that name made in the container after ADD
/// does the same for DEL. (The Go plugin v1.1.1 fails the first: its move collides.)
#[test]
fn host_name_taken_in_container() {
    if !require_root("host-device host_name_taken_in_container") {
        return;
    }
    let nd = node("hd-taken");
    let cont = NetNs::create();
    let env = env_for(&cont, "t1");
    let conf = nd.conf(json!({}));
    let tmp_ns = |out: &Output, made: Option<bool>, want: bool, what: &str| {
        assert!(out.status_ok, "{what}: {out:?}");
        if let Some(made) = made {
            assert_eq!(made, want, "{what}: temporary namespace");
        }
    };

    let (out, made) = nd.run_traced("ADD", &env, &conf);
    tmp_ns(&out, made, false, "plain ADD");
    assert_moved_in(&nd, &cont);
    let (out, made) = nd.run_traced("DEL", &env, &conf);
    tmp_ns(&out, made, false, "plain DEL");
    nd.assert_home();
    assert!(only_lo(&cont));

    // The container has its own hdN before ADD.
    let peer = format!("{}p", nd.dev);
    cont.sh(&[
        "ip", "link", "add", &nd.dev, "type", "veth", "peer", "name", &peer,
    ]);
    let (out, made) = nd.run_traced("ADD", &env, &conf);
    tmp_ns(&out, made, true, "ADD, host name taken");
    assert_eq!(out.json["interfaces"][0]["mac"], nd.mac.as_str());
    assert_moved_in(&nd, &cont);
    assert_own_veth(&cont, &nd.dev, &peer);
    assert_eq!(nd.reservations(), 1);
    let (out, made) = nd.run_traced("DEL", &env, &conf);
    tmp_ns(&out, made, true, "DEL, host name taken");
    nd.assert_home();
    assert_own_veth(&cont, &nd.dev, &peer);
    assert!(cont.exec(&["ip", "link", "show", "eth0"]).stdout.is_empty());
    assert_eq!(nd.reservations(), 0);

    // ... and only after ADD.
    cont.sh(&["ip", "link", "del", &nd.dev]);
    let (out, made) = nd.run_traced("ADD", &env, &conf);
    tmp_ns(&out, made, false, "ADD again");
    cont.sh(&[
        "ip", "link", "add", &nd.dev, "type", "veth", "peer", "name", &peer,
    ]);
    let (out, made) = nd.run_traced("DEL", &env, &conf);
    tmp_ns(&out, made, true, "DEL, host name taken after ADD");
    nd.assert_home();
    assert_own_veth(&cont, &nd.dev, &peer);
    assert_eq!(nd.reservations(), 0);
}

/// A device whose host name is CNI_IFNAME keeps it (no rename needed); both sides' DEL take
/// back both sides' ADD.
#[test]
fn device_named_like_ifname() {
    if !require_root("host-device device_named_like_ifname") {
        return;
    }
    let nd = node("hd-same");
    let cont = NetNs::create();
    let env = Env {
        ifname: nd.dev.clone(),
        ..env_for(&cont, "n1")
    };
    let conf = nd.conf(json!({"ipam": null}));
    // Each Go reference ADDs for ours to DEL and the other way round (v1.9.1 and v1.1.1).
    let mut sides = vec![(Impl::Ours, Impl::Ours)];
    for go in go_references("host-device") {
        sides.extend([(Impl::Ours, go), (go, Impl::Ours)]);
    }
    for &(a, d) in &sides {
        // Ours, traced: no rename, so no temporary namespace either way.
        let r = if a == Impl::Ours {
            let (out, made) = nd.run_traced("ADD", &env, &conf);
            assert!(made != Some(true) && out.status_ok, "{out:?}");
            out.json
        } else {
            nd.plugin(a).add("host-device", &env, &conf).ok().clone()
        };
        assert_eq!(r["interfaces"][0]["name"], nd.dev.as_str(), "{r}");
        assert_eq!(r["interfaces"][0]["mac"], nd.mac.as_str(), "{r}");
        let l = cont.sh(&["ip", "-d", "link", "show", &nd.dev]);
        assert!(l.contains(&nd.mac) && l.contains(",UP"), "{a:?}: {l}");
        assert!(l.contains(&format!("alias {}", nd.dev)), "{a:?}: {l}");
        if d == Impl::Ours {
            let (out, made) = nd.run_traced("DEL", &env, &conf);
            assert!(made != Some(true) && out.status_ok, "{out:?}");
        } else {
            nd.plugin(d).del("host-device", &env, &conf).ok();
        }
        let l = nd.node.sh(&["ip", "link", "show", &nd.dev]);
        assert!(l.contains(&nd.mac) && only_lo(&cont), "{a:?}/{d:?}: {l}");
        // The Go plugin before v1.2 leaves the alias.
        nd.node.sh(&["ip", "link", "set", &nd.dev, "alias", ""]);
        nd.assert_home();
    }
}

/// DEL when the node has a link of the device's name again: the move out fails and the device
/// stays in the container as it was (name, alias, up); a DEL after that link went succeeds.
#[test]
fn del_with_host_name_taken_on_host() {
    if !require_root("host-device del_with_host_name_taken_on_host") {
        return;
    }
    let nd = node("hd-back");
    let cont = NetNs::create();
    let env = env_for(&cont, "h1");
    let conf = nd.conf(json!({}));
    let pl = nd.plugin(Impl::Ours);
    pl.add("host-device", &env, &conf).ok();
    assert_eq!(nd.reservations(), 1);
    let peer = format!("{}q", nd.dev);
    nd.node.sh(&[
        "ip", "link", "add", &nd.dev, "type", "veth", "peer", "name", &peer,
    ]);
    let msg = pl.del("host-device", &env, &conf).err(999);
    assert!(
        msg.contains(&format!("failed to move \"eth0\" back as \"{}\"", nd.dev)),
        "{msg}"
    );
    let l = cont.sh(&["ip", "-d", "link", "show", "eth0"]);
    assert!(l.contains(&nd.mac) && l.contains(",UP"), "{l}");
    assert!(l.contains(&format!("alias {}", nd.dev)), "{l}");
    assert_own_veth(&nd.node, &nd.dev, &peer);
    nd.node.sh(&["ip", "link", "del", &nd.dev]);
    pl.del("host-device", &env, &conf).ok();
    nd.assert_home();
    assert!(only_lo(&cont));
    assert_eq!(nd.reservations(), 0);
}

/// Where cnibox records what ADD moved in (`<state>/host-device/<network>`).
fn record_dir(nd: &Node) -> PathBuf {
    Path::new(&nd.sb.state_dir()).join("host-device/hdnet")
}

/// The index of `name` in `ns`.
fn index_of(ns: &NetNs, name: &str) -> String {
    let l = ns.sh(&["ip", "-o", "link", "show", name]);
    l.split(':').next().unwrap().trim().to_string()
}

/// The names of the node's links.
fn node_links(nd: &Node) -> Vec<String> {
    nd.node
        .sh(&["ip", "-o", "link"])
        .lines()
        .map(|l| {
            l.split(':')
                .nth(1)
                .unwrap()
                .trim()
                .split('@')
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// A veth the container made, called CNI_IFNAME and aliased like a host interface, never goes
/// to the host, and DEL still succeeds (issue 24): with no record of an ADD, with a record of a
/// device the container renamed, and with a record whose device the container hid in a
/// namespace of its own before making a veth with the device's very index and alias.
#[test]
fn del_never_moves_a_link_the_container_made() {
    if !require_root("host-device del_never_moves_a_link_the_container_made") {
        return;
    }
    let nd = node("hd-inject");
    let cont = NetNs::create();
    let env = env_for(&cont, "i1");
    let conf = nd.conf(json!({"ipam": null}));
    let pl = nd.plugin(Impl::Ours);
    let links = node_links(&nd);
    let fake = |alias: &str, index: Option<&str>| {
        let mut cmd = vec!["ip", "link", "add", "eth0"];
        if let Some(i) = index {
            cmd.extend(["index", i]);
        }
        cmd.extend(["type", "veth", "peer", "name", "x0"]);
        cont.sh(&cmd);
        cont.sh(&["ip", "link", "set", "eth0", "alias", alias]);
        cont.sh(&["ip", "link", "set", "eth0", "up"]);
    };
    let assert_fake_stayed = |what: &str| {
        assert_eq!(node_links(&nd), links, "{what}: the node's links changed");
        assert_own_veth(&cont, "eth0", "x0");
        assert!(!record_dir(&nd).exists(), "{what}: record left");
    };

    // Nothing moved in: the container's own eth0.
    fake("injected0", None);
    pl.del("host-device", &env, &conf).ok();
    assert_fake_stayed("no ADD");
    cont.sh(&["ip", "link", "del", "eth0"]);

    // ADD, then the container renames the device and makes its own eth0: the device comes
    // back (found by its recorded index), the fake stays.
    pl.add("host-device", &env, &conf).ok();
    assert!(record_dir(&nd).is_dir(), "ADD wrote no record");
    cont.sh(&["ip", "link", "set", "eth0", "down"]);
    cont.sh(&["ip", "link", "set", "eth0", "name", "real0"]);
    fake("injected0", None);
    pl.del("host-device", &env, &conf).ok();
    nd.assert_home();
    let mut back = links.clone();
    back.push(nd.dev.clone());
    let mut now = node_links(&nd);
    now.sort();
    back.sort();
    back.dedup();
    assert_eq!(now, back, "the node's links");
    assert_own_veth(&cont, "eth0", "x0");
    assert!(!record_dir(&nd).exists(), "record left");
    cont.sh(&["ip", "link", "del", "eth0"]);

    // ADD, then the device goes to a namespace of the container's and a veth takes its index,
    // name and alias: nothing moves, DEL succeeds.
    pl.add("host-device", &env, &conf).ok();
    let idx = index_of(&cont, "eth0");
    let inner = NetNs::create();
    cont.sh(&["ip", "link", "set", "eth0", "netns", &inner.name]);
    fake(&nd.dev, Some(&idx));
    assert_eq!(index_of(&cont, "eth0"), idx);
    let before = node_links(&nd);
    pl.del("host-device", &env, &conf).ok();
    assert_eq!(node_links(&nd), before, "the fake reached the node");
    assert_own_veth(&cont, "eth0", "x0");
    assert!(!record_dir(&nd).exists(), "record left");
    // Put the device home by hand.
    inner.sh(&["ip", "link", "set", "eth0", "name", &nd.dev]);
    inner.sh(&["ip", "link", "set", &nd.dev, "netns", &nd.node.name]);
}

/// An alias cleared or naming a host interface never makes DEL fail: with cnibox's record the
/// alias is not read; without one (the Go plugin's ADD, or cnibox's with its record removed) the
/// device comes back as `dev<index>`, the kernel's own name for a device whose name is taken.
#[test]
fn del_survives_a_rewritten_alias() {
    if !require_root("host-device del_survives_a_rewritten_alias") {
        return;
    }
    let nd = node("hd-alias");
    let cont = NetNs::create();
    let env = env_for(&cont, "a1");
    let conf = nd.conf(json!({"ipam": null}));
    let ours = nd.plugin(Impl::Ours);
    let mut adders = vec![
        ("ours", Impl::Ours, true),
        ("ours, record lost", Impl::Ours, false),
    ];
    if reference_available("host-device") {
        adders.push(("go", Impl::Reference, false));
    }
    for (who, imp, recorded) in adders {
        for alias in ["", "eth0", "lo", "no such name with spaces"] {
            let what = format!("ADD by {who}, alias {alias:?}");
            nd.plugin(imp).add("host-device", &env, &conf).ok();
            let idx = index_of(&cont, "eth0");
            cont.sh(&["ip", "link", "set", "eth0", "alias", alias]);
            if !recorded {
                let _ = std::fs::remove_dir_all(record_dir(&nd));
            }
            let out = ours.del("host-device", &env, &conf);
            assert!(out.status_ok, "{what}: {out:?}");
            assert!(only_lo(&cont), "{what}");
            if !recorded {
                let name = format!("dev{idx}");
                let l = nd.node.sh(&["ip", "link", "show", &name]);
                assert!(l.contains(&nd.mac), "{what}: {l}");
                nd.node.sh(&["ip", "link", "set", &name, "name", &nd.dev]);
                nd.node.sh(&["ip", "link", "set", &nd.dev, "alias", ""]);
            }
            nd.assert_home();
            // The node's own eth0 is untouched.
            let e = nd.node.sh(&["ip", "addr", "show", "eth0"]);
            assert!(e.contains(&format!("10.{}.0.1/24", nd.n)), "{what}: {e}");
            assert!(!record_dir(&nd).exists(), "{what}: record left");
        }
    }
}

/// GC drops the record of an attachment the runtime no longer lists and keeps the others'; a
/// DEL after that still brings the device home (checked as the Go plugin's ADD would be).
#[test]
fn gc_drops_records_of_gone_attachments() {
    if !require_root("host-device gc_drops_records_of_gone_attachments") {
        return;
    }
    let nd = node("hd-gc");
    let cont = NetNs::create();
    let env = env_for(&cont, "g1");
    let conf = nd.conf(json!({"cniVersion": "1.1.0"}));
    let pl = nd.plugin(Impl::Ours);
    pl.add("host-device", &env, &conf).ok();
    assert_eq!(nd.reservations(), 1);
    let record = record_dir(&nd).join("g1:eth0");
    assert!(record.is_file(), "no record");
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{"containerID": "g1", "ifname": "eth0"}]);
    pl.gc("host-device", &gc).ok();
    assert!(record.is_file(), "GC dropped a listed attachment's record");
    assert_eq!(nd.reservations(), 1);
    gc["cni.dev/valid-attachments"] = json!([]);
    pl.gc("host-device", &gc).ok();
    assert!(!record_dir(&nd).exists(), "record left after GC");
    assert_eq!(nd.reservations(), 0);
    pl.del("host-device", &env, &conf).ok();
    nd.assert_home();
    assert!(only_lo(&cont));
}
