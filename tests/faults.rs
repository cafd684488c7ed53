//! Faults a node really has: a plugin killed with SIGKILL at any instant (OOM killer, a runtime
//! timing out), a full filesystem, container IDs longer than a file name. After each, DEL (or
//! nothing, for a failed ADD) leaves no reservation, no empty reservation file, no link and no
//! rule behind.

mod common;
use common::bounded::kill_after;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn hl_conf(dir: &Path, subnet: &str) -> Value {
    json!({"cniVersion": "1.0.0", "name": "faultnet", "type": "host-local",
        "ipam": {"type": "host-local", "subnet": subnet, "dataDir": dir.display().to_string()}})
}

/// Reservation files (named by an address) in the network directory, with their contents.
fn reservations(dir: &Path) -> Vec<(String, String)> {
    let Ok(rd) = std::fs::read_dir(dir.join("faultnet")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.parse::<std::net::IpAddr>().ok()?;
            Some((name, std::fs::read_to_string(e.path()).unwrap_or_default()))
        })
        .collect()
}

/// Start `program` as a runtime would and SIGKILL it after `delay`.
fn run_and_kill(
    program: &Path,
    node: Option<&NetNs>,
    vars: &[(&str, &str)],
    stdin: &str,
    delay: Duration,
) -> bool {
    let mut cmd = match node {
        None => Command::new(program),
        Some(n) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &n.name]).arg(program);
            c
        }
    };
    cmd.env_clear()
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn");
    if let Some(mut i) = child.stdin.take() {
        use std::io::Write;
        let _ = i.write_all(stdin.as_bytes());
    }
    kill_after(&mut child, delay)
}

/// Every file under dataDir that must not outlive an attachment's DEL: temporary files
/// anywhere, and anything in the network directory but `lock`, `last_reserved_ip.N` and the
/// reservations of `live` owners.
fn litter(data: &Path, live: &[&str]) -> Vec<String> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(data, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(data).ok()?.display().to_string();
            let name = p.file_name()?.to_string_lossy().into_owned();
            let content = std::fs::read_to_string(&p).unwrap_or_default();
            let ok = if let Some(n) = rel.strip_prefix("faultnet/") {
                n == "lock"
                    || n.starts_with("last_reserved_ip.")
                    || (n.parse::<std::net::IpAddr>().is_ok()
                        && live
                            .iter()
                            .any(|o| content.starts_with(&format!("{o}\r\n"))))
            } else if rel.starts_with(".cnibox/faultnet/") {
                // Owner index entries: only for live owners.
                !name.starts_with(".tmp")
                    && live
                        .iter()
                        .any(|o| content.contains(&format!("owner {o}:")))
            } else {
                // The seal, and the stamp of the last GC (STATUS's proof that the runtime
                // confirmed the reservations; a torn one only makes STATUS pass).
                rel == ".cnibox/.sealed/faultnet" || rel == ".cnibox/.collected/faultnet"
            };
            (!ok).then_some(rel)
        })
        .collect()
}

fn vars<'a>(cmd: &'a str, cid: &'a str, netns: &'a str, path: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("CNI_COMMAND", cmd),
        ("CNI_CONTAINERID", cid),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", path),
    ]
}

