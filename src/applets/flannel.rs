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
//! delegate; GC runs the delegate's GC and drops the stored configs of this network's containers
//! the runtime no longer lists (upstream has neither); a failed ADD runs the delegate's DEL and
//! drops its stored config instead of leaving both for a later DEL; a missing subnet file is
//! code 11 (flanneld not started yet: try again), not 999.

use crate::cni::result::{Route, compact};
use crate::cni::{Applet, CniResult, Command, Context, Error, Request, Result, Version, delegate};
use crate::error::code;
use crate::undo::ErrorList;
use ipnet::IpNet;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

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
        Some(v) => crate::cni::gojson::from_value(v).map_err(|e| {
            Error::config(format!(
                "failed to read IPAM routes: failed to parse ipam.routes: {e}"
            ))
        })?,
    };
    Ok(Flannel {
        subnet_file,
        data_dir: PathBuf::from(data_dir),
        delegate,
        ipam,
        routes,
    })
}

/// What flanneld wrote for this node (`subnet.env`).
#[derive(Debug, Default, PartialEq)]
pub(super) struct SubnetEnv {
    networks: Vec<IpNet>,
    subnet: Option<IpNet>,
    ip6_networks: Vec<IpNet>,
    ip6_subnet: Option<IpNet>,
    mtu: Option<u32>,
    ipmasq: Option<bool>,
}

/// Go's `net.ParseCIDR` network: the address masked to its prefix.
fn cidr(file: &str, key: &str, s: &str) -> Result<IpNet> {
    s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
        Error::internal(format!(
            "failed to load flannel 'subnet.env' file: {file}: {key}: invalid CIDR address: {s:.64}"
        ))
    })
}

fn cidr_list(file: &str, key: &str, s: &str) -> Result<Vec<IpNet>> {
    let mut out: Vec<IpNet> = Vec::new();
    for part in s.split(',') {
        let n = cidr(file, key, part)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

impl SubnetEnv {
    fn parse(file: &str, text: &str) -> Result<SubnetEnv> {
        let mut se = SubnetEnv::default();
        for line in text.lines() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (key, value) = line.split_once('=').unwrap_or((line, ""));
            match key {
                "FLANNEL_NETWORK" => se.networks = cidr_list(file, key, value)?,
                "FLANNEL_SUBNET" => se.subnet = Some(cidr(file, key, value)?),
                "FLANNEL_IPV6_NETWORK" => se.ip6_networks = cidr_list(file, key, value)?,
                "FLANNEL_IPV6_SUBNET" => se.ip6_subnet = Some(cidr(file, key, value)?),
                "FLANNEL_MTU" => {
                    se.mtu = Some(value.parse().map_err(|_| {
                        Error::internal(format!(
                            "failed to load flannel 'subnet.env' file: {file}: FLANNEL_MTU: invalid number {value:.32}"
                        ))
                    })?)
                }
                "FLANNEL_IPMASQ" => se.ipmasq = Some(value == "true"),
                _ => {}
            }
        }
        let mut missing = Vec::new();
        if se.networks.is_empty() && se.ip6_networks.is_empty() {
            missing.extend(["FLANNEL_NETWORK", "FLANNEL_IPV6_NETWORK"]);
        }
        if se.subnet.is_none() && se.ip6_subnet.is_none() {
            missing.extend(["FLANNEL_SUBNET", "FLANNEL_IPV6_SUBNET"]);
        }
        if se.mtu.is_none() {
            missing.push("FLANNEL_MTU");
        }
        if se.ipmasq.is_none() {
            missing.push("FLANNEL_IPMASQ");
        }
        if !missing.is_empty() {
            return Err(Error::internal(format!(
                "failed to load flannel 'subnet.env' file: {file} is missing {}. Check the flannel pod log for this node.",
                missing.join(", ")
            )));
        }
        Ok(se)
    }

    /// Code 11 while the file does not exist (flanneld has not started on this node yet).
    pub(super) fn load(file: &str) -> Result<SubnetEnv> {
        match std::fs::read_to_string(file) {
            Ok(text) => SubnetEnv::parse(file, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::try_again(format!(
                "failed to load flannel 'subnet.env' file: open {file}: no such file or directory. Check the flannel pod log for this node."
            ))),
            Err(e) => Err(Error::io(
                format_args!("failed to load flannel 'subnet.env' file {file}"),
                e,
            )),
        }
    }
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

fn stored_path(f: &Flannel, cid: &str) -> PathBuf {
    f.data_dir.join(cid)
}

/// Upstream's write: directory 0700, file 0600, synced before the delegate runs, so a crash
/// after it leaves what DEL needs. The directory is made again if a failed ADD removed it in
/// between (see [`unstore`]).
fn store(f: &Flannel, cid: &str, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = stored_path(f, cid);
    let mut tries = 0;
    loop {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&f.data_dir)
            .ctx(format_args!("failed to create {}", f.data_dir.display()))?;
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path);
        match opened {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => tries += 1,
            opened => {
                return opened
                    .and_then(|mut file| {
                        file.write_all(text.as_bytes())?;
                        file.sync_all()
                    })
                    .ctx(format_args!("failed to save {}", path.display()));
            }
        }
    }
}

/// A failed ADD's stored config, and `dataDir` with it when nothing else is in it, so the
/// host is as it was.
fn unstore(f: &Flannel, cid: &str) {
    if let Err(e) = remove(&stored_path(f, cid)) {
        crate::warn!("flannel: {e}");
    }
    let _ = std::fs::remove_dir(&f.data_dir);
}

fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(Error::io(format_args!("remove {}", path.display()), e))
        }
        _ => Ok(()),
    }
}

/// The stored config of a container, `None` when there is none (DEL already ran).
fn read_stored(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format_args!("read {}", path.display()), e)),
    }
}

fn add(req: &Request) -> Result<CniResult> {
    let f = load(req)?;
    let se = SubnetEnv::load(&f.subnet_file)?;
    let conf = delegate_conf(req, &f, &se);
    let text = compact(&conf);
    let cid = &req.env.container_id;
    let kind = delegate_type(&conf);
    // Before anything is written: a delegate that is not installed is a plain config error.
    delegate::find_in_path(kind, req)?;
    store(&f, cid, &text)?;
    match delegate::plugin(Command::Add, kind, text.as_bytes(), req) {
        Ok(Some(result)) => Ok(result),
        out => {
            let err = match out {
                Err(e) => e.ctx("failed to delegate add"),
                _ => Error::internal(format!("failed to delegate add: {kind} printed no result")),
            };
            // Undo: the delegate's DEL, then its stored config — kept if that DEL failed, so a
            // later DEL can clean up, unless the delegate refused the config itself (it did
            // nothing, and would refuse every DEL of it too).
            let refused = matches!(
                err.code,
                code::INCOMPATIBLE_VERSION
                    | code::UNSUPPORTED_FIELD
                    | code::DECODE_FAILURE
                    | code::INVALID_CONFIG
            );
            let undone = match delegate::plugin(Command::Del, kind, text.as_bytes(), req) {
                Ok(_) => true,
                Err(e) => {
                    crate::warn!("flannel: DEL after the failed ADD: {e}");
                    false
                }
            };
            if undone || refused {
                unstore(&f, cid);
            }
            Err(err)
        }
    }
}

fn del(req: &Request) -> Result<()> {
    let f = load(req)?;
    let path = stored_path(&f, &req.env.container_id);
    let Some(text) = read_stored(&path)? else {
        return Ok(());
    };
    // As upstream: a stored config that cannot be read back is dropped with a note, not an
    // error that would block the DEL forever.
    let kind = match serde_json::from_slice::<Value>(&text) {
        Ok(Value::Object(conf)) => delegate_type(&conf).to_string(),
        _ => {
            crate::warn!("flannel: {} is not a JSON object; removed", path.display());
            return remove(&path);
        }
    };
    delegate::plugin(Command::Del, &kind, &text, req)?;
    remove(&path)
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

/// The delegate's GC with the runtime's list, then the stored configs of this network's
/// containers that are not on it.
fn gc(req: &Request) -> Result<()> {
    let f = load(req)?;
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let mut errors = ErrorList::new();
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
    let entries = match std::fs::read_dir(&f.data_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return errors.into_result(),
        Err(e) => {
            errors.push(Error::io(format_args!("read {}", f.data_dir.display()), e));
            return errors.into_result();
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(cid) = name.to_str() else { continue };
        if !crate::cni::env::is_valid_id(cid) || valid.iter().any(|a| a.container_id == cid) {
            continue;
        }
        let path = entry.path();
        let Ok(Some(text)) = read_stored(&path) else {
            continue;
        };
        let ours = serde_json::from_slice::<Value>(&text)
            .ok()
            .is_some_and(|v| v.get("name").and_then(Value::as_str) == Some(&req.conf.name));
        if ours {
            errors.check(remove(&path));
        }
    }
    errors.into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUAL: &str = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.1.1/24\n\
        FLANNEL_IPV6_NETWORK=2001:cafe:42::/56\nFLANNEL_IPV6_SUBNET=2001:cafe:42:1::1/64\n\
        FLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n";

    #[test]
    fn subnet_env_dual_stack() {
        let se = SubnetEnv::parse("f", DUAL).unwrap();
        assert_eq!(se.networks, vec!["10.42.0.0/16".parse::<IpNet>().unwrap()]);
        assert_eq!(se.subnet, Some("10.42.1.0/24".parse().unwrap()));
        assert_eq!(se.ip6_subnet, Some("2001:cafe:42:1::/64".parse().unwrap()));
        assert_eq!(se.mtu, Some(1450));
        assert_eq!(se.ipmasq, Some(true));
    }

    #[test]
    fn subnet_env_lists_dedup_and_missing_keys() {
        let se = SubnetEnv::parse(
            "f",
            "FLANNEL_NETWORK=10.1.0.0/16,10.2.0.0/16,10.1.0.0/16\r\nFLANNEL_SUBNET=10.1.3.0/24\r\nFLANNEL_MTU=1400\r\nFLANNEL_IPMASQ=false\r\n",
        )
        .unwrap();
        assert_eq!(se.networks.len(), 2);
        assert_eq!(se.ipmasq, Some(false));
        let e = SubnetEnv::parse("/x", "FLANNEL_SUBNET=10.1.3.0/24\n").unwrap_err();
        assert!(
            e.msg.contains(
                "/x is missing FLANNEL_NETWORK, FLANNEL_IPV6_NETWORK, FLANNEL_MTU, FLANNEL_IPMASQ"
            ),
            "{}",
            e.msg
        );
        let e = SubnetEnv::parse("/x", "FLANNEL_SUBNET=10.1.3.0\n").unwrap_err();
        assert!(e.msg.contains("FLANNEL_SUBNET: invalid CIDR"), "{}", e.msg);
        assert!(SubnetEnv::parse("/x", "FLANNEL_MTU=-1\n").is_err());
    }
}
