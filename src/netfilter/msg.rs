//! Netlink wire helpers for nf_tables: big-endian readers and the user-data TLV format `nft`
//! uses for comments; the attribute writer and the generic readers are [`crate::netlink::wire`]'s.

pub use crate::netlink::wire::{Writer, attrs, get_str};

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
    if comment.contains('\0') {
        return None;
    }
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
