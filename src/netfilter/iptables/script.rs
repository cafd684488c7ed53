//! [`Script`]: the input written to `iptables-restore --noflush`, refusing any line that could
//! carry more than the rule it was built for.

use super::Saved;
use crate::error::{Error, Result};

/// The longest line written into an `iptables-restore` script. iptables-restore reads its
/// input with a fixed buffer and would treat the rest of a longer line as a new line.
pub const MAX_LINE: usize = 8192;

/// The lines of one `iptables-restore` transaction for one table.
///
/// The writer refuses (the transaction fails with code 7, nothing is written) any line holding
/// a newline, carriage return, NUL or other control character, or longer than [`MAX_LINE`]:
/// whatever a caller passes, one call adds at most one line. Lines added while an origin is set
/// ([`Script::from_key`]) carry the config key their user-supplied parts came from, so that a
/// rule iptables-restore rejects is reported as a config error naming that key.
#[derive(Debug, Default)]
pub struct Script {
    lines: Vec<(String, Option<&'static str>)>,
    origin: Option<&'static str>,
    /// User-supplied values per key, to recognise them in iptables-restore's messages.
    values: Vec<(&'static str, String)>,
    err: Option<Error>,
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }
    /// The writer's refusal, if any line was refused (see [`Script`]): `iptables-restore`
    /// reads one command per line, so a line break would smuggle in commands of its own.
    /// Callers validate what they put in rules; this is the last line of defence.
    pub fn check(&self) -> Result<()> {
        self.err.clone().map_or(Ok(()), Err)
    }
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.err.is_none()
    }
    /// Run `f` with every line it adds attributed to config key `key`, whose user-supplied
    /// values are `values`.
    pub fn from_key(
        &mut self,
        key: &'static str,
        values: &[&str],
        f: impl FnOnce(&mut Self),
    ) -> &mut Self {
        for v in values {
            if !v.is_empty() {
                self.values.push((key, v.to_string()));
            }
        }
        let prev = self.origin.replace(key);
        f(self);
        self.origin = prev;
        self
    }
    pub(super) fn push(&mut self, line: String) {
        if self.err.is_some() {
            return;
        }
        let why = if line.chars().any(|c| c.is_control()) {
            Some("a newline, carriage return, NUL or other control character")
        } else if line.len() > MAX_LINE {
            Some("a line too long for iptables-restore")
        } else {
            None
        };
        if let Some(why) = why {
            let what = self.origin.map(|k| format!("{k}: ")).unwrap_or_default();
            self.err = Some(Error::config(format!(
                "{what}refusing to write an iptables rule containing {why}: {line:?}"
            )));
            return;
        }
        self.lines.push((line, self.origin));
    }
    /// The lines, in order (without the table and COMMIT).
    pub(super) fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(|(l, _)| l.as_str())
    }
    pub(super) fn has_line(&self, line: &str) -> bool {
        self.lines.iter().any(|(l, _)| l == line)
    }
    pub fn new_chain(&mut self, chain: &str) -> &mut Self {
        self.push(format!("-N {chain}"));
        self
    }
    /// `-N` unless `saved` already has it.
    pub fn ensure_chain(&mut self, saved: &Saved, chain: &str) -> &mut Self {
        if !saved.has_chain(chain) && !self.has_line(&format!("-N {chain}")) {
            self.new_chain(chain);
        }
        self
    }
    pub fn flush(&mut self, chain: &str) -> &mut Self {
        self.push(format!("-F {chain}"));
        self
    }
    pub fn delete_chain(&mut self, chain: &str) -> &mut Self {
        self.push(format!("-X {chain}"));
        self
    }
    pub fn append(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.push(format!("-A {chain} {spec}"));
        self
    }
    /// Insert at the head of `chain`.
    pub fn insert(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.push(format!("-I {chain} 1 {spec}"));
        self
    }
    /// `-C CHAIN SPEC`: the transaction fails unless the rule exists.
    pub fn check_rule(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.push(format!("-C {chain} {spec}"));
        self
    }
    /// Append the lines of `other` (with their origins).
    pub fn extend(&mut self, other: Script) -> &mut Self {
        if self.err.is_none() {
            self.err = other.err;
        }
        self.lines.extend(other.lines);
        self.values.extend(other.values);
        self
    }
    pub fn delete(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.push(format!("-D {chain} {spec}"));
        self
    }
    /// Append unless an identical rule is in `saved` (or already queued).
    pub fn append_unique(&mut self, saved: &Saved, chain: &str, spec: &str) -> &mut Self {
        let line = format!("-A {chain} {spec}");
        if !saved.has_rule(chain, spec) && !self.has_line(&line) {
            self.push(line);
        }
        self
    }
    /// Insert at the head unless an identical rule is in `saved`.
    pub fn insert_unique(&mut self, saved: &Saved, chain: &str, spec: &str) -> &mut Self {
        if !saved.has_rule(chain, spec) {
            self.insert(chain, spec);
        }
        self
    }
    /// Remove every rule jumping to `chain`, then flush and delete it (nothing if missing).
    pub fn remove_chain(&mut self, saved: &Saved, chain: &str) -> &mut Self {
        if !saved.has_chain(chain) {
            return self;
        }
        for (from, spec) in saved.jumps_to(chain) {
            self.delete(from, spec);
        }
        self.flush(chain).delete_chain(chain)
    }
    pub(super) fn render(&self, table: &str) -> Result<String> {
        if let Some(e) = &self.err {
            return Err(e.clone());
        }
        let mut s = format!("*{table}\n");
        for (l, _) in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("COMMIT\n");
        Ok(s)
    }
    /// The config key a failure reported by iptables-restore as `err` comes from: the origin
    /// of the line it names, or the key whose value it quotes (errors found at COMMIT, such
    /// as a missing jump target, name the object, not the line).
    pub(super) fn blame(&self, err: &str) -> Option<&'static str> {
        if let Some(n) = error_line(err)
            && let Some((_, Some(key))) = n.checked_sub(2).and_then(|i| self.lines.get(i))
        {
            return Some(key);
        }
        self.values.iter().find_map(|(k, v)| {
            [format!("'{v}'"), format!("\"{v}\""), format!("`{v}'")]
                .iter()
                .any(|q| err.contains(q.as_str()))
                .then_some(*k)
        })
    }
}

/// The script line number in an iptables-restore error (`Error occurred at line: N`,
/// `line N: ...`, `line N failed`).
pub(super) fn error_line(err: &str) -> Option<usize> {
    for pat in ["line: ", "line "] {
        for (i, _) in err.match_indices(pat) {
            let digits: String = err[i + pat.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}
