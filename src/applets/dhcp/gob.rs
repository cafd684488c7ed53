//! A minimal `encoding/gob` (Go's self-describing binary format, which Go's `net/rpc` speaks
//! and with it upstream's dhcp plugin and daemon): a decoder for any stream of the plain kinds
//! the calls use, and the primitives to encode them ([`Enc`]).
//!
//! A stream is a sequence of messages, each a byte count then the bytes. A message is a type
//! id and, when the id is negative, the definition of type `-id` (a `wireType`, itself
//! gob-encoded); else a value of that type. Unsigned integers below 128 are one byte, larger
//! ones the negated count of big-endian bytes that follow; signed ones are zig-zagged into
//! unsigned (`i << 1`, or `!i << 1 | 1` when negative). Strings and byte slices (also
//! `net.IP` and `net.IPMask`: they implement no GobEncoder or BinaryMarshaler, and gob ignores
//! TextMarshaler) are a count and the bytes; slices, arrays and maps a count and the elements;
//! a struct is its non-zero fields, each as the difference of its field number from the
//! previous one's (starting at -1) and the value, ending with 0; pointers are transparent.
//! Type ids are the sender's own, per stream (Go's are process-global): this side maps them.
//!
//! A hostile peer's bytes end in an error, never a panic: messages are at most
//! [`MAX_MESSAGE`] bytes, counts at most the bytes left (every element takes one), values
//! nest at most [`MAX_DEPTH`] deep, a stream defines at most [`MAX_TYPES`] types. Interfaces
//! (type 8) and non-struct top-level values are refused: no call uses them.
//!
//! Memory is bounded per stream, not only per message: a message of one-byte elements (an
//! empty struct, a zero) decodes to a node of tens of bytes each, and the types a stream
//! defines live as long as it does. So the decoder counts what it holds in bytes ([`cost`]:
//! each node, field and name, what they take in memory, not on the wire): the types at most
//! [`MAX_TYPE_STATE`], the types and the value being decoded together at most [`MAX_STATE`].
//! A stream past either bound ends in an error ("decoder state"), and its caller drops it.
//! Upstream's plugin defines 2 types of 9 fields in all; its daemon 7 types.
// Foreign bytes: every numeric conversion is checked (try_from, or a cast proven exact).
#![deny(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use std::io::Read;
use std::rc::Rc;

pub(crate) const MAX_MESSAGE: usize = 1 << 20;
/// [`read_message`]'s error when the stream ends between messages (the peer hung up).
pub(crate) const CLOSED: &str = "gob: end of stream";
const MAX_DEPTH: usize = 24;
const MAX_TYPES: usize = 128;
/// The most the types a stream defined may hold ([`cost`]): 64 KiB, some 1,500 fields.
pub(crate) const MAX_TYPE_STATE: usize = 64 << 10;
/// The most a stream's decoder may hold at once, its types and the value being decoded: a
/// message's bytes (a network config as one string) and room for the nodes of a call.
pub(crate) const MAX_STATE: usize = MAX_MESSAGE + (256 << 10);

/// What the decoder counts for each thing it holds, in bytes: a value node (a `Val`, or a
/// struct field's slot with its name's reference), a type, a type's field (with its name's
/// bytes added). Round figures above what they take, allocator rounding included.
mod cost {
    pub const NODE: usize = 64;
    pub const TYPE: usize = 96;
    pub const FIELD: usize = 64;
}

/// A decoded value, gob's kinds folded into the few shapes the calls need.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    /// uint, bool, float (its bits, as sent)
    Uint(u64),
    Int(i64),
    /// string, []byte, and values of GobEncoder types
    Bytes(Vec<u8>),
    /// slice, array, complex (two floats), map (keys and values alternating)
    List(Vec<Val>),
    /// the fields sent, by name
    Struct(Vec<(Rc<str>, Val)>),
}

impl Val {
    /// Field `name` of a struct.
    pub(crate) fn get(&self, name: &str) -> Option<&Val> {
        match self {
            Val::Struct(f) => f.iter().find(|(n, _)| **n == *name).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Val::Bytes(b) => b,
            _ => &[],
        }
    }

