//! Results, modelled once (the 1.1.0 shape) and converted to the version a request asks for.
//!
//! Conversion follows the Go library: 0.3.x/0.4.0 add `ips[].version` and drop the interface
//! attributes `mtu`, `socketPath` and `pciID` (route attributes stay in every version); 0.1.0/0.2.0 keep the first IPv4 and first IPv6 address as
//! `ip4`/`ip6`, split routes between them by destination family, and fail with
//! "cannot convert: no valid IP addresses" when there is no address at all. Printed as upstream
//! v1.9.1 (libcni 1.3) prints: up to 0.4.0 Go structs (declaration order, `"dns": {}` when
//! empty); from 1.0.0 a map (every object's keys sorted, an empty DNS left out).

use super::error::{CodeContext, Error, Result, code};
use super::gojson::{self, pretty};
use super::version::Version;
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::IpAddr;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sandbox: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub socket_path: String,
    #[serde(default, rename = "pciID", skip_serializing_if = "String::is_empty")]
    pub pci_id: String,
}

/// Go's `net.IP` reads `""` as no address; runtimes and older plugins emit it.
fn opt_ip<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<IpAddr>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpConfig {
    /// Only 0.3.x/0.4.0 print it; always derived from the address on output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
    pub address: IpNet,
    #[serde(
        default,
        deserialize_with = "opt_ip",
        skip_serializing_if = "Option::is_none"
    )]
    pub gateway: Option<IpAddr>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub dst: IpNet,
    #[serde(
        default,
        deserialize_with = "opt_ip",
        skip_serializing_if = "Option::is_none"
    )]
    pub gw: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, rename = "advmss", skip_serializing_if = "Option::is_none")]
    pub adv_mss: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<u8>,
}

impl Route {
    pub fn new(dst: IpNet, gw: Option<IpAddr>) -> Route {
        Route {
            dst,
            gw,
            mtu: None,
            adv_mss: None,
            priority: None,
            table: None,
            scope: None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dns {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub domain: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl Dns {
    pub fn is_empty(&self) -> bool {
        *self == Dns::default()
    }
}

/// A result in the newest shape; `interfaces`/`ips` indexes are positions in `interfaces`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CniResult {
    pub interfaces: Vec<Interface>,
    pub ips: Vec<IpConfig>,
    pub routes: Vec<Route>,
    pub dns: Dns,
}

#[derive(Serialize)]
struct Modern<'a> {
    #[serde(rename = "cniVersion")]
    version: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    interfaces: &'a [Interface],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    ips: &'a [IpConfig],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    routes: &'a [Route],
    #[serde(skip_serializing_if = "Option::is_none")]
    dns: Option<&'a Dns>,
}

#[derive(Serialize, Deserialize, Default)]
struct LegacyIp {
    ip: IpNet,
    #[serde(
        default,
        deserialize_with = "opt_ip",
        skip_serializing_if = "Option::is_none"
    )]
    gateway: Option<IpAddr>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    routes: Vec<LegacyRoute>,
}

#[derive(Serialize, Deserialize)]
struct LegacyRoute {
    dst: IpNet,
    #[serde(
        default,
        deserialize_with = "opt_ip",
        skip_serializing_if = "Option::is_none"
    )]
    gw: Option<IpAddr>,
}

#[derive(Serialize, Deserialize)]
struct Legacy<'a> {
    #[serde(rename = "cniVersion", default)]
    version: &'a str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip4: Option<LegacyIp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ip6: Option<LegacyIp>,
    #[serde(default)]
    dns: Dns,
}

#[derive(Deserialize)]
struct ModernIn {
    #[serde(default)]
    interfaces: Vec<Interface>,
    #[serde(default)]
    ips: Vec<IpConfig>,
    #[serde(default)]
    routes: Vec<Route>,
    #[serde(default)]
    dns: Dns,
}

