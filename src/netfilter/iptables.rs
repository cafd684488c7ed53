//! The iptables backend: one `iptables-save -t TABLE` to read the current state and one
//! `iptables-restore --noflush --wait=N` to apply every change of an ADD or DEL atomically — per
//! family, never one exec per rule (the Go plugins issue a `-C` and an `-A` exec per rule and
//! hold the xtables lock for seconds on busy nodes).
//!
//! Rules are kept in `iptables-save`'s canonical text (`-A CHAIN <spec>`); the callers write
//! their rules in that same form, so "does this rule exist" is a string comparison and a rule
//! created by the Go plugins (which iptables canonicalises identically) is recognised and
//! deleted by its saved text.
//!
//! Concurrency: new chains are created with `-N` (never `:CHAIN`, which would flush an existing
//! chain under `--noflush`) and rules are deleted by their full spec, so when another process
//! changed the table between our save and our restore, the restore fails as a whole and the
//! transaction is recomputed from a fresh save (a few times). A lock that stays busy longer than
//! the bounded wait fails with code 11 ("try again later") instead of hanging.

use crate::error::code;
use crate::error::{Error, Result};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Seconds `iptables-restore` may wait for the xtables lock (legacy iptables only).
const LOCK_WAIT_SECS: u32 = 5;
/// Attempts when the table changed under us between save and restore.
const ATTEMPTS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    V4,
    V6,
}

impl Proto {
    fn prefix(self) -> &'static str {
        match self {
            Proto::V4 => "iptables",
            Proto::V6 => "ip6tables",
        }
    }
    pub fn of(ip: &std::net::IpAddr) -> Proto {
        if ip.is_ipv4() { Proto::V4 } else { Proto::V6 }
    }
    /// The host prefix length iptables-save prints for a single address.
    pub fn host_bits(self) -> u8 {
        match self {
            Proto::V4 => 32,
            Proto::V6 => 128,
        }
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `iptables-save` and `iptables-restore` (or the ip6tables pair) are installed — the
/// cheap part of upstream's "iptables is usable" probe, used to pick the default backend.
pub fn available(proto: Proto) -> bool {
    find_in_path(&format!("{}-save", proto.prefix())).is_some()
        && find_in_path(&format!("{}-restore", proto.prefix())).is_some()
}

/// Whether any of `chains` may exist in `table` — probed without running any tool, so that
/// teardown of the other backend (DEL tries both, as upstream) costs no exec on a node or
/// namespace where iptables holds nothing of ours. iptables-nft keeps its chains as nf_tables
/// chains of table `ip|ip6 <table>`, which the kernel answers about directly; a loaded legacy
/// table (listed in /proc/net/ip{,6}_tables_names) is opaque and always counts as "maybe".
pub fn may_hold(proto: Proto, table: &str, chains: &[&str]) -> bool {
    let names = match proto {
        Proto::V4 => "/proc/net/ip_tables_names",
        Proto::V6 => "/proc/net/ip6_tables_names",
    };
    if std::fs::read_to_string(names).is_ok_and(|s| s.lines().any(|l| l == table)) {
        return true;
    }
    let family = match proto {
        Proto::V4 => super::Family::Ip,
        Proto::V6 => super::Family::Ip6,
    };
    let t = super::Table::new(family, table);
    let Ok(mut nft) = super::Nftables::open() else {
        // No nf_tables in this kernel: iptables-nft cannot hold anything either.
        return false;
    };
    chains
        .iter()
        .any(|c| nft.chain_exists(&t, c).unwrap_or(true))
}

/// One table as `iptables-save` printed it: the text, with the chain names and the
/// `-A CHAIN spec` lines indexed by byte range (no allocation per rule: a kube-proxy node's nat
/// table has tens of thousands of rules).
#[derive(Debug, Default, Clone)]
pub struct Saved {
    text: String,
    chains: Vec<Range<usize>>,
    /// `(chain, spec)` of every `-A CHAIN spec` line, in order.
    rules: Vec<(Range<usize>, Range<usize>)>,
}

impl Saved {
    pub fn parse(text: impl Into<String>) -> Saved {
        let text = text.into();
        let base = text.as_ptr() as usize;
        let range = |part: &str| {
            let start = part.as_ptr() as usize - base;
            start..start + part.len()
        };
        let (mut chains, mut rules) = (Vec::new(), Vec::new());
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix(':') {
                if let Some(name) = rest.split_whitespace().next() {
                    chains.push(range(name));
                }
            } else if let Some(rest) = line.strip_prefix("-A ") {
                let (chain, spec) = rest.split_once(' ').unwrap_or((rest, ""));
                rules.push((range(chain), range(spec.trim())));
            }
        }
        Saved {
            text,
            chains,
            rules,
        }
    }
    fn at(&self, r: &Range<usize>) -> &str {
        &self.text[r.clone()]
    }
    /// The chain names, built-in ones included.
    pub fn chains(&self) -> impl Iterator<Item = &str> {
        self.chains.iter().map(|r| self.at(r))
    }
    /// Every `(chain, spec)`, in order.
    pub fn rules(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rules.iter().map(|(c, s)| (self.at(c), self.at(s)))
    }
    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains().any(|c| c == chain)
    }
    pub fn has_rule(&self, chain: &str, spec: &str) -> bool {
        self.rules().any(|(c, s)| c == chain && s == spec)
    }
    pub fn rules_in<'a>(&'a self, chain: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.rules()
            .filter(move |(c, _)| *c == chain)
            .map(|(_, s)| s)
    }
    /// Every `(chain, spec)` whose target is `-j TARGET` or `-g TARGET`.
    pub fn jumps_to<'a>(&'a self, target: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.rules().filter(move |(_, s)| {
            let t = s
                .rsplit_once(" -j ")
                .or_else(|| s.rsplit_once(" -g "))
                .map(|(_, t)| t)
                .or_else(|| s.strip_prefix("-j "))
                .or_else(|| s.strip_prefix("-g "));
            t == Some(target)
        })
    }
}

