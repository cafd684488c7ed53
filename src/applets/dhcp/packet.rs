//! DHCPv4 messages (RFC 2131, options RFC 2132/3442) and the IPv4/UDP frame around them, as
//! sent and received on a packet socket before the interface has an address.
//!
//! Only what a client needs: a message with its fixed fields and options (split and joined as
//! RFC 3396 says), and the lease values a result is made of.
// Foreign bytes: every numeric conversion is checked (try_from, or a cast proven exact).
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use std::net::Ipv4Addr;

pub const DISCOVER: u8 = 1;
pub const OFFER: u8 = 2;
pub const REQUEST: u8 = 3;
pub const ACK: u8 = 5;
pub const NAK: u8 = 6;
pub const RELEASE: u8 = 7;

pub const OPT_SUBNET_MASK: u8 = 1;
pub const OPT_ROUTER: u8 = 3;
pub const OPT_STATIC_ROUTES: u8 = 33;
pub const OPT_REQUESTED_IP: u8 = 50;
pub const OPT_LEASE_TIME: u8 = 51;
pub const OPT_MSG_TYPE: u8 = 53;
pub const OPT_SERVER_ID: u8 = 54;
pub const OPT_PARAM_LIST: u8 = 55;
pub const OPT_MESSAGE: u8 = 56;
pub const OPT_MAX_SIZE: u8 = 57;
pub const OPT_T1: u8 = 58;
pub const OPT_T2: u8 = 59;
pub const OPT_CLIENT_ID: u8 = 61;
pub const OPT_CLASSLESS_ROUTES: u8 = 121;

const COOKIE: [u8; 4] = [99, 130, 83, 99];
/// Fixed BOOTP part before the cookie.
const FIXED: usize = 236;
pub const CLIENT_PORT: u16 = 68;
pub const SERVER_PORT: u16 = 67;
pub const BROADCAST_FLAG: u16 = 0x8000;

#[derive(Clone, Debug, PartialEq)]
pub struct Msg {
    /// 1 request, 2 reply.
    pub op: u8,
    pub xid: u32,
    pub flags: u16,
    pub ciaddr: Ipv4Addr,
    pub yiaddr: Ipv4Addr,
    pub chaddr: [u8; 6],
    /// Options in the order written; a code appears once (later `set` replaces).
    pub options: Vec<(u8, Vec<u8>)>,
    /// The option that ran past the end of a received packet (the list ended there).
    pub truncated: Option<u8>,
}

impl Msg {
    /// A client request of `kind` (53) from `mac`.
    pub fn request(kind: u8, xid: u32, mac: [u8; 6]) -> Msg {
        let mut m = Msg {
            op: 1,
            xid,
            flags: 0,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            chaddr: mac,
            options: Vec::new(),
            truncated: None,
        };
        m.set(OPT_MSG_TYPE, vec![kind]);
        m
    }

    pub fn set(&mut self, code: u8, value: Vec<u8>) {
        match self.options.iter_mut().find(|(c, _)| *c == code) {
            Some(o) => o.1 = value,
            None => self.options.push((code, value)),
        }
    }

