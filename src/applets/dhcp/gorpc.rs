//! Go `net/rpc` over the daemon's socket, as upstream's dhcp plugin and daemon speak it: the
//! client writes `CONNECT /_goRPC_ HTTP/1.0\n\n`, the server answers
//! `HTTP/1.0 200 Connected to Go RPC\n\n`, then each call is a gob `Request{ServiceMethod,
//! Seq}` and its argument, each answer a gob `Response{ServiceMethod, Seq, Error}` and its
//! reply (an empty struct when `Error` is set). The calls: `DHCP.Allocate` (ADD and CHECK) and
//! `DHCP.Release` (DEL), with the plugin's `skel.CmdArgs` as argument; Allocate's reply is a
//! `current.Result`, Release's an empty struct. [`call`] is the plugin's side, [`serve`] the
//! daemon's.
//!
//! Only the fields the calls fill are sent (gob matches fields by name and ignores the ones a
//! side does not know): the result's `IPs` and `Routes` (`Dst`, `GW`, `Priority`, `Scope`),
//! never `CNIVersion` (Go's plugin converts from the version the reply names, and v1.1.1 knows
//! no 1.1.0).
// Foreign bytes: every numeric conversion is checked (try_from, or a cast proven exact).
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use super::gob::{CLOSED, Dec, Enc, Val};
use crate::cni::env::{Command, Env};
use crate::cni::result::{CniResult, IpConfig, Route};
use crate::error::{Error, Result};
use ipnet::IpNet;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::time::Instant;

const HANDSHAKE: &[u8] = b"CONNECT /_goRPC_ HTTP/1.0\n\n";
const CONNECTED: &[u8] = b"HTTP/1.0 200 Connected to Go RPC\n\n";

/// The client's types (ids are per stream).
const REQUEST: i64 = 65;
const ARGS: i64 = 66;
/// The server's.
const RESPONSE: i64 = 65;
const RESULT: i64 = 66;
const EMPTY: i64 = 72;

/// A stream read against a deadline: each read waits at most what is left.
struct Timed<'a>(&'a UnixStream, Instant);

impl Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.1.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.0.set_read_timeout(Some(left))?;
        self.0.read(buf)
    }
}

/// The client's stream for one call of `method` (after the handshake): the types, the
/// `Request` and the `skel.CmdArgs` made of `env` and `stdin`.
pub(crate) fn request(method: &str, env: &Env, stdin: &[u8]) -> Vec<u8> {
    let mut out = Enc::default();
    out.define(REQUEST, "Request", &[("ServiceMethod", 6), ("Seq", 3)]);
    let mut m = Enc::default();
    m.int(REQUEST);
    m.uint(1);
    m.bytes(method.as_bytes());
    m.uint(0);
    out.message(&m);
    let args = [
        ("ContainerID", 6),
        ("Netns", 6),
        ("IfName", 6),
        ("Args", 6),
        ("Path", 6),
        ("StdinData", 5),
    ];
    out.define(ARGS, "CmdArgs", &args);
    let mut m = Enc::default();
    m.int(ARGS);
    let mut last = -1;
    let values = [
        &env.container_id,
        &env.netns,
        &env.ifname,
        &env.args,
        &env.path,
    ];
    let values = values.map(|v| v.as_bytes());
    for (i, v) in (0..).zip(values.into_iter().chain([stdin])) {
        if !v.is_empty() {
            m.field(&mut last, i);
            m.bytes(v);
        }
    }
    m.uint(0);
    out.message(&m);
    out.0
}

/// Why a net/rpc call brought no reply.
pub(crate) enum RpcError {
    /// The daemon answered the call with this error text.
    Refused(String),
    /// The exchange broke (handshake, write, read, a bad stream), for this reason.
    Broken(String),
}

/// Call `method` with the plugin's arguments on a connected `s`, before `end`: the reply, or
/// why there is none.
pub(crate) fn call(
    s: &UnixStream,
    end: Instant,
    method: &str,
    env: &Env,
    stdin: &[u8],
) -> std::result::Result<Val, RpcError> {
    let broke = RpcError::Broken;
    let mut w = s;
    let left = end.saturating_duration_since(Instant::now());
    let mut write = |b: &[u8]| {
        w.set_write_timeout(Some(left.max(std::time::Duration::from_millis(1))))
            .and_then(|()| w.write_all(b))
            .map_err(|e| broke(format!("write: {e}")))
    };
    // The request only after the answer: Go's server drops what came with the handshake.
    write(HANDSHAKE)?;
    let mut r = Timed(s, end);
    let mut status = [0u8; CONNECTED.len()];
    r.read_exact(&mut status)
        .map_err(|e| broke(format!("read: {e}")))?;
    if status != CONNECTED {
        return Err(broke(format!(
            "unexpected HTTP response: {:?}",
            String::from_utf8_lossy(&status)
        )));
    }
    write(&request(method, env, stdin))?;
    let mut dec = Dec::new();
    let head = dec.read(&mut r).map_err(broke)?;
    let body = dec.read(&mut r).map_err(broke)?;
    match head.str("Error") {
        e if e.is_empty() => Ok(body),
        e => Err(RpcError::Refused(e)),
    }
}

