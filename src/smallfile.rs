//! Reading a small file that an operator names in a config (tuning's sysctl allowlist,
//! flannel's `subnetFile`): opened without blocking, so a FIFO is seen for what it is instead of
//! waiting for a writer, and only a regular file of bounded size is read (a device such as
//! /dev/zero would never end). Shared by the applets that read such files; [`read_nofollow`]
//! also refuses a symlink (the doctor's reading of the dhcp daemon's lease records).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// Why [`read`] read nothing.
#[derive(Debug)]
pub enum ReadError {
    NotFound,
    /// Not a regular file: what it is instead ([`kind`]).
    NotRegular(&'static str),
    /// Larger than the bound it was read with.
    TooLarge(u64),
    Io(std::io::Error),
}

/// The bytes of the regular file `path`, at most `max` of them.
pub fn read(path: &str, max: u64) -> Result<Vec<u8>, ReadError> {
    read_with(path, max, 0)
}

/// [`read`], but a symlink is not followed: it is [`ReadError::NotRegular`].
pub fn read_nofollow(path: &str, max: u64) -> Result<Vec<u8>, ReadError> {
    read_with(path, max, libc::O_NOFOLLOW)
}

fn read_with(path: &str, max: u64, flags: libc::c_int) -> Result<Vec<u8>, ReadError> {
    let io = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        // O_NOFOLLOW on a symlink.
        _ if e.raw_os_error() == Some(libc::ELOOP) && flags & libc::O_NOFOLLOW != 0 => {
            ReadError::NotRegular(kind(libc::S_IFLNK))
        }
        _ => ReadError::Io(e),
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | flags)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind(meta.mode())));
    }
    // The size is checked on what is read, not on the stat: the file may grow meanwhile.
    let mut buf = Vec::new();
    file.take(max + 1).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(buf)
}

/// What a file of `mode` is, for a message ("a FIFO", "a directory", …).
pub fn kind(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO",
        libc::S_IFDIR => "a directory",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        _ => "a regular file",
    }
}
