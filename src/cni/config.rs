//! The keys every plugin's network configuration shares (SPEC.md "Plugin configuration"), as
//! the request a plugin receives carries them ([`super::applet::Request`]). Applets decode their
//! own keys from the same parsed JSON with `Request::decode`.

use super::result::Dns;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Default, Deserialize)]
pub struct IpamRef {
    #[serde(rename = "type", default)]
    pub kind: String,
}

pub use crate::attachment::Attachment;

/// Keys common to every plugin's configuration.
#[derive(Debug, Default, Deserialize)]
pub struct NetConf {
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    #[serde(default)]
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub ipam: Option<IpamRef>,
    #[serde(default)]
    pub dns: Option<Dns>,
    #[serde(rename = "prevResult", default)]
    pub prev_result: Option<Value>,
    #[serde(rename = "cni.dev/valid-attachments", default)]
    pub valid_attachments: Option<Vec<Attachment>>,
    /// The name libcni used before July 2024; it still sends both.
    #[serde(rename = "cni.dev/attachments", default)]
    pub legacy_attachments: Option<Vec<Attachment>>,
    /// Only checked for shape here (Go's decoders refuse a non-object); read through
    /// [`super::applet::Request::runtime_config`].
    #[serde(rename = "runtimeConfig", default)]
    #[allow(dead_code)]
    runtime_config: Option<serde_json::Map<String, Value>>,
    /// Only checked for shape here; read through [`super::applet::Request::args_cni`].
    #[serde(default)]
    #[allow(dead_code)]
    args: Option<ArgsConf>,
}

#[derive(Debug, Default, Deserialize)]
struct ArgsConf {
    #[serde(default)]
    #[allow(dead_code)]
    cni: Option<serde_json::Map<String, Value>>,
}
