//! The `sysctl` keys: upstream's mapping to a file under /proc/sys/net, and its refusal of a
//! key given twice.

use crate::cni::gojson;
use crate::cni::{Error, Result};
use crate::netns::NetNs;
use std::path::PathBuf;

/// The longest key accepted: no path under /proc/sys is longer than PATH_MAX (real net sysctls
/// are under 100 bytes). A key can come from `args.cni` (pod annotations): one of 60k
/// characters overflowed the stack of the allowlist matcher cnibox used to have.
pub(super) const MAX_KEY: usize = 4096;

/// Upstream's mapping of a key to its file: dots become slashes, the first `IFNAME` becomes
/// the container interface, the path is cleaned (`..` resolved) and must stay under
/// `/proc/sys/net/`.
pub(super) fn sysctl_path(key: &str, ifname: &str) -> Result<PathBuf> {
    if key.len() > MAX_KEY {
        // Not echoed: the message would be as long as the key.
        return Err(Error::config(format!(
            "sysctl key {:?}… ({} bytes): longer than any sysctl path ({MAX_KEY})",
            key.chars().take(40).collect::<String>(),
            key.len()
        )));
    }
    if key.chars().any(char::is_control) {
        return Err(Error::config(format!(
            "sysctl {key:?}: invalid net sysctl key"
        )));
    }
    let key_path = key.replace('.', "/").replacen("IFNAME", ifname, 1);
    let full = format!("proc/sys/{key_path}");
    let mut parts: Vec<&str> = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if parts.len() < 4 || parts[..3] != ["proc", "sys", "net"] {
        return Err(Error::config(format!(
            "sysctl {key:?}: invalid net sysctl key (must name a file under /proc/sys/net/)"
        )));
    }
    Ok(PathBuf::from(format!("/{}", parts.join("/"))))
}

/// Each key must name a sysctl file in the container's namespace: a directory
/// (`net.ipv4.conf`) or a path that does not exist there is a configuration error (code 7
/// naming the key), found before anything changes (upstream fails writing it, after the keys
/// before it were written).
pub(super) fn check_sysctl_files(ns: &NetNs, sysctls: &[(String, PathBuf, String)]) -> Result<()> {
    ns.enter(|| {
        for (key, path, _) in sysctls {
            let why = match std::fs::metadata(path) {
                Ok(m) if m.is_dir() => "names a directory, not a sysctl",
                Ok(_) => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                    "no such sysctl in the container's network namespace"
                }
                Err(e) => {
                    return Err(Error::io(
                        format_args!("sysctl {key}: stat {}", path.display()),
                        e,
                    ));
                }
            };
            return Err(Error::config(format!(
                "sysctl {key:?}: {} {why}",
                path.display()
            )));
        }
        Ok(())
    })?
}

/// Upstream refuses a `sysctl` object that names a key twice (a JSON object may; serde keeps
/// the last). Keys of every top-level member Go would decode into `sysctl` count.
pub(super) fn refuse_duplicate_sysctls(stdin: &[u8]) -> Result<()> {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    use std::collections::HashSet;
    use std::fmt;

    struct Top<'a>(&'a mut HashSet<String>);
    struct Keys<'a>(&'a mut HashSet<String>);

    impl<'de> Visitor<'de> for Top<'_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> std::result::Result<bool, M::Error> {
            let mut dup = false;
            while let Some(k) = m.next_key::<String>()? {
                if k == "sysctl" || gojson::fold_eq(&k, "sysctl") {
                    dup |= m.next_value_seed(Keys(&mut *self.0))?;
                } else {
                    m.next_value::<IgnoredAny>()?;
                }
            }
            Ok(dup)
        }
    }
    impl<'de> DeserializeSeed<'de> for Keys<'_> {
        type Value = bool;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a sysctl object")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> std::result::Result<bool, M::Error> {
            let mut dup = false;
            while let Some(k) = m.next_key::<String>()? {
                dup |= !self.0.insert(k);
                m.next_value::<IgnoredAny>()?;
            }
            Ok(dup)
        }
        // Anything else (null, a wrong type) is left to the decoder's own error.
        fn visit_unit<E>(self) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_str<E>(self, _: &str) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_i64<E>(self, _: i64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_u64<E>(self, _: u64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_f64<E>(self, _: f64) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_bool<E>(self, _: bool) -> std::result::Result<bool, E> {
            Ok(false)
        }
        fn visit_seq<S: serde::de::SeqAccess<'de>>(
            self,
            mut s: S,
        ) -> std::result::Result<bool, S::Error> {
            while s.next_element::<IgnoredAny>()?.is_some() {}
            Ok(false)
        }
    }

    let mut seen = HashSet::new();
    let mut de = serde_json::Deserializer::from_slice(stdin);
    match de.deserialize_map(Top(&mut seen)) {
        Ok(true) => Err(Error::config(
            "sysctl: duplicated sysctl keys are not allowed",
        )),
        // Malformed input was already reported by the driver's decode.
        _ => Ok(()),
    }
}
