//! `cnibox install`: the binary installs itself into a plugin directory (default /opt/cni/bin)
//! and links every applet name of the applet table to it. `symlinks.sh` and `make install` only
//! call this. The rules are the ones symlinks.sh had:
//! - a file with an applet's name that is not cnibox (a Go plugin) makes the run change nothing
//!   and fail, unless `--force`: then it is kept in BACKUPDIR (default DIR.pre-cnibox) and
//!   `--restore BACKUPDIR` puts it back; links of any earlier cnibox (symbolic or hard) are
//!   refreshed; `--remove` deletes cnibox's links only;
//! - safe while plugins run: the binary is written to a temporary file and renamed over
//!   DIR/cnibox, every link is made under a temporary name and renamed over the old one, and a
//!   replaced plugin is hard-linked into BACKUPDIR before that rename, so a runtime executing a
//!   plugin at any moment finds the old file or the new one, never a half-written one, never
//!   none, and nothing is ever opened for writing while it may be executing (no ETXTBSY).

use cnibox::applets::TABLE;
use cnibox::warn;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

const USAGE: &str = "\
usage: cnibox install [--force] [--backup BACKUPDIR] [--hardlink] [DIR]
       cnibox install --restore BACKUPDIR [DIR]
       cnibox install --remove [DIR]
       cnibox install --list [DIR]     each applet name in DIR: cnibox, other or absent
DIR defaults to /opt/cni/bin, BACKUPDIR to DIR.pre-cnibox.";

/// Text every cnibox build carries (main.rs's unknown-applet message); the Go plugins do not.
const MARK: &[u8] = b"cnibox --list shows the applets";

#[derive(PartialEq)]
enum Found {
    Absent,
    Cnibox,
    Other,
}

/// What `path` is: a symlink to a file named cnibox (even dangling), or a file (followed
/// through symlinks) holding [`MARK`] — a hard-linked copy of any cnibox build — is cnibox.
fn found(path: &Path) -> Found {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Found::Absent;
    };
    if meta.is_symlink() && fs::read_link(path).is_ok_and(|t| t.ends_with("cnibox")) {
        return Found::Cnibox;
    }
    // A hard link of DIR/cnibox needs no reading. Bounded at 64 MiB (cnibox is far
    // smaller): a huge file of that name is somebody else's.
    let same = |m: &fs::Metadata, o: fs::Metadata| m.dev() == o.dev() && m.ino() == o.ino();
    let ours = fs::metadata(path).is_ok_and(|m| {
        fs::metadata(path.with_file_name("cnibox")).is_ok_and(|o| same(&m, o))
            || m.is_file()
                && m.len() < 1 << 26
                && fs::read(path).is_ok_and(|d| d.windows(MARK.len()).any(|w| w == MARK))
    });
    if ours { Found::Cnibox } else { Found::Other }
}

fn say(status: i32, text: &str) -> i32 {
    warn!("cnibox install: {text}");
    status
}

/// The command line: flags, and the directories as given.
#[derive(Default)]
struct Options<'a> {
    force: bool,
    hard: bool,
    remove: bool,
    list: bool,
    dir: Option<&'a str>,
    backup: Option<&'a str>,
    restore: Option<&'a str>,
}

/// The options, or the exit status when the command line is done with (help, or an error said).
fn parse_args(args: &[String]) -> Result<Options<'_>, i32> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--force" => o.force = true,
            "--hardlink" => o.hard = true,
            "--remove" => o.remove = true,
            "--list" => o.list = true,
            "--backup" | "--restore" => {
                let Some(v) = it.next() else {
                    return Err(say(2, &format!("{a} needs a directory")));
                };
                *(if a == "--backup" {
                    &mut o.backup
                } else {
                    &mut o.restore
                }) = Some(v);
            }
            "-h" | "--help" => return Err(crate::say(std::io::stdout(), USAGE, 0)),
            f if f.starts_with('-') => {
                return Err(say(2, &format!("unknown option {f}\n{USAGE}")));
            }
            d => match o.dir {
                Some(first) => {
                    return Err(say(2, &format!("one directory only (got {first} and {d})")));
                }
                None => o.dir = Some(d),
            },
        }
    }
    Ok(o)
}

