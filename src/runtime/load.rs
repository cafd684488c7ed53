//! Finding and reading a network configuration as libcni's `LoadNetworkConf` does: the
//! `.conflist` files of the directory in name order, the first whose `name` matches (a file that
//! cannot be read or parsed on the way fails the whole load, as in libcni — except one over
//! [`MAX_FILE`], which libcni would read: it is skipped with a line on stderr, and refused only
//! when it is a plugin file of the wanted network); plugins from
//! `<dir>/<name>/*.conf` appended unless `loadOnlyInlinedPlugins`; then, when no list matches,
//! the `.conf`/`.json` files (single plugins) in name order, wrapped into a list of one.
//! `cniVersions` picks the highest version not above 1.1.0; `disableCheck`, `disableGC` and
//! `loadOnlyInlinedPlugins` are booleans or the strings "true"/"false".

use crate::cni::error::{Error, Result, code};
use crate::cni::gojson;
use crate::cni::gojson::compact;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// One plugin of a list: its config as libcni holds it (Go's `json.Marshal` of the parsed
/// object: compact, keys sorted).
pub(crate) struct Plugin {
    pub(crate) kind: String,
    /// The plugin's own `name`, only for messages (libcni's `pluginDescription`).
    pub(crate) name: String,
    /// The capabilities it declares as `true`.
    pub(crate) capabilities: Vec<String>,
    pub(crate) conf: Map<String, Value>,
}

pub(crate) struct NetList {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) disable_check: bool,
    pub(crate) disable_gc: bool,
    pub(crate) plugins: Vec<Plugin>,
    /// What the result cache keeps as `config`: the file's bytes, or for a single plugin the
    /// list libcni wraps it in.
    pub(crate) bytes: Vec<u8>,
}

fn bad(what: &str, e: impl std::fmt::Display) -> Error {
    Error::config(format!("error parsing configuration{what}: {e}"))
}

/// A string member as Go decodes it into a struct field (key matched case-insensitively,
/// null or absent: empty).
fn string(v: &Value, key: &str) -> Result<String> {
    match gojson::member(v, key) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(bad("", format!("{key}: not a string"))),
    }
}

/// A plugin's config and the keys libcni decodes from it (its `cniVersion` too, for a single
/// plugin file).
fn plugin(v: Value) -> Result<(Plugin, String)> {
    let (kind, name, version) = (
        string(&v, "type")?,
        string(&v, "name")?,
        string(&v, "cniVersion")?,
    );
    let mut capabilities = Vec::new();
    match gojson::member(&v, "capabilities") {
        None => {}
        Some(Value::Object(caps)) => {
            for (k, on) in caps {
                match on {
                    Value::Bool(true) => capabilities.push(k.clone()),
                    Value::Bool(false) | Value::Null => {}
                    _ => return Err(bad("", format!("capabilities.{k}: not a boolean"))),
                }
            }
        }
        Some(_) => return Err(bad("", "capabilities: not an object")),
    }
    let Value::Object(conf) = v else {
        return Err(bad("", "not a JSON object"));
    };
    if kind.is_empty() {
        return Err(bad("", "missing 'type'"));
    }
    let p = Plugin {
        kind,
        name,
        capabilities,
        conf,
    };
    Ok((p, version))
}

/// A spec version as Go's `version.ParseVersion` reads it: "" is 0.1.0, missing parts are 0.
pub(crate) fn semver(s: &str) -> Result<(u64, u64, u64)> {
    if s.is_empty() {
        return Ok((0, 1, 0));
    }
    let mut n = [0u64; 3];
    for (i, part) in s.split('.').enumerate() {
        match (n.get_mut(i), part.parse()) {
            (Some(slot), Ok(v)) => *slot = v,
            _ => return Err(Error::config(format!("invalid version {s:?}"))),
        }
    }
    Ok((n[0], n[1], n[2]))
}

/// `v` is at least `min` (an unparseable `v` is an error, as in libcni).
pub(crate) fn at_least(v: &str, min: (u64, u64, u64)) -> Result<bool> {
    Ok(semver(v)? >= min)
}

const CURRENT: (u64, u64, u64) = (1, 1, 0);

