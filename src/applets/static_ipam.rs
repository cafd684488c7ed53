//! `static` IPAM: returns the addresses, routes and DNS it is given; keeps no state.
//!
//! Addresses come from `ipam.addresses`, then CNI_ARGS `IP` (appended; CNI_ARGS `GATEWAY`
//! sets the gateway of each of those whose subnet contains it — like upstream, it does not touch
//! `ipam.addresses`), then `args.cni.ips` (replaces the list), then `runtimeConfig.ips`
//! (replaces, highest priority). Replaced entries are not validated, as upstream.
//! Bad values are config errors (code 7) naming the value and where it came from.

use crate::cni::error::code;
use crate::cni::gojson;
use crate::cni::result::{Dns, IpConfig, Route};
use crate::cni::{Applet, CniResult, CodeContext, Error, Request, Result, Version};
use ipnet::{IpNet, Ipv4Net};
use serde::Deserialize;
use serde_json::Value;
use std::net::IpAddr;

pub static APPLET: Applet = Applet {
    name: "static",
    versions: Version::ALL,
    add,
    del,
    check,
    status: None,
    gc: None,
};

#[derive(Deserialize)]
struct Conf {
    #[serde(default)]
    ipam: Option<IpamConf>,
}

#[derive(Deserialize)]
struct IpamConf {
    #[serde(default)]
    addresses: Option<Vec<AddrConf>>,
    #[serde(default)]
    routes: Option<Vec<Value>>,
    #[serde(default)]
    dns: Option<Value>,
}

#[derive(Deserialize)]
struct AddrConf {
    #[serde(default)]
    address: String,
    #[serde(default)]
    gateway: Option<String>,
}

const CIDR_HINT: &str = "expected CIDR notation such as 10.1.2.3/24 or fd00::3/64";

/// Parse a CIDR keeping the host bits; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d/120`)
/// becomes plain IPv4 (`a.b.c.d/24`) as Go's canonicalisation makes it.
fn cidr(s: &str, src: &str) -> Result<IpNet> {
    if s.is_empty() {
        return Err(Error::config(format!("{src}: missing address")));
    }
    let n: IpNet = s.parse().map_err(|_| {
        Error::config(format!("{src}: invalid address {s:?}")).with_details(CIDR_HINT)
    })?;
    Ok(match n {
        IpNet::V6(v6) => match (v6.addr().to_ipv4_mapped(), v6.prefix_len().checked_sub(96)) {
            (Some(a), Some(p)) => Ipv4Net::new(a, p).map_or(n, IpNet::V4),
            _ => n,
        },
        v4 => v4,
    })
}

fn ip(s: &str, src: &str) -> Result<IpAddr> {
    s.parse().map(|a: IpAddr| a.to_canonical()).map_err(|_| {
        Error::config(format!("{src}: invalid gateway {s:?}")).with_details("not an IP address")
    })
}

/// A list of address strings from `args.cni.ips` / `runtimeConfig.ips`; `None` if absent or empty.
fn ip_list(v: Option<&Value>, src: &'static str) -> Result<Option<Vec<Entry>>> {
    let Some(v) = v else { return Ok(None) };
    let list = gojson::from_value::<Vec<String>>(v)
        .ctx_code(code::INVALID_CONFIG, format_args!("invalid {src}"))?;
    Ok((!list.is_empty()).then(|| list.into_iter().map(|a| (a, None, src)).collect()))
}

