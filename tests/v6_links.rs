//! IPv4, IPv6 and dual-stack for the applets that configure container addresses on this
//! kernel (ptp, bridge, macvlan, tap, host-device), each in a throwaway node namespace with
//! host-local: the result lists one address of each family with its gateway, every address is
//! bindable the moment ADD returns (the shared settling step, src/applets/shared/settle.rs), CHECK
//! after ADD passes and fails naming the address once one is removed, DEL leaves no link and
//! no reservation; where another node can hold the address (macvlan's segment, host-device's
//! wire, a bridge with `enabledad`), a duplicate fails the ADD naming address and interface and
//! leaves nothing; a tap without a reader (no carrier) is not waited for and its address is
//! still usable. ptp's and macvlan's dual-stack results and routes (IPv4 and IPv6) match the
//! Go plugin's (v1.9.1, which waits for duplicate address detection in both).
//! ipvlan, vlan and dummy run in the qemu VM (tests/vm/*.sh).

mod common;
use common::env::env_for;
use common::family::{
    FAMILIES, Fam, assert_bindable, assert_result_family, reservations, routes_of_both_families,
    v6_subnet,
};
use common::lab::unique_n;
use common::wait::{secs, wait_until_woken};
use common::*;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ptp,
    Bridge,
    /// A bridge with `enabledad`: detection runs, as on macvlan.
    BridgeDad,
    /// The same on a bridge running STP (forward_delay 2 s): a new port drops frames until it
    /// forwards, so a probe sent at once would be lost.
    BridgeDadStp,
    Macvlan,
    Tap,
    HostDevice,
}

/// One attachment's world: the node namespace the plugin runs in (with whatever stands in for
/// the NIC), the container, the sandbox with the IPAM directory.
struct Case {
    kind: Kind,
    fam: Fam,
    n: u8,
    sb: Sandbox,
    node: NetNs,
    cont: NetNs,
}

impl Case {
    fn new(kind: Kind, fam: Fam) -> Case {
        let n = unique_n();
        let sb = Sandbox::new(&format!("v6-{kind:?}-{}", fam.tag()));
        let node = NetNs::create();
        node.sh(&["ip", "link", "set", "lo", "up"]);
        let cont = NetNs::create();
        cont.sh(&["ip", "link", "set", "lo", "up"]);
        let wire = |a: &str, b: &str| {
            node.sh(&["ip", "link", "add", a, "type", "veth", "peer", "name", b]);
            node.sh(&["ip", "link", "set", a, "up"]);
            node.sh(&["ip", "link", "set", b, "up"]);
        };
        match kind {
            Kind::Macvlan => wire("mvup", "mvwire"),
            Kind::HostDevice => wire(&format!("hd{n}"), "hdwire"),
            Kind::BridgeDad | Kind::BridgeDadStp => {
                // A second port of the bridge, leading to a neighbour in the node.
                let mut add = vec!["ip", "link", "add", "v6br", "type", "bridge"];
                if kind == Kind::BridgeDadStp {
                    add.extend(["stp_state", "1", "forward_delay", "200"]);
                }
                node.sh(&add);
                node.sh(&["ip", "link", "set", "v6br", "up"]);
                wire("brport", "brwire");
                node.sh(&["ip", "link", "set", "brport", "master", "v6br"]);
                wait_forwarding(&node, "brport");
            }
            _ => {}
        }
        Case {
            kind,
            fam,
            n,
            sb,
            node,
            cont,
        }
    }

    fn net(&self) -> String {
        format!("v6net{}", self.n)
    }

