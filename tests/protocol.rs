//! Generic protocol behaviour of the built binary (through the `static` applet, which needs no
//! privileges), checked against the spec and, where it exists, the reference Go plugin.

mod common;
use common::*;
use serde_json::{Value, json};

fn conf(ver: &str) -> Value {
    json!({
        "cniVersion": ver, "name": "testnet", "type": "static",
        "ipam": {
            "type": "static",
            "addresses": [
                {"address": "10.10.0.5/24", "gateway": "10.10.0.1"},
                {"address": "fd00:10::5/64", "gateway": "fd00:10::1"}
            ],
            "routes": [{"dst": "0.0.0.0/0", "gw": "10.10.0.1"}, {"dst": "fd00:99::/64"}],
            "dns": {"nameservers": ["10.10.0.53"], "domain": "example.org", "search": ["example.org"]}
        }
    })
}

#[test]
fn version_answers_for_every_spec_version() {
    let sb = Sandbox::new("version");
    let want = json!({"cniVersion": "1.1.0", "supportedVersions": ALL_VERSIONS});
    // SPEC.md: the answer's cniVersion is "the value of cniVersion specified on input" (the Go
    // skel prints its own latest instead); an unknown or missing one gets our latest.
    for v in ALL_VERSIONS.iter().chain(&["9.9.9", ""]) {
        let out = sb.ours().run(
            "static",
            "VERSION",
            &sb.env(),
            &json!({"cniVersion": v}).to_string(),
        );
        let echoed = if ALL_VERSIONS.contains(v) {
            *v
        } else {
            "1.1.0"
        };
        let want = json!({"cniVersion": echoed, "supportedVersions": ALL_VERSIONS});
        assert_eq!(out.ok(), &want, "input {v}");
        assert!(out.stdout.ends_with('\n'));
    }
    // VERSION needs no other variable and ignores input it cannot read.
    let bare = Env {
        container_id: String::new(),
        netns: String::new(),
        ifname: String::new(),
        ..sb.env()
    };
    assert_eq!(
        sb.ours().run("static", "VERSION", &bare, "not json").ok(),
        &want
    );
    // `cnibox static` behaves like the symlink.
    let out = exec(&bin(), &["static"], &[("CNI_COMMAND", "VERSION")], "");
    assert_eq!(out.ok(), &want);
}

#[test]
fn about_banner_without_cni_command() {
    let sb = Sandbox::new("about");
    let out = sb.ours().run("static", "", &sb.env(), "");
    assert!(out.status_ok, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("CNI static plugin v1."), "{out:?}");
    assert!(
        out.stderr.contains(
            "CNI protocol versions supported: 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0"
        ),
        "{out:?}"
    );
}

