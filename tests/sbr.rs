//! sbr chained after bridge + host-local in throwaway namespaces: two interfaces, each address
//! gets its rule and its table (100, then 101) with the interface's routes, the container's
//! rules and routing tables equal what the Go plugin makes on the same input, traffic from each
//! source address flows while traffic without one has no route, CHECK, each implementation's
//! DEL removes the other's rules, the `table` key, a failed ADD undone, DEL without namespace
//! or interface.

mod common;
use common::env::env_for;
use common::wait::{secs, wait_until};
use common::*;
use serde_json::{Value, json};

struct Setup {
    node: NetNs,
    cont: NetNs,
    sb: Sandbox,
    n: u8,
}

fn setup(tag: &str, n: u8) -> Setup {
    let sb = Sandbox::new(tag);
    let node = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    let cont = NetNs::create();
    Setup { node, cont, sb, n }
}

impl Setup {
    fn env(&self, ifname: &str) -> Env {
        env_for(&self.cont, "sbr1").with_ifname(ifname)
    }

    /// Network `k` (bridge `sbrbrK`, 10.N.K.0/24, default route via 10.N.K.1).
    fn bridge_conf(&self, k: u8) -> Value {
        json!({"cniVersion": "1.0.0", "name": format!("sbrnet{k}"), "type": "bridge",
            "bridge": format!("sbrbr{k}"), "isDefaultGateway": true,
            "ipam": {"type": "host-local", "subnet": format!("10.{}.{k}.0/24", self.n),
                     "dataDir": self.sb.path("ipam").display().to_string()}})
    }

    /// Bridge network `k` on `ifname` (always cnibox's bridge), once the kernel has given the
    /// interface its IPv6 link-local route (sbr moves it too, so both sides must see it).
    fn attach(&self, k: u8, ifname: &str) -> Value {
        let r = self
            .sb
            .plugin_in(Impl::Ours, &self.node)
            .add("bridge", &self.env(ifname), &self.bridge_conf(k))
            .ok()
            .clone();
        wait_until(format!("a fe80::/64 route on {ifname}"), secs(10), || {
            self.cont
                .sh(&["ip", "-6", "route", "show", "dev", ifname])
                .contains("fe80::/64")
        });
        r
    }

    fn detach(&self, k: u8, ifname: &str) {
        self.sb
            .plugin_in(Impl::Ours, &self.node)
            .del("bridge", &self.env(ifname), &self.bridge_conf(k))
            .ok();
    }

    fn sbr(&self, imp: Impl, cmd: &str, ifname: &str, conf: &Value) -> Output {
        self.sb
            .plugin_in(imp, &self.node)
            .cmd("sbr", cmd, &self.env(ifname), conf)
    }