/// 150 (or more, up to 600, until both sides are covered) host-local ADDs killed at random instants, each followed by DEL: nothing leaks and no
/// empty reservation ever appears (upstream #498).
#[test]
fn host_local_killed_at_any_instant() {
    let sb = Sandbox::new("kill-hl");
    let dir = sb.path("data");
    let conf = hl_conf(&dir, "10.66.0.0/24").to_string();
    let prog = sb.bin.join("host-local");
    let path = sb.bin.display().to_string();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    // Kill instants spread over one ADD's real duration on this machine (the slowest of a
    // few), so the kills land before, during and after the store is changed. On a loaded
    // machine one slow probe stretches the span until most kills come after the ADD: each
    // round of 50 that mostly finished narrows it, until both sides are covered.
    let mut span = (0..5)
        .map(|k| {
            let t = Instant::now();
            let e = Env {
                container_id: format!("probe{k}"),
                ..sb.env()
            };
            sb.ours().run("host-local", "ADD", &e, &conf).ok();
            let d = t.elapsed();
            sb.ours().run("host-local", "DEL", &e, &conf).ok();
            d
        })
        .max()
        .unwrap()
        .as_micros() as u64
        + 1;
    let (mut finished, mut before_reservation, mut after_reservation) = (0, 0, 0);
    for i in 0..600 {
        if i >= 150 && before_reservation >= 10 && after_reservation >= 10 {
            break;
        }
        if i % 50 == 0 && i > 0 && finished * 3 > i * 2 {
            span = (span * 2 / 3).max(50);
        }
        let cid = format!("kill{i}");
        let delay = Duration::from_micros(rng.next() % span);
        let killed = run_and_kill(&prog, None, &vars("ADD", &cid, "/x", &path), &conf, delay);
        let held = reservations(&dir);
        for (name, content) in &held {
            assert!(
                !content.trim().is_empty(),
                "run {i}: empty reservation {name}"
            );
        }
        match (killed, held.is_empty()) {
            (false, _) => finished += 1,
            (true, true) => before_reservation += 1,
            (true, false) => after_reservation += 1,
        }
        let out = sb.ours().run(
            "host-local",
            "DEL",
            &Env {
                container_id: cid.clone(),
                ..sb.env()
            },
            &conf,
        );
        assert!(out.status_ok, "run {i}: DEL after kill: {out:?}");
        let left = reservations(&dir);
        assert!(
            left.is_empty(),
            "run {i} (killed after {delay:?}): leaked {left:?}"
        );
        let litter = litter(&dir, &[]);
        assert!(
            litter.is_empty(),
            "run {i} (killed after {delay:?}): left {litter:?}"
        );
    }
    eprintln!(
        "kills over {span} µs: {before_reservation} before a reservation existed, \
         {after_reservation} after, {finished} ADDs finished first"
    );
    assert!(
        before_reservation >= 10 && after_reservation >= 10,
        "the kills did not cover the ADD: {before_reservation} before, {after_reservation} after, {finished} finished"
    );
    // The store is consistent afterwards: a normal ADD/DEL works and is exact.
    let out = sb.ours().run("host-local", "ADD", &sb.env(), &conf);
    assert!(out.status_ok, "{out:?}");
    assert_eq!(reservations(&dir).len(), 1);
    assert!(
        sb.ours()
            .run("host-local", "DEL", &sb.env(), &conf)
            .status_ok
    );
    assert!(reservations(&dir).is_empty());
}

