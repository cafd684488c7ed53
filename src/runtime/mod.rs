//! `cnitool`, the runtime side in the same binary (`cnitool` link or `cnibox cnitool`): reads a
//! network configuration, runs its plugins as libcni does (`chain.rs`), keeps libcni's result
//! cache (`cache.rs`). Upstream cnitool's command line and environment:
//! `cnitool [-i IFNAME] add|check|del NETWORK NETNS`, `cnitool gc|status NETWORK [NETNS]`;
//! `NETCONFPATH` (default /etc/cni/net.d), `CNI_PATH`, `CNI_IFNAME` (default eth0), `CNI_ARGS`
//! (`K=V;K2=V2`), `CAP_ARGS` (a JSON object of capability arguments). The container ID is
//! upstream's `cnitool-<20 hex of sha512(absolute netns path)>`, or `CNI_CONTAINERID` when set;
//! `CNI_CACHE_DIR` moves the cache from /var/lib/cni.
//!
//! Not a plugin and above the plugins: it imports `cni` and is handed the applet table by
//! `main`; nothing below imports it. A failure prints CNI error JSON (the failing plugin's code,
//! its message prefixed as libcni prefixes it) on stdout and exits 1.

pub(crate) mod cache;
pub(crate) mod chain;
pub(crate) mod load;

use crate::cni::Applet;
use crate::cni::env::{validate_container_id, validate_ifname, validate_network_name};
use crate::cni::error::{CodeContext, Error, Result, code};
use crate::cni::skel;
use crate::cni::version::Version;
use std::path::{Component, Path, PathBuf};

const USAGE: &str = "\
usage: cnitool [-i IFNAME] add|check|del NETWORK NETNS
       cnitool gc|status NETWORK [NETNS]
Runs the network configuration NETWORK (from $NETCONFPATH, default /etc/cni/net.d) for the
network namespace at path NETNS, as libcni does. Environment: CNI_PATH (plugin directories),
CNI_IFNAME (default eth0), CNI_ARGS (K=V;K2=V2), CAP_ARGS (JSON object of capability
arguments), CNI_CONTAINERID (default cnitool-<hash of NETNS>), CNI_CACHE_DIR (default
/var/lib/cni).";

/// Go's `filepath.Abs`: joined to the working directory when relative, then cleaned (`.`,
/// `..` and repeated slashes resolved lexically), so the container ID is upstream's.
fn absolute(p: &str) -> Result<String> {
    let mut path = PathBuf::from("/");
    if !p.starts_with('/') {
        path = std::env::current_dir().map_err(|e| Error::io("working directory", e))?;
    }
    for c in Path::new(p).components() {
        match c {
            Component::Normal(s) => path.push(s),
            Component::ParentDir => {
                path.pop();
            }
            _ => {}
        }
    }
    Ok(path.to_string_lossy().into_owned())
}

/// upstream cnitool's CNI_ARGS rule: `;`-separated pairs, each exactly one `=` between a
/// non-empty key and value.
fn parse_args(s: &str) -> Result<Vec<[String; 2]>> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(';')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() && !v.contains('=') => {
                Ok([k.to_string(), v.to_string()])
            }
            _ => Err(Error::env(format!("invalid CNI_ARGS pair {pair:?}"))),
        })
        .collect()
}

pub(crate) fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn attachment(netns: &str, ifname: Option<String>) -> Result<cache::Rt> {
    let caps = match var("CAP_ARGS").as_str() {
        "" => serde_json::Map::new(),
        text => match serde_json::from_str(text).ctx_code(code::INVALID_ENV, "CAP_ARGS")? {
            serde_json::Value::Object(m) => m,
            serde_json::Value::Null => serde_json::Map::new(),
            _ => return Err(Error::env("CAP_ARGS: not a JSON object")),
        },
    };
    let netns = absolute(netns)?;
    let container_id = match var("CNI_CONTAINERID") {
        id if id.is_empty() => {
            format!("cnitool-{}", crate::hash::sha512_hex(netns.as_bytes(), 20))
        }
        id => id,
    };
    let ifname = ifname
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| var("CNI_IFNAME"));
    let ifname = if ifname.is_empty() {
        "eth0".into()
    } else {
        ifname
    };
    // libcni checks these on ADD only; they name the cache file (and every plugin's skel
    // refuses them), so cnitool checks them for every verb.
    validate_container_id(&container_id)?;
    validate_ifname(&ifname)?;
    Ok(cache::Rt {
        container_id,
        netns,
        ifname,
        args: parse_args(&var("CNI_ARGS"))?,
        caps,
    })
}

