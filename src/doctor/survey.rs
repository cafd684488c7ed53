//! What the node holds for each network configuration: the attachments libcni's cache records
//! (`runtime::cache`), host-local's reservations in each host-local `dataDir`, the rules of
//! ipMasq, portmap and firewall in iptables and nftables (`rules.rs`), and the host-side
//! interfaces of attachments; and which of them are orphans, with why.

use super::rules::{self, Found, Owner};
use crate::cni::gojson;
use crate::ipam::lease_record;
use crate::runtime::cache::{self, Rt};
use crate::runtime::load::{self, NetList};
use ipnet::IpNet;
use serde_json::Value;
use std::collections::HashSet;
use std::net::IpAddr;
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
    /// The dhcp daemon's lease records of the attachment.
    pub(crate) leases: Vec<String>,
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
    Interface,
    Lease,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Cache => "cache",
            Kind::Reservation => "reservation",
            Kind::Rule => "rule",
            Kind::Interface => "interface",
            Kind::Lease => "lease",
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
    /// The addresses of reservations whose owner is live or may be in flight.
    held: Vec<IpAddr>,
    /// Every reservation's address and the container ID it names.
    reserved: Vec<(IpAddr, String)>,
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

/// The subnets of every host-local range of the list (`ranges` and the older `subnet`).
fn subnets(list: &NetList) -> Vec<IpNet> {
    let mut out = Vec::new();
    let ipams = list.plugins.iter().filter_map(|p| p.conf.get("ipam"));
    for ipam in ipams {
        let ranges = gojson::member(ipam, "ranges").and_then(Value::as_array);
        let sets = ranges.into_iter().flatten().filter_map(Value::as_array);
        let mut found: Vec<&Value> = sets.flatten().collect();
        found.push(ipam);
        for r in found {
            let subnet = gojson::member(r, "subnet").and_then(Value::as_str);
            if let Some(net) = subnet.and_then(|s| s.parse::<IpNet>().ok()) {
                out.push(net);
            }
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
    ip: IpAddr,
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
        let Ok(ip) = name.parse::<IpAddr>() else {
            continue;
        };
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
            ip,
            path,
            owner,
            age,
            symlink: meta.file_type().is_symlink(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Count a rule to its live attachment, or make it an orphan with why. A rule is judged when
/// it names a configured network, an attachment in the cache, or (firewall's, which name only
/// an address) an address in a configured network's ranges; a rule of an ADD that may be in
/// flight is left alone.
fn judge_rule(
    s: &mut Survey,
    configured: &HashSet<String>,
    nets: &[(String, Vec<IpNet>)],
    f: Found,
) {
    let owns = |a: &Attachment| match &f.owner {
        Owner::Address(ip) => a
            .addresses
            .iter()
            .any(|x| x.parse::<IpNet>().is_ok_and(|n| n.addr() == *ip)),
        o => o.is(&a.network, &a.rt.ifname, &a.rt.container_id),
    };
    let in_flight = match &f.owner {
        Owner::Address(ip) => s.held.contains(ip),
        o => s.in_flight.iter().any(|(n, c, i)| o.is(n, i, c)),
    };
    if in_flight {
        return;
    }
    let mut live = false;
    let mut gone: Option<(String, String, String, String)> = None;
    for a in s.attachments.iter_mut().filter(|a| owns(a)) {
        if a.live() {
            a.rules += 1;
            live = true;
        } else {
            let rt = &a.rt;
            gone = Some((
                a.network.clone(),
                rt.container_id.clone(),
                rt.ifname.clone(),
                rt.netns.clone(),
            ));
        }
    }
    if live {
        return;
    }
    let (network, container_id, ifname, why) = match gone {
        Some((net, cid, ifname, netns)) => (
            net,
            cid,
            ifname,
            format!("its attachment's netns {netns} is gone"),
        ),
        None => {
            let network = match &f.owner {
                Owner::Address(ip) => nets
                    .iter()
                    .find(|(_, subnets)| subnets.iter().any(|n| n.contains(ip)))
                    .map(|(n, _)| n.clone()),
                Owner::Container(_) => Some(String::new()),
                o => o
                    .network()
                    .filter(|n| configured.contains(*n))
                    .map(String::from),
            };
            let Some(network) = network else {
                return; // Not a network of this node's configuration: not ours to judge.
            };
            let cid = match &f.owner {
                // The reservation of the address, when there is one, names its owner.
                Owner::Address(ip) => s
                    .reserved
                    .iter()
                    .find(|(r, _)| r == ip)
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default(),
                o => o.container_id().unwrap_or_default().to_string(),
            };
            let why = match &f.owner {
                Owner::Address(ip) => format!("no live attachment has address {ip}"),
                _ => "no cached attachment".to_string(),
            };
            (network, cid, String::new(), why)
        }
    };
    s.orphans.push(Orphan {
        kind: Kind::Rule,
        network,
        object: f.object,
        container_id,
        ifname,
        why,
    });
}

/// The host-side interfaces of attachments whose netns is gone that are still there: the
/// kernel deletes a veth with its namespace, so something still holds that namespace.
fn interfaces(s: &mut Survey) {
    for a in s.attachments.iter().filter(|a| !a.live()) {
        for i in &a.host_ifaces {
            if Path::new("/sys/class/net").join(i).exists() {
                s.orphans.push(Orphan {
                    kind: Kind::Interface,
                    network: a.network.clone(),
                    object: i.clone(),
                    container_id: a.rt.container_id.clone(),
                    ifname: a.rt.ifname.clone(),
                    why: format!(
                        "its attachment's netns {} is gone (something still holds the \
                         namespace)",
                        a.rt.netns
                    ),
                });
            }
        }
    }
}

/// The lease-record directories (`<daemonSocketPath>.leases`) of the list's dhcp IPAMs.
fn lease_dirs(list: &NetList) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for ipam in list.plugins.iter().filter_map(|p| p.conf.get("ipam")) {
        let kind = gojson::member(ipam, "type").and_then(Value::as_str);
        if kind != Some("dhcp") {
            continue;
        }
        let socket = gojson::member(ipam, "daemonSocketPath")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or("/run/cni/dhcp.sock");
        let d = PathBuf::from(format!("{socket}.leases"));
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// One lease record of cnibox's dhcp daemon (`ipam::lease_record::peek`: named by 32 hex
/// digits, a regular file of at most 4 MiB, no symlink followed): (network, container ID,
/// ifname, leased address, age).
fn lease_record(path: &Path) -> Option<(String, String, String, String, Duration)> {
    let r = lease_record::peek(path)?;
    let ip = r.yiaddr().map(|a| a.to_string()).unwrap_or_default();
    Some((
        r.call_field("network"),
        r.call_field("containerID"),
        r.call_field("ifName"),
        ip,
        lease_record::age(r.at.unwrap_or(0)),
    ))
}

/// What an owner's record (a reservation, a lease) is, once looked up among the attachments.
enum Verdict {
    /// Its attachment is live: counted to it.
    Live,
    /// Younger than the grace period with no cache entry: an ADD may be in flight (a note).
    InFlight,
    /// An orphan, with why.
    Orphan(String),
}

/// The verdict on `object` (an owner's record `age` old) given the attachment that `owns` it:
/// counted with `count` to a live one; left alone, noted and its owner `(network, cid, ifname)`
/// marked in flight, while younger than `grace` with none; else an orphan.
fn verdict(
    s: &mut Survey,
    owns: impl Fn(&Attachment) -> bool,
    count: impl FnOnce(&mut Attachment),
    (object, age, grace): (&str, Duration, Duration),
    owner: (String, String, String),
) -> Verdict {
    match s.attachments.iter_mut().find(|a| owns(a)) {
        Some(a) if a.live() => {
            count(a);
            Verdict::Live
        }
        Some(a) => Verdict::Orphan(format!("its attachment's netns {} is gone", a.rt.netns)),
        None if age < grace => {
            s.notes.push(format!(
                "{object}: no cache entry yet, {} s old: an ADD may be in flight (left alone)",
                age.as_secs()
            ));
            s.in_flight.push(owner);
            Verdict::InFlight
        }
        None => Verdict::Orphan("no cached attachment".to_string()),
    }
}

/// The dhcp daemon's lease records of each configured network: counted to their live
/// attachment, left alone while younger than `grace` with no cache entry (an ADD in flight),
/// else orphans.
fn leases(s: &mut Survey, grace: Duration) {
    let dirs: Vec<(String, PathBuf)> = s
        .networks
        .iter()
        .flat_map(|n| {
            let dirs = n.list.as_ref().map(lease_dirs).unwrap_or_default();
            dirs.into_iter().map(|d| (n.name.clone(), d))
        })
        .collect();
    for (network, dir) in dirs {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let path = e.path();
            let Some((net, cid, ifname, ip, age)) = lease_record(&path) else {
                continue;
            };
            if net != network {
                continue;
            }
            let object = format!("{} ({ip})", path.display());
            let owns = |a: &Attachment| {
                a.network == net && a.rt.container_id == cid && a.rt.ifname == ifname
            };
            let owner = (net.clone(), cid.clone(), ifname.clone());
            let count = |a: &mut Attachment| a.leases.push(object.clone());
            let Verdict::Orphan(why) = verdict(s, owns, count, (&object, age, grace), owner) else {
                continue;
            };
            s.orphans.push(Orphan {
                kind: Kind::Lease,
                network: net,
                object,
                container_id: cid,
                ifname,
                why,
            });
        }
    }
}

/// Survey the node. `grace`: a reservation younger than this with no cache entry may be an
/// ADD in flight.
pub(crate) fn survey(conf_dir: &Path, grace: Duration) -> crate::cni::error::Result<Survey> {
    let mut s = Survey {
        networks: networks(conf_dir)?,
        attachments: Vec::new(),
        orphans: Vec::new(),
        in_flight: Vec::new(),
        held: Vec::new(),
        reserved: Vec::new(),
        notes: Vec::new(),
    };
    let configured: HashSet<String> = s.networks.iter().map(|n| n.name.clone()).collect();
    cached_attachments(&mut s, &configured);
    let stores: Vec<(String, PathBuf)> = s
        .networks
        .iter()
        .flat_map(|n| n.stores.iter().map(|d| (n.name.clone(), d.clone())))
        .collect();
    for (network, dir) in stores {
        match reservations(&dir) {
            Ok(found) => {
                for r in found {
                    judge_reservation(&mut s, &network, r, grace);
                }
            }
            Err(e) => s.notes.push(format!("{}: {e}", dir.display())),
        }
    }
    node_rules(&mut s, &configured);
    interfaces(&mut s);
    leases(&mut s, grace);
    Ok(s)
}

/// Every network configuration of `conf_dir`, loaded (or why not), with its host-local stores.
fn networks(conf_dir: &Path) -> crate::cni::error::Result<Vec<Network>> {
    let mut out = Vec::new();
    for name in load::names(conf_dir)? {
        let (list, error) = match load::load(conf_dir, &name) {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e.msg)),
        };
        let stores = list.as_ref().map(stores).unwrap_or_default();
        out.push(Network {
            name,
            list,
            error,
            stores,
        });
    }
    Ok(out)
}

/// The attachments libcni's cache records for the configured networks; an entry whose netns is
/// gone is an orphan. A record that is not one, or of a network not configured, is a note.
fn cached_attachments(s: &mut Survey, configured: &HashSet<String>) {
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
            leases: Vec::new(),
            rules: 0,
            cache_file: rec.file,
        });
    }
}