/// 50 bridge + host-local ADDs with ipMasq killed at random instants, each followed by DEL: no
/// veth, reservation or masquerading rule is left.
#[test]
fn bridge_killed_at_any_instant() {
    if !require_root("bridge_killed_at_any_instant") {
        return;
    }
    let sb = Sandbox::new("kill-br");
    let node = NetNs::create();
    node.sh(&["ip", "link", "set", "lo", "up"]);
    let dir = sb.path("data");
    let conf = json!({"cniVersion": "1.0.0", "name": "faultnet", "type": "bridge",
        "bridge": "br-kill", "isGateway": true, "ipMasq": true, "ipMasqBackend": "nftables",
        "ipam": {"type": "host-local", "subnet": "10.67.0.0/24", "dataDir": dir.display().to_string()}})
    .to_string();
    let prog = sb.bin.join("bridge");
    let path = sb.bin.display().to_string();
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    // Warm up: the bridge exists, as on a node with pods.
    let c0 = NetNs::create();
    let e0 = Env {
        container_id: "warm".into(),
        netns: c0.path(),
        ..sb.env()
    };
    sb.plugin_in(Impl::Ours, &node)
        .run("bridge", "ADD", &e0, &conf)
        .ok();
    let base_links = node.sh(&["ip", "-o", "link"]).lines().count();
    // Kill instants spread over one ADD's measured duration (the slowest of a few).
    let span = (0..3)
        .map(|k| {
            let c = NetNs::create();
            let e = Env {
                container_id: format!("probe{k}"),
                netns: c.path(),
                ..sb.env()
            };
            let t = Instant::now();
            sb.plugin_in(Impl::Ours, &node)
                .run("bridge", "ADD", &e, &conf)
                .ok();
            let d = t.elapsed();
            sb.plugin_in(Impl::Ours, &node)
                .run("bridge", "DEL", &e, &conf)
                .ok();
            d
        })
        .max()
        .unwrap()
        .as_micros() as u64
        + 1;
    let (mut finished, mut killed_holding, mut killed_empty) = (0, 0, 0);
    for i in 0..50 {
        let c = NetNs::create();
        let cid = format!("killbr{i}");
        let delay = Duration::from_micros(rng.next() % span);
        let (state, netns) = (sb.state_dir(), c.path());
        let mut env_vars = vars("ADD", &cid, &netns, &path);
        // The records DEL reads (Plugin::run puts them in the sandbox too).
        env_vars.push(("CNIBOX_STATE_DIR", &state));
        let killed = run_and_kill(&prog, Some(&node), &env_vars, &conf, delay);
        let holding = reservations(&dir)
            .iter()
            .any(|(_, c)| c.starts_with(&format!("{cid}\r\n")));
        match (killed, holding) {
            (false, _) => finished += 1,
            (true, true) => killed_holding += 1,
            (true, false) => killed_empty += 1,
        }
        let env = Env {
            container_id: cid.clone(),
            netns: c.path(),
            ..sb.env()
        };
        let out = sb
            .plugin_in(Impl::Ours, &node)
            .run("bridge", "DEL", &env, &conf);
        assert!(out.status_ok, "run {i}: DEL after kill: {out:?}");
        let links = node.sh(&["ip", "-o", "link"]).lines().count();
        assert_eq!(
            links, base_links,
            "run {i} (killed after {delay:?}): links left"
        );
        let left: Vec<_> = reservations(&dir)
            .into_iter()
            .filter(|(_, c)| !c.starts_with("warm"))
            .collect();
        assert!(left.is_empty(), "run {i}: leaked {left:?}");
        let litter = litter(&dir, &["warm"]);
        assert!(
            litter.is_empty(),
            "run {i} (killed after {delay:?}): left {litter:?}"
        );
        let nft = node.sh(&["nft", "list", "ruleset"]);
        assert!(!nft.contains(&cid), "run {i}: rules left:\n{nft}");
        let record = Path::new(&sb.state_dir()).join(format!("ipmasq/faultnet/{cid}:eth0"));
        assert!(!record.exists(), "run {i}: owner record left: {record:?}");
    }
    sb.plugin_in(Impl::Ours, &node)
        .run("bridge", "DEL", &e0, &conf)
        .ok();
    eprintln!(
        "bridge kills over {span} µs: {killed_empty} before the reservation, \
         {killed_holding} holding one, {finished} finished"
    );
    assert!(
        killed_empty >= 3 && killed_holding >= 3,
        "the kills did not cover the ADD: {killed_empty} before, {killed_holding} holding, {finished} finished"
    );
}