    /// Field `name` as text (absent: empty, as Go's zero value).
    pub(crate) fn str(&self, name: &str) -> String {
        let b = self.get(name).map_or(&[][..], Val::bytes);
        String::from_utf8_lossy(b).into_owned()
    }

    /// Field `name` as a number (absent: 0).
    pub(crate) fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(Val::Int(i)) => *i,
            Some(Val::Uint(u)) => i64::try_from(*u).unwrap_or(-1),
            _ => 0,
        }
    }

    pub(crate) fn list(&self, name: &str) -> &[Val] {
        match self.get(name) {
            Some(Val::List(l)) => l,
            _ => &[],
        }
    }
}

#[derive(Clone)]
enum Ty {
    Uint,
    Int,
    Bytes,
    Complex,
    List(i64),
    Map(i64, i64),
    Struct(Vec<(Rc<str>, i64)>),
}

/// The decoding side of one stream: the types its peer defined, and what they hold.
pub(crate) struct Dec {
    types: Vec<(i64, Ty)>,
    held: usize,
}

/// What a value being decoded may still take ([`cost`]).
struct Budget(usize);

impl Budget {
    fn take(&mut self, n: usize) -> Result<(), String> {
        self.0 = self.0.checked_sub(n).ok_or_else(|| {
            format!("gob: the stream's decoder state passes its bound ({MAX_STATE} bytes)")
        })?;
        Ok(())
    }
}

/// What type `t` holds ([`cost`]).
fn type_cost(t: &Ty) -> usize {
    let fields = match t {
        Ty::Struct(f) => f.iter().map(|(n, _)| cost::FIELD + n.len()).sum(),
        _ => 0,
    };
    cost::TYPE + fields
}

fn st(fields: &[(&str, i64)]) -> Ty {
    Ty::Struct(fields.iter().map(|(n, t)| (Rc::from(*n), *t)).collect())
}

impl Dec {
    pub(crate) fn new() -> Dec {
        // gob's own bootstrap types, with which definitions are encoded (ids fixed by Go).
        let common = ("CommonType", 18);
        let types = vec![
            (1, Ty::Uint),
            (2, Ty::Int),
            (3, Ty::Uint),
            (4, Ty::Uint),
            (5, Ty::Bytes),
            (6, Ty::Bytes),
            (7, Ty::Complex),
            (
                16,
                st(&[
                    ("ArrayT", 17),
                    ("SliceT", 19),
                    ("StructT", 20),
                    ("MapT", 23),
                    ("GobEncoderT", 24),
                    ("BinaryMarshalerT", 24),
                    ("TextMarshalerT", 24),
                ]),
            ),
            (17, st(&[common, ("Elem", 2), ("Len", 2)])),
            (18, st(&[("Name", 6), ("Id", 2)])),
            (19, st(&[common, ("Elem", 2)])),
            (20, st(&[common, ("Field", 22)])),
            (21, st(&[("Name", 6), ("Id", 2)])),
            (22, Ty::List(21)),
            (23, st(&[common, ("Key", 2), ("Elem", 2)])),
            (24, st(&[common])),
        ];
        Dec { types, held: 0 }
    }

    /// The next value on `r`, after the type definitions before it.
    pub(crate) fn read(&mut self, r: &mut impl Read) -> Result<Val, String> {
        loop {
            let msg = read_message(r)?;
            if let Some(v) = self.message(&msg)? {
                return Ok(v);
            }
        }
    }

    /// One message: a value, or `None` for a type definition (kept).
    pub(crate) fn message(&mut self, msg: &[u8]) -> Result<Option<Val>, String> {
        let mut r = Bytes { b: msg, at: 0 };
        let id = r.int()?;
        let mut left = Budget(MAX_STATE.saturating_sub(self.held));
        let v = if id < 0 {
            // i64::MIN has no positive counterpart: no type has that id.
            let id = id.checked_neg().ok_or("gob: bad type id")?;
            let def = self.value(&mut r, 16, 0, &mut left)?;
            let ty = wire_type(&def).ok_or("gob: bad type definition")?;
            if self.types.len() >= MAX_TYPES || self.types.iter().any(|(i, _)| *i == id) {
                return Err("gob: type redefined or too many types".into());
            }
            let held = self.held + type_cost(&ty);
            if held > MAX_TYPE_STATE {
                return Err(format!(
                    "gob: the stream's decoder state passes its bound ({MAX_TYPE_STATE} bytes of types)"
                ));
            }
            self.held = held;
            self.types.push((id, ty));
            None
        } else {
            if !matches!(self.ty(id)?, Ty::Struct(_)) {
                return Err("gob: a value that is not a struct".into());
            }
            Some(self.value(&mut r, id, 0, &mut left)?)
        };
        if r.at != msg.len() {
            return Err("gob: extra data in message".into());
        }
        Ok(v)
    }

