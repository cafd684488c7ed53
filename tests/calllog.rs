//! The opt-in per-call log (`CNIBOX_LOG=PATH`, src/cni/calllog.rs): one JSON line per call
//! with its outcome; concurrent calls keep their lines whole; the file is rotated at its cap;
//! and a log that cannot be written — a FIFO nobody reads, a full FIFO, a full disk, a missing
//! directory — neither blocks nor fails the call.

mod common;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

fn logged(sb: &Sandbox, path: &Path) -> Env {
    let mut env = sb.env();
    env.extra = vec![("CNIBOX_LOG".into(), path.display().to_string())];
    env
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn loopback() -> Value {
    json!({"cniVersion": "1.0.0", "name": "lo-net", "type": "loopback"})
}

#[test]
fn one_line_per_call_with_the_outcome() {
    if !require_root("one_line_per_call_with_the_outcome") {
        return;
    }
    let sb = Sandbox::new("calllog_lines");
    let log = sb.path("cni.log");
    let ns = NetNs::create();
    let mut env = sb.env().with_netns(&ns.path());
    env.extra = vec![("CNIBOX_LOG".into(), log.display().to_string())];
    sb.ours().add("loopback", &env, &loopback()).ok();
    sb.ours().del("loopback", &env, &loopback()).ok();
    let bad = json!({"cniVersion": "1.0.0", "name": "n", "type": "bridge", "mtu": "x"});
    let msg = sb.ours().add("bridge", &env, &bad).err(6);
    let l = lines(&log);
    assert_eq!(l.len(), 3, "{l:?}");
    for (line, verb) in l.iter().zip(["ADD", "DEL", "ADD"]) {
        assert_eq!(line["verb"], verb, "{line}");
        assert_eq!(line["containerID"], env.container_id.as_str(), "{line}");
        assert_eq!(line["netns"], ns.path().as_str(), "{line}");
        assert_eq!(line["ifname"], env.ifname.as_str(), "{line}");
        assert!(line["us"].as_u64().is_some(), "{line}");
        let t = line["time"].as_str().unwrap();
        assert!(
            t.len() == 24 && t.ends_with('Z') && t.starts_with("20"),
            "{t}"
        );
    }
    assert_eq!(l[0]["applet"], "loopback");
    assert_eq!(l[0]["result"]["interfaces"][0]["name"], "lo", "{}", l[0]);
    assert_eq!(l[1]["result"], "ok");
    assert_eq!(l[2]["applet"], "bridge");
    assert_eq!(l[2]["error"], json!({"code": 6, "msg": msg}));
}

#[test]
fn concurrent_calls_keep_their_lines_whole_and_the_log_rotates() {
    let sb = Sandbox::new("calllog_rotate");
    let log = sb.path("cni.log");
    // Just under the cap: the next line crosses it, the one after rotates.
    let big = "x".repeat(4 << 20) + "\n";
    std::fs::write(&log, &big).unwrap();
    let env = logged(&sb, &log);
    let conf = json!({"cniVersion": "1.0.0"}).to_string();
    let version = |env: &Env| sb.ours().run("bridge", "VERSION", env, &conf);
    version(&env).ok();
    let old = sb.path("cni.log.1");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), big, "rotated file");
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| version(&env).ok().clone());
        }
    });
    let l = lines(&log);
    assert_eq!(l.len(), 17, "{l:?}");
    assert!(
        l.iter()
            .all(|v| v["verb"] == "VERSION" && v["applet"] == "bridge")
    );
}

#[test]
fn a_log_that_cannot_be_written_neither_blocks_nor_fails_the_call() {
    let sb = Sandbox::new("calllog_blocked");
    let fifo = sb.path("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let conf = json!({"cniVersion": "1.0.0"}).to_string();
    let call = |path: &Path| {
        with_deadline(Duration::from_secs(10), || {
            sb.ours()
                .run("bridge", "VERSION", &logged(&sb, path), &conf)
                .ok()
                .clone()
        })
    };
    // Nobody reads the FIFO.
    call(&fifo);
    // A reader that never reads, and a full pipe.
    use std::os::unix::fs::OpenOptionsExt as _;
    let open = |write: bool| {
        std::fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap()
    };
    let _reader = open(false);
    let mut writer = open(true);
    use std::io::Write as _;
    while writer.write(&[0u8; 4096]).is_ok() {}
    call(&fifo);
    // A full disk, a missing directory, a directory.
    call(Path::new("/dev/full"));
    call(&sb.path("no/such/dir/log"));
    call(&sb.root);
}
