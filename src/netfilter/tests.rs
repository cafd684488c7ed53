//! Tests against the kernel, each in its own network namespace: rules built here must list
//! exactly like the same rules loaded with `nft -f` in a twin namespace.

use super::msg;
use super::nft::Policy;
use super::rule::{SCTP, TCP, UDP, ct};
use super::*;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) struct Ns(pub(crate) String);

impl Ns {
    pub(crate) fn new() -> Ns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "cnibox-nft-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("ip netns add");
        assert!(st.success(), "ip netns add {name}");
        Ns(name)
    }
    pub(crate) fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.0)
    }
    pub(crate) fn open(&self) -> Nftables {
        Nftables::open_in(&self.path()).expect("open nft in netns")
    }
    fn nft(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut c = Command::new("ip")
            .args(["netns", "exec", &self.0, "nft"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nft");
        if let Some(s) = stdin {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(s.as_bytes())
                .expect("write");
        }
        drop(c.stdin.take());
        let out = c.wait_with_output().expect("nft");
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn ruleset(&self) -> String {
        self.nft(&["list", "ruleset"], None)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}
fn net(s: &str) -> ipnet::IpNet {
    s.parse().expect("net")
}

/// Apply `b` in one namespace, `text` with nft in another; the listings and the kernel's
/// encoding of every rule must be identical.
fn same_as_nft(b: &Batch, tables: &[Table], text: &str) -> (Ns, String) {
    let (mine, theirs) = (Ns::new(), Ns::new());
    mine.open().apply(b).expect("apply");
    theirs.nft(&["-f", "-"], Some(text));
    let listing = mine.ruleset();
    assert_eq!(listing, theirs.ruleset());
    let (mut a, mut z) = (mine.open(), theirs.open());
    for t in tables {
        let (ra, rz) = (
            a.rules(t, None).expect("rules"),
            z.rules(t, None).expect("rules"),
        );
        assert_eq!(ra.len(), rz.len());
        for (x, y) in ra.iter().zip(&rz) {
            assert_eq!(
                (&x.chain, &x.comment, &x.exprs),
                (&y.chain, &y.comment, &y.exprs),
                "{t}"
            );
        }
        assert_eq!(a.chains(t).expect("chains"), z.chains(t).expect("chains"));
    }
    (mine, listing)
}

#[test]
fn udata_roundtrip() {
    let u = msg::udata_comment("abc").expect("short");
    assert_eq!(u, b"\x00\x04abc\x00");
    assert_eq!(msg::udata_get_comment(&u).as_deref(), Some("abc"));
    assert_eq!(
        msg::udata_get_comment(b"\x01\x01x\x00\x02y\x00").as_deref(),
        Some("y")
    );
    assert!(msg::udata_comment(&"x".repeat(300)).is_none());
}

#[test]
fn masquerade_like_upstream() {
    if !crate::testing::require_root("netfilter::masquerade_like_upstream") {
        return;
    }
    let t = Table::new(Family::Inet, "cni_plugins_masquerade");
    let mut b = Batch::new();
    b.add_table(
        &t,
        Some("Masquerading for plugins from github.com/containernetworking/plugins"),
    )
    .add_chain(
        &t,
        "postrouting",
        Some(BaseChain::new(ChainType::Nat, Hook::Postrouting, 100)),
    )
    .add_chain(&t, "masq_checks", None)
    .add_rule(
        &t,
        "postrouting",
        &Rule::new().daddr(net("224.0.0.0/4")).ret(),
    )
    .add_rule(&t, "postrouting", &Rule::new().daddr(net("ff00::/8")).ret())
    .add_rule(&t, "postrouting", &Rule::new().goto("masq_checks"))
    .add_rule(
        &t,
        "masq_checks",
        &Rule::new()
            .saddr(ip("10.88.0.5"))
            .daddr_not(net("10.88.0.0/16"))
            .masquerade()
            .comment("abc, net1"),
    )
    .add_rule(
        &t,
        "masq_checks",
        &Rule::new()
            .saddr(ip("fd00::5"))
            .daddr_not(net("fd00::/64"))
            .masquerade()
            .comment("abc, net1"),
    );
    let text = r#"table inet cni_plugins_masquerade {
  comment "Masquerading for plugins from github.com/containernetworking/plugins"
  chain postrouting { type nat hook postrouting priority srcnat; policy accept;
    ip daddr 224.0.0.0/4 return
    ip6 daddr ff00::/8 return
    goto masq_checks
  }
  chain masq_checks {
    ip saddr 10.88.0.5 ip daddr != 10.88.0.0/16 masquerade comment "abc, net1"
    ip6 saddr fd00::5 ip6 daddr != fd00::/64 masquerade comment "abc, net1"
  }
}
"#;
    let (ns, listing) = same_as_nft(&b, std::slice::from_ref(&t), text);
    assert!(
        listing.contains(
            "ip saddr 10.88.0.5 ip daddr != 10.88.0.0/16 masquerade comment \"abc, net1\""
        )
    );
    assert!(listing.contains("type nat hook postrouting priority srcnat; policy accept;"));
    let json = ns.nft(&["-j", "list", "ruleset"], None);
    assert!(json.contains(r#""comment": "abc, net1""#), "{json}");
    assert!(
        listing.contains("comment \"Masquerading for plugins"),
        "{listing}"
    );
    // Adding the table again is idempotent.
    let mut nft = ns.open();
    nft.apply(Batch::new().add_table(&t, None))
        .expect("re-add table");
    assert!(nft.table_exists(&t).expect("exists"));
}

#[test]
fn portmap_like_upstream() {
    if !crate::testing::require_root("netfilter::portmap_like_upstream") {
        return;
    }
    let t4 = Table::new(Family::Ip, "cni_hostport");
    let t6 = Table::new(Family::Ip6, "cni_hostport");
    let mut b = Batch::new();
    for t in [&t4, &t6] {
        b.add_table(t, None)
            .add_chain(t, "hostports", None)
            .add_chain(t, "hostip_hostports", None)
            .add_chain(t, "masquerading", None)
            .add_chain(
                t,
                "prerouting",
                Some(BaseChain::new(ChainType::Nat, Hook::Prerouting, -100)),
            )
            .add_chain(
                t,
                "output",
                Some(BaseChain::new(ChainType::Nat, Hook::Output, -100)),
            )
            .add_chain(
                t,
                "postrouting",
                Some(BaseChain::new(ChainType::Nat, Hook::Postrouting, 100)),
            )
            .add_rule(
                t,
                "prerouting",
                &Rule::new().fib_daddr_local().jump("hostports"),
            )
            .add_rule(
                t,
                "output",
                &Rule::new().fib_daddr_local().jump("hostports"),
            )
            .add_rule(t, "prerouting", &Rule::new().jump("hostip_hostports"))
            .add_rule(t, "postrouting", &Rule::new().jump("masquerading"));
    }
    let c = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    b.add_rule(
        &t4,
        "hostports",
        &Rule::new()
            .l4proto(TCP)
            .dport(8080)
            .dnat(ip("10.88.0.5"), Some(80))
            .comment(c),
    )
    .add_rule(
        &t4,
        "hostports",
        &Rule::new()
            .l4proto(UDP)
            .dport(5353)
            .dnat(ip("10.88.0.5"), Some(53))
            .comment(c),
    )
    .add_rule(
        &t4,
        "hostports",
        &Rule::new()
            .l4proto(SCTP)
            .dport(99)
            .dnat(ip("10.88.0.5"), Some(99))
            .comment(c),
    )
    .add_rule(
        &t4,
        "hostip_hostports",
        &Rule::new()
            .daddr(ip("192.168.1.1"))
            .l4proto(TCP)
            .dport(8081)
            .dnat(ip("10.88.0.5"), Some(80))
            .comment(c),
    )
    .add_rule(
        &t4,
        "masquerading",
        &Rule::new()
            .saddr(net("10.88.0.0/16"))
            .daddr(ip("10.88.0.5"))
            .masquerade()
            .comment(c),
    )
    .add_rule(
        &t4,
        "masquerading",
        &Rule::new()
            .saddr(ip("127.0.0.1"))
            .daddr(ip("10.88.0.5"))
            .masquerade()
            .comment(c),
    )
    .add_rule(
        &t6,
        "hostports",
        &Rule::new()
            .l4proto(TCP)
            .dport(8080)
            .dnat(ip("fd00::5"), Some(80))
            .comment(c),
    )
    .add_rule(
        &t6,
        "hostports",
        &Rule::new()
            .l4proto(TCP)
            .dport(8082)
            .dnat(ip("fd00::5"), None),
    )
    .add_rule(
        &t6,
        "masquerading",
        &Rule::new()
            .saddr(net("fd00::/64"))
            .daddr(ip("fd00::5"))
            .masquerade(),
    );
    let common = |fam: &str, extra: &str| {
        format!(
            r#"table {fam} cni_hostport {{
  chain hostports {{ }}
  chain hostip_hostports {{ }}
  chain masquerading {{ }}
  chain prerouting {{ type nat hook prerouting priority dstnat; policy accept;
    fib daddr type local jump hostports
    jump hostip_hostports
  }}
  chain output {{ type nat hook output priority -100; policy accept;
    fib daddr type local jump hostports
  }}
  chain postrouting {{ type nat hook postrouting priority srcnat; policy accept;
    jump masquerading
  }}
}}
{extra}"#
        )
    };
    let text = common("ip", "")
        + &common("ip6", "")
        + &format!(
            r#"add rule ip cni_hostport hostports tcp dport 8080 dnat to 10.88.0.5:80 comment "{c}"
add rule ip cni_hostport hostports udp dport 5353 dnat to 10.88.0.5:53 comment "{c}"
add rule ip cni_hostport hostports meta l4proto sctp th dport 99 dnat to 10.88.0.5:99 comment "{c}"
add rule ip cni_hostport hostip_hostports ip daddr 192.168.1.1 tcp dport 8081 dnat to 10.88.0.5:80 comment "{c}"
add rule ip cni_hostport masquerading ip saddr 10.88.0.0/16 ip daddr 10.88.0.5 masquerade comment "{c}"
add rule ip cni_hostport masquerading ip saddr 127.0.0.1 ip daddr 10.88.0.5 masquerade comment "{c}"
add rule ip6 cni_hostport hostports tcp dport 8080 dnat to [fd00::5]:80 comment "{c}"
add rule ip6 cni_hostport hostports tcp dport 8082 dnat to fd00::5
add rule ip6 cni_hostport masquerading ip6 saddr fd00::/64 ip6 daddr fd00::5 masquerade
"#
        );
    let (ns, listing) = same_as_nft(&b, &[t4.clone(), t6.clone()], &text);
    assert!(
        listing.contains(&format!(
            "tcp dport 8080 dnat to [fd00::5]:80 comment \"{c}\""
        )),
        "{listing}"
    );
    assert!(
        listing.contains("sctp dport 99 dnat to 10.88.0.5:99"),
        "{listing}"
    );
    // Find the container's rules by comment and delete them by handle.
    let mut nft = ns.open();
    let mut del = Batch::new();
    for t in [&t4, &t6] {
        for r in nft.rules(t, None).expect("rules") {
            if r.comment.as_deref() == Some(c) {
                del.del_rule(t, &r.chain, r.handle);
            }
        }
    }
    nft.apply(&del).expect("delete rules");
    let after = ns.ruleset();
    assert!(!after.contains(c), "{after}");
    assert!(after.contains("dnat to fd00::5"), "{after}");
}

#[test]
fn firewall_rules() {
    if !crate::testing::require_root("netfilter::firewall_rules") {
        return;
    }
    let t = Table::new(Family::Inet, "cni_firewall");
    let mut b = Batch::new();
    b.add_table(&t, None)
        .add_chain(
            &t,
            "forward",
            Some(BaseChain::new(ChainType::Filter, Hook::Forward, 0).policy(Policy::Drop)),
        )
        .add_chain(&t, "from_cni0", None)
        .add_rule(
            &t,
            "forward",
            &Rule::new()
                .daddr(ip("10.88.0.5"))
                .ct_state(ct::ESTABLISHED | ct::RELATED)
                .accept(),
        )
        .add_rule(
            &t,
            "forward",
            &Rule::new()
                .daddr(ip("fd00::5"))
                .ct_state(ct::ESTABLISHED | ct::RELATED)
                .accept(),
        )
        .add_rule(&t, "forward", &Rule::new().saddr(ip("10.88.0.5")).accept())
        .add_rule(
            &t,
            "forward",
            &Rule::new()
                .iifname("cni0")
                .oifname_not("cni0")
                .jump("from_cni0"),
        )
        .add_rule(&t, "forward", &Rule::new().oifname("cni0").drop())
        .add_rule(
            &t,
            "forward",
            &Rule::new().iifname_not("lo").counter().accept(),
        )
        .add_rule(
            &t,
            "forward",
            &Rule::new().ct_state(ct::NEW).l4proto(TCP).sport(22).ret(),
        )
        .add_rule(&t, "from_cni0", &Rule::new().ret())
        .add_rule(&t, "from_cni0", &Rule::new().drop())
        .insert_rule(&t, "from_cni0", &Rule::new().accept().comment("first"));
    let text = r#"table inet cni_firewall {
  chain forward { type filter hook forward priority filter; policy drop;
    ip daddr 10.88.0.5 ct state established,related accept
    ip6 daddr fd00::5 ct state established,related accept
    ip saddr 10.88.0.5 accept
    iifname "cni0" oifname != "cni0" jump from_cni0
    oifname "cni0" drop
    iifname != "lo" counter accept
    ct state new tcp sport 22 return
  }
  chain from_cni0 {
    accept comment "first"
    return
    drop
  }
}
"#;
    let (ns, _) = same_as_nft(&b, std::slice::from_ref(&t), text);
    let mut nft = ns.open();
    let chains = nft.chains(&t).expect("chains");
    assert_eq!(chains.len(), 2);
    assert_eq!(
        chains[0].base,
        Some(BaseChain {
            kind: ChainType::Filter,
            hook: Hook::Forward,
            priority: 0,
            policy: Policy::Drop
        })
    );
    assert_eq!(
        (chains[1].name.as_str(), chains[1].base),
        ("from_cni0", None)
    );
}

#[test]
fn nft_added_rules_found_and_deleted() {
    if !crate::testing::require_root("netfilter::nft_added_rules_found_and_deleted") {
        return;
    }
    let ns = Ns::new();
    ns.nft(
        &["-f", "-"],
        Some(
            r#"table ip6 t {
  chain a {
    tcp dport 1 accept comment "keep"
    tcp dport 2 drop comment "gone"
  }
  chain b {
    drop comment "gone"
  }
}
table ip t {
  chain a {
    accept comment "gone"
  }
}
"#,
        ),
    );
    let t = Table::new(Family::Ip6, "t");
    let mut nft = ns.open();
    let rules = nft.rules(&t, None).expect("rules");
    let listed = ns.nft(&["-a", "list", "table", "ip6", "t"], None);
    let gone: Vec<_> = rules
        .iter()
        .filter(|r| r.comment.as_deref() == Some("gone"))
        .collect();
    assert_eq!(gone.len(), 2);
    for r in &gone {
        assert!(
            listed.contains(&format!("comment \"gone\" # handle {}", r.handle)),
            "{listed}"
        );
    }
    assert_eq!(nft.rules(&t, Some("b")).expect("rules").len(), 1);
    let mut b = Batch::new();
    for r in gone {
        b.del_rule(&t, &r.chain, r.handle);
    }
    nft.apply(&b).expect("delete");
    let after = ns.ruleset();
    assert!(after.contains("comment \"keep\""));
    assert_eq!(after.matches("\"gone\"").count(), 1, "{after}"); // the ip table's rule remains
    assert!(
        nft.rules(&Table::new(Family::Ip, "absent"), None)
            .expect("rules")
            .is_empty()
    );
}

