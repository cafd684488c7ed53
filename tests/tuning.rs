//! tuning chained after a main plugin: a container namespace with `eth0` (a veth whose peer
//! stays in a throwaway node namespace) and a hand-made prevResult. Sysctls and interface
//! attributes after ADD, restored after DEL, the backup file byte for byte against the Go
//! plugin's, ADD by one implementation and DEL by the other, CHECK, a failed ADD undone, and
//! bad input refused before anything changes.

mod common;
use common::env::env_for;
use common::*;
use serde_json::{Value, json};

struct Box1 {
    node: NetNs,
    cont: NetNs,
    sb: Sandbox,
}

const ORIG_MAC: &str = "02:00:00:00:00:aa";

/// A container with `eth0` (MTU 1500, MAC 02:00:00:00:00:aa, txqueuelen 1000, promisc and
/// allmulti off); the applet links in the sandbox include `tuning`.
fn setup(tag: &str) -> Box1 {
    let sb = Sandbox::new(tag);
    let link = sb.bin.join("tuning");
    if !link.exists() {
        std::os::unix::fs::symlink(bin(), &link).unwrap();
    }
    let node = NetNs::create();
    let cont = NetNs::create();
    node.sh(&[
        "ip", "link", "add", "tn0", "type", "veth", "peer", "name", "eth0", "netns", &cont.name,
    ]);
    cont.sh(&[
        "ip", "link", "set", "eth0", "address", ORIG_MAC, "mtu", "1500",
    ]);
    cont.sh(&["ip", "link", "set", "eth0", "txqueuelen", "1000", "up"]);
    Box1 { node, cont, sb }
}

impl Box1 {
    fn env(&self, cid: &str) -> Env {
        env_for(&self.cont, cid)
    }

