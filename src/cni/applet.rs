//! What an applet is: the table's row (a plugin's name, the spec versions it speaks and its
//! handlers, which the driver `skel.rs` calls and delegation `delegate.rs` finds by name) and
//! the request each handler is handed — the environment plus the network configuration on
//! stdin, with the keys every plugin shares ([`NetConf`]). The two are one file because each
//! names the other: a handler takes a `Request`, and a `Request` carries the table for
//! in-process delegation.

use super::config::NetConf;
use super::env::{Env, validate_config_ifname};
use super::error::{Error, Result};
use super::gojson;
use super::result::{CniResult, Dns};
use super::version::Version;
use crate::attachment::Attachment;
use crate::error::{CodeContext, Context, code};
use crate::netns::NetNs;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// ADD's handler: the result to print.
pub type AddHandler = fn(&Request) -> Result<CniResult>;
/// The other verbs' handlers: success prints nothing.
pub type Handler = fn(&Request) -> Result<()>;

/// One row of the applet table.
pub struct Applet {
    pub name: &'static str,
    pub versions: &'static [Version],
    pub add: AddHandler,
    pub del: Handler,
    pub check: Handler,
    /// `None`: STATUS succeeds without doing anything (as the Go skel does).
    pub status: Option<Handler>,
    /// `None`: GC succeeds without doing anything.
    pub gc: Option<Handler>,
}

/// One invocation: validated environment, the raw and common config, the negotiated version.
pub struct Request {
    pub env: Env,
    pub stdin: Vec<u8>,
    pub raw: Value,
    pub conf: NetConf,
    pub version: Version,
    /// The binary's applet table: delegation runs IPAM applets of this binary in-process.
    pub applets: &'static [&'static Applet],
}

impl Request {
    /// Decode applet-specific keys from the config (code 6 on a type mismatch).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        gojson::from_value(&self.raw).ctx_code(code::DECODE_FAILURE, "failed to load netconf")
    }

    /// `prevResult`, parsed in the config's version when it carries none of its own. Its
    /// interface names are kernel names (chained plugins use them in rules, sysctl paths and
    /// netlink requests), so each must be one: code 7 naming the entry otherwise.
    pub fn prev_result(&self) -> Result<Option<CniResult>> {
        let prev = match &self.conf.prev_result {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => CniResult::from_json(v, self.version).ctx("could not parse prevResult")?,
        };
        for (i, iface) in prev.interfaces.iter().enumerate() {
            if !iface.name.is_empty() {
                validate_config_ifname(&format!("prevResult.interfaces[{i}].name"), &iface.name)?;
            }
        }
        Ok(Some(prev))
    }

    /// prevResult's addresses, empty when there is none or it cannot be read: DEL's hints
    /// (e.g. which masquerading rules to delete without reading the whole table).
    pub fn prev_addresses(&self) -> Vec<ipnet::IpNet> {
        self.prev_result()
            .ok()
            .flatten()
            .map(|p| p.ips.iter().map(|ip| ip.address).collect())
            .unwrap_or_default()
    }

    /// The config's `dns` when it replaces IPAM's, as upstream's bridge and ptp decide
    /// (`dnsConfSet`): a list given, even empty (`"nameservers": []` clears IPAM's), or a
    /// domain; `{}` or lists that are `null` leave IPAM's DNS in place.
    pub fn dns_override(&self) -> Option<Dns> {
        let given = gojson::member(&self.raw, "dns")?;
        let dns = self.conf.dns.as_ref()?;
        let listed = ["nameservers", "search", "options"]
            .iter()
            .any(|k| gojson::member(given, k).is_some());
        (listed || !dns.domain.is_empty()).then(|| dns.clone())
    }

    /// CNI_NETNS, opened: a missing path, or one that is not a network namespace, is an error
    /// naming it.
    pub fn netns(&self) -> Result<NetNs> {
        NetNs::open(&self.env.netns).map_err(Error::from)
    }

    /// CNI_NETNS when it exists: `None` when it is unset or gone (DEL's tolerance).
    pub fn netns_if_exists(&self) -> Result<Option<NetNs>> {
        NetNs::open_existing(&self.env.netns)
    }

    /// The IPAM plugin's type, if the config names one.
    pub fn ipam_type(&self) -> Option<&str> {
        self.conf
            .ipam
            .as_ref()
            .map(|i| i.kind.as_str())
            .filter(|k| !k.is_empty())
    }

    /// GC input: the attachments that must be kept, or `None` when the runtime sent no list
    /// (then nothing may be collected; an empty list means nothing is valid).
    pub fn valid_attachments(&self) -> Option<&[Attachment]> {
        self.conf
            .valid_attachments
            .as_deref()
            .or(self.conf.legacy_attachments.as_deref())
    }

    /// A field of `runtimeConfig`, if present and not null (keys matched as Go matches them).
    pub fn runtime_config(&self, key: &str) -> Option<&Value> {
        gojson::member(gojson::member(&self.raw, "runtimeConfig")?, key)
    }

    /// A field of `args.cni`, if present and not null (keys matched as Go matches them).
    pub fn args_cni(&self, key: &str) -> Option<&Value> {
        let cni = gojson::member(gojson::member(&self.raw, "args")?, "cni")?;
        gojson::member(cni, key)
    }

    /// A string field of `runtimeConfig` such as `mac`: `None` when absent or null. The Go
    /// plugins decode these into Go strings, so another type fails their whole config
    /// ("cannot unmarshal number into Go struct field .runtimeConfig.mac of type string");
    /// here too, with code 6 naming the key, instead of being ignored.
    pub fn runtime_config_str(&self, key: &str) -> Result<Option<&str>> {
        string_field(self.runtime_config(key), "runtimeConfig", key)
    }

    /// A string field of `args.cni`, decoded as [`Request::runtime_config_str`].
    pub fn args_cni_str(&self, key: &str) -> Result<Option<&str>> {
        string_field(self.args_cni(key), "args.cni", key)
    }
}

fn string_field<'a>(v: Option<&'a Value>, parent: &str, key: &str) -> Result<Option<&'a str>> {
    match v {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Error::decode(format!(
            "failed to load netconf: {parent}.{key}: {}",
            gojson::from_value::<String>(other)
                .err()
                .map_or_else(|| "expected a string".to_string(), |e| e.to_string())
        ))),
    }
}
