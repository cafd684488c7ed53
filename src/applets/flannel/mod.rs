//! `flannel` (flannel-io/cni-plugin, as k3s ships it): a meta plugin. It reads the node's lease
//! from flanneld's `subnetFile` (default `/run/flannel/subnet.env`), builds the config of the
//! plugin that does the work — `bridge` unless `delegate.type` says otherwise — stores it as
//! `<dataDir>/<containerID>` (default `/var/lib/cni/flannel`) for DEL, and runs it: in-process
//! when the plugin found in CNI_PATH is cnibox itself.
//!
//! The delegate config, as flannel builds it: the `delegate` object, plus `name`, `type`
//! (`bridge`), `ipMasq` (unless flannel masquerades itself, `FLANNEL_IPMASQ`), `mtu`
//! (`FLANNEL_MTU`), `isGateway: true` for a bridge, `cniVersion`, `runtimeConfig`, and an
//! `ipam` of the config's `ipam` (type `host-local` by default) whose `ranges` are the node's
//! subnets (v4, then v6) and whose `routes` add the cluster networks. The stored file is what
//! Go's `json.Marshal` writes (sorted keys, compact), so either implementation's DEL reads the
//! other's.
//!
//! Beyond upstream: CHECK runs the delegate's CHECK with the stored config (upstream's is a
//! no-op); STATUS fails with code 50 while flanneld has written no subnet file, then asks the
//! delegate; GC (upstream has none) runs, for each attachment of this network whose config
//! cnibox stored (ADD records it under `<state dir>/flannel/<network>/`) and the runtime no
//! longer lists, the delegate's DEL with that config, drops it when that succeeds, then runs
//! the delegate's GC — any other file in `dataDir` (a conflist, the Go plugin's stored
//! configs, anything without a stored config's shape) is left alone; a failed ADD runs the
//! delegate's DEL and drops its stored config, and the directories it made, instead of
//! leaving both for a later DEL; a missing subnet file is code 11 (flanneld not started yet:
//! try again), not 999; `subnetFile` is read without blocking, only as a regular file of at
//! most 64 KiB (code 7 naming it otherwise), bytes that are not UTF-8 failing only a line
//! flannel parses, as Go reads it; container IDs longer than a file name (255 bytes), which
//! flannel cannot store, are stored as `~<32 hex of sha512>`; a `dataDir` that is not a
//! directory is code 7 naming it, other write failures code 5.

mod stored;
pub(super) mod subnet;
#[cfg(test)]
mod tests;

use crate::attachment;
use crate::cni::env::Env;
use crate::cni::gojson::compact;
use crate::cni::result::Route;
use crate::cni::{
    Applet, CniResult, CodeContext, Command, Context, Error, Request, Result, Version, delegate,
};
use crate::error::code;
use crate::undo::{ErrorList, and_undo};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use stored::{RECORD, read_stored, remove, store, stored_path, unstore};
use subnet::SubnetEnv;

pub static APPLET: Applet = Applet {
    name: "flannel",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

const DEFAULT_SUBNET_FILE: &str = "/run/flannel/subnet.env";
const DEFAULT_DATA_DIR: &str = "/var/lib/cni/flannel";

struct Flannel {
    subnet_file: String,
    data_dir: PathBuf,
    /// `delegate`, checked; `None` when absent.
    delegate: Map<String, Value>,
    ipam: Map<String, Value>,
    /// The config's `ipam.routes`, decoded as Go decodes `types.Route`.
    routes: Vec<Route>,
}

/// A path key: absolute, no NUL (it names a file flannel reads or writes).
fn path_key(key: &str, v: Option<&Value>, default: &str) -> Result<String> {
    let s = match v {
        None => return Ok(default.to_string()),
        Some(Value::String(s)) if s.is_empty() => return Ok(default.to_string()),
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(Error::decode(format!(
                "failed to load netconf: {key} must be a string"
            )));
        }
    };
    if !s.starts_with('/') || s.contains('\0') {
        return Err(Error::config(format!(
            "{key} {s:?} must be an absolute path"
        )));
    }
    Ok(s.clone())
}