    fn ty(&self, id: i64) -> Result<&Ty, String> {
        let t = self.types.iter().find(|(i, _)| *i == id).map(|(_, t)| t);
        t.ok_or_else(|| format!("gob: unknown type id {id}"))
    }

    /// A value of type `id`, charged to `left` node by node before it is made.
    fn value(
        &self,
        r: &mut Bytes,
        id: i64,
        depth: usize,
        left: &mut Budget,
    ) -> Result<Val, String> {
        if depth > MAX_DEPTH {
            return Err("gob: values nested too deep".into());
        }
        left.take(cost::NODE)?;
        let list = |r: &mut Bytes, ids: &[i64], left: &mut Budget| -> Result<Val, String> {
            let n = r.count()?;
            let mut l = Vec::new();
            for _ in 0..n {
                for e in ids {
                    l.push(self.value(r, *e, depth + 1, left)?);
                }
            }
            Ok(Val::List(l))
        };
        Ok(match self.ty(id)? {
            Ty::Uint => Val::Uint(r.uint()?),
            Ty::Int => Val::Int(r.int()?),
            Ty::Bytes => {
                let n = r.count()?;
                left.take(n)?;
                Val::Bytes(r.take(n)?.to_vec())
            }
            Ty::Complex => Val::List(vec![Val::Uint(r.uint()?), Val::Uint(r.uint()?)]),
            Ty::List(e) => list(r, &[*e], left)?,
            Ty::Map(k, e) => list(r, &[*k, *e], left)?,
            Ty::Struct(fields) => {
                let mut out = Vec::new();
                let mut at: i64 = -1;
                loop {
                    let d = r.uint()?;
                    if d == 0 {
                        break;
                    }
                    at = i64::try_from(d)
                        .ok()
                        .and_then(|d| at.checked_add(d))
                        .unwrap_or(-1);
                    let (name, t) = usize::try_from(at)
                        .ok()
                        .and_then(|i| fields.get(i))
                        .ok_or("gob: field number out of range")?;
                    out.push((name.clone(), self.value(r, *t, depth + 1, left)?));
                }
                Val::Struct(out)
            }
        })
    }
}

/// The type a decoded `wireType` defines.
fn wire_type(w: &Val) -> Option<Ty> {
    let Val::Struct(f) = w else { return None };
    let [(kind, t)] = f.as_slice() else {
        return None;
    };
    let id = |k: &str| Some(t.int(k));
    Some(match &**kind {
        "ArrayT" | "SliceT" => Ty::List(id("Elem")?),
        "MapT" => Ty::Map(id("Key")?, id("Elem")?),
        "StructT" => Ty::Struct(
            t.list("Field")
                .iter()
                .map(|f| (Rc::from(f.str("Name")), f.int("Id")))
                .collect(),
        ),
        // GobEncoder, BinaryMarshaler, TextMarshaler: the bytes their method made.
        _ => Ty::Bytes,
    })
}

