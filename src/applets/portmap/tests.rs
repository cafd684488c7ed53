use super::iptables::{dn_rules, entry_rules, mark_def};
use super::*;
use crate::netfilter::{Rule, ct};

fn pm(maps: Vec<Mapping>) -> Portmap {
    Portmap {
        backend: Backend::Iptables,
        snat: true,
        masq_all: false,
        mark: 0x2000,
        set_mark_chain: None,
        cond4: Vec::new(),
        cond6: Vec::new(),
        maps,
        network: "net".into(),
        cid: "c1".into(),
        ifname: "eth0".into(),
    }
}

fn tcp(h: u16, c: u16) -> Mapping {
    Mapping {
        host_port: h,
        container_port: c,
        proto: "tcp",
        host_ip: None,
    }
}

#[test]
fn iptables_rules_in_saved_form() {
    let p = pm(vec![tcp(8080, 80)]);
    let cip: IpNet = "10.1.0.5/24".parse().unwrap();
    let r = dn_rules(&p, &cip);
    assert_eq!(
        r,
        vec![
            "-s 10.1.0.0/24 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
            "-s 127.0.0.1/32 -p tcp -m tcp --dport 8080 -j CNI-HOSTPORT-SETMARK",
            "-p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.1.0.5:80",
        ]
    );
    let e = entry_rules(&p, false);
    assert_eq!(e.len(), 1);
    assert!(e[0].starts_with(
        r#"-p tcp -m comment --comment "dnat name: \"net\" id: \"c1\"" -m multiport --dports 8080 -j CNI-DN-"#
    ));
    assert_eq!(mark_def(1 << 13), "0x2000/0x2000");
}

#[test]
fn ports_split_in_chunks_of_15() {
    let p = pm((1..=16).map(|i| tcp(1000 + i, 80)).collect());
    assert_eq!(entry_rules(&p, false).len(), 2);
}

#[test]
fn chain_names() {
    assert_eq!(dnat_chain("net", "cid").len(), 28);
    assert!(old_snat_chain("net", "cid").starts_with("CNI-SN-"));
}

fn cond(parts: &[&str], v6: bool) -> Result<Vec<Rule>> {
    let c: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
    nft_conditions(&c, v6, if v6 { "conditionsV6" } else { "conditionsV4" })
}