#[test]
fn objects_errors_and_atomicity() {
    if !crate::testing::require_root("netfilter::objects_errors_and_atomicity") {
        return;
    }
    let ns = Ns::new();
    let mut nft = ns.open();
    let t = Table::new(Family::Inet, "x");
    // A failing operation rolls back the whole batch and names the object.
    let mut b = Batch::new();
    b.add_table(&t, None)
        .add_rule(&t, "nochain", &Rule::new().accept());
    let e = nft.apply(&b).expect_err("missing chain");
    assert_eq!(
        e.msg,
        "nftables: add rule to inet x nochain: No such file or directory"
    );
    assert!(!nft.table_exists(&t).expect("exists"));
    // Objects, existence and head insertion.
    let mut b = Batch::new();
    b.add_table(&t, Some("c"))
        .add_chain(&t, "c1", None)
        .add_chain(&t, "c2", None)
        .add_rule(&t, "c1", &Rule::new().jump("c2"))
        .add_rule(&t, "c2", &Rule::new().accept());
    nft.apply(&b).expect("apply");
    assert!(nft.table_exists(&t).expect("exists"));
    assert!(nft.chain_exists(&t, "c1").expect("exists"));
    assert!(!nft.chain_exists(&t, "c3").expect("exists"));
    assert!(
        !nft.chain_exists(&Table::new(Family::Ip, "x"), "c1")
            .expect("exists")
    );
    // c2 is referenced: deleting it is refused (after retries, as a try-again error).
    let e = nft
        .apply(Batch::new().del_chain(&t, "c2"))
        .expect_err("busy");
    assert_eq!(e.code, crate::error::code::TRY_AGAIN_LATER);
    assert!(
        e.msg.starts_with("nftables: delete chain inet x c2: "),
        "{}",
        e.msg
    );
    nft.apply(Batch::new().flush_chain(&t, "c1").del_chain(&t, "c2"))
        .expect("flush+delete");
    assert!(!nft.chain_exists(&t, "c2").expect("exists"));
    assert_eq!(nft.chains(&t).expect("chains").len(), 1);
    // Family mismatch is reported before anything is sent.
    let t4 = Table::new(Family::Ip, "y");
    let e = nft
        .apply(
            Batch::new()
                .add_table(&t4, None)
                .add_chain(&t4, "c", None)
                .add_rule(&t4, "c", &Rule::new().saddr(ip("::1")).accept()),
        )
        .expect_err("v6 in ip");
    assert!(
        e.msg.starts_with("nftables: add rule to ip y c: "),
        "{}",
        e.msg
    );
    assert!(!nft.table_exists(&t4).expect("exists"));
    // Deleting the table is idempotent through ensure_no_table.
    nft.apply(Batch::new().ensure_no_table(&t)).expect("delete");
    nft.apply(Batch::new().ensure_no_table(&t))
        .expect("delete again");
    assert!(!nft.table_exists(&t).expect("exists"));
    let e = nft.apply(Batch::new().del_table(&t)).expect_err("missing");
    assert_eq!(
        e.msg,
        "nftables: delete table inet x: No such file or directory"
    );
    assert_eq!(ns.ruleset(), "");
}