    /// `ip rule` of both families and every routing table, without the lines that hold the
    /// random link-local addresses.
    fn state(&self) -> String {
        let mut s = self.cont.sh(&["ip", "-4", "rule"]);
        s += &self.cont.sh(&["ip", "-6", "rule"]);
        let mut routes = self.cont.sh(&["ip", "route", "show", "table", "all"]);
        routes += &self.cont.sh(&["ip", "-6", "route", "show", "table", "all"]);
        s + &routes
            .lines()
            .filter(|l| !l.starts_with("local fe80"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    }

    fn ping(&self, from: Option<&str>, to: &str) -> bool {
        let mut cmd = vec!["ping", "-c", "1", "-W", "5"];
        if let Some(f) = from {
            cmd.extend(["-I", f]);
        }
        cmd.push(to);
        self.cont.exec(&cmd).status_ok
    }
}

fn sbr_conf(version: &str, prev: &Value, extra: Value) -> Value {
    let mut c =
        json!({"cniVersion": version, "name": "sbrnet1", "type": "sbr", "prevResult": prev});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

const DEFAULT_RULES: &str =
    "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n";

/// Two interfaces chained through `add`'s sbr, checked, then taken down by `del`'s sbr.
/// Returns the container's rules and tables after both ADDs.
fn scenario(add: Impl, del: Impl, n: u8) -> String {
    let s = setup(&format!("sbr-{n}"), n);
    let r1 = s.attach(1, "eth0");
    let c1 = sbr_conf("1.0.0", &r1, json!({}));
    let out = s.sbr(add, "ADD", "eth0", &c1);
    assert_eq!(out.ok(), &r1, "sbr must pass the prevResult through");
    let r2 = s.attach(2, "net1");
    let c2 = sbr_conf("1.0.0", &r2, json!({}));
    s.sbr(add, "ADD", "net1", &c2).ok();
    let state = s.state();
    let (a1, a2) = (format!("10.{n}.1.2"), format!("10.{n}.2.2"));
    for want in [
        format!("from {a1} lookup 100"),
        format!("from {a2} lookup 101"),
        format!("default via 10.{n}.1.1 dev eth0 table 100"),
        format!("10.{n}.1.0/24 dev eth0 table 100 proto kernel scope link src {a1}"),
        format!("default via 10.{n}.2.1 dev net1 table 101"),
        "fe80::/64 dev eth0 table 100 proto kernel metric 256".to_string(),
    ] {
        assert!(state.contains(&want), "{want:?} missing:\n{state}");
    }
    let main = s.cont.sh(&["ip", "route", "show", "table", "main"]);
    assert_eq!(main, "", "routes left in the main table");
    assert!(s.ping(Some(&a1), &format!("10.{n}.1.1")), "ping from {a1}");
    assert!(s.ping(Some(&a2), &format!("10.{n}.2.1")), "ping from {a2}");
    assert!(
        !s.ping(None, &format!("10.{n}.1.1")),
        "ping without a source address must find no route"
    );
    // Our CHECK accepts either implementation's attachment.
    s.sbr(Impl::Ours, "CHECK", "eth0", &c1).ok();
    s.sbr(Impl::Ours, "CHECK", "net1", &c2).ok();

    s.sbr(del, "DEL", "net1", &c2).ok();
    s.sbr(del, "DEL", "eth0", &c1).ok();
    assert_eq!(
        s.cont.sh(&["ip", "-4", "rule"]),
        DEFAULT_RULES,
        "rules left after DEL"
    );
    // Our DEL empties the tables our ADD filled (it recorded them); the Go plugin's ADD it
    // leaves as Go's DEL does (the routes go with the interface).
    if del == Impl::Ours && add == Impl::Ours {
        for t in ["100", "101"] {
            let left = s.cont.sh(&["ip", "route", "show", "table", t])
                + &s.cont.sh(&["ip", "-6", "route", "show", "table", t]);
            assert_eq!(left, "", "table {t} left after our DEL");
        }
    }
    if del == Impl::Ours {
        let out = s.sbr(Impl::Ours, "CHECK", "eth0", &c1);
        assert!(out.err(999).contains(&a1), "{out:?}");
    }
    s.sbr(del, "DEL", "eth0", &c1).ok();
    s.detach(2, "net1");
    s.detach(1, "eth0");
    state
}

#[test]
fn routes_by_source_and_matches_the_reference() {
    if !require_root("sbr routes_by_source_and_matches_the_reference") {
        return;
    }
    // One lab number for the three runs: their states are compared (each run has its own
    // namespaces and sandbox, one after the other).
    let n = common::lab::unique_n();
    let ours = scenario(Impl::Ours, Impl::Ours, n);
    if !reference_available("sbr") {
        return;
    }
    let theirs = scenario(Impl::Reference, Impl::Ours, n);
    assert_eq!(ours, theirs, "rules and tables differ from the reference");
    scenario(Impl::Ours, Impl::Reference, n);
}

/// `table`: only rules, all to that table, the main table untouched; DEL of another table
/// leaves them; CHECK notices a missing rule.
#[test]
fn fixed_table() {
    if !require_root("sbr fixed_table") {
        return;
    }
    let n = common::lab::unique_n();
    let s = setup("sbr-table", n);
    let r1 = s.attach(1, "eth0");
    let main = s.cont.sh(&["ip", "route", "show", "table", "main"]);
    let c = sbr_conf("1.0.0", &r1, json!({"table": 300}));
    assert_eq!(s.sbr(Impl::Ours, "ADD", "eth0", &c).ok(), &r1);
    let rules = s.cont.sh(&["ip", "-4", "rule"]);
    assert!(
        rules.contains(&format!("from 10.{n}.1.2 lookup 300")),
        "{rules}"
    );
    assert_eq!(s.cont.sh(&["ip", "route", "show", "table", "main"]), main);
    assert!(!s.state().contains("table 300"), "routes put in table 300");
    s.sbr(Impl::Ours, "CHECK", "eth0", &c).ok();
    let other = sbr_conf("1.0.0", &r1, json!({"table": 301}));
    s.sbr(Impl::Ours, "CHECK", "eth0", &other).err(999);
    s.sbr(Impl::Ours, "DEL", "eth0", &other).ok();
    assert_eq!(s.cont.sh(&["ip", "-4", "rule"]), rules, "DEL of table 301");
    s.cont.sh(&[
        "ip",
        "rule",
        "del",
        "from",
        &format!("10.{n}.1.2"),
        "table",
        "300",
    ]);
    s.sbr(Impl::Ours, "CHECK", "eth0", &c).err(999);
    s.sbr(Impl::Ours, "ADD", "eth0", &c).ok();
    s.sbr(Impl::Ours, "DEL", "eth0", &c).ok();
    assert_eq!(s.cont.sh(&["ip", "-4", "rule"]), DEFAULT_RULES);
    assert_eq!(s.cont.sh(&["ip", "route", "show", "table", "main"]), main);
    s.detach(1, "eth0");
}

/// A second address whose gateway cannot be reached makes ADD fail after the first one's rule
/// and routes exist: everything goes again, the main table is as before.
#[test]
fn failed_add_is_undone() {
    if !require_root("sbr failed_add_is_undone") {
        return;
    }
    let n = common::lab::unique_n();
    let s = setup("sbr-undo", n);
    let mut r1 = s.attach(1, "eth0");
    let before = s.state();
    r1["ips"]
        .as_array_mut()
        .unwrap()
        .push(json!({"address": "192.0.2.5/24", "gateway": "192.0.2.1", "interface": 2}));
    let out = s.sbr(
        Impl::Ours,
        "ADD",
        "eth0",
        &sbr_conf("1.0.0", &r1, json!({})),
    );
    assert!(out.err(999).contains("192.0.2.1"), "{out:?}");
    assert_eq!(s.state(), before, "a failed ADD left something behind");
    s.detach(1, "eth0");
}

/// DEL succeeds without the namespace or the interface; ADD needs a prevResult with addresses.
#[test]
fn del_tolerates_missing_things_and_add_needs_a_chain() {
    if !require_root("sbr del_tolerates_missing_things_and_add_needs_a_chain") {
        return;
    }
    let n = common::lab::unique_n();
    let s = setup("sbr-missing", n);
    let prev = json!({"cniVersion": "1.0.0",
        "interfaces": [{"name": "eth0", "sandbox": s.cont.path()}],
        "ips": [{"address": format!("10.{n}.1.2/24"), "interface": 0}]});
    let c = sbr_conf("1.0.0", &prev, json!({}));
    s.sbr(Impl::Ours, "DEL", "eth0", &c).ok();
    let gone = Env {
        netns: "/run/netns/cnibox-no-such-ns".into(),
        ..s.env("eth0")
    };
    s.sb.plugin_in(Impl::Ours, &s.node)
        .del("sbr", &gone, &c)
        .ok();
    let mut none = c.clone();
    none.as_object_mut().unwrap().remove("prevResult");
    assert!(
        s.sbr(Impl::Ours, "ADD", "eth0", &none)
            .err(7)
            .contains("prevResult")
    );
    let mut empty = c.clone();
    empty["prevResult"]["ips"] = json!([]);
    assert!(
        s.sbr(Impl::Ours, "ADD", "eth0", &empty)
            .err(7)
            .contains("No IP addresses")
    );
    assert_eq!(s.cont.sh(&["ip", "-4", "rule"]), DEFAULT_RULES);
}

/// A table of the user's own that a rule of the container's address points at (`from ADDR
/// lookup 777`, routes through the interface in 777) is left alone by DEL, in IPv4, IPv6 and
/// dual-stack, as the Go plugin leaves it; the table sbr filled (100) is emptied.
#[test]
fn del_keeps_the_users_own_table() {
    if !require_root("sbr del_keeps_the_users_own_table") {
        return;
    }
    use common::family::{FAMILIES, assert_result_family};
    let mut imps = vec![Impl::Ours];
    if reference_available("sbr") {
        imps.push(Impl::Reference);
    }
    for fam in FAMILIES {
        for &imp in &imps {
            let n = common::lab::unique_n();
            let s = setup(&format!("sbr-own-{}", fam.tag()), n);
            let mut bridge = s.bridge_conf(1);
            bridge["ipam"] = fam.host_local(n, &s.sb.path("ipam"));
            let r =
                s.sb.plugin_in(Impl::Ours, &s.node)
                    .add("bridge", &s.env("eth0"), &bridge)
                    .ok()
                    .clone();
            let addrs = assert_result_family(&r, fam);
            // `ip -6 route show table N` fails while no IPv6 route is in N: empty then.
            let table = |t: &str| {
                s.cont
                    .exec(&["ip", "-4", "route", "show", "table", t])
                    .stdout
                    + &s.cont
                        .exec(&["ip", "-6", "route", "show", "table", t])
                        .stdout
            };
            for a in &addrs {
                let (fam_flag, dst) = if a.is_ipv6() {
                    ("-6", "2001:db8:77::/64")
                } else {
                    ("-4", "198.51.100.0/24")
                };
                let a = a.to_string();
                s.cont
                    .sh(&["ip", fam_flag, "rule", "add", "from", &a, "lookup", "777"]);
                s.cont
                    .sh(&["ip", "route", "add", dst, "dev", "eth0", "table", "777"]);
            }
            let own = table("777");
            assert!(!own.is_empty());
            let c = sbr_conf("1.0.0", &r, json!({}));
            s.sbr(imp, "ADD", "eth0", &c).ok();
            let filled = table("100");
            assert!(
                filled.contains("eth0"),
                "{} {imp:?}: table 100: {filled}",
                fam.tag()
            );
            s.sbr(imp, "DEL", "eth0", &c).ok();
            assert_eq!(
                table("777"),
                own,
                "{} {imp:?}: table 777 after DEL",
                fam.tag()
            );
            if imp == Impl::Ours {
                assert_eq!(table("100"), "", "{}: table 100 after DEL", fam.tag());
            }
            s.sb.plugin_in(Impl::Ours, &s.node)
                .del("bridge", &s.env("eth0"), &bridge)
                .ok();
        }
    }
}

/// From upstream main: `gateways` replaces the prevResult's gateway of its family for each
/// address's default route; with `addSourceHints` the main table keeps each address's subnet
/// route with the address as preferred source (traffic that picks no source still flows) and
/// loses the interface's other routes. A failed ADD, with or without hints, puts the main
/// table back (IPv6's default route after the subnet route that makes its gateway reachable).
/// In every family.
#[test]
fn static_gateways_and_source_hints() {
    if !require_root("sbr static_gateways_and_source_hints") {
        return;
    }
    for fam in family::FAMILIES {
        let n = common::lab::unique_n();
        let s = setup(&format!("sbr-hints-{}", fam.tag()), n);
        let bconf = json!({"cniVersion": "1.0.0", "name": "sbrh", "type": "bridge",
            "bridge": "sbrh0", "isGateway": true,
            "ipam": fam.host_local(n, &s.sb.path("ipam"))});
        let p = s.sb.plugin_in(Impl::Ours, &s.node);
        let r = p.add("bridge", &s.env("eth0"), &bconf).ok().clone();
        wait_until("a fe80::/64 route on eth0", secs(10), || {
            s.cont
                .sh(&["ip", "-6", "route", "show", "dev", "eth0"])
                .contains("fe80::/64")
        });
        let (gw4, gw6) = (format!("10.{n}.0.254"), format!("fd00:{n}::fe"));
        let c = sbr_conf(
            "1.0.0",
            &r,
            json!({"gateways": [gw4, gw6], "addSourceHints": true}),
        );
        // Undo: the state record cannot be written (its directory is a file), after the
        // routes moved and the hints went in.
        let before = s.state();
        let file = s.sb.path("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let mut env = s.env("eth0");
        env.extra
            .push(("CNIBOX_STATE_DIR".into(), file.display().to_string()));
        for hints in [false, true] {
            let mut c = c.clone();
            c["addSourceHints"] = json!(hints);
            let out = p.cmd("sbr", "ADD", &env, &c);
            assert!(!out.status_ok, "{} {hints}: {out:?}", fam.tag());
            assert_eq!(
                s.state(),
                before,
                "{} {hints}: failed ADD left something",
                fam.tag()
            );
        }

        assert_eq!(s.sbr(Impl::Ours, "ADD", "eth0", &c).ok(), &r);
        let all = s.state();
        for a in family::result_ips(&r) {
            let (v, gw, subnet, gateway) = if a.is_ipv4() {
                ("-4", &gw4, format!("10.{n}.0.0/24"), format!("10.{n}.0.1"))
            } else {
                ("-6", &gw6, format!("fd00:{n}::/64"), format!("fd00:{n}::1"))
            };
            assert!(
                all.contains(&format!("default via {gw} dev eth0 table 10")),
                "{}: no default route via the static gateway {gw}:\n{all}",
                fam.tag()
            );
            let main = s.cont.sh(&["ip", v, "route", "show", "table", "main"]);
            let hint = main
                .lines()
                .find(|l| l.starts_with(&format!("{subnet} dev eth0")))
                .unwrap_or_else(|| panic!("{}: no subnet route in main:\n{main}", fam.tag()));
            assert!(hint.contains(&format!("src {a}")), "{hint}");
            assert!(!main.contains("default"), "{}: {main}", fam.tag());
            // No source chosen: the main table's subnet route, with the address as source.
            wait_until(format!("{}: ping {gateway}", fam.tag()), secs(10), || {
                s.ping(None, &gateway)
            });
        }
        s.sbr(Impl::Ours, "DEL", "eth0", &c).ok();
        assert!(p.del("bridge", &s.env("eth0"), &bconf).status_ok);
    }
}

/// The container's rules of both families, one string.
fn all_rules(cont: &NetNs) -> String {
    cont.sh(&["ip", "-4", "rule"]) + &cont.sh(&["ip", "-6", "rule"])
}

/// prevResult addresses that are not on the interface — the whole address space (`0.0.0.0/0`,
/// `::/0`), or 3,000 addresses of other subnets — in IPv4, IPv6 and dual-stack: ADD makes a
/// rule for each (as the Go plugin does on the same input: the same `ip rule` lines), and our
/// DEL removes every one of them, with the DEL's config as given and with one that lists no
/// prevResult. Upstream v1.9.1's DEL, which finds rules by the interface's addresses, leaves
/// them (printed, not asserted).
#[test]
fn del_removes_rules_of_addresses_not_on_the_interface() {
    if !require_root("sbr del_removes_rules_of_addresses_not_on_the_interface") {
        return;
    }
    use common::family::FAMILIES;
    let with_ref = reference_available("sbr");
    for fam in FAMILIES {
        let many = |v6: bool, i: usize| {
            if v6 {
                format!("fd00:99:{:x}::2/64", i + 1)
            } else {
                format!("10.{}.{}.2/24", 100 + i / 250, i % 250)
            }
        };
        let whole: Vec<String> = [(fam.has_v4(), "0.0.0.0/0"), (fam.has_v6(), "::/0")]
            .into_iter()
            .filter(|(on, _)| *on)
            .map(|(_, a)| a.to_string())
            .collect();
        let split = if fam == common::family::Fam::Dual {
            1500
        } else {
            3000
        };
        let thousands: Vec<String> = (0..3000)
            .map(|i| {
                many(
                    fam == common::family::Fam::V6 || (fam.has_v6() && i >= split),
                    i % split,
                )
            })
            .collect();
        for (case, addrs) in [("whole", &whole), ("3000", &thousands)] {
            let mut imps = vec![Impl::Ours];
            if with_ref {
                imps.push(Impl::Reference);
            }
            let mut added = Vec::new();
            for imp in imps {
                let tag = format!("{} {case} {imp:?}", fam.tag());
                let n = common::lab::unique_n();
                let s = setup(&format!("sbr-foreign-{}-{case}", fam.tag()), n);
                s.cont.sh(&[
                    "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
                ]);
                s.cont.sh(&["ip", "link", "set", "peer0", "up"]);
                s.cont.sh(&["ip", "link", "set", "eth0", "up"]);
                s.cont.sh(&[
                    "ip",
                    "addr",
                    "add",
                    &format!("10.{n}.7.2/24"),
                    "dev",
                    "eth0",
                ]);
                s.cont.sh(&[
                    "ip",
                    "addr",
                    "add",
                    &format!("fd00:{n}:7::2/64"),
                    "dev",
                    "eth0",
                    "nodad",
                ]);
                let before = all_rules(&s.cont);
                let ips: Vec<Value> = addrs
                    .iter()
                    .map(|a| json!({"address": a, "interface": 0}))
                    .collect();
                let prev = json!({"cniVersion": "1.0.0",
                    "interfaces": [{"name": "eth0", "sandbox": s.cont.path()}], "ips": ips});
                let c = sbr_conf("1.0.0", &prev, json!({}));
                s.sbr(imp, "ADD", "eth0", &c).ok();
                let after_add = all_rules(&s.cont);
                assert_eq!(
                    after_add.lines().count() - before.lines().count(),
                    addrs.len(),
                    "{tag}: one rule per address:\n{after_add}"
                );
                added.push(after_add);
                // The whole space: the DEL config as given; the thousands: one without the
                // prevResult (what ADD made is removed whatever DEL is told).
                let del_conf = if case == "whole" {
                    c.clone()
                } else {
                    json!({"cniVersion": "1.0.0", "name": "sbrnet1", "type": "sbr"})
                };
                s.sbr(imp, "DEL", "eth0", &del_conf).ok();
                let left = all_rules(&s.cont);
                if imp == Impl::Ours {
                    assert_eq!(left, before, "{tag}: rules left after DEL");
                    let tables = s
                        .cont
                        .exec(&["ip", "-4", "route", "show", "table", "100"])
                        .stdout
                        + &s.cont
                            .exec(&["ip", "-6", "route", "show", "table", "100"])
                            .stdout;
                    assert_eq!(tables, "", "{tag}: table 100 after DEL");
                } else {
                    let n_left = left.lines().count() - before.lines().count();
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!(
                            "NOTE {tag}: upstream v1.9.1 DEL leaves {n_left} of {} rules\n",
                            addrs.len()
                        )
                        .as_bytes(),
                    );
                }
            }
            if let [ours, theirs] = &added[..] {
                assert_eq!(
                    ours,
                    theirs,
                    "{} {case}: rules after ADD differ from the reference",
                    fam.tag()
                );
            }
        }
    }
}
