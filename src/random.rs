//! Random bytes from the kernel (getrandom(2)), for host veth names and MAC-less defaults.
//! No crate: one syscall, and it works in an initramfs without /dev/urandom.

pub fn bytes<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    let mut filled = 0;
    while filled < N {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`, which we own.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), N - filled, 0) };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // Only before the entropy pool is initialised; names need uniqueness, not secrecy.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let seed = (t.as_nanos() as u64) ^ u64::from(std::process::id()).rotate_left(32);
            for (i, b) in buf[filled..].iter_mut().enumerate() {
                *b = (seed >> ((i % 8) * 8)) as u8 ^ (i as u8);
            }
            break;
        }
    }
    buf
}

/// `n` random lowercase hex characters (n ≤ 32).
pub fn hex(n: usize) -> String {
    bytes::<16>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()[..n.min(32)]
        .to_string()
}
