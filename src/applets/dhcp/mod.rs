//! `dhcp` IPAM (upstream `plugins/ipam/dhcp`): addresses from a DHCP server on the container's
//! interface, leased and kept by a long-running daemon (`dhcp daemon`, [`daemon`]), which the
//! plugin asks over a unix socket.
//!
//! Keys (`ipam.`): `daemonSocketPath` (default `/run/cni/dhcp.sock`), `provide` (options the
//! client sends: `option` as a number or one of upstream's names, `value`, `fromArg` naming a
//! CNI_ARGS key), `request` (options asked for in the parameter request list; `skipDefault`
//! drops the default `routers` and `subnet-mask`), `priority` (metric of the routes).
//!
//! ADD: the daemon enters the container namespace, does DISCOVER/OFFER/REQUEST/ACK on CNI_IFNAME
//! with client identifier `containerID/network/ifname` (upstream's; see [`daemon`] for one
//! longer than 254 bytes) and keeps the lease (renewal at T1, rebinding at T2); the result has the address, the router as gateway
//! and the routes (option 121, else 33 plus a default route via the router). DEL releases the
//! lease (DHCPRELEASE) and stops its maintenance; CHECK asks whether the daemon holds the lease.
//!
//! Protocols: the daemon serves Go's net/rpc ([`gorpc`], upstream's plugin) and cnibox's JSON
//! ([`proto`]) on one socket; the plugin speaks JSON and, when the answer is HTTP (upstream's
//! daemon), Go's: then CHECK acquires a lease when none is held (upstream's CHECK is an
//! Allocate), STATUS succeeds as that daemon answered and GC does nothing (it has none).
//! Beyond upstream: option names and values are checked
//! at load (code 7 naming the key), `daemonSocketPath` must be absolute; CHECK fails when the
//! daemon holds no lease (upstream's CHECK acquires one); DEL succeeds when no daemon listens
//! (a daemon that is not running holds no lease) or when it does not answer in time; STATUS
//! fails (code 50) when the daemon does not answer; GC releases the leases of attachments the
//! runtime no longer lists. Every call has a deadline ([`proto::deadline`]); upstream waits
//! for ever.

mod conns;
pub mod daemon;
mod flags;
pub(crate) mod gob;
#[cfg(test)]
mod gob_tests;
pub(crate) mod gorpc;
mod lease;
mod mapping;
pub(super) mod packet;
mod proto;
mod store;

use crate::cni::config::NetConf;
use crate::cni::env::Env;
use crate::cni::error::code;
use crate::cni::gojson;
use crate::cni::{Applet, CniResult, CodeContext, Error, Request, Result, Version};
use gorpc::RpcError;
use proto::{Call, CallError, Op};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Instant;

pub static APPLET: Applet = Applet {
    name: "dhcp",
    versions: Version::ALL,
    add,
    del,
    check,
    status: Some(status),
    gc: Some(gc),
};

pub const DEFAULT_SOCKET: &str = "/run/cni/dhcp.sock";

#[derive(Default)]
struct Ipam {
    socket: String,
    provide: Vec<Provide>,
    request: Vec<Requested>,
    priority: i64,
}

struct Provide {
    option: String,
    value: String,
    from_arg: String,
}

struct Requested {
    skip_default: bool,
    option: String,
}

/// Upstream's option names (its `optionNameToID`); anything else is a number.
const NAMES: &[(&str, u8)] = &[
    ("dhcp-client-identifier", 61),
    ("subnet-mask", 1),
    ("routers", 3),
    ("host-name", 12),
    ("user-class", 77),
    ("vendor-class-identifier", 60),
];

