//! A minimal D-Bus client: method calls with string arguments on the system bus, for the
//! firewall applet's firewalld backend (upstream uses godbus). It connects to
//! `DBUS_SYSTEM_BUS_ADDRESS` (its `unix:path=` entries, in order; `unix:abstract=` and other
//! transports, which no system bus uses, are skipped) or the spec's default socket, authenticates with SASL EXTERNAL as our uid, says `Hello`, and then
//! makes one call at a time, skipping signals and anything else that is not the answer. Every
//! call and the handshake have a deadline, so a bus that stops answering costs a bounded wait
//! (code 11), never a hung plugin; every method call carries NO_AUTO_START, so asking whether a
//! service runs never starts it. Replies are checked by [`wire`]: a malformed one is an error.

pub mod fuzz;
mod wire;

use crate::error::{Context, Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

pub use wire::Value;

const DEFAULT_ADDRESS: &str = "unix:path=/var/run/dbus/system_bus_socket";
const BUS_NAME: &str = "org.freedesktop.DBus";
const BUS_PATH: &str = "/org/freedesktop/DBus";
/// Longest line of the SASL exchange we wait for.
const MAX_LINE: usize = 512;

/// The address this process connects to (for messages).
pub fn system_address() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .ok()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| DEFAULT_ADDRESS.to_string())
}

/// One connection to a bus, past the handshake.
pub struct Bus {
    sock: UnixStream,
    serial: u32,
    timeout: Duration,
    /// Received bytes not yet consumed.
    pending: Vec<u8>,
    /// Where we are connected, for messages.
    address: String,
}

/// The socket paths of a D-Bus address string: its `unix:path=` entries (other transports,
/// and abstract sockets, which no system bus uses, are skipped), values %-unescaped.
fn endpoints(address: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for entry in address.split(';') {
        let Some(params) = entry.strip_prefix("unix:") else {
            continue;
        };
        out.extend(
            params
                .split(',')
                .filter_map(|kv| unescape(kv.strip_prefix("path=")?)),
        );
    }
    out
}

fn unescape(v: &str) -> Option<Vec<u8>> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    (!out.is_empty()).then_some(out)
}

impl Bus {
    /// Connect to the system bus; `Ok(None)` when none of its addresses accepts a connection
    /// (no bus on this node), an error when a bus answered but the handshake failed.
    pub fn system(timeout: Duration) -> Result<Option<Bus>> {
        let address = system_address();
        let Some(sock) = endpoints(&address)
            .iter()
            .find_map(|p| UnixStream::connect(std::ffi::OsStr::from_bytes(p)).ok())
        else {
            return Ok(None);
        };
        Bus::over(sock, timeout, address).map(Some)
    }

