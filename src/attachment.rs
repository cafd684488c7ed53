//! Attachments (container ID + interface) as GC sees them, and the owner records cnibox keeps
//! for GC where the rules themselves cannot say: portmap's nftables
//! rules carry only the container ID (not the network), and firewall's iptables rules carry no
//! owner at all (both as upstream writes them, which compatibility requires). ADD records
//! `<state>/<kind>/<network>/<cid>:<ifname>` (one line per item, e.g. an IP), DEL removes it,
//! GC of a network compares its records with the valid attachments. Rules created by the Go
//! plugins have no record and are left alone by GC.

use crate::error::{Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// An attachment the runtime still considers valid (GC input: `cni.dev/valid-attachments`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq, Hash)]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    #[serde(default)]
    pub ifname: String,
}

const DEFAULT_DIR: &str = "/var/lib/cni/cnibox";

/// Where the records live: `CNIBOX_STATE_DIR` (tests, the sandboxes of integration tests),
/// else [`DEFAULT_DIR`]. Read once per call by the public functions; the rest of the module
/// takes it as a parameter (unit tests pass their own, never setting the variable).
fn base() -> PathBuf {
    std::env::var_os("CNIBOX_STATE_DIR")
        .unwrap_or_else(|| DEFAULT_DIR.into())
        .into()
}

fn dir(base: &Path, kind: &str, network: &str) -> PathBuf {
    // A network name longer than a file name allows gets its hash (GC lists by network only).
    let network = if network.len() <= NAME_MAX {
        network.to_string()
    } else {
        format!("~{}", crate::hash::sha512_hex(network.as_bytes(), 32))
    };
    base.join(kind).join(network)
}

/// Longest record name written as `<cid>:<ifname>`; longer owners (container IDs have no
/// length limit) get `~<32 hex of sha512>` and their owner on the record's first line,
/// `owner <cid>:<ifname>` (`~` never starts a container ID).
const NAME_MAX: usize = 200;
const OWNER_LINE: &str = "owner ";

fn key(cid: &str, ifname: &str) -> String {
    let k = format!("{cid}:{ifname}");
    if k.len() <= NAME_MAX {
        k
    } else {
        format!("~{}", crate::hash::sha512_hex(k.as_bytes(), 32))
    }
}

/// Write (replace) the record of one attachment.
pub fn record(kind: &str, network: &str, cid: &str, ifname: &str, items: &[String]) -> Result<()> {
    record_in(&base(), kind, network, cid, ifname, items)
}

fn record_in(
    base: &Path,
    kind: &str,
    network: &str,
    cid: &str,
    ifname: &str,
    items: &[String],
) -> Result<()> {
    let d = dir(base, kind, network);
    std::fs::create_dir_all(&d).ctx(format_args!("create {}", d.display()))?;
    let name = key(cid, ifname);
    let tmp = d.join(format!(".{name}.{}", std::process::id()));
    let mut body = String::new();
    if name.starts_with('~') {
        body = format!("{OWNER_LINE}{cid}:{ifname}\n");
    }
    body.push_str(&items.join("\n"));
    body.push('\n');
    // A concurrent `forget` of the network's last record may remove the (then empty) directory
    // between our create_dir_all and the write: recreate it and try again.
    let mut tries = 0;
    loop {
        let done = std::fs::write(&tmp, &body).and_then(|()| std::fs::rename(&tmp, d.join(&name)));
        match done {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => {
                tries += 1;
                std::fs::create_dir_all(&d).ctx(format_args!("create {}", d.display()))?;
            }
            r => return r.ctx(format_args!("write {}", d.join(&name).display())),
        }
    }
}

/// The owner line (if any) and the items of a record.
fn read(path: &std::path::Path) -> (Option<String>, Vec<String>) {
    let Ok(s) = std::fs::read_to_string(path) else {
        return (None, Vec::new());
    };
    let mut owner = None;
    let mut items = Vec::new();
    for (i, l) in s.lines().enumerate() {
        if i == 0
            && let Some(o) = l.strip_prefix(OWNER_LINE)
        {
            owner = Some(o.to_string());
        } else if !l.is_empty() {
            items.push(l.to_string());
        }
    }
    (owner, items)
}

/// The items recorded for one attachment (empty if none).
pub fn get(kind: &str, network: &str, cid: &str, ifname: &str) -> Vec<String> {
    get_in(&base(), kind, network, cid, ifname)
}

