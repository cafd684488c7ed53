//! The harness of tests/cnitool.rs: the libcni driver (built once per test binary from
//! tests/libcni/main.go over libcni 1.3, Debian unstable's golang-github-appc-cni-dev, with
//! unstable's Go, both unpacked by `.ci/fetch-unstable`; offline, GOPATH mode), a
//! recorder plugin, and a [`World`]: a sandbox with cnitool, the recorder and the applets in its
//! bin dir, a network configuration directory, a result cache and a node namespace to run in.

use crate::common::{NetNs, Output, Sandbox, exec, require_all, skip_note};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// libcni 1.3 (what containerd 2.1, podman 5 and v1.9.1's plugins are built with), unpacked by
/// `.ci/fetch-unstable golang-github-appc-cni-dev`.
const GOPATH: &str = "/var/cache/cnibox-unstable/golang-github-appc-cni-dev/usr/share/gocode";
const LIBCNI: &str = "/var/cache/cnibox-unstable/golang-github-appc-cni-dev/usr/share/gocode/src/github.com/containernetworking/cni/libcni";
/// Where `.ci/fetch-unstable --go` unpacks unstable's Go (libcni 1.3 needs Go >= 1.21; Debian
/// 12's is 1.19): the newest `go-1.NN` there.
const GO_ROOTS: &str = "/var/cache/cnibox-unstable/go/usr/lib";

fn goroot() -> Option<PathBuf> {
    let mut roots: Vec<(u32, PathBuf)> = std::fs::read_dir(GO_ROOTS)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let minor = name.strip_prefix("go-1.")?.parse().ok()?;
            Some((minor, e.path()))
        })
        .filter(|(_, p)| p.join("bin/go").is_file())
        .collect();
    roots.sort();
    roots.pop().map(|(_, p)| p)
}

/// The driver binary, built on first use; `None` (after a skip note, a failure under
/// `CNIBOX_REQUIRE_ALL=1`) when Go or the libcni source is not installed.
fn driver() -> Option<&'static Path> {
    static DRIVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = DRIVER.get_or_init(|| {
        if !Path::new(LIBCNI).is_dir() {
            return Err(format!(
                "{LIBCNI} missing (.ci/fetch-unstable golang-github-appc-cni-dev)"
            ));
        }
        let Some(goroot) = goroot() else {
            return Err(format!("no Go under {GO_ROOTS} (.ci/fetch-unstable --go)"));
        };
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("libcni-driver");
        let out = tmp.join("libcni-driver");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/libcni/main.go");
        let status = std::process::Command::new(goroot.join("bin/go"))
            .args(["build", "-o"])
            .arg(&out)
            .arg(&src)
            .env("GO111MODULE", "off")
            .env(
                "GOPATH",
                format!("{GOPATH}:{}", tmp.join("gopath").display()),
            )
            .env("GOCACHE", tmp.join("cache"))
            .env("GOFLAGS", "")
            .env("GOROOT", &goroot)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("CGO_ENABLED", "0")
            .status();
        match status {
            Ok(s) if s.success() => Ok(out),
            Ok(s) => Err(format!("go build of the libcni driver failed: {s}")),
            Err(e) => Err(format!("go not runnable ({e}): .ci/fetch-unstable --go")),
        }
    });
    match built {
        Ok(p) => Some(p),
        Err(why) => {
            assert!(!require_all() || !why.contains("failed"), "{why}");
            skip_note("cnitool against libcni", why);
            None
        }
    }
}

/// A plugin that records its stdin and CNI_* variables in `$REC_DIR/<CMD>-<name>.json` and
/// the call in `$REC_DIR/order`; ADD prints the config's `result`, else its `prevResult`; a
/// config whose `fail` names the verb fails with code 11.
const RECORDER: &str = r#"#!/usr/bin/python3
import json, os, sys
name, cmd = os.path.basename(sys.argv[0]), os.environ.get("CNI_COMMAND", "")
conf = json.loads(sys.stdin.read())
d = os.environ["REC_DIR"]
env = {k: v for k, v in os.environ.items() if k.startswith("CNI_")}
with open(os.path.join(d, cmd + "-" + name + ".json"), "w") as f:
    json.dump({"env": env, "conf": conf}, f)
with open(os.path.join(d, "order"), "a") as f:
    f.write(cmd + " " + name + "\n")
if conf.get("fail") == cmd:
    print(json.dumps({"cniVersion": conf.get("cniVersion"), "code": 11,
                      "msg": "recorder asked to fail", "details": "at " + cmd}))
    sys.exit(1)
if cmd == "ADD":
    print(json.dumps(conf.get("result") or conf.get("prevResult") or {"cniVersion": conf.get("cniVersion")}))
"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// tests/libcni/main.go over Debian's libcni.
    Libcni,
    /// `cnitool`, a link to the cnibox under test.
    Cnibox,
}

pub struct World {
    pub sb: Sandbox,
    pub node: NetNs,
    pub conf_dir: PathBuf,
    driver: &'static Path,
}

