//! Delegation to IPAM plugins the way libcni does it: find `ipam.type` in CNI_PATH and run it
//! with the same environment and the whole config on stdin, CNI_COMMAND set to the verb.
//!
//! When the file found is this very executable (same device and inode as /proc/self/exe, i.e.
//! a cnibox symlink or hardlink) the applet runs in-process through the same driver, so the
//! output is identical and one fork+exec is saved. A different `host-local` earlier in CNI_PATH
//! is still exec'd, which keeps libcni's semantics.
//!
//! Only IPAM applets run in-process as `ipam.type`: naming one of our main plugins (`bridge`)
//! there is a config error, not a recursion. Meta plugins (flannel) delegate a whole plugin
//! with a config of their own through [`plugin`], in-process for any applet of this binary. Delegation is also bounded in depth, in-process and across
//! exec (through `CNIBOX_DELEGATION_DEPTH`), so a loop through other plugins ends in a CNI error.
//!
//! When an IPAM ADD fails, its DEL runs before the error is returned (SPEC.md: a plugin whose
//! delegate failed "should execute again with DEL"), so a half-done allocation is released.

use super::applet::{Applet, Request};
use super::env::{Command, Env};
use super::error::{CodeContext, Error, Result, code};
use super::gojson;
use super::result::CniResult;
use super::skel;
use serde::Deserialize;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};

/// Applets of this binary that may serve as `ipam.type`.
const IPAM_APPLETS: &[&str] = &["host-local", "static", "dhcp"];

/// Deepest chain of delegations allowed (a main plugin and its IPAM need 1).
const MAX_DEPTH: u32 = 4;

/// Carries the delegation depth into exec'd plugins (which may be cnibox again).
const DEPTH_ENV: &str = "CNIBOX_DELEGATION_DEPTH";

/// Delegations in progress in this process, on top of the depth inherited from the parent.
static DEPTH: AtomicU32 = AtomicU32::new(0);

fn depth() -> u32 {
    let inherited = std::env::var(DEPTH_ENV)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(0);
    inherited.saturating_add(DEPTH.load(Ordering::Relaxed))
}

/// Counts one level of delegation while alive.
struct Level;

impl Level {
    /// `key`: the config key that named the plugin, for the message.
    fn enter(name: &str, key: &str) -> Result<Level> {
        let d = depth();
        if d >= MAX_DEPTH {
            return Err(Error::config(format!(
                "{key} {name:?}: delegation nested more than {MAX_DEPTH} deep (a loop of plugins delegating to each other?)"
            )));
        }
        DEPTH.fetch_add(1, Ordering::Relaxed);
        Ok(Level)
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        DEPTH.fetch_sub(1, Ordering::Relaxed);
    }
}

/// First regular file (after symlinks) called `name` in CNI_PATH.
pub fn find_in_path(name: &str, req: &Request) -> Result<PathBuf> {
    find_in(name, &req.env)
}

/// [`find_in_path`] in `env`'s CNI_PATH (how a runtime finds each plugin of a list).
pub fn find_in(name: &str, env: &Env) -> Result<PathBuf> {
    if name.is_empty() {
        return Err(Error::config("no plugin name provided"));
    }
    if env.path.is_empty() {
        return Err(Error::env(format!(
            "required env variables [CNI_PATH] missing: needed to find plugin {name:?}"
        )));
    }
    if name.contains('/') || name == "." || name == ".." {
        return Err(Error::config(format!(
            "invalid plugin name {name:?}: must not contain a path separator"
        )));
    }
    env.path_dirs()
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .ok_or_else(|| {
            Error::config(format!(
                "failed to find plugin {name:?} in path [{}]",
                env.path.replace(':', " ")
            ))
        })
}

/// How the plugin `name` found at `path` runs: `None` when `path` is another program (exec'd),
/// `Some(Some(applet))` when it is this binary and `name` one of its applets (in-process),
/// `Some(None)` when it is this binary under a name that is no applet.
pub fn resolve(
    applets: &'static [&'static Applet],
    name: &str,
    path: &Path,
) -> Option<Option<&'static Applet>> {
    is_self(path).then(|| applets.iter().copied().find(|a| a.name == name))
}

/// Run a plugin for `env.command` with `config` on its stdin: `applet` in-process (through the
/// same driver, so the output is what its process would print), else the program at `path`.
/// Its stdout, `None` when it printed nothing.
pub fn invoke(
    applets: &'static [&'static Applet],
    applet: Option<&'static Applet>,
    path: &Path,
    config: &[u8],
    env: Env,
) -> Result<Option<String>> {
    match applet {
        Some(applet) => skel::execute(applets, applet, env, config.to_vec()).1,
        None => exec(env.command, path, config, &env),
    }
}