pub(crate) fn list_from_bytes(bytes: Vec<u8>) -> Result<(NetList, bool)> {
    let raw = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(raw)) => raw,
        Ok(_) => return Err(bad(" list", "not a JSON object")),
        Err(e) => return Err(bad(" list", e)),
    };
    let name = match raw.get("name") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(bad(" list", "invalid name type")),
        None => return Err(bad(" list", "no name")),
    };
    let mut version = match raw.get("cniVersion") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(bad(" list", "invalid cniVersion type")),
        None => String::new(),
    };
    if let Some(vs) = raw.get("cniVersions") {
        let Value::Array(vs) = vs else {
            return Err(bad(" list", "invalid type for cniVersions"));
        };
        let mut best = ((0, 0, 0), String::new());
        let given = (!version.is_empty()).then(|| Value::String(version.clone()));
        for v in vs.iter().chain(given.as_ref()) {
            let Value::String(v) = v else {
                return Err(bad(" list", "invalid type in cniVersions"));
            };
            let sv = semver(v).map_err(|e| bad(" list", format!("cniVersions: {}", e.msg)))?;
            if sv <= CURRENT && (best.1.is_empty() || sv > best.0) {
                best = (sv, v.clone());
            }
        }
        if !best.1.is_empty() {
            version = best.1;
        }
    }
    let flag = |key: &str| -> Result<bool> {
        match raw.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(bad(" list", format!("invalid value {v} for {key}"))),
        }
    };
    let disable_check = flag("disableCheck")?;
    let disable_gc = flag("disableGC")?;
    let inlined_only = flag("loadOnlyInlinedPlugins")?;
    let mut plugins = Vec::new();
    match raw.get("plugins") {
        None if inlined_only => {
            return Err(bad(
                " list",
                "`loadOnlyInlinedPlugins` is true, and no 'plugins' key",
            ));
        }
        None => {}
        Some(Value::Array(ps)) if ps.is_empty() => {
            return Err(bad(" list", "no plugins in list"));
        }
        Some(Value::Array(ps)) => {
            for (i, p) in ps.iter().enumerate() {
                let (p, _) = plugin(p.clone()).map_err(|e| {
                    Error::config(format!("failed to parse plugin config {i}: {}", e.msg))
                })?;
                plugins.push(p);
            }
        }
        Some(_) => return Err(bad(" list", "invalid 'plugins' type")),
    }
    let list = NetList {
        name,
        version,
        disable_check,
        disable_gc,
        plugins,
        bytes,
    };
    Ok((list, inlined_only))
}

/// Largest config or cache file read.
const MAX_FILE: u64 = 1 << 20;

/// A config or cache file: a regular file of at most 1 MiB, opened without blocking (a FIFO in
/// NETCONFPATH is an error, not a hang). `Ok(None)`: there is no such file.
pub(crate) fn read_file(path: &Path) -> Result<Option<Vec<u8>>> {
    match bounded(path) {
        Ok(data) => Ok(Some(data)),
        Err(Unread::Missing) => Ok(None),
        Err(Unread::TooLarge(e) | Unread::Failed(e)) => Err(e),
    }
}

/// Why [`bounded`] returned no bytes.
enum Unread {
    Missing,
    /// Larger than [`MAX_FILE`] (the error names the file).
    TooLarge(Error),
    Failed(Error),
}

fn bounded(path: &Path) -> std::result::Result<Vec<u8>, Unread> {
    use crate::smallfile::ReadError;
    let fail = |why: String| {
        Error::new(
            code::IO_FAILURE,
            format!("error reading {}: {why}", path.display()),
        )
    };
    match crate::smallfile::read(&path.to_string_lossy(), MAX_FILE) {
        Ok(data) => Ok(data),
        Err(ReadError::NotFound) => Err(Unread::Missing),
        Err(ReadError::NotRegular(kind)) => {
            Err(Unread::Failed(fail(format!("{kind}, not a regular file"))))
        }
        Err(ReadError::TooLarge(max)) => {
            Err(Unread::TooLarge(fail(format!("larger than {max} bytes"))))
        }
        Err(ReadError::Io(e)) => Err(Unread::Failed(fail(e.to_string()))),
    }
}

impl Unread {
    fn into_error(self, path: &Path) -> Error {
        match self {
            Unread::Missing => Error::new(
                code::IO_FAILURE,
                format!("error reading {}: no such file", path.display()),
            ),
            Unread::TooLarge(e) | Unread::Failed(e) => e,
        }
    }
}

/// A configuration file of NETCONFPATH on the way to the wanted network: its bytes, or `None`
/// when it is larger than [`MAX_FILE`]. libcni reads a file of any size, so one oversized file
/// (another network's, a stray dump) must not fail every load: it is skipped, with a line on
/// stderr saying so, and noted in `skipped` (if it held the wanted network, the load then fails
/// with code 5 naming the file it could not read).
fn read_conf(path: &Path, skipped: &mut Vec<String>) -> Result<Option<Vec<u8>>> {
    match bounded(path) {
        Ok(data) => Ok(Some(data)),
        Err(Unread::TooLarge(e)) => {
            crate::warn!("cnitool: {}; file skipped", e.msg);
            skipped.push(e.msg);
            Ok(None)
        }
        Err(why) => Err(why.into_error(path)),
    }
}

/// The files of `dir` (not directories) whose extension is one of `exts`, in name order (Go
/// sorts their paths, which share `dir`); none when `dir` does not exist.
fn conf_files(dir: &Path, exts: &[&str]) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::host_io(
                format_args!("error reading {}", dir.display()),
                e,
            ));
        }
    };
    let mut names = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ext = name.rsplit_once('.').map_or("", |(_, x)| x);
        if exts.contains(&ext) && !e.file_type().is_ok_and(|t| t.is_dir()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names.iter().map(|n| dir.join(n)).collect())
}