    fn conf(&self) -> Value {
        let mut c = json!({
            "cniVersion": "1.0.0", "name": self.net(),
            "ipam": self.fam.host_local(self.n, &self.sb.path("ipam")),
        });
        let extra = match self.kind {
            Kind::Ptp => json!({"type": "ptp"}),
            Kind::Bridge => json!({"type": "bridge", "bridge": "v6br", "isGateway": true}),
            Kind::BridgeDad | Kind::BridgeDadStp => {
                json!({"type": "bridge", "bridge": "v6br", "enabledad": true})
            }
            Kind::Macvlan => json!({"type": "macvlan", "master": "mvup"}),
            Kind::Tap => json!({"type": "tap"}),
            Kind::HostDevice => json!({"type": "host-device", "device": format!("hd{}", self.n)}),
        };
        for (k, v) in extra.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn applet(&self) -> &'static str {
        match self.kind {
            Kind::Ptp => "ptp",
            Kind::Bridge | Kind::BridgeDad | Kind::BridgeDadStp => "bridge",
            Kind::Macvlan => "macvlan",
            Kind::Tap => "tap",
            Kind::HostDevice => "host-device",
        }
    }

    fn env(&self) -> Env {
        env_for(&self.cont, &format!("v6-{}", self.n))
    }

    fn plugin(&self, imp: Impl) -> Plugin<'_> {
        self.sb.plugin_in(imp, &self.node)
    }

    fn reservations(&self) -> usize {
        reservations(&self.sb.path(&format!("ipam/{}", self.net())))
    }

    fn has_eth0(&self) -> bool {
        self.cont.exec(&["ip", "link", "show", "eth0"]).status_ok
    }

    fn node_veths(&self) -> usize {
        self.node
            .sh(&["ip", "-o", "link", "show", "type", "veth"])
            .lines()
            .count()
    }

    /// The neighbour's end of the segment the container's interface joins, where a duplicate
    /// of its address can be put (None: no other node can hold one).
    fn neighbour(&self) -> Option<&'static str> {
        match self.kind {
            Kind::Macvlan => Some("mvwire"),
            Kind::HostDevice => Some("hdwire"),
            Kind::BridgeDad | Kind::BridgeDadStp => Some("brwire"),
            _ => None,
        }
    }
}

/// Wait (woken by `bridge monitor`, bounded) until the bridge port `port` in `node` forwards.
fn wait_forwarding(node: &NetNs, port: &str) {
    wait_until_woken(
        format!("bridge port {port} to forward"),
        secs(30),
        || {
            node.sh(&["bridge", "link", "show", "dev", port])
                .contains("state forwarding")
        },
        // Sleeps until the next link event of the node (or 1 s): no busy polling.
        || {
            node.exec(&["timeout", "1", "ip", "monitor", "link"]);
        },
    );
}

