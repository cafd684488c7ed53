//! `tuning` (chained, upstream `plugins/meta/tuning`): sysctls in the container's network
//! namespace and attributes of the container's interface, with the original attributes saved
//! and restored on DEL.
//!
//! Keys: `sysctl` (map; dots become slashes, the first `IFNAME` is the container interface,
//! and the path must stay under `/proc/sys/net/`), `mac`, `mtu`, `promisc` (only turns it on,
//! as upstream), `allmulti`, `txQLen`, `dataDir` (default `/run/cni/tuning`). Inputs in
//! upstream's order, later wins: CNI_ARGS `MAC`, `runtimeConfig.mac`, then `args.cni`'s `mac`,
//! `mtu`, `promisc`, `allmulti`, `txQLen` and `sysctl` (merged over the config's). When
//! `/etc/cni/tuning/allowlist.conf` exists, every sysctl key must match one of its patterns;
//! a key given twice in `sysctl` is refused.
//!
//! ADD writes the sysctls, saves the attributes it is about to change to
//! `<dataDir>/<containerID>_<ifname>.json` (upstream's file and format, so either
//! implementation's DEL restores the other's ADD), changes them, and returns the prevResult with
//! the new MAC on the interface. DEL restores and removes the file and never fails on a missing
//! namespace or link. CHECK compares sysctls and attributes.
//!
//! Beyond upstream: every key is checked before anything changes (upstream reports a bad MAC or
//! sysctl path after writing the sysctls before it): a sysctl key must name a file in the
//! container's namespace (a directory or a missing one is code 7) and be at most 4096 bytes,
//! `dataDir` must be a directory (or not exist yet), `runtimeConfig.mac` a string. A failed ADD
//! restores the sysctls it wrote and the attributes it changed, and DEL removes the backup when
//! the interface is gone (upstream leaves it in `/run/cni/tuning` forever). Container IDs too
//! long for upstream's backup name (over 255 bytes with the ifname) get a hashed one.

pub(super) mod allowlist;
mod keys;
#[cfg(test)]
mod tests;

use keys::{check_sysctl_files, refuse_duplicate_sysctls, sysctl_path};

