//! The protocol between the `dhcp` plugin and `dhcp daemon`: one JSON object per connection on
//! the daemon's unix socket. The plugin writes a [`Call`] and shuts down its writing side; the
//! daemon answers `{"result": <CNI 1.1.0 result>}` (ADD), `{}` (other verbs) or
//! `{"code": N, "msg": "…"}` and closes.
//!
//! Upstream's plugin and daemon speak Go net/rpc (gob over HTTP) instead: cnibox's plugin
//! cannot use the Go daemon, nor the Go plugin cnibox's daemon. See README ("dhcp").
//!
//! ```text
//! {"op":"add","containerID":"c1","network":"net1","ifName":"eth0","netns":"/run/netns/c1",
//!  "options":[[12,"myhost"]],"request":[3,1],"priority":0}
//! {"op":"gc","network":"net1","keep":[["c1","eth0"]]}
//! ```
//! `op` is `add`, `del`, `check`, `status` or `gc`; `options` are the option codes and values
//! the client sends (`provide`), `request` the parameter request list (option 55).

use crate::error::{Context, Error, Result};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

#[derive(Debug, Default)]
pub struct Call {
    pub op: String,
    pub container_id: String,
    pub network: String,
    pub ifname: String,
    pub netns: String,
    pub options: Vec<(u8, String)>,
    pub request: Vec<u8>,
    pub priority: u32,
    pub keep: Vec<(String, String)>,
}

impl Call {
    pub fn to_json(&self) -> Value {
        json!({
            "op": self.op, "containerID": self.container_id, "network": self.network,
            "ifName": self.ifname, "netns": self.netns, "options": self.options,
            "request": self.request, "priority": self.priority, "keep": self.keep,
        })
    }

    /// The daemon's reading: absent members are empty, members of the wrong type an error.
    pub fn from_json(v: &Value) -> Option<Call> {
        let s = |k: &str| match v.get(k) {
            None => Some(String::new()),
            Some(x) => x.as_str().map(String::from),
        };
        let list = |k: &str| match v.get(k) {
            None => Some(&[][..]),
            Some(x) => x.as_array().map(Vec::as_slice),
        };
        fn pair(x: &Value) -> Option<(&Value, String)> {
            match x.as_array()?.as_slice() {
                [a, b] => Some((a, b.as_str()?.to_string())),
                _ => None,
            }
        }
        let byte = |x: &Value| x.as_u64().and_then(|n| u8::try_from(n).ok());
        Some(Call {
            op: s("op")?,
            container_id: s("containerID")?,
            network: s("network")?,
            ifname: s("ifName")?,
            netns: s("netns")?,
            options: list("options")?
                .iter()
                .map(|x| pair(x).and_then(|(a, b)| Some((byte(a)?, b))))
                .collect::<Option<_>>()?,
            request: list("request")?.iter().map(byte).collect::<Option<_>>()?,
            priority: match v.get("priority") {
                None => 0,
                Some(p) => u32::try_from(p.as_u64()?).ok()?,
            },
            keep: list("keep")?
                .iter()
                .map(|x| pair(x).and_then(|(a, b)| Some((a.as_str()?.to_string(), b))))
                .collect::<Option<_>>()?,
        })
    }
}

/// The longest call or answer either side reads.
pub const MAX_MESSAGE: u64 = 1 << 20;

/// Why the daemon could not be reached: DEL treats "nobody listening" as nothing to release.
pub enum CallError {
    Unreachable(Error),
    Failed(Error),
}

/// Send `call` to the daemon at `socket` and return its answer.
pub fn call(socket: &str, call: &Call) -> std::result::Result<Value, CallError> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        CallError::Unreachable(
            Error::io(format!("error dialing DHCP daemon at {socket}"), e)
                .with_details("is `dhcp daemon` running? (cnibox's plugin needs cnibox's daemon)"),
        )
    })?;
    let f = |r: Result<Value>| r.map_err(CallError::Failed);
    f((|| {
        s.write_all(call.to_json().to_string().as_bytes())
            .and_then(|_| s.shutdown(std::net::Shutdown::Write))
            .ctx("write to DHCP daemon")?;
        let mut buf = Vec::new();
        s.take(MAX_MESSAGE)
            .read_to_end(&mut buf)
            .ctx("read from DHCP daemon")?;
        let v: Value = serde_json::from_slice(&buf)
            .map_err(|e| Error::internal(format!("bad answer from DHCP daemon: {e}")))?;
        if let Some(code) = v.get("code").and_then(Value::as_u64) {
            let msg = v.get("msg").and_then(Value::as_str).unwrap_or_default();
            return Err(Error::new(code as u32, msg));
        }
        Ok(v)
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip_and_bad_members() {
        let c = Call {
            op: "add".into(),
            container_id: "c".into(),
            network: "n".into(),
            ifname: "eth0".into(),
            netns: "/run/netns/x".into(),
            options: vec![(12, "host".into())],
            request: vec![3, 1],
            priority: 7,
            keep: vec![("c".into(), "eth0".into())],
        };
        let v = c.to_json();
        assert_eq!(v["options"], json!([[12, "host"]]));
        let d = Call::from_json(&v).unwrap();
        assert_eq!(format!("{d:?}"), format!("{c:?}"));
        assert_eq!(
            Call::from_json(&json!({"op": "status"})).unwrap().op,
            "status"
        );
        for bad in [
            json!({"op": 1}),
            json!({"options": [[256, "x"]]}),
            json!({"options": [[1]]}),
            json!({"request": [-1]}),
            json!({"priority": 4294967296u64}),
            json!({"keep": [["a", 2]]}),
        ] {
            assert!(Call::from_json(&bad).is_none(), "{bad}");
        }
    }
}