#[test]
fn bridge_family_dependencies() {
    if !crate::testing::require_root("netfilter::bridge_family_dependencies") {
        return;
    }
    let t = Table::new(Family::Bridge, "br");
    let mut b = Batch::new();
    b.add_table(&t, None)
        .add_chain(
            &t,
            "bfilter",
            Some(BaseChain::new(ChainType::Filter, Hook::Forward, 0)),
        )
        .add_rule(
            &t,
            "bfilter",
            &Rule::new()
                .saddr(net("10.0.0.0/8"))
                .l4proto(TCP)
                .dport(80)
                .accept(),
        )
        .add_rule(&t, "bfilter", &Rule::new().daddr(ip("fd00::1")).drop());
    let text = r#"table bridge br { chain bfilter { type filter hook forward priority 0; policy accept;
  ip saddr 10.0.0.0/8 tcp dport 80 accept
  ip6 daddr fd00::1 drop
}
}
"#;
    same_as_nft(&b, std::slice::from_ref(&t), text);
}

#[test]
fn dnat_real_traffic() {
    if !crate::testing::require_root("netfilter::dnat_real_traffic") {
        return;
    }
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let ns = Ns::new();
    for a in ["10.88.0.5/32", "192.168.1.1/32"] {
        let st = Command::new("ip")
            .args(["-n", &ns.0, "addr", "add", a, "dev", "lo"])
            .status()
            .expect("ip addr");
        assert!(st.success());
    }
    let st = Command::new("ip")
        .args(["-n", &ns.0, "link", "set", "lo", "up"])
        .status()
        .expect("ip link");
    assert!(st.success());
    let t = Table::new(Family::Ip, "cni_hostport");
    let mut b = Batch::new();
    b.add_table(&t, None)
        .add_chain(&t, "hostports", None)
        .add_chain(
            &t,
            "output",
            Some(BaseChain::new(ChainType::Nat, Hook::Output, -100)),
        )
        .add_rule(
            &t,
            "output",
            &Rule::new().fib_daddr_local().jump("hostports"),
        )
        .add_rule(
            &t,
            "hostports",
            &Rule::new()
                .l4proto(TCP)
                .dport(8080)
                .dnat(ip("10.88.0.5"), Some(80))
                .comment("c"),
        );
    ns.open().apply(&b).expect("apply");
    let path = ns.path();
    let got = std::thread::spawn(move || {
        let f = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        let l = TcpListener::bind("10.88.0.5:80").expect("bind");
        let mut c = TcpStream::connect("192.168.1.1:8080").expect("connect through dnat");
        c.write_all(b"hi").expect("write");
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = [0; 2];
        s.read_exact(&mut buf).expect("read");
        buf
    })
    .join()
    .expect("thread");
    assert_eq!(&got, b"hi");
}