/// A chain name from the config (`key` names where it came from), as iptables allows it; see
/// [`super::validate::chain_name`]. This is what keeps a name from becoming extra lines
/// (`"X\n-A INPUT -j DROP"`) or options of an `iptables-restore` script.
pub fn validate_chain_name(key: &str, name: &str) -> Result<()> {
    super::validate::chain_name(key, name)
}

/// Options that would turn a match condition into another command or verdict of the rule it
/// is pasted into; conditions are matches only.
const NOT_A_CONDITION: &[&str] = &[
    "-A",
    "--append",
    "-C",
    "--check",
    "-D",
    "--delete",
    "-I",
    "--insert",
    "-R",
    "--replace",
    "-L",
    "--list",
    "-S",
    "--list-rules",
    "-F",
    "--flush",
    "-Z",
    "--zero",
    "-N",
    "--new-chain",
    "-X",
    "--delete-chain",
    "-P",
    "--policy",
    "-E",
    "--rename-chain",
    "-j",
    "--jump",
    "-g",
    "--goto",
    "-t",
    "--table",
];

/// iptables-syntax `conditionsV4/V6` tokens (`key` names the list): each one argument, without
/// control characters, and no option that makes it more than a match. iptables-restore judges
/// the rest; its refusal is reported against `key` as well (see [`Iptables::restore`] callers).
pub fn validate_condition_tokens(key: &str, tokens: &[String]) -> Result<()> {
    for (i, t) in tokens.iter().enumerate() {
        let at = format!("{key}[{i}]");
        super::validate::ipt_token(&at, t)?;
        let problem = if t.is_empty() {
            "is empty"
        } else if NOT_A_CONDITION.contains(&t.as_str()) {
            "is a command or target option, not a match"
        } else {
            continue;
        };
        return Err(Error::config(format!("{at}: {t:?} {problem}")));
    }
    Ok(())
}

