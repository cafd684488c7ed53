//! Conntrack over ctnetlink: delete the UDP flows to a host port, so a new port mapping is not
//! shadowed by a flow the kernel tracked before the DNAT rule existed (upstream portmap does
//! the same through vishvananda/netlink).

use super::msg::{self, Writer};
use super::nft::{F_DUMP, Nftables};
use crate::error::{Context, Error, Result};

const SUBSYS_CTNETLINK: u16 = 1;
const MSG_GET: u16 = 1;
const MSG_DELETE: u16 = 2;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_DST_PORT: u16 = 3;
const IPPROTO_UDP: u8 = 17;

/// The original tuple (raw payload) and zone of each flow of `family` that is UDP to one of
/// `ports`.
fn matching(payloads: &[Vec<u8>], ports: &[u16]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for p in payloads {
        let (mut orig, mut zone) = (None, None);
        for (ty, d) in msg::attrs(p) {
            match ty {
                CTA_TUPLE_ORIG => orig = Some(d),
                CTA_ZONE => zone = Some(d.to_vec()),
                _ => {}
            }
        }
        let Some(orig) = orig else { continue };
        let (mut proto, mut dport) = (0u8, 0u16);
        for (ty, d) in msg::attrs(orig) {
            if ty != CTA_TUPLE_PROTO {
                continue;
            }
            for (ty, d) in msg::attrs(d) {
                match ty {
                    CTA_PROTO_NUM => proto = d.first().copied().unwrap_or(0),
                    CTA_PROTO_DST_PORT if d.len() >= 2 => dport = u16::from_be_bytes([d[0], d[1]]),
                    _ => {}
                }
            }
        }
        if proto == IPPROTO_UDP && ports.contains(&dport) {
            out.push((orig.to_vec(), zone));
        }
    }
    out
}

/// Delete the conntrack entries of UDP flows (IPv4 or IPv6) whose original destination port is
/// one of `ports`. A flow that vanished meanwhile is fine.
pub fn delete_udp_dport(v6: bool, ports: &[u16]) -> Result<()> {
    // A dump walks the whole (global) conntrack hash, a few ms with the default 262144
    // buckets; skip it when this namespace tracks no flow at all.
    if std::fs::read_to_string("/proc/sys/net/netfilter/nf_conntrack_count")
        .is_ok_and(|n| n.trim() == "0")
    {
        return Ok(());
    }
    let family = if v6 { libc::AF_INET6 } else { libc::AF_INET } as u8;
    let mut nl = Nftables::open()?;
    let dump = nl
        .request_raw(SUBSYS_CTNETLINK << 8 | MSG_GET, family, F_DUMP, &[])
        .ctx("conntrack: dump the table")?;
    for (orig, zone) in matching(&dump, ports) {
        let mut w = Writer::default();
        w.nest(CTA_TUPLE_ORIG, |w| w.buf.extend_from_slice(&orig));
        if let Some(z) = zone {
            w.attr(CTA_ZONE, &z);
        }
        match nl.request_raw(SUBSYS_CTNETLINK << 8 | MSG_DELETE, family, 0, &w.buf) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => {
                let what = format!("conntrack: delete a UDP entry for ports {ports:?}");
                return Err(Error::from(e).ctx(what));
            }
        }
    }
    Ok(())
}
