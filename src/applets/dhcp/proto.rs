//! The protocol between the `dhcp` plugin and `dhcp daemon`: one JSON object per connection on
//! the daemon's unix socket. The plugin writes a [`Call`] and shuts down its writing side; the
//! daemon answers `{"result": <CNI 1.1.0 result>}` (ADD), `{}` (other verbs) or
//! `{"code": N, "msg": "…"}` and closes.
//!
//! Upstream's plugin and daemon speak Go net/rpc (gob over HTTP, [`super::gorpc`]) instead.
//! cnibox's daemon tells the two apart by a connection's first byte (`{` or `C` of `CONNECT`)
//! and serves both; cnibox's plugin speaks this one first and, when the answer is HTTP (Go's
//! daemon refusing it with `400 Bad Request`), makes the call again in Go's.
//!
//! ```text
//! {"op":"add","containerID":"c1","network":"net1","ifName":"eth0","netns":"/run/netns/c1",
//!  "options":[[12,"myhost"]],"request":[3,1],"priority":0}
//! {"op":"gc","network":"net1","keep":[["c1","eth0"]]}
//! ```
//! `op` is `add`, `del`, `check`, `status` or `gc`; `options` are the option codes and values
//! the client sends (`provide`), `request` the parameter request list (option 55).

// Foreign bytes: every numeric conversion is checked (try_from, or a cast proven exact).
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use crate::error::{CodeContext, Error, Result, code};
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr};
use serde_json::{Value, json};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// What a call asks the daemon to do: the plugin's verb.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Op {
    /// Hand over the attachment's lease, acquiring one when none is held.
    Add,
    /// Release the attachment's lease.
    Del,
    /// Whether the daemon holds the attachment's lease.
    Check,
    /// Whether the daemon answers; the default, as it changes nothing.
    #[default]
    Status,
    /// Release the network's leases whose attachments are not in `keep`.
    Gc,
}

impl Op {
    const NAMES: [(Op, &'static str); 5] = [
        (Op::Add, "add"),
        (Op::Del, "del"),
        (Op::Check, "check"),
        (Op::Status, "status"),
        (Op::Gc, "gc"),
    ];

    /// The name on the wire.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(o, _)| *o == self)
            .map_or("", |(_, n)| n)
    }

    /// The operation named `s` on the wire.
    pub fn from_name(s: &str) -> Option<Op> {
        Self::NAMES.iter().find(|(_, n)| *n == s).map(|(o, _)| *o)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Call {
    pub op: Op,
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
            "op": self.op.name(), "containerID": self.container_id, "network": self.network,
            "ifName": self.ifname, "netns": self.netns, "options": self.options,
            "request": self.request, "priority": self.priority, "keep": self.keep,
        })
    }

    /// The daemon's reading: absent members are empty, members of the wrong type an error
    /// (code 6, as is an `op` that names no [`Op`]).
    pub fn from_json(v: &Value) -> Result<Call> {
        let call =
            Self::members(v).ok_or_else(|| Error::decode("bad call: not a cnibox dhcp call"))?;
        let op = call.0.as_str();
        let op = Op::from_name(op).ok_or_else(|| Error::decode(format!("unknown call {op:?}")))?;
        Ok(Call { op, ..call.1 })
    }

    /// The members of a call: its `op` as written, and the rest.
    fn members(v: &Value) -> Option<(String, Call)> {
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
        let op = s("op")?;
        Some((
            op,
            Call {
                op: Op::default(),
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
            },
        ))
    }
}

/// The longest call or answer either side reads.
pub const MAX_MESSAGE: u64 = 1 << 20;

/// How long the plugin waits for the daemon to answer `op`. ADD: the daemon's acquire budget
/// at its default flags (`-resendtimeout` 3m28s, the last attempt up to twice `-timeout` 10s)
/// and a margin; a daemon run with longer ones is cut there, and releases the lease it gets
/// too late (it cannot hand it over). DEL and GC wait for lease threads to send their
/// DHCPRELEASE; CHECK and STATUS only look.
pub fn deadline(op: Op) -> Duration {
    use super::flags::{DEFAULT_RESEND_TIMEOUT, DEFAULT_TIMEOUT};
    match op {
        Op::Add => DEFAULT_RESEND_TIMEOUT + 2 * DEFAULT_TIMEOUT + Duration::from_secs(30),
        Op::Del | Op::Gc => Duration::from_secs(10),
        Op::Check | Op::Status => Duration::from_secs(5),
    }
}