#[test]
fn nft_conditions_parse() {
    let one = cond(&["ip saddr != 10.0.0.0/8", "iifname", "\"eth0\""], false).unwrap();
    assert_eq!(
        one,
        vec![
            Rule::new()
                .saddr_not("10.0.0.0/8".parse::<IpNet>().unwrap())
                .iifname("eth0")
        ]
    );
    assert!(cond(&["ip saddr != 10.0.0.0/8"], true).is_err());
    // Anonymous sets: a positive set is one rule per element, a negated one all `!=`s.
    let set = cond(&["ip saddr { 127.0.0.0/8, 10.0.0.1 }"], false).unwrap();
    assert_eq!(
        set,
        vec![
            Rule::new().saddr("127.0.0.0/8".parse::<IpNet>().unwrap()),
            Rule::new().saddr("10.0.0.1/32".parse::<IpNet>().unwrap()),
        ]
    );
    assert_eq!(
        cond(&["ip", "daddr", "{10.0.0.1,10.0.0.2}"], false)
            .unwrap()
            .len(),
        2
    );
    let neg = cond(&["ip saddr != { 127.0.0.0/8, 10.0.0.1 }"], false).unwrap();
    assert_eq!(
        neg,
        vec![
            Rule::new()
                .saddr_not("127.0.0.0/8".parse::<IpNet>().unwrap())
                .saddr_not("10.0.0.1/32".parse::<IpNet>().unwrap())
        ]
    );
    assert_eq!(
        cond(
            &["meta mark 0x10", "th dport != 22", "meta l4proto tcp"],
            false
        )
        .unwrap(),
        vec![
            Rule::new()
                .mark(0x10, false)
                .port(true, 22, true)
                .l4proto(TCP)
        ]
    );
    assert_eq!(
        cond(&["tcp dport { 80, 443 } oifname != \"lo\""], true).unwrap(),
        vec![
            Rule::new().l4proto(TCP).dport(80).oifname_not("lo"),
            Rule::new().l4proto(TCP).dport(443).oifname_not("lo"),
        ]
    );
    assert_eq!(
        cond(&["ip6 daddr == ::1", "mark != 7"], true)
            .unwrap()
            .len(),
        1
    );
    assert_eq!(cond(&[], false).unwrap(), vec![Rule::new()]);
    // What users write beyond addresses and ports (issue 26): fib, ct state lists (one match
    // of all their bits), iif/oif by index (lo is 1 in every namespace).
    assert_eq!(
        cond(
            &[
                "fib daddr type local",
                "ct state established,related",
                "ct state != invalid , untracked",
                "meta iif lo",
                "oif != \"lo\"",
                "fib saddr type != broadcast",
                "ip daddr != 10.1.2.3"
            ],
            false
        )
        .unwrap(),
        vec![
            Rule::new()
                .fib_daddr_local()
                .ct_state(ct::ESTABLISHED | ct::RELATED)
                .ct_state_not(ct::INVALID | ct::UNTRACKED)
                .ifindex(false, 1, false)
                .ifindex(true, 1, true)
                .fib_type(false, 3, true)
                .daddr_not("10.1.2.3/32".parse::<IpNet>().unwrap())
        ]
    );
    assert_eq!(
        cond(
            &["ct state { new, untracked }", "ip6 daddr fd00::/64"],
            true
        )
        .unwrap(),
        vec![
            Rule::new()
                .ct_state(ct::NEW)
                .daddr("fd00::/64".parse::<IpNet>().unwrap()),
            Rule::new()
                .ct_state(ct::UNTRACKED)
                .daddr("fd00::/64".parse::<IpNet>().unwrap()),
        ]
    );
    // Every error is code 7, names the key and the offending token.
    for (parts, v6, token) in [
        (&["meta foo 1"][..], false, "\"foo\""),
        (&["ct status dnat"][..], false, "\"status\""),
        (&["ct state bogus"][..], false, "unknown state"),
        (&["ct state established,"][..], false, "missing state"),
        (&["fib daddr . iif type local"][..], false, "fib"),
        (&["fib daddr type nowhere"][..], false, "unknown route type"),
        (&["iif nosuchif0"][..], false, "no interface"),
        (&["meta oif \"x\ny\""][..], false, "control character"),
        (&["ip protocol tcp"][..], false, "\"protocol\""),
        (&["ip daddr @allowed"][..], false, "bad address"),
        (&["ip saddr"][..], false, "missing value"),
        (&["ip saddr { 10.0.0.1"][..], false, "unterminated set"),
        (&["ip saddr {}"][..], false, "empty set"),
        (&["ip saddr fd00::1"][..], false, "not an IPv4"),
        (&["ip6 saddr fd00::1"][..], false, "does not apply to IPv4"),
        (&["th dport 1000-2000"][..], false, "ranges"),
        (&["tcp dport http"][..], false, "bad port"),
        (&["iifname \"eth0"][..], false, "unterminated"),
        (
            &["iifname \"averyveryverylongname\""][..],
            false,
            "bad interface",
        ),
        (&["iifname eth*"][..], false, "wildcard"),
        (
            &["ip saddr 10.0.0.1\n;add rule ip x y drop"][..],
            false,
            "control character",
        ),
        (&["ip saddr 10.0.0.1 ; drop"][..], false, "\";\""),
        (
            &[
                "ip saddr { 1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, 1.1.1.8 } ip daddr { 1.1.1.1, 1.1.1.2, 1.1.1.3, 1.1.1.4, 1.1.1.5, 1.1.1.6, 1.1.1.7, 1.1.1.8, 1.1.1.9 }",
            ][..],
            false,
            "more than 64",
        ),
    ] {
        let e = cond(parts, v6).unwrap_err();
        assert_eq!(e.code, crate::cni::error::code::INVALID_CONFIG, "{parts:?}");
        assert!(e.msg.starts_with("conditionsV4: "), "{}", e.msg);
        assert!(e.msg.contains(token), "{parts:?}: {}", e.msg);
    }
}
