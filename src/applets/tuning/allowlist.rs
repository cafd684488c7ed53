//! upstream's sysctl allowlist, `/etc/cni/tuning/allowlist.conf`: when the file exists, every
//! sysctl key must match (unanchored, as Go's `regexp.MatchString`) one of its non-empty lines.
//!
//! The lines are regular expressions. A regex crate would cost hundreds of kilobytes of the
//! binary for a file of a few lines, so this is a small backtracking matcher for the syntax
//! such lists use — literals, `.`, escapes (`\.`, `\d`, `\w`, `\s` and their negations),
//! classes `[a-z_]` / `[^.]`, groups with alternation `(a|b)` and `(?:…)`, anchors `^` `$`,
//! and the quantifiers `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` — which answers "does it match
//! somewhere" exactly as RE2 does. Anything else (backreferences, flags, Unicode classes) is
//! refused with an error naming the line, never matched loosely.

use crate::error::{Error, Result};
use std::cell::Cell;

pub const PATH: &str = "/etc/cni/tuning/allowlist.conf";

/// The allowlist's patterns, or `None` when there is no allowlist file.
pub fn load(path: &str) -> Result<Option<Vec<(String, Regex)>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format_args!("read {path}"), e)),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            Regex::new(l)
                .map(|r| (l.to_string(), r))
                .map_err(|why| Error::config(format!("{path}: pattern {l:?}: {why}")))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

#[derive(Debug, Clone)]
enum Node {
    Char(char),
    Any,
    Class(Vec<(char, char)>, bool),
    Start,
    End,
    Group(Vec<Vec<Node>>),
    Repeat(Box<Node>, usize, Option<usize>),
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex(Vec<Vec<Node>>);

/// Nested quantifiers can make backtracking exponential; the allowlist is the admin's, but a
/// bound keeps a bad line from hanging every ADD.
const MAX_STEPS: usize = 1 << 20;

impl Regex {
    pub fn new(pattern: &str) -> std::result::Result<Regex, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        let alts = p.alternation()?;
        if p.i != chars.len() {
            return Err(format!("unexpected {:?}", chars[p.i]));
        }
        Ok(Regex(alts))
    }

    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let m = Matcher {
            t: &t,
            steps: Cell::new(0),
        };
        (0..=t.len()).any(|start| self.0.iter().any(|alt| m.seq(alt, start, &mut |_| true)))
    }
}

struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn alternation(&mut self) -> std::result::Result<Vec<Vec<Node>>, String> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.i += 1;
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    fn sequence(&mut self) -> std::result::Result<Vec<Node>, String> {
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            self.i += 1;
            let atom = match c {
                '.' => Node::Any,
                '^' => Node::Start,
                '$' => Node::End,
                '(' => {
                    if self.s.get(self.i..self.i + 2) == Some(&['?', ':']) {
                        self.i += 2;
                    } else if self.peek() == Some('?') {
                        return Err("group flags are not supported".into());
                    }
                    let alts = self.alternation()?;
                    if self.peek() != Some(')') {
                        return Err("missing )".into());
                    }
                    self.i += 1;
                    Node::Group(alts)
                }
                '[' => self.class()?,
                '\\' => self.escape()?,
                '*' | '+' | '?' | '{' => return Err(format!("nothing to repeat before {c:?}")),
                c => Node::Char(c),
            };
            let atom = self.quantified(atom)?;
            out.push(atom);
        }
        Ok(out)
    }

    fn quantified(&mut self, atom: Node) -> std::result::Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => {
                let close = self.s[self.i..]
                    .iter()
                    .position(|&c| c == '}')
                    .ok_or("missing }")?;
                let body: String = self.s[self.i + 1..self.i + close].iter().collect();
                let num = |t: &str| {
                    t.parse::<usize>()
                        .map_err(|_| format!("bad repeat {{{body}}}"))
                };
                let r = match body.split_once(',') {
                    None => (num(&body)?, Some(num(&body)?)),
                    Some((a, "")) => (num(a)?, None),
                    Some((a, b)) => (num(a)?, Some(num(b)?)),
                };
                if r.0 > 1000 || r.1.is_some_and(|m| m > 1000 || m < r.0) {
                    return Err(format!("bad repeat {{{body}}}"));
                }
                self.i += close;
                r
            }
            _ => return Ok(atom),
        };
        self.i += 1;
        if matches!(atom, Node::Start | Node::End) {
            return Err("nothing to repeat".into());
        }
        // Lazy (`*?`) and possessive forms are not part of the supported syntax.
        if matches!(self.peek(), Some('?' | '+' | '*')) {
            return Err("stacked or lazy quantifiers are not supported".into());
        }
        Ok(Node::Repeat(Box::new(atom), min, max))
    }

    fn escape(&mut self) -> std::result::Result<Node, String> {
        let c = self.peek().ok_or("trailing backslash")?;
        self.i += 1;
        Ok(match c {
            'd' | 'D' => Node::Class(vec![('0', '9')], c == 'D'),
            'w' | 'W' => Node::Class(WORD.to_vec(), c == 'W'),
            's' | 'S' => Node::Class(SPACE.to_vec(), c == 'S'),
            c if c.is_ascii_punctuation() => Node::Char(c),
            c => return Err(format!("unsupported escape \\{c}")),
        })
    }

    fn class(&mut self) -> std::result::Result<Node, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.i += 1;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek().ok_or("missing ]")?;
            self.i += 1;
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = match c {
                '\\' => match self.escape()? {
                    Node::Char(c) => c,
                    Node::Class(r, false) => {
                        ranges.extend(r);
                        continue;
                    }
                    _ => return Err("negated escape inside a class".into()),
                },
                '[' if self.peek() == Some(':') => {
                    return Err("POSIX classes are not supported".into());
                }
                c => c,
            };
            if self.peek() == Some('-') && self.s.get(self.i + 1).is_some_and(|&c| c != ']') {
                self.i += 1;
                let mut hi = self.peek().ok_or("missing ]")?;
                self.i += 1;
                if hi == '\\' {
                    hi = match self.escape()? {
                        Node::Char(c) => c,
                        _ => return Err("bad class range".into()),
                    };
                }
                if hi < lo {
                    return Err(format!("bad class range {lo}-{hi}"));
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(Node::Class(ranges, negated))
    }
}

