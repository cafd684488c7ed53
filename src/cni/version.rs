//! Spec versions and their capabilities.
//!
//! A config without `cniVersion` is 0.1.0, as the Go decoder treats it.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V010,
    V020,
    V030,
    V031,
    V040,
    V100,
    V110,
}

impl Version {
    /// Every version cnibox speaks, oldest first (what VERSION reports for most applets).
    pub const ALL: &'static [Version] = &[
        Version::V010,
        Version::V020,
        Version::V030,
        Version::V031,
        Version::V040,
        Version::V100,
        Version::V110,
    ];
    pub const LATEST: Version = Version::V110;

    pub fn parse(s: &str) -> Option<Version> {
        Some(match s {
            "" | "0.1.0" => Version::V010,
            "0.2.0" => Version::V020,
            "0.3.0" => Version::V030,
            "0.3.1" => Version::V031,
            "0.4.0" => Version::V040,
            "1.0.0" => Version::V100,
            "1.1.0" => Version::V110,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V010 => "0.1.0",
            Version::V020 => "0.2.0",
            Version::V030 => "0.3.0",
            Version::V031 => "0.3.1",
            Version::V040 => "0.4.0",
            Version::V100 => "1.0.0",
            Version::V110 => "1.1.0",
        }
    }

    /// 0.1.0 and 0.2.0 results carry `ip4`/`ip6` instead of `interfaces`/`ips`/`routes`.
    pub fn is_legacy(self) -> bool {
        self < Version::V030
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The containernetworking/plugins release whose config keys, defaults and results cnibox
/// follows. It leads the about banner as upstream's build version does, so tools that parse the
/// banner as semver (nerdctl requires `firewall` ≥ v1.1.0 for `ingressPolicy: isolated`) accept
/// it; cnibox's own version rides along as semver build metadata.
pub const UPSTREAM_RELEASE: &str = "1.9.1";

/// `v1.9.1+cnibox.0.1.0`: the version word of the banners.
pub fn banner_version() -> String {
    format!("v{UPSTREAM_RELEASE}+cnibox.{}", env!("CARGO_PKG_VERSION"))
}

/// The about banner an applet prints to stderr when run without `CNI_COMMAND`, shaped as
/// upstream's (`CNI <name> plugin <version>` then the protocol versions), plus one line naming
/// cnibox for a person reading it.
pub fn about(applet: &str, versions: &[Version]) -> String {
    format!(
        "CNI {applet} plugin {}\nCNI protocol versions supported: {}\n\
         (cnibox {}: the {applet} applet, compatible with containernetworking/plugins v{UPSTREAM_RELEASE})",
        banner_version(),
        list(versions),
        env!("CARGO_PKG_VERSION"),
    )
}

/// `0.3.0, 0.3.1, …` for messages and the about banner.
pub fn list(versions: &[Version]) -> String {
    versions
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The versions as Go prints a `[]string` with `%q` (inside the brackets): `"0.1.0" "0.2.0"`,
/// which is how upstream's incompatible-version error details list them.
pub fn quoted_list(versions: &[Version]) -> String {
    versions
        .iter()
        .map(|v| format!("{:?}", v.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_list_is_go_percent_q() {
        assert_eq!(
            quoted_list(&[Version::V040, Version::V110]),
            r#""0.4.0" "1.1.0""#
        );
    }

    /// nerdctl takes the rest of the line after `CNI firewall plugin ` and parses it as semver
    /// (leading `v` allowed): core version, then `+` build metadata of dot-separated
    /// `[0-9A-Za-z-]+` identifiers.
    #[test]
    fn banner_version_is_semver() {
        let v = banner_version();
        let rest = v.strip_prefix('v').unwrap();
        let (core, build) = rest.split_once('+').unwrap();
        let nums: Vec<u64> = core.split('.').map(|n| n.parse().unwrap()).collect();
        assert_eq!(nums.len(), 3, "{v}");
        assert!(nums >= vec![1, 1, 0], "{v}");
        assert!(
            build
                .split('.')
                .all(|id| !id.is_empty()
                    && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')),
            "{v}"
        );
        let about = about("firewall", &[Version::V040]);
        assert_eq!(
            about.lines().next().unwrap(),
            format!("CNI firewall plugin {v}")
        );
    }

    #[test]
    fn parse_round_trips_and_orders() {
        for v in Version::ALL {
            assert_eq!(Version::parse(v.as_str()), Some(*v));
        }
        assert_eq!(Version::parse(""), Some(Version::V010));
        assert_eq!(Version::parse("1.2.0"), None);
        assert_eq!(Version::parse("abc"), None);
        assert!(Version::V020.is_legacy() && !Version::V030.is_legacy());
        assert!(Version::V040 < Version::V100);
    }
}