/// ADD, bind, CHECK, CHECK after a change, DEL, for one applet and family.
fn lifecycle(kind: Kind, fam: Fam) {
    let c = Case::new(kind, fam);
    let (conf, pl) = (c.conf(), c.plugin(Impl::Ours));
    let veths_before = c.node_veths();
    let r = pl.add(c.applet(), &c.env(), &conf).ok().clone();
    let ips = assert_result_family(&r, fam);
    // Bound at once, no retry: an IPv6 address still tentative fails here.
    assert_bindable(&c.cont, &ips);
    for ip in r["ips"].as_array().unwrap() {
        assert!(
            ip["gateway"].is_string(),
            "{kind:?} {fam:?}: no gateway in {r}"
        );
    }
    assert_eq!(c.reservations(), fam.addr_count(), "{kind:?} {fam:?}");
    // Settled, not merely optimistic (the link-local address is the kernel's, not ADD's; a
    // tap has no carrier yet: see tap_without_reader_is_not_waited_for).
    if kind != Kind::Tap {
        let v6 = c
            .cont
            .sh(&["ip", "-6", "addr", "show", "dev", "eth0", "scope", "global"]);
        assert!(!v6.contains("tentative"), "{kind:?} {fam:?}: {v6}");
    }
    // The fast-detection settings are the ADD's only.
    if fam.has_v6() && c.neighbour().is_some() {
        let rt = c
            .cont
            .sh(&["sysctl", "-n", "net.ipv6.neigh.eth0.retrans_time_ms"]);
        assert_eq!(
            rt.trim(),
            "1000",
            "{kind:?} {fam:?}: retrans_time_ms not restored"
        );
        let od = c
            .cont
            .sh(&["sysctl", "-n", "net.ipv6.conf.eth0.optimistic_dad"]);
        assert_eq!(
            od.trim(),
            "0",
            "{kind:?} {fam:?}: optimistic_dad not restored"
        );
    }

    let checked = with_prev(&conf, &r);
    let out = pl.check(c.applet(), &c.env(), &checked);
    assert!(out.status_ok, "{kind:?} {fam:?}: CHECK after ADD: {out:?}");
    // Remove the last address of the result: CHECK names it.
    let last = r["ips"].as_array().unwrap().last().unwrap()["address"]
        .as_str()
        .unwrap()
        .to_string();
    c.cont.sh(&["ip", "addr", "del", &last, "dev", "eth0"]);
    let msg = pl.check(c.applet(), &c.env(), &checked).err(999);
    assert!(
        msg.contains(&format!("address {last} not found")) && msg.contains("eth0"),
        "{kind:?} {fam:?}: {msg}"
    );

    pl.del(c.applet(), &c.env(), &checked).ok();
    assert!(
        !c.has_eth0(),
        "{kind:?} {fam:?}: eth0 left in the container"
    );
    assert_eq!(c.reservations(), 0, "{kind:?} {fam:?}: reservation left");
    match kind {
        Kind::Ptp | Kind::Bridge | Kind::BridgeDad | Kind::BridgeDadStp => {
            assert_eq!(c.node_veths(), veths_before, "{kind:?} {fam:?}: veth left");
        }
        Kind::HostDevice => {
            let dev = format!("hd{}", c.n);
            assert!(
                c.node.exec(&["ip", "link", "show", &dev]).status_ok,
                "{fam:?}: {dev} not back in the node"
            );
        }
        Kind::Macvlan | Kind::Tap => {}
    }
}

/// A neighbour already has the IPv6 address host-local will hand out (the first after the
/// gateway): the ADD fails naming it and the interface, and leaves nothing.
fn duplicate(kind: Kind, fam: Fam) {
    let c = Case::new(kind, fam);
    let nb = c.neighbour().expect("a segment with neighbours");
    let taken = v6_subnet(c.n).replace("::/64", "::2");
    c.node.sh(&[
        "ip",
        "addr",
        "add",
        &format!("{taken}/64"),
        "dev",
        nb,
        "nodad",
    ]);
    let (conf, pl) = (c.conf(), c.plugin(Impl::Ours));
    let veths_before = c.node_veths();
    let msg = pl.add(c.applet(), &c.env(), &conf).err(999);
    assert!(
        msg.contains(&format!("{taken}/64"))
            && msg.contains("\"eth0\"")
            && msg.contains("duplicate address detection failed"),
        "{kind:?} {fam:?}: {msg}"
    );
    assert!(!c.has_eth0(), "{kind:?} {fam:?}: eth0 left behind");
    assert_eq!(c.reservations(), 0, "{kind:?} {fam:?}: reservation left");
    assert_eq!(c.node_veths(), veths_before, "{kind:?} {fam:?}: veth left");
}

macro_rules! family_tests {
    ($($name:ident: $kind:expr;)*) => {$(
        #[test]
        fn $name() {
            if !require_root(stringify!($name)) {
                return;
            }
            for fam in FAMILIES {
                lifecycle($kind, fam);
            }
        }
    )*};
}

family_tests! {
    ptp_families: Kind::Ptp;
    bridge_families: Kind::Bridge;
    bridge_enabledad_families: Kind::BridgeDad;
    macvlan_families: Kind::Macvlan;
    tap_families: Kind::Tap;
    host_device_families: Kind::HostDevice;
}