/// Quote one argument the way `iptables-save` does (so our specs equal its output).
pub fn quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !arg.is_empty() && arg.chars().all(safe) {
        return arg.to_string();
    }
    let mut q = String::with_capacity(arg.len() + 2);
    q.push('"');
    for c in arg.chars() {
        if matches!(c, '"' | '\\' | '\'') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The longest comment the iptables comment match takes (XT_MAX_COMMENT_LEN - 1).
pub const COMMENT_MAX: usize = 255;

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `text` as iptables takes it: a longer one is cut and ends in `...` (names and container IDs
/// have no length limit, the comment match does).
pub fn trim_comment(text: &str) -> String {
    if text.len() <= COMMENT_MAX {
        return text.to_string();
    }
    format!("{}...", cut(text, COMMENT_MAX - 3))
}

/// `-m comment --comment TEXT` in saved form (trimmed with [`trim_comment`]).
pub fn comment(text: &str) -> String {
    format!("-m comment --comment {}", quote(&trim_comment(text)))
}

/// How a comment starting with `prefix` begins in `iptables-save` output (quoted, its closing
/// quote cut off), to find the rules whose comment starts so — also when the comment was
/// trimmed.
pub fn comment_prefix(prefix: &str) -> String {
    quote(cut(prefix, COMMENT_MAX - 3))
        .trim_end_matches('"')
        .to_string()
}

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
    fn push(&mut self, line: String) {
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
    fn has_line(&self, line: &str) -> bool {
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
    fn render(&self, table: &str) -> Result<String> {
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
    fn blame(&self, err: &str) -> Option<&'static str> {
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
fn error_line(err: &str) -> Option<usize> {
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

/// iptables or ip6tables, found in PATH.
pub struct Iptables {
    pub proto: Proto,
    save: PathBuf,
    restore: PathBuf,
}

impl Iptables {
    /// The tools for `proto`, or an error saying which binary is missing.
    pub fn new(proto: Proto) -> Result<Iptables> {
        let find = |suffix: &str| {
            let name = format!("{}-{suffix}", proto.prefix());
            find_in_path(&name).ok_or_else(|| {
                Error::new(
                    code::IO_FAILURE,
                    format!(
                        "iptables backend: {name} not found in PATH (install iptables, or use \
                         the nftables backend, which needs no tools)"
                    ),
                )
            })
        };
        Ok(Iptables {
            proto,
            save: find("save")?,
            restore: find("restore")?,
        })
    }

    /// `iptables-save -t TABLE`, parsed.
    pub fn save(&self, table: &str) -> Result<Saved> {
        let out = Command::new(&self.save)
            .args(["-t", table])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(format_args!("run {}", self.save.display()), e))?;
        if !out.status.success() {
            return Err(Error::new(
                code::IO_FAILURE,
                format!(
                    "{} -t {table} failed: {}",
                    self.save.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ));
        }
        Ok(Saved::parse(String::from_utf8_lossy(&out.stdout)))
    }

    /// Feed `script` to `iptables-restore --noflush --wait=N`.
    pub fn restore(&self, table: &str, script: &Script) -> Result<()> {
        if script.is_empty() {
            return Ok(());
        }
        let input = script.render(table)?;
        let mut child = Command::new(&self.restore)
            .arg("--noflush")
            .arg(format!("--wait={LOCK_WAIT_SECS}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format_args!("run {}", self.restore.display()), e))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| Error::io(format_args!("wait for {}", self.restore.display()), e))?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if let Some(key) = script.blame(&err) {
            return Err(Error::config(format!(
                "{key}: iptables-restore rejected the rules made from it: {}",
                err.lines().next().unwrap_or_default()
            ))
            .with_details(format!("{err}\n{}", input.trim_end())));
        }
        if err.contains("xtables lock") {
            return Err(Error::try_again(format!(
                "{}: the xtables lock is held by another program (waited {LOCK_WAIT_SECS} s): {err}",
                self.restore.display()
            )));
        }
        Err(Error::new(
            code::IO_FAILURE,
            format!(
                "{} failed on table {table}: {err}\n{}",
                self.restore.display(),
                input.trim_end()
            ),
        ))
    }

    /// Save `table`, let `plan` compute the changes, restore them; recompute and retry when
    /// the table changed in between (the restore then fails as a whole).
    pub fn transact(
        &self,
        table: &str,
        mut plan: impl FnMut(&Saved) -> Result<Script>,
    ) -> Result<()> {
        let mut last = None;
        for attempt in 0..ATTEMPTS {
            let saved = self.save(table)?;
            let script = plan(&saved)?;
            match self.restore(table, &script) {
                Ok(()) => return Ok(()),
                Err(e) if e.code == code::TRY_AGAIN_LATER || e.code == code::INVALID_CONFIG => {
                    return Err(e);
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(20 << attempt));
        }
        Err(last.unwrap_or_else(|| Error::internal("iptables-restore failed")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_iptables_save() {
        assert_eq!(quote("CNI-HOSTPORT-DNAT"), "CNI-HOSTPORT-DNAT");
        assert_eq!(
            quote(r#"name: "net" id: "c1""#),
            r#""name: \"net\" id: \"c1\"""#
        );
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(
            comment_prefix(r#"name: "net" id: "#),
            r#""name: \"net\" id: "#
        );
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn long_comments_are_trimmed_and_still_found() {
        let long = format!("name: \"{}\" id: \"c1\"", "n".repeat(300));
        let c = comment(&long);
        let text = c.strip_prefix("-m comment --comment ").unwrap();
        // Quoted: 255 bytes of comment plus the quotes and the escapes of the two quotes kept.
        assert!(text.ends_with("...\""), "{text}");
        assert_eq!(trim_comment(&long).len(), COMMENT_MAX);
        assert!(text.starts_with(&comment_prefix(&long)));
        assert!(text.starts_with(&comment_prefix("name: \"nnn")));
        assert_eq!(trim_comment("short"), "short");
        assert!(trim_comment(&"é".repeat(200)).len() <= COMMENT_MAX);
    }

    #[test]
    fn parses_save_output() {
        let s = Saved::parse(
            "# Generated by iptables-save\n*nat\n:PREROUTING ACCEPT [0:0]\n:CNI-DN-x - [0:0]\n\
             -A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT\n\
             -A CNI-HOSTPORT-DNAT -p tcp -m multiport --dports 80 -j CNI-DN-x\n\
             -A FOO -g CNI-DN-x\nCOMMIT\n",
        );
        assert!(s.has_chain("CNI-DN-x"));
        assert!(s.has_rule(
            "PREROUTING",
            "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT"
        ));
        let j: Vec<_> = s.jumps_to("CNI-DN-x").collect();
        assert_eq!(j.len(), 2);
        assert_eq!(s.jumps_to("CNI-DN").count(), 0);
    }
}