fn object(key: &str, v: Option<&Value>) -> Result<Map<String, Value>> {
    match v {
        None => Ok(Map::new()),
        Some(Value::Object(m)) => Ok(m.clone()),
        Some(_) => Err(Error::decode(format!(
            "failed to load netconf: {key} must be an object"
        ))),
    }
}

fn load(req: &Request) -> Result<Flannel> {
    let member = |k| crate::cni::gojson::member(&req.raw, k);
    let subnet_file = path_key("subnetFile", member("subnetFile"), DEFAULT_SUBNET_FILE)?;
    let data_dir = path_key("dataDir", member("dataDir"), DEFAULT_DATA_DIR)?;
    let delegate = object("delegate", member("delegate"))?;
    // Keys of the delegate map are matched exactly, as flannel looks them up in a Go map.
    match delegate.get("type") {
        None => {}
        Some(Value::String(t))
            if t.is_empty() || t.contains('/') || t.chars().any(char::is_control) =>
        {
            return Err(Error::config(format!(
                "delegate.type {:?} is not a plugin name",
                t.chars().take(64).collect::<String>()
            )));
        }
        Some(Value::String(_)) => {}
        Some(_) => {
            return Err(Error::config(
                "'delegate' dictionary, if present, must have (string) 'type' field",
            ));
        }
    }
    for (key, why) in [("name", "name"), ("ipam", "ipam")] {
        if delegate.contains_key(key) {
            return Err(Error::config(format!(
                "'delegate' dictionary must not have '{why}' field, it'll be set by flannel"
            )));
        }
    }
    let ipam = object("ipam", member("ipam"))?;
    let routes = match ipam.get("routes") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => crate::cni::gojson::from_value(v).ctx_code(
            code::INVALID_CONFIG,
            "failed to read IPAM routes: failed to parse ipam.routes",
        )?,
    };
    Ok(Flannel {
        subnet_file,
        data_dir: PathBuf::from(data_dir),
        delegate,
        ipam,
        routes,
    })
}

/// The delegate's config, key for key as flannel builds it.
fn delegate_conf(req: &Request, f: &Flannel, se: &SubnetEnv) -> Map<String, Value> {
    let mut d = f.delegate.clone();
    if let Some(rc) = crate::cni::gojson::member(&req.raw, "runtimeConfig") {
        d.insert("runtimeConfig".into(), rc.clone());
    }
    d.insert("name".into(), Value::from(req.conf.name.as_str()));
    let kind = d
        .entry("type")
        .or_insert_with(|| Value::from("bridge"))
        .clone();
    d.entry("ipMasq")
        .or_insert_with(|| Value::from(se.ipmasq != Some(true)));
    d.entry("mtu").or_insert_with(|| json!(se.mtu));
    if kind == "bridge" {
        d.entry("isGateway").or_insert(Value::Bool(true));
    }
    if !req.conf.cni_version.is_empty() {
        d.insert(
            "cniVersion".into(),
            Value::from(req.conf.cni_version.as_str()),
        );
    }
    let mut ipam = f.ipam.clone();
    ipam.entry("type")
        .or_insert_with(|| Value::from("host-local"));
    let ranges: Vec<Value> = [se.subnet, se.ip6_subnet]
        .into_iter()
        .flatten()
        .map(|sn| json!([{ "subnet": sn.to_string() }]))
        .collect();
    ipam.insert(
        "ranges".into(),
        if ranges.is_empty() {
            Value::Null
        } else {
            Value::Array(ranges)
        },
    );
    let mut routes = f.routes.clone();
    routes.extend(
        se.networks
            .iter()
            .chain(&se.ip6_networks)
            .map(|n| Route::new(*n, None)),
    );
    ipam.insert("routes".into(), json!(routes));
    d.insert("ipam".into(), Value::Object(ipam));
    d
}