fn is_self(path: &Path) -> bool {
    match (std::fs::metadata(path), std::fs::metadata("/proc/self/exe")) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Run the delegated IPAM plugin `name` for `cmd` with the request's own config; ADD returns
/// its result.
pub fn delegate(cmd: Command, name: &str, req: &Request) -> Result<Option<CniResult>> {
    run(cmd, name, &req.stdin, true, req, &req.env)?
}

/// Run plugin `name` (any kind) for `cmd` with `config` on its stdin and the request's
/// environment: how a meta plugin hands the work to the plugin it configured.
pub fn plugin(cmd: Command, name: &str, config: &[u8], req: &Request) -> Result<Option<CniResult>> {
    run(cmd, name, config, false, req, &req.env)?
}

/// [`plugin`] for another attachment than the request's: `env`'s container ID, CNI_NETNS and
/// CNI_IFNAME replace the request's (how a meta plugin's GC runs its delegate's DEL for an
/// attachment the runtime no longer lists).
pub fn plugin_for(
    cmd: Command,
    name: &str,
    config: &[u8],
    req: &Request,
    env: &Env,
) -> Result<Option<CniResult>> {
    run(cmd, name, config, false, req, env)?
}

/// The outer error: the plugin could not be started (not found, not an IPAM plugin, too deep);
/// the inner one: it ran and failed, or its result could not be read.
fn run(
    cmd: Command,
    name: &str,
    config: &[u8],
    ipam: bool,
    req: &Request,
    env: &Env,
) -> Result<Result<Option<CniResult>>> {
    let path = find_in_path(name, req)?;
    let _level = Level::enter(name, if ipam { "ipam.type" } else { "delegate.type" })?;
    let applet = match resolve(req.applets, name, &path) {
        // This binary under a name that is no applet (`cnibox` itself): exec'd it would print
        // its usage text, which reads as no result at all.
        Some(None) => {
            let key = if ipam { "ipam.type" } else { "type" };
            return Err(Error::config(format!(
                "{key} {name:?}: {} is the cnibox binary, not a plugin: name one of its applets{}",
                path.display(),
                if ipam {
                    format!(" ({})", IPAM_APPLETS.join(", "))
                } else {
                    String::new()
                }
            )));
        }
        Some(Some(_)) if ipam && !IPAM_APPLETS.contains(&name) => {
            return Err(Error::config(format!(
                "ipam.type {name:?} is not an IPAM plugin"
            )));
        }
        own => own.flatten(),
    };
    let mut env = env.clone();
    env.command = cmd;
    let out = invoke(req.applets, applet, &path, config, env);
    Ok(out.and_then(|out| result(cmd, name, out, req)))
}

fn result(
    cmd: Command,
    name: &str,
    out: Option<String>,
    req: &Request,
) -> Result<Option<CniResult>> {
    match (cmd, out) {
        (Command::Add, Some(text)) => {
            let v: serde_json::Value = serde_json::from_str(&text).ctx_code(
                code::DECODE_FAILURE,
                format_args!("{name}: failed to parse result"),
            )?;
            CniResult::from_json(&v, req.version).map(Some)
        }
        (Command::Add, None) => Err(Error::internal(format!("{name}: ADD printed no result"))),
        _ => Ok(None),
    }
}

/// IPAM ADD. When it fails after the plugin ran, its DEL runs before the error is returned.
pub fn add(name: &str, req: &Request) -> Result<CniResult> {
    let out = run(Command::Add, name, &req.stdin, true, req, &req.env)?;
    if out.is_err()
        && let Err(e) = delegate(Command::Del, name, req)
    {
        crate::warn!("{name}: DEL after a failed ADD: {e}");
    }
    out?.ok_or_else(|| Error::internal(format!("{name}: ADD printed no result")))
}

/// STATUS or GC forwarded to the config's IPAM plugin, the one way every applet forwards
/// them: the IPAM plugin's answer, or success when the config has none.
pub fn to_ipam(cmd: Command, req: &Request) -> Result<()> {
    match req.ipam_type() {
        Some(ipam) => delegate(cmd, ipam, req).map(drop),
        None => Ok(()),
    }
}

pub fn del(name: &str, req: &Request) -> Result<()> {
    delegate(Command::Del, name, req).map(drop)
}

fn exec(cmd: Command, path: &Path, config: &[u8], env: &Env) -> Result<Option<String>> {
    let mut tries = 0;
    let mut child = loop {
        let mut command = std::process::Command::new(path);
        // The attachment's variables from `env` (the process's own, unless a GC runs DEL for
        // another attachment or cnitool runs a list); the others are inherited. An empty value is how a plugin reads
        // an unset one (the Go skel and ours alike); set, not removed: std's removal pulls in
        // 6 KB of map code.
        for (k, v) in [
            ("CNI_CONTAINERID", &env.container_id),
            ("CNI_NETNS", &env.netns),
            ("CNI_IFNAME", &env.ifname),
            ("CNI_ARGS", &env.args),
            ("CNI_PATH", &env.path),
        ] {
            command.env(k, v);
        }
        let spawned = command
            .env("CNI_COMMAND", cmd.as_str())
            .env(DEPTH_ENV, depth().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        match spawned {
            // libcni retries "text file busy" (a plugin being replaced) a few times.
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 5 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(Error::io(format!("exec {}", path.display()), e)),
            Ok(c) => break c,
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A plugin that exits without reading stdin gives EPIPE; its output still decides.
        let _ = stdin.write_all(config);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("wait for {}", path.display()), e))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok((!text.trim().is_empty()).then_some(text));
    }
    #[derive(Deserialize)]
    struct ErrOut {
        code: u32,
        #[serde(default)]
        msg: String,
        #[serde(default)]
        details: String,
    }
    let parsed = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| gojson::from_value::<ErrOut>(&v).ok());
    match parsed {
        Some(e) => Err(Error {
            code: e.code,
            msg: e.msg,
            details: e.details,
            errno: 0,
        }),
        None if text.trim().is_empty() => Err(Error::internal(format!(
            "{} failed ({}) with no error message",
            path.display(),
            out.status
        ))),
        None => Err(Error::internal(format!(
            "{} failed ({}): {}",
            path.display(),
            out.status,
            text.trim()
        ))),
    }
}
