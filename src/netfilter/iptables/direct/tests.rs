//! The direct path against the tools themselves, each in its own namespaces: every rule shape
//! the applets write, in both families, written by `iptables-restore` in one namespace and
//! directly in a twin, must dump identically from the kernel and print identically in
//! `iptables-save`; each side deletes and checks the other's rules; and reading the table
//! back gives `iptables-save`'s text.

use super::super::{Proto, Saved, Script};
use super::spec::Spec;
use super::{restore, save, wire};
use crate::netfilter::nft::{Family, Table};
use crate::netfilter::tests::Ns;
use std::process::{Command, Stdio};

/// The chains to create, as (table, chain).
type Chains = Vec<(&'static str, &'static str)>;
/// Rules as (table, chain, spec).
type Rules = Vec<(&'static str, &'static str, String)>;

/// (table, chain, spec) of every shape, in `iptables-save`'s text, and the chains to create.
fn catalogue(proto: Proto) -> (Chains, Rules) {
    let (host, net, other, mcast, dnat, dnat_bare, narrow, lo) = match proto {
        Proto::V4 => (
            "10.88.0.5/32",
            "10.88.0.0/16",
            "10.0.0.1/32",
            "224.0.0.0/4",
            "10.88.0.5:80",
            "10.88.0.6",
            "10.89.16.0/20",
            "127.0.0.1/32",
        ),
        Proto::V6 => (
            "fd00:88::5/128",
            "fd00:88::/64",
            "fd00::1/128",
            "ff00::/8",
            "[fd00:88::5]:80",
            "fd00:88::6",
            "fd00:89:10::/44",
            "::1/128",
        ),
    };
    let c = r#"-m comment --comment "name: \"net\" id: \"c1\"""#;
    let chains = vec![
        ("nat", "CNI-abc"),
        ("nat", "CNI-HOSTPORT-DNAT"),
        ("nat", "CNI-HOSTPORT-SETMARK"),
        ("nat", "CNI-HOSTPORT-MASQ"),
        ("nat", "CNI-DN-x"),
        ("filter", "CNI-FORWARD"),
        ("filter", "CNI-ADMIN"),
        ("filter", "CNI-ISOLATION-STAGE-1"),
    ];
    let rules = vec![
        ("nat", "POSTROUTING", format!("-s {host} {c} -j CNI-abc")),
        ("nat", "CNI-abc", format!("-d {net} {c} -j ACCEPT")),
        ("nat", "CNI-abc", format!("! -d {mcast} {c} -j MASQUERADE")),
        ("nat", "CNI-abc", format!("-d {narrow} -j RETURN")),
        ("nat", "POSTROUTING", r#"-m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ"#.into()),
        ("nat", "CNI-HOSTPORT-SETMARK", r#"-m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x2000/0x2000"#.into()),
        ("nat", "CNI-HOSTPORT-MASQ", "-m mark --mark 0x2000/0x2000 -j MASQUERADE".into()),
        ("nat", "CNI-HOSTPORT-MASQ", "-m mark --mark 0x4 -j RETURN".into()),
        ("nat", "PREROUTING", "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT".into()),
        ("nat", "OUTPUT", "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT".into()),
        ("nat", "CNI-HOSTPORT-DNAT", r#"-p tcp -m comment --comment "dnat name: \"net\" id: \"c1\"" -m multiport --dports 8080,9090,10000:10010 -j CNI-DN-x"#.into()),
        ("nat", "CNI-HOSTPORT-DNAT", "-p udp -m multiport --dports 53 -g CNI-DN-x".into()),
        ("nat", "CNI-DN-x", format!("-s {net} -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK")),
        ("nat", "CNI-DN-x", format!("-s {lo} -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK")),
        ("nat", "CNI-DN-x", format!("-d {other} -p udp -m udp --dport 53 -j DNAT --to-destination {dnat}")),
        ("nat", "CNI-DN-x", format!("-p tcp -m tcp --dport 8080 -j DNAT --to-destination {dnat}")),
        ("nat", "CNI-DN-x", format!("-p tcp -m tcp --dport 8081 -j DNAT --to-destination {dnat_bare}")),
        ("filter", "FORWARD", r#"-m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD"#.into()),
        ("filter", "CNI-FORWARD", r#"-m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN"#.into()),
        ("filter", "CNI-FORWARD", format!("-d {host} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")),
        ("filter", "CNI-FORWARD", format!("-s {host} -j ACCEPT")),
        ("filter", "CNI-FORWARD", "-m conntrack --ctstate INVALID,NEW -j DROP".into()),
        ("filter", "CNI-ISOLATION-STAGE-1", r#"-i cni0 ! -o cni0 -m comment --comment "CNI firewall plugin rules (isolated)" -j RETURN"#.into()),
        ("filter", "CNI-ISOLATION-STAGE-1", "-i cni0 -o cni0 -j DROP".into()),
        ("filter", "CNI-ISOLATION-STAGE-1", "! -i cni0 -o cni-1_x.y -j DROP".into()),
    ];
    (chains, rules)
}

fn tool(proto: Proto, what: &str) -> String {
    match proto {
        Proto::V4 => format!("iptables-{what}"),
        Proto::V6 => format!("ip6tables-{what}"),
    }
}

fn exec_restore(ns: &Ns, proto: Proto, input: &str) -> bool {
    use std::io::Write;
    let mut c = Command::new("ip")
        .args(["netns", "exec", &ns.0, &tool(proto, "restore"), "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("iptables-restore");
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    if !out.status.success() {
        eprintln!("{}:\n{input}", String::from_utf8_lossy(&out.stderr));
    }
    out.status.success()
}

/// `iptables-save -t TABLE` without its comment lines and counters.
fn exec_save(ns: &Ns, proto: Proto, table: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, &tool(proto, "save"), "-t", table])
        .output()
        .expect("iptables-save");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match l.strip_prefix(':') {
            Some(c) => format!(":{}\n", c.split(" [").next().unwrap_or(c)),
            None => format!("{l}\n"),
        })
        .collect()
}

fn direct_restore(ns: &Ns, proto: Proto, table: &str, script: &Script) -> bool {
    let netns = crate::netns::NetNs::open(&ns.path().to_string_lossy()).unwrap();
    netns.enter(|| restore(proto, table, script)).unwrap()
}

fn direct_save(ns: &Ns, proto: Proto, table: &str) -> Option<Saved> {
    let netns = crate::netns::NetNs::open(&ns.path().to_string_lossy()).unwrap();
    netns.enter(|| save(proto, table)).unwrap()
}

/// Every rule of `table` as (chain, canonical expressions), in order.
fn dump(ns: &Ns, proto: Proto, table: &str) -> Vec<(String, Vec<u8>)> {
    let family = if proto == Proto::V4 {
        Family::Ip
    } else {
        Family::Ip6
    };
    let mut nft = ns.open();
    let mut v: Vec<_> = nft
        .rules(&Table::new(family, table), None)
        .unwrap()
        .into_iter()
        .map(|r| (r.chain, wire::canon(&r.exprs).expect("known expressions")))
        .collect();
    v.sort();
    v
}

fn script(proto: Proto, table: &str, f: impl Fn(&mut Script, &str, &str)) -> Script {
    let (chains, rules) = catalogue(proto);
    let mut s = Script::new();
    for (t, c) in &chains {
        if *t == table {
            s.new_chain(c);
        }
    }
    for (t, chain, spec) in &rules {
        if *t == table {
            f(&mut s, chain, spec);
        }
    }
    s
}

fn render(table: &str, s: &Script) -> String {
    s.render(table).unwrap()
}

fn both_ways(proto: Proto) {
    for table in ["nat", "filter"] {
        let add = script(proto, table, |s, c, r| {
            s.append(c, r);
        });
        let (a, b) = (Ns::new(), Ns::new());
        assert!(
            exec_restore(&a, proto, &render(table, &add)),
            "{proto:?} {table}: the tools refuse the catalogue"
        );
        assert!(
            direct_restore(&b, proto, table, &add),
            "{proto:?} {table}: not written directly"
        );
        // The kernel holds the same rules, and iptables prints them the same.
        assert_eq!(
            dump(&a, proto, table),
            dump(&b, proto, table),
            "{proto:?} {table}"
        );
        let text = exec_save(&a, proto, table);
        assert_eq!(text, exec_save(&b, proto, table), "{proto:?} {table}");
        // Reading the table back gives iptables-save's rules.
        let want = Saved::parse(text.clone());
        let got = direct_save(&b, proto, table).expect("every rule read");
        let rules = |s: &Saved| -> Vec<(String, String)> {
            let mut v: Vec<_> = s.rules().map(|(c, r)| (c.into(), r.into())).collect();
            v.sort();
            v
        };
        assert_eq!(rules(&got), rules(&want), "{proto:?} {table}");
        let mut chains: Vec<&str> = got.chains().collect();
        let mut wanted: Vec<&str> = want.chains().collect();
        chains.sort();
        wanted.sort();
        assert_eq!(chains, wanted);
        // Each rule as the catalogue writes it is iptables-save's text of it.
        let (_, cat) = catalogue(proto);
        for (t, chain, spec) in cat.iter().filter(|(t, ..)| *t == table) {
            assert!(
                want.has_rule(chain, spec),
                "{t} {chain} {spec:?} not in\n{text}"
            );
            let s = Spec::parse(proto, spec).expect(spec);
            assert_eq!(&s.render(), spec);
        }
        // -C finds every rule on both sides, whoever wrote it.
        let mut check = Script::new();
        for (_, chain, spec) in cat.iter().filter(|(t, ..)| *t == table) {
            check.check_rule(chain, spec);
        }
        assert!(direct_restore(&a, proto, table, &check));
        assert!(direct_restore(&b, proto, table, &check));
        // Deleting: directly what the tools wrote, with the tools what was written directly.
        let del = {
            let mut s = Script::new();
            for (_, chain, spec) in cat.iter().filter(|(t, ..)| *t == table) {
                s.delete(chain, spec);
            }
            // All flushed before any is deleted: iptables-nft refuses `-X` of a chain that a
            // chain flushed later in the same restore jumped to, even with those rules gone.
            let mine: Vec<_> = catalogue(proto)
                .0
                .into_iter()
                .filter(|(t, _)| *t == table)
                .collect();
            for (_, c) in &mine {
                s.flush(c);
            }
            for (_, c) in &mine {
                s.delete_chain(c);
            }
            s
        };
        assert!(
            direct_restore(&a, proto, table, &del),
            "{proto:?} {table}: direct -D of the tools' rules"
        );
        assert!(
            exec_restore(&b, proto, &render(table, &del)),
            "{proto:?} {table}: the tools' -D of direct rules"
        );
        assert!(dump(&a, proto, table).is_empty() && dump(&b, proto, table).is_empty());
        // A rule that is not there: not done directly, and nothing changed.
        let absent = format!(
            "-s {} -j ACCEPT",
            if proto == Proto::V4 {
                "10.1.2.3/32"
            } else {
                "fd00::123/128"
            }
        );
        assert!(Spec::parse(proto, &absent).is_some());
        let mut gone = Script::new();
        gone.new_chain("CNI-new").delete("FORWARD", &absent);
        assert!(!direct_restore(&a, proto, table, &gone));
        assert!(!direct_save(&a, proto, table).unwrap().has_chain("CNI-new"));
    }
}

#[test]
fn ipv4_rules_like_iptables_nft() {
    both_ways(Proto::V4);
}

#[test]
fn ipv6_rules_like_ip6tables_nft() {
    both_ways(Proto::V6);
}

#[test]
fn built_in_chains_created_like_the_tools() {
    for proto in [Proto::V4, Proto::V6] {
        let (a, b) = (Ns::new(), Ns::new());
        let mut s = Script::new();
        s.new_chain("CNI-x")
            .append("POSTROUTING", "-j CNI-x")
            .insert("PREROUTING", "-j CNI-x");
        assert!(exec_restore(&a, proto, &render("nat", &s)));
        assert!(direct_restore(&b, proto, "nat", &s));
        let list = |ns: &Ns| {
            let out = Command::new("ip")
                .args(["netns", "exec", &ns.0, "nft", "list", "ruleset"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(list(&a), list(&b));
        assert_eq!(exec_save(&a, proto, "nat"), exec_save(&b, proto, "nat"));
        // -I puts the rule first.
        let mut s = Script::new();
        s.insert("POSTROUTING", "-s 10.1.0.0/16 -j ACCEPT");
        if proto == Proto::V4 {
            assert!(direct_restore(&b, proto, "nat", &s));
            let saved = direct_save(&b, proto, "nat").unwrap();
            let first = saved.rules_in("POSTROUTING").next();
            assert_eq!(first, Some("-s 10.1.0.0/16 -j ACCEPT"));
        }
    }
}

#[test]
fn other_shapes_are_left_to_the_tools() {
    for (proto, spec) in [
        (
            Proto::V4,
            "-m statistic --mode random --probability 0.5 -j ACCEPT",
        ),
        (Proto::V4, "-j LOG"),
        (Proto::V4, "-i eth+ -j ACCEPT"),
        (Proto::V4, "-s 10.0.0.1 -j ACCEPT"),
        (Proto::V4, "-s fd00::1/128 -j ACCEPT"),
        (Proto::V6, "-s 10.0.0.1/32 -j ACCEPT"),
        (Proto::V4, "-p sctp -m sctp --dport 1 -j ACCEPT"),
        (Proto::V4, "-m tcp --dport 1 -j ACCEPT"),
        (Proto::V4, "-p tcp -m tcp ! --dport 1 -j ACCEPT"),
        (Proto::V4, "-j ACCEPT -s 10.0.0.1/32"),
        (Proto::V4, "-m conntrack ! --ctstate NEW -j ACCEPT"),
        (Proto::V4, "-m comment --comment \"unterminated -j ACCEPT"),
        (Proto::V4, "-j DNAT --to-destination 10.0.0.1:1-2"),
        (
            Proto::V4,
            "-p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 -j ACCEPT",
        ),
        (Proto::V4, ""),
    ] {
        assert_eq!(Spec::parse(proto, spec), None, "{spec}");
    }
    // A script with such a rule is not applied directly, in part or at all.
    let a = Ns::new();
    let mut s = Script::new();
    s.new_chain("CNI-y").append("CNI-y", "-j LOG");
    assert!(!direct_restore(&a, Proto::V4, "nat", &s));
    assert!(dump(&a, Proto::V4, "nat").is_empty());
    let mut m = Script::new();
    m.new_chain("X");
    assert!(!direct_restore(&a, Proto::V4, "mangle", &m));
}

/// The fuzz seeds (rule dumps of tables iptables-restore 1.8.9 wrote, tests/fuzz/nftables/)
/// read back whole: every rule in them decodes, so the fuzzer starts from rules that reach
/// the end of the decoder.
#[test]
fn captured_dumps_read_back() {
    for (file, proto, rules) in [
        ("iptables-nft-v4-rules.bin", Proto::V4, 19),
        ("iptables-nft-v6-rules.bin", Proto::V6, 9),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz/nftables")
            .join(file);
        let buf = std::fs::read(&path).unwrap();
        let mut n = 0;
        for m in crate::netlink::wire::messages(&buf) {
            let body = m.payload.get(4..).unwrap_or_default();
            for (_, exprs) in crate::netfilter::msg::attrs(body)
                .filter(|(ty, _)| *ty == super::NFTA_RULE_EXPRESSIONS)
            {
                let spec = wire::decode(proto, exprs).unwrap_or_else(|| panic!("{file}: rule {n}"));
                assert_eq!(Spec::parse(proto, &spec.render()), Some(spec));
                n += 1;
            }
        }
        assert_eq!(n, rules, "{file}");
    }
}
