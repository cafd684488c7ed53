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

mod commits;
mod direct;
mod saved;
mod script;

/// The direct reader of iptables-nft's rules, for the fuzz entry point `netlink::fuzz::nft_dump`.
pub(crate) use direct::read_dump;
pub use saved::Saved;
pub use script::{MAX_LINE, Script};

use crate::error::code;
use crate::error::{Error, Result};
use std::io::Write;
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

/// iptables or ip6tables, found in PATH.
pub struct Iptables {
    pub proto: Proto,
    save: PathBuf,
    restore: PathBuf,
    /// The rules are written and read in-process ([`direct::usable`]).
    direct: bool,
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
        let restore = find("restore")?;
        Ok(Iptables {
            proto,
            save: find("save")?,
            direct: direct::usable(&restore),
            restore,
        })
    }

    /// `iptables-save -t TABLE`, parsed; read from the kernel without the tool when every
    /// rule of the table is one [`direct`] reads.
    pub fn save(&self, table: &str) -> Result<Saved> {
        if self.direct
            && let Some(saved) = direct::save(self.proto, table)
        {
            return Ok(saved);
        }
        let out = Command::new(&self.save)
            .args(["-t", table])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::host_io(format_args!("run {}", self.save.display()), e))?;
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

    /// Apply `script` in-process where [`direct`] can, else feed it to `iptables-restore
    /// --noflush --wait=N`; done once its commit is announced (iptables-nft), not after its
    /// exit, which waits for the kernel to free what the commit deleted ([`commits`]).
    pub fn restore(&self, table: &str, script: &Script) -> Result<()> {
        if script.is_empty() {
            return Ok(());
        }
        script.check()?;
        if self.direct && direct::restore(self.proto, table, script) {
            return Ok(());
        }
        let input = script.render(table)?;
        let watch = commits::CommitWatch::start();
        let mut child = Command::new(&self.restore)
            .arg("--noflush")
            .arg(format!("--wait={LOCK_WAIT_SECS}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::host_io(format_args!("run {}", self.restore.display()), e))?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input.as_bytes());
        }
        let expected = input.lines().filter(|l| *l == "COMMIT").count();
        let ended = commits::wait(&mut child, watch, expected)
            .map_err(|e| Error::host_io(format_args!("wait for {}", self.restore.display()), e))?;
        let err = match ended {
            commits::Ended::Committed => return Ok(()),
            commits::Ended::Exited(status, _) if status.success() => return Ok(()),
            commits::Ended::Exited(_, err) => err,
        };
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

    /// [`Iptables::transact`] for changes that create `chains`: while none of them can exist
    /// ([`may_hold`], no exec), `plan` runs against a table holding only the rules `assumed`
    /// (`(chain, spec)`; their chains and jump targets count as existing) and its script is
    /// restored after one `-C` per assumed rule, without saving the table first — an ADD then
    /// costs one exec whatever the table holds (`iptables-save` of a nat table with a chain and
    /// a jump per container grows with the node). The `-C` lines make that restore fail as a
    /// whole unless every assumed rule exists, so it changes exactly what the plan would change
    /// against the saved table, provided the plan asks the table about nothing but the assumed
    /// rules and `chains` (rules it appends to other chains then go in without a duplicate
    /// check: they jump to one of the new chains, so none can exist yet). Any failure, or a
    /// plan failing against the assumed table, falls back to the full transaction.
    pub fn transact_new(
        &self,
        table: &str,
        chains: &[&str],
        assumed: &[(&str, &str)],
        mut plan: impl FnMut(&Saved) -> Result<Script>,
    ) -> Result<()> {
        // A chain of the assumed rules that cannot exist (a first ADD on the node) makes the
        // quick restore fail anyway: save right away.
        let mut theirs: Vec<&str> = assumed.iter().map(|(c, _)| *c).collect();
        theirs.dedup();
        if !may_hold(self.proto, table, chains)
            && theirs.iter().all(|c| may_hold(self.proto, table, &[c]))
            && let Ok(p) = plan(&Saved::assumed(assumed))
        {
            let mut s = Script::new();
            for (chain, spec) in assumed {
                s.check_rule(chain, spec);
            }
            s.extend(p);
            if self.restore(table, &s).is_ok() {
                return Ok(());
            }
        }
        self.transact(table, plan)
    }

    /// Restore `exact` (deletions of rules known by their exact spec, which fail as a whole
    /// when any is missing); when it fails, save the table and restore what `plan` computes
    /// from it, as [`Iptables::transact`]. DEL paths that know what ADD wrote (from the config
    /// or prevResult) thereby skip `iptables-save`.
    pub fn transact_exact(
        &self,
        table: &str,
        exact: &Script,
        plan: impl FnMut(&Saved) -> Result<Script>,
    ) -> Result<()> {
        if !exact.is_empty() && self.restore(table, exact).is_ok() {
            return Ok(());
        }
        self.transact(table, plan)
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
        let a = Saved::assumed(&[
            (
                "PREROUTING",
                "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
            ),
            (
                "CNI-HOSTPORT-MASQ",
                "-m mark --mark 0x2000/0x2000 -j MASQUERADE",
            ),
        ]);
        assert!(a.has_chain("CNI-HOSTPORT-DNAT") && a.has_chain("CNI-HOSTPORT-MASQ"));
        assert!(a.has_rule(
            "PREROUTING",
            "-m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT"
        ));
        assert_eq!(a.rules().count(), 2);
        let j: Vec<_> = s.jumps_to("CNI-DN-x").collect();
        assert_eq!(j.len(), 2);
        assert_eq!(s.jumps_to("CNI-DN").count(), 0);
    }
}