/// Why a call did not get an answer.
pub enum CallError {
    /// Nobody listens: DEL treats it as nothing to release.
    Unreachable(Error),
    /// The daemon took the call and did not answer in time: DEL and GC treat it as absent
    /// (the daemon still does what it was asked).
    Silent(Error),
    /// The daemon answered with an error, or the exchange broke.
    Failed(Error),
    /// An HTTP server answered: Go's daemon, which speaks net/rpc ([`super::gorpc`]).
    GoDaemon,
}

/// Send `call` to the daemon at `socket` and return its answer, within [`deadline`].
pub fn call(socket: &str, call: &Call) -> std::result::Result<Value, CallError> {
    call_within(socket, call, deadline(call.op))
}

/// [`call`] with a deadline `limit` from now for the whole exchange: connecting (a daemon
/// that stopped accepting fills its backlog), writing and reading (one that accepts and stays
/// silent, or trickles).
pub fn call_within(
    socket: &str,
    call: &Call,
    limit: Duration,
) -> std::result::Result<Value, CallError> {
    let end = Instant::now() + limit;
    let silent = || silent(socket, limit);
    let mut s = dial(socket, end, limit)?;
    let timed_out =
        |e: &std::io::Error| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
    // Each blocking step gets what is left of the deadline (a zero timeout would mean none).
    let left = || {
        let d = end.saturating_duration_since(Instant::now());
        (!d.is_zero()).then_some(d)
    };
    let body = call.to_json().to_string();
    let wrote = match left() {
        None => return Err(silent()),
        Some(d) => s
            .set_write_timeout(Some(d))
            .and_then(|()| s.write_all(body.as_bytes()))
            .and_then(|()| s.shutdown(std::net::Shutdown::Write)),
    };
    match wrote {
        Err(e) if timed_out(&e) => return Err(silent()),
        Err(e) => return Err(CallError::Failed(Error::io("write to DHCP daemon", e))),
        Ok(()) => {}
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(d) = left() else {
            return Err(silent());
        };
        let n = s
            .set_read_timeout(Some(d))
            .and_then(|()| s.read(&mut chunk));
        match n {
            Ok(0) => break,
            Ok(n) if (buf.len() + n) as u64 > MAX_MESSAGE => {
                return Err(CallError::Failed(Error::internal(format!(
                    "bad answer from DHCP daemon: longer than {MAX_MESSAGE} bytes"
                ))));
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => return Err(silent()),
            Err(e) => return Err(CallError::Failed(Error::io("read from DHCP daemon", e))),
        }
    }
    if buf.starts_with(b"HTTP/") {
        return Err(CallError::GoDaemon);
    }
    answer(&buf).map_err(CallError::Failed)
}

/// The daemon at `socket` did not answer within `limit`.
pub(super) fn silent(socket: &str, limit: Duration) -> CallError {
    CallError::Silent(
        Error::try_again(format!(
            "DHCP daemon at {socket} did not answer within {}s",
            limit.as_secs()
        ))
        .with_details("is `dhcp daemon` stuck? (it took the call and never answered)"),
    )
}

/// Connect to the daemon at `socket` before `end` (`limit` from the start).
pub(super) fn dial(
    socket: &str,
    end: Instant,
    limit: Duration,
) -> std::result::Result<UnixStream, CallError> {
    connect(socket, end).map_err(|e| match e {
        None => silent(socket, limit),
        Some(e) => CallError::Unreachable(
            Error::io(format!("error dialing DHCP daemon at {socket}"), e)
                .with_details("is `dhcp daemon` running?"),
        ),
    })
}

/// Connect to `socket` before `end`: `None` when the daemon's backlog stayed full until then
/// (it stopped accepting), else the connect error.
fn connect(socket: &str, end: Instant) -> std::result::Result<UnixStream, Option<std::io::Error>> {
    let addr = UnixAddr::new(socket).map_err(|e| Some(e.into()))?;
    // Non-blocking, so a full backlog is EAGAIN instead of a wait without end.
    let fd = nix::sys::socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(|e| Some(e.into()))?;
    loop {
        match nix::sys::socket::connect(fd.as_raw_fd(), &addr) {
            // EISCONN: a connect interrupted by a signal went through meanwhile.
            Ok(()) | Err(Errno::EISCONN) => break,
            Err(Errno::EAGAIN | Errno::EINTR) if Instant::now() < end => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(Errno::EAGAIN) => return Err(None),
            Err(e) => return Err(Some(e.into())),
        }
    }
    let s = UnixStream::from(fd);
    s.set_nonblocking(false).map_err(Some)?;
    Ok(s)
}

/// The daemon's answer: its result, or its error. An error code that is no CNI error code (0,
/// which would read as success, or one past u32, which would be cut to another code) becomes
/// 999 with the daemon's code in the message.
fn answer(buf: &[u8]) -> Result<Value> {
    let v: Value =
        serde_json::from_slice(buf).ctx_code(code::INTERNAL, "bad answer from DHCP daemon")?;
    let Some(c) = v.get("code") else {
        return Ok(v);
    };
    let msg = v.get("msg").and_then(Value::as_str).unwrap_or_default();
    Err(
        match c
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n != 0)
        {
            Some(code) => Error::new(code, msg),
            None => Error::internal(format!(
                "DHCP daemon answered with error code {c}, which is no CNI error code: {msg}"
            )),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip_and_bad_members() {
        let c = Call {
            op: Op::Add,
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
            Op::Status
        );
        let e = Call::from_json(&json!({"op": "renew"})).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (6, "unknown call \"renew\""));
        for bad in [
            json!({"op": 1}),
            json!({"options": [[256, "x"]]}),
            json!({"options": [[1]]}),
            json!({"request": [-1]}),
            json!({"priority": 4294967296u64}),
            json!({"keep": [["a", 2]]}),
        ] {
            let e = Call::from_json(&bad).unwrap_err();
            assert_eq!(e.msg, "bad call: not a cnibox dhcp call", "{bad}");
        }
    }

    /// A daemon that takes the call and never answers (it holds the connection for 5 s, so
    /// a call without a deadline fails this test instead of hanging it).
    #[test]
    fn a_silent_daemon_is_cut_at_the_deadline() {
        let dir = std::env::temp_dir().join(format!("cnibox-dhcp-proto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("silent.sock");
        let _ = std::fs::remove_file(&path);
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (c, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_secs(5));
            drop(c);
        });
        let start = Instant::now();
        let call = Call {
            op: Op::Del,
            ..Call::default()
        };
        let r = call_within(path.to_str().unwrap(), &call, Duration::from_secs(1));
        let took = start.elapsed();
        let _ = server.join();
        let _ = std::fs::remove_dir_all(&dir);
        let Err(CallError::Silent(e)) = r else {
            panic!("not cut as silent after {took:?}");
        };
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert_eq!(e.code, 11);
        assert!(e.msg.ends_with("did not answer within 1s"), "{}", e.msg);
    }

    #[test]
    fn deadlines_cover_the_daemons_default_budget() {
        assert!(deadline(Op::Add) > Duration::from_secs(208 + 20));
        assert!(deadline(Op::Add) < Duration::from_secs(300));
        assert_eq!(deadline(Op::Del), Duration::from_secs(10));
        assert_eq!(deadline(Op::Status), Duration::from_secs(5));
    }

    /// The daemon's error codes: a CNI code passes, 0 (success) and codes past u32 (cut to
    /// another one) and non-numbers become 999 naming the daemon's code.
    #[test]
    fn daemon_error_codes() {
        let e = answer(br#"{"code": 7, "msg": "m"}"#).unwrap_err();
        assert_eq!((e.code, e.msg.as_str()), (7, "m"));
        let e = answer(br#"{"code": 4294967295, "msg": "m"}"#).unwrap_err();
        assert_eq!(e.code, u32::MAX);
        for (raw, shown) in [
            ("0", "0"),
            ("1099511627783", "1099511627783"),
            ("4294967296", "4294967296"),
            ("-1", "-1"),
            ("\"7\"", "\"7\""),
            ("1.5", "1.5"),
            ("null", "null"),
        ] {
            let e = answer(format!(r#"{{"code": {raw}, "msg": "m"}}"#).as_bytes()).unwrap_err();
            assert_eq!(e.code, 999, "{raw}");
            assert_eq!(
                e.msg,
                format!(
                    "DHCP daemon answered with error code {shown}, which is no CNI error code: m"
                )
            );
        }
        assert_eq!(answer(br#"{"result": {}}"#).unwrap(), json!({"result": {}}));
        assert_eq!(answer(b"{").unwrap_err().code, 999);
    }
}
