//! Placeholder for bridge ipMasq (being written on its own branch).

use crate::cni::config::Attachment;
use crate::cni::{Error, Result};
use ipnet::IpNet;

pub fn setup(
    _backend: Option<&str>,
    _network: &str,
    _cid: &str,
    _ifname: &str,
    _ips: &[IpNet],
) -> Result<()> {
    Err(Error::new(
        crate::cni::error::code::UNSUPPORTED_FIELD,
        "ipMasq is not available in this build",
    ))
}

pub fn teardown(_network: &str, _cid: &str, _ifname: &str, _ips: &[IpNet]) -> Result<()> {
    Ok(())
}

pub fn gc(_network: &str, _valid: &[Attachment]) -> Result<()> {
    Ok(())
}
