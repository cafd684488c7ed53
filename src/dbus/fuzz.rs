//! Entry point for the in-process fuzz target (tests/fuzz_parsers.rs) into the reader of D-Bus
//! messages: what a bus, or a service behind it, sends the firewall applet. Not an API: hidden
//! from the docs, never called by the binary.

use super::wire;

/// Frame `b` as the client does (length from the fixed header) and decode it: returns how much
/// was read, so nothing is optimised away.
pub fn reply(b: &[u8]) -> usize {
    let Some(head) = b.get(..wire::FIXED) else {
        return 0;
    };
    let Ok(total) = wire::total_len(head) else {
        return 1;
    };
    let Some(m) = b.get(..total).and_then(|m| wire::parse(m).ok()) else {
        return 2;
    };
    let first = match m.first {
        wire::Value::Str(s) => s.len(),
        wire::Value::Bool(v) => usize::from(v),
        wire::Value::Other => 0,
    };
    // Wrapping: a digest only, and a serial near 4 Gi must not overflow a 32-bit usize.
    total
        .wrapping_add(first)
        .wrapping_add(m.error_name.map_or(0, |e| e.len()))
        .wrapping_add(m.reply_serial.unwrap_or(0) as usize)
}

/// Well-formed messages as dbus-daemon and firewalld send them (a method return with a string,
/// one with a boolean, an error with its message, the NameAcquired signal), for the fuzzer to
/// start from. Built with the call encoder and patched into replies, so they follow the
/// format exactly.
pub fn seeds() -> Vec<Vec<u8>> {
    wire::sample_replies()
}
