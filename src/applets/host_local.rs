//! host-local IPAM: hands out addresses from range sets and records them on disk.
//!
//! Mirrors upstream `plugins/ipam/host-local` (keys, defaults, validation messages, allocation
//! order, on-disk format; see ipam/store.rs). Beyond upstream: ADD and DEL are O(1) in the
//! number of reservations, GC releases reservations of attachments the runtime no longer lists,
//! STATUS fails with code 50 when a range set is full, and a network name that would escape
//! dataDir is refused.

use crate::cni::env::validate_network_name;
use crate::cni::gojson;
use crate::cni::result::{CniResult, Dns, IpConfig, Route};
use crate::cni::{Applet, CodeContext, Context, Error, Request, Result, Version, error::code};
use crate::ipam::store::{DEFAULT_DATA_DIR, Owner, Store, parse_last};
use crate::ipam::{RangeConf, RangeSet, canonical};
use crate::undo::{ErrorList, Undo};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::net::IpAddr;
use std::path::PathBuf;

pub static APPLET: Applet = Applet {
    name: "host-local",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct IpamConf {
    #[serde(default)]
    ranges: Vec<Vec<RangeConf>>,
    #[serde(default)]
    routes: Option<Vec<Route>>,
    #[serde(default)]
    data_dir: String,
    #[serde(default)]
    resolv_conf: String,
}

#[derive(Deserialize)]
struct NetConf {
    #[serde(default)]
    ipam: Option<IpamConf>,
}

/// The single range written directly in `ipam` (`subnet`, `rangeStart`, …), decoded on its own
/// rather than flattened into [`IpamConf`]: serde's flatten would bypass Go's key matching.
#[derive(Deserialize)]
struct LegacyRange {
    #[serde(default)]
    ipam: Option<RangeConf>,
}

/// The validated configuration of one request.
struct Config {
    sets: Vec<RangeSet>,
    requested: Vec<IpAddr>,
    routes: Vec<Route>,
    data_dir: PathBuf,
    resolv_conf: String,
    network: String,
}

/// `"10.0.0.5"` or `"10.0.0.5/24"` (the prefix is ignored), as upstream's `ip.IP`.
fn parse_requested(v: &str) -> Result<IpAddr> {
    let addr = v.split_once('/').map_or(v, |(a, _)| a);
    addr.parse()
        .map(canonical)
        .map_err(|_| Error::config(format!("cannot understand ip: {v:?}")))
}

fn requested_list(v: Option<&Value>, what: &str) -> Result<Vec<IpAddr>> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let list = v
        .as_array()
        .ok_or_else(|| Error::decode(format!("{what}: expected a list of IPs")))?;
    list.iter()
        .map(|s| {
            s.as_str()
                .ok_or_else(|| Error::decode(format!("{what}: expected a string")))
                .and_then(parse_requested)
        })
        .collect()
}

