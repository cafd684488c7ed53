//! The CNI_* environment variables: which each command requires and how they are validated
//! (SPEC.md "Parameters"), plus CNI_ARGS `K=V;K2=V2` parsing with `IgnoreUnknown`.
//!
//! As SPEC.md says (and unlike the Go skel, which requires it for every verb), CNI_PATH is
//! required only for GC; a plugin that must find a delegate without it fails then with code 4
//! naming CNI_PATH. Unlike Go, empty pairs in CNI_ARGS (a trailing `;`) are skipped instead of
//! failing the whole request.

use super::error::{Error, Result};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
    Status,
    Gc,
}

impl Command {
    pub fn parse(s: &str) -> Option<Command> {
        Some(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "VERSION" => Command::Version,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
            Command::Version => "VERSION",
            Command::Status => "STATUS",
            Command::Gc => "GC",
        }
    }
}

/// The validated environment of one invocation.
#[derive(Clone, Debug)]
pub struct Env {
    pub command: Command,
    pub container_id: String,
    pub netns: String,
    pub ifname: String,
    pub args: String,
    pub path: String,
}

const CONTAINER_ID: &str = "CNI_CONTAINERID";
const NETNS: &str = "CNI_NETNS";
const IFNAME: &str = "CNI_IFNAME";
const PATH: &str = "CNI_PATH";

impl Env {
    /// Read the process environment. `Ok(None)` when CNI_COMMAND is unset or empty: the caller
    /// prints the about banner then, as the reference plugins do.
    pub fn from_process() -> Result<Option<Env>> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Env>> {
        let cmd = get("CNI_COMMAND").unwrap_or_default();
        if cmd.is_empty() {
            return Ok(None);
        }
        let command = Command::parse(&cmd)
            .ok_or_else(|| Error::env(format!("unknown CNI_COMMAND: {cmd}")))?;
        let required: &[&str] = match command {
            Command::Add | Command::Check => &[CONTAINER_ID, NETNS, IFNAME],
            Command::Del => &[CONTAINER_ID, IFNAME],
            Command::Gc => &[PATH],
            Command::Status | Command::Version => &[],
        };
        let val = |k: &str| get(k).unwrap_or_default();
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|k| val(k).is_empty())
            .collect();
        if !missing.is_empty() {
            return Err(Error::env(format!(
                "required env variables [{}] missing",
                missing.join(" ")
            )));
        }
        let env = Env {
            command,
            container_id: val(CONTAINER_ID),
            netns: val(NETNS),
            ifname: val(IFNAME),
            args: val("CNI_ARGS"),
            path: val(PATH),
        };
        if required.contains(&CONTAINER_ID) {
            validate_container_id(&env.container_id)?;
        }
        if required.contains(&IFNAME) {
            validate_ifname(&env.ifname)?;
        }
        Ok(Some(env))
    }

    /// Directories of CNI_PATH, in order.
    pub fn path_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.path
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    }

    /// CNI_ARGS as pairs, accepting only `known` keys unless `IgnoreUnknown` is true.
    pub fn cni_args(&self, known: &[&str]) -> Result<CniArgs> {
        CniArgs::parse(&self.args, known)
    }
}

/// `[A-Za-z0-9][A-Za-z0-9_.-]*` — the spec's rule for container IDs and network names.
pub fn is_valid_id(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

pub fn validate_container_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::env("missing containerID"));
    }
    if !is_valid_id(id) {
        return Err(Error::env("invalid characters in containerID").with_details(id));
    }
    Ok(())
}

/// What is wrong with an interface name by the kernel's `dev_valid_name` (1–15 bytes, not
/// `.`/`..`, no `/`, `:` or whitespace) — plus no control characters or NUL, which the kernel
/// would cut or which would break a rule or a sysctl path — or `None` when it is valid.
pub fn ifname_problem(name: &str) -> Option<&'static str> {
    Some(if name.is_empty() {
        "interface name is empty"
    } else if name.len() > 15 {
        "interface name is too long"
    } else if name == "." || name == ".." {
        "interface name is . or .."
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        "interface name contains / or : or whitespace characters"
    } else if name.chars().any(char::is_control) {
        "interface name contains control characters"
    } else {
        return None;
    })
}