/// A tmpfs of a few pages or inodes as dataDir, mounted for the test and unmounted on drop.
struct SmallFs(PathBuf);
impl SmallFs {
    fn new(at: PathBuf, opts: &str) -> SmallFs {
        std::fs::create_dir_all(&at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "cnibox-test"])
            .arg(&at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs {opts}");
        SmallFs(at)
    }
}
impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// ADD on a filesystem that runs out of pages or inodes at every possible step: it either
/// succeeds or fails with a CNI error, and a failure leaves no reservation.
#[test]
fn full_filesystem() {
    if !require_root("full_filesystem") {
        return;
    }
    let sb = Sandbox::new("full-fs");
    let mut failed_adds = 0;
    for (opts, fill) in [
        ("size=64k", true),
        ("nr_inodes=8", false),
        ("nr_inodes=10", false),
        ("nr_inodes=12", false),
    ] {
        for free_pages in 0..6u64 {
            if !fill && free_pages > 0 {
                break;
            }
            let fs = SmallFs::new(sb.path(&format!("fs-{opts}-{free_pages}")), opts);
            let dir = fs.0.clone();
            if fill {
                // Leave `free_pages` pages free.
                let total = 16u64;
                let filler = vec![7u8; ((total - free_pages) * 4096) as usize];
                let _ = std::fs::write(dir.join("filler"), &filler);
            }
            let conf = hl_conf(&dir, "10.68.0.0/24").to_string();
            let mut results = Vec::new();
            for i in 0..3 {
                let env = Env {
                    container_id: format!("full{i}"),
                    ..sb.env()
                };
                let out = sb.ours().run("host-local", "ADD", &env, &conf);
                assert!(out.code.is_some(), "{opts}/{free_pages}: signal: {out:?}");
                if !out.status_ok {
                    // A failure of the host (5, or 999 as upstream answers) that says what
                    // the filesystem said.
                    assert!(
                        matches!(out.err_code(), Some(5 | 999)),
                        "{opts}/{free_pages}: {out:?}"
                    );
                    let msg = out.json["msg"].as_str().unwrap_or_default();
                    assert!(
                        msg.contains("No space left on device"),
                        "{opts}/{free_pages}: the error does not say why: {out:?}"
                    );
                    failed_adds += 1;
                }
                results.push((format!("full{i}"), out.status_ok));
            }
            // No page left, or too few inodes for three reservations (and the network
            // directory, its lock and the owner index): some ADD must have hit the wall, or
            // this test tested nothing.
            if (fill && free_pages == 0) || opts == "nr_inodes=8" {
                assert!(
                    results.iter().any(|(_, ok)| !ok),
                    "{opts}/{free_pages}: every ADD succeeded on a full filesystem: {results:?}"
                );
            }
            if fill && free_pages == 0 {
                assert!(
                    results.iter().all(|(_, ok)| !ok),
                    "{opts}: an ADD succeeded with no page free: {results:?}"
                );
            }
            let held: Vec<(String, String)> = reservations(&dir);
            for (name, content) in &held {
                assert!(
                    !content.trim().is_empty(),
                    "{opts}/{free_pages}: empty reservation {name}"
                );
                let owner = content.split("\r\n").next().unwrap_or_default();
                assert!(
                    results.iter().any(|(cid, ok)| cid == owner && *ok),
                    "{opts}/{free_pages}: {name} held by {owner}, whose ADD failed: {results:?}"
                );
            }
            for (cid, _) in &results {
                let env = Env {
                    container_id: cid.clone(),
                    ..sb.env()
                };
                let out = sb.ours().run("host-local", "DEL", &env, &conf);
                assert!(out.code.is_some(), "{out:?}");
            }
            let _ = std::fs::remove_file(dir.join("filler"));
            // With room again, DEL releases whatever is left.
            for (cid, _) in &results {
                let env = Env {
                    container_id: cid.clone(),
                    ..sb.env()
                };
                assert!(sb.ours().run("host-local", "DEL", &env, &conf).status_ok);
            }
            assert!(
                reservations(&dir).is_empty(),
                "{opts}/{free_pages}: leaked {:?}",
                reservations(&dir)
            );
            let litter = litter(&dir, &[]);
            assert!(litter.is_empty(), "{opts}/{free_pages}: left {litter:?}");
        }
    }
    eprintln!("full filesystem: {failed_adds} ADDs failed");
}

/// Container IDs longer than a file name (upstream accepts them) are allocated and released.
#[test]
fn long_container_ids() {
    let sb = Sandbox::new("long-id");
    let dir = sb.path("data");
    let conf = hl_conf(&dir, "10.69.0.0/24").to_string();
    for len in [250, 300, 1000] {
        let env = Env {
            container_id: "a".repeat(len),
            ..sb.env()
        };
        let out = sb.ours().run("host-local", "ADD", &env, &conf);
        assert!(out.status_ok, "{len}: {out:?}");
        assert_eq!(reservations(&dir).len(), 1);
        assert!(sb.ours().run("host-local", "CHECK", &env, &conf).status_ok);
        assert!(sb.ours().run("host-local", "DEL", &env, &conf).status_ok);
        assert!(reservations(&dir).is_empty(), "{len}: leaked");
    }
}

