//! Who owns which rules, for GC where the rules themselves cannot say: portmap's nftables
//! rules carry only the container ID (not the network), and firewall's iptables rules carry no
//! owner at all (both as upstream writes them, which compatibility requires). ADD records
//! `<state>/<kind>/<network>/<cid>:<ifname>` (one line per item, e.g. an IP), DEL removes it,
//! GC of a network compares its records with the valid attachments. Rules created by the Go
//! plugins have no record and are left alone by GC.

use crate::cni::{Context, Result};
use std::path::PathBuf;

const DEFAULT_DIR: &str = "/var/lib/cni/cnibox";

fn dir(kind: &str, network: &str) -> PathBuf {
    let base = std::env::var_os("CNIBOX_STATE_DIR").unwrap_or_else(|| DEFAULT_DIR.into());
    PathBuf::from(base).join(kind).join(network)
}

fn key(cid: &str, ifname: &str) -> String {
    format!("{cid}:{ifname}")
}

/// Write (replace) the record of one attachment.
pub fn record(kind: &str, network: &str, cid: &str, ifname: &str, items: &[String]) -> Result<()> {
    let d = dir(kind, network);
    std::fs::create_dir_all(&d).ctx(format_args!("create {}", d.display()))?;
    let name = key(cid, ifname);
    let tmp = d.join(format!(".{name}.{}", std::process::id()));
    let mut body = items.join("\n");
    body.push('\n');
    std::fs::write(&tmp, body).ctx(format_args!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, d.join(&name)).ctx(format_args!("rename {}", tmp.display()))
}

/// The items recorded for one attachment (empty if none).
pub fn get(kind: &str, network: &str, cid: &str, ifname: &str) -> Vec<String> {
    std::fs::read_to_string(dir(kind, network).join(key(cid, ifname)))
        .map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Remove one attachment's record; a missing record is fine.
pub fn forget(kind: &str, network: &str, cid: &str, ifname: &str) {
    let _ = std::fs::remove_file(dir(kind, network).join(key(cid, ifname)));
}

/// Every recorded attachment of a network: `(cid, ifname, items)`.
pub fn list(kind: &str, network: &str) -> Vec<(String, String, Vec<String>)> {
    let Ok(rd) = std::fs::read_dir(dir(kind, network)) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .filter_map(|n| {
            let (cid, ifname) = n.split_once(':')?;
            let items = get(kind, network, cid, ifname);
            Some((cid.to_string(), ifname.to_string(), items))
        })
        .collect()
}
