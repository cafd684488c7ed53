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

use crate::cni::error::code;
use crate::cni::{Error, Result};
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
    let Ok(mut nft) = super::Nft::open() else {
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

/// Longest user-defined chain name iptables accepts (`XT_EXTENSION_MAXNAMELEN` - 1).
pub const MAX_CHAIN_NAME: usize = 28;

/// A chain name from the config (`key` names where it came from), as iptables allows it: 1–28
/// printable ASCII characters, no whitespace or quotes, not starting with `-` or `!`, and not
/// a built-in target or chain. Code 7 naming the key otherwise. This is what keeps a name from
/// becoming extra lines (`"X\n-A INPUT -j DROP"`) or options of an `iptables-restore` script.
pub fn validate_chain_name(key: &str, name: &str) -> Result<()> {
    const RESERVED: &[&str] = &[
        "ACCEPT",
        "DROP",
        "QUEUE",
        "RETURN",
        "REJECT",
        "MASQUERADE",
        "DNAT",
        "SNAT",
        "MARK",
        "INPUT",
        "OUTPUT",
        "FORWARD",
        "PREROUTING",
        "POSTROUTING",
    ];
    let problem = if name.is_empty() {
        "is empty"
    } else if name.len() > MAX_CHAIN_NAME {
        "is longer than 28 characters"
    } else if name.starts_with('-') || name.starts_with('!') {
        "starts with - or !"
    } else if !name
        .chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '\\'))
    {
        "may only hold printable ASCII without whitespace or quotes"
    } else if RESERVED.contains(&name) {
        "is a built-in chain or target"
    } else {
        return Ok(());
    };
    Err(Error::config(format!(
        "{key}: chain name {name:?} {problem}"
    )))
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
/// the rest; its refusal is reported against `key` as well (see [`Ipt::restore`] callers).
pub fn validate_condition_tokens(key: &str, tokens: &[String]) -> Result<()> {
    for (i, t) in tokens.iter().enumerate() {
        let problem = if t.is_empty() {
            "is empty"
        } else if t.chars().any(char::is_control) {
            "contains a control character (newline, NUL, …)"
        } else if t.len() > 256 {
            "is longer than 256 bytes"
        } else if NOT_A_CONDITION.contains(&t.as_str()) {
            "is a command or target option, not a match"
        } else {
            continue;
        };
        return Err(Error::config(format!("{key}[{i}]: {t:?} {problem}")));
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

/// `-m comment --comment TEXT` in saved form.
pub fn comment(text: &str) -> String {
    format!("-m comment --comment {}", quote(text))
}

/// How a comment starting with `prefix` begins in `iptables-save` output (quoted, its closing
/// quote cut off), to find the rules whose comment starts so.
pub fn comment_prefix(prefix: &str) -> String {
    quote(prefix).trim_end_matches('"').to_string()
}

/// The lines of one `iptables-restore` transaction for one table.
#[derive(Debug, Default)]
pub struct Script {
    lines: Vec<String>,
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }
    /// Refuse a line holding a line break or NUL: `iptables-restore` reads one command per
    /// line, so such a line would smuggle in commands of its own. Callers validate what they
    /// put in rules; this is the last line of defence, whatever a future caller forgets.
    pub fn check(&self) -> Result<()> {
        match self.lines.iter().find(|l| l.contains(['\n', '\r', '\0'])) {
            None => Ok(()),
            Some(l) => Err(Error::config(format!(
                "refusing an iptables rule holding a line break or NUL: {:?}",
                l.chars().take(200).collect::<String>()
            ))),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
    pub fn new_chain(&mut self, chain: &str) -> &mut Self {
        self.lines.push(format!("-N {chain}"));
        self
    }
    /// `-N` unless `saved` already has it.
    pub fn ensure_chain(&mut self, saved: &Saved, chain: &str) -> &mut Self {
        if !saved.has_chain(chain) && !self.lines.iter().any(|l| l == &format!("-N {chain}")) {
            self.new_chain(chain);
        }
        self
    }
    pub fn flush(&mut self, chain: &str) -> &mut Self {
        self.lines.push(format!("-F {chain}"));
        self
    }
    pub fn delete_chain(&mut self, chain: &str) -> &mut Self {
        self.lines.push(format!("-X {chain}"));
        self
    }
    pub fn append(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.lines.push(format!("-A {chain} {spec}"));
        self
    }
    /// Insert at the head of `chain`.
    pub fn insert(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.lines.push(format!("-I {chain} 1 {spec}"));
        self
    }
    pub fn delete(&mut self, chain: &str, spec: &str) -> &mut Self {
        self.lines.push(format!("-D {chain} {spec}"));
        self
    }
    /// Append unless an identical rule is in `saved` (or already queued).
    pub fn append_unique(&mut self, saved: &Saved, chain: &str, spec: &str) -> &mut Self {
        let line = format!("-A {chain} {spec}");
        if !saved.has_rule(chain, spec) && !self.lines.contains(&line) {
            self.lines.push(line);
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
    fn render(&self, table: &str) -> String {
        let mut s = format!("*{table}\n");
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("COMMIT\n");
        s
    }
}

/// iptables or ip6tables, found in PATH.
pub struct Ipt {
    pub proto: Proto,
    save: PathBuf,
    restore: PathBuf,
}

impl Ipt {
    /// The tools for `proto`, or an error saying which binary is missing.
    pub fn new(proto: Proto) -> Result<Ipt> {
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
        Ok(Ipt {
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
        script.check()?;
        let input = script.render(table);
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
        if out.status.code() == Some(4) || err.contains("xtables lock") {
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
                Err(e) if e.code == code::TRY_AGAIN_LATER => return Err(e),
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
