//! libcni's result cache, byte-compatible: `<dir>/results/<network>-<containerID>-<ifname>`, a
//! `cniCacheV1` record (kind, containerId, config as base64, ifName, networkName, netns, cniArgs,
//! capabilityArgs, result) written as Go's `json.Marshal` writes libcni's struct, so libcni
//! (containerd, podman, upstream cnitool) and cnibox read each other's records. The directory
//! is `CNI_CACHE_DIR` when set (libcni's `CacheDir` / `NewCNIConfigWithCacheDir`), else
//! /var/lib/cni.

use super::load::read_file;
use crate::cni::error::{CodeContext, Error, Result, code};
use crate::cni::gojson;
use crate::cni::gojson::compact;
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

const KIND: &str = "cniCacheV1";

/// The attachment a record belongs to (libcni's `RuntimeConf`).
pub(crate) struct Rt {
    pub(crate) container_id: String,
    pub(crate) netns: String,
    pub(crate) ifname: String,
    pub(crate) args: Vec<[String; 2]>,
    pub(crate) caps: Map<String, Value>,
}

/// What GC reads back of a record.
pub(crate) struct Cached {
    pub(crate) container_id: String,
    pub(crate) ifname: String,
    pub(crate) network: String,
}

/// A string field of a record as Go decodes it (case-insensitive key; anything else: empty).
fn field(v: &Value, key: &str) -> String {
    gojson::member(v, key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn is_v1(v: &Value) -> bool {
    field(v, "kind") == KIND
}

fn dir() -> PathBuf {
    let base = std::env::var_os("CNI_CACHE_DIR").filter(|d| !d.is_empty());
    PathBuf::from(base.unwrap_or_else(|| "/var/lib/cni".into())).join("results")
}

fn path(network: &str, rt: &Rt) -> PathBuf {
    dir().join(format!("{network}-{}-{}", rt.container_id, rt.ifname))
}

/// Go's base64.StdEncoding, how `json.Marshal` writes a `[]byte`.
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(ABC[(n >> (18 - 6 * i) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// A `cniCacheV1` record as libcni's struct is declared: its fields in that order, with the
/// omissions of Go's `json.Marshal` (`omitempty`).
#[derive(Serialize)]
struct CacheV1<'a> {
    kind: &'static str,
    #[serde(rename = "containerId")]
    container_id: &'a str,
    /// The list's bytes, base64 as Go writes a `[]byte`.
    config: String,
    #[serde(rename = "ifName")]
    ifname: &'a str,
    #[serde(rename = "networkName")]
    network: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    netns: &'a str,
    #[serde(rename = "cniArgs", skip_serializing_if = "<[_]>::is_empty")]
    args: &'a [[String; 2]],
    #[serde(rename = "capabilityArgs", skip_serializing_if = "Map::is_empty")]
    caps: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "is_empty")]
    result: Value,
}

/// Go's `omitempty` for an `interface{}` holding decoded JSON: null, or an empty list or map.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// Record a successful ADD of `network`'s list (`config`: the list's bytes), as Go's
/// `json.Marshal` writes libcni's struct.
pub(crate) fn add(network: &str, config: &[u8], rt: &Rt, result: Value) -> Result<()> {
    let rec = compact(&CacheV1 {
        kind: KIND,
        container_id: &rt.container_id,
        config: base64(config),
        ifname: &rt.ifname,
        network,
        netns: &rt.netns,
        args: &rt.args,
        caps: &rt.caps,
        result,
    });
    let file = path(network, rt);
    let fail = |e| {
        Error::host_io(
            format_args!("failed to set network {network:?} cached result"),
            e,
        )
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir())
        .map_err(fail)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| f.write_all(rec.as_bytes()))
        .map_err(fail)
}

/// One file of the cache directory as `cnibox status` reads it: the attachment it records
/// (`None` with `error` set when the file cannot be read or is not a `cniCacheV1` record naming
/// a network and an interface), its network and its result.
pub(crate) struct Record {
    pub(crate) file: PathBuf,
    pub(crate) network: String,
    pub(crate) rt: Option<Rt>,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<String>,
}

/// Every file of the cache directory, in name order, read as [`Record`]s (none when the
/// directory does not exist).
pub(crate) fn records() -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files.into_iter().map(record).collect()
}

fn record(file: PathBuf) -> Record {
    let data = match read_file(&file) {
        Ok(Some(data)) => Ok(data),
        Ok(None) => Err("vanished while read".to_string()),
        Err(e) => Err(e.msg),
    };
    parse_record(file, data)
}

/// A record from the bytes of `file` (or why they could not be read); the fuzz entry point
/// `applets::fuzz::cache_record` calls it too.
pub(crate) fn parse_record(file: PathBuf, data: std::result::Result<Vec<u8>, String>) -> Record {
    let mut rec = Record {
        file,
        network: String::new(),
        rt: None,
        result: None,
        error: None,
    };
    let v = data.and_then(|d| serde_json::from_slice::<Value>(&d).map_err(|e| e.to_string()));
    let v = match v {
        Ok(v) if is_v1(&v) => v,
        Ok(_) => {
            rec.error = Some(format!("not a {KIND} record"));
            return rec;
        }
        Err(e) => {
            rec.error = Some(format!("not JSON: {e}"));
            return rec;
        }
    };
    rec.network = field(&v, "networkName");
    let ifname = field(&v, "ifName");
    if rec.network.is_empty() || ifname.is_empty() {
        rec.error = Some("no networkName or ifName".into());
        return rec;
    }
    let args = gojson::member(&v, "cniArgs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|p| Some([p.get(0)?.as_str()?.into(), p.get(1)?.as_str()?.into()]))
                .collect()
        })
        .unwrap_or_default();
    let caps = gojson::member(&v, "capabilityArgs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    rec.rt = Some(Rt {
        container_id: field(&v, "containerId"),
        netns: field(&v, "netns"),
        ifname,
        args,
        caps,
    });
    rec.result = gojson::member(&v, "result").cloned();
    rec
}

pub(crate) fn remove(network: &str, rt: &Rt) {
    let _ = std::fs::remove_file(path(network, rt));
}

/// The cached result of `network`'s attachment `rt`, as JSON: `None` when there is no record
/// (or it cannot be read); an error when it cannot be parsed. A record that is not a
/// `cniCacheV1` one is read as a bare result (libcni's pre-0.8 format).
pub(crate) fn result(network: &str, rt: &Rt) -> Result<Option<Value>> {
    let Some(data) = read_file(&path(network, rt))? else {
        return Ok(None);
    };
    let v: Value = serde_json::from_slice(&data)
        .ctx_code(code::DECODE_FAILURE, "failed to parse cached result")?;
    if is_v1(&v) {
        return Ok(gojson::member(&v, "result").cloned());
    }
    Ok(Some(v))
}

/// Every `cniCacheV1` record naming a network and an interface, in file name order (libcni's
/// `GetCachedAttachments("")`); files that cannot be read or parsed are skipped.
pub(crate) fn attachments() -> Vec<Cached> {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| dir().join(n))
        .filter_map(|f| serde_json::from_slice::<Value>(&read_file(&f).ok()??).ok())
        .filter(is_v1)
        .map(|v| Cached {
            container_id: field(&v, "containerId"),
            ifname: field(&v, "ifName"),
            network: field(&v, "networkName"),
        })
        .filter(|c| !c.ifname.is_empty() && !c.network.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_is_gos_std_encoding() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"{\"a\":1}\n"), "eyJhIjoxfQo=");
    }
}