use crate::cni::error::code;
use crate::cni::gojson;
use crate::cni::{Applet, CniResult, CodeContext, Context, Error, Request, Result, Version};
use crate::netlink::{Handle, Link, fmt_mac, parse_mac};
use crate::netns::NetNs;
use crate::undo::{ErrorList, Undo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub static APPLET: Applet = Applet {
    name: "tuning",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: None,
};

const DEFAULT_DATA_DIR: &str = "/run/cni/tuning";

#[derive(Deserialize, Default)]
struct Conf {
    #[serde(rename = "dataDir", default)]
    data_dir: String,
    #[serde(default)]
    sysctl: Option<BTreeMap<String, String>>,
    #[serde(default)]
    mac: String,
    #[serde(default)]
    promisc: bool,
    #[serde(default)]
    mtu: i64,
    #[serde(rename = "txQLen", default)]
    tx_qlen: Option<i64>,
    #[serde(default)]
    allmulti: Option<bool>,
}

/// `args.cni`: each key present overrides the config's.
#[derive(Deserialize, Default)]
struct ArgsCni {
    #[serde(default)]
    sysctl: Option<BTreeMap<String, String>>,
    #[serde(default)]
    mac: Option<String>,
    #[serde(default)]
    promisc: Option<bool>,
    #[serde(default)]
    mtu: Option<i64>,
    #[serde(default)]
    allmulti: Option<bool>,
    #[serde(rename = "txQLen", default)]
    tx_qlen: Option<i64>,
}

/// What ADD saves before changing the interface (upstream's `configToRestore`, same JSON:
/// `mac`, `promisc`, `mtu`, `allmulti`, `txQLen`, each only when it was changed).
#[derive(Serialize, Deserialize, Default, Debug, PartialEq)]
struct Saved {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    promisc: Option<bool>,
    #[serde(default, skip_serializing_if = "is_zero")]
    mtu: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    allmulti: Option<bool>,
    #[serde(rename = "txQLen", default, skip_serializing_if = "Option::is_none")]
    tx_qlen: Option<i64>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The checked configuration.
struct Tuning {
    data_dir: PathBuf,
    /// (key as given, `/proc/sys/...` path, value)
    sysctls: Vec<(String, PathBuf, String)>,
    mac: Option<[u8; 6]>,
    promisc: bool,
    mtu: Option<u32>,
    allmulti: Option<bool>,
    tx_qlen: Option<u32>,
}

impl Tuning {
    fn changes_link(&self) -> bool {
        self.mac.is_some()
            || self.promisc
            || self.mtu.is_some()
            || self.allmulti.is_some()
            || self.tx_qlen.is_some()
    }

    fn backup(&self, req: &Request) -> PathBuf {
        backup_path(&self.data_dir, req)
    }
}

/// Longest file name the kernel takes (NAME_MAX).
const NAME_MAX: usize = 255;

/// upstream's `<containerID>_<ifname>.json`, so either implementation's DEL finds the other's
/// backup. Container IDs have no length limit and that name fails (ENAMETOOLONG) past 255
/// bytes, where the Go plugin cannot work anyway: there it is `~<32 hex of sha512 of the
/// name>.json` (`~` never starts a container ID), as `attachment.rs` names long owners.
fn backup_path(data_dir: &Path, req: &Request) -> PathBuf {
    let name = format!("{}_{}.json", req.env.container_id, req.env.ifname);
    if name.len() <= NAME_MAX {
        return data_dir.join(name);
    }
    let hash = crate::hash::sha512_hex(name.as_bytes(), 32);
    data_dir.join(format!("~{hash}.json"))
}

/// `dataDir` must be a directory, or not exist yet (ADD makes it): a file there or in its
/// path is a configuration error (code 7), found before anything changes; any other failure
/// to look is the host's (code 5).
fn check_data_dir(dir: &Path) -> Result<()> {
    let not_dir = || {
        Error::config(format!(
            "dataDir {}: not a directory (the backup of the interface's attributes goes there)",
            dir.display()
        ))
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(not_dir()),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => Err(not_dir()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::host_io(format_args!("dataDir {}", dir.display()), e)),
    }
}

fn load(req: &Request, verify_sysctls: bool) -> Result<Tuning> {
    if verify_sysctls {
        refuse_duplicate_sysctls(&req.stdin)?;
    }
    let c: Conf = req.decode()?;
    let a: ArgsCni = match gojson::member(&req.raw, "args").and_then(|a| gojson::member(a, "cni")) {
        Some(v) => gojson::from_value(v).ctx_code(code::DECODE_FAILURE, "args.cni")?,
        None => ArgsCni::default(),
    };
    let data_dir = if c.data_dir.is_empty() {
        DEFAULT_DATA_DIR.to_string()
    } else {
        c.data_dir.clone()
    };
    if !data_dir.starts_with('/') || data_dir.contains('\0') {
        return Err(Error::config(format!(
            "dataDir {data_dir:?} must be an absolute path"
        )));
    }

    // CNI_ARGS MAC < runtimeConfig.mac < args.cni.mac, as upstream.
    let mut mac = super::shared::container::requested_mac(req, c.mac.clone())?;
    if let Some(m) = a.mac {
        mac = m;
    }
    let mac = match mac.as_str() {
        "" => None,
        m => Some(
            parse_mac(m).map_err(|_| Error::config(format!("mac: invalid MAC address {m:?}")))?,
        ),
    };
    let mtu = a.mtu.unwrap_or(c.mtu);
    let mtu = match mtu {
        0 => None,
        1..=0xffff_ffff => Some(mtu as u32),
        _ => return Err(Error::config(format!("mtu: {mtu} is not a valid MTU"))),
    };
    let tx_qlen = match a.tx_qlen.or(c.tx_qlen) {
        None => None,
        Some(q @ 0..=0xffff_ffff) => Some(q as u32),
        Some(q) => return Err(Error::config(format!("txQLen: {q} is out of range"))),
    };

    let mut sysctl = c.sysctl.unwrap_or_default();
    sysctl.extend(a.sysctl.unwrap_or_default());
    let allow = if verify_sysctls {
        allowlist::load(allowlist::PATH)?
    } else {
        None
    };
    let mut sysctls = Vec::with_capacity(sysctl.len());
    for (key, value) in sysctl {
        let path = sysctl_path(&key, &req.env.ifname)?;
        if value.contains('\0') {
            return Err(Error::config(format!("sysctl {key:?}: value contains NUL")));
        }
        if let Some(list) = &allow
            && !list.iter().any(|(_, r)| r.is_match(&key))
        {
            let patterns: Vec<&str> = list.iter().map(|(p, _)| p.as_str()).collect();
            return Err(Error::config(format!(
                "sysctl {key} is not allowed. Only the following sysctls are allowed: {patterns:?}"
            )));
        }
        sysctls.push((key, path, value));
    }
    Ok(Tuning {
        data_dir: PathBuf::from(data_dir),
        sysctls,
        mac,
        promisc: a.promisc.unwrap_or(c.promisc),
        mtu,
        allmulti: a.allmulti.or(c.allmulti),
        tx_qlen,
    })
}

fn prev(req: &Request) -> Result<CniResult> {
    req.prev_result()?
        .ok_or_else(|| Error::config("Required prevResult missing"))
}

fn container(req: &Request) -> Result<(NetNs, Handle, Link)> {
    let ns = req.netns()?;
    let mut h = Handle::in_netns(&ns)?;
    let link = h.link_by_name(&req.env.ifname)?.ok_or_else(|| {
        Error::internal(format!("failed to get {:?}: no such link", req.env.ifname))
    })?;
    Ok((ns, h, link))
}

fn add(req: &Request) -> Result<CniResult> {
    let t = load(req, true)?;
    let mut result = prev(req)?;
    let (ns, mut h, link) = container(req)?;
    check_sysctl_files(&ns, &t.sysctls)?;
    if t.changes_link() {
        check_data_dir(&t.data_dir)?;
    }
    let ifname = &req.env.ifname;
    let mut undo = Undo::new("tuning");
    let r = (|| -> Result<()> {
        for (key, path, value) in &t.sysctls {
            let old = ns
                .enter(|| std::fs::read_to_string(path))?
                .map_err(|e| Error::io(format_args!("sysctl {key}: read {}", path.display()), e))?;
            ns.enter(|| std::fs::write(path, value))?.map_err(|e| {
                Error::io(format_args!("sysctl {key}: write {}", path.display()), e)
            })?;
            let (ns, path) = (&ns, path.clone());
            undo.push(format!("sysctl {key}"), move || {
                ns.enter(|| std::fs::write(&path, old.trim_end_matches('\n')))?
                    .ctx(format_args!("restore {}", path.display()))
            });
        }
        if !t.changes_link() {
            return Ok(());
        }
        let saved = Saved {
            mac: t
                .mac
                .map(|_| link.mac.map(|m| fmt_mac(&m)).unwrap_or_default())
                .unwrap_or_default(),
            promisc: t.promisc.then_some(link.promisc),
            mtu: if t.mtu.is_some() {
                i64::from(link.mtu)
            } else {
                0
            },
            allmulti: t.allmulti.map(|_| link.allmulti),
            tx_qlen: t.tx_qlen.map(|_| i64::from(link.txqlen)),
        };
        let backup = t.backup(req);
        write_backup(&t.data_dir, &backup, &saved)?;
        {
            let (ns, ifname, backup) = (&ns, ifname.clone(), backup.clone());
            undo.push("interface attributes", move || {
                let mut h = Handle::in_netns(ns)?;
                restore(&mut h, &ifname, &backup)
            });
        }
        let i = link.index;
        if let Some(mac) = t.mac {
            h.set_mac(i, mac)
                .ctx(format_args!("failed to set MAC of {ifname:?}"))?;
            for iface in result.interfaces.iter_mut().filter(|f| &f.name == ifname) {
                iface.mac = fmt_mac(&mac);
            }
        }
        if t.promisc {
            h.set_promisc(i, true)
                .ctx(format_args!("failed to set {ifname:?} promiscuous"))?;
        }
        if let Some(mtu) = t.mtu {
            h.set_mtu(i, mtu)
                .ctx(format_args!("failed to set MTU of {ifname:?} to {mtu}"))?;
        }
        if let Some(on) = t.allmulti {
            h.set_allmulti(i, on)
                .ctx(format_args!("failed to set all-multicast of {ifname:?}"))?;
        }
        if let Some(q) = t.tx_qlen {
            h.set_txqlen(i, q).ctx(format_args!(
                "failed to set txqueuelen of {ifname:?} to {q}"
            ))?;
        }
        Ok(())
    })();
    undo.finish(r)?;
    Ok(result)
}

fn write_backup(dir: &Path, path: &Path, saved: &Saved) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    // Upstream creates the directory 0600 (root needs no search bit); same here. A file in
    // the way (made since check_data_dir looked) is the config's fault, anything else the
    // host's.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o600)
        .create(dir)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR | libc::EEXIST) => {
                Error::config(format!("dataDir {}: not a directory ({e})", dir.display()))
            }
            _ => Error::host_io(
                format_args!("failed to create backup directory {}", dir.display()),
                e,
            ),
        })?;
    let text = crate::cni::gojson::pretty_with_indent(saved, b" ");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .map_err(|e| Error::host_io(format_args!("failed to save {}", path.display()), e))
}

