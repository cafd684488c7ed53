//! One connection: Go's net/rpc when it starts with `CONNECT` ([`gorpc`]), else one cnibox
//! JSON call ([`super::super::proto`]), answered from the lease table.

// Foreign bytes: every numeric conversion is checked (try_from, or a cast proven exact).
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use super::super::conns::{IDLE, Ticket};
use super::super::gorpc::{self, OnUndelivered, Reply};
use super::super::mapping::key;
use super::super::proto::{Call, MAX_MESSAGE, Op};
use super::table::{Answer, Daemon};
use crate::cni::Version;
use crate::cni::env::Env;
use crate::error::{Error, Result};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// Serve connection `c`. A connection silent for [`IDLE`] (or a JSON call not whole by then)
/// is closed.
pub(super) fn serve(d: &'static Daemon, c: &UnixStream, ticket: &Ticket<'_>) {
    let mut c = c;
    let _ = c.set_read_timeout(Some(IDLE));
    let _ = c.set_write_timeout(Some(IDLE));
    let end = Instant::now() + IDLE;
    let mut first = [0u8];
    if c.read_exact(&mut first).is_err() {
        return;
    }
    if first[0] == b'C' {
        return serve_go(d, c, first[0], ticket);
    }
    let mut buf = first.to_vec();
    let call = read_call(c, end, &mut buf).and_then(|()| {
        let v: Value = serde_json::from_slice(&buf)
            .map_err(|_| Error::decode("bad call: not a cnibox dhcp call"))?;
        Call::from_json(&v)
    });
    ticket.busy(true);
    let added = call.as_ref().ok().map(key);
    let answer = |a: Answer| -> Result<(Value, bool)> {
        Ok(match a.result {
            Some(r) => (json!({ "result": r.to_value(Version::V110)? }), a.acquired),
            None => (json!({}), a.acquired),
        })
    };
    let (v, acquired) = match call.and_then(|call| d.answer(call)).and_then(answer) {
        Ok(a) => a,
        Err(e) => (json!({"code": e.code, "msg": e.msg}), false),
    };
    // A plugin that gave up waiting (its deadline passed) has closed the connection: nobody
    // will use a lease acquired for it, so it is released instead of kept forever.
    if let Err(e) = c.write_all(v.to_string().as_bytes())
        && acquired
        && let Some(k) = added
    {
        d.release_undelivered(&k, &format!(" ({e})"));
    }
}

/// Go's plugin's calls on `c`, which began with `first`: `DHCP.Allocate` is an ADD,
/// `DHCP.Release` a DEL.
fn serve_go(d: &'static Daemon, c: &UnixStream, first: u8, ticket: &Ticket<'_>) {
    let handle = |method: &str, env: Env, stdin: Vec<u8>| -> (Reply, OnUndelivered<'_>) {
        ticket.busy(true);
        let _idle = Idle(ticket);
        let op = if method == "DHCP.Allocate" {
            Op::Add
        } else {
            Op::Del
        };
        let call = super::super::go_call(op, env, stdin);
        let k = call.as_ref().ok().map(key);
        match call.and_then(|call| d.answer(call)) {
            Ok(Answer {
                result,
                acquired: true,
            }) => (
                Ok(result),
                k.map(|k| Box::new(move || d.release_undelivered(&k, "")) as _),
            ),
            Ok(Answer { result, .. }) => (Ok(result), None),
            Err(e) => (Err(e), None),
        }
    };
    gorpc::serve(c, first, &handle);
}

/// A connection's call was answered: it is idle again (when dropped).
struct Idle<'a, 'b>(&'a Ticket<'b>);

impl Drop for Idle<'_, '_> {
    fn drop(&mut self) {
        self.0.busy(false);
    }
}

/// The rest of a cnibox call (at most [`MAX_MESSAGE`] bytes in all, until the writer's end)
/// into `buf`, whole by `end`.
fn read_call(mut c: &UnixStream, end: Instant, buf: &mut Vec<u8>) -> Result<()> {
    let mut chunk = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::io("read call", std::io::ErrorKind::TimedOut.into()));
        }
        let _ = c.set_read_timeout(Some(left));
        let n = c.read(&mut chunk).map_err(|e| Error::io("read call", e))?;
        if n == 0 {
            return Ok(());
        }
        if (buf.len() + n) as u64 > MAX_MESSAGE - 1 {
            return Err(Error::decode("bad call: longer than a call can be"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