    /// The handshake on a connected socket: SASL EXTERNAL as our effective uid, then `Hello`.
    pub fn over(sock: UnixStream, timeout: Duration, address: String) -> Result<Bus> {
        let mut bus = Bus {
            sock,
            serial: 0,
            timeout,
            pending: Vec::new(),
            address,
        };
        // EXTERNAL's identity: the uid in decimal, each digit as two hex digits ('0' is "30").
        let mut auth = b"\0AUTH EXTERNAL ".to_vec();
        for d in nix::unistd::geteuid().as_raw().to_string().bytes() {
            auth.extend_from_slice(&[b'3', d]);
        }
        auth.extend_from_slice(b"\r\n");
        bus.send(&auth)?;
        let line = bus.line(Instant::now() + timeout)?;
        if !line.starts_with("OK ") {
            return Err(bus.fail(format!("authentication refused: {line:?}")));
        }
        bus.send(b"BEGIN\r\n")?;
        match bus.call(BUS_NAME, BUS_PATH, BUS_NAME, "Hello", &[])? {
            Ok(Value::Str(_)) => Ok(bus),
            Ok(_) => Err(bus.fail("Hello answered no name")),
            Err(e) => Err(bus.fail(format_args!("Hello failed: {e}"))),
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> Error {
        Error::internal(format!("D-Bus {}: {what}", self.address))
    }

    fn send(&mut self, b: &[u8]) -> Result<()> {
        self.sock
            .set_write_timeout(Some(self.timeout))
            .ctx("D-Bus")?;
        match self.sock.write_all(b) {
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(self.timed_out())
            }
            r => r.ctx(format_args!("D-Bus {}: send", self.address)),
        }
    }

    fn timed_out(&self) -> Error {
        Error::try_again(format!(
            "D-Bus {}: no answer within {} s",
            self.address,
            self.timeout.as_secs()
        ))
    }

    /// Read until `pending` holds `want` bytes or the deadline passes.
    fn fill(&mut self, want: usize, deadline: Instant) -> Result<()> {
        let mut chunk = [0u8; 4096];
        while self.pending.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out());
            }
            self.sock.set_read_timeout(Some(left)).ctx("D-Bus")?;
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(self.fail("the bus closed the connection")),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(Error::io(format_args!("D-Bus {}", self.address), e)),
            }
        }
        Ok(())
    }

    /// One `\r\n`-terminated line of the SASL exchange.
    fn line(&mut self, deadline: Instant) -> Result<String> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.pending[..end]).into_owned();
                self.pending.drain(..end + 2);
                return Ok(line);
            }
            if self.pending.len() > MAX_LINE {
                return Err(self.fail("authentication line too long"));
            }
            let want = self.pending.len() + 1;
            self.fill(want, deadline)?;
        }
    }

    /// Call `iface.member` on `path` of `dest` with string arguments: `Ok(Ok(first value))` on
    /// a return, `Ok(Err("<error name>: <message>"))` when the callee answered with an error,
    /// `Err` when the bus could not be used (timeout: code 11).
    pub fn call(
        &mut self,
        dest: &str,
        path: &str,
        iface: &str,
        member: &str,
        args: &[&str],
    ) -> Result<std::result::Result<Value, String>> {
        if args.iter().any(|a| a.contains('\0')) {
            return Err(self.fail(format!("{member}: an argument holds a NUL")));
        }
        self.serial = self.serial.wrapping_add(1).max(1);
        let serial = self.serial;
        let deadline = Instant::now() + self.timeout;
        self.send(&wire::method_call(serial, dest, path, iface, member, args))?;
        loop {
            self.fill(wire::FIXED, deadline)?;
            let total = wire::total_len(&self.pending[..wire::FIXED]).map_err(|e| self.fail(e))?;
            self.fill(total, deadline)?;
            let raw: Vec<u8> = self.pending.drain(..total).collect();
            let m = wire::parse(&raw).map_err(|e| self.fail(e))?;
            if m.reply_serial != Some(serial) {
                continue; // a signal (NameAcquired), or a stray message
            }
            return Ok(match m.kind {
                wire::METHOD_RETURN => Ok(m.first),
                wire::ERROR => {
                    let mut e = m.error_name.unwrap_or_default();
                    if let Value::Str(s) = m.first {
                        e = e + ": " + &s;
                    }
                    Err(e)
                }
                _ => continue,
            });
        }
    }

    /// Whether `name` has an owner on the bus (`GetNameOwner` succeeds).
    pub fn has_owner(&mut self, name: &str) -> Result<bool> {
        Ok(self
            .call(BUS_NAME, BUS_PATH, BUS_NAME, "GetNameOwner", &[name])?
            .is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            endpoints("tcp:host=x;unix:path=/run/a%20b,guid=1;unix:abstract=z;unix:path=/b"),
            [b"/run/a b".to_vec(), b"/b".to_vec()]
        );
        assert!(endpoints("unix:path=%zz;unix:path=%4").is_empty());
        assert!(endpoints("unix:tmpdir=/tmp").is_empty());
    }

    /// A peer that authenticates and then says nothing: the call ends at its deadline with
    /// code 11, and a peer that hangs up is an error too.
    #[test]
    fn silent_and_closing_peers() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let _ = b.read(&mut buf);
            b.write_all(b"OK 0123\r\n").unwrap();
            std::thread::sleep(Duration::from_millis(600));
        });
        let start = Instant::now();
        let e = Bus::over(a, Duration::from_millis(200), "test".into())
            .err()
            .unwrap();
        assert_eq!(e.code, crate::error::code::TRY_AGAIN_LATER, "{e}");
        assert!(
            start.elapsed() < Duration::from_millis(550),
            "{:?}",
            start.elapsed()
        );
        t.join().unwrap();

        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        assert!(Bus::over(a, Duration::from_secs(1), "test".into()).is_err());
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"REJECTED EXTERNAL\r\n").unwrap();
        let e = Bus::over(a, Duration::from_secs(1), "test".into())
            .err()
            .unwrap();
        assert!(e.msg.contains("authentication refused"), "{e}");
    }
}