fn load(req: &Request) -> Result<Config> {
    let n: NetConf = req.decode()?;
    let legacy = req.decode::<LegacyRange>()?.ipam.unwrap_or_default();
    let ipam = n
        .ipam
        .ok_or_else(|| Error::config("IPAM config missing 'ipam' key"))?;
    // Requested addresses: CNI_ARGS IP (unless args.cni.ips is given), args.cni.ips, runtimeConfig.ips.
    // CONVENTIONS.md: when `args.cni.ips` is given, CNI_ARGS `IP` is ignored (upstream uses
    // both). It is still parsed, so a malformed one is reported either way.
    let mut requested = Vec::new();
    let from_args = requested_list(req.args_cni("ips"), "args.cni.ips")?;
    if let Some(ip) = req.env.cni_args(&["IP"])?.get("IP") {
        let ip = parse_requested(ip)?;
        if from_args.is_empty() {
            requested.push(ip);
        }
    }
    requested.extend(from_args);
    requested.extend(requested_list(
        req.runtime_config("ips"),
        "runtimeConfig.ips",
    )?);

    let mut confs: Vec<Vec<RangeConf>> = Vec::new();
    if let Some(v) = req.runtime_config("ipRanges") {
        confs = gojson::from_value::<Vec<Vec<RangeConf>>>(v)
            .ctx_code(code::DECODE_FAILURE, "runtimeConfig.ipRanges")?;
    }
    if legacy.subnet.is_some() {
        confs.push(vec![legacy]);
    }
    confs.extend(ipam.ranges);
    if confs.is_empty() {
        return Err(Error::config("no IP ranges specified"));
    }
    let sets = confs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            RangeSet::from_conf(c)
                .map_err(|e| Error::config(format!("invalid range set {i}: {}", e.msg)))
        })
        .collect::<Result<Vec<_>>>()?;
    let v4 = sets.iter().filter(|s| s.is_ipv4()).count();
    if req.version.is_legacy() && (v4 > 1 || sets.len() - v4 > 1) {
        return Err(Error::config(format!(
            "CNI version {} does not support more than 1 address per family",
            req.conf.cni_version
        )));
    }
    for (i, a) in sets.iter().enumerate() {
        if let Some(j) = sets[i + 1..].iter().position(|b| a.overlaps(b)) {
            return Err(Error::config(format!(
                "range set {i} overlaps with {}",
                i + 1 + j
            )));
        }
    }
    validate_network_name(&req.conf.name)?;
    // Beyond upstream: a relative dataDir would land wherever the runtime happens to run, and
    // control characters have no place in a path.
    if !ipam.data_dir.is_empty()
        && (!ipam.data_dir.starts_with('/') || ipam.data_dir.chars().any(char::is_control))
    {
        return Err(Error::config(format!(
            "ipam.dataDir {:?} must be an absolute path without control characters",
            ipam.data_dir
        )));
    }
    let data_dir = if ipam.data_dir.is_empty() {
        DEFAULT_DATA_DIR.into()
    } else {
        ipam.data_dir.into()
    };
    Ok(Config {
        sets,
        requested,
        routes: ipam.routes.unwrap_or_default(),
        data_dir,
        resolv_conf: ipam.resolv_conf,
        network: req.conf.name.clone(),
    })
}

fn add(req: &Request) -> Result<CniResult> {
    let cfg = load(req)?;
    let mut result = CniResult {
        routes: cfg.routes.clone(),
        ..Default::default()
    };
    if !cfg.resolv_conf.is_empty() {
        result.dns = parse_resolv_conf(&cfg.resolv_conf)?;
    }
    // Which range set takes which requested address is known before anything is reserved: a
    // requested address no set can take fails the ADD before the store is touched (upstream
    // finds it after allocating the others, and `last_reserved_ip` stays moved).
    let wants = assign_requested(&cfg.sets, &cfg.requested)?;
    let store = open_store(&cfg, true)?.ok_or_else(|| {
        Error::internal(format!(
            "host-local store {} for network {:?} vanished while opening it",
            cfg.data_dir.display(),
            cfg.network
        ))
    })?;
    let owner = Owner::new(&req.env.container_id, &req.env.ifname);
    // The undo steps share the store with the allocation below: a RefCell lends it to each.
    let store = std::cell::RefCell::new(store);
    let mut undo = Undo::new("host-local");
    let r = (|| -> Result<()> {
        // What the owner already holds, read once for every range set (a dual-stack ADD
        // verified it twice); each address reserved below joins it.
        let mut owned = if wants.iter().any(Option::is_none) {
            store.borrow().owned_by(&owner)?
        } else {
            Vec::new()
        };
        for (idx, (set, want)) in cfg.sets.iter().zip(wants).enumerate() {
            let last = store.borrow().last_reserved_raw(idx);
            let start = last.as_deref().and_then(parse_last);
            let ip = allocate(
                &mut store.borrow_mut(),
                set,
                idx,
                &owner,
                want,
                &owned,
                start,
            )
            .ctx(format_args!("failed to allocate for range {idx}"))?;
            owned.push(ip.address.addr());
            let (addr, owner, store) = (ip.address.addr(), &owner, &store);
            undo.push(format!("reservation of {addr}"), move || {
                let mut s = store.borrow_mut();
                s.release_ip(addr, owner)?;
                s.restore_last(idx, last.as_deref())
            });
            result.ips.push(ip);
        }
        Ok(())
    })();
    undo.finish(r)?;
    Ok(result)
}