/// Put back what `backup` recorded, then remove it. Every attribute is tried; a missing link
/// means the interface is gone, and its backup with it.
fn restore(h: &mut Handle, ifname: &str, backup: &Path) -> Result<()> {
    let text = match std::fs::read(backup) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::host_io(format_args!("read {}", backup.display()), e)),
    };
    let remove =
        || std::fs::remove_file(backup).ctx(format_args!("failed to remove {}", backup.display()));
    // An unreadable backup restores nothing, as upstream.
    let Ok(saved) = serde_json::from_slice::<serde_json::Value>(&text)
        .map_err(drop)
        .and_then(|v| gojson::from_value::<Saved>(&v).map_err(drop))
    else {
        return remove();
    };
    let Some(link) = h.link_by_name(ifname)? else {
        return remove();
    };
    let i = link.index;
    let mut errors = ErrorList::new();
    if saved.mtu > 0 {
        errors.check(h.set_mtu(i, saved.mtu as u32).ctx("failed to restore MTU"));
    }
    if !saved.mac.is_empty() {
        errors.check(
            parse_mac(&saved.mac)
                .and_then(|m| h.set_mac(i, m).map_err(Error::from))
                .ctx("failed to restore MAC address"),
        );
    }
    if let Some(on) = saved.promisc {
        errors.check(
            h.set_promisc(i, on)
                .ctx("failed to restore promiscuous mode"),
        );
    }
    if let Some(on) = saved.allmulti {
        errors.check(
            h.set_allmulti(i, on)
                .ctx("failed to restore all-multicast mode"),
        );
    }
    if let Some(q) = saved.tx_qlen.and_then(|q| u32::try_from(q).ok()) {
        errors.check(
            h.set_txqlen(i, q)
                .ctx("failed to restore transmit queue length"),
        );
    }
    errors.into_result()?;
    remove()
}

