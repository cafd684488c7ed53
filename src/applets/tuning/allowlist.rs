//! upstream's sysctl allowlist, `/etc/cni/tuning/allowlist.conf`: when the file exists, every
//! sysctl key must match (unanchored, as Go's `regexp.MatchString`) one of its non-empty lines.
//!
//! The lines are RE2 regular expressions (Go's `regexp`), matched with `regex-lite`: the same
//! syntax but for Unicode classes (`\pL`) and `\Q…\E`, which such lists have no use for and
//! which are refused with an error naming the line, never matched loosely. It costs ~47 KB of
//! the binary (benches/NOTES.md); the small hand-written matcher it replaced refused what Go
//! accepts (`(?i)`, `\x41`, `[[:alpha:]]`, lazy quantifiers), so an allowlist valid for the Go
//! plugin failed every ADD, and it recursed per repetition, so a long key overflowed the stack.
//! regex-lite's matcher keeps its state on the heap (O(pattern × key) time), its parser stops
//! at 50 nested groups; the keys are bounded at load (`keys::MAX_KEY`), the patterns here.
//!
//! The file is the operator's, but it is read as untrusted: opened non-blocking (a FIFO does
//! not hang the ADD), it must be a regular file, and no larger than [`MAX_FILE`].

use crate::error::{Error, Result};
use crate::smallfile::{self, ReadError};

pub const PATH: &str = "/etc/cni/tuning/allowlist.conf";

/// An allowlist is a few lines; a file this large is a mistake (or `/dev/zero`-like).
pub const MAX_FILE: u64 = 1 << 20;

/// Compiled program size per line: generous for any real pattern, and it bounds the search time
/// (O(program × key)) and memory a pathological line (`a{1000}{1000}`) could take.
const MAX_PROGRAM: usize = 1 << 20;