/// Every step of an ADD, a DEL and a GC, deterministically: strace's fault injection kills
/// host-local with SIGKILL at the N-th call of each file-system syscall it makes (every N until
/// the run goes past its last call), or fails that call with ENOSPC. Covered: a first ADD on an
/// empty dataDir, an ADD on a sealed store with another attachment, a DEL and a GC there. After
/// each: no empty reservation, a failed ADD that reported a CNI error holds nothing, a normal
/// DEL then leaves only the other attachment, and nothing else is left in dataDir.
#[test]
fn interrupted_at_every_step() {
    let strace = Path::new("/usr/bin/strace");
    if !strace.exists() || !exec(strace, &["-qq", "-o", "/dev/null", "true"], &[], "").status_ok {
        skip_note(
            "interrupted_at_every_step",
            "strace missing or not allowed to trace",
        );
        return;
    }
    let sb = Sandbox::new("steps");
    let prog = sb.bin.join("host-local").display().to_string();
    let path = sb.bin.display().to_string();
    let syscalls = [
        "openat",
        "write",
        "linkat",
        "rename",
        "unlink",
        "utimensat",
        "mkdir",
    ];
    let mut runs = 0;
    for (verb, scenario, other) in [
        ("ADD", "empty", None),
        ("ADD", "sealed", Some("other")),
        ("DEL", "sealed", Some("other")),
        ("GC", "sealed", Some("other")),
    ] {
        for fault in ["signal=KILL", "error=ENOSPC"] {
            for sc in syscalls {
                for n in 1.. {
                    let dir = sb.path(&format!("d-{scenario}-{runs}"));
                    let mut conf = hl_conf(&dir, "10.71.0.0/24");
                    if verb == "GC" {
                        conf["cniVersion"] = json!("1.1.0");
                        conf["cni.dev/valid-attachments"] =
                            json!([{"containerID": "other", "ifname": "eth0"}]);
                    }
                    let conf = conf.to_string();
                    let live: Vec<&str> = other.into_iter().collect();
                    if let Some(o) = other {
                        let e = Env {
                            container_id: o.into(),
                            ..sb.env()
                        };
                        sb.ours().run("host-local", "ADD", &e, &conf).ok();
                    }
                    if verb != "ADD" {
                        let e = Env {
                            container_id: "victim".into(),
                            ..sb.env()
                        };
                        sb.ours().run("host-local", "ADD", &e, &conf).ok();
                    }
                    let inject = format!("inject={sc}:{fault}:when={n}");
                    let log = sb.path("strace.log");
                    let log_s = log.display().to_string();
                    let trace = format!("trace={sc}");
                    // strace re-raises the SIGKILL it injects: a signal on purpose here.
                    let out = exec_unchecked(
                        strace,
                        &[
                            "-f", "-qq", "-o", &log_s, "-e", &trace, "-e", &inject, &prog,
                        ],
                        &vars(verb, "victim", "/x", &path),
                        &conf,
                    );
                    let fired = std::fs::read_to_string(&log)
                        .unwrap_or_default()
                        .contains("INJECTED");
                    runs += 1;
                    let what = format!("{verb} {scenario} {sc}#{n} {fault}");
                    let held = reservations(&dir);
                    for (name, content) in &held {
                        assert!(!content.trim().is_empty(), "{what}: empty {name}");
                    }
                    if verb == "ADD" && !out.status_ok && out.err_code().is_some() {
                        assert!(
                            !held.iter().any(|(_, c)| c.starts_with("victim\r\n")),
                            "{what}: failed ADD ({}) kept {held:?}",
                            out.stdout
                        );
                    }
                    let e = Env {
                        container_id: "victim".into(),
                        ..sb.env()
                    };
                    let del = sb.ours().run("host-local", "DEL", &e, &conf);
                    assert!(del.status_ok, "{what}: DEL: {del:?}");
                    let left: Vec<_> = reservations(&dir)
                        .into_iter()
                        .filter(|(_, c)| !c.starts_with("other\r\n"))
                        .collect();
                    assert!(left.is_empty(), "{what}: leaked {left:?}");
                    assert_eq!(reservations(&dir).len(), live.len(), "{what}");
                    let litter = litter(&dir, &live);
                    assert!(litter.is_empty(), "{what}: left {litter:?}");
                    let _ = std::fs::remove_dir_all(&dir);
                    // Past the last call of this syscall the injection never fires.
                    let killed = out.code.is_none();
                    if !fired && !killed {
                        assert!(out.status_ok, "{what}: {out:?}");
                        if verb != "ADD" {
                            assert!(
                                !held.iter().any(|(_, c)| c.starts_with("victim\r\n")),
                                "{what}: uninterrupted {verb} kept {held:?}"
                            );
                        }
                        break;
                    }
                    assert!(n < 200, "{what}: never finished");
                }
            }
        }
    }
    eprintln!("{runs} interrupted ADDs, DELs and GCs");
}

