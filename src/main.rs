//! argv[0] dispatch: `bridge`, `host-local`, … run that applet; `cnibox APPLET` does too;
//! `cnibox --list | --version | --help` describe the binary.
//!
//! The process starts at C's `main`, not at std's runtime: a plugin lives a few milliseconds and
//! std's start-up (a poll of fds 0–2, an alternate signal stack mapped and guarded, SIGSEGV and
//! SIGBUS handlers to print "stack overflow", 14 system calls in all, and their undoing at exit)
//! is a tenth of a VERSION call. What a plugin needs of it is kept: SIGPIPE ignored, so a write
//! to a closed pipe is an error to handle rather than a kill, and stdout flushed at exit
//! (`std::process::exit`). Arguments come from `main`'s argv (musl gives std none without its
//! runtime).
#![cfg_attr(not(test), no_main)]
// Under `cargo test` the harness brings its own main and nothing here is reached.
#![cfg_attr(test, allow(dead_code))]

use cnibox::applets;
use cnibox::cni::skel;

mod install;

const USAGE: &str = "\
usage: cnibox APPLET          run APPLET as a CNI plugin (CNI_COMMAND etc. in the environment)
       APPLET                 the same, when cnibox is installed under the applet's name
       cnibox dhcp daemon [-socketpath PATH] …   the DHCP lease daemon (`-h`: its flags)
       cnibox install [DIR]   install itself and the applet links into DIR (`-h`: its flags)
       cnibox --list          list applets
       cnibox --version       print version and supported CNI spec versions
       cnibox --help          this text";

#[global_allocator]
static ALLOC: cnibox::alloc::Classes = cnibox::alloc::Classes::new();

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::os::unix::ffi::OsStrExt as _;
    // SAFETY: setting a signal's disposition to SIG_IGN, before any other thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let args: Vec<std::ffi::OsString> = (0..usize::try_from(argc).unwrap_or(0))
        // SAFETY: the C runtime passes argc valid, NUL-terminated strings in argv.
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) })
        .map(|a| std::ffi::OsStr::from_bytes(a.to_bytes()).to_owned())
        .collect();
    std::process::exit(real_main(args.into_iter()))
}

/// Run `applet` as a plugin or, given `daemon` as its first argument (`dhcp daemon …`), as the
/// daemon it also is.
fn run(applet: &'static cnibox::cni::Applet, mut args: Args) -> i32 {
    if args.next().is_some_and(|a| a == "daemon") {
        let rest: Vec<String> = args.map(|s| s.to_string_lossy().into_owned()).collect();
        if let Some(status) = applets::daemon(applet.name, &rest) {
            return status;
        }
    }
    skel::run(applets::TABLE, applet)
}

/// Writes `text` and a newline, then returns `status`. A closed pipe (`cnibox --list | head -1`)
/// or a full disk is not worth a panic: the write's error is dropped, as the shell's tools do.
fn say(mut to: impl std::io::Write, text: &str, status: i32) -> i32 {
    let _ = writeln!(to, "{text}");
    status
}

type Args = std::vec::IntoIter<std::ffi::OsString>;

fn real_main(mut args: Args) -> i32 {
    let argv0 = args.next().unwrap_or_default();
    let base = std::path::Path::new(&argv0)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = base.strip_suffix(".exe").unwrap_or(&base);
    cnibox::netfilter::linger_at_exit();
    if let Some(applet) = applets::find(base) {
        return run(applet, args);
    }
    if !base.starts_with("cnibox") {
        let text = format!("cnibox: unknown applet {base:?} (cnibox --list shows the applets)");
        return say(std::io::stderr(), &text, 1);
    }
    let first = args
        .next()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match first.as_str() {
        "--list" | "-l" => {
            let names: Vec<&str> = applets::TABLE.iter().map(|a| a.name).collect();
            say(std::io::stdout(), &names.join("\n"), 0)
        }
        "--version" | "-V" => {
            let text = format!(
                "cnibox {} (containernetworking/plugins v{} compatible)\nCNI protocol versions supported: {}",
                env!("CARGO_PKG_VERSION"),
                cnibox::cni::version::UPSTREAM_RELEASE,
                cnibox::cni::version::list(cnibox::cni::Version::ALL)
            );
            say(std::io::stdout(), &text, 0)
        }
        "--help" | "-h" => say(std::io::stdout(), USAGE, 0),
        "" => say(std::io::stderr(), USAGE, 1),
        "install" => {
            let rest: Vec<String> = args.map(|s| s.to_string_lossy().into_owned()).collect();
            install::main(&rest)
        }
        // Internal: the tap applet creating a device in an SELinux label (src/tuntap.rs).
        cnibox::tuntap::HELPER_OPTION => {
            let rest: Vec<String> = args.map(|s| s.to_string_lossy().into_owned()).collect();
            cnibox::tuntap::helper_main(&rest)
        }
        opt if opt.starts_with('-') => say(
            std::io::stderr(),
            &format!("cnibox: unknown option {opt:?}\n{USAGE}"),
            2,
        ),
        name => match applets::find(name) {
            Some(applet) => run(applet, args),
            None => {
                let text =
                    format!("cnibox: unknown applet {name:?} (cnibox --list shows the applets)");
                say(std::io::stderr(), &text, 1)
            }
        },
    }
}
