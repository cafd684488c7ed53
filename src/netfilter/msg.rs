//! Netlink wire helpers for nf_tables: an attribute writer (nests, strings, big-endian
//! integers), big-endian readers and the user-data TLV format `nft` uses for comments; the
//! generic readers are [`crate::nlmsg`]'s.

pub const NLA_F_NESTED: u16 = 0x8000;
pub use crate::nlmsg::{NLMSG_DONE, NLMSG_ERROR, attrs, get_str, messages};

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

pub fn get_be32(data: &[u8]) -> u32 {
    data.get(..4)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u32::from_be_bytes)
}

pub fn get_be64(data: &[u8]) -> u64 {
    data.get(..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_be_bytes)
}

/// Encode a comment as `nft` user data: TLV type 0 (`NFTNL_UDATA_*_COMMENT`), NUL-terminated.
pub fn udata_comment(comment: &str) -> Option<Vec<u8>> {
    let len = u8::try_from(comment.len() + 1).ok()?;
    let mut v = Vec::with_capacity(comment.len() + 3);
    v.extend_from_slice(&[0, len]);
    v.extend_from_slice(comment.as_bytes());
    v.push(0);
    Some(v)
}

/// The comment (TLV type 0) of `nft` user data, if any.
pub fn udata_get_comment(mut data: &[u8]) -> Option<String> {
    while data.len() >= 2 {
        let (ty, len) = (data[0], data[1] as usize);
        let value = data.get(2..2 + len)?;
        if ty == 0 {
            return Some(get_str(value));
        }
        data = &data[2 + len..];
    }
    None
}