/// Every file under `dir` with its contents (relative path → bytes).
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `program` run by `sh` with the redirections `redir` (`>&-`, `>/dev/full`, …) applied to it,
/// optionally inside `node`, with `vars` and `stdin`.
fn run_redirected(
    program: &Path,
    node: Option<&NetNs>,
    redir: &str,
    vars: &[(&str, &str)],
    stdin: &str,
) -> Output {
    let script = format!("exec \"$0\" {redir}");
    let prog = program.display().to_string();
    match node {
        None => exec(Path::new("sh"), &["-c", &script, &prog], vars, stdin),
        Some(n) => exec(
            Path::new("ip"),
            &["netns", "exec", &n.name, "sh", "-c", &script, &prog],
            vars,
            stdin,
        ),
    }
}

/// A plugin started with a standard descriptor closed (`>&-`, `<&-`, `2>&-`, each and all
/// three) gets /dev/null there, as std's runtime would give it: nothing it means for stdout or
/// stderr lands in a file it opens. host-local's store is unchanged in content apart from the
/// new reservation (its file, `last_reserved_ip.N`, the owner index); an ADD that fails (stdin
/// closed: no config) leaves no reservation. IPv4, IPv6 and dual-stack. Before the repair, with
/// stdout closed the config file and then the store's lock file became fd 1 and the ADD failed
/// with no message, its reservation kept.
#[test]
fn closed_standard_descriptors() {
    use common::family::FAMILIES;
    for fam in FAMILIES {
        let n = common::lab::unique_n();
        let sb = Sandbox::new(&format!("closed-fds-{}", fam.tag()));
        let dir = sb.path("data");
        let mut conf = json!({"cniVersion": "1.0.0", "name": "faultnet", "type": "host-local",
            "ipam": fam.host_local(n, &dir)});
        conf["ipam"]["routes"] = json!([]);
        let conf = conf.to_string();
        let prog = sb.bin.join("host-local");
        let path = sb.bin.display().to_string();
        let state = sb.state_dir();
        // A store with an attachment already, as on a node.
        let first = Env {
            container_id: "first".into(),
            ..sb.env()
        };
        sb.ours().run("host-local", "ADD", &first, &conf).ok();
        for (k, redir) in [">&-", "<&-", "2>&-", "<&- >&- 2>&-"].iter().enumerate() {
            let tag = format!("{} {redir}", fam.tag());
            let cid = format!("closed{k}");
            let before = snapshot(&dir);
            let mut v = vars("ADD", &cid, "/x", &path);
            v.push(("CNIBOX_STATE_DIR", &state));
            let out = run_redirected(&prog, None, redir, &v, &conf);
            let after = snapshot(&dir);
            let held: Vec<String> = reservations(&dir)
                .into_iter()
                .filter(|(_, c)| c.starts_with(&format!("{cid}\r\n")))
                .map(|(name, _)| name)
                .collect();
            if redir.contains('<') {
                assert!(!out.status_ok, "{tag}: ADD without a config succeeded");
                assert_eq!(after, before, "{tag}: a failed ADD changed the store");
                continue;
            }
            assert!(out.status_ok, "{tag}: {out:?}");
            let want = if fam == common::family::Fam::Dual {
                2
            } else {
                1
            };
            assert_eq!(held.len(), want, "{tag}: reservations {held:?}");
            for (file, content) in &after {
                if before.get(file) == Some(content) {
                    continue;
                }
                let name = file.rsplit('/').next().unwrap();
                let text = String::from_utf8_lossy(content);
                let expected = if held.iter().any(|h| h == name) {
                    text == format!("{cid}\r\neth0")
                } else if name.starts_with("last_reserved_ip.") {
                    text.parse::<std::net::IpAddr>().is_ok()
                } else if file.starts_with(".cnibox/.sealed/") {
                    // The seal: `dev:ino mMTIME cCTIME` of each of the store's files.
                    let w: Vec<&str> = text.split_whitespace().collect();
                    !w.is_empty()
                        && w.len().is_multiple_of(3)
                        && w.chunks(3).all(|t| {
                            t[0].split(':').all(|x| x.parse::<u64>().is_ok())
                                && t[1].starts_with('m')
                                && t[2].starts_with('c')
                        })
                } else {
                    // The owner index: one line naming the owner and its addresses.
                    file.starts_with(".cnibox/") && text.contains(&format!("owner {cid}:eth0"))
                };
                assert!(expected, "{tag}: {file} became {text:?}");
            }
            for file in before.keys() {
                assert!(after.contains_key(file), "{tag}: {file} is gone");
            }
            let del = Env {
                container_id: cid.clone(),
                ..sb.env()
            };
            sb.ours().run("host-local", "DEL", &del, &conf).ok();
        }
    }
}

