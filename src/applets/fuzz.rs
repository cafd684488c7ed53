//! Entry points for the in-process fuzz targets (tests/fuzz_parsers.rs) into parsers that read
//! bytes the host does not control: DHCP packets (a container's network answers the daemon,
//! which runs as root on the host), gob streams of Go's net/rpc (any local root process may
//! talk to the daemon's socket, and a plugin to whatever listens there), the tuning allowlist's patterns and the keys matched
//! against them (pod annotations), and flannel's subnet.env. Not an API: hidden from the docs,
//! never called by the binary.

use super::dhcp::gob::Dec;
use super::dhcp::gorpc;
use super::dhcp::packet::{self, Msg};

/// Decode `b` as a gob stream, as the daemon reads calls and the plugin answers: every value,
/// and each read as a result; returns how much was read.
pub fn gob_stream(mut b: &[u8]) -> usize {
    let mut dec = Dec::new();
    let mut n = 0;
    while let Ok(v) = dec.read(&mut b) {
        n += v.str("ServiceMethod").len() + v.str("StdinData").len();
        n += gorpc::result(&v).map_or(0, |r| r.ips.len() + r.routes.len());
    }
    n
}

/// The streams cnibox's plugin and daemon write (a call; answers with a result, an error).
pub fn gob_seeds() -> Vec<Vec<u8>> {
    use crate::cni::env::{Command, Env};
    use crate::cni::result::{CniResult, IpConfig, Route};
    let env = Env {
        command: Command::Add,
        container_id: "c".into(),
        netns: "/run/netns/c".into(),
        ifname: "eth0".into(),
        args: "A=B".into(),
        path: "/opt/cni/bin".into(),
    };
    let mut r = CniResult::default();
    r.ips.push(IpConfig {
        version: None,
        interface: None,
        address: "2001:db8::2/64"
            .parse()
            .unwrap_or(ipnet::IpNet::V4(Default::default())),
        gateway: None,
    });
    r.routes.push(Route::new(r.ips[0].address, None));
    let mut sent = gorpc::TypesDefined::default();
    let mut answers = gorpc::answer(&mut sent, "DHCP.Allocate", 1, &Ok(Some(r)));
    let err = Err(crate::error::Error::internal("no"));
    answers.extend(gorpc::answer(&mut sent, "DHCP.Release", 2, &err));
    vec![gorpc::request("DHCP.Allocate", &env, b"{}"), answers]
}

/// Decode `b` as the daemon does (UDP/IP frame first, then BOOTP), read every field a lease is
/// built from, and re-encode: returns how much was read, so nothing is optimised away.
pub fn dhcp_packet(b: &[u8]) -> usize {
    let mut n = 0;
    for payload in [Some(b), packet::unframe(b)].into_iter().flatten() {
        let Some(m) = Msg::decode(payload) else {
            continue;
        };
        n += usize::from(m.kind());
        n += m.address().map_or(0, |(_, p)| usize::from(p));
        n += m.router().map_or(0, |_| 1);
        n += m.routes().len();
        for code in [
            packet::OPT_LEASE_TIME,
            packet::OPT_T1,
            packet::OPT_T2,
            packet::OPT_SERVER_ID,
            packet::OPT_MESSAGE,
        ] {
            n += m.secs(code).map_or(0, |s| s as usize & 1);
            n += m.ip(code).map_or(0, |_| 1);
            n += m.get(code).map_or(0, <[u8]>::len);
        }
        let again = Msg::decode(&m.encode()).map_or(0, |m| m.routes().len());
        n += again;
    }
    n
}