/// One host-local reservation of `network`: counted to its live attachment, left alone while
/// younger than `grace` with no cache entry (an ADD in flight), else an orphan with why.
fn judge_reservation(s: &mut Survey, network: &str, r: Reservation, grace: Duration) {
    let object = r.path.display().to_string();
    let link = if r.symlink {
        " (a symlink: only the link would go)"
    } else {
        ""
    };
    let Some((cid, ifname)) = r.owner else {
        s.reserved.push((r.ip, String::new()));
        s.orphans.push(Orphan {
            kind: Kind::Reservation,
            network: network.to_string(),
            object,
            container_id: String::new(),
            ifname: String::new(),
            why: format!("names no owner{link}"),
        });
        return;
    };
    s.reserved.push((r.ip, cid.clone()));
    let owns = |a: &Attachment| {
        a.network == network
            && a.rt.container_id == cid
            && (ifname.is_empty() || a.rt.ifname == ifname)
    };
    let count = |a: &mut Attachment| a.reservations.push(object.clone());
    let owner = (network.to_string(), cid.clone(), ifname.clone());
    let why = match verdict(s, owns, count, (&object, r.age, grace), owner) {
        Verdict::Live | Verdict::InFlight => {
            s.held.push(r.ip);
            return;
        }
        Verdict::Orphan(why) => why,
    };
    s.orphans.push(Orphan {
        kind: Kind::Reservation,
        network: network.to_string(),
        object,
        container_id: cid,
        ifname,
        why: format!("{why}{link}"),
    });
}

/// The node's rules of ipMasq, portmap and firewall (`rules.rs`), each judged.
fn node_rules(s: &mut Survey, configured: &HashSet<String>) {
    let mut found = rules::iptables(&mut s.notes);
    found.extend(rules::nftables(&mut s.notes));
    let nets: Vec<(String, Vec<IpNet>)> = s
        .networks
        .iter()
        .map(|n| {
            (
                n.name.clone(),
                n.list.as_ref().map(subnets).unwrap_or_default(),
            )
        })
        .collect();
    for f in found {
        judge_rule(s, configured, &nets, f);
    }
}