fn get_in(base: &Path, kind: &str, network: &str, cid: &str, ifname: &str) -> Vec<String> {
    read(&dir(base, kind, network).join(key(cid, ifname))).1
}

/// Remove one attachment's record (a missing record is fine), and the network's directory
/// once it is empty, so records of networks that come and go do not pile up.
pub fn forget(kind: &str, network: &str, cid: &str, ifname: &str) {
    forget_in(&base(), kind, network, cid, ifname)
}

fn forget_in(base: &Path, kind: &str, network: &str, cid: &str, ifname: &str) {
    let d = dir(base, kind, network);
    let _ = std::fs::remove_file(d.join(key(cid, ifname)));
    let _ = std::fs::remove_dir(&d);
}

/// Every recorded attachment of a network: `(cid, ifname, items)`.
pub fn list(kind: &str, network: &str) -> Vec<(String, String, Vec<String>)> {
    list_in(&base(), kind, network)
}

fn list_in(base: &Path, kind: &str, network: &str) -> Vec<(String, String, Vec<String>)> {
    let d = dir(base, kind, network);
    let Ok(rd) = std::fs::read_dir(&d) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .filter_map(|n| {
            let (owner, items) = read(&d.join(&n));
            let owner = if n.starts_with('~') { owner? } else { n };
            let (cid, ifname) = owner.split_once(':')?;
            Some((cid.to_string(), ifname.to_string(), items))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state dir of the test's own, passed to the `_in` functions: setting CNIBOX_STATE_DIR
    /// would race with every concurrent getenv in the test process. Removed on drop.
    struct StateDir(PathBuf);

    impl StateDir {
        fn new(test: &str) -> StateDir {
            let d =
                std::env::temp_dir().join(format!("cnibox-owners-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            StateDir(d)
        }
    }

    impl Drop for StateDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn forgetting_the_last_record_removes_the_network_dir() {
        let sd = StateDir::new("forget");
        let b = sd.0.as_path();
        let net_dir = dir(b, "kind-t", "net-t");
        record_in(b, "kind-t", "net-t", "c1", "eth0", &["10.0.0.1".into()]).unwrap();
        record_in(b, "kind-t", "net-t", "c2", "eth0", &[]).unwrap();
        assert!(net_dir.starts_with(b), "{}", net_dir.display());
        forget_in(b, "kind-t", "net-t", "c1", "eth0");
        assert!(net_dir.is_dir(), "removed while a record remains");
        forget_in(b, "kind-t", "net-t", "c2", "eth0");
        assert!(!net_dir.exists(), "empty network dir left behind");
        record_in(b, "kind-t", "net-t", "c3", "eth0", &[]).unwrap();
        assert_eq!(list_in(b, "kind-t", "net-t").len(), 1);
        forget_in(b, "kind-t", "net-t", "c3", "eth0");
    }

    #[test]
    fn long_owners_get_hashed_names() {
        let sd = StateDir::new("long");
        let b = sd.0.as_path();
        let long = "c".repeat(300);
        let items = vec!["10.0.0.5".to_string()];
        record_in(b, "k", "net", &long, "eth0", &items).unwrap();
        record_in(b, "k", "net", "short", "eth1", &items).unwrap();
        let net = "n".repeat(300);
        record_in(b, "k", &net, &long, "eth0", &items).unwrap();
        // On disk: the short owner by name, the long ones hashed (file names stay short).
        let mut names: Vec<String> = std::fs::read_dir(dir(b, "k", "net"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], "short:eth1");
        assert!(
            names[1].starts_with('~') && names[1].len() == 33,
            "{names:?}"
        );
        assert_eq!(
            list_in(b, "k", &net),
            vec![(long.clone(), "eth0".to_string(), items.clone())]
        );
        assert_eq!(get_in(b, "k", "net", &long, "eth0"), items);
        let mut all = list_in(b, "k", "net");
        all.sort();
        assert_eq!(
            all,
            vec![
                (long.clone(), "eth0".to_string(), items.clone()),
                ("short".to_string(), "eth1".to_string(), items.clone()),
            ]
        );
        forget_in(b, "k", "net", &long, "eth0");
        assert!(get_in(b, "k", "net", &long, "eth0").is_empty());
        forget_in(b, "k", "net", "short", "eth1");
        forget_in(b, "k", &net, &long, "eth0");
        assert!(!b.join("k").join("net").exists());
        assert_eq!(std::fs::read_dir(b.join("k")).unwrap().count(), 0);
    }
}