fn del(req: &Request) -> Result<()> {
    let Ok(t) = load(req, false) else {
        // Upstream fails DEL only on a config it cannot parse at all; the driver decoded it.
        return Ok(());
    };
    let backup = t.backup(req);
    let Ok(Some(ns)) = req.netns_if_exists() else {
        // The namespace is gone, and the interface with it.
        let _ = std::fs::remove_file(&backup);
        return Ok(());
    };
    // Errors are reported on stderr only: DEL of tuning never fails, as upstream.
    if let Err(e) = Handle::in_netns(&ns)
        .map_err(Error::from)
        .and_then(|mut h| restore(&mut h, &req.env.ifname, &backup))
    {
        crate::warn!("tuning: DEL: {e}");
    }
    Ok(())
}

fn check(req: &Request) -> Result<()> {
    let t = load(req, true)?;
    prev(req)?;
    let (ns, _h, link) = container(req)?;
    check_sysctl_files(&ns, &t.sysctls)?;
    let ifname = &req.env.ifname;
    for (_, path, want) in &t.sysctls {
        let have = ns
            .enter(|| std::fs::read_to_string(path))?
            .map_err(|e| Error::io(format_args!("read {}", path.display()), e))?;
        let have = have.strip_suffix('\n').unwrap_or(&have);
        if have != want {
            return Err(Error::internal(format!(
                "Error: Tuning configured value of {} is {want}, current value is {have}",
                path.display()
            )));
        }
    }
    let fail = |what: &str, want: String, have: String| {
        Err(Error::internal(format!(
            "Error: Tuning configured {what} of {ifname} is {want}, current value is {have}"
        )))
    };
    let have_mac = link.mac.map(|m| fmt_mac(&m)).unwrap_or_default();
    if let Some(m) = t.mac
        && fmt_mac(&m) != have_mac
    {
        return fail("Ethernet", fmt_mac(&m), have_mac);
    }
    if t.promisc != link.promisc {
        return fail("promisc", t.promisc.to_string(), link.promisc.to_string());
    }
    if let Some(mtu) = t.mtu
        && mtu != link.mtu
    {
        return fail("MTU", mtu.to_string(), link.mtu.to_string());
    }
    if let Some(on) = t.allmulti
        && on != link.allmulti
    {
        return fail(
            "all-multicast mode",
            on.to_string(),
            link.allmulti.to_string(),
        );
    }
    if let Some(q) = t.tx_qlen
        && q != link.txqlen
    {
        return fail(
            "Transmit Queue Length",
            q.to_string(),
            link.txqlen.to_string(),
        );
    }
    Ok(())
}