const WORD: &[(char, char)] = &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')];
const SPACE: &[(char, char)] = &[('\t', '\n'), ('\x0c', '\r'), (' ', ' ')];

/// A backtracking match over `t`; continuations `k` receive each end position and return
/// whether the whole match succeeded.
struct Matcher<'a> {
    t: &'a [char],
    steps: Cell<usize>,
}

impl Matcher<'_> {
    fn tick(&self) -> bool {
        self.steps.set(self.steps.get() + 1);
        self.steps.get() <= MAX_STEPS
    }

    fn seq(&self, alt: &[Node], at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        if !self.tick() {
            return false;
        }
        match alt.split_first() {
            None => k(at),
            Some((first, rest)) => self.one(first, at, &mut |next| self.seq(rest, next, k)),
        }
    }

    fn one(&self, node: &Node, at: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        let t = self.t;
        match node {
            Node::Char(c) => t.get(at) == Some(c) && k(at + 1),
            Node::Any => t.get(at).is_some_and(|&c| c != '\n') && k(at + 1),
            Node::Class(ranges, neg) => {
                t.get(at)
                    .is_some_and(|&c| ranges.iter().any(|&(a, b)| a <= c && c <= b) != *neg)
                    && k(at + 1)
            }
            Node::Start => at == 0 && k(at),
            Node::End => at == t.len() && k(at),
            Node::Group(alts) => alts.iter().any(|alt| self.seq(alt, at, k)),
            Node::Repeat(inner, min, max) => self.repeat(inner, *min, *max, at, 0, k),
        }
    }

    /// Greedy: one more iteration first, then stop here. An iteration that consumed nothing
    /// ends the loop (it would repeat forever).
    fn repeat(
        &self,
        inner: &Node,
        min: usize,
        max: Option<usize>,
        at: usize,
        count: usize,
        k: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        if !self.tick() {
            return false;
        }
        if max.is_none_or(|m| count < m)
            && self.one(inner, at, &mut |next| {
                next != at && self.repeat(inner, min, max, next, count + 1, k)
            })
        {
            return true;
        }
        count >= min && k(at)
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

    #[test]
    fn refuses_what_it_cannot_match_exactly() {
        for bad in [
            r"(a",
            r"a)",
            r"[a",
            r"*a",
            r"a**",
            r"a*?",
            r"(?i)a",
            r"\1",
            r"[[:alpha:]]",
            r"a{3,1}",
            r"\p{L}",
        ] {
            assert!(Regex::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn pathological_patterns_end() {
        let r = Regex::new(r"^(a*)*b$").unwrap();
        assert!(!r.is_match(&"a".repeat(40)));
    }
}