#[test]
fn multi_call_options() {
    let out = cnibox(&["--list"]);
    assert!(out.status_ok, "{out:?}");
    assert!(out.stdout.lines().any(|l| l == "static"), "{out:?}");
    let out = cnibox(&["--version"]);
    assert!(
        out.status_ok && out.stdout.starts_with("cnibox "),
        "{out:?}"
    );
    assert!(out.stdout.contains("1.1.0"), "{out:?}");
    // The build's identity: the commit of this checkout, `-dirty` when tracked files differ.
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("git");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let head = git(&["rev-parse", "--short=12", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
    let want = format!("(commit {head}{};", if dirty { "-dirty" } else { "" });
    assert!(out.stdout.contains(&want), "want {want}: {out:?}");
    let out = cnibox(&["--help"]);
    assert!(out.status_ok && out.stdout.contains("usage"), "{out:?}");
    let out = cnibox(&[]);
    assert!(!out.status_ok && out.stderr.contains("usage"), "{out:?}");
    // An option that does not exist is reported as one, not as an applet named `--bogus`.
    let out = cnibox(&["--bogus"]);
    assert!(!out.status_ok, "{out:?}");
    assert!(
        out.stderr.contains("unknown option \"--bogus\"") && !out.stderr.contains("applet \""),
        "{out:?}"
    );
}

/// nerdctl decides whether `ingressPolicy: isolated` can be used by running `firewall` without
/// `CNI_COMMAND` and parsing the rest of the stderr line `CNI firewall plugin ` as semver, which
/// must be at least 1.1.0 (`FirewallPluginGEQVersion`). Parse it the same way here.
#[test]
fn firewall_banner_satisfies_nerdctl() {
    let sb = Sandbox::new("banner_nerdctl");
    let out = sb.ours().run("firewall", "", &sb.env(), "");
    assert!(out.status_ok && out.stdout.is_empty(), "{out:?}");
    let line = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("CNI firewall plugin "))
        .unwrap_or_else(|| panic!("no banner line: {out:?}"));
    let ver = line.strip_prefix('v').unwrap_or(line);
    let (core, build) = ver.split_once('+').unwrap_or((ver, ""));
    let nums: Vec<u64> = core
        .split('.')
        .map(|n| n.parse().unwrap_or_else(|_| panic!("not semver: {line:?}")))
        .collect();
    assert_eq!(nums.len(), 3, "not semver: {line:?}");
    assert!(nums >= vec![1, 1, 0], "{line:?} is below v1.1.0");
    // cnibox's own version stays visible, as semver build metadata.
    assert!(build.starts_with("cnibox."), "{line:?}");
    assert!(
        build
            .split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')),
        "bad build metadata in {line:?}"
    );
}

#[test]
fn unknown_applet_is_rejected() {
    let sb = Sandbox::new("unknown_applet");
    let link = sb.link("nosuch");
    let out = exec(&link, &[], &[("CNI_COMMAND", "VERSION")], "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("unknown applet \"nosuch\""), "{out:?}");
    let out = cnibox(&["nosuch"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("unknown applet \"nosuch\""), "{out:?}");
}

#[test]
fn malformed_inputs_give_error_json() {
    let sb = Sandbox::new("malformed");
    let good = conf("1.0.0");
    let set = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c.to_string()
    };
    let without = |k: &str| {
        let mut c = good.clone();
        c.as_object_mut().map(|o| o.remove(k));
        c.to_string()
    };
    let env = sb.env();
    let cases: Vec<(&str, &str, Env, String, u64, &str)> = vec![
        ("bad JSON", "ADD", env.clone(), "{nope".into(), 6, ""),
        (
            "JSON not an object",
            "ADD",
            env.clone(),
            "[1]".into(),
            6,
            "",
        ),
        (
            "missing name",
            "ADD",
            env.clone(),
            without("name"),
            7,
            "missing network name",
        ),
        (
            "missing type",
            "ADD",
            env.clone(),
            without("type"),
            7,
            "type",
        ),
        (
            "unknown cniVersion",
            "ADD",
            env.clone(),
            set("cniVersion", json!("9.9.9")),
            1,
            "",
        ),
        (
            "network name ../x",
            "ADD",
            env.clone(),
            set("name", json!("../x")),
            7,
            "network name",
        ),
        (
            "network name on DEL",
            "DEL",
            env.clone(),
            set("name", json!("a/b")),
            7,
            "network name",
        ),
        (
            "bad container ID",
            "ADD",
            Env {
                container_id: "-bad".into(),
                ..env.clone()
            },
            good.to_string(),
            4,
            "containerID",
        ),
        (
            "bad ifname",
            "ADD",
            Env {
                ifname: "a/b".into(),
                ..env.clone()
            },
            good.to_string(),
            4,
            "interface name",
        ),
        (
            "ifname too long",
            "ADD",
            Env {
                ifname: "0123456789abcdef".into(),
                ..env.clone()
            },
            good.to_string(),
            4,
            "interface name",
        ),
        (
            "no CNI_NETNS on ADD",
            "ADD",
            Env {
                netns: String::new(),
                ..env.clone()
            },
            good.to_string(),
            4,
            "CNI_NETNS",
        ),
        (
            "no CNI_CONTAINERID on DEL",
            "DEL",
            Env {
                container_id: String::new(),
                ..env.clone()
            },
            good.to_string(),
            4,
            "CNI_CONTAINERID",
        ),
        (
            "no CNI_PATH on GC",
            "GC",
            Env {
                path: Some(String::new()),
                ..env.clone()
            },
            good.to_string(),
            4,
            "CNI_PATH",
        ),
        (
            "unknown CNI_COMMAND",
            "FOO",
            env.clone(),
            good.to_string(),
            4,
            "FOO",
        ),
        (
            "CHECK below 0.4.0",
            "CHECK",
            env.clone(),
            conf("0.3.1").to_string(),
            1,
            "CHECK",
        ),
        (
            "GC below 1.1.0",
            "GC",
            env.clone(),
            good.to_string(),
            1,
            "GC",
        ),
        (
            "STATUS below 1.1.0",
            "STATUS",
            env.clone(),
            good.to_string(),
            1,
            "STATUS",
        ),
        (
            "bad CNI_ARGS",
            "ADD",
            env.clone().with_args("FOO=1"),
            good.to_string(),
            4,
            "FOO",
        ),
    ];
    for (what, cmd, env, stdin, code, msg) in cases {
        let out = sb.ours().run("static", cmd, &env, &stdin);
        assert!(!out.status_ok, "{what}: {out:?}");
        assert_eq!(out.err_code(), Some(code), "{what}: {out:?}");
        let m = out.json["msg"].as_str().unwrap_or_default();
        assert!(!m.is_empty() && m.contains(msg), "{what}: {out:?}");
        assert!(out.json["cniVersion"].is_string(), "{what}: {out:?}");
        // The reference fails too (its codes are often 999 where ours are precise).
        if what != "missing type" && reference_available("static") {
            let theirs = sb.reference().run("static", cmd, &env, &stdin);
            let skip = matches!(what, "GC below 1.1.0" | "STATUS below 1.1.0"); // v1.1.1 lacks them
            assert!(
                skip || !theirs.status_ok,
                "{what}: reference succeeded: {theirs:?}"
            );
        }
    }
}