/// The Go daemon's `current.Result`, as a CNI result.
pub(crate) fn result(v: &Val) -> Result<CniResult> {
    let bad = |what: &str| Error::internal(format!("bad result from DHCP daemon: {what}"));
    let ip = |v: Option<&Val>| -> Option<IpAddr> {
        match v.map_or(&[][..], Val::bytes) {
            [] => None,
            b => ip_of(b),
        }
    };
    let net = |v: Option<&Val>| -> Result<IpNet> {
        let v = v.ok_or_else(|| bad("no address"))?;
        let field = |k| v.get(k).map_or(&[][..], Val::bytes);
        let (a, mask) = (field("IP"), field("Mask"));
        let a = match a {
            // A 16-byte IPv4 address (Go's To16) with a 4-byte mask is IPv4.
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, v4 @ ..] if mask.len() == 4 => v4,
            a => a,
        };
        let prefix = mask.iter().map(|b| b.leading_ones()).sum::<u32>();
        let contiguous = mask.iter().map(|b| b.count_ones()).sum::<u32>() == prefix
            && mask.iter().all(|b| b.leading_ones() == b.count_ones());
        match ip_of(a) {
            Some(ip) if mask.len() == a.len() && contiguous => u8::try_from(prefix)
                .ok()
                .and_then(|p| IpNet::new(ip, p).ok())
                .ok_or_else(|| bad(&format!("prefix length {prefix}"))),
            _ => Err(bad(&format!("address {a:?}/{mask:?}"))),
        }
    };
    let mut r = CniResult::default();
    for c in v.list("IPs") {
        r.ips.push(IpConfig {
            version: None,
            interface: None,
            address: net(c.get("Address"))?,
            gateway: ip(c.get("Gateway")),
        });
    }
    for x in v.list("Routes") {
        let mut route = Route::new(net(x.get("Dst"))?, ip(x.get("GW")));
        route.priority = u32::try_from(x.int("Priority")).ok().filter(|p| *p != 0);
        route.scope = u8::try_from(x.int("Scope")).ok().filter(|s| *s != 0);
        r.routes.push(route);
    }
    Ok(r)
}

fn ip_of(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(b).ok().map(IpAddr::from),
        _ => None,
    }
}

fn ip_bytes(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

/// A struct value `net` as Go's `net.IPNet{IP, Mask}`.
fn put_net(e: &mut Enc, net: &IpNet) {
    e.uint(1);
    e.bytes(&ip_bytes(net.addr()));
    e.uint(1);
    e.bytes(&ip_bytes(net.netmask()));
    e.uint(0);
}

fn put_result(e: &mut Enc, r: &CniResult) {
    let mut last = -1;
    if !r.ips.is_empty() {
        e.field(&mut last, 0);
        e.uint(r.ips.len() as u64);
        for c in &r.ips {
            e.uint(1);
            put_net(e, &c.address);
            if let Some(g) = c.gateway {
                e.uint(1);
                e.bytes(&ip_bytes(g));
            }
            e.uint(0);
        }
    }
    if !r.routes.is_empty() {
        e.field(&mut last, 1);
        e.uint(r.routes.len() as u64);
        for x in &r.routes {
            let mut at = 0;
            e.uint(1);
            put_net(e, &x.dst);
            if let Some(g) = x.gw {
                e.field(&mut at, 1);
                e.bytes(&ip_bytes(g));
            }
            if let Some(p) = x.priority {
                e.field(&mut at, 2);
                e.int(i64::from(p));
            }
            if let Some(s) = x.scope {
                e.field(&mut at, 3);
                e.int(i64::from(s));
            }
            e.uint(0);
        }
    }
    e.uint(0);
}

/// What a call of the daemon's answers: Allocate's result, or Release's nothing.
pub(crate) type Reply = Result<Option<CniResult>>;

/// What to do when an answer cannot be delivered (the plugin is gone): release the lease
/// acquired for it. Not an ADD's undo ([`crate::undo::Undo`]): nothing here ran for the plugin.
pub(crate) type OnUndelivered<'a> = Option<Box<dyn FnOnce() + 'a>>;

/// The daemon's handling of one call: method, `skel.CmdArgs` as an environment, network config.
pub(crate) type Handler<'a> = dyn Fn(&str, Env, Vec<u8>) -> (Reply, OnUndelivered<'a>) + 'a;