/// The list in `path`, with the plugins of `<dir>/<name>/*.conf`; `None` when the file is too
/// large ([`read_conf`]). A plugin file too large to read is skipped in another network's
/// directory and fails the load in the `wanted` network's (skipping it would run the list
/// without that plugin).
fn list_from_file(path: &Path, wanted: &str, skipped: &mut Vec<String>) -> Result<Option<NetList>> {
    let Some(bytes) = read_conf(path, skipped)? else {
        return Ok(None);
    };
    let (mut list, inlined_only) = list_from_bytes(bytes)?;
    if !inlined_only {
        let dir = path.parent().unwrap_or(Path::new("")).join(&list.name);
        for f in conf_files(&dir, &["conf"])? {
            let data = match bounded(&f) {
                Ok(data) => data,
                Err(Unread::TooLarge(e)) if list.name != wanted => {
                    crate::warn!("cnitool: {}; file skipped", e.msg);
                    continue;
                }
                Err(why) => return Err(why.into_error(&f)),
            };
            let v: Value = serde_json::from_slice(&data).map_err(|e| bad("", e))?;
            list.plugins.push(plugin(v)?.0);
        }
    }
    if list.plugins.is_empty() {
        return Err(Error::config(format!(
            "{}: no plugin configs found",
            path.display()
        )));
    }
    Ok(Some(list))
}

/// The names of the networks `dir` configures, in libcni's order (lists first, then single
/// plugins; each name once). A file that cannot be read or parsed is skipped here: loading
/// that network by name reports it.
pub(crate) fn names(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for f in conf_files(dir, &["conflist"])?
        .into_iter()
        .chain(conf_files(dir, &["conf", "json"])?)
    {
        let Ok(Some(data)) = read_file(&f) else {
            continue;
        };
        let Ok(v) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        if let Some(Value::String(name)) = v.get("name")
            && !names.contains(name)
        {
            names.push(name.clone());
        }
    }
    Ok(names)
}

/// The network `name` from `dir` (NETCONFPATH).
pub(crate) fn load(dir: &Path, name: &str) -> Result<NetList> {
    let mut skipped = Vec::new();
    let lists = conf_files(dir, &["conflist"])?;
    for f in &lists {
        if let Some(list) = list_from_file(f, name, &mut skipped)?
            && list.name == name
        {
            return Ok(list);
        }
    }
    let singles = conf_files(dir, &["conf", "json"])?;
    if singles.is_empty() && lists.is_empty() {
        return Err(Error::config(format!(
            "no net configurations found in {}",
            dir.display()
        )));
    }
    for f in &singles {
        let Some(data) = read_conf(f, &mut skipped)? else {
            continue;
        };
        let v: Value = serde_json::from_slice(&data).map_err(|e| bad("", e))?;
        let (p, version) = plugin(v)?;
        if p.name == name {
            // libcni's ConfListFromConf: the plugin wrapped in a list, re-marshalled.
            let wrapped = serde_json::json!({
                "name": p.name, "cniVersion": version, "plugins": [Value::Object(p.conf)]
            });
            return Ok(list_from_bytes(compact(&wrapped).into_bytes())?.0);
        }
    }
    // Not found, but a file could not be read: it may have held the network, so the load
    // fails as an I/O error naming it, not as a missing network.
    if !skipped.is_empty() {
        return Err(Error::new(
            code::IO_FAILURE,
            format!(
                "no net configuration with name {name:?} in {} that could be read ({})",
                dir.display(),
                skipped.join("; ")
            ),
        ));
    }
    Err(Error::config(format!(
        "no net configuration with name {name:?} in {}",
        dir.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_as_go_does() {
        assert_eq!(semver("").unwrap(), (0, 1, 0));
        assert_eq!(semver("1.1").unwrap(), (1, 1, 0));
        assert!(semver("1.x.0").is_err());
        assert!(semver("1.0.0.0").is_err());
    }

    #[test]
    fn cni_versions_pick_the_highest_supported() {
        let b = br#"{"name":"n","cniVersion":"0.4.0","cniVersions":["1.0.0","9.0.0"],"plugins":[{"type":"x"}]}"#;
        let (l, _) = list_from_bytes(b.to_vec()).unwrap();
        assert_eq!(l.version, "1.0.0");
        let b = br#"{"name":"n","disableCheck":"TRUE","plugins":[{"type":"x","capabilities":{"a":true,"b":false}}]}"#;
        let (l, _) = list_from_bytes(b.to_vec()).unwrap();
        assert!(l.disable_check && l.plugins[0].capabilities == ["a"]);
        let b = br#"{"name":"n","disableGC":1,"plugins":[{"type":"x"}]}"#;
        assert!(
            list_from_bytes(b.to_vec())
                .err()
                .unwrap()
                .msg
                .contains("disableGC")
        );
        let b = br#"{"name":"n","plugins":[{"name":"x"}]}"#;
        assert!(
            list_from_bytes(b.to_vec())
                .err()
                .unwrap()
                .msg
                .contains("missing 'type'")
        );
    }
}
