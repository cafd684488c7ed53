//! The protocol driver: validates the environment and config, negotiates the version, runs an
//! applet's handler and prints its result or error exactly as the Go skel does (results and
//! errors pretty-printed with four spaces, VERSION compact with a newline).
//!
//! Beyond the Go skel: a missing `type` is rejected with code 7, errors carry `cniVersion` as
//! the spec asks, VERSION answers in the `cniVersion` it was asked in (SPEC.md: "the value of
//! cniVersion specified on input"; Go always prints its latest), error texts are bounded so a
//! huge input is never echoed back, and a panic hook turns a bug into a CNI error on stdout and
//! exit status 1 instead of an abort signal.

use super::applet::{Applet, Request};
use super::calllog;
use super::config::NetConf;
use super::env::{Command, Env, validate_network_name};
use super::error::{CodeContext, Error, Result, bounded, code};
use super::gojson;
use super::gojson::pretty;
use super::version::{self, Version};
use serde_json::Value;
use std::io::{Read, Write};

/// Run `applet` as a CNI plugin process: returns the exit status. `applets` is the whole table,
/// for in-process delegation to applets of this same binary.
pub fn run(applets: &'static [&'static Applet], applet: &Applet) -> i32 {
    install_panic_hook();
    let mut log = calllog::start(applet.name);
    let env = match Env::from_process() {
        Ok(Some(env)) => env,
        Ok(None) => {
            crate::warn!("{}", version::about(applet.name, applet.versions));
            return 0;
        }
        Err(e) => return fail(log, e),
    };
    if let Some(log) = &mut log {
        log.env(&env);
    }
    // VERSION reads stdin only when something was piped in: a person typing the command at a
    // terminal must not be left waiting.
    let stdin = if env.command == Command::Version
        && nix::unistd::isatty(std::io::stdin()).unwrap_or(false)
    {
        Vec::new()
    } else {
        let mut buf = Vec::new();
        if let Err(e) = std::io::stdin().read_to_end(&mut buf) {
            let e = Error::host_io("error reading from stdin", e);
            return fail(log, e);
        }
        buf
    };
    // An ADD whose result cannot be printed is undone: the copy its DEL is made from.
    let add = (env.command == Command::Add).then(|| (env.clone(), stdin.clone()));
    // Checked here, not in `execute`: in-process delegates run with the caller's CNI_NETNS.
    let (ver, out) = match refuse_own_netns(&env) {
        Ok(()) => execute(applets, applet, env, stdin),
        Err(e) => (Version::LATEST, Err(e)),
    };
    if let Some(log) = log {
        log.finish(&out);
    }
    match out {
        Ok(Some(text)) => match write_stdout(&text) {
            Ok(()) => 0,
            Err(e) => {
                crate::warn!("{}: cannot write the result to stdout: {e}", applet.name);
                if let Some((env, stdin)) = add {
                    undo_add(applets, applet, env, &stdin, &text);
                }
                1
            }
        },
        Ok(None) => 0,
        Err(e) => print_error(&e, ver),
    }
}

/// A failure before the request ran: logged (when `CNIBOX_LOG` is set) and printed.
fn fail(log: Option<calllog::Call>, e: Error) -> i32 {
    let status = print_error(&e, Version::LATEST);
    if let Some(log) = log {
        log.finish(&Err(e));
    }
    status
}

/// An ADD succeeded but the runtime never got its result (stdout closed, a broken pipe, a full
/// disk): the runtime does not know what was made, so it would not DEL it. Undone here with
/// the DEL a runtime would send: the same config with the result as `prevResult`.
fn undo_add(
    applets: &'static [&'static Applet],
    applet: &Applet,
    mut env: Env,
    stdin: &[u8],
    result: &str,
) {
    env.command = Command::Del;
    let conf = match (
        serde_json::from_slice::<Value>(stdin),
        serde_json::from_str::<Value>(result),
    ) {
        (Ok(Value::Object(mut conf)), Ok(prev)) => {
            conf.insert("prevResult".into(), prev);
            Value::Object(conf).to_string().into_bytes()
        }
        _ => stdin.to_vec(),
    };
    match execute(applets, applet, env, conf).1 {
        Ok(_) => crate::warn!("{}: the ADD was undone", applet.name),
        Err(e) => crate::warn!("{}: undoing the ADD failed: {}", applet.name, e.msg),
    }
}

/// The Go skel's words for a config it cannot read.
const UNMARSHAL: &str = "error unmarshalling network config";