/// The gob types a server's stream has defined so far (each is defined once per stream).
#[derive(Default)]
pub(crate) struct TypesDefined {
    response: bool,
    result: bool,
    empty: bool,
}

/// The daemon's side, after the first byte `first` of a connection that is Go's handshake:
/// answer each call on `s` with `handle(method, args)` until the plugin hangs up. `handle`
/// gets the call's `skel.CmdArgs` as an environment and the network config.
pub(crate) fn serve<'a>(s: &UnixStream, first: u8, handle: &Handler<'a>) {
    let mut r = s;
    let mut hello = [first; HANDSHAKE.len()];
    let mut w = s;
    if r.read_exact(&mut hello[1..]).is_err()
        || hello != HANDSHAKE
        || w.write_all(CONNECTED).is_err()
    {
        return;
    }
    let mut dec = Dec::new();
    let mut defined = TypesDefined::default();
    // A broken or hostile stream ends the connection, and with it its decoder's state.
    let closed = |e: String| {
        if e != CLOSED {
            crate::warn!("dhcp daemon: net/rpc connection closed: {e}");
        }
    };
    loop {
        let head = match dec.read(&mut r) {
            Ok(v) => v,
            Err(e) => return closed(e),
        };
        let a = match dec.read(&mut r) {
            Ok(v) => v,
            Err(e) => return closed(e),
        };
        let env = Env {
            container_id: a.str("ContainerID"),
            netns: a.str("Netns"),
            ifname: a.str("IfName"),
            args: a.str("Args"),
            path: a.str("Path"),
            command: Command::Add,
        };
        let method = head.str("ServiceMethod");
        let stdin = a.get("StdinData").map_or(vec![], |b| b.bytes().to_vec());
        let (reply, on_undelivered) = match method.as_str() {
            "DHCP.Allocate" | "DHCP.Release" => handle(&method, env, stdin),
            m => (
                Err(Error::internal(format!("rpc: can't find method {m}"))),
                None,
            ),
        };
        let seq = match head.get("Seq") {
            Some(Val::Uint(n)) => *n,
            _ => 0,
        };
        let out = answer(&mut defined, &method, seq, &reply);
        if w.write_all(&out).is_err() {
            if let Some(release) = on_undelivered {
                release();
            }
            return;
        }
    }
}

/// The server's stream for one answer, defining the types `defined` does not have yet.
pub(crate) fn answer(defined: &mut TypesDefined, method: &str, seq: u64, reply: &Reply) -> Vec<u8> {
    let mut out = Enc::default();
    if !defined.response {
        let fields = [("ServiceMethod", 6), ("Seq", 3), ("Error", 6)];
        out.define(RESPONSE, "Response", &fields);
        defined.response = true;
    }
    let mut m = Enc::default();
    m.int(RESPONSE);
    let mut last = -1;
    if !method.is_empty() {
        m.field(&mut last, 0);
        m.bytes(method.as_bytes());
    }
    if seq != 0 {
        m.field(&mut last, 1);
        m.uint(seq);
    }
    if let Err(e) = reply {
        m.field(&mut last, 2);
        m.bytes(e.msg.as_bytes());
    }
    m.uint(0);
    out.message(&m);
    let mut m = Enc::default();
    if let Ok(Some(result)) = reply {
        if !defined.result {
            define_result(&mut out);
            defined.result = true;
        }
        m.int(RESULT);
        put_result(&mut m, result);
    } else {
        if !defined.empty {
            out.define(EMPTY, "", &[]);
            defined.empty = true;
        }
        m.int(EMPTY);
        m.uint(0);
    }
    out.message(&m);
    out.0
}

/// `current.Result` and what it holds, the fields the daemon fills.
fn define_result(out: &mut Enc) {
    out.define(RESULT, "Result", &[("IPs", 67), ("Routes", 70)]);
    out.define(67, "[]*types100.IPConfig", &[("", 68)]);
    out.define(68, "IPConfig", &[("Address", 69), ("Gateway", 5)]);
    out.define(69, "IPNet", &[("IP", 5), ("Mask", 5)]);
    out.define(70, "[]*types.Route", &[("", 71)]);
    let route = [("Dst", 69), ("GW", 5), ("Priority", 2), ("Scope", 2)];
    out.define(71, "Route", &route);
}
