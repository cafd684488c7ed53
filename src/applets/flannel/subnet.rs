//! flanneld's `subnet.env`: read without blocking (a regular file of at most 64 KiB) and
//! parsed as flannel parses it.

use crate::cni::{Error, Result};
use crate::smallfile::{self, ReadError};
use ipnet::IpNet;

/// What flanneld wrote for this node (`subnet.env`).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct SubnetEnv {
    pub(super) networks: Vec<IpNet>,
    pub(super) subnet: Option<IpNet>,
    pub(super) ip6_networks: Vec<IpNet>,
    pub(super) ip6_subnet: Option<IpNet>,
    pub(super) mtu: Option<u32>,
    pub(super) ipmasq: Option<bool>,
}

/// Go's `net.ParseCIDR` network: the address masked to its prefix.
fn cidr(file: &str, key: &str, s: &str) -> Result<IpNet> {
    s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
        Error::internal(format!(
            "failed to load flannel 'subnet.env' file: {file}: {key}: invalid CIDR address: {s:.64}"
        ))
    })
}

fn cidr_list(file: &str, key: &str, s: &str) -> Result<Vec<IpNet>> {
    let mut out: Vec<IpNet> = Vec::new();
    for part in s.split(',') {
        let n = cidr(file, key, part)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

impl SubnetEnv {
    pub(super) fn parse(file: &str, text: &str) -> Result<SubnetEnv> {
        let mut se = SubnetEnv::default();
        for line in text.lines() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (key, value) = line.split_once('=').unwrap_or((line, ""));
            match key {
                "FLANNEL_NETWORK" => se.networks = cidr_list(file, key, value)?,
                "FLANNEL_SUBNET" => se.subnet = Some(cidr(file, key, value)?),
                "FLANNEL_IPV6_NETWORK" => se.ip6_networks = cidr_list(file, key, value)?,
                "FLANNEL_IPV6_SUBNET" => se.ip6_subnet = Some(cidr(file, key, value)?),
                "FLANNEL_MTU" => {
                    se.mtu = Some(value.parse().map_err(|_| {
                        Error::internal(format!(
                            "failed to load flannel 'subnet.env' file: {file}: FLANNEL_MTU: invalid number {value:.32}"
                        ))
                    })?)
                }
                "FLANNEL_IPMASQ" => se.ipmasq = Some(value == "true"),
                _ => {}
            }
        }
        let mut missing = Vec::new();
        if se.networks.is_empty() && se.ip6_networks.is_empty() {
            missing.extend(["FLANNEL_NETWORK", "FLANNEL_IPV6_NETWORK"]);
        }
        if se.subnet.is_none() && se.ip6_subnet.is_none() {
            missing.extend(["FLANNEL_SUBNET", "FLANNEL_IPV6_SUBNET"]);
        }
        if se.mtu.is_none() {
            missing.push("FLANNEL_MTU");
        }
        if se.ipmasq.is_none() {
            missing.push("FLANNEL_IPMASQ");
        }
        if !missing.is_empty() {
            return Err(Error::internal(format!(
                "failed to load flannel 'subnet.env' file: {file} is missing {}. Check the flannel pod log for this node.",
                missing.join(", ")
            )));
        }
        Ok(se)
    }

    /// Code 11 while the file does not exist (flanneld has not started on this node yet); code
    /// 7 naming `subnetFile` when it is not a regular file (a FIFO would block the read, a
    /// device such as /dev/zero never end it) or is larger than flanneld ever writes. Bytes
    /// that are not UTF-8 are read as flanneld's Go reader reads them: they fail only a line
    /// flannel parses.
    pub(crate) fn load(file: &str) -> Result<SubnetEnv> {
        match smallfile::read(file, MAX_SUBNET_FILE) {
            Ok(bytes) => SubnetEnv::parse(file, &String::from_utf8_lossy(&bytes)),
            Err(ReadError::NotFound) => Err(Error::try_again(format!(
                "failed to load flannel 'subnet.env' file: open {file}: no such file or directory. Check the flannel pod log for this node."
            ))),
            Err(ReadError::NotRegular(_)) => Err(Error::config(format!(
                "subnetFile {file:?}: not a regular file"
            ))),
            Err(ReadError::TooLarge(max)) => Err(Error::config(format!(
                "subnetFile {file:?}: larger than {max} bytes"
            ))),
            Err(ReadError::Io(e)) => Err(Error::host_io(
                format_args!("failed to load flannel 'subnet.env' file {file}"),
                e,
            )),
        }
    }
}

/// The most of `subnetFile` read: flanneld writes a few hundred bytes.
const MAX_SUBNET_FILE: u64 = 64 * 1024;