impl CniResult {
    /// Parse a result printed in `version` (a prevResult, or a delegated plugin's output).
    pub fn from_value(v: &Value, version: Version) -> Result<CniResult> {
        if version.is_legacy() {
            let l = gojson::from_value::<Legacy>(v)
                .ctx_code(code::DECODE_FAILURE, "failed to parse result")?;
            let mut r = CniResult {
                dns: l.dns,
                ..Default::default()
            };
            for ip in [l.ip4, l.ip6].into_iter().flatten() {
                r.ips.push(IpConfig {
                    version: None,
                    interface: None,
                    address: ip.ip,
                    gateway: ip.gateway,
                });
                r.routes
                    .extend(ip.routes.into_iter().map(|rt| Route::new(rt.dst, rt.gw)));
            }
            return Ok(r);
        }
        let m = gojson::from_value::<ModernIn>(v)
            .ctx_code(code::DECODE_FAILURE, "failed to parse result")?;
        let mut r = CniResult {
            interfaces: m.interfaces,
            ips: m.ips,
            routes: m.routes,
            dns: m.dns,
        };
        for ip in &mut r.ips {
            ip.version = None;
        }
        Ok(r)
    }

    /// Parse a result whose own `cniVersion` says how to read it (falling back to `default`).
    pub fn from_json(v: &Value, default: Version) -> Result<CniResult> {
        let ver = match v.get("cniVersion").and_then(Value::as_str) {
            Some(s) => Version::parse(s).ok_or_else(|| {
                Error::new(
                    super::error::code::INCOMPATIBLE_VERSION,
                    format!("unsupported result version {s:?}"),
                )
            })?,
            None => default,
        };
        Self::from_value(v, ver)
    }

    /// The JSON a plugin prints for `version`, as a value (tests, conversions).
    pub fn to_value(&self, version: Version) -> Result<Value> {
        serde_json::from_str(&self.to_json(version)?)
            .ctx_code(code::INTERNAL, "failed to encode result")
    }

    /// The text a plugin prints for `version`: Go's field order, four-space indent.
    pub fn to_json(&self, version: Version) -> Result<String> {
        if version.is_legacy() {
            let mut l = Legacy {
                version: version.as_str(),
                ip4: None,
                ip6: None,
                dns: self.dns.clone(),
            };
            for ip in &self.ips {
                let slot = if ip.address.addr().is_ipv4() {
                    &mut l.ip4
                } else {
                    &mut l.ip6
                };
                if slot.is_none() {
                    *slot = Some(LegacyIp {
                        ip: ip.address,
                        gateway: ip.gateway,
                        routes: Vec::new(),
                    });
                }
            }
            if l.ip4.is_none() && l.ip6.is_none() {
                return Err(Error::internal("cannot convert: no valid IP addresses"));
            }
            for rt in &self.routes {
                let slot = if rt.dst.addr().is_ipv4() {
                    &mut l.ip4
                } else {
                    &mut l.ip6
                };
                if let Some(ip) = slot {
                    ip.routes.push(LegacyRoute {
                        dst: rt.dst,
                        gw: rt.gw,
                    });
                }
            }
            return Ok(pretty(&l));
        }
        let mut interfaces = self.interfaces.clone();
        let mut ips = self.ips.clone();
        let routes = self.routes.clone();
        for ip in &mut ips {
            ip.version = (version < Version::V100).then(|| {
                if ip.address.addr().is_ipv4() {
                    "4"
                } else {
                    "6"
                }
                .to_string()
            });
        }
        // As the Go library: routes are one type in every version from 0.3.0 and keep their
        // attributes; 0.3.x/0.4.0 interfaces have no mtu, socketPath or pciID.
        if version < Version::V100 {
            for i in &mut interfaces {
                i.mtu = None;
                i.socket_path.clear();
                i.pci_id.clear();
            }
        }
        let modern = Modern {
            version: version.as_str(),
            interfaces: &interfaces,
            ips: &ips,
            routes: &routes,
            dns: (version < Version::V100 || !self.dns.is_empty()).then_some(&self.dns),
        };
        if version < Version::V100 {
            // The 0.3.x/0.4.0 types are Go structs: fields in declaration order, and
            // encoding/json never omits a struct, so `"dns": {}` is printed when empty.
            return Ok(pretty(&modern));
        }
        // libcni 1.3 (upstream v1.9.1) prints a 1.x result through a map: every object's keys
        // sorted, and an empty DNS left out. A `Value`'s object keys come out sorted as Go sorts
        // a map's (byte order).
        let sorted =
            serde_json::to_value(&modern).ctx_code(code::INTERNAL, "failed to encode result")?;
        Ok(pretty(&sorted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> CniResult {
        CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: "0a:58:0a:00:00:02".into(),
                mtu: Some(1500),
                sandbox: "/run/netns/x".into(),
                ..Default::default()
            }],
            ips: vec![
                IpConfig {
                    version: None,
                    interface: Some(0),
                    address: "10.0.0.2/24".parse().unwrap(),
                    gateway: Some("10.0.0.1".parse().unwrap()),
                },
                IpConfig {
                    version: None,
                    interface: Some(0),
                    address: "10.0.1.2/24".parse().unwrap(),
                    gateway: None,
                },
                IpConfig {
                    version: None,
                    interface: Some(0),
                    address: "fd00::2/64".parse().unwrap(),
                    gateway: Some("fd00::1".parse().unwrap()),
                },
            ],
            routes: vec![
                Route {
                    table: Some(100),
                    ..Route::new(
                        "0.0.0.0/0".parse().unwrap(),
                        Some("10.0.0.1".parse().unwrap()),
                    )
                },
                Route::new("::/0".parse().unwrap(), None),
            ],
            dns: Dns {
                nameservers: vec!["10.0.0.53".into()],
                ..Default::default()
            },
        }
    }