fn delegate_type(conf: &Map<String, Value>) -> &str {
    conf.get("type").and_then(Value::as_str).unwrap_or("bridge")
}

fn add(req: &Request) -> Result<CniResult> {
    let f = load(req)?;
    let se = SubnetEnv::load(&f.subnet_file)?;
    let conf = delegate_conf(req, &f, &se);
    let text = compact(&conf);
    let cid = &req.env.container_id;
    let kind = delegate_type(&conf);
    // Before anything is written: a delegate that is not installed is a plain config error,
    // and a CNI_NETNS that is no network namespace is code 8 (every delegate would refuse it,
    // and its DEL too, which would keep the stored config until GC).
    delegate::find_in_path(kind, req)?;
    req.netns()?;
    let made = store(&f, cid, &text)?;
    let (net, ifname) = (req.conf.name.as_str(), req.env.ifname.as_str());
    // For GC (an attachment without one, e.g. the Go plugin's, is never collected).
    if let Err(e) = attachment::record(RECORD, net, cid, ifname, &[]) {
        crate::warn!("flannel: {e}");
    }
    match delegate::plugin(Command::Add, kind, text.as_bytes(), req) {
        Ok(Some(result)) => Ok(result),
        out => {
            let err = match out {
                Err(e) => e.ctx("failed to delegate add"),
                _ => Error::internal(format!("failed to delegate add: {kind} printed no result")),
            };
            // Undo: the delegate's DEL, then its stored config — kept if that DEL failed, so a
            // later DEL can clean up, unless the delegate refused the config or its environment
            // (CNI_ARGS, CNI_NETNS) itself: it did nothing, and would refuse every DEL too.
            let refused = matches!(
                err.code,
                code::INCOMPATIBLE_VERSION
                    | code::UNSUPPORTED_FIELD
                    | code::INVALID_ENV
                    | code::DECODE_FAILURE
                    | code::INVALID_CONFIG
                    | code::INVALID_NETNS
            );
            let undone = delegate::plugin(Command::Del, kind, text.as_bytes(), req).map(drop);
            if undone.is_ok() || refused {
                unstore(&f, cid, &made);
                attachment::forget(RECORD, net, cid, ifname);
            }
            Err(and_undo(
                err,
                undone.ctx(format_args!("undo {kind} delegate")),
            ))
        }
    }
}

fn del(req: &Request) -> Result<()> {
    let f = load(req)?;
    let env = &req.env;
    let path = stored_path(&f, &env.container_id);
    let Some(text) = read_stored(&path)? else {
        attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
        return Ok(());
    };
    // As upstream: a stored config that cannot be read back is dropped with a note, not an
    // error that would block the DEL forever.
    let kind = match serde_json::from_slice::<Value>(&text) {
        Ok(Value::Object(conf)) => delegate_type(&conf).to_string(),
        _ => {
            crate::warn!("flannel: {} is not a JSON object; removed", path.display());
            remove(&path)?;
            attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
            return Ok(());
        }
    };
    delegate::plugin(Command::Del, &kind, &text, req)?;
    remove(&path)?;
    attachment::forget(RECORD, &req.conf.name, &env.container_id, &env.ifname);
    Ok(())
}

/// The stored config with the request's prevResult, for the delegate's CHECK.
fn check(req: &Request) -> Result<()> {
    let f = load(req)?;
    let path = stored_path(&f, &req.env.container_id);
    let text = read_stored(&path)?.ok_or_else(|| {
        Error::new(
            code::UNKNOWN_CONTAINER,
            format!(
                "flannel: no stored config for container {:?} in {}",
                req.env.container_id,
                f.data_dir.display()
            ),
        )
    })?;
    let Ok(Value::Object(mut conf)) = serde_json::from_slice::<Value>(&text) else {
        return Err(Error::internal(format!(
            "flannel: {} is not a JSON object",
            path.display()
        )));
    };
    if let Some(prev) = &req.conf.prev_result {
        conf.insert("prevResult".into(), prev.clone());
    }
    let kind = delegate_type(&conf).to_string();
    delegate::plugin(Command::Check, &kind, compact(&conf).as_bytes(), req).map(drop)
}