#[test]
fn big_batch() {
    if !crate::testing::require_root("netfilter::big_batch") {
        return;
    }
    let ns = Ns::new();
    let t = Table::new(Family::Ip, "big");
    let mut b = Batch::new();
    b.add_table(&t, None).add_chain(&t, "c", None);
    for p in 1..=3000u16 {
        b.add_rule(
            &t,
            "c",
            &Rule::new()
                .l4proto(TCP)
                .dport(p)
                .dnat(ip("10.0.0.1"), Some(p))
                .comment(format!("r{p}")),
        );
    }
    let mut nft = ns.open();
    nft.apply(&b).expect("apply");
    let rules = nft.rules(&t, Some("c")).expect("rules");
    assert_eq!(rules.len(), 3000);
    assert_eq!(rules[2999].comment.as_deref(), Some("r3000"));
    // A failure late in a big batch still rolls everything back and is reported.
    b.add_rule(&t, "missing", &Rule::new().accept());
    let e = nft
        .apply(b.del_table(&t).add_table(&t, None))
        .expect_err("fails");
    assert_eq!(
        e.msg,
        "nftables: add rule to ip big missing: No such file or directory"
    );
    assert_eq!(nft.rules(&t, None).expect("rules").len(), 3000);
}

#[test]
fn restore_script_refuses_line_breaks_and_nul() {
    use super::iptables::{Script, validate_chain_name, validate_condition_tokens};
    for bad in ["X\n-A INPUT -j DROP", "X\r", "X\0"] {
        let mut s = Script::new();
        s.append("CNI-FORWARD", &format!("-j {bad}"));
        let e = s.check().unwrap_err();
        assert_eq!(e.code, 7, "{bad:?}");
        let mut s = Script::new();
        s.new_chain(bad);
        assert!(s.check().is_err());
    }
    let mut s = Script::new();
    s.append("CNI-FORWARD", "-m comment --comment \"a b\" -j ACCEPT");
    assert!(s.check().is_ok());
    assert!(validate_chain_name("k", "CNI-ADMIN").is_ok());
    assert!(validate_chain_name("k", &"C".repeat(28)).is_ok());
    for bad in [
        "",
        "-X",
        "!X",
        "a b",
        "a\"b",
        "DROP",
        "X\n",
        &"C".repeat(29),
    ] {
        let e = validate_chain_name("iptablesAdminChainName", bad).unwrap_err();
        assert!(e.msg.starts_with("iptablesAdminChainName: "), "{}", e.msg);
    }
    let ok: Vec<String> = ["-s", "10.0.0.0/8", "!", "-d", "1.2.3.4"]
        .map(String::from)
        .into();
    assert!(validate_condition_tokens("conditionsV4", &ok).is_ok());
    for bad in ["-j", "--goto", "-A", "a\nb", ""] {
        let toks = vec!["-s".to_string(), bad.to_string()];
        let e = validate_condition_tokens("conditionsV4", &toks).unwrap_err();
        assert!(e.msg.starts_with("conditionsV4[1]: "), "{}", e.msg);
    }
}

