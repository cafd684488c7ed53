//! What the node holds for each network configuration: the attachments libcni's cache records
//! (`runtime::cache`), host-local's reservations in each host-local `dataDir`, and the ipMasq
//! and portmap rules of the iptables nat table (comments `name: "<net>" id: "<cid>"`, as the
//! Go plugins and cnibox write them); and which of them are orphans, with why.

use crate::cni::gojson;
use crate::runtime::cache::{self, Rt};
use crate::runtime::load::{self, NetList};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Is an attachment's namespace still there?
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Netns {
    Live,
    Gone,
    /// The record names none (libcni before 1.3): assumed live.
    Unrecorded,
}

pub(crate) struct Attachment {
    pub(crate) network: String,
    pub(crate) rt: Rt,
    pub(crate) netns: Netns,
    pub(crate) addresses: Vec<String>,
    pub(crate) host_ifaces: Vec<String>,
    pub(crate) reservations: Vec<String>,
    pub(crate) rules: usize,
    pub(crate) cache_file: PathBuf,
}

impl Attachment {
    pub(crate) fn live(&self) -> bool {
        self.netns != Netns::Gone
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Cache,
    Reservation,
    Rule,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Cache => "cache",
            Kind::Reservation => "reservation",
            Kind::Rule => "rule",
        }
    }
}

/// One orphan: what it is, whose, and why it is judged one.
pub(crate) struct Orphan {
    pub(crate) kind: Kind,
    pub(crate) network: String,
    pub(crate) object: String,
    pub(crate) container_id: String,
    pub(crate) ifname: String,
    pub(crate) why: String,
}

pub(crate) struct Network {
    pub(crate) name: String,
    pub(crate) list: Option<NetList>,
    pub(crate) error: Option<String>,
    pub(crate) stores: Vec<PathBuf>,
}

pub(crate) struct Survey {
    pub(crate) networks: Vec<Network>,
    pub(crate) attachments: Vec<Attachment>,
    pub(crate) orphans: Vec<Orphan>,
    /// Owners (network, container ID, ifname) whose ADD may be in flight: left alone.
    pub(crate) in_flight: Vec<(String, String, String)>,
    pub(crate) notes: Vec<String>,
}

fn netns_state(path: &str) -> Netns {
    if path.is_empty() {
        return Netns::Unrecorded;
    }
    match nix::sys::statfs::statfs(path) {
        Ok(fs)
            if fs.filesystem_type() == nix::sys::statfs::NSFS_MAGIC
                || fs.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC =>
        {
            Netns::Live
        }
        _ => Netns::Gone,
    }
}