#[test]
fn results_have_the_shape_of_each_spec_version() {
    let sb = Sandbox::new("shapes");
    for v in ALL_VERSIONS {
        let out = sb.ours().add("static", &sb.env(), &conf(v));
        if *v < "0.3.0" {
            // Two addresses of one family would be refused; one per family converts.
            let r = out.ok();
            assert_eq!(r["cniVersion"], *v);
            assert_eq!(
                r["ip4"],
                json!({"ip": "10.10.0.5/24", "gateway": "10.10.0.1",
                "routes": [{"dst": "0.0.0.0/0", "gw": "10.10.0.1"}]}),
                "{v}"
            );
            assert_eq!(
                r["ip6"],
                json!({"ip": "fd00:10::5/64", "gateway": "fd00:10::1",
                "routes": [{"dst": "fd00:99::/64"}]}),
                "{v}"
            );
            assert!(r.get("ips").is_none() && r.get("routes").is_none(), "{v}");
            assert_eq!(r["dns"]["domain"], "example.org");
        } else {
            let r = out.ok();
            assert_eq!(r["cniVersion"], *v);
            assert!(r.get("interfaces").is_none(), "{v}");
            let ips = r["ips"].as_array().expect("ips");
            assert_eq!(ips.len(), 2);
            for ip in ips {
                assert!(ip.get("interface").is_none(), "{v}");
                assert_eq!(ip.get("version").is_some(), *v < "1.0.0", "{v}: {ip}");
            }
            assert_eq!(ips[0]["address"], "10.10.0.5/24");
            assert_eq!(r["routes"][1], json!({"dst": "fd00:99::/64"}));
            assert_eq!(r["dns"]["nameservers"], json!(["10.10.0.53"]));
            if *v < "0.4.0" {
                assert_eq!(ips[1]["version"], "6");
            }
        }
    }
}

#[test]
fn results_match_the_reference_for_every_version_it_supports() {
    if !reference_available("static") {
        return;
    }
    let sb = Sandbox::new("results_vs_reference");
    let theirs = sb.reference().versions("static");
    assert!(!theirs.is_empty());
    let mut compared = 0;
    for v in ALL_VERSIONS
        .iter()
        .filter(|v| theirs.iter().any(|t| t == *v))
    {
        for c in [
            conf(v),
            json!({"cniVersion": v, "name": "n", "type": "static", "ipam": {"type": "static"}}),
        ] {
            let a = sb.ours().add("static", &sb.env(), &c);
            let b = sb.reference().add("static", &sb.env(), &c);
            assert_eq!(
                a.status_ok, b.status_ok,
                "{v} {c}\nours: {a:?}\nreference: {b:?}"
            );
            if a.status_ok {
                assert_eq!(normalize(&a.json), normalize(&b.json), "{v} {c}");
                // Byte for byte: key order, indentation, what is left out when empty.
                assert_eq!(a.stdout, b.stdout, "{v} {c}: printed text differs");
                compared += 1;
            }
        }
    }
    assert!(compared >= 6, "compared only {compared}");
}