/// Well-formed DHCP replies (an OFFER and an ACK with routes, both bare and framed), for the
/// fuzzer to start from.
pub fn dhcp_seeds() -> Vec<Vec<u8>> {
    use std::net::Ipv4Addr;
    let mut out = Vec::new();
    for kind in [packet::OFFER, packet::ACK, packet::NAK] {
        let mut m = Msg::request(kind, 0x1234_5678, [2, 0, 0, 0, 0, 1]);
        m.set(packet::OPT_SUBNET_MASK, vec![255, 255, 255, 0]);
        m.set(packet::OPT_ROUTER, vec![10, 0, 0, 1]);
        m.set(packet::OPT_SERVER_ID, vec![10, 0, 0, 1]);
        m.set(packet::OPT_LEASE_TIME, 3600u32.to_be_bytes().to_vec());
        m.set(packet::OPT_STATIC_ROUTES, vec![192, 168, 0, 0, 10, 0, 0, 1]);
        m.set(
            packet::OPT_CLASSLESS_ROUTES,
            vec![24, 172, 16, 1, 10, 0, 0, 1, 0, 10, 0, 0, 1],
        );
        m.set(packet::OPT_MESSAGE, b"hello".to_vec());
        let bare = m.encode();
        out.push(packet::frame(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::BROADCAST,
            &bare,
        ));
        out.push(bare);
    }
    out
}

/// Load the allowlist at `path` (the tuning applet's loader: file checks, size cap, pattern
/// parser) and match each of `keys` against it. `Err` carries the loader's error message.
pub fn allowlist(path: &str, keys: &[&str]) -> Result<usize, String> {
    let Some(list) = super::tuning::allowlist::load(path).map_err(|e| e.msg)? else {
        return Ok(0);
    };
    Ok(keys
        .iter()
        .filter(|k| list.iter().any(|(_, re)| re.is_match(k)))
        .count())
}

/// Read `path` as flannel reads its subnet.env. `Err` carries the error message.
pub fn subnet_env(path: &str) -> Result<(), String> {
    super::flannel::subnet::SubnetEnv::load(path)
        .map(|_| ())
        .map_err(|e| e.msg)
}

/// Read `b` as a libcni result-cache file, as `cnibox doctor` does (the record, then the
/// addresses and host interfaces of its result) and as a runtime's DEL/CHECK reads the cached
/// result: returns how much was read.
pub fn cache_record(b: &[u8]) -> usize {
    use crate::cni::result::CniResult;
    use crate::cni::version::Version;
    use crate::runtime::cache;
    let rec = cache::parse_record("fuzz".into(), Ok(b.to_vec()));
    let (addrs, host) = crate::doctor::survey::result_addresses(rec.result.as_ref());
    let mut n = addrs.len() + host.len() + rec.network.len();
    // A runtime reads the cached result (a pre-0.8 record is a bare one) as a prevResult.
    let bare = serde_json::from_slice::<serde_json::Value>(b).ok();
    if let Some(r) = rec.result.as_ref().or(bare.as_ref()) {
        n += CniResult::from_json(r, Version::V110).map_or(0, |r| r.ips.len());
    }
    n += rec.error.map_or(0, |e| e.len());
    n += rec.rt.map_or(0, |rt| {
        rt.container_id.len() + rt.args.len() + rt.caps.len()
    });
    n
}

/// Read `b` as a network configuration: the loader's list (a `.conflist`, or a `.conf`
/// promoted to one), the plugin config and a `prevResult` decoded the Go way (case-insensitive
/// keys, Go's type errors): returns how much was read.
pub fn config(b: &[u8]) -> usize {
    use crate::cni::config::NetConf;
    use crate::cni::gojson;
    use crate::cni::result::CniResult;
    use crate::cni::version::Version;
    let mut n =
        crate::runtime::load::list_from_bytes(b.to_vec()).map_or(0, |(list, _)| list.plugins.len());
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(b) else {
        return n;
    };
    n += gojson::from_value::<NetConf>(&v).map_or(0, |c| c.name.len());
    if let Some(prev) = gojson::member(&v, "prevResult") {
        n += CniResult::from_json(prev, Version::V110)
            .map_or(0, |r| r.ips.len() + r.routes.len() + r.interfaces.len());
    }
    n
}