    pub fn get(&self, code: u8) -> Option<&[u8]> {
        self.options
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, v)| v.as_slice())
    }

    pub fn kind(&self) -> u8 {
        self.get(OPT_MSG_TYPE)
            .and_then(|v| v.first())
            .copied()
            .unwrap_or(0)
    }

    pub fn ip(&self, code: u8) -> Option<Ipv4Addr> {
        let v = self.get(code)?;
        (v.len() >= 4).then(|| Ipv4Addr::new(v[0], v[1], v[2], v[3]))
    }

    pub fn secs(&self, code: u8) -> Option<u32> {
        let v = self.get(code)?;
        (v.len() == 4).then(|| u32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; FIXED];
        b[0] = self.op;
        b[1] = 1; // Ethernet
        b[2] = 6;
        b[4..8].copy_from_slice(&self.xid.to_be_bytes());
        b[10..12].copy_from_slice(&self.flags.to_be_bytes());
        b[12..16].copy_from_slice(&self.ciaddr.octets());
        b[16..20].copy_from_slice(&self.yiaddr.octets());
        b[28..34].copy_from_slice(&self.chaddr);
        b.extend_from_slice(&COOKIE);
        for (code, value) in &self.options {
            // RFC 3396: a value over 255 bytes goes in consecutive instances of the option.
            let mut chunks = value.chunks(255).peekable();
            if chunks.peek().is_none() {
                b.extend_from_slice(&[*code, 0]);
            }
            for c in chunks {
                b.push(*code);
                b.push(u8::try_from(c.len()).unwrap_or(u8::MAX)); // at most 255
                b.extend_from_slice(c);
            }
        }
        b.push(255);
        // BOOTP relays and old servers drop messages shorter than 300 bytes.
        if b.len() < 300 {
            b.resize(300, 0);
        }
        b
    }

    /// A BOOTP message with the DHCP cookie; `None` for anything else. Repeated options are
    /// joined (RFC 3396); a truncated option ends the list.
    pub fn decode(b: &[u8]) -> Option<Msg> {
        if b.len() < FIXED + 4 || b[FIXED..FIXED + 4] != COOKIE || b[1] != 1 || b[2] != 6 {
            return None;
        }
        let ip = |i: usize| Ipv4Addr::new(b[i], b[i + 1], b[i + 2], b[i + 3]);
        let mut m = Msg {
            op: b[0],
            xid: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            flags: u16::from_be_bytes([b[10], b[11]]),
            ciaddr: ip(12),
            yiaddr: ip(16),
            chaddr: [b[28], b[29], b[30], b[31], b[32], b[33]],
            options: Vec::new(),
            truncated: None,
        };
        let mut i = FIXED + 4;
        while i < b.len() {
            let code = b[i];
            match code {
                0 => i += 1,
                255 => break,
                _ => {
                    let Some(v) = b
                        .get(i + 1)
                        .and_then(|&len| b.get(i + 2..i + 2 + len as usize))
                    else {
                        m.truncated = Some(code);
                        break;
                    };
                    match m.options.iter_mut().find(|(c, _)| *c == code) {
                        Some(o) => o.1.extend_from_slice(v),
                        None => m.options.push((code, v.to_vec())),
                    }
                    i += 2 + v.len();
                }
            }
        }
        Some(m)
    }

    /// Address and prefix length of a lease (yiaddr, option 1).
    pub fn address(&self) -> Option<(Ipv4Addr, u8)> {
        let mask = u32::from(self.ip(OPT_SUBNET_MASK)?);
        // A mask must be contiguous ones.
        if mask.leading_ones() + mask.trailing_zeros() != 32 {
            return None;
        }
        Some((self.yiaddr, u8::try_from(mask.leading_ones()).ok()?))
    }

    /// The first router (option 3), as upstream's gateway.
    pub fn router(&self) -> Option<Ipv4Addr> {
        self.ip(OPT_ROUTER)
    }

    /// Option 121 (RFC 3442), `None` when absent, empty or malformed (a width over 32, a
    /// route that runs past the option): then it is ignored whole, as upstream's parser does.
    fn classless_routes(&self) -> Option<Vec<(Ipv4Addr, u8, Ipv4Addr)>> {
        let mut v = self.get(OPT_CLASSLESS_ROUTES).filter(|v| !v.is_empty())?;
        let mut out = Vec::new();
        while let Some(&width) = v.first() {
            let n = (width as usize).div_ceil(8);
            if width > 32 || v.len() < 1 + n + 4 {
                return None;
            }
            let mut d = [0u8; 4];
            d[..n].copy_from_slice(&v[1..1 + n]);
            let g = &v[1 + n..5 + n];
            out.push((
                Ipv4Addr::from(d),
                width,
                Ipv4Addr::new(g[0], g[1], g[2], g[3]),
            ));
            v = &v[5 + n..];
        }
        Some(out)
    }

    /// Why this reply cannot be a lease, where cnibox is stricter than upstream (README
    /// "Beyond upstream"): an option that runs past the packet, a `yiaddr` that is not a
    /// host address of its subnet, a router outside the subnet the default route goes through.
    /// A missing or bad subnet mask is left to the result (named there as upstream does).
    pub fn problem(&self) -> Option<String> {
        if let Some(code) = self.truncated {
            return Some(format!("option {code} runs past the end of the packet"));
        }
        let a = self.yiaddr;
        if a.is_unspecified() || a.is_broadcast() || a.is_multicast() || a.is_loopback() {
            return Some(format!("yiaddr {a} is not a unicast host address"));
        }
        let (_, prefix) = self.address()?;
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        let (ip, net) = (u32::from(a), u32::from(a) & mask);
        if prefix < 31 && ip == net | !mask {
            return Some(format!(
                "yiaddr {a} is the broadcast address of {}/{prefix}",
                Ipv4Addr::from(net)
            ));
        }
        if prefix < 31 && ip == net {
            return Some(format!(
                "yiaddr {a} is the network address of {}/{prefix}",
                Ipv4Addr::from(net)
            ));
        }
        if let Some(r) = self.router()
            && self.classless_routes().is_none()
            && u32::from(r) & mask != net
        {
            return Some(format!(
                "router {r} (option 3) is outside {a}/{prefix}: no route reaches it"
            ));
        }
        None
    }

    /// Routes of a lease as upstream builds them: option 121 alone when present (RFC 3442:
    /// then 33 and 3 are ignored), else option 33's classful routes plus a default route via
    /// the router. `(destination, prefix, gateway)`; gateway 0.0.0.0 means on-link.
    pub fn routes(&self) -> Vec<(Ipv4Addr, u8, Ipv4Addr)> {
        if let Some(routes) = self.classless_routes() {
            return routes;
        }
        let mut out = Vec::new();
        if let Some(v) = self.get(OPT_STATIC_ROUTES) {
            for r in v.chunks_exact(8) {
                let dst = Ipv4Addr::new(r[0], r[1], r[2], r[3]);
                // Go's IP.DefaultMask: the class of the first octet.
                let prefix = match r[0] {
                    0..=127 => 8,
                    128..=191 => 16,
                    192..=223 => 24,
                    _ => 32,
                };
                out.push((dst, prefix, Ipv4Addr::new(r[4], r[5], r[6], r[7])));
            }
        }
        if let Some(gw) = self.router() {
            out.push((Ipv4Addr::UNSPECIFIED, 0, gw));
        }
        out
    }
}