/// The requested address each range set takes, as upstream assigns them: each set, in order,
/// the first requested address it contains. One left over is a config error (code 7).
fn assign_requested(sets: &[RangeSet], requested: &[IpAddr]) -> Result<Vec<Option<IpAddr>>> {
    let mut left = requested.to_vec();
    let wants = sets
        .iter()
        .map(|set| {
            left.iter()
                .position(|ip| set.contains(*ip))
                .map(|i| left.remove(i))
        })
        .collect();
    if !left.is_empty() {
        let list: Vec<String> = left.iter().map(IpAddr::to_string).collect();
        return Err(Error::config(format!(
            "failed to allocate all requested IPs: {} (in no range set)",
            list.join(" ")
        )));
    }
    Ok(wants)
}

/// The network's store; `dataDir` that is a file (or has one in its path) is a config error
/// (code 7 naming the key), any other failure to make or open it the host's (code 5).
fn open_store(cfg: &Config, create: bool) -> Result<Option<Store>> {
    Store::open(&cfg.data_dir, &cfg.network, create).map_err(|e| match e.errno {
        libc::ENOTDIR | libc::EEXIST => Error::config(format!(
            "ipam.dataDir {}: not a directory ({})",
            cfg.data_dir.display(),
            e.msg
        )),
        errno if errno != 0 && e.code == code::INTERNAL => Error {
            code: code::IO_FAILURE,
            ..e
        },
        _ => e,
    })
}

fn allocate(
    store: &mut Store,
    set: &RangeSet,
    idx: usize,
    owner: &Owner,
    want: Option<IpAddr>,
    owned: &[IpAddr],
    last: Option<IpAddr>,
) -> Result<IpConfig> {
    let found = if let Some(ip) = want {
        let range = set
            .range_for(ip)
            .ok_or_else(|| Error::config(format!("{ip} not in range set {set}")))?;
        if ip == range.gateway {
            return Err(Error::config(format!(
                "requested ip {ip} is subnet's gateway"
            )));
        }
        if !store.reserve(ip, owner, idx)? {
            return Err(Error::internal(format!(
                "requested IP address {ip} is not available in range set {set}"
            )));
        }
        ipnet::IpNet::new(ip, range.subnet.prefix_len())
            .ok()
            .map(|n| (n, range.gateway))
    } else {
        if let Some(ip) = owned.iter().copied().find(|ip| set.contains(*ip)) {
            return Err(Error::internal(format!(
                "{ip} has been allocated to {}, duplicate allocation is not allowed",
                owner.container_id
            )));
        }
        let mut found = None;
        for (net, gw) in set.candidates(last) {
            if store.reserve(net.addr(), owner, idx)? {
                found = Some((net, gw));
                break;
            }
        }
        found
    };
    let (address, gw) = found
        .ok_or_else(|| Error::internal(format!("no IP addresses available in range set: {set}")))?;
    Ok(IpConfig {
        version: None,
        interface: None,
        address,
        gateway: Some(gw),
    })
}