/// Not available (code 50) until flanneld has written the node's subnet; then the delegate's.
fn status(req: &Request) -> Result<()> {
    let f = load(req)?;
    let se = SubnetEnv::load(&f.subnet_file)
        .map_err(|e| Error::new(code::PLUGIN_NOT_AVAILABLE, e.msg).with_details(e.details))?;
    let conf = delegate_conf(req, &f, &se);
    delegate::plugin(
        Command::Status,
        delegate_type(&conf),
        compact(&conf).as_bytes(),
        req,
    )
    .map(drop)
}

/// The delegate type of a stored config, if `text` has the shape of one flannel wrote for the
/// network `name`: a JSON object with that `name`, a plugin `type` and an `ipam` object — not
/// a conflist (`plugins`), not any other file of that name.
fn stored_shape(text: &[u8], name: &str) -> Option<String> {
    let Ok(Value::Object(conf)) = serde_json::from_slice::<Value>(text) else {
        return None;
    };
    let kind = conf.get("type")?.as_str()?;
    let ok = conf.get("name").and_then(Value::as_str) == Some(name)
        && !kind.is_empty()
        && !kind.contains('/')
        && conf.get("ipam").is_some_and(Value::is_object)
        && !conf.contains_key("plugins");
    ok.then(|| kind.to_string())
}

/// For each attachment of this network whose config cnibox's flannel stored (its record) and
/// the runtime no longer lists: the delegate's DEL with that config, as flannel's DEL would
/// run it, then the config goes. Then the delegate's GC with the runtime's list. A file with
/// no record (another network's, the Go plugin's, anything else in `dataDir`) is left alone,
/// and so is one without the shape of a stored delegate config.
fn gc(req: &Request) -> Result<()> {
    let f = load(req)?;
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let mut errors = ErrorList::new();
    let net = req.conf.name.as_str();
    for (cid, ifname, _) in attachment::list(RECORD, net) {
        if valid
            .iter()
            .any(|a| a.container_id == cid && a.ifname == ifname)
        {
            continue;
        }
        let path = stored_path(&f, &cid);
        let text = match read_stored(&path) {
            Ok(Some(t)) => t,
            Ok(None) => {
                attachment::forget(RECORD, net, &cid, &ifname);
                continue;
            }
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let Some(kind) = stored_shape(&text, net) else {
            crate::warn!(
                "flannel: {} is not a stored delegate config of {net}; left alone",
                path.display()
            );
            attachment::forget(RECORD, net, &cid, &ifname);
            continue;
        };
        let env = Env {
            command: Command::Del,
            container_id: cid.clone(),
            netns: String::new(),
            ifname: ifname.clone(),
            args: String::new(),
            path: req.env.path.clone(),
        };
        let del = delegate::plugin_for(Command::Del, &kind, &text, req, &env)
            .ctx(format_args!("GC: DEL of container {cid:?}"));
        if errors.check(del).is_some() && errors.check(remove(&path)).is_some() {
            attachment::forget(RECORD, net, &cid, &ifname);
        }
    }
    match SubnetEnv::load(&f.subnet_file) {
        Ok(se) => {
            let mut conf = delegate_conf(req, &f, &se);
            for key in ["cni.dev/valid-attachments", "cni.dev/attachments"] {
                if let Some(v) = req.raw.get(key) {
                    conf.insert(key.into(), v.clone());
                }
            }
            let kind = delegate_type(&conf).to_string();
            errors.check(delegate::plugin(
                Command::Gc,
                &kind,
                compact(&conf).as_bytes(),
                req,
            ));
        }
        Err(e) => errors.push(e),
    }
    errors.into_result()
}