#[test]
fn del_status_gc_print_nothing() {
    let sb = Sandbox::new("quiet_verbs");
    let p = sb.ours();
    for out in [
        p.del("static", &sb.env(), &conf("1.1.0")),
        p.del(
            "static",
            &Env {
                netns: String::new(),
                ..sb.env()
            },
            &conf("0.1.0"),
        ),
        p.status("static", &conf("1.1.0")),
        p.gc(
            "static",
            &json!({"cniVersion": "1.1.0", "name": "n", "type": "static",
            "cni.dev/valid-attachments": [{"containerID": "x", "ifname": "eth0"}]}),
        ),
    ] {
        assert!(out.status_ok && out.stdout.is_empty(), "{out:?}");
    }
}

#[test]
fn errors_carry_the_request_version() {
    let sb = Sandbox::new("err_version");
    let mut c = conf("0.4.0");
    c["ipam"]["addresses"][0]["address"] = json!("10.0.0.300/24");
    let out = sb.ours().add("static", &sb.env(), &c);
    assert_eq!(
        out.err(7),
        "ipam.addresses: invalid address \"10.0.0.300/24\""
    );
    assert_eq!(out.json["cniVersion"], "0.4.0");
    // The key is named in the message; the details say what an address looks like.
    assert!(
        out.json["details"]
            .as_str()
            .is_some_and(|d| d.contains("CIDR notation")),
        "{out:?}"
    );
}

#[test]
fn harness_netns_guard_creates_and_removes() {
    if !require_root("harness_netns_guard_creates_and_removes") {
        return;
    }
    let sb = Sandbox::new("netns_guard");
    let name = {
        let ns = NetNs::create();
        assert!(ns.sh(&["ip", "-o", "link", "show", "lo"]).contains("lo"));
        let out = sb
            .ours()
            .add("static", &sb.env().with_netns(&ns.path()), &conf("1.0.0"));
        out.ok();
        ns.name.clone()
    };
    assert!(!std::path::Path::new(&format!("/run/netns/{name}")).exists());
}

/// `ipam.type` naming a main plugin must not recurse (it overflowed the stack: SIGSEGV): every
/// verb answers with a CNI error JSON, exit 1, no signal.
#[test]
fn ipam_type_naming_a_main_plugin_is_a_config_error() {
    let sb = Sandbox::new("ipam-loop");
    for (main, ipam) in [("bridge", "bridge"), ("bridge", "vlan"), ("vlan", "bridge")] {
        let conf = json!({"cniVersion": "1.1.0", "name": "n", "type": main, "bridge": "brloop0",
            "master": "eth0", "ipam": {"type": ipam}});
        for cmd in ["ADD", "DEL", "CHECK", "STATUS", "GC"] {
            let env = Env {
                netns: String::new(),
                ..sb.env()
            };
            let out = sb.ours().cmd(main, cmd, &env, &conf);
            assert!(out.code.is_some(), "{main}/{ipam} {cmd}: {out:?}");
            assert!(!out.status_ok, "{main}/{ipam} {cmd}: {out:?}");
            let code = out.err_code();
            assert!(
                code.is_some() && out.json["msg"].is_string(),
                "{main}/{ipam} {cmd}: no error JSON: {out:?}"
            );
            if code == Some(7) {
                assert!(out.json["msg"].as_str().unwrap().contains(ipam), "{out:?}");
            }
        }
    }
}

/// A loop through exec'd plugins (here a script IPAM plugin that runs cnibox's bridge again)
/// ends with a CNI error once delegation is nested too deep, instead of forking forever.
#[test]
fn delegation_depth_is_bounded_across_exec() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new("ipam-depth");
    let dir = sb.path("loopdir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(bin(), dir.join("bridge")).unwrap();
    let script = dir.join("loop");
    std::fs::write(&script, "#!/bin/sh\nexec \"$(dirname \"$0\")/bridge\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "bridge", "bridge": "brloop1",
        "ipam": {"type": "loop"}});
    let env = Env {
        netns: String::new(),
        path: Some(dir.display().to_string()),
        ..sb.env()
    };
    let vars = [
        ("CNI_COMMAND", "DEL"),
        ("CNI_CONTAINERID", env.container_id.as_str()),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", env.path.as_deref().unwrap()),
    ];
    let out = exec(&dir.join("bridge"), &[], &vars, &conf.to_string());
    assert!(out.code.is_some(), "{out:?}");
    let msg = out.err(7);
    assert!(msg.contains("nested more than"), "{msg}");
}

