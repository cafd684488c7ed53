//! The D-Bus message format, only as far as a client of method calls needs it: encoding a
//! method call whose arguments are strings, and decoding the fixed header, the header fields and
//! the first value of a reply's body. Everything read comes from the bus or a peer behind it, so
//! every length and offset is checked; a message we cannot read is an error, never a panic.

/// Message types (the second header byte).
pub const METHOD_CALL: u8 = 1;
pub const METHOD_RETURN: u8 = 2;
pub const ERROR: u8 = 3;

/// The header flag that keeps the bus from starting (activating) the destination service.
const NO_AUTO_START: u8 = 2;

/// The largest message we accept. Our replies are a few hundred bytes; the spec allows 128 MiB,
/// which a client making four calls has no reason to buffer.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The 16 bytes every message starts with, up to the header fields' array length.
pub const FIXED: usize = 16;

// Header field codes.
const F_PATH: u8 = 1;
const F_INTERFACE: u8 = 2;
const F_MEMBER: u8 = 3;
const F_ERROR_NAME: u8 = 4;
const F_REPLY_SERIAL: u8 = 5;
const F_DESTINATION: u8 = 6;
const F_SIGNATURE: u8 = 8;

fn pad(b: &mut Vec<u8>, to: usize) {
    while !b.len().is_multiple_of(to) {
        b.push(0);
    }
}

/// A string-like value (`s`, `o`; `g` has a one-byte length) at the writer's position.
fn put_str(b: &mut Vec<u8>, s: &str) {
    pad(b, 4);
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
    b.push(0);
}

fn put_field(b: &mut Vec<u8>, code: u8, sig: u8, value: &str) {
    pad(b, 8);
    b.extend_from_slice(&[code, 1, sig, 0]);
    if sig == b'g' {
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
        b.push(0);
    } else {
        put_str(b, value);
    }
}

/// A method call (little-endian) with string arguments. The caller passes only strings without
/// NUL (D-Bus strings cannot hold one; the bus would drop the connection).
pub fn method_call(
    serial: u32,
    dest: &str,
    path: &str,
    iface: &str,
    member: &str,
    args: &[&str],
) -> Vec<u8> {
    let mut b = vec![b'l', METHOD_CALL, NO_AUTO_START, 1, 0, 0, 0, 0];
    b.extend_from_slice(&serial.to_le_bytes());
    b.extend_from_slice(&[0; 4]); // header fields' length, below
    put_field(&mut b, F_PATH, b'o', path);
    put_field(&mut b, F_INTERFACE, b's', iface);
    put_field(&mut b, F_MEMBER, b's', member);
    put_field(&mut b, F_DESTINATION, b's', dest);
    if !args.is_empty() {
        put_field(&mut b, F_SIGNATURE, b'g', &"s".repeat(args.len()));
    }
    let fields = (b.len() - FIXED) as u32;
    b[12..16].copy_from_slice(&fields.to_le_bytes());
    pad(&mut b, 8);
    let body = b.len();
    for a in args {
        put_str(&mut b, a);
    }
    let body_len = (b.len() - body) as u32;
    b[4..8].copy_from_slice(&body_len.to_le_bytes());
    b
}

/// The total length of the message whose first [`FIXED`] bytes are `head`, or why it cannot be
/// read (bad endianness mark, too large).
pub fn total_len(head: &[u8]) -> Result<usize, &'static str> {
    let r = Reader::new(head)?;
    let body = r.u32_at(4)? as usize;
    let fields = r.u32_at(12)? as usize;
    // Checked: on 32-bit targets a hostile field length near 4 GiB would wrap.
    let total = FIXED
        .checked_add(fields)
        .and_then(|n| n.checked_next_multiple_of(8))
        .and_then(|n| n.checked_add(body))
        .filter(|n| *n <= MAX_MESSAGE)
        .ok_or("message larger than 64 KiB")?;
    Ok(total)
}

/// The first value of a reply's body, when it is one we read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Bool(bool),
    /// An empty body, or a first value of another type.
    Other,
}

/// What a client needs from a received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub kind: u8,
    pub reply_serial: Option<u32>,
    pub error_name: Option<String>,
    pub first: Value,
}