fn del(req: &Request) -> Result<()> {
    let cfg = load(req)?;
    if let Some(mut store) = open_store(&cfg, false)? {
        store.release(&req.env.container_id, &req.env.ifname)?;
    }
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let cfg = load(req)?;
    let owner = Owner::new(&req.env.container_id, &req.env.ifname);
    let found = match open_store(&cfg, false)? {
        None => false,
        Some(s) => {
            !s.owned_by(&owner)?.is_empty()
                || !s
                    .owned_by(&Owner {
                        ifname: None,
                        ..owner.clone()
                    })?
                    .is_empty()
        }
    };
    if !found {
        return Err(Error::internal(format!(
            "host-local: Failed to find address added by container {}",
            req.env.container_id
        )));
    }
    Ok(())
}

/// Releases every reservation whose owner is not a valid attachment. Legacy reservations (no
/// ifname) stay while any attachment of that container is valid.
fn gc(req: &Request) -> Result<()> {
    let cfg = load(req)?;
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let Some(mut store) = open_store(&cfg, false)? else {
        return Ok(());
    };
    let keep: HashSet<(&str, &str)> = valid
        .iter()
        .map(|a| (a.container_id.as_str(), a.ifname.as_str()))
        .collect();
    let keep_cid: HashSet<&str> = valid.iter().map(|a| a.container_id.as_str()).collect();
    let mut errors = ErrorList::new();
    for (owner, _) in store.owners()? {
        let valid = match &owner.ifname {
            Some(i) => keep.contains(&(owner.container_id.as_str(), i.as_str())),
            None => keep_cid.contains(owner.container_id.as_str()),
        };
        if !valid {
            errors.check(store.release_owner(&owner));
        }
    }
    store.remove_orphans()?;
    errors.into_result()?;
    store.mark_collected()
}

/// Code 50 when some range set has no free address left *and* the runtime has confirmed,
/// by a GC since the last reservation, that every reservation is still in use.
///
/// containerd 2.x asks STATUS every few seconds and a failure makes the node NotReady, which
/// evicts its pods; a range is most often full because of leaked reservations (a DEL that
/// never came), which GC is there to release. So a full range whose reservations no GC has
/// vouched for is reported on stderr but passes: the ADD that finds no address still fails
/// with its own error. Upstream's host-local passes STATUS whatever the ranges hold.
fn status(req: &Request) -> Result<()> {
    let cfg = load(req)?;
    let Some(store) = open_store(&cfg, false)? else {
        return Ok(());
    };
    let files = store.reservation_files()?;
    // Whether a GC confirmed every reservation: one look at each file's time, for all sets.
    let mut confirmed = None;
    for (i, set) in cfg.sets.iter().enumerate() {
        let used = files
            .iter()
            .filter(|(ip, _)| set.range_for(*ip).is_some_and(|r| r.gateway != *ip))
            .count();
        if (used as u128) < set.capacity() {
            continue;
        }
        let msg = format!("no IP addresses available in range set {i}: {set}");
        if *confirmed.get_or_insert_with(|| store.confirmed_by_gc(&files)) {
            return Err(Error::new(
                code::PLUGIN_NOT_AVAILABLE,
                format!("{msg} (every reservation confirmed in use by the last GC)"),
            ));
        }
        crate::warn!(
            "host-local STATUS: {msg}; passing: no GC has confirmed these reservations since the last ADD"
        );
    }
    Ok(())
}

/// resolv.conf → DNS, as upstream's parseResolvConf.
fn parse_resolv_conf(path: &str) -> Result<Dns> {
    let text = std::fs::read_to_string(path).ctx_code(
        code::INVALID_CONFIG,
        format_args!("ipam.resolvConf {path:?}"),
    )?;
    let mut dns = Dns::default();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 2 {
            continue;
        }
        let rest = f[1..].iter().map(|s| s.to_string());
        match f[0] {
            "nameserver" => dns.nameservers.push(f[1].to_string()),
            "domain" => dns.domain = f[1].to_string(),
            "search" => dns.search.extend(rest),
            "options" => dns.options.extend(rest),
            _ => {}
        }
    }
    Ok(dns)
}