/// The allowlist's patterns, or `None` when there is no allowlist file.
pub fn load(path: &str) -> Result<Option<Vec<(String, Regex)>>> {
    let Some(text) = read_regular(path)? else {
        return Ok(None);
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            Regex::new(l)
                .map(|r| (l.to_string(), r))
                .map_err(|why| Error::config(format!("{path}: pattern {:?}: {why}", short(l))))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// A line as errors quote it: a pattern can be as long as the file.
fn short(line: &str) -> String {
    match line.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// The text of `path`, `None` when it does not exist; anything but a regular file (a FIFO, a
/// device: see [`crate::smallfile`]), a file over [`MAX_FILE`] or one that is not UTF-8 is a
/// code 7 error naming the path.
fn read_regular(path: &str) -> Result<Option<String>> {
    let bytes = match smallfile::read(path, MAX_FILE) {
        Ok(b) => b,
        Err(ReadError::NotFound) => return Ok(None),
        Err(ReadError::NotRegular(kind)) => {
            return Err(Error::config(format!(
                "{path}: the sysctl allowlist must be a regular file, this is {kind}"
            )));
        }
        Err(ReadError::TooLarge(max)) => {
            return Err(Error::config(format!(
                "{path}: the sysctl allowlist is larger than {max} bytes"
            )));
        }
        Err(ReadError::Io(e)) => return Err(Error::host_io(format_args!("read {path}"), e)),
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| Error::config(format!("{path}: the sysctl allowlist is not UTF-8 text")))
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex(regex_lite::Regex);

impl Regex {
    pub fn new(pattern: &str) -> std::result::Result<Regex, String> {
        regex_lite::RegexBuilder::new(pattern)
            .size_limit(MAX_PROGRAM)
            .build()
            .map(Regex)
            // regex-lite's messages span lines (the pattern, a caret): one line in a CNI error.
            .map_err(|e| {
                e.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    }

    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.0.is_match(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Regex::new(p).unwrap().is_match(t)
    }

    #[test]
    fn matches_like_go_regexp() {
        // Unanchored unless anchored, as MatchString.
        assert!(m(r"ipv4\.conf", "net.ipv4.conf.eth0.rp_filter"));
        assert!(m(
            r"^net\.ipv4\.conf\.IFNAME\.[a-z_]*$",
            "net.ipv4.conf.IFNAME.arp_filter"
        ));
        assert!(!m(
            r"^net\.ipv4\.conf\.IFNAME\.[a-z_]*$",
            "net.ipv4.conf.IFNAME.a.b"
        ));
        assert!(!m(r"^net\.ipv4\.ip_forward$", "net.ipv4.ip_forwarding"));
        assert!(m(
            r"^net\.ipv6\.(conf|neigh)\.[^.]+\.\w+$",
            "net.ipv6.neigh.eth0.gc_stale_time"
        ));
        assert!(!m(
            r"^net\.ipv6\.(conf|neigh)\.[^.]+\.\w+$",
            "net.ipv6.route.eth0.x"
        ));
        assert!(m(r"^a{2,3}$", "aaa") && !m(r"^a{2,3}$", "aaaa") && !m(r"^a{2}$", "a"));
        assert!(m(r"^(?:ab)+c?$", "ababc") && !m(r"^(?:ab)+$", "aba"));
        assert!(m(r"^\d+$", "0123") && !m(r"^\d+$", "12a"));
        assert!(m("", "anything"));
        // `.` does not cross a newline, `$` is the end of the text only.
        assert!(!m("^a.b$", "a\nb") && !m("a$", "a\nb"));
    }

    /// What Go's RE2 accepts and the hand-written matcher refused (issue 24, item 5): an
    /// allowlist valid for the Go plugin must not fail every ADD.
    #[test]
    fn accepts_re2_syntax() {
        assert!(m(r"(?i)^NET\.IPV4\.", "net.ipv4.conf.eth0.rp_filter"));
        assert!(m(r"^net\.\x69pv4\.", "net.ipv4.x"));
        assert!(m(r"^net\.[[:alpha:]]+4\.", "net.ipv4.x") && !m(r"^[[:digit:]]", "net"));
        assert!(m(r"^net\..*?\.rp_filter$", "net.ipv4.conf.all.rp_filter"));
        assert!(m(r"^net\.(?P<fam>ipv[46])\.", "net.ipv6.x"));
        assert!(m(r"\Anet\.core\.somaxconn\z", "net.core.somaxconn"));
    }

    #[test]
    fn refuses_what_it_cannot_match() {
        // Go refuses all but the last (a Unicode class, which regex-lite does not have).
        for bad in [r"(a", r"a)", r"[a", r"*a", r"\1", r"a{3,1}", r"\pL"] {
            assert!(Regex::new(bad).is_err(), "{bad}");
        }
        // Multi-line parser messages become one line.
        let e = Regex::new("(a").unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }

    /// Issue 24, item 5: these overflowed the stack of the hand-written matcher (SIGSEGV).
    #[test]
    fn hostile_patterns_and_keys_end() {
        let r = Regex::new(r"^(a*)*b$").unwrap();
        assert!(!r.is_match(&"a".repeat(40)));
        let long = "a".repeat(100_000);
        assert!(
            Regex::new(r"^(?:a|b)*c$")
                .unwrap()
                .is_match(&(long.clone() + "c"))
        );
        assert!(!Regex::new(r"^a+$").unwrap().is_match(&(long + "b")));
        let deep = format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(Regex::new(&deep).is_err());
        assert!(Regex::new("a{1000}{1000}{1000}").is_err());
    }

    #[test]
    fn operator_file_must_be_a_small_regular_file() {
        let dir = std::env::temp_dir().join(format!("cnibox-allowlist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = |n: &str| dir.join(n).display().to_string();
        assert!(load(&p("missing")).unwrap().is_none());
        std::fs::write(p("ok"), "\n  ^net\\.core\\.  \n\n(?i)^NET\n").unwrap();
        let l = load(&p("ok")).unwrap().unwrap();
        assert_eq!(
            l.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
            [r"^net\.core\.", "(?i)^NET"]
        );
        nix::unistd::mkfifo(dir.join("fifo").as_path(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = load(&p("fifo")).unwrap_err();
        assert!(e.code == 7 && e.msg.contains("FIFO"), "{e:?}");
        let e = load("/dev/zero").unwrap_err();
        assert!(e.code == 7 && e.msg.contains("character device"), "{e:?}");
        let e = load(&dir.display().to_string()).unwrap_err();
        assert!(e.code == 7 && e.msg.contains("directory"), "{e:?}");
        std::fs::write(p("big"), vec![b'a'; MAX_FILE as usize + 1]).unwrap();
        let e = load(&p("big")).unwrap_err();
        assert!(e.code == 7 && e.msg.contains("larger"), "{e:?}");
        std::fs::write(p("bad"), "^net\\.\n(a\n").unwrap();
        let e = load(&p("bad")).unwrap_err();
        assert!(e.code == 7 && e.msg.contains("\"(a\""), "{e:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