    /// One expected JSON per version for the same result.
    #[test]
    fn conversion_table() {
        let r = sample();
        let legacy = |v: &str| {
            json!({
                "cniVersion": v,
                "ip4": {"ip": "10.0.0.2/24", "gateway": "10.0.0.1", "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}]},
                "ip6": {"ip": "fd00::2/64", "gateway": "fd00::1", "routes": [{"dst": "::/0"}]},
                "dns": {"nameservers": ["10.0.0.53"]}
            })
        };
        let zero_x = |v: &str| {
            json!({
                "cniVersion": v,
                "interfaces": [{"name": "eth0", "mac": "0a:58:0a:00:00:02", "sandbox": "/run/netns/x"}],
                "ips": [
                    {"version": "4", "interface": 0, "address": "10.0.0.2/24", "gateway": "10.0.0.1"},
                    {"version": "4", "interface": 0, "address": "10.0.1.2/24"},
                    {"version": "6", "interface": 0, "address": "fd00::2/64", "gateway": "fd00::1"}
                ],
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1", "table": 100}, {"dst": "::/0"}],
                "dns": {"nameservers": ["10.0.0.53"]}
            })
        };
        let cases = [
            (Version::V010, legacy("0.1.0")),
            (Version::V020, legacy("0.2.0")),
            (Version::V030, zero_x("0.3.0")),
            (Version::V031, zero_x("0.3.1")),
            (Version::V040, zero_x("0.4.0")),
            (
                Version::V100,
                json!({
                    "cniVersion": "1.0.0",
                    "interfaces": [{"name": "eth0", "mac": "0a:58:0a:00:00:02", "mtu": 1500, "sandbox": "/run/netns/x"}],
                    "ips": [
                        {"interface": 0, "address": "10.0.0.2/24", "gateway": "10.0.0.1"},
                        {"interface": 0, "address": "10.0.1.2/24"},
                        {"interface": 0, "address": "fd00::2/64", "gateway": "fd00::1"}
                    ],
                    "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1", "table": 100}, {"dst": "::/0"}],
                    "dns": {"nameservers": ["10.0.0.53"]}
                }),
            ),
            (
                Version::V110,
                json!({
                    "cniVersion": "1.1.0",
                    "interfaces": [{"name": "eth0", "mac": "0a:58:0a:00:00:02", "mtu": 1500, "sandbox": "/run/netns/x"}],
                    "ips": [
                        {"interface": 0, "address": "10.0.0.2/24", "gateway": "10.0.0.1"},
                        {"interface": 0, "address": "10.0.1.2/24"},
                        {"interface": 0, "address": "fd00::2/64", "gateway": "fd00::1"}
                    ],
                    "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1", "table": 100}, {"dst": "::/0"}],
                    "dns": {"nameservers": ["10.0.0.53"]}
                }),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(r.to_value(v).unwrap(), want, "version {v}");
        }
    }

    #[test]
    fn empty_dns_printed_below_1_0_left_out_from_1_0() {
        let r = CniResult {
            ips: sample().ips,
            ..Default::default()
        };
        assert_eq!(r.to_value(Version::V020).unwrap()["dns"], json!({}));
        assert_eq!(r.to_value(Version::V040).unwrap()["dns"], json!({}));
        assert!(r.to_value(Version::V100).unwrap().get("dns").is_none());
        assert!(r.to_value(Version::V110).unwrap().get("dns").is_none());
    }

    /// The text, not only the value: v1.9.1's bytes for a 1.x result (keys sorted at every
    /// level) and a 0.4.0 one (Go's declaration order).
    #[test]
    fn printed_as_v1_9_1_prints() {
        let r = CniResult {
            interfaces: vec![Interface {
                name: "eth0".into(),
                mac: "de:be:b5:61:e5:28".into(),
                sandbox: "/run/netns/x".into(),
                ..Default::default()
            }],
            ips: vec![IpConfig {
                version: None,
                interface: Some(0),
                address: "10.99.0.2/24".parse().unwrap(),
                gateway: Some("10.99.0.1".parse().unwrap()),
            }],
            routes: vec![Route::new("0.0.0.0/0".parse().unwrap(), None)],
            dns: Dns {
                nameservers: vec!["1.1.1.1".into()],
                domain: "x".into(),
                ..Default::default()
            },
        };
        let squash = |s: String| s.split_whitespace().collect::<String>();
        assert_eq!(
            squash(r.to_json(Version::V110).unwrap()),
            concat!(
                r#"{"cniVersion":"1.1.0","dns":{"domain":"x","nameservers":["1.1.1.1"]},"#,
                r#""interfaces":[{"mac":"de:be:b5:61:e5:28","name":"eth0","sandbox":"/run/netns/x"}],"#,
                r#""ips":[{"address":"10.99.0.2/24","gateway":"10.99.0.1","interface":0}],"#,
                r#""routes":[{"dst":"0.0.0.0/0"}]}"#
            )
        );
        assert_eq!(
            squash(r.to_json(Version::V040).unwrap()),
            concat!(
                r#"{"cniVersion":"0.4.0","#,
                r#""interfaces":[{"name":"eth0","mac":"de:be:b5:61:e5:28","sandbox":"/run/netns/x"}],"#,
                r#""ips":[{"version":"4","interface":0,"address":"10.99.0.2/24","gateway":"10.99.0.1"}],"#,
                r#""routes":[{"dst":"0.0.0.0/0"}],"dns":{"nameservers":["1.1.1.1"],"domain":"x"}}"#
            )
        );
    }

    #[test]
    fn l2_only_result_cannot_go_below_0_3() {
        let r = CniResult {
            interfaces: sample().interfaces,
            ..Default::default()
        };
        assert_eq!(
            r.to_value(Version::V020).unwrap_err().msg,
            "cannot convert: no valid IP addresses"
        );
        assert!(r.to_value(Version::V030).is_ok());
    }

    #[test]
    fn parse_every_version_round_trips() {
        let r = sample();
        for v in Version::ALL {
            let printed = r.to_value(*v).unwrap();
            let back = CniResult::from_json(&printed, Version::V010).unwrap();
            assert_eq!(back.to_value(*v).unwrap(), printed, "version {v}");
        }
    }

    #[test]
    fn legacy_input_hoists_routes() {
        let v = json!({"cniVersion": "0.2.0", "ip4": {"ip": "10.1.0.5/16", "routes": [{"dst": "10.2.0.0/16", "gw": "10.1.0.1"}]}});
        let r = CniResult::from_json(&v, Version::V110).unwrap();
        assert_eq!(r.ips.len(), 1);
        assert_eq!(r.routes[0].dst.to_string(), "10.2.0.0/16");
        assert!(
            CniResult::from_json(&json!({"ips": [{"address": "bogus"}]}), Version::V100).is_err()
        );
    }
}
