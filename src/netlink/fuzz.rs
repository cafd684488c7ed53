//! Entry point for the in-process fuzz target (tests/fuzz_parsers.rs) into the readers of
//! kernel replies: the datagram's message and attribute walk, NLMSG_ERROR's extended ack, and
//! the link, address, route, rule, qdisc and bridge-VLAN decoders. A reply is the kernel's, but
//! what it describes (names, addresses, aliases, nested link info) a container can set. Not an
//! API: hidden from the docs, never called by the binary.

use super::{bridge, link, route, rule, socket, tc, wire};

/// Walk one received datagram and decode every message with every decoder (whatever its type
/// says): returns how much was decoded, so nothing is optimised away.
pub fn reply(buf: &[u8]) -> usize {
    let mut n = 0;
    for m in wire::messages(buf) {
        n += wire::attrs(m.payload).count();
        if m.ty == wire::NLMSG_ERROR {
            n += socket::ext_ack(m.flags, m.payload.get(4..).unwrap_or_default()).len();
        }
        n += link::parse(m.payload).map_or(0, |l| l.name.len());
        n += super::addr::parse(m.payload).map_or(0, |_| 1);
        n += route::parse(m.payload).map_or(0, |_| 1);
        n += rule::parse(m.payload).map_or(0, |_| 1);
        n += tc::parse(m.payload).map_or(0, |q| q.kind.len());
        n += bridge::parse_vlans(m.payload).len();
    }
    n
}

/// Walk one received nf_tables datagram as the chain and rule dumps read it (names, handles,
/// hooks, and a rule's comment from its user data), and its rules as the iptables backend
/// reads iptables-nft's (expressions decoded into iptables-save's text): returns how much was
/// read.
pub fn nft_dump(buf: &[u8]) -> usize {
    crate::netfilter::nft::read_dump(buf) + crate::netfilter::iptables::read_dump(buf)
}