/// The `dataDir/<network>` of every host-local IPAM in the list.
fn stores(list: &NetList) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in &list.plugins {
        let ipam = p.conf.get("ipam");
        let kind = ipam
            .and_then(|i| gojson::member(i, "type"))
            .and_then(Value::as_str);
        if kind != Some("host-local") {
            continue;
        }
        let dir = ipam
            .and_then(|i| gojson::member(i, "dataDir"))
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .unwrap_or(crate::ipam::store::DEFAULT_DATA_DIR);
        let d = Path::new(dir).join(&list.name);
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

pub(crate) fn result_addresses(r: Option<&Value>) -> (Vec<String>, Vec<String>) {
    let Some(r) = r else {
        return (Vec::new(), Vec::new());
    };
    let ips = r.get("ips").and_then(Value::as_array).into_iter().flatten();
    let addrs = ips
        .filter_map(|i| i.get("address").and_then(Value::as_str))
        .map(String::from)
        .collect();
    let ifaces = r
        .get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    let host = ifaces
        .filter(|i| {
            i.get("sandbox")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
        })
        .filter_map(|i| i.get("name").and_then(Value::as_str))
        // A bridge is shared, not the attachment's.
        .filter(|n| !Path::new("/sys/class/net").join(n).join("bridge").exists())
        .map(String::from)
        .collect();
    (addrs, host)
}

/// A reservation file: `(address, path, owner (cid, ifname or ""), age, symlink)`.
struct Reservation {
    path: PathBuf,
    owner: Option<(String, String)>,
    age: Duration,
    symlink: bool,
}

/// The reservations of one store, read under a shared hold of host-local's lock (so no
/// operation is half done); no lock file: nothing was ever reserved there.
fn reservations(dir: &Path) -> std::io::Result<Vec<Reservation>> {
    let lock = match std::fs::File::open(dir.join("lock")) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Some(l) = &lock {
        l.lock_shared()?;
    }
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.parse::<std::net::IpAddr>().is_err() {
            continue;
        }
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let age = meta
            .modified()
            .ok()
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        // Read as host-local reads it (following a link); nothing here deletes through it.
        let owner = std::fs::read_to_string(&path).ok().and_then(|d| {
            let d = d.trim().to_string();
            match d.split_once("\r\n") {
                Some((c, i)) => Some((c.trim().to_string(), i.trim().to_string())),
                None if !d.is_empty() => Some((d, String::new())),
                None => None,
            }
        });
        out.push(Reservation {
            path,
            owner,
            age,
            symlink: meta.file_type().is_symlink(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// `(network, cid)` of a rule commented `name: \"N\" id: \"C\"` (iptables-save's quoting).
fn rule_owner(rule: &str) -> Option<(String, String)> {
    let start = rule.find("name: \\\"")? + 8;
    let rest = &rule[start..];
    let end = rest.find("\\\"")?;
    let net = &rest[..end];
    let rest = &rest[end..];
    let id = rest.find("id: \\\"")? + 6;
    let rest = &rest[id..];
    let end = rest.find("\\\"")?;
    Some((net.to_string(), rest[..end].to_string()))
}

/// The commented ipMasq and portmap rules of the nat table, both families: `(rule, network,
/// cid)`. No iptables tools: none.
fn nat_rules(notes: &mut Vec<String>) -> Vec<(String, String, String)> {
    use crate::netfilter::iptables::{Iptables, Proto};
    let mut out = Vec::new();
    for proto in [Proto::V4, Proto::V6] {
        let Ok(ipt) = Iptables::new(proto) else {
            continue;
        };
        match ipt.save("nat") {
            Ok(saved) => {
                for (chain, spec) in saved.rules() {
                    if let Some((net, cid)) = rule_owner(spec) {
                        out.push((format!("{proto:?} nat -A {chain} {spec}"), net, cid));
                    }
                }
            }
            Err(e) => notes.push(format!("iptables: {}", e.msg)),
        }
    }
    out
}

/// Survey the node. `grace`: a reservation younger than this with no cache entry may be an
/// ADD in flight.
pub(crate) fn survey(conf_dir: &Path, grace: Duration) -> crate::cni::error::Result<Survey> {
    let mut s = Survey {
        networks: Vec::new(),
        attachments: Vec::new(),
        orphans: Vec::new(),
        in_flight: Vec::new(),
        notes: Vec::new(),
    };
    for name in load::names(conf_dir)? {
        let (list, error) = match load::load(conf_dir, &name) {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e.msg)),
        };
        let stores = list.as_ref().map(stores).unwrap_or_default();
        s.networks.push(Network {
            name,
            list,
            error,
            stores,
        });
    }
    let configured: HashSet<String> = s.networks.iter().map(|n| n.name.clone()).collect();
    for rec in cache::records() {
        let Some(rt) = rec.rt else {
            s.notes.push(format!(
                "{}: {} (left alone)",
                rec.file.display(),
                rec.error.unwrap_or_default()
            ));
            continue;
        };
        if !configured.contains(&rec.network) {
            s.notes.push(format!(
                "{}: network {:?} is not configured (left alone)",
                rec.file.display(),
                rec.network
            ));
            continue;
        }
        let (addresses, host_ifaces) = result_addresses(rec.result.as_ref());
        let netns = netns_state(&rt.netns);
        if netns == Netns::Gone {
            s.orphans.push(Orphan {
                kind: Kind::Cache,
                network: rec.network.clone(),
                object: rec.file.display().to_string(),
                container_id: rt.container_id.clone(),
                ifname: rt.ifname.clone(),
                why: format!("its netns {} is gone", rt.netns),
            });
        }
        s.attachments.push(Attachment {
            network: rec.network,
            rt,
            netns,
            addresses,
            host_ifaces,
            reservations: Vec::new(),
            rules: 0,
            cache_file: rec.file,
        });
    }
    for n in &s.networks {
        for dir in &n.stores {
            let found = match reservations(dir) {
                Ok(r) => r,
                Err(e) => {
                    s.notes.push(format!("{}: {e}", dir.display()));
                    continue;
                }
            };
            for r in found {
                let object = r.path.display().to_string();
                let link = if r.symlink {
                    " (a symlink: only the link would go)"
                } else {
                    ""
                };
                let Some((cid, ifname)) = r.owner else {
                    s.orphans.push(Orphan {
                        kind: Kind::Reservation,
                        network: n.name.clone(),
                        object,
                        container_id: String::new(),
                        ifname: String::new(),
                        why: format!("names no owner{link}"),
                    });
                    continue;
                };
                let owner = s.attachments.iter_mut().find(|a| {
                    a.network == n.name
                        && a.rt.container_id == cid
                        && (ifname.is_empty() || a.rt.ifname == ifname)
                });
                let why = match owner {
                    Some(a) if a.live() => {
                        a.reservations.push(object);
                        continue;
                    }
                    Some(a) => format!("its attachment's netns {} is gone", a.rt.netns),
                    None if r.age < grace => {
                        s.notes.push(format!(
                            "{object}: no cache entry yet, {} s old: an ADD may be in flight \
                             (left alone)",
                            r.age.as_secs()
                        ));
                        s.in_flight.push((n.name.clone(), cid, ifname));
                        continue;
                    }
                    None => "no cached attachment".to_string(),
                };
                s.orphans.push(Orphan {
                    kind: Kind::Reservation,
                    network: n.name.clone(),
                    object,
                    container_id: cid,
                    ifname,
                    why: format!("{why}{link}"),
                });
            }
        }
    }
    for (rule, net, cid) in nat_rules(&mut s.notes) {
        if !configured.contains(&net) {
            continue;
        }
        let mut of = s
            .attachments
            .iter_mut()
            .filter(|a| a.network == net && a.rt.container_id == cid)
            .peekable();
        let why = if of.peek().is_none() {
            if s.in_flight.iter().any(|(n, c, _)| *n == net && *c == cid) {
                continue;
            }
            "no cached attachment".to_string()
        } else {
            let mut live = false;
            let mut gone = String::new();
            for a in of {
                if a.live() {
                    a.rules += 1;
                    live = true;
                } else {
                    gone.clone_from(&a.rt.netns);
                }
            }
            if live {
                continue;
            }
            format!("its attachment's netns {gone} is gone")
        };
        s.orphans.push(Orphan {
            kind: Kind::Rule,
            network: net,
            object: rule,
            container_id: cid,
            ifname: String::new(),
            why,
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    #[test]
    fn rule_owners_are_read_from_iptables_save_comments() {
        let r = r#"-s 10.1.0.2/32 -m comment --comment "name: \"net1\" id: \"abc\"" -j CNI-x"#;
        assert_eq!(super::rule_owner(r), Some(("net1".into(), "abc".into())));
        let r = r#"-p tcp -m comment --comment "dnat name: \"n\" id: \"c\"" -j CNI-DN-1"#;
        assert_eq!(super::rule_owner(r), Some(("n".into(), "c".into())));
        assert_eq!(super::rule_owner("-j MASQUERADE"), None);
    }
}