impl World {
    pub fn new(tag: &str) -> Option<World> {
        let driver = driver()?;
        let sb = Sandbox::new(&format!("cnitool-{tag}"));
        sb.link("cnitool");
        let rec = sb.bin.join("rec-a");
        std::fs::write(&rec, RECORDER).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rec, std::fs::Permissions::from_mode(0o755)).unwrap();
        for other in ["rec-b", "rec-c"] {
            std::os::unix::fs::symlink(&rec, sb.bin.join(other)).unwrap();
        }
        let conf_dir = sb.path("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        std::fs::create_dir_all(sb.path("rec")).unwrap();
        let node = NetNs::create();
        node.sh(&["ip", "link", "set", "lo", "up"]);
        Some(World {
            sb,
            node,
            conf_dir,
            driver,
        })
    }

    /// Write a network configuration file into NETCONFPATH.
    pub fn write(&self, name: &str, conf: &Value) {
        let text = serde_json::to_string_pretty(conf).unwrap() + "\n";
        std::fs::write(self.conf_dir.join(name), text).unwrap();
    }

    /// `TOOL VERB NETWORK NETNS` in the node with NETCONFPATH, CNI_PATH (the sandbox's bin
    /// dir), CNI_CACHE_DIR and REC_DIR of this world, then `vars`.
    #[track_caller]
    pub fn run(
        &self,
        tool: Tool,
        verb: &str,
        net: &str,
        netns: &str,
        vars: &[(&str, &str)],
    ) -> Output {
        self.run_under(&[], tool, verb, net, netns, vars)
    }

    /// [`World::run`] with the tool started by `wrapper` (`strace -f …`).
    #[track_caller]
    pub fn run_under(
        &self,
        wrapper: &[&str],
        tool: Tool,
        verb: &str,
        net: &str,
        netns: &str,
        vars: &[(&str, &str)],
    ) -> Output {
        let prog = match tool {
            Tool::Libcni => self.driver.to_path_buf(),
            Tool::Cnibox => self.sb.bin.join("cnitool"),
        };
        let (conf, path) = (
            self.conf_dir.display().to_string(),
            self.sb.bin.display().to_string(),
        );
        let (cache, rec) = (
            self.sb.path("cache").display().to_string(),
            self.sb.path("rec").display().to_string(),
        );
        let state = self.sb.state_dir();
        let mut env: Vec<(&str, &str)> = vec![
            ("NETCONFPATH", &conf),
            ("CNI_PATH", &path),
            ("CNI_CACHE_DIR", &cache),
            ("REC_DIR", &rec),
            ("CNIBOX_STATE_DIR", &state),
        ];
        env.retain(|(k, _)| !vars.iter().any(|(v, _)| v == k));
        env.extend_from_slice(vars);
        let prog = prog.display().to_string();
        let mut args = vec!["netns", "exec", &self.node.name];
        args.extend_from_slice(wrapper);
        args.extend_from_slice(&[&prog, verb, net, netns]);
        exec(Path::new("ip"), &args, &env, "")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.sb.path("cache/results")
    }

    /// The names in the cache directory, sorted.
    pub fn cache_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.cache_dir())
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// The cache record of `net` for the pod at `netns` (an absolute, clean path), whose
    /// container ID both tools derive as upstream cnitool does.
    #[track_caller]
    pub fn cache(&self, net: &str, netns: &str) -> Value {
        serde_json::from_str(&self.cache_text(net, netns)).unwrap()
    }

    /// [`World::cache`]'s file as written, byte for byte.
    #[track_caller]
    pub fn cache_text(&self, net: &str, netns: &str) -> String {
        // sha512sum(1), not the crate's own hash: an independent oracle for the derived ID.
        let mut child = std::process::Command::new("sha512sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sha512sum");
        {
            use std::io::Write as _;
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(netns.as_bytes()).expect("write");
        }
        let out = child.wait_with_output().expect("sha512sum");
        let id = String::from_utf8_lossy(&out.stdout)[..20].to_string();
        let file = self.cache_dir().join(format!("{net}-cnitool-{id}-eth0"));
        std::fs::read_to_string(&file).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; cache holds {:?}",
                file.display(),
                self.cache_files()
            )
        })
    }

    pub fn clear_records(&self) {
        let _ = std::fs::remove_dir_all(self.sb.path("rec"));
        std::fs::create_dir_all(self.sb.path("rec")).unwrap();
    }
}

/// What the recorder kept: `"<CMD>-<plugin>"` → `{"env", "conf"}`, and `"order"`.
pub fn records(w: &World) -> Value {
    let mut m = Map::new();
    let dir = w.sb.path("rec");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(key) = name.strip_suffix(".json") {
            m.insert(
                key.into(),
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap(),
            );
        }
    }
    let order = std::fs::read_to_string(dir.join("order")).unwrap_or_default();
    m.insert("order".into(), order.into());
    Value::Object(m)
}

/// The error text as Go prints it: `msg`, then `; details` when there are any.
pub fn message(out: &Output) -> String {
    let msg = out.json["msg"].as_str().unwrap_or_default();
    match out.json["details"].as_str() {
        Some(d) if !d.is_empty() => format!("{msg}; {d}"),
        _ => msg.to_string(),
    }
}
