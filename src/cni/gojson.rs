//! Decoding JSON the way Go's `encoding/json` decodes it into the reference plugins' structs,
//! in one place, so that no applet can disagree with the Go plugins about what a config means.
//!
//! Runtimes are Go programs and some send keys in Go's field spelling: containerd's CRI plugin
//! (through go-cni) passes `runtimeConfig.portMappings` entries as
//! `{"HostPort":80,"ContainerPort":80,"Protocol":"tcp","HostIP":""}` and `bandwidth` as
//! `{"IngressRate":…}`, because its structs carry no JSON tags. The Go plugins accept them
//! because Go matches an object key to a struct field by exact name first, then
//! case-insensitively (Unicode simple folding). Go also treats `null` for a non-pointer field as
//! "leave it alone". [`from_value`] gives serde-derived structs the same rules:
//!
//! - a key that names no field exactly is renamed to the field it case-folds to, if any;
//!   when two keys land on one field the exact spelling wins (Go keeps the last in document
//!   order, which a parsed object no longer has);
//! - a `null` member of a struct is dropped, so the field takes its default (or `None`);
//! - maps (`map[string]T` in Go, `HashMap`/`BTreeMap`/`Value` here) keep their keys as written.
//!
//! Errors name where they happened (`runtimeConfig.portMappings[0].hostPort: invalid type: …`).
//! Use [`member`] for a single key looked up by hand. Everything in `src/` decodes config JSON
//! through this module; a unit test keeps it so.
//!
//! Go's printer is here too: [`pretty`] and [`compact`] write JSON as Go's `json.MarshalIndent`
//! and `json.Marshal` do (results, stored configs, libcni's cache).

use serde::de::{self, Deserialize, DeserializeSeed, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// A decoding error, with the path of the member that caused it.
#[derive(Debug)]
pub struct DecodeError {
    msg: String,
    /// Set once a path prefix has been added, so outer levels leave it alone.
    located: bool,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for DecodeError {}

impl de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError {
            msg: msg.to_string(),
            located: false,
        }
    }
}

/// Decode `v` into `T` with Go's key matching (see the module doc).
pub fn from_value<'de, T: Deserialize<'de>>(v: &'de Value) -> Result<T, DecodeError> {
    T::deserialize(GoValue {
        v,
        path: &Path::Root,
    })
}

/// Decode member `key` of object `v` (`None` when absent or null), erroring with `key` as path.
pub fn from_member<'de, T: Deserialize<'de>>(
    v: &'de Value,
    key: &str,
) -> Result<Option<T>, DecodeError> {
    match member(v, key) {
        None => Ok(None),
        Some(m) => T::deserialize(GoValue {
            v: m,
            path: &Path::Key(&Path::Root, key),
        })
        .map(Some),
    }
}

/// Member `key` of object `v` as Go would find it for a struct field named `key`: the exact
/// key, else the first key equal to it under case folding. `None` when absent or null.
pub fn member<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let obj = v.as_object()?;
    obj.get(key)
        .or_else(|| obj.iter().find(|(k, _)| fold_eq(k, key)).map(|(_, v)| v))
        .filter(|v| !v.is_null())
}

/// Go's `foldName` equality: ASCII case-insensitive, plus Unicode simple folding (so `ſ` is an
/// `s` and the Kelvin sign a `k`, as in Go).
pub fn fold_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    let fold = |c: char| -> char {
        match c {
            'ſ' => 's',
            '\u{212A}' => 'k',
            _ => c.to_lowercase().next().unwrap_or(c),
        }
    };
    a.chars().map(fold).eq(b.chars().map(fold))
}

