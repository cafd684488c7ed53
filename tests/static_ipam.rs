//! The `static` IPAM applet end to end, compared with the reference plugin where installed.

mod common;
use common::family::{FAMILIES, assert_result_family, v4_subnet, v6_subnet};
use common::*;
use serde_json::{Value, json};

fn conf(ver: &str, extra: Value) -> Value {
    let mut c = json!({
        "cniVersion": ver, "name": "statnet", "type": "bridge",
        "ipam": {
            "type": "static",
            "addresses": [{"address": "10.20.0.5/24", "gateway": "10.20.0.1"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.20.0.53"]}
        }
    });
    if let (Some(c), Value::Object(e)) = (c.as_object_mut(), extra) {
        c.extend(e);
    }
    c
}

/// `address[ gw]` per result entry.
fn addrs(r: &Value) -> Vec<String> {
    r["ips"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| match i["gateway"].as_str() {
                    Some(g) => format!("{} gw {g}", i["address"].as_str().unwrap_or("?")),
                    None => i["address"].as_str().unwrap_or("?").to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Run ADD on ours and (if installed) the reference; assert both agree; return ours.
fn add_both(sb: &Sandbox, env: &Env, c: &Value) -> Output {
    let ours = sb.ours().add("static", env, c);
    let ver = c["cniVersion"].as_str().unwrap_or_default();
    if ver != "1.1.0" && reference_available("static") {
        let theirs = sb.reference().add("static", env, c);
        assert_eq!(
            ours.status_ok, theirs.status_ok,
            "{c}\nours: {ours:?}\nreference: {theirs:?}"
        );
        if ours.status_ok {
            assert_eq!(normalize(&ours.json), normalize(&theirs.json), "{c}");
        }
    }
    ours
}

#[test]
fn precedence_of_address_sources() {
    let sb = Sandbox::new("precedence");
    let env = sb.env();
    for ver in ["0.4.0", "1.0.0", "1.1.0"] {
        // Config only.
        let r = add_both(&sb, &env, &conf(ver, json!({})));
        assert_eq!(addrs(r.ok()), ["10.20.0.5/24 gw 10.20.0.1"]);
        assert_eq!(r.json["routes"], json!([{"dst": "0.0.0.0/0"}]));
        assert_eq!(r.json["dns"]["nameservers"], json!(["10.20.0.53"]));

        // CNI_ARGS IP is appended; GATEWAY goes to the CNI_ARGS addresses in its subnet.
        let e = env
            .clone()
            .with_args("IgnoreUnknown=1;K8S_POD_NAME=p;IP=10.21.0.5/16,fd00:21::5/64;GATEWAY=10.21.0.1,fd00:21::1");
        let r = add_both(&sb, &e, &conf(ver, json!({})));
        assert_eq!(
            addrs(r.ok()),
            [
                "10.20.0.5/24 gw 10.20.0.1",
                "10.21.0.5/16 gw 10.21.0.1",
                "fd00:21::5/64 gw fd00:21::1"
            ]
        );

        // args.cni.ips replaces everything (no gateways).
        let args = json!({"args": {"cni": {"ips": ["10.22.0.5/16", "fd00:22::5/64"]}}});
        let r = add_both(&sb, &e, &conf(ver, args.clone()));
        assert_eq!(addrs(r.ok()), ["10.22.0.5/16", "fd00:22::5/64"]);

        // runtimeConfig.ips wins over all of them.
        let mut both = args;
        both["runtimeConfig"] = json!({"ips": ["10.23.0.5/16"]});
        let r = add_both(&sb, &e, &conf(ver, both));
        assert_eq!(addrs(r.ok()), ["10.23.0.5/16"]);
    }
}

#[test]
fn legacy_versions_and_family_limits() {
    let sb = Sandbox::new("legacy");
    let env = sb.env();
    let r = add_both(&sb, &env, &conf("0.2.0", json!({})));
    assert_eq!(r.ok()["ip4"]["ip"], "10.20.0.5/24");
    let r = add_both(
        &sb,
        &env.clone().with_args("IP=fd00::5/64"),
        &conf("0.1.0", json!({})),
    );
    assert_eq!(r.ok()["ip6"]["ip"], "fd00::5/64");
    let r = add_both(
        &sb,
        &env.clone().with_args("IP=10.21.0.5/16"),
        &conf("0.2.0", json!({})),
    );
    assert!(r.err(7).contains("more than 1 address per family"));
    let r = add_both(
        &sb,
        &env.clone().with_args("IP=10.21.0.5/16"),
        &conf("0.3.0", json!({})),
    );
    assert_eq!(addrs(r.ok()).len(), 2);
}

#[test]
fn invalid_values_fail_like_the_reference_with_precise_codes() {
    let sb = Sandbox::new("invalid");
    let env = sb.env();
    let mut bad_addr = conf("1.0.0", json!({}));
    bad_addr["ipam"]["addresses"][0]["address"] = json!("10.0.0.300/24");
    let r = add_both(&sb, &env, &bad_addr);
    assert_eq!(
        r.err(7),
        "ipam.addresses: invalid address \"10.0.0.300/24\""
    );

    let r = add_both(
        &sb,
        &env.clone().with_args("IP=10.0.0.5"),
        &conf("1.0.0", json!({})),
    );
    assert_eq!(r.err(7), "CNI_ARGS IP: invalid address \"10.0.0.5\"");
    let r = add_both(
        &sb,
        &env.clone().with_args("IP=10.0.0.5/8;GATEWAY=x"),
        &conf("1.0.0", json!({})),
    );
    assert_eq!(r.err(7), "CNI_ARGS GATEWAY: invalid gateway \"x\"");
    let r = add_both(
        &sb,
        &env.clone().with_args("NOPE=1"),
        &conf("1.0.0", json!({})),
    );
    r.err(4);

    let mut no_ipam = conf("1.0.0", json!({}));
    no_ipam.as_object_mut().map(|o| o.remove("ipam"));
    let r = add_both(&sb, &env, &no_ipam);
    assert_eq!(r.err(7), "IPAM config missing 'ipam' key");
}

#[test]
fn del_is_a_no_op() {
    let sb = Sandbox::new("del");
    let mut weird = conf("1.0.0", json!({}));
    weird["ipam"]["addresses"][0]["address"] = json!("bogus");
    for c in [conf("1.0.0", json!({})), conf("0.2.0", json!({})), weird] {
        for imp in [Impl::Ours, Impl::Reference] {
            if imp == Impl::Reference && !reference_available("static") {
                continue;
            }
            let env = Env {
                netns: String::new(),
                ..sb.env()
            };
            let out = sb.plugin(imp).del("static", &env, &c);
            assert!(
                out.status_ok && out.stdout.trim().is_empty(),
                "{imp:?} {c}: {out:?}"
            );
        }
    }
}

/// How a case must fail: the CNI code and fragments of the message (None: it passes).
type Failure = Option<(u64, &'static [&'static str])>;

#[test]
fn check_against_prev_result() {
    let sb = Sandbox::new("check");
    let env = sb.env().with_args("IP=10.21.0.5/16;GATEWAY=10.21.0.1");
    for ver in ["0.4.0", "1.0.0", "1.1.0"] {
        let c = conf(ver, json!({}));
        let prev = sb.ours().add("static", &env, &c).ok().clone();
        let mut wrong_gw = prev.clone();
        wrong_gw["ips"][1]["gateway"] = json!("10.21.0.254");
        let mut no_gw = prev.clone();
        no_gw["ips"][0].as_object_mut().map(|o| o.remove("gateway"));
        // (case, input, None to pass or Some((code, fragments of the message)))
        let cases: [(&str, Value, Failure); 4] = [
            ("matching", with_prev(&c, &prev), None),
            (
                "wrong CNI_ARGS gateway",
                with_prev(&c, &wrong_gw),
                Some((999, &["10.21.0.254", "10.21.0.1"])),
            ),
            (
                "missing config gateway",
                with_prev(&c, &no_gw),
                Some((999, &["10.20.0.5", "gateway none", "expected 10.20.0.1"])),
            ),
            (
                "no prevResult",
                c.clone(),
                Some((7, &["required prevResult missing"])),
            ),
        ];
        for (what, input, fails) in cases {
            let ours = sb.ours().check("static", &env, &input);
            let pass = fails.is_none();
            match fails {
                None => assert!(ours.status_ok, "{ver} {what}: {ours:?}"),
                Some((code, fragments)) => {
                    let msg = ours.err(code);
                    for f in fragments {
                        assert!(msg.contains(f), "{ver} {what}: {f:?} not in {msg:?}");
                    }
                }
            }
            if ver != "1.1.0" && reference_available("static") {
                let theirs = sb.reference().check("static", &env, &input);
                assert_eq!(theirs.status_ok, pass, "{ver} {what}: reference {theirs:?}");
            }
        }
        let msg = sb
            .ours()
            .check("static", &env, &with_prev(&c, &wrong_gw))
            .err(999);
        assert!(
            msg.contains("10.21.0.5") && msg.contains("10.21.0.254") && msg.contains("eth0"),
            "{msg}"
        );
    }
}

#[test]
fn result_is_identical_through_symlink_and_cnibox_applet() {
    let sb = Sandbox::new("argv");
    let c = conf("1.1.0", json!({})).to_string();
    let via_link = sb.ours().run("static", "ADD", &sb.env(), &c);
    let path = sb.bin.display().to_string();
    let vars = [
        ("CNI_COMMAND", "ADD"),
        ("CNI_CONTAINERID", "cnibox-test-1"),
        ("CNI_NETNS", "/run/netns/cnibox-test-none"),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", path.as_str()),
    ];
    let direct = exec(&bin(), &["static"], &vars, &c);
    assert_eq!(via_link.stdout, direct.stdout);
    assert!(via_link.status_ok, "{via_link:?}");
}

#[test]
fn go_input_quirks_match_the_reference() {
    let sb = Sandbox::new("quirks");
    let mut c = conf("1.0.0", json!({}));
    c["ipam"]["addresses"] = json!([{"address": "::ffff:10.0.0.5/120", "gateway": "::ffff:10.0.0.1"}, {"address": "fd00::5/64", "gateway": ""}]);
    c["ipam"]["routes"] = json!([{"dst": "0.0.0.0/0", "gw": ""}]);
    let r = add_both(&sb, &sb.env(), &c);
    assert_eq!(addrs(r.ok()), ["10.0.0.5/24 gw 10.0.0.1", "fd00::5/64"]);
    // Whitespace is trimmed in CNI_ARGS lists, not in the config.
    let r = add_both(
        &sb,
        &sb.env().with_args("IP= 10.1.0.5/16 , 10.2.0.5/16"),
        &conf("1.0.0", json!({})),
    );
    assert_eq!(addrs(r.ok()).len(), 3);
    let mut c = conf("1.0.0", json!({}));
    c["ipam"]["addresses"][0]["address"] = json!(" 10.0.0.5/24");
    add_both(&sb, &sb.env(), &c).err(7);
}

/// An address whose gateway is of the other family is refused (code 7 naming the address;
/// the Go plugin returns it, and ptp panicked on it: issue 24, items 6 and 11); the same
/// addresses with gateways of their own family are returned as given.
#[test]
fn gateway_of_the_other_family_is_refused() {
    let sb = Sandbox::new("gwfam");
    let env = sb.env();
    for fam in FAMILIES {
        let n = lab::unique_n();
        // Host .5 / ::5 of the lab's subnets, gateways .1 / ::1 of the own or the other family.
        let in_subnet = |subnet: String, host: &str| {
            let (net, len) = subnet.split_once('/').unwrap();
            let addr = match net.strip_suffix(".0") {
                Some(v4) => format!("{v4}.{host}"),
                None => format!("{net}{host}"),
            };
            (addr, len.to_string())
        };
        let mut own = Vec::new();
        if fam.has_v4() {
            let (a, len) = in_subnet(v4_subnet(n), "5");
            own.push(format!("{a}/{len}"));
        }
        if fam.has_v6() {
            let (a, len) = in_subnet(v6_subnet(n), "5");
            own.push(format!("{a}/{len}"));
        }
        let gw = |v4: bool| in_subnet(if v4 { v4_subnet(n) } else { v6_subnet(n) }, "1").0;
        let addresses = |swap: Option<usize>| -> Value {
            own.iter()
                .enumerate()
                .map(|(i, a)| {
                    let v4 = a.contains('.');
                    json!({"address": a, "gateway": gw(if swap == Some(i) { !v4 } else { v4 })})
                })
                .collect()
        };
        for (bad, bad_addr) in own.iter().enumerate() {
            let mut c = conf("1.0.0", json!({}));
            c["ipam"]["addresses"] = addresses(Some(bad));
            c["ipam"]["routes"] = json!([]);
            let msg = sb.ours().add("static", &env, &c).err(7);
            assert!(
                msg.contains("ipam.addresses")
                    && msg.contains(bad_addr.as_str())
                    && msg.contains("other address family"),
                "{}: {msg}",
                fam.tag()
            );
        }
        let mut c = conf("1.0.0", json!({}));
        c["ipam"]["addresses"] = addresses(None);
        c["ipam"]["routes"] = json!([]);
        let r = add_both(&sb, &env, &c).ok().clone();
        assert_result_family(&r, fam);
        let want: Vec<String> = own
            .iter()
            .map(|a| format!("{a} gw {}", gw(a.contains('.'))))
            .collect();
        assert_eq!(addrs(&r), want, "{}", fam.tag());
    }
}