/// The whole request/response cycle without process I/O: used by [`run`] and by in-process
/// delegation, so both print byte-identical output. Returns the version for error printing.
pub fn execute(
    applets: &'static [&'static Applet],
    applet: &Applet,
    env: Env,
    stdin: Vec<u8>,
) -> (Version, Result<Option<String>>) {
    if env.command == Command::Version {
        let asked = serde_json::from_slice::<Value>(&stdin)
            .ok()
            .and_then(|v| {
                gojson::from_member::<String>(&v, "cniVersion")
                    .ok()
                    .flatten()
            })
            .filter(|s| !s.is_empty())
            .and_then(|s| Version::parse(&s))
            .unwrap_or(Version::LATEST);
        return (asked, Ok(Some(version_text(asked, applet.versions))));
    }
    let raw = serde_json::from_slice(&stdin).ctx_code(code::DECODE_FAILURE, UNMARSHAL);
    let raw: Value = match raw {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return (
                Version::LATEST,
                Err(Error::decode(
                    "error unmarshalling network config: not a JSON object",
                )),
            );
        }
        Err(e) => return (Version::LATEST, Err(e)),
    };
    let conf = match gojson::from_value::<NetConf>(&raw).ctx_code(code::DECODE_FAILURE, UNMARSHAL) {
        Ok(c) => c,
        Err(e) => return (Version::LATEST, Err(e)),
    };
    let version = match Version::parse(&conf.cni_version).filter(|v| applet.versions.contains(v)) {
        Some(v) => v,
        None => {
            let e = Error::new(code::INCOMPATIBLE_VERSION, "incompatible CNI versions")
                .with_details(format!(
                    "config is {:?}, plugin supports [{}]",
                    conf.cni_version,
                    version::quoted_list(applet.versions)
                ));
            return (Version::LATEST, Err(e));
        }
    };
    let out = dispatch(
        applet,
        Request {
            env,
            stdin,
            raw,
            conf,
            version,
            applets,
        },
    );
    (version, out)
}

fn dispatch(applet: &Applet, req: Request) -> Result<Option<String>> {
    validate_network_name(&req.conf.name)?;
    if req.conf.kind.is_empty() {
        return Err(Error::config("missing plugin type"));
    }
    let needs = |min: Version, verb: &str| {
        if req.version < min {
            Err(Error::new(
                code::INCOMPATIBLE_VERSION,
                format!("config version does not allow {verb}"),
            ))
        } else {
            Ok(())
        }
    };
    // A prevResult that cannot be read is the runtime's error whichever plugin gets it (IPAM
    // plugins too): code 6/7 naming it, before anything is delegated or changed. Not on DEL,
    // which must be able to remove what it can whatever the runtime cached.
    let prev_checked = || req.prev_result().map(|_| ());
    let handler = match req.env.command {
        Command::Add => {
            prev_checked()?;
            let result = (applet.add)(&req)?;
            return Ok(Some(result.to_json(req.version)?));
        }
        Command::Del => Some(applet.del),
        Command::Check => {
            needs(Version::V040, "CHECK")?;
            prev_checked()?;
            Some(applet.check)
        }
        Command::Status => {
            needs(Version::V110, "STATUS")?;
            applet.status
        }
        Command::Gc => {
            needs(Version::V110, "GC")?;
            applet.gc
        }
        Command::Version => None,
    };
    match handler {
        Some(handler) => handler(&req).map(|()| None),
        None => Ok(None),
    }
}

/// CNI_NETNS naming the namespace the plugin itself runs in would configure the host as if it
/// were a container (and DEL would tear the host's interfaces down): refused with code 8, as the
/// Go skel does (which checks only after its ADD ran; here nothing runs). A path that does not
/// exist is left to the verb (DEL tolerates it). `CNI_NETNS_OVERRIDE` `1` or `true` (any case)
/// turns the check off, as in the Go skel (libcni ≥ 1.2; test suites set it).
pub fn refuse_own_netns(env: &Env) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let netns = env.netns.as_str();
    if netns.is_empty() || !matches!(env.command, Command::Add | Command::Del | Command::Check) {
        return Ok(());
    }
    if std::env::var_os("CNI_NETNS_OVERRIDE")
        .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
    {
        return Ok(());
    }
    if let (Ok(a), Ok(b)) = (
        std::fs::metadata(netns),
        std::fs::metadata("/proc/thread-self/ns/net"),
    ) && a.dev() == b.dev()
        && a.ino() == b.ino()
    {
        return Err(Error::new(
            code::INVALID_NETNS,
            format!("CNI_NETNS {netns:?} is the plugin's own network namespace"),
        ));
    }
    Ok(())
}

/// The VERSION answer, in the version the caller asked in.
pub fn version_text(asked: Version, versions: &[Version]) -> String {
    let list: Vec<&str> = versions.iter().map(|v| v.as_str()).collect();
    let v = serde_json::json!({"cniVersion": asked.as_str(), "supportedVersions": list});
    format!("{v}\n")
}

pub fn error_json(e: &Error, ver: Version) -> String {
    let mut v =
        serde_json::json!({"cniVersion": ver.as_str(), "code": e.code, "msg": bounded(&e.msg)});
    if !e.details.is_empty() {
        v["details"] = Value::String(bounded(&e.details));
    }
    pretty(&v)
}

/// The whole answer in one write(2), past std's line buffering (which splits a pretty-printed
/// result at its last newline into two writes).
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: fd 1 is the process's stdout; ManuallyDrop keeps it open afterwards.
    let mut out = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(1) });
    out.write_all(text.as_bytes())
}

pub fn print_error(e: &Error, ver: Version) -> i32 {
    let _ = write_stdout(&error_json(e, ver));
    1
}

/// From now on a panic is this plugin's CNI error on stdout (code 999) and exit status 1
/// ([`crate::process`], which `main` starts every process with).
pub fn install_panic_hook() {
    crate::process::speak_as(crate::process::Voice::CniError);
}