fn option_code(key: &str, s: &str) -> Result<u8> {
    if let Some((_, c)) = NAMES.iter().find(|(n, _)| *n == s) {
        return Ok(*c);
    }
    match s.parse::<u8>() {
        // Pad and end are not options: they would cut the message.
        Ok(c) if c != 0 && c != 255 && s.bytes().all(|b| b.is_ascii_digit()) => Ok(c),
        _ => Err(Error::config(format!(
            "{key}: cannot parse option {s:?}: a number from 1 to 254 or one of {}",
            NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The socket path, checked: absolute (a relative one would depend on the directory the
/// runtime happens to run plugins in), and a unix socket address holds 107 bytes.
fn socket(ipam: &Ipam) -> Result<String> {
    let s = match ipam.socket.as_str() {
        "" => DEFAULT_SOCKET,
        s => s,
    };
    if !s.starts_with('/') {
        return Err(Error::config(format!(
            "ipam.daemonSocketPath: {s:?} is not an absolute path"
        )));
    }
    if s.len() > 107 || s.contains('\0') {
        return Err(Error::config(format!(
            "ipam.daemonSocketPath: {s:?} is not a usable unix socket path (at most 107 bytes)"
        )));
    }
    Ok(s.to_string())
}

/// The applet's `load(req)`: `ipam`'s keys, decoded as Go decodes them (member by member: each
/// struct decoder costs kilobytes in the binary).
fn load(req: &Request) -> Result<Ipam> {
    let Some(v) = gojson::member(&req.raw, "ipam") else {
        return Ok(Ipam::default());
    };
    let bad = |k: &str, e: &dyn std::fmt::Display| {
        Error::decode(format!("failed to load netconf: ipam.{k}: {e}"))
    };
    fn get<'a, T: Deserialize<'a> + Default>(v: &'a Value, k: &str) -> Result<T, String> {
        gojson::from_member::<T>(v, k)
            .map(Option::unwrap_or_default)
            .map_err(|e| e.to_string())
    }
    let list = |k: &str| match gojson::member(v, k) {
        None => Ok(&[][..]),
        Some(Value::Array(a)) => Ok(a.as_slice()),
        Some(_) => Err(bad(k, &"not a list")),
    };
    let mut ipam = Ipam {
        socket: get(v, "daemonSocketPath").map_err(|e| bad("daemonSocketPath", &e))?,
        priority: get(v, "priority").map_err(|e| bad("priority", &e))?,
        ..Ipam::default()
    };
    for (i, p) in list("provide")?.iter().enumerate() {
        let s = |k| get::<String>(p, k).map_err(|e| bad(&format!("provide[{i}].{k}"), &e));
        ipam.provide.push(Provide {
            option: s("option")?,
            value: s("value")?,
            from_arg: s("fromArg")?,
        });
    }
    for (i, r) in list("request")?.iter().enumerate() {
        let at = |e| bad(&format!("request[{i}]"), &e);
        ipam.request.push(Requested {
            skip_default: get(r, "skipDefault").map_err(at)?,
            option: get(r, "option").map_err(at)?,
        });
    }
    Ok(ipam)
}

/// The ADD call: the options the client sends and asks for, as upstream's prepareOptions.
fn add_call(req: &Request, ipam: &Ipam) -> Result<Call> {
    let mut call = attachment_call(req, Op::Add);
    // CNI_ARGS read as upstream reads them for `fromArg`: `;`-separated `K=V`, nothing refused.
    let arg = |k: &str| {
        req.env
            .args
            .split(';')
            .filter_map(|p| p.split_once('='))
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v)
    };
    for (i, p) in ipam.provide.iter().enumerate() {
        let key = format!("ipam.provide[{i}]");
        let c = option_code(&format!("{key}.option"), &p.option)?;
        let from_arg = if p.from_arg.is_empty() {
            None
        } else {
            arg(&p.from_arg)
        };
        for (v, src) in [(Some(p.value.as_str()), "value"), (from_arg, "fromArg")] {
            match v {
                Some(v) if v.len() > 255 => {
                    return Err(Error::config(format!(
                        "{key}.{src}: value too long for option {:?} ({} bytes, at most 255)",
                        p.option,
                        v.len()
                    )));
                }
                Some(v) if !v.is_empty() => call.options.push((c, v.to_string())),
                _ => {}
            }
        }
    }
    let mut skip_default = false;
    for (i, r) in ipam.request.iter().enumerate() {
        skip_default |= r.skip_default;
        if !r.option.is_empty() {
            let c = option_code(&format!("ipam.request[{i}].option"), &r.option)?;
            if !call.request.contains(&c) {
                call.request.push(c);
            }
        }
    }
    if !skip_default {
        for c in [3, 1] {
            if !call.request.contains(&c) {
                call.request.push(c);
            }
        }
    }
    call.priority = u32::try_from(ipam.priority)
        .map_err(|_| Error::config(format!("ipam.priority: {} is out of range", ipam.priority)))?;
    // The daemon runs elsewhere: make the namespace path absolute, as upstream does.
    if !call.netns.starts_with('/') && !call.netns.is_empty() {
        call.netns = absolute(&call.netns)?;
    }
    Ok(call)
}

fn absolute(path: &str) -> Result<String> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("current directory", e))?;
    Ok(cwd.join(path).display().to_string())
}

/// The call `op` on the request's attachment, with nothing else filled in.
fn attachment_call(req: &Request, op: Op) -> Call {
    Call {
        op,
        container_id: req.env.container_id.clone(),
        network: req.conf.name.clone(),
        ifname: req.env.ifname.clone(),
        netns: req.env.netns.clone(),
        ..Call::default()
    }
}

/// The daemon's answer to `call`: cnibox's daemon speaks JSON; Go's daemon answers that with
/// an HTTP error, and then gets the call again in its own protocol.
fn send_to_daemon(
    socket: &str,
    req: &Request,
    call: &Call,
) -> std::result::Result<Value, CallError> {
    match proto::call(socket, call) {
        Err(CallError::GoDaemon) => send_to_go_daemon(socket, req, call),
        r => r,
    }
}

/// `call` to Go's daemon: ADD and CHECK are `DHCP.Allocate` (which acquires a lease when none
/// is held, as upstream's CHECK does), DEL is `DHCP.Release`. It has no STATUS (it answered:
/// it is up) and no GC.
fn send_to_go_daemon(
    socket: &str,
    req: &Request,
    call: &Call,
) -> std::result::Result<Value, CallError> {
    let method = match call.op {
        Op::Add | Op::Check => "DHCP.Allocate",
        Op::Del => "DHCP.Release",
        Op::Status | Op::Gc => return Ok(json!({})),
    };
    let limit = proto::deadline(call.op);
    let end = Instant::now() + limit;
    let s = proto::dial(socket, end, limit)?;
    let mut env = req.env.clone();
    env.netns.clone_from(&call.netns);
    let failed = |m: String| CallError::Failed(Error::internal(m));
    match gorpc::call(&s, end, method, &env, &req.stdin) {
        Ok(v) if method == "DHCP.Allocate" => {
            let r = gorpc::result(&v).map_err(CallError::Failed)?;
            let v = r.to_value(Version::V110).map_err(CallError::Failed)?;
            Ok(json!({ "result": v }))
        }
        Ok(_) => Ok(json!({})),
        Err(RpcError::Refused(e)) => Err(failed(format!("error calling {method}: {e}"))),
        Err(RpcError::Broken(_)) if Instant::now() >= end => Err(proto::silent(socket, limit)),
        Err(RpcError::Broken(e)) => Err(failed(format!("DHCP daemon at {socket}: {e}"))),
    }
}

/// [`send_to_daemon`] where every failure is the verb's error.
fn send_or_fail(socket: &str, req: &Request, call: &Call) -> Result<Value> {
    send_to_daemon(socket, req, call).map_err(|e| match e {
        CallError::Unreachable(e) | CallError::Silent(e) | CallError::Failed(e) => e,
        CallError::GoDaemon => Error::internal("unexpected HTTP answer"),
    })
}

/// The call a Go plugin's `skel.CmdArgs` stands for (`op`: add or del), read from its network
/// config as cnibox's plugin reads it.
pub(super) fn go_call(op: Op, env: Env, stdin: Vec<u8>) -> Result<Call> {
    let raw: Value =
        serde_json::from_slice(&stdin).ctx_code(code::DECODE_FAILURE, "error parsing netconf")?;
    let conf: NetConf =
        gojson::from_value(&raw).ctx_code(code::DECODE_FAILURE, "error parsing netconf")?;
    let req = Request {
        env,
        stdin,
        raw,
        conf,
        version: Version::V110,
        applets: &[],
    };
    let ipam = load(&req)?;
    if op == Op::Add {
        return add_call(&req, &ipam);
    }
    Ok(attachment_call(&req, op))
}

fn add(req: &Request) -> Result<CniResult> {
    let ipam = load(req)?;
    let sock = socket(&ipam)?;
    if req.env.netns.is_empty() {
        return Err(Error::env("required env variables [CNI_NETNS] missing"));
    }
    // The daemon opens it again (under its -hostprefix); checked here too, so that a path
    // that is no namespace is code 8 even when the daemon is not there to say so.
    req.netns()?;
    let call = add_call(req, &ipam)?;
    let v = send_or_fail(&sock, req, &call)?;
    CniResult::from_json(&v["result"], Version::V110)
        .map_err(|e| e.ctx("bad result from DHCP daemon"))
}

fn del(req: &Request) -> Result<()> {
    let sock = socket(&load(req)?)?;
    let mut call = attachment_call(req, Op::Del);
    if !call.netns.is_empty() && !call.netns.starts_with('/') {
        call.netns = absolute(&call.netns).unwrap_or(call.netns);
    }
    match send_to_daemon(&sock, req, &call) {
        Ok(_) => Ok(()),
        Err(CallError::Unreachable(e)) => {
            crate::warn!("dhcp: {e}: no lease to release");
            Ok(())
        }
        // Like no daemon: a runtime whose DEL never succeeds never lets the container go.
        // The daemon still releases the lease if it ever gets to it.
        Err(CallError::Silent(e)) => {
            crate::warn!("dhcp: {e}: leaving the release to the daemon");
            Ok(())
        }
        Err(CallError::Failed(e)) => Err(e),
        Err(CallError::GoDaemon) => Ok(()),
    }
}

fn check(req: &Request) -> Result<()> {
    let ipam = load(req)?;
    let call = add_call(req, &ipam)?;
    let mut check = attachment_call(req, Op::Check);
    check.netns = call.netns;
    send_or_fail(&socket(&ipam)?, req, &check).map(|_| ())
}

fn status(req: &Request) -> Result<()> {
    let ipam = load(req)?;
    send_or_fail(&socket(&ipam)?, req, &attachment_call(req, Op::Status))
        .map(|_| ())
        .map_err(|e| Error::new(code::PLUGIN_NOT_AVAILABLE, e.msg).with_details(e.details))
}

fn gc(req: &Request) -> Result<()> {
    let sock = socket(&load(req)?)?;
    let Some(valid) = req.valid_attachments() else {
        return Ok(());
    };
    let mut call = attachment_call(req, Op::Gc);
    call.keep = valid
        .iter()
        .map(|a| (a.container_id.clone(), a.ifname.clone()))
        .collect();
    match send_to_daemon(&sock, req, &call) {
        Ok(_) | Err(CallError::Unreachable(_) | CallError::GoDaemon) => Ok(()),
        Err(CallError::Silent(e)) => {
            crate::warn!("dhcp: {e}: leaving the GC to the daemon");
            Ok(())
        }
        Err(CallError::Failed(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::option_code;

    #[test]
    fn option_names_and_numbers() {
        assert_eq!(option_code("k", "host-name").unwrap(), 12);
        assert_eq!(option_code("k", "routers").unwrap(), 3);
        assert_eq!(option_code("k", "121").unwrap(), 121);
        for bad in ["", "0", "255", "256", "+3", "-1", "hostname", " 3"] {
            let e = option_code("ipam.request[0].option", bad).unwrap_err();
            assert_eq!(e.code, 7);
            assert!(e.msg.starts_with("ipam.request[0].option: "), "{}", e.msg);
        }
    }
}