/// An ADD whose result cannot be written (stdout on /dev/full: ENOSPC) is undone: the runtime
/// never learns what was made, so nothing may stay — no reservation (host-local), no veth and no
/// reservation (bridge + host-local). IPv4, IPv6 and dual-stack.
#[test]
fn unwritable_result_undoes_the_add() {
    if !require_root("unwritable_result_undoes_the_add") {
        return;
    }
    use common::family::FAMILIES;
    for fam in FAMILIES {
        let n = common::lab::unique_n();
        let sb = Sandbox::new(&format!("full-stdout-{}", fam.tag()));
        let node = NetNs::create();
        node.sh(&["ip", "link", "set", "lo", "up"]);
        let dir = sb.path("data");
        let path = sb.bin.display().to_string();
        let state = sb.state_dir();
        let ipam = fam.host_local(n, &dir);
        let hl =
            json!({"cniVersion": "1.0.0", "name": "faultnet", "type": "host-local", "ipam": ipam});
        let br = json!({"cniVersion": "1.0.0", "name": "faultnet", "type": "bridge",
            "bridge": format!("brfull{n}"), "isGateway": true, "ipam": ipam});
        for (applet, conf) in [("host-local", &hl), ("bridge", &br)] {
            let tag = format!("{} {applet}", fam.tag());
            let cont = NetNs::create();
            let netns = cont.path();
            let mut v = vars("ADD", "fullout", &netns, &path);
            v.push(("CNIBOX_STATE_DIR", &state));
            let links = node.sh(&["ip", "-o", "link"]);
            let out = run_redirected(
                &sb.bin.join(applet),
                Some(&node),
                ">/dev/full",
                &v,
                &conf.to_string(),
            );
            assert!(!out.status_ok, "{tag}: {out:?}");
            assert!(
                out.stderr.contains("cannot write the result"),
                "{tag}: no message: {out:?}"
            );
            assert_eq!(reservations(&dir), Vec::new(), "{tag}: reservation left");
            assert_eq!(
                node.sh(&["ip", "-o", "link"])
                    .lines()
                    .filter(|l| l.contains("veth"))
                    .count(),
                links.lines().filter(|l| l.contains("veth")).count(),
                "{tag}: veth left"
            );
            assert!(
                !cont.exec(&["ip", "link", "show", "eth0"]).status_ok,
                "{tag}: eth0 left"
            );
            // The same ADD with a stdout that works succeeds: the store was left usable.
            let e = Env {
                container_id: "fullout".into(),
                netns: netns.clone(),
                ..sb.env()
            };
            let ok = sb
                .plugin_in(Impl::Ours, &node)
                .run(applet, "ADD", &e, &conf.to_string());
            ok.ok();
            sb.plugin_in(Impl::Ours, &node)
                .run(applet, "DEL", &e, &conf.to_string())
                .ok();
        }
    }
}