/// A bounds-checked reader over one whole message; offsets are from the message start, which
/// is what D-Bus alignment is relative to.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
    big: bool,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Result<Reader<'a>, &'static str> {
        let big = match b.first() {
            Some(b'l') => false,
            Some(b'B') => true,
            _ => return Err("bad endianness mark"),
        };
        Ok(Reader { b, pos: 0, big })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.b.len());
        let s = end
            .and_then(|e| self.b.get(self.pos..e))
            .ok_or("truncated message")?;
        self.pos += n;
        Ok(s)
    }

    fn align(&mut self, n: usize) -> Result<(), &'static str> {
        let to = self.pos.next_multiple_of(n);
        self.take(to - self.pos).map(|_| ())
    }

    fn u32_at(&self, at: usize) -> Result<u32, &'static str> {
        let s = self.b.get(at..at + 4).ok_or("truncated message")?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        self.align(4)?;
        let v = self.u32_at(self.pos)?;
        self.pos += 4;
        Ok(v)
    }

    /// `s` or `o`: length, bytes, NUL.
    fn string(&mut self) -> Result<String, &'static str> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        if self.take(1)? != [0] {
            return Err("string without its NUL");
        }
        String::from_utf8(s.to_vec()).map_err(|_| "string is not UTF-8")
    }

    /// `g`: one-byte length, bytes, NUL.
    fn signature(&mut self) -> Result<String, &'static str> {
        let n = usize::from(self.take(1)?[0]);
        let s = self.take(n)?;
        if self.take(1)? != [0] {
            return Err("signature without its NUL");
        }
        String::from_utf8(s.to_vec()).map_err(|_| "signature is not UTF-8")
    }

    /// Skip one value of the basic type `t` (a header field we do not use).
    fn skip_basic(&mut self, t: u8) -> Result<(), &'static str> {
        let size = match t {
            b'y' => 1,
            b'n' | b'q' => 2,
            b'b' | b'i' | b'u' | b'h' => 4,
            b'x' | b't' | b'd' => 8,
            b's' | b'o' => return self.string().map(|_| ()),
            b'g' => return self.signature().map(|_| ()),
            _ => return Err("header field of a type we do not skip"),
        };
        self.align(size)?;
        self.take(size).map(|_| ())
    }
}

/// Decode one whole message (as framed by [`total_len`]).
pub fn parse(b: &[u8]) -> Result<Message, &'static str> {
    let total = total_len(b.get(..FIXED).ok_or("truncated message")?)?;
    if b.len() != total {
        return Err("message length does not match its header");
    }
    let mut r = Reader::new(b)?;
    let kind = b[1];
    let fields_end = FIXED + r.u32_at(12)? as usize;
    let mut m = Message {
        kind,
        reply_serial: None,
        error_name: None,
        first: Value::Other,
    };
    let mut body_sig = String::new();
    r.pos = FIXED;
    while r.pos < fields_end {
        r.align(8)?;
        let code = r.take(1)?[0];
        let sig = r.signature()?;
        let &[t] = sig.as_bytes() else {
            return Err("header field of a container type");
        };
        // The fields we read must have their spec'd types; others are skipped if basic.
        let want = match code {
            F_PATH => b'o',
            F_INTERFACE | F_MEMBER | F_ERROR_NAME | F_DESTINATION => b's',
            F_REPLY_SERIAL => b'u',
            F_SIGNATURE => b'g',
            _ => t,
        };
        if t != want {
            return Err("header field of the wrong type");
        }
        match code {
            F_REPLY_SERIAL => m.reply_serial = Some(r.u32()?),
            F_ERROR_NAME => m.error_name = Some(r.string()?),
            F_SIGNATURE => body_sig = r.signature()?,
            _ => r.skip_basic(t)?,
        }
        if r.pos > fields_end {
            return Err("header field overruns the header");
        }
    }
    r.pos = fields_end;
    r.align(8)?;
    m.first = match body_sig.as_bytes().first() {
        Some(b's') => Value::Str(r.string()?),
        Some(b'b') => match r.u32()? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            _ => return Err("boolean neither 0 nor 1"),
        },
        _ => Value::Other,
    };
    Ok(m)
}

