//! The dhcp tests' lab: a server namespace on one end of a veth pair (`srv0`, `10.N.0.1/24`), the
//! node namespace on the other (`up0`, a macvlan master), and a `dhcp daemon` [`Daemon`] on a
//! socket: started, waited for (its socket answers), killed and reaped on drop, its log kept.

use super::lab::unique_n;
use super::proc::{Proc, log_text};
use super::wait::{secs, wait_until_or};
use super::{Impl, NetNs, Sandbox, skip_note};
use serde_json::Value;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The server namespace, the node and the sandbox the daemons and their logs live in.
pub struct DhcpLab {
    pub sb: Sandbox,
    pub node: NetNs,
    pub srv: NetNs,
    /// The lab's second octet: the server subnet is `10.N.0.0/24`.
    pub n: u8,
}

impl DhcpLab {
    /// A fresh lab, its sandbox named after `tag`.
    pub fn new(tag: &str) -> DhcpLab {
        let sb = Sandbox::new(tag);
        let n = unique_n();
        let (node, srv) = (NetNs::create(), NetNs::create());
        node.sh(&[
            "ip", "link", "add", "up0", "type", "veth", "peer", "name", "srv0", "netns", &srv.name,
        ]);
        node.sh(&["ip", "link", "set", "up0", "up"]);
        let addr = format!("10.{n}.0.1/24");
        srv.sh(&["ip", "addr", "add", &addr, "dev", "srv0"]);
        srv.sh(&["ip", "link", "set", "srv0", "up"]);
        DhcpLab { sb, node, srv, n }
    }

    /// `imp`'s `dhcp daemon` with `args` after `-socketpath`, on a socket of its own in the
    /// sandbox, once that socket accepts.
    pub fn daemon(&self, imp: Impl, args: &[&str]) -> Daemon {
        let tag = imp.label();
        let socket = self
            .sb
            .path(&format!("{tag}/dhcp.sock"))
            .display()
            .to_string();
        let mut cmd = Command::new(self.sb.plugin(imp).program("dhcp"));
        cmd.args(["daemon", "-socketpath", &socket]).args(args);
        Daemon::start(cmd, socket, self.sb.path(&format!("daemon-{tag}.log")))
    }
}

/// A [`DhcpLab`] with dnsmasq serving its server namespace: 10.N.0.50–99 for 2 minutes, router
/// 10.N.0.1, T1 3 s; its log and lease file in the sandbox.
pub struct Dnsmasq {
    pub lab: DhcpLab,
    _server: Proc,
    pub server_log: PathBuf,
    pub leases: PathBuf,
}

impl Deref for Dnsmasq {
    type Target = DhcpLab;
    fn deref(&self) -> &DhcpLab {
        &self.lab
    }
}

impl Dnsmasq {
    /// dnsmasq is installed; else a skip note for `test` (a failure under
    /// CNIBOX_REQUIRE_ALL=1).
    pub fn available(test: &str) -> bool {
        let found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .any(|d| Path::new(d).join("dnsmasq").exists());
        if !found {
            skip_note(
                &format!("{test} (dnsmasq)"),
                "needs dnsmasq (apt-get install dnsmasq-base)",
            );
        }
        found
    }

    /// A fresh lab (sandbox named after `tag`) once dnsmasq listens.
    pub fn start(tag: &str) -> Dnsmasq {
        let lab = DhcpLab::new(tag);
        let (sb, srv, n) = (&lab.sb, &lab.srv, lab.n);
        srv.sh(&["ip", "link", "set", "lo", "up"]);
        let server_log = sb.path("dnsmasq.log");
        let leases = sb.path("dnsmasq.leases");
        let err = std::fs::File::create(&server_log).expect("create dnsmasq's log");
        let child = Command::new("ip")
            .args(["netns", "exec", &srv.name, "dnsmasq", "--no-daemon"])
            .args(["--conf-file=/dev/null", "--port=0", "--interface=srv0"])
            .args(["--bind-interfaces", "--log-dhcp"])
            .arg(format!(
                "--dhcp-range=10.{n}.0.50,10.{n}.0.99,255.255.255.0,2m"
            ))
            .arg(format!("--dhcp-option=option:router,10.{n}.0.1"))
            .arg("--dhcp-option=option:T1,3")
            .arg(format!("--dhcp-leasefile={}", leases.display()))
            .arg(format!("--pid-file={}", sb.path("dnsmasq.pid").display()))
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start dnsmasq");
        let server = Proc(child);
        wait_until_or(
            "dnsmasq to listen",
            secs(120),
            || log_text(&server_log).contains("DHCP, IP range"),
            || log_text(&server_log),
        );
        Dnsmasq {
            lab,
            _server: server,
            server_log,
            leases,
        }
    }

    /// The address of result `r`'s first IP, checked to come from this server's range (a /24,
    /// `10.N.0.50` to `.99`).
    #[track_caller]
    pub fn leased(&self, r: &Value) -> String {
        let addr = r["ips"][0]["address"].as_str().expect("an address");
        let (ip, prefix) = addr.split_once('/').unwrap();
        assert_eq!(prefix, "24", "{r}");
        let last: u8 = ip.rsplit('.').next().unwrap().parse().unwrap();
        assert!(
            ip.starts_with(&format!("10.{}.0.", self.n)) && (50..=99).contains(&last),
            "{r}"
        );
        ip.to_string()
    }
}

/// A running `dhcp daemon`, killed and reaped on drop.
pub struct Daemon {
    pub proc: Proc,
    pub socket: String,
    pub log: PathBuf,
}

impl Daemon {
    /// Start `cmd` (a `dhcp daemon` serving `socket`), its stderr in `log`; once `socket`
    /// accepts.
    pub fn start(mut cmd: Command, socket: String, log: PathBuf) -> Daemon {
        let err = std::fs::File::create(&log).expect("create the daemon's log");
        let child = cmd
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("start a dhcp daemon");
        let d = Daemon {
            proc: Proc(child),
            socket,
            log,
        };
        wait_until_or(
            "the daemon's socket",
            secs(120),
            || std::os::unix::net::UnixStream::connect(&d.socket).is_ok(),
            || d.log(),
        );
        d
    }

    /// Its log (stderr) so far.
    pub fn log(&self) -> String {
        log_text(&self.log)
    }

    /// User plus system CPU time, in clock ticks (/proc/PID/stat fields 14 and 15).
    pub fn cpu_ticks(&self) -> u64 {
        let s = log_text(Path::new(&format!("/proc/{}/stat", self.proc.0.id())));
        let Some(end) = s.rfind(')') else { return 0 };
        let f: Vec<&str> = s.get(end + 2..).unwrap_or("").split_whitespace().collect();
        let field = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        field(11).zip(field(12)).map_or(0, |(u, s)| u + s)
    }
}
