//! Network configuration lists run as libcni runs them, for tests that use a client's conflist
//! exactly as it ships: ADD through the plugins in order, each getting the previous result as
//! `prevResult`; CHECK in order and DEL in reverse with the cached final result; `runtimeConfig`
//! holding only the capabilities a plugin declares. `NodeRoot` runs each plugin inside a node
//! namespace with the node's own `/run` and `/var/lib` (sandbox directories), so a conflist
//! whose paths are the defaults (`/run/flannel/subnet.env`, `/var/lib/cni/...`,
//! `/run/cni-ipam-state`) touches nothing on the machine.

use super::{Env, NetNs, Output, Sandbox, exec};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// The config plugin `i` of `list` receives.
pub fn plugin_conf(list: &Value, i: usize, prev: Option<&Value>, rc: &Value) -> Value {
    let mut c = list["plugins"][i].clone();
    c["name"] = list["name"].clone();
    c["cniVersion"] = list["cniVersion"].clone();
    let mut runtime = Map::new();
    if let Some(caps) = c["capabilities"].as_object() {
        for (k, on) in caps {
            if on == &json!(true)
                && let Some(v) = rc.get(k)
            {
                runtime.insert(k.clone(), v.clone());
            }
        }
    }
    if !runtime.is_empty() {
        c["runtimeConfig"] = Value::Object(runtime);
    }
    if let Some(p) = prev {
        c["prevResult"] = p.clone();
    }
    c
}

fn plugins(list: &Value) -> usize {
    list["plugins"].as_array().map_or(0, Vec::len)
}

fn kind(list: &Value, i: usize) -> String {
    list["plugins"][i]["type"].as_str().unwrap().to_string()
}

/// Runs one plugin: `(type, CNI_COMMAND, config)`.
pub type Runner<'a> = dyn Fn(&str, &str, &Value) -> Output + 'a;

/// ADD through the list; the final result.
#[track_caller]
pub fn add(list: &Value, rc: &Value, run: &Runner) -> Value {
    let mut prev: Option<Value> = None;
    for i in 0..plugins(list) {
        let conf = plugin_conf(list, i, prev.as_ref(), rc);
        let out = run(&kind(list, i), "ADD", &conf);
        assert!(out.status_ok, "ADD {}: {out:?}", kind(list, i));
        prev = Some(out.json);
    }
    prev.expect("a conflist has plugins")
}

/// Whether libcni hands the cached result to CHECK and DEL (spec 0.4.0 and later).
fn caches(list: &Value) -> bool {
    !matches!(
        list["cniVersion"].as_str(),
        Some("0.1.0" | "0.2.0" | "0.3.0" | "0.3.1")
    )
}

/// CHECK through the list with the cached result; the first failure, if any.
pub fn check(list: &Value, rc: &Value, result: &Value, run: &Runner) -> Option<Output> {
    (0..plugins(list)).find_map(|i| {
        let out = run(
            &kind(list, i),
            "CHECK",
            &plugin_conf(list, i, Some(result), rc),
        );
        (!out.status_ok).then_some(out)
    })
}

/// DEL through the list in reverse with the cached result.
#[track_caller]
pub fn del(list: &Value, rc: &Value, result: &Value, run: &Runner) {
    for i in (0..plugins(list)).rev() {
        let prev = caches(list).then_some(result);
        let out = run(&kind(list, i), "DEL", &plugin_conf(list, i, prev, rc));
        assert!(out.status_ok, "DEL {}: {out:?}", kind(list, i));
    }
}

/// A node namespace whose `/run` and `/var/lib` (as its plugins see them) are sandbox
/// directories: each plugin runs under `ip netns exec` (a mount namespace of its own, slave to
/// the machine's) with `<sandbox>/run` bound over `/run` — `/run/netns` still the machine's —
/// and `<sandbox>/varlib` over `/var/lib`.
pub struct NodeRoot<'a> {
    pub sb: &'a Sandbox,
    pub node: &'a NetNs,
}

impl NodeRoot<'_> {
    /// A path as the node's plugins see it (`/run/...` or `/var/lib/...`), on the machine.
    pub fn host_path(&self, node_path: &str) -> PathBuf {
        if let Some(rest) = node_path.strip_prefix("/run/") {
            self.sb.path("run").join(rest)
        } else if let Some(rest) = node_path.strip_prefix("/var/lib/") {
            self.sb.path("varlib").join(rest)
        } else {
            panic!("{node_path} is outside the node's /run and /var/lib")
        }
    }

    /// Run applet `kind` of cnibox (the sandbox's links) for `command`, with the CNI variables
    /// of `env` and its [`Env::extra`] ones.
    pub fn run(&self, kind: &str, command: &str, env: &Env, conf: &Value) -> Output {
        for d in ["run/netns", "varlib/cni"] {
            std::fs::create_dir_all(self.sb.path(d)).unwrap();
        }
        let script = "mount --rbind /run/netns \"$R/run/netns\" && mount --rbind \"$R/run\" /run \
                      && mount --bind \"$R/varlib\" /var/lib && exec \"$@\"";
        let root = self.sb.root.display().to_string();
        let prog = self.sb.bin.join(kind).display().to_string();
        let path = env
            .path
            .clone()
            .unwrap_or_else(|| self.sb.bin.display().to_string());
        let vars = [
            ("R", root.as_str()),
            ("CNI_COMMAND", command),
            ("CNI_CONTAINERID", env.container_id.as_str()),
            ("CNI_NETNS", env.netns.as_str()),
            ("CNI_IFNAME", env.ifname.as_str()),
            ("CNI_PATH", path.as_str()),
        ];
        let mut vars: Vec<_> = vars.into_iter().filter(|(_, v)| !v.is_empty()).collect();
        vars.extend(env.extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let args = [
            "netns",
            "exec",
            self.node.name.as_str(),
            "sh",
            "-c",
            script,
            "sh",
            prog.as_str(),
        ];
        exec(Path::new("ip"), &args, &vars, &conf.to_string())
    }
}