fn run(
    applets: &'static [&'static Applet],
    args: &[String],
    ifname: Option<String>,
) -> Result<Option<String>> {
    let [verb, name, rest @ ..] = args else {
        crate::warn!("{USAGE}");
        return Err(Error::env("network name and namespace are required"));
    };
    let dir = match var("NETCONFPATH") {
        d if d.is_empty() => "/etc/cni/net.d".to_string(),
        d => d,
    };
    let list = load::load(Path::new(&dir), name)?;
    validate_network_name(&list.name)?;
    let rt = rest
        .first()
        .map(|netns| attachment(netns, ifname))
        .transpose()?;
    let runner = chain::Runner {
        applets,
        path: var("CNI_PATH"),
    };
    match (verb.as_str(), &rt) {
        ("add", Some(rt)) => runner.add(&list, rt).map(Some),
        ("check", Some(rt)) => runner.check(&list, rt).map(|()| None),
        ("del", Some(rt)) => runner.del(&list, rt).map(|()| None),
        ("gc", _) => runner.gc(&list).map(|()| None),
        ("status", _) => runner.status(&list).map(|()| None),
        ("add" | "check" | "del", None) => Err(Error::env(format!(
            "{verb}: network name and namespace are required"
        ))),
        _ => Err(Error::env(format!(
            "unknown command {verb:?} (add, check, del, gc, status)"
        ))),
    }
}

/// `cnitool ARGS…` (the arguments after the applet name): its exit status.
pub fn main(applets: &'static [&'static Applet], args: &[String]) -> i32 {
    skel::install_panic_hook();
    let mut ifname = None;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" | "help" => {
                let _ = skel::write_stdout(&format!("{USAGE}\n"));
                return 0;
            }
            "-i" | "--ifname" => ifname = it.next().cloned(),
            flag if flag.starts_with("--ifname=") => ifname = Some(flag[9..].to_string()),
            flag if flag.starts_with('-') && flag.len() > 1 => {
                crate::warn!("cnitool: unknown flag {flag:?}\n{USAGE}");
                return 2;
            }
            _ => rest.push(a.clone()),
        }
    }
    match run(applets, &rest, ifname.clone()) {
        Ok(Some(text)) => match skel::write_stdout(&text) {
            Ok(()) => 0,
            Err(e) => {
                crate::warn!("cnitool: cannot write the result to stdout: {e}");
                // An ADD whose result nobody got is taken back, as a plugin's is (cni::skel):
                // the DEL of the same attachment, from the record this ADD cached.
                if rest.first().is_some_and(|v| v == "add") {
                    let mut del = rest.clone();
                    del[0] = "del".into();
                    match run(applets, &del, ifname) {
                        Ok(_) => crate::warn!("cnitool: the ADD was undone"),
                        Err(e) => crate::warn!("cnitool: undoing the ADD failed: {}", e.msg),
                    }
                }
                1
            }
        },
        Ok(None) => 0,
        Err(e) => skel::print_error(&e, Version::LATEST),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netns_paths_are_cleaned_as_go_does() {
        assert_eq!(
            absolute("/run/netns//x/./y/../z/").unwrap(),
            "/run/netns/x/z"
        );
        assert_eq!(absolute("/..").unwrap(), "/");
    }

    #[test]
    fn cni_args_follow_upstream_cnitool() {
        assert_eq!(parse_args("A=1;B=2").unwrap().len(), 2);
        for bad in ["A=1;", "=1", "A=", "A=1=2", "A"] {
            let e = parse_args(bad).unwrap_err();
            assert!(
                e.code == 4 && e.msg.contains("invalid CNI_ARGS pair"),
                "{bad}: {e}"
            );
        }
    }
}