/// Where in the document a value sits, for error messages.
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => Ok(()),
            Path::Key(Path::Root, k) => f.write_str(k),
            Path::Key(p, k) => write!(f, "{p}.{k}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

/// serde names our Rust types (`expected struct ModernIn`); a user wrote an object.
fn readable(msg: String) -> String {
    match msg.find("expected struct ") {
        Some(at) => format!("{}expected a JSON object", &msg[..at]),
        None => msg,
    }
}

struct GoValue<'de, 'p> {
    v: &'de Value,
    path: &'p Path<'p>,
}

impl GoValue<'_, '_> {
    /// Prefix an error that does not yet say where it happened with this value's path.
    fn locate(&self, e: impl fmt::Display) -> DecodeError {
        let msg = readable(e.to_string());
        if matches!(self.path, Path::Root) {
            return DecodeError { msg, located: true };
        }
        DecodeError {
            msg: format!("{}: {msg}", self.path),
            located: true,
        }
    }

    fn relocate(&self, e: DecodeError) -> DecodeError {
        if e.located { e } else { self.locate(e.msg) }
    }
}

macro_rules! forward_to_value {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
            self.v.$method(visitor).map_err(|e| self.locate(e))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for GoValue<'de, '_> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.v {
            Value::Object(m) => self.visit_object(m.iter().map(|(k, v)| (k.as_str(), v)), visitor),
            Value::Array(a) => self.visit_array(a, visitor),
            v => v.deserialize_any(visitor).map_err(|e| self.locate(e)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.v {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.v {
            Value::Array(a) => self.visit_array(a, visitor),
            v => v.deserialize_seq(visitor).map_err(|e| self.locate(e)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.v {
            Value::Object(m) => self.visit_object(m.iter().map(|(k, v)| (k.as_str(), v)), visitor),
            v => v.deserialize_map(visitor).map_err(|e| self.locate(e)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.v {
            Value::Object(m) => {
                let members = struct_members(m, fields);
                self.visit_object(members.into_iter(), visitor)
            }
            v => v.deserialize_map(visitor).map_err(|e| self.locate(e)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.v
            .deserialize_enum(name, variants, visitor)
            .map_err(|e| self.locate(e))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    forward_to_value! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_str
        deserialize_string deserialize_bytes deserialize_byte_buf deserialize_unit
        deserialize_identifier
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.v
            .deserialize_unit_struct(name, visitor)
            .map_err(|e| self.locate(e))
    }
}

/// An object's members renamed to the struct's field names by Go's rule, nulls dropped.
fn struct_members<'a>(
    m: &'a Map<String, Value>,
    fields: &[&'static str],
) -> Vec<(&'a str, &'a Value)> {
    let mut out: Vec<(&'a str, &'a Value)> = Vec::with_capacity(m.len());
    for (k, v) in m {
        if v.is_null() {
            continue;
        }
        let name: &'a str = match fields.iter().find(|f| **f == k.as_str()) {
            Some(_) => k.as_str(),
            None => match fields.iter().find(|f| fold_eq(f, k)) {
                // 'static outlives 'a.
                Some(f) => f,
                None => k.as_str(),
            },
        };
        let exact = name == k.as_str();
        match out.iter_mut().find(|(n, _)| *n == name) {
            // Two spellings of one field: the exact one wins.
            Some(slot) => {
                if exact {
                    slot.1 = v;
                }
            }
            None => out.push((name, v)),
        }
    }
    out
}

impl<'de> GoValue<'de, '_> {
    fn visit_object<V: Visitor<'de>>(
        &self,
        members: impl Iterator<Item = (&'de str, &'de Value)>,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let mut access = ObjectAccess {
            members,
            pending: None,
            path: self.path,
        };
        visitor.visit_map(&mut access).map_err(|e| self.relocate(e))
    }

    fn visit_array<V: Visitor<'de>>(
        &self,
        items: &'de [Value],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let mut access = ArrayAccess {
            items: items.iter().enumerate(),
            path: self.path,
        };
        visitor.visit_seq(&mut access).map_err(|e| self.relocate(e))
    }
}

struct ObjectAccess<'de, 'p, I> {
    members: I,
    pending: Option<(&'de str, &'de Value)>,
    path: &'p Path<'p>,
}

impl<'de, I: Iterator<Item = (&'de str, &'de Value)>> de::MapAccess<'de>
    for ObjectAccess<'de, '_, I>
{
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        match self.members.next() {
            None => Ok(None),
            Some((k, v)) => {
                self.pending = Some((k, v));
                seed.deserialize(de::value::BorrowedStrDeserializer::new(k))
                    .map(Some)
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, DecodeError> {
        let (k, v) = self
            .pending
            .take()
            .ok_or_else(|| <DecodeError as de::Error>::custom("value requested before key"))?;
        let path = Path::Key(self.path, k);
        let go = GoValue { v, path: &path };
        seed.deserialize(GoValue { v, path: &path })
            .map_err(|e| go.relocate(e))
    }
}

struct ArrayAccess<'p, I> {
    items: I,
    path: &'p Path<'p>,
}

impl<'de, I: Iterator<Item = (usize, &'de Value)>> de::SeqAccess<'de> for ArrayAccess<'_, I> {
    type Error = DecodeError;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, DecodeError> {
        match self.items.next() {
            None => Ok(None),
            Some((i, v)) => {
                let path = Path::Index(self.path, i);
                let go = GoValue { v, path: &path };
                seed.deserialize(GoValue { v, path: &path })
                    .map(Some)
                    .map_err(|e| go.relocate(e))
            }
        }
    }
}

// Encoding: Go's printer. What the plugins print and store goes out as Go's encoding/json
// writes it, so that a runtime or a Go plugin reading it sees the same bytes.

/// Go's `json.MarshalIndent(v, "", "    ")`.
pub fn pretty<T: serde::Serialize>(v: &T) -> String {
    pretty_with_indent(v, b"    ")
}

/// Go's `json.MarshalIndent(v, "", indent)`.
pub fn pretty_with_indent<T: serde::Serialize>(v: &T, indent: &[u8]) -> String {
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(indent);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    // Serializing a Value into a Vec cannot fail.
    let _ = serde::Serialize::serialize(v, &mut ser);
    go_escape(String::from_utf8(out).unwrap_or_default())
}

/// Go's `json.Marshal(v)`: compact; a `serde_json::Value`'s object keys come out sorted, as Go
/// sorts a map's.
pub fn compact<T: serde::Serialize>(v: &T) -> String {
    go_escape(serde_json::to_string(v).unwrap_or_default())
}

/// Go's encoding/json also escapes `<`, `>`, `&`, U+2028 and U+2029 in strings. None of them can
/// occur in JSON outside a string, so replacing them in the whole text is exact.
fn go_escape(text: String) -> String {
    if !text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct PortMapping {
        host_port: u16,
        container_port: u16,
        #[serde(default)]
        protocol: String,
        #[serde(default, rename = "hostIP")]
        host_ip: String,
    }

    #[derive(Debug, Deserialize, PartialEq, Default)]
    #[serde(rename_all = "camelCase")]
    struct Limits {
        #[serde(default)]
        ingress_rate: u64,
        #[serde(default)]
        egress_burst: u64,
    }

    #[derive(Debug, Deserialize)]
    struct Outer {
        #[serde(rename = "runtimeConfig", default)]
        rc: Option<Rc>,
        #[serde(default)]
        labels: BTreeMap<String, String>,
        #[serde(default)]
        mtu: u32,
        #[serde(default)]
        raw: Option<Value>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Rc {
        #[serde(default)]
        port_mappings: Vec<PortMapping>,
        #[serde(default)]
        bandwidth: Option<Limits>,
    }

    #[test]
    fn go_cni_port_mappings_and_bandwidth() {
        // Exactly what containerd's CRI plugin sends through go-cni.
        let v = json!({"RuntimeConfig": {
            "portMappings": [{"HostPort": 18080, "ContainerPort": 80, "Protocol": "tcp", "HostIP": ""}],
            "bandwidth": {"IngressRate": 1000000, "IngressBurst": 0, "EgressRate": 0, "EgressBurst": 77}
        }});
        let o: Outer = from_value(&v).unwrap();
        let rc = o.rc.unwrap();
        assert_eq!(
            rc.port_mappings,
            vec![PortMapping {
                host_port: 18080,
                container_port: 80,
                protocol: "tcp".into(),
                host_ip: String::new()
            }]
        );
        assert_eq!(
            rc.bandwidth,
            Some(Limits {
                ingress_rate: 1_000_000,
                egress_burst: 77
            })
        );
    }

    #[test]
    fn exact_spelling_wins_and_maps_keep_keys() {
        let v = json!({"MTU": 1, "mtu": 2, "labels": {"Mtu": "x"}, "raw": {"A": 1}});
        let o: Outer = from_value(&v).unwrap();
        assert_eq!(o.mtu, 2);
        assert_eq!(o.labels.get("Mtu").map(String::as_str), Some("x"));
        assert_eq!(o.raw, Some(json!({"A": 1})));
        let v = json!({"MTU": 3});
        assert_eq!(from_value::<Outer>(&v).unwrap().mtu, 3);
    }

    #[test]
    fn null_means_absent() {
        let v = json!({"mtu": null, "runtimeConfig": null});
        let o: Outer = from_value(&v).unwrap();
        assert_eq!(o.mtu, 0);
        assert!(o.rc.is_none());
        // Inside a sequence null is still null.
        assert!(from_value::<Vec<u32>>(&json!([null])).is_err());
    }

    #[test]
    fn errors_name_the_member() {
        let v = json!({"runtimeConfig": {"portMappings": [{"hostPort": "x", "containerPort": 1}]}});
        let e = from_value::<Outer>(&v).unwrap_err().to_string();
        assert!(
            e.starts_with("runtimeConfig.portMappings[0].hostPort: invalid type"),
            "{e}"
        );
        let v = json!({"runtimeConfig": {"portMappings": [{"containerPort": 1}]}});
        let e = from_value::<Outer>(&v).unwrap_err().to_string();
        assert_eq!(e, "runtimeConfig.portMappings[0]: missing field `hostPort`");
        let e = from_value::<Outer>(&json!({"mtu": -1}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("mtu: invalid value"), "{e}");
        let e = from_value::<Outer>(&json!([])).unwrap_err().to_string();
        assert!(e.starts_with("invalid type: sequence"), "{e}");
    }

    #[test]
    fn member_lookup_and_folding() {
        let v = json!({"PortMappings": [1], "ips": null});
        assert_eq!(member(&v, "portMappings"), Some(&json!([1])));
        assert_eq!(member(&v, "ips"), None);
        assert!(fold_eq("ſtatus", "STATUS"));
        assert!(fold_eq("\u{212A}ey", "key"));
        assert!(!fold_eq("hostPort", "hostPorts"));
        let got: Option<Vec<u32>> = from_member(&v, "portmappings").unwrap();
        assert_eq!(got, Some(vec![1]));
        let e = from_member::<Vec<String>>(&v, "PortMappings")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("PortMappings[0]: invalid type"), "{e}");
    }

    /// Every decode of config JSON in src/ goes through this module: a direct
    /// `T::deserialize(&value)` or `serde_json::from_value` would match keys case-sensitively,
    /// and serde's `flatten`/`untagged` buffer the input and match it exactly.
    #[test]
    fn all_decoding_goes_through_gojson() {
        fn walk(dir: &std::path::Path, bad: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, bad);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("gojson.rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    let mut in_tests = false;
                    for (n, line) in text.lines().enumerate() {
                        if line.starts_with("#[cfg(test)]") {
                            in_tests = true;
                        }
                        let l = line.trim_start();
                        if in_tests || l.starts_with("//") {
                            continue;
                        }
                        let direct = (l.contains("::deserialize(&")
                            || l.contains("::deserialize(v)"))
                            && !l.contains("deserialize(d)");
                        if direct
                            || l.contains("serde(flatten")
                            || l.contains("serde(untagged")
                            || l.contains("serde_json::from_value")
                            || (l.contains("serde_json::from_str::<")
                                && !l.contains("from_str::<Value>")
                                && !l.contains("from_str::<serde_json::Value>"))
                        {
                            bad.push(format!("{}:{}: {}", p.display(), n + 1, l));
                        }
                    }
                }
            }
        }
        let mut bad = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut bad,
        );
        assert!(
            bad.is_empty(),
            "decode through cni::gojson:\n{}",
            bad.join("\n")
        );
    }
}