macro_rules! duplicate_tests {
    ($($name:ident: $kind:expr;)*) => {$(
        #[test]
        fn $name() {
            if !require_root(stringify!($name)) {
                return;
            }
            for fam in [Fam::V6, Fam::Dual] {
                duplicate($kind, fam);
            }
        }
    )*};
}

duplicate_tests! {
    macvlan_duplicate_fails: Kind::Macvlan;
    host_device_duplicate_fails: Kind::HostDevice;
    bridge_enabledad_duplicate_fails: Kind::BridgeDad;
    bridge_stp_enabledad_duplicate_fails: Kind::BridgeDadStp;
}

/// A tap has no carrier until its reader attaches: the ADD does not wait for a detection that
/// cannot run, yet the address is usable (optimistic) and stays tentative until the carrier
/// comes. Upstream waits 5 s here and returns the address unusable.
#[test]
fn tap_without_reader_is_not_waited_for() {
    if !require_root("tap_without_reader_is_not_waited_for") {
        return;
    }
    let c = Case::new(Kind::Tap, Fam::V6);
    let start = std::time::Instant::now();
    let r = c
        .plugin(Impl::Ours)
        .add("tap", &c.env(), &c.conf())
        .ok()
        .clone();
    let took = start.elapsed();
    assert!(
        took < std::time::Duration::from_secs(2),
        "tap ADD took {took:?}"
    );
    let ips = assert_result_family(&r, Fam::V6);
    assert_bindable(&c.cont, &ips);
    let a = c.cont.sh(&["ip", "-6", "addr", "show", "dev", "eth0"]);
    assert!(a.contains("optimistic"), "{a}");
}

/// What an implementation makes of a dual-stack ADD of `kind`: the result (MACs, names and
/// sandbox dropped, the lab number replaced), the container's and the node's IPv4 and IPv6
/// routes (host veth names replaced); every address must be bindable when ADD returns, for both.
fn dual_stack_view(kind: Kind, imp: Impl) -> (String, String, String) {
    let c = Case::new(kind, Fam::Dual);
    let conf = c.conf();
    let pl = c.plugin(imp);
    let r = pl.add(c.applet(), &c.env(), &conf).ok().clone();
    assert_bindable(&c.cont, &assert_result_family(&r, Fam::Dual));
    let sub = |s: String| {
        s.replace(&format!("fd00:{}:", c.n), "fd00:N:")
            .replace(&format!("10.{}.", c.n), "10.N.")
            .replace(&format!("v6net{}", c.n), "v6netN")
    };
    let cont = sub(routes_of_both_families(&c.cont));
    let node: String = sub(routes_of_both_families(&c.node))
        .split(' ')
        .map(|w| if w.starts_with("veth") { "VETH" } else { w })
        .collect::<Vec<_>>()
        .join(" ");
    pl.del(c.applet(), &c.env(), &with_prev(&conf, &r)).ok();
    let mut v = r;
    for i in v["interfaces"].as_array_mut().unwrap() {
        i["mac"] = Value::Null;
        i["sandbox"] = Value::Null;
        i["name"] = Value::Null;
    }
    (sub(normalize(&v).to_string()), cont, node)
}

/// ptp's and macvlan's dual-stack results and routes of both families, in the container and on
/// the node, as the Go plugin (v1.9.1) makes them; its addresses are bindable too when it
/// returns (it waits for duplicate address detection).
#[test]
fn dual_stack_matches_the_reference() {
    if !require_root("dual_stack_matches_the_reference") {
        return;
    }
    for (kind, name) in [(Kind::Ptp, "ptp"), (Kind::Macvlan, "macvlan")] {
        if !reference_available(name) {
            continue;
        }
        let ours = dual_stack_view(kind, Impl::Ours);
        let theirs = dual_stack_view(kind, Impl::Reference);
        assert_eq!(ours, theirs, "{kind:?}");
    }
}