pub(crate) fn main(args: &[String]) -> i32 {
    let o = match parse_args(args) {
        Ok(o) => o,
        Err(status) => return status,
    };
    let d = o.dir.map_or("/opt/cni/bin", |d| d.trim_end_matches('/'));
    let d = if d.is_empty() { "/" } else { d };
    let dir = Path::new(d);
    if let Some(saved) = o.restore {
        return restore_from(Path::new(saved), dir);
    }
    if o.list || o.remove {
        return list_or_remove(dir, o.list);
    }
    let backup = PathBuf::from(
        o.backup
            .map_or_else(|| format!("{d}.pre-cnibox"), String::from),
    );
    let other: Vec<&str> = TABLE
        .iter()
        .map(|a| a.name)
        .filter(|n| found(&dir.join(n)) == Found::Other)
        .collect();
    let b = backup.display();
    if !other.is_empty() && !o.force {
        let text = format!(
            "these files in {d} are not cnibox: {}\ncnibox install: nothing was changed. To \
             replace them, keeping them in {b} for 'cnibox install --restore {b} {d}', run \
             'cnibox install --force {d}' (or 'symlinks.sh --force', 'make install FORCE=1')",
            other.join(" ")
        );
        return say(1, &text);
    }
    if let Err(e) = fs::create_dir_all(dir).and_then(|()| place_binary(dir)) {
        return say(1, &format!("cannot install {d}/cnibox: {e}"));
    }
    let failed: Vec<&str> = TABLE
        .iter()
        .map(|a| a.name)
        .filter(|n| !link_applet(dir, n, other.contains(n).then_some(&backup), o.hard))
        .collect();
    if failed.is_empty() {
        return 0;
    }
    say(1, &format!("not linked: {}", failed.join(" ")))
}

/// `--list` (each applet name: absent, cnibox or other) or `--remove` (cnibox's links only).
fn list_or_remove(dir: &Path, list: bool) -> i32 {
    let mut status = 0;
    for n in TABLE.iter().map(|a| a.name) {
        let path = dir.join(n);
        let what = found(&path);
        if list {
            let w = ["absent", "cnibox", "other"][what as usize];
            crate::say(std::io::stdout(), &format!("{n}\t{w}"), 0);
        } else if what == Found::Cnibox && fs::remove_file(&path).is_err() {
            status = say(1, &format!("could not remove {}", path.display()));
        }
    }
    status
}

/// `dir/n` becomes a link to cnibox, made under a temporary name and renamed over the old file;
/// a plugin that is not cnibox is first hard-linked into `backup` (given for those only).
/// False, said on stderr, when it was not linked.
fn link_applet(dir: &Path, n: &str, backup: Option<&PathBuf>, hard: bool) -> bool {
    let path = dir.join(n);
    if let Some(backup) = backup {
        // A hard link, not a move: the plugin stays in place until the rename below.
        let saved = backup.join(n);
        let _ = fs::remove_file(&saved);
        if let Err(e) = fs::create_dir_all(backup).and_then(|()| fs::hard_link(&path, &saved)) {
            let b = backup.display();
            say(
                1,
                &format!("could not keep {} in {b} ({e}); not linked", path.display()),
            );
            return false;
        }
        let text = format!(
            "cnibox install: moved {} to {}",
            path.display(),
            saved.display()
        );
        crate::say(std::io::stdout(), &text, 0);
    }
    let new = dir.join(format!("{n}.cnibox-new"));
    let _ = fs::remove_file(&new);
    let (made, what) = if hard {
        (fs::hard_link(dir.join("cnibox"), &new), "hard link")
    } else {
        (symlink("cnibox", &new), "symbolic link")
    };
    if let Err(e) = made.and_then(|()| fs::rename(&new, &path)) {
        let _ = fs::remove_file(&new);
        say(1, &format!("{}: {what} failed: {e}", path.display()));
        return false;
    }
    true
}

/// This very binary into `dir/cnibox`: a temporary file, then rename(2) over the old one (whose
/// inode running plugins keep). Nothing to do when it already is that file.
fn place_binary(dir: &Path) -> std::io::Result<()> {
    const SELF: &str = "/proc/self/exe";
    let dest = dir.join("cnibox");
    let me = fs::metadata(SELF)?;
    if fs::metadata(&dest).is_ok_and(|d| d.dev() == me.dev() && d.ino() == me.ino()) {
        return Ok(());
    }
    let tmp = dir.join(format!(".cnibox-new-{}", std::process::id()));
    let copy = || {
        let mut out = fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut out, &fs::read(SELF)?)?;
        out.set_permissions(fs::Permissions::from_mode(0o755))?;
        out.sync_all()?;
        // Closed before it gets its name: exec(2) of a file open for writing is ETXTBSY.
        drop(out);
        fs::rename(&tmp, &dest)
    };
    copy().inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// Moves what `saved` holds back into `dir`, over cnibox's links only.
fn restore_from(saved: &Path, dir: &Path) -> i32 {
    let Ok(entries) = fs::read_dir(saved) else {
        return say(1, &format!("{} is not a directory", saved.display()));
    };
    let mut status = 0;
    for e in entries.flatten() {
        let path = dir.join(e.file_name());
        let p = path.display();
        if found(&path) == Found::Other {
            status = say(1, &format!("{p} is not cnibox; left alone"));
        } else if let Err(err) = fs::rename(e.path(), &path) {
            status = say(1, &format!("could not restore {p}: {err}"));
        } else {
            crate::say(
                std::io::stdout(),
                &format!("cnibox install: restored {p}"),
                0,
            );
        }
    }
    let _ = fs::remove_dir(saved);
    status
}
