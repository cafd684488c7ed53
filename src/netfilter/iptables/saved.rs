//! [`Saved`]: the text of `iptables-save -t TABLE`, indexed by chain without copying it.

use std::ops::Range;

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
    /// A table holding just `rules` (`(chain, spec)`), with their chains and jump targets.
    pub fn assumed(rules: &[(&str, &str)]) -> Saved {
        let mut text = String::new();
        for (chain, spec) in rules {
            for c in [Some(*chain), target(spec)].into_iter().flatten() {
                text.push(':');
                text.push_str(c);
                text.push_str(" - [0:0]\n");
            }
        }
        for (chain, spec) in rules {
            text.push_str("-A ");
            text.push_str(chain);
            text.push(' ');
            text.push_str(spec);
            text.push('\n');
        }
        Saved::parse(text)
    }
    pub(super) fn at(&self, r: &Range<usize>) -> &str {
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
        self.rules()
            .filter(move |(_, s)| self::target(s) == Some(target))
    }
}

/// The `-j TARGET` or `-g TARGET` of a rule spec (its last word when it has no options).
fn target(spec: &str) -> Option<&str> {
    spec.rsplit_once(" -j ")
        .or_else(|| spec.rsplit_once(" -g "))
        .map(|(_, t)| t)
        .or_else(|| spec.strip_prefix("-j "))
        .or_else(|| spec.strip_prefix("-g "))
}
