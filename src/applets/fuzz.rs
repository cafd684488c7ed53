//! Entry points for the in-process fuzz targets (tests/fuzz_parsers.rs) into parsers that read
//! bytes the host does not control: DHCP packets (a container's network answers the daemon,
//! which runs as root on the host), the tuning allowlist's patterns and the keys matched
//! against them (pod annotations), and flannel's subnet.env. Not an API: hidden from the docs,
//! never called by the binary.

use super::dhcp::packet::{self, Msg};

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
