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

/// `0.3.0, 0.3.1, …` for messages and the about banner.
pub fn list(versions: &[Version]) -> String {
    versions
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
