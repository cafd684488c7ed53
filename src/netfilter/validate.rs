//! Validation of every name and token that reaches a netfilter rule, for the applets' config
//! load: a string that passes here can be written into an `iptables-restore` script or an
//! nf_tables netlink attribute without changing its meaning. Errors are code 7 and name the
//! config key.
//!
//! - [`chain_name`]: an iptables chain name as `iptables` itself accepts it (1–28 bytes, not
//!   starting with `-` or `!`, no whitespace or control characters) and as `iptables-restore`
//!   can read it back (no quotes or backslashes), not a built-in chain or verdict.
//! - [`iface_name`]: an interface name as the kernel accepts it (`dev_valid_name`: 1–15 bytes,
//!   not `.`/`..`, no `/`, `:` or whitespace), without control characters, quotes or
//!   backslashes, and without the trailing `+` that iptables reads as a wildcard.
//! - [`ipt_token`]: one argument of an iptables match (`conditionsV4/V6`): no newline,
//!   carriage return, NUL or other control character, at most 1023 bytes (iptables-restore's
//!   parameter limit).
//! - [`nft_name`]: an nf_tables table/chain/set name (1–255 bytes, no NUL or control
//!   characters).

use crate::error::{Error, Result};

/// iptables' XT_EXTENSION_MAXNAMELEN - 1: the longest chain name `iptables -N` accepts.
pub const CHAIN_MAX: usize = 28;
/// IFNAMSIZ - 1.
pub const IFNAME_MAX: usize = 15;
/// NFT_NAME_MAXLEN - 1 (table, chain and set names).
pub const NFT_NAME_MAX: usize = 255;
/// iptables-restore's per-parameter buffer (1024) minus the terminating NUL.
pub const IPT_TOKEN_MAX: usize = 1023;

/// Built-in chains of the iptables tables and the standard verdicts: never a user chain.
const RESERVED: &[&str] = &[
    "INPUT",
    "OUTPUT",
    "FORWARD",
    "PREROUTING",
    "POSTROUTING",
    "ACCEPT",
    "DROP",
    "QUEUE",
    "RETURN",
    "REJECT",
    "MASQUERADE",
    "DNAT",
    "SNAT",
    "MARK",
];

fn bad(key: &str, what: &str, value: &str, why: &str) -> Error {
    Error::config(format!("{key}: invalid {what} {value:?}: {why}"))
}

/// Characters no name written into an iptables-restore line may hold: whitespace and control
/// characters end or split the line or argument; quotes and backslashes start quoting.
fn restore_unsafe(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\')
}

/// An iptables chain name from config key `key`.
pub fn chain_name(key: &str, name: &str) -> Result<()> {
    let why = if name.is_empty() {
        "empty".to_string()
    } else if name.len() > CHAIN_MAX {
        format!("longer than {CHAIN_MAX} bytes")
    } else if name.starts_with('-') || name.starts_with('!') {
        "must not start with '-' or '!'".to_string()
    } else if let Some(c) = name.chars().find(|c| restore_unsafe(*c)) {
        format!(
            "character {c:?} is not allowed (no whitespace, control characters, quotes or backslashes)"
        )
    } else if RESERVED.contains(&name) {
        "a built-in chain or verdict, not a user chain".to_string()
    } else {
        return Ok(());
    };
    Err(bad(key, "iptables chain name", name, &why))
}

/// An interface name from `key` that reaches a rule (`-i`/`-o`, `iifname`/`oifname`).
pub fn iface_name(key: &str, name: &str) -> Result<()> {
    let why = if name.is_empty() {
        "empty".to_string()
    } else if name.len() > IFNAME_MAX {
        format!("longer than {IFNAME_MAX} bytes")
    } else if name == "." || name == ".." {
        "must not be . or ..".to_string()
    } else if let Some(c) = name
        .chars()
        .find(|c| restore_unsafe(*c) || matches!(c, '/' | ':'))
    {
        format!(
            "character {c:?} is not allowed (no '/', ':', whitespace, control characters, quotes or backslashes)"
        )
    } else if name.ends_with('+') {
        "must not end with '+' (an iptables wildcard)".to_string()
    } else {
        return Ok(());
    };
    Err(bad(key, "interface name", name, &why))
}