/// Address (unparsed), gateway, where it came from.
type Entry = (String, Option<IpAddr>, &'static str);

/// The result the config and arguments describe (ADD prints it, CHECK compares with it).
fn load(req: &Request) -> Result<CniResult> {
    let ipam = req
        .decode::<Conf>()?
        .ipam
        .ok_or_else(|| Error::config("IPAM config missing 'ipam' key"))?;
    let mut list: Vec<Entry> = Vec::new();
    for a in ipam.addresses.unwrap_or_default() {
        let gw = match a.gateway.as_deref() {
            None | Some("") => None,
            Some(g) => Some(ip(g, "ipam.addresses")?),
        };
        list.push((a.address, gw, "ipam.addresses"));
    }
    let args = req.env.cni_args(&["IP", "GATEWAY"])?;
    let items = |k| {
        args.get(k)
            .filter(|s| !s.is_empty())
            .into_iter()
            .flat_map(|s| s.split(','))
    };
    let nets = items("IP")
        .map(|s| cidr(s.trim(), "CNI_ARGS IP"))
        .collect::<Result<Vec<_>>>()?;
    let gws = items("GATEWAY")
        .map(|s| ip(s.trim(), "CNI_ARGS GATEWAY"))
        .collect::<Result<Vec<_>>>()?;
    for n in nets {
        // The last GATEWAY inside the subnet wins, as upstream applies them in order.
        let gw = gws.iter().rev().find(|g| n.contains(*g)).copied();
        list.push((n.to_string(), gw, "CNI_ARGS IP"));
    }
    if let Some(l) = ip_list(req.args_cni("ips"), "args.cni.ips")? {
        list = l;
    }
    if let Some(l) = ip_list(req.runtime_config("ips"), "runtimeConfig.ips")? {
        list = l;
    }
    let mut r = CniResult::default();
    for (a, gateway, src) in list {
        let address = cidr(&a, src)?;
        // Beyond upstream, which returns it: no route can use a gateway of the other family.
        if let Some(g) = gateway.filter(|g| g.is_ipv4() != address.addr().is_ipv4()) {
            return Err(Error::config(format!(
                "{src}: address {a:?} has gateway {g} of the other address family"
            )));
        }
        r.ips.push(IpConfig {
            version: None,
            interface: None,
            address,
            gateway,
        });
    }
    let fam = |v4: bool| {
        r.ips
            .iter()
            .filter(|i| i.address.addr().is_ipv4() == v4)
            .count()
    };
    if req.version.is_legacy() && (fam(true) > 1 || fam(false) > 1) {
        return Err(Error::config(format!(
            "CNI version {} does not support more than 1 address per family",
            req.version
        )));
    }
    for mut v in ipam.routes.unwrap_or_default() {
        // Go reads `"gw": ""` as no gateway.
        if let Some(obj) = v.as_object_mut() {
            for (_, g) in obj
                .iter_mut()
                .filter(|(k, g)| gojson::fold_eq(k, "gw") && *g == "")
            {
                *g = Value::Null;
            }
        }
        let rt = gojson::from_value::<Route>(&v).map_err(|e| {
            Error::config(format!("invalid route {v}")).with_details(format!("ipam.routes: {e}"))
        })?;
        r.routes.push(rt);
    }
    if let Some(d) = ipam.dns.filter(|d| !d.is_null()) {
        r.dns = gojson::from_value::<Dns>(&d).ctx_code(code::INVALID_CONFIG, "invalid ipam.dns")?;
    }
    Ok(r)
}

fn add(req: &Request) -> Result<CniResult> {
    load(req)
}

/// Nothing was allocated, so there is nothing to release (the config is not even read).
fn del(_: &Request) -> Result<()> {
    Ok(())
}

/// As upstream: every configured address that prevResult carries must have the configured
/// gateway (if one is configured). Addresses absent from prevResult are not an error.
fn check(req: &Request) -> Result<()> {
    let want = load(req)?;
    let prev = req
        .prev_result()?
        .ok_or_else(|| Error::config("required prevResult missing"))?;
    for w in &want.ips {
        let Some(p) = prev
            .ips
            .iter()
            .find(|p| p.address.addr() == w.address.addr())
        else {
            continue;
        };
        if w.gateway.is_some() && w.gateway != p.gateway {
            let got = p.gateway.map_or("none".to_string(), |g| g.to_string());
            return Err(Error::new(
                code::INTERNAL,
                format!(
                    "static: address {} on {} has gateway {got} in prevResult, expected {}",
                    w.address.addr(),
                    req.env.ifname,
                    w.gateway.map_or(String::new(), |g| g.to_string())
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cni::config::NetConf;
    use crate::cni::env::{Command, Env};
    use serde_json::json;

    fn req(cmd: Command, args: &str, conf: Value) -> Request {
        let version = Version::parse(conf["cniVersion"].as_str().unwrap_or("")).unwrap();
        Request {
            env: Env {
                command: cmd,
                container_id: "c1".into(),
                netns: "/run/netns/x".into(),
                ifname: "eth0".into(),
                args: args.into(),
                path: "/opt/cni/bin".into(),
            },
            stdin: conf.to_string().into_bytes(),
            applets: crate::applets::TABLE,
            conf: NetConf::deserialize(&conf).unwrap(),
            raw: conf,
            version,
        }
    }

    fn conf(ver: &str, extra: Value) -> Value {
        let mut c = json!({"cniVersion": ver, "name": "n", "type": "static", "ipam": {
            "type": "static",
            "addresses": [{"address": "10.0.0.5/24", "gateway": "10.0.0.1"}, {"address": "fd00::5/64"}],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.0.0.1"}],
            "dns": {"nameservers": ["10.0.0.53"], "search": ["example.org"]}
        }});
        if let (Some(c), Value::Object(e)) = (c.as_object_mut(), extra) {
            c.extend(e);
        }
        c
    }

    fn addrs(r: &CniResult) -> Vec<String> {
        r.ips
            .iter()
            .map(|i| match i.gateway {
                Some(g) => format!("{} gw {g}", i.address),
                None => i.address.to_string(),
            })
            .collect()
    }

    fn load_of(ver: &str, args: &str, extra: Value) -> Result<CniResult> {
        load(&req(Command::Add, args, conf(ver, extra)))
    }

    #[test]
    fn config_only() {
        let r = load_of("1.0.0", "", json!({})).unwrap();
        assert_eq!(addrs(&r), ["10.0.0.5/24 gw 10.0.0.1", "fd00::5/64"]);
        assert_eq!(r.routes[0].dst.to_string(), "0.0.0.0/0");
        assert_eq!(r.dns.search, ["example.org"]);
        assert!(r.ips.iter().all(|i| i.interface.is_none()));
    }

    #[test]
    fn cni_args_append_and_gateway_applies_to_their_subnets() {
        let r = load_of(
            "1.0.0",
            "IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.1.0.5/16, 10.2.0.5/16;GATEWAY=10.1.0.1,10.0.0.9,10.1.0.254",
            json!({}),
        )
        .unwrap();
        assert_eq!(
            addrs(&r),
            [
                "10.0.0.5/24 gw 10.0.0.1",
                "fd00::5/64",
                "10.1.0.5/16 gw 10.1.0.254",
                "10.2.0.5/16"
            ]
        );
    }

    #[test]
    fn unknown_cni_args_need_ignore_unknown() {
        let e = load_of("1.0.0", "FOO=1", json!({})).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENV);
        assert!(load_of("1.0.0", "IgnoreUnknown=true;FOO=1", json!({})).is_ok());
    }

    #[test]
    fn args_then_runtime_config_replace() {
        let args = json!({"args": {"cni": {"ips": ["10.9.0.1/16"]}}});
        let r = load_of("1.0.0", "IP=10.1.0.5/16;GATEWAY=10.9.0.254", args.clone()).unwrap();
        assert_eq!(addrs(&r), ["10.9.0.1/16"]);
        let mut both = args;
        both["runtimeConfig"] = json!({"ips": ["10.8.0.1/16", "fd01::1/64"]});
        let r = load_of("1.0.0", "", both).unwrap();
        assert_eq!(addrs(&r), ["10.8.0.1/16", "fd01::1/64"]);
        // Empty lists and nulls do not replace.
        let r = load_of(
            "1.0.0",
            "",
            json!({"runtimeConfig": {"ips": []}, "args": {"cni": {"ips": null}}}),
        )
        .unwrap();
        assert_eq!(r.ips.len(), 2);
    }

    #[test]
    fn replaced_addresses_are_not_validated() {
        let mut c = conf("1.0.0", json!({"runtimeConfig": {"ips": ["10.8.0.1/16"]}}));
        c["ipam"]["addresses"] = json!([{"address": "bogus"}]);
        assert!(load(&req(Command::Add, "", c)).is_ok());
    }

    #[test]
    fn legacy_versions_allow_one_address_per_family() {
        assert!(load_of("0.2.0", "", json!({})).is_ok());
        let e = load_of("0.2.0", "IP=10.1.0.5/16", json!({})).unwrap_err();
        assert_eq!(e.code, code::INVALID_CONFIG);
        assert_eq!(
            e.msg,
            "CNI version 0.2.0 does not support more than 1 address per family"
        );
        assert!(load_of("0.3.0", "IP=10.1.0.5/16", json!({})).is_ok());
    }

    #[test]
    fn bad_values_are_config_errors_naming_the_value() {
        let bad = |f: &dyn Fn(&mut Value), args: &str| {
            let mut c = conf("1.0.0", json!({}));
            f(&mut c);
            load(&req(Command::Add, args, c)).unwrap_err()
        };
        let e = bad(
            &|c| c["ipam"]["addresses"][0]["address"] = json!("10.0.0.300/24"),
            "",
        );
        assert_eq!(
            (e.code, e.msg.as_str()),
            (7, "ipam.addresses: invalid address \"10.0.0.300/24\"")
        );
        let e = bad(
            &|c| c["ipam"]["addresses"][0]["address"] = json!("10.0.0.3"),
            "",
        );
        assert_eq!(e.msg, "ipam.addresses: invalid address \"10.0.0.3\"");
        let e = bad(
            &|c| c["ipam"]["addresses"][0] = json!({"gateway": "10.0.0.1"}),
            "",
        );
        assert_eq!(e.msg, "ipam.addresses: missing address");
        let e = bad(&|c| c["ipam"]["addresses"][0]["gateway"] = json!("x"), "");
        assert_eq!(
            (e.code, e.msg.as_str()),
            (7, "ipam.addresses: invalid gateway \"x\"")
        );
        let e = bad(&|_| {}, "IP=1.2.3.4");
        assert_eq!(e.msg, "CNI_ARGS IP: invalid address \"1.2.3.4\"");
        let e = bad(&|_| {}, "GATEWAY=nope");
        assert_eq!(e.msg, "CNI_ARGS GATEWAY: invalid gateway \"nope\"");
        let e = bad(
            &|c| c["ipam"]["routes"] = json!([{"dst": "10.0.0.0/33"}]),
            "",
        );
        assert_eq!(e.code, 7);
        assert!(e.msg.starts_with("invalid route"), "{}", e.msg);
        let e = bad(&|c| c["runtimeConfig"] = json!({"ips": ["10.1.1.1"]}), "");
        assert!(e.msg.starts_with("runtimeConfig.ips"), "{}", e.msg);
        let e = bad(&|c| c["runtimeConfig"] = json!({"ips": "10.1.1.1/8"}), "");
        assert_eq!(e.code, 7);
        let e = bad(&|c| c["ipam"]["dns"] = json!({"nameservers": "x"}), "");
        assert_eq!(e.code, 7);
        let e = bad(&|c| _ = c.as_object_mut().map(|o| o.remove("ipam")), "");
        assert_eq!(e.msg, "IPAM config missing 'ipam' key");
    }

    #[test]
    fn go_compatible_input_quirks() {
        let mut c = conf("1.0.0", json!({}));
        c["ipam"]["addresses"] =
            json!([{"address": "::ffff:10.0.0.5/120", "gateway": "::ffff:10.0.0.1"}]);
        c["ipam"]["routes"] = json!([{"dst": "0.0.0.0/0", "gw": ""}]);
        let r = load(&req(Command::Add, "", c)).unwrap();
        assert_eq!(addrs(&r), ["10.0.0.5/24 gw 10.0.0.1"]);
        assert_eq!(r.routes[0].gw, None);
    }

    #[test]
    fn check_compares_gateways_like_upstream() {
        let run = |prev: Value| {
            let c = conf("1.0.0", json!({ "prevResult": prev }));
            check(&req(Command::Check, "", c))
        };
        let ok = json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.5/24", "gateway": "10.0.0.1"}, {"address": "fd00::5/64"}]});
        assert!(run(ok).is_ok());
        let e = run(json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.5/24", "gateway": "10.0.0.2"}]})).unwrap_err();
        assert!(
            e.msg.contains("10.0.0.5") && e.msg.contains("10.0.0.2"),
            "{}",
            e.msg
        );
        assert!(run(json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.5/24"}]})).is_err());
        // Upstream tolerates addresses missing from prevResult.
        assert!(run(json!({"cniVersion": "1.0.0", "ips": [{"address": "10.0.0.6/24"}]})).is_ok());
        let c = conf("1.0.0", json!({}));
        assert_eq!(
            check(&req(Command::Check, "", c)).unwrap_err().msg,
            "required prevResult missing"
        );
    }

    #[test]
    fn result_prints_in_every_version() {
        let r = load_of("1.0.0", "", json!({})).unwrap();
        let v = r.to_value(Version::V040).unwrap();
        assert_eq!(
            v["ips"][0],
            json!({"version": "4", "address": "10.0.0.5/24", "gateway": "10.0.0.1"})
        );
        let v = r.to_value(Version::V020).unwrap();
        assert_eq!(v["ip4"]["routes"][0]["dst"], "0.0.0.0/0");
        assert_eq!(v["ip6"]["ip"], "fd00::5/64");
    }
}