/// Plugins that delegate nothing need no CNI_PATH (SPEC.md lists it as optional for ADD, DEL,
/// CHECK and STATUS); a plugin that must find its IPAM plugin says CNI_PATH is missing.
#[test]
fn cni_path_only_when_needed() {
    let sb = Sandbox::new("no-cni-path");
    let env = Env {
        path: Some(String::new()),
        ..sb.env()
    };
    let conf = json!({"cniVersion": "1.1.0", "name": "n", "type": "static",
        "ipam": {"type": "static", "addresses": [{"address": "10.9.9.9/24"}]}});
    let out = sb.ours().add("static", &env, &conf);
    assert_eq!(out.ok()["ips"][0]["address"], "10.9.9.9/24");
    assert!(sb.ours().del("static", &env, &conf).status_ok);
    assert!(sb.ours().cmd("static", "STATUS", &env, &conf).status_ok);
    for applet in ["portmap", "firewall", "bandwidth"] {
        let c = json!({"cniVersion": "1.1.0", "name": "n", "type": applet});
        let out = sb.ours().del(applet, &env, &c);
        assert!(out.status_ok, "{applet} DEL without CNI_PATH: {out:?}");
    }
    let bridge = json!({"cniVersion": "1.1.0", "name": "n", "type": "bridge",
        "ipam": {"type": "host-local", "subnet": "10.9.0.0/24"}});
    let env = Env {
        netns: String::new(),
        ..env
    };
    let msg = sb.ours().del("bridge", &env, &bridge).err(4);
    assert!(
        msg.contains("CNI_PATH") && msg.contains("host-local"),
        "{msg}"
    );
}

/// CNI_NETNS naming the plugin's own namespace would configure the node as a container: code 8.
#[test]
fn own_netns_is_refused() {
    let sb = Sandbox::new("own-netns");
    let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "loopback"});
    for cmd in ["ADD", "DEL", "CHECK"] {
        let env = sb.env().with_netns("/proc/self/ns/net");
        let mut c = conf.clone();
        if cmd == "CHECK" {
            c["prevResult"] = json!({"cniVersion": "1.0.0"});
        }
        let out = sb.ours().cmd("loopback", cmd, &env, &c);
        assert_eq!(out.err_code(), Some(8), "{cmd}: {out:?}");
    }
}

/// `CNI_NETNS_OVERRIDE` `1` or `true` in any case lets CNI_NETNS be the plugin's own namespace,
/// as the Go skel does; any other value keeps the refusal. (static: it never enters the netns.)
#[test]
fn netns_override_lets_own_netns_through() {
    let sb = Sandbox::new("ns-override");
    let conf = json!({"cniVersion": "1.0.0", "name": "n", "type": "static",
        "ipam": {"type": "static", "addresses": [{"address": "10.9.9.9/24"}]}});
    for (value, allowed) in [
        ("1", true),
        ("true", true),
        ("TRUE", true),
        ("True", true),
        ("0", false),
        ("yes", false),
        ("", false),
    ] {
        let mut env = sb.env().with_netns("/proc/self/ns/net");
        env.extra.push(("CNI_NETNS_OVERRIDE".into(), value.into()));
        for cmd in ["ADD", "DEL"] {
            let out = sb.ours().cmd("static", cmd, &env, &conf);
            if allowed {
                assert!(out.status_ok, "{value:?} {cmd}: {out:?}");
            } else {
                assert_eq!(out.err_code(), Some(8), "{value:?} {cmd}: {out:?}");
            }
        }
    }
}