/// CNI_IFNAME (code 4, as the Go skel).
pub fn validate_ifname(name: &str) -> Result<()> {
    match ifname_problem(name) {
        None => Ok(()),
        Some(msg) => Err(Error::env(msg).with_details(name)),
    }
}

/// An interface name taken from the config or a prevResult (`key` says where): code 7 naming
/// the key. Every such name is checked before it reaches netlink, a rule or a sysctl path.
pub fn validate_config_ifname(key: &str, name: &str) -> Result<()> {
    match ifname_problem(name) {
        None => Ok(()),
        Some(msg) => Err(Error::config(format!("{key}: {msg}: {name:?}"))),
    }
}

pub fn validate_network_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::config("missing network name"));
    }
    if !is_valid_id(name) {
        return Err(Error::config("invalid characters found in network name").with_details(name));
    }
    Ok(())
}

/// Parsed CNI_ARGS.
#[derive(Debug, Default, Clone)]
pub struct CniArgs(Vec<(String, String)>);

impl CniArgs {
    pub fn parse(raw: &str, known: &[&str]) -> Result<CniArgs> {
        let mut pairs = Vec::new();
        let mut unknown = Vec::new();
        for pair in raw.split(';').filter(|p| !p.is_empty()) {
            let mut kv = pair.split('=');
            let (Some(k), Some(v), None) = (kv.next(), kv.next(), kv.next()) else {
                return Err(Error::env(format!("CNI_ARGS: invalid pair {pair:?}")));
            };
            if k == "IgnoreUnknown" {
                parse_bool(v).map_err(|_| {
                    Error::env(format!("CNI_ARGS: IgnoreUnknown: invalid boolean {v:?}"))
                })?;
            } else if !known.contains(&k) {
                unknown.push(pair.to_string());
            }
            pairs.push((k.to_string(), v.to_string()));
        }
        let args = CniArgs(pairs);
        let ignore = args
            .get("IgnoreUnknown")
            .is_some_and(|v| parse_bool(v) == Ok(true));
        if !unknown.is_empty() && !ignore {
            return Err(Error::env(format!(
                "CNI_ARGS: unknown args {unknown:?} (set IgnoreUnknown=1 to allow them)"
            )));
        }
        Ok(args)
    }

    /// The last value given for `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Go's UnmarshallableBool: `1`/`true` and `0`/`false`, case-insensitive.
fn parse_bool(v: &str) -> std::result::Result<bool, ()> {
    if v == "1" || v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v == "0" || v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::error::code;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> Result<Option<Env>> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::from_lookup(|k| m.get(k).cloned())
    }

    const FULL: &[(&str, &str)] = &[
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "abc-1_2.3"),
        ("CNI_NETNS", "/run/netns/x"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/opt/cni/bin"),
    ];

    fn with(over: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut v: Vec<_> = FULL
            .iter()
            .copied()
            .filter(|(k, _)| !over.iter().any(|(o, _)| o == k))
            .collect();
        v.extend(over.iter().copied().filter(|(_, val)| !val.is_empty()));
        v
    }

    #[test]
    fn cni_path_is_optional_but_for_gc() {
        for cmd in ["ADD", "DEL", "CHECK", "STATUS", "VERSION"] {
            let e = env_of(&with(&[("CNI_COMMAND", cmd), ("CNI_PATH", "")])).unwrap();
            assert_eq!(e.unwrap().path, "", "{cmd}");
        }
    }

    #[test]
    fn no_command_means_about() {
        assert!(env_of(&[]).unwrap().is_none());
        assert!(env_of(&[("CNI_COMMAND", "")]).unwrap().is_none());
    }

    #[test]
    fn full_add_env_parses() {
        let e = env_of(FULL).unwrap().unwrap();
        assert_eq!(e.command, Command::Add);
        assert_eq!(e.ifname, "eth0");
        assert_eq!(
            e.path_dirs().collect::<Vec<_>>(),
            vec![PathBuf::from("/opt/cni/bin")]
        );
    }