/// A message of `kind` built with the encoder's helpers: header fields `(code, sig, value)`
/// (`u` values in decimal) and a body.
fn reply(kind: u8, fields: &[(u8, u8, &str)], body: &[u8]) -> Vec<u8> {
    let mut b = vec![b'l', kind, 1, 1, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];
    for (code, sig, v) in fields {
        if *sig == b'u' {
            pad(&mut b, 8);
            b.extend_from_slice(&[*code, 1, b'u', 0]);
            b.extend_from_slice(&v.parse::<u32>().unwrap_or(0).to_le_bytes());
        } else {
            put_field(&mut b, *code, *sig, v);
        }
    }
    let n = (b.len() - FIXED) as u32;
    b[12..16].copy_from_slice(&n.to_le_bytes());
    pad(&mut b, 8);
    b[4..8].copy_from_slice(&(body.len() as u32).to_le_bytes());
    b.extend_from_slice(body);
    b
}

/// Replies as dbus-daemon and firewalld send them, for the fuzzer to start from: Hello's and
/// GetNameOwner's unique name, addSource's zone, querySource's boolean, firewalld's error with
/// its message, the bus's NameAcquired signal.
pub fn sample_replies() -> Vec<Vec<u8>> {
    let s = |v: &str| {
        let mut b = Vec::new();
        put_str(&mut b, v);
        b
    };
    let ret = |serial: &str, sig: &str, body: &[u8]| {
        reply(
            METHOD_RETURN,
            &[
                (F_REPLY_SERIAL, b'u', serial),
                (7, b's', ":1.0"),
                (F_SIGNATURE, b'g', sig),
            ],
            body,
        )
    };
    vec![
        ret("1", "s", &s(":1.12")),
        ret("3", "s", &s("trusted")),
        ret("4", "b", &[1, 0, 0, 0]),
        reply(
            ERROR,
            &[
                (F_ERROR_NAME, b's', "org.fedoraproject.FirewallD1.Exception"),
                (F_REPLY_SERIAL, b'u', "5"),
                (F_DESTINATION, b's', ":1.12"),
                (F_SIGNATURE, b'g', "s"),
            ],
            &s("ZONE_ALREADY_SET: '10.0.0.2/32' already bound to 'trusted'"),
        ),
        reply(
            4,
            &[
                (F_PATH, b'o', "/org/freedesktop/DBus"),
                (F_INTERFACE, b's', "org.freedesktop.DBus"),
                (F_MEMBER, b's', "NameAcquired"),
                (F_SIGNATURE, b'g', "s"),
            ],
            &s(":1.12"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trips_through_the_reader() {
        let c = method_call(
            9,
            "a.b",
            "/a/b",
            "a.b.c",
            "addSource",
            &["trusted", "10.0.0.1/32"],
        );
        assert_eq!(total_len(&c[..FIXED]), Ok(c.len()));
        let m = parse(&c).unwrap();
        assert_eq!(m.kind, METHOD_CALL);
        assert_eq!(m.first, Value::Str("trusted".into()));
    }

    #[test]
    fn replies_errors_and_hostile_input() {
        let ok = reply(
            METHOD_RETURN,
            &[(F_REPLY_SERIAL, b'u', "3"), (F_SIGNATURE, b'g', "s")],
            &[4, 0, 0, 0, b'z', b'o', b'n', b'e', 0],
        );
        let m = parse(&ok).unwrap();
        assert_eq!(
            (m.reply_serial, m.first),
            (Some(3), Value::Str("zone".into()))
        );
        let b = reply(
            METHOD_RETURN,
            &[(F_REPLY_SERIAL, b'u', "4"), (F_SIGNATURE, b'g', "b")],
            &[1, 0, 0, 0],
        );
        assert_eq!(parse(&b).unwrap().first, Value::Bool(true));
        let e = reply(
            ERROR,
            &[(F_ERROR_NAME, b's', "x.Error"), (F_REPLY_SERIAL, b'u', "5")],
            &[],
        );
        assert_eq!(parse(&e).unwrap().error_name.as_deref(), Some("x.Error"));
        // Every truncation, a lying body length, a big-endian mark on little-endian data.
        for n in 0..ok.len() {
            assert!(parse(&ok[..n]).is_err());
        }
        let mut lie = ok.clone();
        lie[4] = 200;
        assert!(parse(&lie).is_err());
        let mut huge = ok.clone();
        huge[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(total_len(&huge[..FIXED]).is_err());
        let mut bad_bool = b.clone();
        let at = bad_bool.len() - 4;
        bad_bool[at] = 2;
        assert!(parse(&bad_bool).is_err());
        let wrong_type = reply(METHOD_RETURN, &[(F_REPLY_SERIAL, b'g', "u")], &[]);
        assert!(parse(&wrong_type).is_err());
    }
}