    fn conf(&self, version: &str, keys: Value) -> Value {
        let mut c = json!({
            "cniVersion": version, "name": "tunenet", "type": "tuning",
            "dataDir": self.sb.path("tuning").display().to_string(),
            "prevResult": {"cniVersion": version,
                "interfaces": [{"name": "tn0"}, {"name": "eth0", "mac": ORIG_MAC, "sandbox": self.cont.path()}],
                "ips": [{"address": "10.91.0.2/24", "interface": 1}]},
        });
        for (k, v) in keys.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    /// `ip -d link show eth0` in the container.
    fn link(&self) -> String {
        self.cont.sh(&["ip", "-d", "link", "show", "eth0"])
    }

    fn sysctl(&self, path: &str) -> String {
        self.cont.sh(&["cat", path]).trim().to_string()
    }

    fn backup(&self, cid: &str) -> Option<String> {
        std::fs::read_to_string(self.sb.path(&format!("tuning/{cid}_eth0.json"))).ok()
    }
}

const RP_FILTER: &str = "/proc/sys/net/ipv4/conf/eth0/rp_filter";

/// Everything tuning can change, except `txQLen` (the Go v1.1.1 reference predates it).
fn keys_v111() -> Value {
    json!({"mac": "02:00:00:00:00:bb", "mtu": 1400, "promisc": true, "allmulti": true,
           "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}})
}

fn assert_tuned(b: &Box1) {
    let l = b.link();
    assert!(
        l.contains("02:00:00:00:00:bb") && l.contains("mtu 1400"),
        "{l}"
    );
    assert!(l.contains("PROMISC") && l.contains("ALLMULTI"), "{l}");
    assert_eq!(b.sysctl(RP_FILTER), "2");
}

fn assert_restored(b: &Box1) {
    let l = b.link();
    assert!(l.contains(ORIG_MAC) && l.contains("mtu 1500"), "{l}");
    assert!(!l.contains("PROMISC") && !l.contains("ALLMULTI"), "{l}");
}

#[test]
fn add_check_del() {
    if !require_root("tuning add_check_del") {
        return;
    }
    let b = setup("tuning-basic");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_rp = b.sysctl(RP_FILTER);
    let mut keys = keys_v111();
    keys["txQLen"] = json!(500);
    let c = b.conf("1.0.0", keys);
    let r = pl.add("tuning", &b.env("t1"), &c).ok().clone();
    // The result is the prevResult with the new MAC on eth0.
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:bb", "{r}");
    assert_eq!(r["interfaces"][0]["name"], "tn0", "{r}");
    assert_eq!(r["ips"][0]["address"], "10.91.0.2/24", "{r}");
    assert_tuned(&b);
    assert!(b.link().contains("qlen 500"), "{}", b.link());
    let saved: Value = serde_json::from_str(&b.backup("t1").expect("backup file")).unwrap();
    assert_eq!(
        saved,
        json!({"mac": ORIG_MAC, "promisc": false, "mtu": 1500, "allmulti": false, "txQLen": 1000})
    );

    let checked = with_prev(&c, &r);
    assert!(pl.check("tuning", &b.env("t1"), &checked).status_ok);
    // CHECK sees a change behind its back, naming what differs.
    b.cont.sh(&["ip", "link", "set", "eth0", "mtu", "1450"]);
    let msg = pl.check("tuning", &b.env("t1"), &checked).err(999);
    assert!(
        msg.contains("MTU") && msg.contains("1400") && msg.contains("1450"),
        "{msg}"
    );
    b.cont.sh(&["ip", "link", "set", "eth0", "mtu", "1400"]);
    b.cont.sh(&["sh", "-c", &format!("echo 1 > {RP_FILTER}")]);
    let msg = pl.check("tuning", &b.env("t1"), &checked).err(999);
    assert!(msg.contains(RP_FILTER), "{msg}");
    b.cont.sh(&["sh", "-c", &format!("echo 2 > {RP_FILTER}")]);

    pl.del("tuning", &b.env("t1"), &c).ok();
    assert_restored(&b);
    assert!(b.link().contains("qlen 1000"), "{}", b.link());
    assert!(b.backup("t1").is_none(), "DEL leaves the backup");
    // Sysctls are not restored on DEL (upstream neither): the namespace goes with the
    // container. The value ADD wrote is still there (and it was not there before). DEL twice
    // is fine and changes nothing either.
    assert_ne!(before_rp, "2", "the test needs a sysctl ADD changes");
    assert_eq!(b.sysctl(RP_FILTER), "2", "DEL changed the sysctl");
    pl.del("tuning", &b.env("t1"), &c).ok();
    assert_eq!(b.sysctl(RP_FILTER), "2");
    assert_restored(&b);
}

/// The backup file is upstream's, byte for byte, and either implementation's DEL restores the
/// other's ADD.
#[test]
fn compat_with_reference() {
    if !require_root("tuning compat_with_reference") || !reference_available("tuning") {
        return;
    }
    let c_ref = setup("tuning-ref");
    let c_ours = setup("tuning-ours");
    let theirs = c_ref.sb.plugin_in(Impl::Reference, &c_ref.node);
    let ours = c_ours.sb.plugin_in(Impl::Ours, &c_ours.node);
    let r_ref = theirs
        .add(
            "tuning",
            &c_ref.env("tc"),
            &c_ref.conf("1.0.0", keys_v111()),
        )
        .ok()
        .clone();
    let r_ours = ours
        .add(
            "tuning",
            &c_ours.env("tc"),
            &c_ours.conf("1.0.0", keys_v111()),
        )
        .ok()
        .clone();
    assert_tuned(&c_ref);
    assert_tuned(&c_ours);
    assert_eq!(c_ref.backup("tc").unwrap(), c_ours.backup("tc").unwrap());
    // Same result but for the sandbox paths.
    let strip = |mut v: Value| {
        v["interfaces"][1]["sandbox"] = Value::Null;
        normalize(&v)
    };
    assert_eq!(strip(r_ref), strip(r_ours));

    // Crossed DELs: ours undoes the reference's ADD and the reference undoes ours.
    let ours_on_ref = c_ref.sb.plugin_in(Impl::Ours, &c_ref.node);
    let link = c_ref.sb.bin.join("tuning");
    assert!(link.exists());
    ours_on_ref
        .del(
            "tuning",
            &c_ref.env("tc"),
            &c_ref.conf("1.0.0", keys_v111()),
        )
        .ok();
    assert_restored(&c_ref);
    assert!(c_ref.backup("tc").is_none());
    let theirs_on_ours = c_ours.sb.plugin_in(Impl::Reference, &c_ours.node);
    theirs_on_ours
        .del(
            "tuning",
            &c_ours.env("tc"),
            &c_ours.conf("1.0.0", keys_v111()),
        )
        .ok();
    assert_restored(&c_ours);
    assert!(c_ours.backup("tc").is_none());
}

/// A failed ADD puts back what it changed: here the MTU is more than a veth takes, after the
/// sysctl and the MAC were already set.
#[test]
fn failed_add_is_undone() {
    if !require_root("tuning failed_add_is_undone") {
        return;
    }
    let b = setup("tuning-undo");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_rp = b.sysctl(RP_FILTER);
    let c = b.conf(
        "1.0.0",
        json!({"mac": "02:00:00:00:00:bb", "mtu": 70000, "promisc": true,
               "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
    );
    let msg = pl.add("tuning", &b.env("tu"), &c).err(999);
    assert!(msg.contains("MTU") && msg.contains("70000"), "{msg}");
    assert_restored(&b);
    assert_eq!(
        b.sysctl(RP_FILTER),
        before_rp,
        "the sysctl was not restored"
    );
    assert!(b.backup("tu").is_none(), "a failed ADD leaves its backup");
}

/// Bad input is refused with code 7 naming the key, before anything changes.
#[test]
fn bad_input_changes_nothing() {
    if !require_root("tuning bad_input_changes_nothing") {
        return;
    }
    let b = setup("tuning-bad");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_link = b.link();
    let before_rp = b.sysctl(RP_FILTER);
    let cases: &[(Value, &str)] = &[
        (
            json!({"mac": "02:00:00:00:00", "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
            "mac",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", "kernel.panic": "1"}}),
            "kernel.panic",
        ),
        (
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", "vm.swappiness": "1"}}),
            "vm.swappiness",
        ),
        (json!({"mtu": -1}), "mtu"),
        (json!({"txQLen": -5}), "txQLen"),
        (json!({"dataDir": "relative/dir", "mtu": 1400}), "dataDir"),
        (
            json!({"args": {"cni": {"mac": "zz:00:00:00:00:00"}}}),
            "mac",
        ),
    ];
    for (keys, name) in cases {
        let out = pl.add("tuning", &b.env("tb"), &b.conf("1.0.0", keys.clone()));
        let msg = out.err(7);
        assert!(msg.contains(name), "{keys}: {msg}");
    }
    // A key given twice: JSON allows it, upstream refuses it.
    let text = b
        .conf(
            "1.0.0",
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
        )
        .to_string()
        .replace(
            r#""net.ipv4.conf.IFNAME.rp_filter":"2""#,
            r#""net.ipv4.conf.IFNAME.rp_filter":"2","net.ipv4.conf.IFNAME.rp_filter":"0""#,
        );
    assert!(text.contains(r#""2","net"#), "{text}");
    let out = pl.run("tuning", "ADD", &b.env("tb"), &text);
    assert!(out.err(7).contains("duplicated sysctl keys"), "{out:?}");
    // No prevResult.
    let mut c = b.conf("1.0.0", json!({"mtu": 1400}));
    c.as_object_mut().unwrap().remove("prevResult");
    assert!(
        pl.add("tuning", &b.env("tb"), &c)
            .err(7)
            .contains("prevResult")
    );
    assert_eq!(b.link(), before_link);
    assert_eq!(b.sysctl(RP_FILTER), before_rp);
    assert!(b.backup("tb").is_none());
}

/// CNI_ARGS `MAC` < `runtimeConfig.mac` < `args.cni.mac`, and DEL without a namespace or link
/// succeeds and drops the backup.
#[test]
fn mac_precedence_and_tolerant_del() {
    if !require_root("tuning mac_precedence_and_tolerant_del") {
        return;
    }
    let b = setup("tuning-mac");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let env = b
        .env("tm")
        .with_args("IgnoreUnknown=1;MAC=02:00:00:00:00:01");
    let r = pl
        .add("tuning", &env, &b.conf("1.0.0", json!({})))
        .ok()
        .clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:01", "{r}");
    pl.del("tuning", &env, &b.conf("1.0.0", json!({}))).ok();
    let c = b.conf(
        "1.0.0",
        json!({"runtimeConfig": {"mac": "02:00:00:00:00:02"}}),
    );
    let r = pl.add("tuning", &env, &c).ok().clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:02", "{r}");
    pl.del("tuning", &env, &c).ok();
    let c = b.conf(
        "1.0.0",
        json!({"runtimeConfig": {"mac": "02:00:00:00:00:02"},
               "args": {"cni": {"mac": "02:00:00:00:00:03"}}}),
    );
    let r = pl.add("tuning", &env, &c).ok().clone();
    assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:03", "{r}");
    assert!(b.link().contains("02:00:00:00:00:03"));
    // The container goes away before DEL: success, and no backup left behind.
    assert!(b.backup("tm").is_some());
    let gone = b.env("tm").with_netns("/run/netns/cnibox-no-such-ns");
    pl.del("tuning", &gone, &c).ok();
    assert!(b.backup("tm").is_none());
}

/// What `/etc/cni/tuning/allowlist.conf` is during one run.
enum Allowlist<'a> {
    Text(&'a str),
    Fifo,
    DevZero,
}

static ALLOWLIST_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Box1 {
    /// Run our tuning with `/etc/cni` replaced, for this run only, by a directory of the
    /// sandbox whose `tuning/allowlist.conf` is `list`: a private mount namespace (`unshare
    /// -m`) bind-mounts it, so neither the machine nor parallel tests see it. `timeout` ends a
    /// run that blocks (the FIFO before the fix) and `ulimit -v` one that reads without end
    /// (`/dev/zero`), so such a bug fails the test instead of hanging it or the machine.
    fn run_with_allowlist(&self, cmd: &str, cid: &str, conf: &Value, list: Allowlist) -> Output {
        let n = ALLOWLIST_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let etc = self.sb.path(&format!("etc-cni-{n}"));
        let file = etc.join("tuning/allowlist.conf");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        match list {
            Allowlist::Text(t) => std::fs::write(&file, t).unwrap(),
            Allowlist::Fifo => {
                let out = exec(
                    std::path::Path::new("mkfifo"),
                    &[file.to_str().unwrap()],
                    &[],
                    "",
                );
                assert!(out.status_ok, "mkfifo: {out:?}");
            }
            Allowlist::DevZero => std::fs::write(&file, "").unwrap(),
        }
        let zero = matches!(list, Allowlist::DevZero).to_string();
        // /etc/cni is the mount point; an install of any CNI runtime has it (made here, empty,
        // on a machine that has none).
        let script = r#"set -e
            [ -d /etc/cni ] || mkdir /etc/cni
            mount --bind "$1" /etc/cni
            [ "$4" = true ] && mount --bind /dev/zero /etc/cni/tuning/allowlist.conf
            ulimit -v 1000000
            exec timeout 20 ip netns exec "$2" "$3""#;
        let prog = self.sb.bin.join("tuning").display().to_string();
        let state = self.sb.state_dir();
        let path = self.sb.bin.display().to_string();
        let netns = self.cont.path();
        let vars = [
            ("CNI_COMMAND", cmd),
            ("CNI_CONTAINERID", cid),
            ("CNI_NETNS", netns.as_str()),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", path.as_str()),
            ("CNIBOX_STATE_DIR", state.as_str()),
        ];
        exec(
            std::path::Path::new("unshare"),
            &[
                "-m",
                "sh",
                "-c",
                script,
                "sh",
                etc.to_str().unwrap(),
                &self.node.name,
                &prog,
                &zero,
            ],
            &vars,
            &conf.to_string(),
        )
    }
}

/// Go's RE2 syntax in the allowlist works as with the Go plugin (`(?i)`, `\x41`, POSIX classes,
/// lazy quantifiers: the hand-written matcher refused them, so every ADD failed), a key that
/// matches no line is refused (code 7, before anything changes), and CHECK reads it too.
#[test]
fn allowlist_takes_re2_syntax() {
    if !require_root("tuning allowlist_takes_re2_syntax") {
        return;
    }
    let b = setup("tuning-allow");
    let list = "# comment lines are patterns too, as upstream: this one matches nothing\n\
                (?i)^NET\\.IPV4\\.CONF\\.IFNAME\\.RP_FILTER$\n\
                ^net\\.ipv4\\.conf\\.IFNAME\\.\\x61rp_[[:alpha:]]+?$\n";
    let c = b.conf(
        "1.0.0",
        json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2",
                          "net.ipv4.conf.IFNAME.arp_ignore": "1"}}),
    );
    let r = b.run_with_allowlist("ADD", "ta", &c, Allowlist::Text(list));
    r.ok();
    assert_eq!(b.sysctl(RP_FILTER), "2");
    assert_eq!(b.sysctl("/proc/sys/net/ipv4/conf/eth0/arp_ignore"), "1");
    let checked = with_prev(&c, r.ok());
    let out = b.run_with_allowlist("CHECK", "ta", &checked, Allowlist::Text(list));
    assert!(out.status_ok, "{out:?}");
    // Not on the list: refused before the listed one is written.
    let c = b.conf(
        "1.0.0",
        json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "1",
                          "net.ipv4.conf.IFNAME.accept_local": "1"}}),
    );
    let msg = b
        .run_with_allowlist("ADD", "tb", &c, Allowlist::Text(list))
        .err(7);
    assert!(
        msg.contains("net.ipv4.conf.IFNAME.accept_local") && msg.contains("not allowed"),
        "{msg}"
    );
    assert_eq!(b.sysctl(RP_FILTER), "2");
}

/// Hostile input against the allowlist (issue 24, items 5 and 9): each ends in a CNI error
/// (code 7 naming what is wrong), never a signal or a hang, and changes nothing. Before the
/// fix a 60k-character key from `args.cni` and a line of deeply nested groups overflowed the
/// stack (SIGSEGV), a FIFO blocked the ADD forever and /dev/zero was read until memory ran out.
#[test]
fn allowlist_hostile_input_ends_in_errors() {
    if !require_root("tuning allowlist_hostile_input_ends_in_errors") {
        return;
    }
    let b = setup("tuning-allow-bad");
    let before_link = b.link();
    let before_rp = b.sysctl(RP_FILTER);
    let mtu = json!({"mtu": 1400, "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}});
    let long_key = format!("net.{}", "a".repeat(60_000));
    let long = b.conf(
        "1.0.0",
        json!({"mtu": 1400, "args": {"cni": {"sysctl": {long_key.clone(): "1"}}}}),
    );
    let nested = format!("{}a{}\n", "(".repeat(100_000), ")".repeat(100_000));
    let cases: Vec<(Value, Allowlist, &str)> = vec![
        (
            long.clone(),
            Allowlist::Text("^net\\.(a|b)*$\n"),
            "longer than any sysctl",
        ),
        (
            b.conf("1.0.0", mtu.clone()),
            Allowlist::Text(&nested),
            "allowlist.conf: pattern",
        ),
        (b.conf("1.0.0", mtu.clone()), Allowlist::Fifo, "FIFO"),
        (
            b.conf("1.0.0", mtu.clone()),
            Allowlist::DevZero,
            "character device",
        ),
    ];
    for (c, list, want) in cases {
        let out = b.run_with_allowlist("ADD", "th", &c, list);
        let msg = out.err(7);
        assert!(msg.contains(want), "{want}: {msg}");
        assert!(
            msg.len() < 2000,
            "the error echoes the input: {} bytes",
            msg.len()
        );
    }
    // Without an allowlist the long key is refused the same way.
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let msg = pl.add("tuning", &b.env("th"), &long).err(7);
    assert!(msg.contains("longer than any sysctl"), "{msg}");
    assert_eq!(b.link(), before_link);
    assert_eq!(b.sysctl(RP_FILTER), before_rp);
    assert!(b.backup("th").is_none());
}

/// A sysctl key naming a directory, or a sysctl this namespace does not have, is a config
/// error (code 7 naming the key) found before the other keys are written; so is a `dataDir`
/// that is a file (or has one in its path): nothing changes (issue 24, items 10 and 11).
#[test]
fn sysctl_directories_and_data_dir_files_are_config_errors() {
    if !require_root("tuning sysctl_directories_and_data_dir_files_are_config_errors") {
        return;
    }
    let b = setup("tuning-dirs");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before_link = b.link();
    let before_rp = b.sysctl(RP_FILTER);
    for (key, why) in [
        ("net.ipv4.conf", "directory"),
        ("net.ipv4.conf.IFNAME", "directory"),
        ("net.ipv4.no_such_sysctl", "no such sysctl"),
    ] {
        let c = b.conf(
            "1.0.0",
            json!({"sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2", key: "1"}}),
        );
        let msg = pl.add("tuning", &b.env("td"), &c).err(7);
        assert!(msg.contains(key) && msg.contains(why), "{key}: {msg}");
        let msg = pl.check("tuning", &b.env("td"), &c).err(7);
        assert!(msg.contains(key), "{key}: {msg}");
    }
    let file = b.sb.path("a-file");
    std::fs::write(&file, "x").unwrap();
    for dir in [file.clone(), file.join("sub")] {
        let c = b.conf(
            "1.0.0",
            json!({"dataDir": dir, "mtu": 1400,
                   "sysctl": {"net.ipv4.conf.IFNAME.rp_filter": "2"}}),
        );
        let msg = pl.add("tuning", &b.env("td"), &c).err(7);
        assert!(
            msg.contains("dataDir") && msg.contains("not a directory"),
            "{msg}"
        );
        pl.del("tuning", &b.env("td"), &c).ok();
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert_eq!(b.link(), before_link);
    assert_eq!(b.sysctl(RP_FILTER), before_rp);
}

/// Container IDs of any length: upstream's backup name while it fits in a file name (255
/// bytes), a hashed one past it (before the fix: ENAMETOOLONG, every ADD failed); DEL
/// restores from either.
#[test]
fn long_container_ids() {
    if !require_root("tuning long_container_ids") {
        return;
    }
    let b = setup("tuning-longid");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let dir = b.sb.path("tuning");
    // "<cid>_eth0.json": 245 + 10 = 255 bytes, the longest upstream name.
    for (len, upstream_name) in [(245, true), (246, false), (1000, false)] {
        let cid = format!("c{}", "x".repeat(len - 1));
        let c = b.conf("1.0.0", keys_v111());
        pl.add("tuning", &b.env(&cid), &c).ok();
        assert_tuned(&b);
        let files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        if upstream_name {
            assert_eq!(files[0], format!("{cid}_eth0.json"));
        } else {
            assert!(
                files[0].starts_with('~') && files[0].ends_with(".json") && files[0].len() < 64,
                "{files:?}"
            );
        }
        pl.del("tuning", &b.env(&cid), &c).ok();
        assert_restored(&b);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // Put the sysctl back for the next round.
        b.cont.sh(&["sh", "-c", &format!("echo 0 > {RP_FILTER}")]);
    }
}

/// `runtimeConfig.mac` of another type than string is refused as the Go plugins refuse it
/// (their decoder fails the config), with code 6 naming the key, instead of being ignored —
/// in tuning and in the other applets that read it through the same decoder (macvlan, tap,
/// bridge; all decode it before they change anything). Empty and null are "none", as in Go.
#[test]
fn runtime_config_mac_of_another_type_is_refused() {
    if !require_root("tuning runtime_config_mac_of_another_type_is_refused") {
        return;
    }
    let b = setup("tuning-rcmac");
    let pl = b.sb.plugin_in(Impl::Ours, &b.node);
    let before = b.link();
    for mac in [
        json!(5),
        json!(["02:00:00:00:00:01"]),
        json!({"a": 1}),
        json!(true),
    ] {
        let c = b.conf("1.0.0", json!({"runtimeConfig": {"mac": mac.clone()}}));
        let msg = pl.add("tuning", &b.env("tr"), &c).err(6);
        assert!(msg.contains("runtimeConfig.mac"), "{mac}: {msg}");
        for applet in ["macvlan", "tap", "bridge"] {
            let c = json!({"cniVersion": "1.0.0", "name": "rcmac", "type": applet,
                           "master": "tn0", "bridge": "cnibox-nobr",
                           "runtimeConfig": {"mac": mac.clone()}});
            let msg = pl.add(applet, &b.env("tr"), &c).err(6);
            assert!(msg.contains("runtimeConfig.mac"), "{applet} {mac}: {msg}");
        }
    }
    assert_eq!(b.link(), before);
    assert!(b.node.sh(&["ip", "link", "show"]).contains("tn0"));
    assert!(!b.node.sh(&["ip", "link", "show"]).contains("cnibox-nobr"));
    // null and "" are no MAC: CNI_ARGS MAC applies.
    for mac in [json!(null), json!("")] {
        let env = b
            .env("tn")
            .with_args("IgnoreUnknown=1;MAC=02:00:00:00:00:07");
        let c = b.conf("1.0.0", json!({"runtimeConfig": {"mac": mac}}));
        let r = pl.add("tuning", &env, &c).ok().clone();
        assert_eq!(r["interfaces"][1]["mac"], "02:00:00:00:00:07", "{r}");
        pl.del("tuning", &env, &c).ok();
    }
}