/// A 10 MB config is not echoed back: message and details stay small.
#[test]
fn huge_input_is_not_echoed() {
    let sb = Sandbox::new("huge");
    let big = "a".repeat(10 << 20);
    for conf in [
        json!({"cniVersion": "1.0.0", "name": format!("{big}!"), "type": "static"}),
        json!({"cniVersion": "1.0.0", "name": "n", "type": "static",
               "ipam": {"type": "static", "addresses": [{"address": big}]}}),
        json!({"cniVersion": big, "name": "n", "type": "static"}),
    ] {
        let out = sb.ours().add("static", &sb.env(), &conf);
        assert!(
            !out.status_ok && out.err_code().is_some(),
            "{}",
            &out.stdout[..200.min(out.stdout.len())]
        );
        assert!(
            out.stdout.len() < 4096,
            "{} bytes of error",
            out.stdout.len()
        );
    }
}

/// `args`, `args.cni` and `runtimeConfig` must be objects, as Go's decoders require: a broken
/// one is an error naming it, not silently no capability.
#[test]
fn args_and_runtime_config_must_be_objects() {
    let sb = Sandbox::new("shape");
    for (key, v, names) in [
        ("runtimeConfig", json!([]), "runtimeConfig"),
        ("runtimeConfig", json!("x"), "runtimeConfig"),
        ("args", json!("x"), "args"),
        ("args", json!({"cni": 5}), "args.cni"),
    ] {
        let mut c = conf("1.0.0");
        c[key] = v;
        let msg = sb.ours().add("static", &sb.env(), &c).err(6);
        assert!(msg.contains(names), "{msg}");
    }
}

/// Output into a pipe nobody reads (`cnibox --list | head -1`, a runtime that closed the
/// plugin's stderr) fails with EPIPE, since Rust ignores SIGPIPE: that must end the run with a
/// status, never a panic (which aborts: no undo, a signal for the runtime).
#[test]
fn closed_pipes_end_quietly() {
    use std::os::fd::OwnedFd;
    use std::process::{Command, Stdio};
    // A pipe whose read end is already closed: every write to it fails with EPIPE.
    let broken = || -> Stdio {
        let (r, w): (OwnedFd, OwnedFd) = nix::unistd::pipe().expect("pipe");
        drop(r);
        Stdio::from(w)
    };
    let run = |args: &[&str], out_broken: bool| {
        let mut cmd = Command::new(bin());
        cmd.args(args)
            .env_remove("CNI_COMMAND")
            .stdin(Stdio::null());
        if out_broken {
            cmd.stdout(broken()).stderr(Stdio::piped());
        } else {
            cmd.stdout(Stdio::piped()).stderr(broken());
        }
        let out = cmd.output().expect("run cnibox");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code().is_some(),
            "{args:?}: killed by a signal: {:?} {text}",
            out.status
        );
        assert!(!text.contains("panicked"), "{args:?}: {text}");
        out.status.code()
    };
    assert_eq!(run(&["--list"], true), Some(0));
    assert_eq!(run(&["--version"], true), Some(0));
    assert_eq!(run(&["--help"], true), Some(0));
    assert_eq!(run(&[], false), Some(1));
    // The about banner of a plugin run without CNI_COMMAND goes to stderr.
    assert_eq!(run(&["bridge"], false), Some(0));
    assert_eq!(run(&["--bogus"], false), Some(2));
}

/// STATUS and GC of every applet that makes a container link are the IPAM plugin's: an IPAM
/// plugin that is not installed fails both, naming it (an applet that did not forward them
/// would answer success).
#[test]
fn status_and_gc_are_forwarded_to_ipam() {
    let sb = Sandbox::new("forward_ipam");
    let p = sb.ours();
    for (applet, keys) in [
        ("bridge", json!({})),
        ("ptp", json!({})),
        ("macvlan", json!({})),
        ("ipvlan", json!({})),
        ("vlan", json!({"master": "eth0", "vlanId": 5})),
        ("tap", json!({})),
        ("dummy", json!({})),
        ("host-device", json!({"device": "eth9"})),
    ] {
        let mut c = json!({"cniVersion": "1.1.0", "name": "fwd", "type": applet,
            "ipam": {"type": "nosuch-ipam"}});
        for (k, v) in keys.as_object().unwrap() {
            c[k] = v.clone();
        }
        for verb in ["STATUS", "GC"] {
            let out = p.cmd(applet, verb, &sb.env(), &c);
            let code = out.err_code();
            assert!(code.is_some(), "{applet} {verb} succeeded: {out:?}");
            let msg = out.err(code.unwrap());
            assert!(msg.contains("nosuch-ipam"), "{applet} {verb}: {msg}");
        }
    }
}