fn checksum(data: &[u8], mut sum: u32) -> u16 {
    for c in data.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !u16::try_from(sum).unwrap_or(u16::MAX) // folded: at most 0xffff
}

/// An IPv4/UDP datagram from the client port to the server port carrying `payload`.
pub fn frame(src: Ipv4Addr, dst: Ipv4Addr, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(&[0x45, 0x10]);
    // A message is at most a few KiB (options from one network config): lengths fit.
    b.extend_from_slice(&u16::try_from(total).unwrap_or(u16::MAX).to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    b.extend_from_slice(&src.octets());
    b.extend_from_slice(&dst.octets());
    let c = checksum(&b, 0);
    b[10..12].copy_from_slice(&c.to_be_bytes());
    b.extend_from_slice(&CLIENT_PORT.to_be_bytes());
    b.extend_from_slice(&SERVER_PORT.to_be_bytes());
    b.extend_from_slice(&u16::try_from(udp_len).unwrap_or(u16::MAX).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    // The pseudo header: addresses, protocol, UDP length.
    let mut pseudo = 17u32 + u32::try_from(udp_len).unwrap_or(u32::from(u16::MAX));
    for w in b[12..20].chunks(2) {
        pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    let c = match checksum(&b[20..], pseudo) {
        0 => 0xffff,
        c => c,
    };
    b[26..28].copy_from_slice(&c.to_be_bytes());
    b
}

/// The UDP payload of an IPv4 datagram to the client port, if `b` is one.
pub fn unframe(b: &[u8]) -> Option<&[u8]> {
    if b.len() < 20 || b[0] >> 4 != 4 || b[9] != 17 {
        return None;
    }
    let ihl = usize::from(b[0] & 15) * 4;
    let total = usize::from(u16::from_be_bytes([b[2], b[3]])).min(b.len());
    let udp = b.get(ihl..total)?;
    if udp.len() < 8 || u16::from_be_bytes([udp[2], udp[3]]) != CLIENT_PORT {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    udp.get(8..len.max(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(opts: &[(u8, &[u8])]) -> Msg {
        let mut m = Msg::request(ACK, 7, [2, 0, 0, 0, 0, 1]);
        m.op = 2;
        m.yiaddr = Ipv4Addr::new(10, 1, 2, 3);
        for (c, v) in opts {
            m.set(*c, v.to_vec());
        }
        m
    }

    #[test]
    fn encode_decode_round_trip_and_long_options_split() {
        let mut m = Msg::request(DISCOVER, 0xdeadbeef, [2, 1, 2, 3, 4, 5]);
        m.flags = BROADCAST_FLAG;
        m.ciaddr = Ipv4Addr::new(1, 2, 3, 4);
        m.set(
            OPT_CLIENT_ID,
            [0u8].iter().chain(&[b'x'; 300]).copied().collect(),
        );
        m.set(OPT_PARAM_LIST, vec![3, 1]);
        m.set(OPT_PARAM_LIST, vec![1]);
        let b = m.encode();
        assert_eq!(&b[236..240], &COOKIE);
        assert_eq!(b[0], 1);
        assert_eq!(&b[4..8], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&b[10..12], &[0x80, 0]);
        assert_eq!(&b[240..243], &[53, 1, DISCOVER]);
        // 301 bytes of client ID: 255 + 46 in two instances.
        assert_eq!(&b[243..245], &[61, 255]);
        assert_eq!(&b[500..502], &[61, 46]);
        let d = Msg::decode(&b).unwrap();
        assert_eq!(d, m);
        assert_eq!(d.get(OPT_PARAM_LIST), Some(&[1u8][..]));
        assert_eq!(d.kind(), DISCOVER);
        assert_eq!(Msg::request(REQUEST, 1, [0; 6]).encode().len(), 300);
    }

    #[test]
    fn decode_refuses_non_dhcp_and_survives_truncation() {
        assert!(Msg::decode(&[0u8; 239]).is_none());
        assert!(Msg::decode(&[0u8; 300]).is_none(), "no cookie");
        let mut b = reply(&[(OPT_SUBNET_MASK, &[255, 255, 255, 0])]).encode();
        b.truncate(240 + 3 + 2 + 3); // inside the mask option
        let d = Msg::decode(&b).unwrap();
        assert_eq!(d.kind(), ACK);
        assert_eq!(d.get(OPT_SUBNET_MASK), None);
        // Pad bytes and a missing end are fine.
        let mut b = reply(&[]).encode();
        b.truncate(243);
        b.extend_from_slice(&[0, 0, 51, 4, 0, 0, 0, 60]);
        assert_eq!(Msg::decode(&b).unwrap().secs(OPT_LEASE_TIME), Some(60));
    }

    #[test]
    fn lease_address_router_and_upstream_routes() {
        let m = reply(&[
            (OPT_SUBNET_MASK, &[255, 255, 255, 0]),
            (OPT_ROUTER, &[10, 1, 2, 1, 10, 1, 2, 254]),
            (
                OPT_STATIC_ROUTES,
                &[172, 16, 0, 0, 10, 1, 2, 9, 192, 168, 5, 0, 10, 1, 2, 8],
            ),
        ]);
        assert_eq!(m.address(), Some((Ipv4Addr::new(10, 1, 2, 3), 24)));
        assert_eq!(m.router(), Some(Ipv4Addr::new(10, 1, 2, 1)));
        let ip = Ipv4Addr::new;
        assert_eq!(
            m.routes(),
            [
                (ip(172, 16, 0, 0), 16, ip(10, 1, 2, 9)),
                (ip(192, 168, 5, 0), 24, ip(10, 1, 2, 8)),
                (ip(0, 0, 0, 0), 0, ip(10, 1, 2, 1)),
            ]
        );
        // Option 121 replaces 33 and the router's default route; width 0 is a default
        // route, a gateway of 0.0.0.0 an on-link route.
        let classless = [0, 10, 1, 2, 254, 20, 10, 99, 16, 0, 0, 0, 0];
        let with = |c: &[u8]| {
            reply(&[
                (OPT_ROUTER, &[10, 1, 2, 1]),
                (OPT_STATIC_ROUTES, &[172, 16, 0, 0, 10, 1, 2, 9]),
                (OPT_CLASSLESS_ROUTES, c),
            ])
        };
        assert_eq!(
            with(&classless).routes(),
            [
                (ip(0, 0, 0, 0), 0, ip(10, 1, 2, 254)),
                (ip(10, 99, 16, 0), 20, ip(0, 0, 0, 0)),
            ]
        );
        // A malformed option 121 (a width of 33, a route past its end) is ignored whole,
        // as v1.9.1 does: option 33 and the router instead.
        let fallback = [
            (ip(172, 16, 0, 0), 16, ip(10, 1, 2, 9)),
            (ip(0, 0, 0, 0), 0, ip(10, 1, 2, 1)),
        ];
        let mut bad = classless.to_vec();
        bad.extend_from_slice(&[33, 1, 2, 3, 4, 5, 10, 1, 2, 1]);
        assert_eq!(with(&bad).routes(), fallback);
        assert_eq!(with(&classless[..8]).routes(), fallback);
        assert_eq!(
            reply(&[(OPT_SUBNET_MASK, &[255, 0, 255, 0])]).address(),
            None
        );
        assert_eq!(reply(&[]).routes(), []);
    }

    #[test]
    fn problems_of_a_lease_are_named() {
        let mask = (OPT_SUBNET_MASK, &[255u8, 255, 255, 0][..]);
        assert_eq!(reply(&[mask, (OPT_ROUTER, &[10, 1, 2, 1])]).problem(), None);
        let at = |a: [u8; 4], opts: &[(u8, &[u8])]| {
            let mut m = reply(opts);
            m.yiaddr = Ipv4Addr::from(a);
            m.problem().unwrap_or_default()
        };
        assert!(at([0, 0, 0, 0], &[mask]).contains("yiaddr 0.0.0.0"));
        assert!(at([255; 4], &[mask]).contains("yiaddr 255.255.255.255"));
        assert!(at([10, 1, 2, 255], &[mask]).contains("broadcast address of 10.1.2.0/24"));
        assert!(at([10, 1, 2, 0], &[mask]).contains("network address"));
        let outside = [
            (OPT_SUBNET_MASK, &[255u8, 255, 255, 0][..]),
            (OPT_ROUTER, &[192, 0, 2, 1]),
        ];
        assert!(at([10, 1, 2, 3], &outside).contains("router 192.0.2.1"));
        // Reachable through option 121: left to the routes.
        let mut reach = outside.to_vec();
        reach.push((OPT_CLASSLESS_ROUTES, &[32, 192, 0, 2, 1, 0, 0, 0, 0]));
        assert_eq!(at([10, 1, 2, 3], &reach), "");
        // An option that runs past the packet.
        let mut b = reply(&[mask]).encode();
        let end = b.iter().rposition(|&x| x == 255).unwrap();
        b.truncate(end);
        b.extend_from_slice(&[OPT_ROUTER, 4, 10, 1]);
        let m = Msg::decode(&b).unwrap();
        assert_eq!(m.router(), None);
        assert!(m.problem().unwrap().contains("option 3 runs past"));
    }

    #[test]
    fn frame_checksums_verify_and_unframe_finds_the_payload() {
        let f = frame(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, b"hello");
        assert_eq!(f.len(), 20 + 8 + 5);
        assert_eq!(checksum(&f[..20], 0), 0, "IP header checksum");
        let mut pseudo = 17u32 + 13;
        for w in f[12..20].chunks(2) {
            pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        assert_eq!(checksum(&f[20..], pseudo), 0, "UDP checksum");
        // A reply comes to port 68: swap the ports of our own frame.
        let mut r = f.clone();
        r[20..24].copy_from_slice(&[0, 67, 0, 68]);
        assert_eq!(unframe(&r), Some(&b"hello"[..]));
        assert_eq!(unframe(&f), None, "to the server port");
        assert_eq!(unframe(&r[..10]), None);
        r[9] = 6;
        assert_eq!(unframe(&r), None, "not UDP");
    }
}
