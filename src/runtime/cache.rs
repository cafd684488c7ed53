//! libcni's result cache, byte-compatible: `<dir>/results/<network>-<containerID>-<ifname>`, a
//! `cniCacheV1` record (kind, containerId, config as base64, ifName, networkName, netns, cniArgs,
//! capabilityArgs, result) written as Go's `json.Marshal` writes libcni's struct, so libcni
//! (containerd, podman, upstream cnitool) and cnibox read each other's records. The directory
//! is `CNI_CACHE_DIR` when set (libcni's `CacheDir` / `NewCNIConfigWithCacheDir`), else
//! /var/lib/cni.

use super::load::read_file;
use crate::cni::error::{Error, Result};
use crate::cni::gojson;
use crate::cni::result::compact;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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
    pub(crate) caps: serde_json::Map<String, Value>,
}

#[derive(Serialize)]
struct Record<'a> {
    kind: &'a str,
    #[serde(rename = "containerId")]
    container_id: &'a str,
    config: String,
    #[serde(rename = "ifName")]
    ifname: &'a str,
    #[serde(rename = "networkName")]
    network: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    netns: &'a str,
    #[serde(rename = "cniArgs", skip_serializing_if = "<[_]>::is_empty")]
    args: &'a [[String; 2]],
    #[serde(
        rename = "capabilityArgs",
        skip_serializing_if = "serde_json::Map::is_empty"
    )]
    caps: &'a serde_json::Map<String, Value>,
    #[serde(skip_serializing_if = "Value::is_null")]
    result: &'a Value,
}

/// What libcni reads back of a record.
#[derive(Deserialize)]
pub(crate) struct Cached {
    #[serde(default)]
    kind: String,
    #[serde(rename = "containerId", default)]
    pub(crate) container_id: String,
    #[serde(rename = "ifName", default)]
    pub(crate) ifname: String,
    #[serde(rename = "networkName", default)]
    pub(crate) network: String,
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

/// Record a successful ADD of `network`'s list (`config`: the list's bytes).
pub(crate) fn add(network: &str, config: &[u8], rt: &Rt, result: &Value) -> Result<()> {
    let rec = Record {
        kind: KIND,
        container_id: &rt.container_id,
        config: base64(config),
        ifname: &rt.ifname,
        network,
        netns: &rt.netns,
        args: &rt.args,
        caps: &rt.caps,
        result,
    };
    let file = path(network, rt);
    let fail = |e: std::io::Error| {
        let msg = format!("failed to set network {network:?} cached result: {e}");
        Error::new(crate::cni::error::code::IO_FAILURE, msg)
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
        .and_then(|mut f| f.write_all(compact(&rec).as_bytes()))
        .map_err(fail)
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
        .map_err(|e| Error::decode(format!("failed to parse cached result: {e}")))?;
    match gojson::from_value::<Cached>(&v) {
        Ok(c) if c.kind == KIND => Ok(gojson::member(&v, "result").cloned()),
        _ => Ok(Some(v)),
    }
}

/// Every `cniCacheV1` record naming a network and an interface, in file name order (libcni's
/// `GetCachedAttachments("")`); files that cannot be read or parsed are skipped.
pub(crate) fn attachments() -> Vec<Cached> {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| serde_json::from_slice::<Value>(&read_file(f).ok()??).ok())
        .filter_map(|v| gojson::from_value::<Cached>(&v).ok())
        .filter(|c| c.kind == KIND && !c.ifname.is_empty() && !c.network.is_empty())
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