/// A panic is a bug; whichever entry point it happens in, the process says so the way that
/// entry point speaks and exits with status 1 — never SIGABRT with no reason: a plugin and
/// cnitool print the CNI error (code 999) on stdout, `dhcp daemon`, `install` and the tap
/// helper a line on stderr. The debug binary panics on purpose where `CNIBOX_TEST_PANIC`
/// names the entry point's voice (src/main.rs).
#[test]
fn a_panic_in_any_entry_point_is_reported() {
    let sb = Sandbox::new("panics");
    let bin = bin();
    let dir = sb.path("install-dir").display().to_string();
    let sock = sb.path("dhcp.sock").display().to_string();
    let bridge = sb.bin.join("bridge");
    let cases: [(&str, &Path, Vec<&str>, Option<&str>); 5] = [
        ("CniError", &bridge, vec![], None),
        (
            "CniError",
            &bin,
            vec!["cnitool", "add", "net", "/run/netns/x"],
            None,
        ),
        (
            "DhcpDaemon",
            &bin,
            vec!["dhcp", "daemon", "-socketpath", &sock],
            Some("dhcp daemon"),
        ),
        (
            "Install",
            &bin,
            vec!["install", &dir],
            Some("cnibox install"),
        ),
        (
            "TapHelper",
            &bin,
            vec!["--tap-create", "1", "-", "-"],
            Some("cnibox tap helper"),
        ),
    ];
    for (voice, program, args, stderr_who) in cases {
        let tag = format!("{voice} {args:?}");
        let out = with_deadline(Duration::from_secs(20), || {
            exec_unchecked(
                program,
                &args,
                &[("CNIBOX_TEST_PANIC", voice), ("CNI_COMMAND", "VERSION")],
                "",
            )
        });
        assert_eq!(out.code, Some(1), "{tag}: {out:?}");
        let want = "internal error (please report): panicked at";
        match stderr_who {
            None => {
                assert_eq!(out.json["code"], 999, "{tag}: {out:?}");
                assert!(
                    out.json["msg"].as_str().unwrap_or("").starts_with(want),
                    "{tag}: {out:?}"
                );
            }
            Some(who) => assert!(
                out.stderr.starts_with(&format!("{who}: {want}")),
                "{tag}: {out:?}"
            ),
        }
    }
}

/// The shipped unit of the DHCP daemon restarts it when it fails (a panic exits with status 1,
/// [`a_panic_in_any_entry_point_is_reported`]).
#[test]
fn dhcp_daemon_unit_restarts_on_failure() {
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/systemd/cnibox-dhcp.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    let mut section = "";
    let mut restart = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]"
            && let Some(v) = line.strip_prefix("Restart=")
        {
            restart = Some(v.trim().to_string());
        }
    }
    assert!(
        matches!(
            restart.as_deref(),
            Some("on-failure" | "always" | "on-abnormal" | "on-abort")
        ),
        "{}: [Service] Restart= is {restart:?}",
        unit.display()
    );
    // A restart that systemd's start limit (5 in 10 s by default) soon stops would leave the
    // node without the daemon after a crash loop: a delay between restarts.
    assert!(
        text.lines().any(|l| l.trim().starts_with("RestartSec=")),
        "{}: no RestartSec=",
        unit.display()
    );
}
