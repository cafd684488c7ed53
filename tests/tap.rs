//! tap in throwaway namespaces (no reference binary: Debian's v1.1.1 has no tap): the device's
//! kind, TUNSETIFF flags, owner and group as sysfs shows them, MAC, MTU, IPAM addresses;
//! CHECK passing then failing after a change; DEL removing it and tolerating what is gone;
//! failed ADDs leaving nothing; the SELinux helper; and bridge chained onto the tap (in the
//! container) and onto a host-side interface (with traffic through the bridge).

mod common;
use common::env::env_for;
use common::*;
use serde_json::{Value, json};

// TUNSETIFF flags as /sys/class/net/<if>/tun_flags shows them (IFF_PERSIST included).
const TAP: u32 = 0x2;
const MQ: u32 = 0x100;
const PERSIST: u32 = 0x800;
const NO_PI: u32 = 0x1000;
const VNET_HDR: u32 = 0x4000;

fn conf(sb: &Sandbox, subnet: Option<&str>, extra: Value) -> Value {
    let mut c = json!({"cniVersion": "1.1.0", "name": "tapnet", "type": "tap"});
    if let Some(s) = subnet {
        c["ipam"] = json!({"type": "host-local", "subnet": s,
                           "dataDir": sb.path("ipam").display().to_string()});
    }
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A sysfs attribute of `ifname` as the container sees it (`ip netns exec` mounts its sysfs).
fn sys(ns: &NetNs, ifname: &str, attr: &str) -> String {
    ns.sh(&["cat", &format!("/sys/class/net/{ifname}/{attr}")])
        .trim()
        .to_string()
}

fn flags(ns: &NetNs, ifname: &str) -> u32 {
    let f = sys(ns, ifname, "tun_flags");
    u32::from_str_radix(f.trim_start_matches("0x"), 16).unwrap()
}

fn has_link(ns: &NetNs, ifname: &str) -> bool {
    ns.exec(&["ip", "link", "show", ifname]).status_ok
}

fn reservations(sb: &Sandbox) -> usize {
    common::family::reservations(&sb.path("ipam/tapnet"))
}

#[test]
fn add_check_del_with_ipam() {
    if !require_root("tap add_check_del_with_ipam") {
        return;
    }
    let sb = Sandbox::new("tap-basic");
    let cont = NetNs::create();
    let pl = sb.ours();
    let env = env_for(&cont, "t1").with_ifname("tap0");
    // owner and group both set: upstream's netlink path (vnet_hdr; multi_queue with pi off).
    let c = conf(
        &sb,
        Some("10.231.0.0/24"),
        json!({"mac": "02:00:00:23:10:01", "mtu": 1400, "multiQueue": true,
               "owner": 1000, "group": 100}),
    );
    let r = pl.add("tap", &env, &c).ok().clone();
    assert_eq!(r["interfaces"][0]["name"], "tap0", "{r}");
    assert_eq!(r["interfaces"][0]["mac"], "02:00:00:23:10:01", "{r}");
    assert_eq!(r["interfaces"][0]["sandbox"], cont.path(), "{r}");
    assert_eq!(r["ips"][0]["interface"], 0, "{r}");
    assert_eq!(r["ips"][0]["address"], "10.231.0.2/24", "{r}");
    let l = cont.sh(&["ip", "-d", "link", "show", "tap0"]);
    assert!(l.contains("tun type tap") && l.contains("mtu 1400"), "{l}");
    assert!(l.contains("02:00:00:23:10:01") && l.contains(",UP"), "{l}");
    assert_eq!(flags(&cont, "tap0"), TAP | VNET_HDR | MQ | NO_PI | PERSIST);
    assert_eq!(sys(&cont, "tap0", "owner"), "1000");
    assert_eq!(sys(&cont, "tap0", "group"), "100");
    assert!(
        cont.sh(&["ip", "addr", "show", "tap0"])
            .contains("10.231.0.2/24")
    );
    assert_eq!(reservations(&sb), 1);
    assert_eq!(
        cont.sh(&["sysctl", "-n", "net.ipv4.conf.tap0.arp_notify"])
            .trim(),
        "1"
    );
    let checked = with_prev(&c, &r);
    pl.check("tap", &env, &checked).ok();
    cont.sh(&["ip", "addr", "del", "10.231.0.2/24", "dev", "tap0"]);
    let msg = pl.check("tap", &env, &checked).err(999);
    assert!(msg.contains("10.231.0.2"), "{msg}");
    pl.del("tap", &env, &c).ok();
    assert!(!has_link(&cont, "tap0"));
    assert_eq!(reservations(&sb), 0, "reservation left");
    pl.del("tap", &env, &c).ok();
    // The namespace gone too: DEL still succeeds.
    let gone = env_for(&cont, "t1")
        .with_ifname("tap0")
        .with_netns("/run/netns/cnibox-tap-gone");
    pl.del("tap", &gone, &c).ok();
}

/// Without owner+group: upstream's `ip tuntap` path (pi off, no vnet_hdr), no owner/group.
/// Without IPAM: L2 only, up, no addresses. runtimeConfig.mac beats CNI_ARGS MAC beats `mac`.
#[test]
fn l2_flags_and_mac_precedence() {
    if !require_root("tap l2_flags_and_mac_precedence") {
        return;
    }
    let sb = Sandbox::new("tap-l2");
    let cont = NetNs::create();
    let pl = sb.ours();
    let c = conf(
        &sb,
        None,
        json!({"mac": "02:00:00:23:20:01", "multiQueue": true, "owner": 1000}),
    );
    let env = env_for(&cont, "t2")
        .with_ifname("vm0")
        .with_args("IgnoreUnknown=1;MAC=02:00:00:23:20:02");
    let r = pl.add("tap", &env, &c).ok().clone();
    assert!(r.get("ips").is_none(), "{r}");
    assert_eq!(r["interfaces"][0]["mac"], "02:00:00:23:20:02", "{r}");
    assert_eq!(flags(&cont, "vm0"), TAP | MQ | NO_PI | PERSIST);
    assert_eq!(sys(&cont, "vm0", "owner"), "1000");
    assert_eq!(sys(&cont, "vm0", "group"), "-1");
    assert!(cont.sh(&["ip", "link", "show", "vm0"]).contains(",UP"));
    pl.check("tap", &env, &with_prev(&c, &r)).ok();
    // A MAC change shows in CHECK.
    cont.sh(&["ip", "link", "set", "vm0", "address", "02:00:00:23:20:09"]);
    pl.check("tap", &env, &with_prev(&c, &r)).err(999);
    pl.del("tap", &env, &c).ok();

    let mut c2 = conf(&sb, None, json!({"mac": "02:00:00:23:20:01"}));
    c2["runtimeConfig"] = json!({"mac": "02:00:00:23:20:03"});
    let env2 = env_for(&cont, "t3")
        .with_ifname("vm1")
        .with_args("MAC=02:00:00:23:20:02");
    let r = pl.add("tap", &env2, &c2).ok().clone();
    assert_eq!(r["interfaces"][0]["mac"], "02:00:00:23:20:03", "{r}");
    assert_eq!(flags(&cont, "vm1"), TAP | NO_PI | PERSIST);
    assert_eq!(sys(&cont, "vm1", "owner"), "-1");
    // The 0.2.0 result cannot express an L2-only attachment: refused before anything is made.
    let mut legacy = conf(&sb, None, json!({}));
    legacy["cniVersion"] = json!("0.2.0");
    pl.add("tap", &env_for(&cont, "t4").with_ifname("vm2"), &legacy)
        .err(999);
    assert!(!has_link(&cont, "vm2"));
    // DEL leaves a link of another kind alone.
    cont.sh(&["ip", "link", "add", "vm3", "type", "bridge"]);
    pl.del("tap", &env_for(&cont, "t5").with_ifname("vm3"), &c2)
        .ok();
    assert!(has_link(&cont, "vm3"));
    pl.del("tap", &env2, &c2).ok();
    assert!(!has_link(&cont, "vm1"));
}

/// `bridge`: the tap joins a bridge that exists in the container; CHECK sees it leave.
#[test]
fn joins_container_bridge() {
    if !require_root("tap joins_container_bridge") {
        return;
    }
    let sb = Sandbox::new("tap-br");
    let cont = NetNs::create();
    let pl = sb.ours();
    cont.sh(&["ip", "link", "add", "br0", "type", "bridge"]);
    // owner+group without multiQueue (upstream's own test config): vnet_hdr, pi on.
    let c = conf(&sb, None, json!({"bridge": "br0", "owner": 0, "group": 0}));
    let env = env_for(&cont, "t6").with_ifname("tap0");
    let r = pl.add("tap", &env, &c).ok().clone();
    assert_eq!(flags(&cont, "tap0"), TAP | VNET_HDR | PERSIST);
    assert!(
        cont.sh(&["ip", "link", "show", "tap0"])
            .contains("master br0")
    );
    pl.check("tap", &env, &with_prev(&c, &r)).ok();
    cont.sh(&["ip", "link", "set", "tap0", "nomaster"]);
    let msg = pl.check("tap", &env, &with_prev(&c, &r)).err(999);
    assert!(msg.contains("br0"), "{msg}");
    pl.del("tap", &env, &c).ok();
    assert!(!has_link(&cont, "tap0") && has_link(&cont, "br0"));
}

/// A failed ADD leaves no tap and no reservation: a missing bridge, a failing IPAM plugin,
/// CNI_IFNAME already taken.
#[test]
fn failed_add_leaves_nothing() {
    if !require_root("tap failed_add_leaves_nothing") {
        return;
    }
    let sb = Sandbox::new("tap-fail");
    let cont = NetNs::create();
    let pl = sb.ours();
    let before = cont.sh(&["ip", "-o", "link"]);
    let env = env_for(&cont, "t7").with_ifname("tap0");
    let c = conf(&sb, Some("10.232.0.0/24"), json!({"bridge": "nosuchbr"}));
    let msg = pl.add("tap", &env, &c).err(999);
    assert!(msg.contains("nosuchbr"), "{msg}");
    let mut c = conf(&sb, Some("10.232.0.0/24"), json!({}));
    c["ipam"]["type"] = json!("nosuch-ipam");
    pl.add("tap", &env, &c).err(7);
    // IPAM that fails after the tap exists: an address range of one, already taken.
    let c = conf(&sb, None, json!({}));
    let mut full = c.clone();
    full["ipam"] = json!({"type": "host-local", "dataDir": sb.path("ipam").display().to_string(),
        "ranges": [[{"subnet": "10.232.1.0/30", "rangeStart": "10.232.1.2", "rangeEnd": "10.232.1.2"}]]});
    let other = NetNs::create();
    pl.add("tap", &env_for(&other, "t8").with_ifname("tap0"), &full)
        .ok();
    assert_eq!(reservations(&sb), 1);
    pl.add("tap", &env, &full).err(999);
    assert_eq!(cont.sh(&["ip", "-o", "link"]), before);
    pl.del("tap", &env_for(&other, "t8").with_ifname("tap0"), &full)
        .ok();
    assert_eq!(reservations(&sb), 0);
    cont.sh(&["ip", "link", "add", "tap0", "type", "bridge"]);
    let msg = pl.add("tap", &env, &c).err(999);
    assert!(msg.contains("already exists"), "{msg}");
    assert!(
        cont.sh(&["ip", "-d", "link", "show", "tap0"])
            .contains("bridge")
    );
}

/// `selinuxContext` on a host without SELinux: ignored with a note. The helper that creates the
/// tap in a label (used when SELinux is on) works on its own.
#[test]
fn selinux_context_and_helper() {
    if !require_root("tap selinux_context_and_helper") {
        return;
    }
    let sb = Sandbox::new("tap-selinux");
    let cont = NetNs::create();
    let pl = sb.ours();
    if !std::path::Path::new("/sys/fs/selinux/enforce").exists() {
        let c = conf(
            &sb,
            None,
            json!({"selinuxContext": "system_u:system_r:container_t:s0"}),
        );
        let env = env_for(&cont, "t9").with_ifname("tap0");
        let out = pl.add("tap", &env, &c);
        out.ok();
        assert!(out.stderr.contains("selinuxContext"), "{out:?}");
        assert_eq!(flags(&cont, "tap0"), TAP | NO_PI | PERSIST);
        pl.del("tap", &env, &c).ok();
    }
    let flags_arg = (TAP | NO_PI | MQ).to_string();
    let out = cont.exec(&[
        &bin().display().to_string(),
        "--tap-create",
        &flags_arg,
        "-",
        "7",
    ]);
    assert!(out.status_ok, "{out:?}");
    let name = out.stdout.trim();
    assert!(name.starts_with("tap"), "{out:?}");
    assert_eq!(flags(&cont, name), TAP | NO_PI | MQ | PERSIST);
    assert_eq!(sys(&cont, name, "group"), "7");
    assert!(
        !cont
            .exec(&[&bin().display().to_string(), "--tap-create", "x"])
            .status_ok
    );
}

/// CONVENTIONS.md's chain: bridge after tap attaches the tap (in the container, so to a bridge
/// there) instead of making a veth; DEL detaches it and leaves it to tap's DEL.
#[test]
fn chained_tap_then_bridge() {
    if !require_root("tap chained_tap_then_bridge") {
        return;
    }
    let sb = Sandbox::new("tap-chain");
    let cont = NetNs::create();
    let pl = sb.ours();
    let env = env_for(&cont, "t10").with_ifname("tap0");
    let tap = conf(&sb, None, json!({}));
    let br = json!({"cniVersion": "1.1.0", "name": "tapnet", "type": "bridge",
                    "bridge": "vmbr0", "hairpinMode": true});
    let r1 = pl.add("tap", &env, &tap).ok().clone();
    let r2 = pl.add("bridge", &env, &with_prev(&br, &r1)).ok().clone();
    let ifs = r2["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 2, "{r2}");
    assert_eq!(ifs[0], r1["interfaces"][0], "{r2}");
    assert_eq!(ifs[1]["name"], "vmbr0", "{r2}");
    assert_eq!(ifs[1]["sandbox"], cont.path(), "{r2}");
    let l = cont.sh(&["ip", "-d", "link", "show", "tap0"]);
    assert!(
        l.contains("master vmbr0") && l.contains("hairpin on"),
        "{l}"
    );
    assert_eq!(cont.sh(&["ip", "-o", "link", "show", "type", "veth"]), "");
    pl.check("bridge", &env, &with_prev(&br, &r2)).ok();
    cont.sh(&["ip", "link", "set", "tap0", "nomaster"]);
    pl.check("bridge", &env, &with_prev(&br, &r2)).err(999);
    cont.sh(&["ip", "link", "set", "tap0", "master", "vmbr0"]);
    // ipam (and the other keys that need our veth) are refused in this mode, nothing changed.
    let mut bad = with_prev(&br, &r1);
    bad["ipMasq"] = json!(true);
    let msg = pl.add("bridge", &env, &bad).err(7);
    assert!(msg.contains("ipMasq"), "{msg}");
    // DEL in reverse order: bridge detaches, tap deletes.
    pl.del("bridge", &env, &with_prev(&br, &r2)).ok();
    let l = cont.sh(&["ip", "link", "show", "tap0"]);
    assert!(!l.contains("master"), "{l}");
    pl.del("bridge", &env, &with_prev(&br, &r2)).ok();
    pl.del("tap", &env, &tap).ok();
    assert!(!has_link(&cont, "tap0"));
    // Without prevResult on DEL, a bridged tap is detached, not deleted.
    let r1 = pl.add("tap", &env, &tap).ok().clone();
    pl.add("bridge", &env, &with_prev(&br, &r1)).ok();
    pl.del("bridge", &env, &br).ok();
    assert!(has_link(&cont, "tap0"));
    assert!(!cont.sh(&["ip", "link", "show", "tap0"]).contains("master"));
    pl.del("tap", &env, &tap).ok();
}

/// A host-side interface (no sandbox in prevResult) joins the host's bridge; traffic crosses it.
/// A veth whose far end sits in a "vm" namespace stands in for a VM's tap.
#[test]
fn chained_host_side_interface_traffic() {
    if !require_root("tap chained_host_side_interface_traffic") {
        return;
    }
    let sb = Sandbox::new("tap-hostside");
    let (node, vm) = (NetNs::create(), NetNs::create());
    node.sh(&[
        "ip", "link", "add", "vmport", "type", "veth", "peer", "name", "vmeth",
    ]);
    node.sh(&["ip", "link", "set", "vmeth", "netns", &vm.name]);
    vm.sh(&["ip", "addr", "add", "10.233.0.2/24", "dev", "vmeth"]);
    vm.sh(&["ip", "link", "set", "vmeth", "up"]);
    let pl = sb.plugin_in(Impl::Ours, &node);
    let env = env_for(&vm, "t11").with_ifname("vmport");
    let prev = json!({"cniVersion": "1.1.0", "interfaces": [{"name": "vmport"}]});
    let br = json!({"cniVersion": "1.1.0", "name": "tapnet", "type": "bridge", "bridge": "hbr0"});
    let r = pl.add("bridge", &env, &with_prev(&br, &prev)).ok().clone();
    assert_eq!(r["interfaces"][1]["name"], "hbr0", "{r}");
    assert!(r["interfaces"][1].get("sandbox").is_none(), "{r}");
    assert!(
        node.sh(&["ip", "link", "show", "vmport"])
            .contains("master hbr0")
    );
    node.sh(&["ip", "addr", "add", "10.233.0.1/24", "dev", "hbr0"]);
    vm.sh(&["ping", "-c", "1", "-W", "5", "10.233.0.1"]);
    pl.check("bridge", &env, &with_prev(&br, &r)).ok();
    pl.del("bridge", &env, &with_prev(&br, &r)).ok();
    let l = node.sh(&["ip", "link", "show", "vmport"]);
    assert!(!l.contains("master"), "{l}");
    assert!(
        !vm.exec(&["ping", "-c", "1", "-W", "1", "10.233.0.1"])
            .status_ok
    );
}