/// Read one message (its count, then that many bytes, at most [`MAX_MESSAGE`]).
pub(crate) fn read_message(r: &mut impl Read) -> Result<Vec<u8>, String> {
    let io = |e: std::io::Error| format!("gob: read: {e}");
    let mut b = [0u8; 9];
    match r.read_exact(&mut b[..1]) {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(CLOSED.into()),
        other => other.map_err(io)?,
    }
    let n = if b[0] < 128 {
        u64::from(b[0])
    } else {
        let k = usize::from(b[0].wrapping_neg());
        if k > 8 {
            return Err("gob: bad message count".into());
        }
        r.read_exact(&mut b[1..=k]).map_err(io)?;
        b[1..=k].iter().fold(0, |a, x| a << 8 | u64::from(*x))
    };
    if n == 0 || n > MAX_MESSAGE as u64 {
        return Err(format!("gob: message of {n} bytes"));
    }
    // Grown as the bytes come: a peer that announces 1 MiB and sends nothing holds nothing.
    let mut msg = Vec::new();
    r.by_ref().take(n).read_to_end(&mut msg).map_err(io)?;
    if msg.len() as u64 != n {
        return Err(format!(
            "gob: message of {n} bytes ends after {}",
            msg.len()
        ));
    }
    Ok(msg)
}

struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let s = self.b.get(self.at..self.at + n).ok_or("gob: truncated")?;
        self.at += n;
        Ok(s)
    }

    fn uint(&mut self) -> Result<u64, String> {
        let b = self.take(1)?[0];
        if b < 128 {
            return Ok(u64::from(b));
        }
        let k = usize::from(b.wrapping_neg());
        if k > 8 {
            return Err("gob: bad unsigned integer".into());
        }
        Ok(self.take(k)?.iter().fold(0, |a, x| a << 8 | u64::from(*x)))
    }

    fn int(&mut self) -> Result<i64, String> {
        let u = self.uint()?;
        let i = i64::try_from(u >> 1).map_err(|_| "gob: bad signed integer")?;
        Ok(if u & 1 == 1 { !i } else { i })
    }

    /// A count of elements, each at least one byte: at most the bytes left.
    fn count(&mut self) -> Result<usize, String> {
        let n = self.uint()?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.b.len() - self.at)
            .ok_or_else(|| format!("gob: count {n} past the message's end"))
    }
}

/// Encoding: a message's bytes, built front to back.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn uint(&mut self, v: u64) {
        let b = v.to_be_bytes();
        if v < 128 {
            self.0.push(b[7]);
            return;
        }
        // The count of bytes that follow (1 to 8), negated.
        let skip = b.iter().position(|x| *x != 0).unwrap_or(7);
        self.0
            .push([0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff][skip]);
        self.0.extend_from_slice(&b[skip..]);
    }

    pub(crate) fn int(&mut self, v: i64) {
        // Zig-zag: `!v` of a negative `v` is not negative, so unsigned_abs is the value.
        self.uint(if v < 0 {
            (!v).unsigned_abs() << 1 | 1
        } else {
            v.unsigned_abs() << 1
        });
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.uint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    /// Field `i` of the struct being written (fields in increasing order, from `*last`).
    pub(crate) fn field(&mut self, last: &mut i64, i: i64) {
        // Fields are written in increasing order: the difference is positive.
        self.uint(u64::try_from(i - *last).unwrap_or(0));
        *last = i;
    }

    /// Append `body` as one message (count first).
    pub(crate) fn message(&mut self, body: &Enc) {
        self.uint(body.0.len() as u64);
        self.0.extend_from_slice(&body.0);
    }

    /// The definition of struct type `id` named `name` with `fields` (names and type ids), or
    /// of a slice type when `fields` is one element named "" (its element type).
    pub(crate) fn define(&mut self, id: i64, name: &str, fields: &[(&str, i64)]) {
        let mut d = Enc::default();
        d.int(-id);
        let slice = matches!(fields, [("", _)]);
        d.uint(if slice { 2 } else { 3 }); // wireType.SliceT or .StructT
        d.uint(1); // .CommonType
        if !name.is_empty() {
            d.uint(1); // .Name
            d.bytes(name.as_bytes());
        }
        d.uint(if name.is_empty() { 2 } else { 1 }); // .Id
        d.int(id);
        d.uint(0);
        if slice {
            d.uint(1); // .Elem
            d.int(fields[0].1);
        } else if !fields.is_empty() {
            d.uint(1); // .Field
            d.uint(fields.len() as u64);
            for (n, t) in fields {
                d.uint(1);
                d.bytes(n.as_bytes());
                d.uint(1);
                d.int(*t);
                d.uint(0);
            }
        }
        d.0.extend_from_slice(&[0, 0]);
        self.message(&d);
    }
}