#[test]
fn condition_statements_like_nft() {
    if !crate::testing::require_root("netfilter::condition_statements_like_nft") {
        return;
    }
    let t = Table::new(Family::Ip, "t");
    let mut b = Batch::new();
    b.add_table(&t, None).add_chain(&t, "c", None).add_rule(
        &t,
        "c",
        &Rule::new()
            .mark(0x10, false)
            .port(true, 22, true)
            .l4proto_not(TCP)
            .mark(7, true)
            .accept(),
    );
    // portmap's conditions users write: fib types, ct state lists both ways, iif/oif by index.
    b.add_rule(
        &t,
        "c",
        &Rule::new()
            .fib_daddr_local()
            .ct_state(ct::ESTABLISHED | ct::RELATED)
            .ct_state_not(ct::INVALID | ct::UNTRACKED)
            .ifindex(false, 1, false)
            .ifindex(true, 1, true)
            .fib_type(false, libc::RTN_BROADCAST as u32, true)
            .accept(),
    );
    same_as_nft(
        &b,
        &[t],
        "table ip t { chain c { meta mark 0x00000010 th dport != 22 meta l4proto != tcp \
         meta mark != 0x00000007 accept; \
         fib daddr type local ct state established,related ct state != invalid,untracked \
         iif \"lo\" oif != \"lo\" fib saddr type != broadcast accept; }; }",
    );
}

#[test]
fn hostile_names_refused_before_sending() {
    if !crate::testing::require_root("netfilter::hostile_names_refused_before_sending") {
        return;
    }
    let t = Table::new(Family::Ip, "t");
    for (b, what) in [
        {
            let mut b = Batch::new();
            b.add_chain(&t, "a\0b", None);
            (b, "chain")
        },
        {
            let mut b = Batch::new();
            b.add_chain(&t, &"c".repeat(256), None);
            (b, "chain")
        },
        {
            let mut b = Batch::new();
            b.add_rule(&t, "c", &Rule::new().iifname("et\0h0").accept());
            (b, "interface")
        },
        {
            let mut b = Batch::new();
            b.add_rule(&t, "c", &Rule::new().accept().comment("x\0y"));
            (b, "comment")
        },
        {
            let mut b = Batch::new();
            b.add_rule(&t, "c", &Rule::new().jump("x\0y"));
            (b, "jump")
        },
    ] {
        let ns = Ns::new();
        let e = ns.open().apply(&b).unwrap_err();
        assert_eq!(e.code, crate::error::code::INVALID_CONFIG, "{what}: {e:?}");
        assert_eq!(ns.ruleset(), "", "{what}");
    }
}
