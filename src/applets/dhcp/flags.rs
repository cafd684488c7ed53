//! `dhcp daemon`'s command line, read as Go's `flag` package reads it (upstream's daemon uses
//! it): `-name value`, `-name=value`, one or two dashes, booleans as `-name` or `-name=false`,
//! durations in Go's syntax (`10s`, `1m30s`, `500ms`); parsing stops at the first non-flag
//! argument or `--`.

use std::time::Duration;

/// `-timeout`'s default: how long one attempt waits for an answer.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// `-resendtimeout`'s default: how long acquiring a lease keeps trying.
pub const DEFAULT_RESEND_TIMEOUT: Duration = Duration::from_secs(208);

#[derive(Debug, PartialEq)]
pub struct Flags {
    pub pidfile: String,
    pub hostprefix: String,
    pub socketpath: String,
    pub broadcast: bool,
    pub timeout: Duration,
    pub resendmax: Duration,
    pub resendtimeout: Duration,
}

pub const USAGE: &str = "\
Usage of daemon:
  -broadcast
    \tbroadcast DHCP leases
  -hostprefix string
    \toptional prefix to host root
  -pidfile string
    \toptional path to write daemon PID to
  -resendmax duration
    \toptional dhcp client max resend delay between requests (default 1m2s)
  -resendtimeout duration
    \toptional dhcp client resend timeout, no more retries after this timeout (default 3m28s)
  -socketpath string
    \toptional dhcp server socketpath (default /run/cni/dhcp.sock)
  -timeout duration
    \toptional dhcp client timeout duration for each request (default 10s)";

/// What to do instead of running: print usage and exit 0 (`-h`), or fail with exit 2.
#[derive(Debug, PartialEq)]
pub enum Stop {
    Help,
    Bad(String),
}

impl Flags {
    pub fn parse(args: &[String]) -> Result<Flags, Stop> {
        let mut f = Flags {
            pidfile: String::new(),
            hostprefix: String::new(),
            socketpath: String::new(),
            broadcast: false,
            timeout: DEFAULT_TIMEOUT,
            resendmax: Duration::from_secs(62),
            resendtimeout: DEFAULT_RESEND_TIMEOUT,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                break;
            }
            let Some(s) = a.strip_prefix('-').filter(|s| !s.is_empty()) else {
                break;
            };
            let s = s.strip_prefix('-').unwrap_or(s);
            if s.is_empty() || s.starts_with('-') || s.starts_with('=') {
                return Err(Stop::Bad(format!("bad flag syntax: {a}")));
            }
            let (name, inline) = match s.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (s, None),
            };
            if name == "broadcast" {
                f.broadcast = match inline {
                    None => true,
                    Some("1" | "t" | "T" | "true" | "TRUE" | "True") => true,
                    Some("0" | "f" | "F" | "false" | "FALSE" | "False") => false,
                    Some(v) => return Err(invalid(v, name, "parse error")),
                };
                continue;
            }
            if name == "h" || name == "help" {
                return Err(Stop::Help);
            }
            let target = match name {
                "pidfile" => Target::Str(&mut f.pidfile),
                "hostprefix" => Target::Str(&mut f.hostprefix),
                "socketpath" => Target::Str(&mut f.socketpath),
                "timeout" => Target::Dur(&mut f.timeout),
                "resendmax" => Target::Dur(&mut f.resendmax),
                "resendtimeout" => Target::Dur(&mut f.resendtimeout),
                _ => return Err(Stop::Bad(format!("flag provided but not defined: -{name}"))),
            };
            let v = match inline {
                Some(v) => v,
                None => it
                    .next()
                    .ok_or_else(|| Stop::Bad(format!("flag needs an argument: -{name}")))?,
            };
            match target {
                Target::Str(s) => *s = v.to_string(),
                Target::Dur(d) => {
                    *d = duration(v).ok_or_else(|| invalid(v, name, "parse error"))?
                }
            }
        }
        Ok(f)
    }
}

enum Target<'a> {
    Str(&'a mut String),
    Dur(&'a mut Duration),
}

fn invalid(v: &str, name: &str, why: &str) -> Stop {
    Stop::Bad(format!("invalid value {v:?} for flag -{name}: {why}"))
}

/// A Go duration (`time.ParseDuration`) that is not negative.
pub fn duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (int, frac) = rest[..n].split_once('.').unwrap_or((&rest[..n], ""));
        if int.is_empty() && frac.is_empty() || frac.contains('.') {
            return None;
        }
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..u] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[u..];
        let digits = |d: &str| -> Option<u128> {
            d.bytes().try_fold(0u128, |a, b| {
                a.checked_mul(10)?.checked_add(u128::from(b - b'0'))
            })
        };
        // Fractions to nanosecond precision, as Go.
        let mut f = 0u128;
        let mut scale = unit;
        for b in frac.bytes().take(20) {
            scale /= 10;
            f += u128::from(b - b'0') * scale;
        }
        nanos = nanos.checked_add(digits(int)?.checked_mul(unit)? + f)?;
    }
    let n = u64::try_from(nanos).ok()?;
    Some(Duration::from_nanos(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(a: &[&str]) -> Result<Flags, Stop> {
        Flags::parse(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn go_flag_syntax() {
        let f = p(&[]).unwrap();
        assert_eq!(f.timeout, Duration::from_secs(10));
        assert_eq!(f.resendmax, Duration::from_secs(62));
        assert_eq!(f.resendtimeout, Duration::from_secs(208));
        assert!(!f.broadcast);
        let f = p(&[
            "-socketpath",
            "/tmp/x.sock",
            "--pidfile=/run/p",
            "-broadcast",
            "-timeout=1m30s",
            "--resendmax",
            "500ms",
            "-hostprefix",
            "/host",
            "rest",
            "-timeout=zzz",
        ])
        .unwrap();
        assert_eq!(f.socketpath, "/tmp/x.sock");
        assert_eq!(f.pidfile, "/run/p");
        assert_eq!(f.hostprefix, "/host");
        assert!(f.broadcast);
        assert_eq!(f.timeout, Duration::from_secs(90));
        assert_eq!(f.resendmax, Duration::from_millis(500));
        assert!(!p(&["-broadcast=false"]).unwrap().broadcast);
        assert_eq!(p(&["-h"]), Err(Stop::Help));
        assert_eq!(p(&["--help"]), Err(Stop::Help));
        for (args, msg) in [
            (&["-nope"][..], "flag provided but not defined: -nope"),
            (&["-timeout"], "flag needs an argument: -timeout"),
            (
                &["-timeout", "10"],
                "invalid value \"10\" for flag -timeout: parse error",
            ),
            (
                &["-broadcast=yes"],
                "invalid value \"yes\" for flag -broadcast: parse error",
            ),
            (&["---x"], "bad flag syntax: ---x"),
        ] {
            assert_eq!(p(args), Err(Stop::Bad(msg.into())), "{args:?}");
        }
    }

    #[test]
    fn go_durations() {
        let d = |s| duration(s);
        assert_eq!(d("0"), Some(Duration::ZERO));
        assert_eq!(d("2s"), Some(Duration::from_secs(2)));
        assert_eq!(d("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(d("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(d("300us"), Some(Duration::from_micros(300)));
        for bad in ["", "1", "s", "1x", "-1s", "1..2s", ".s"] {
            assert_eq!(d(bad), None, "{bad}");
        }
    }
}