    #[test]
    fn env_errors_have_code_4_and_name_the_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("CNI_COMMAND", "FOO")], "unknown CNI_COMMAND: FOO"),
            (
                &[("CNI_NETNS", "")],
                "required env variables [CNI_NETNS] missing",
            ),
            (
                &[("CNI_NETNS", ""), ("CNI_IFNAME", "")],
                "required env variables [CNI_NETNS CNI_IFNAME] missing",
            ),
            (
                &[("CNI_COMMAND", "GC"), ("CNI_PATH", "")],
                "required env variables [CNI_PATH] missing",
            ),
            (
                &[("CNI_CONTAINERID", "-abc")],
                "invalid characters in containerID",
            ),
            (
                &[("CNI_CONTAINERID", "a/b")],
                "invalid characters in containerID",
            ),
            (
                &[("CNI_IFNAME", "0123456789abcdef")],
                "interface name is too long",
            ),
            (&[("CNI_IFNAME", "..")], "interface name is . or .."),
            (
                &[("CNI_IFNAME", "eth 0")],
                "interface name contains / or : or whitespace characters",
            ),
            (
                &[("CNI_IFNAME", "a:b")],
                "interface name contains / or : or whitespace characters",
            ),
        ];
        for (over, msg) in cases {
            let err = env_of(&with(over)).unwrap_err();
            assert_eq!(err.code, code::INVALID_ENV, "{over:?}");
            assert_eq!(err.msg, *msg, "{over:?}");
        }
    }

    #[test]
    fn del_needs_no_netns_and_version_needs_nothing() {
        assert!(
            env_of(&with(&[("CNI_COMMAND", "DEL"), ("CNI_NETNS", "")]))
                .unwrap()
                .is_some()
        );
        assert!(env_of(&[("CNI_COMMAND", "VERSION")]).unwrap().is_some());
        assert!(
            env_of(&[("CNI_COMMAND", "GC"), ("CNI_PATH", "/x")])
                .unwrap()
                .is_some()
        );
        assert!(env_of(&[("CNI_COMMAND", "STATUS")]).unwrap().is_some());
        assert!(env_of(&[("CNI_COMMAND", "GC")]).is_err());
    }

    #[test]
    fn cni_args() {
        let a = CniArgs::parse("IP=10.0.0.5;IgnoreUnknown=1;K8S_POD_NAME=x", &["IP"]).unwrap();
        assert_eq!(a.get("IP"), Some("10.0.0.5"));
        assert_eq!(a.get("MAC"), None);
        assert!(CniArgs::parse("IP=10.0.0.5;K8S_POD_NAME=x", &["IP"]).is_err());
        assert!(CniArgs::parse("IP=10.0.0.5;IgnoreUnknown=0;FOO=1", &["IP"]).is_err());
        assert!(CniArgs::parse("IgnoreUnknown=TRUE;FOO=1", &[]).is_ok());
        assert!(CniArgs::parse("IgnoreUnknown=yes", &[]).is_err());
        assert!(CniArgs::parse("IP", &["IP"]).is_err());
        assert!(CniArgs::parse("IP=a=b", &["IP"]).is_err());
        assert!(CniArgs::parse("", &[]).unwrap().get("IP").is_none());
        assert_eq!(
            CniArgs::parse("IP=1.2.3.4;", &["IP"]).unwrap().get("IP"),
            Some("1.2.3.4")
        );
    }

    #[test]
    fn ids_and_names() {
        assert!(
            is_valid_id("a") && is_valid_id("A0_.-z") && !is_valid_id("") && !is_valid_id("_a")
        );
        assert!(validate_network_name("../etc").is_err());
        assert!(validate_network_name("..").is_err());
        assert_eq!(
            validate_network_name("").unwrap_err().code,
            code::INVALID_CONFIG
        );
        assert!(validate_network_name("my-net.1").is_ok());
    }
}