/// One argument of an iptables match from `key` (written quoted, so quotes and backslashes are
/// fine; what ends a line or a C string is not).
pub fn ipt_token(key: &str, tok: &str) -> Result<()> {
    let why = if tok.len() > IPT_TOKEN_MAX {
        format!("longer than {IPT_TOKEN_MAX} bytes")
    } else if let Some(c) = tok.chars().find(|c| c.is_control()) {
        format!("control character {c:?} (newline, carriage return, NUL, ...) is not allowed")
    } else {
        return Ok(());
    };
    Err(bad(key, "iptables argument", tok, &why))
}

/// An nf_tables table, chain or set name from `key`.
pub fn nft_name(key: &str, name: &str) -> Result<()> {
    let why = if name.is_empty() {
        "empty".to_string()
    } else if name.len() > NFT_NAME_MAX {
        format!("longer than {NFT_NAME_MAX} bytes")
    } else if let Some(c) = name.chars().find(|c| c.is_control()) {
        format!("control character {c:?} is not allowed")
    } else {
        return Ok(());
    };
    Err(bad(key, "nftables name", name, &why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::code;

    #[test]
    fn chain_names() {
        for ok in [
            "CNI-ADMIN",
            "KUBE-MARK-MASQ",
            "a",
            "x.y_z@1",
            &"A".repeat(28),
        ] {
            chain_name("k", ok).unwrap();
        }
        for bad in [
            "",
            "X\n-A INPUT -j DROP",
            "X\r",
            "X\0",
            "a b",
            "a\tb",
            "-X",
            "!X",
            "a\"b",
            "a'b",
            "a\\b",
            "ACCEPT",
            "DROP",
            "INPUT",
            "FORWARD",
            &"A".repeat(29),
        ] {
            let e = chain_name("iptablesAdminChainName", bad).unwrap_err();
            assert_eq!(e.code, code::INVALID_CONFIG, "{bad:?}");
            assert!(e.msg.starts_with("iptablesAdminChainName: "), "{}", e.msg);
            assert!(!e.msg.contains('\n'), "{}", e.msg);
        }
    }

    #[test]
    fn iface_names() {
        for ok in ["eth0", "cni0", "br-1.100", "a", &"x".repeat(15), "a+b"] {
            iface_name("k", ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "br\n-A",
            "a\0",
            "a\"",
            "a\\",
            "br+",
            &"x".repeat(16),
        ] {
            let e = iface_name("prevResult.interfaces[0].name", bad).unwrap_err();
            assert_eq!(e.code, code::INVALID_CONFIG);
            assert!(e.msg.contains("prevResult.interfaces[0].name"), "{}", e.msg);
        }
    }

    #[test]
    fn ipt_tokens() {
        for ok in ["-s", "10.0.0.0/8", "!", "a \"quoted\" \\ arg", ""] {
            ipt_token("conditionsV4", ok).unwrap();
        }
        for bad in ["-s\n-A INPUT -j DROP", "x\r", "x\0", &"x".repeat(1024)] {
            let e = ipt_token("conditionsV4", bad).unwrap_err();
            assert_eq!(e.code, code::INVALID_CONFIG);
            assert!(e.msg.starts_with("conditionsV4: "));
        }
    }

    #[test]
    fn nft_names() {
        nft_name("k", "cni_hostport").unwrap();
        nft_name("k", &"c".repeat(255)).unwrap();
        for bad in ["", "a\0b", "a\nb", &"c".repeat(256)] {
            assert_eq!(nft_name("k", bad).unwrap_err().code, code::INVALID_CONFIG);
        }
    }
}
