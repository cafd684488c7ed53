//! Writing and reading netlink wire data, shared by the rtnetlink client ([`crate::netlink`]) and the
//! nf_tables client ([`crate::netfilter`]): an attribute writer (nests, strings, integers), the
//! messages of a received datagram, the attributes (TLVs) of a payload, and decoders for their
//! scalar and string payloads. Lengths and types
//! are host-endian, as netlink defines them; values that a protocol sends big-endian (most of
//! nf_tables) have their own decoders there.
//!
//! Everything here tolerates malformed input: a truncated message or attribute ends the
//! iteration, a short scalar decodes to `None`.

pub const NLMSG_HDRLEN: usize = 16;
pub const NLA_F_NESTED: u16 = 0x8000;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;

/// A growing buffer of netlink attributes (and message headers).
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

fn pad(buf: &mut Vec<u8>) {
    buf.resize((buf.len() + 3) & !3, 0);
}

impl Writer {
    pub fn attr(&mut self, ty: u16, data: &[u8]) {
        self.buf
            .extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        pad(&mut self.buf);
    }
    /// A NUL-terminated string attribute.
    pub fn str(&mut self, ty: u16, s: &str) {
        let mut v = Vec::with_capacity(s.len() + 1);
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.attr(ty, &v);
    }
    pub fn be32(&mut self, ty: u16, v: u32) {
        self.attr(ty, &v.to_be_bytes());
    }
    pub fn be64(&mut self, ty: u16, v: u64) {
        self.attr(ty, &v.to_be_bytes());
    }
    pub fn u8(&mut self, ty: u16, v: u8) {
        self.attr(ty, &[v]);
    }
    pub fn u16(&mut self, ty: u16, v: u16) {
        self.attr(ty, &v.to_ne_bytes());
    }
    pub fn u32(&mut self, ty: u16, v: u32) {
        self.attr(ty, &v.to_ne_bytes());
    }
    /// A nested attribute whose content `f` writes.
    pub fn nest(&mut self, ty: u16, f: impl FnOnce(&mut Writer)) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0, 0]);
        self.buf
            .extend_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
        f(self);
        let len = (self.buf.len() - at) as u16;
        self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }
}

/// One netlink message of a datagram.
pub struct NlMsg<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// Iterate the netlink messages of one received datagram.
pub fn messages(mut buf: &[u8]) -> impl Iterator<Item = NlMsg<'_>> {
    std::iter::from_fn(move || {
        if buf.len() < NLMSG_HDRLEN {
            return None;
        }
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return None;
        }
        let m = NlMsg {
            ty: u16::from_ne_bytes([buf[4], buf[5]]),
            flags: u16::from_ne_bytes([buf[6], buf[7]]),
            seq: u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]),
            payload: &buf[NLMSG_HDRLEN..len],
        };
        buf = &buf[((len + 3) & !3).min(buf.len())..];
        Some(m)
    })
}

/// Iterate the attributes in `buf` as (type without the NESTED/BYTEORDER flags, payload).
pub fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff;
        if len < 4 || len > buf.len() {
            return None;
        }
        let data = &buf[4..len];
        buf = &buf[((len + 3) & !3).min(buf.len())..];
        Some((ty, data))
    })
}

/// A NUL-terminated (or not) string payload.
pub fn get_str(data: &[u8]) -> String {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// The first byte of a payload.
pub fn get_u8(data: &[u8]) -> Option<u8> {
    data.first().copied()
}

/// A host-endian u16 at `at`.
pub fn get_u16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

/// A host-endian u32 at `at`.
pub fn get_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// An IPv4 or IPv6 address payload (4 or 16 bytes).
pub fn get_ip(data: &[u8]) -> Option<std::net::IpAddr> {
    match data.len() {
        4 => Some(<[u8; 4]>::try_from(data).ok()?.into()),
        16 => Some(<[u8; 16]>::try_from(data).ok()?.into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_messages_and_attributes_and_stops_at_garbage() {
        // One message (type 16, flags 2, seq 7) holding attributes 3 = "eth0" and 4 = 1500.
        // Lengths and types are host-endian: built with to_ne_bytes, so the test holds on
        // big-endian hosts too.
        let hdr = |len: u16, ty: u16| [len.to_ne_bytes(), ty.to_ne_bytes()].concat();
        let mut m = vec![0u8; 16];
        m.extend_from_slice(&hdr(9, 3));
        m.extend_from_slice(&[b'e', b't', b'h', b'0', 0, 0, 0, 0]);
        m.extend_from_slice(&hdr(8, 4));
        m.extend_from_slice(&1500u32.to_ne_bytes());
        let len = m.len() as u32;
        m[..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&16u16.to_ne_bytes());
        m[6..8].copy_from_slice(&2u16.to_ne_bytes());
        m[8..12].copy_from_slice(&7u32.to_ne_bytes());
        m.extend_from_slice(&[1, 2, 3]); // a truncated trailer
        let msgs: Vec<_> = messages(&m).collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!((msgs[0].ty, msgs[0].flags, msgs[0].seq), (16, 2, 7));
        let a: Vec<_> = attrs(msgs[0].payload).collect();
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].0, get_str(a[0].1)), (3, "eth0".to_string()));
        assert_eq!((a[1].0, get_u32(a[1].1, 0)), (4, Some(1500)));
        assert_eq!(get_u32(&[1, 2], 0), None);
        assert_eq!(get_ip(&[10, 0, 0, 1]), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(get_ip(&[1, 2, 3]), None);
    }

    /// The writer's bytes: TLV headers and u16/u32 payloads in host order, be32/be64 payloads
    /// in network order whatever the host, strings NUL-terminated, everything padded to 4, a
    /// nest's length covering its content and its type flagged NLA_F_NESTED.
    #[test]
    fn writes_known_bytes_in_the_right_byte_order() {
        let hdr = |len: u16, ty: u16| [len.to_ne_bytes(), ty.to_ne_bytes()].concat();
        let mut w = Writer::default();
        w.be32(1, 0x0102_0304);
        w.be64(2, 0x1122_3344_5566_7788);
        w.u16(3, 0xabcd);
        w.u32(4, 0x0a0b_0c0d);
        w.str(5, "lo");
        w.nest(6, |w| w.u8(7, 9));
        let expected = [
            hdr(8, 1),
            vec![1, 2, 3, 4],
            hdr(12, 2),
            vec![0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88],
            hdr(6, 3),
            0xabcdu16.to_ne_bytes().to_vec(),
            vec![0, 0],
            hdr(8, 4),
            0x0a0b_0c0du32.to_ne_bytes().to_vec(),
            hdr(7, 5),
            vec![b'l', b'o', 0, 0],
            hdr(12, 6 | NLA_F_NESTED),
            hdr(5, 7),
            vec![9, 0, 0, 0],
        ]
        .concat();
        assert_eq!(w.buf, expected);
        // On a little-endian host (x86_64, aarch64, armv7) the first header is [8, 0, 1, 0].
        if cfg!(target_endian = "little") {
            assert_eq!(w.buf[..4], [8, 0, 1, 0]);
        } else {
            assert_eq!(w.buf[..4], [0, 8, 0, 1]);
        }
    }
}
