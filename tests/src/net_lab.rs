//! [`NetLab`]: a network namespace per worker, for partition tests.
//!
//! Each worker `id` gets a namespace `capstan-<pid>-<lab>-<id>` with one veth link to a bridge
//! of the test's (root) namespace: the bridge is `10.231.<x>.1/24`, worker `id` is
//! `10.231.<x>.<1 + id>` with its Raft port on [`RAFT_PORT`] and its API on [`API_PORT`] (each
//! namespace has ports of its own). `<x>` is claimed by creating the bridge `cpb-<x>`: the
//! first one that does not exist yet, so labs of concurrent test processes never share one.
//!
//! The dev services listen on 127.0.0.1 of the root namespace, and Kafka advertises
//! `127.0.0.1:<port>`; so every service port is forwarded twice (`socat`): in each namespace
//! from `127.0.0.1:<port>` to the bridge address, and there to `127.0.0.1:<port>`. A pipeline
//! definition is the same as outside a lab, and a cut between workers never cuts a service.
//!
//! Faults are packet drops (nftables, in each namespace's `input` hook): silent, like a
//! partition, not refused. [`NetLab::cut`] drops everything between two workers,
//! [`NetLab::cut_one_way`] only what one sends to the other's Raft and API ports (the other
//! still connects to the first and gets its answers), [`NetLab::isolate`] cuts one worker from
//! every other, [`NetLab::heal_all`] lifts every fault. The test itself always reaches every
//! worker's API through the bridge.
//!
//! Dropping the lab stops its forwarders and deletes its namespaces and bridge, after a panic
//! too; creating one first deletes what labs of processes that no longer run left behind. Needs
//! root, `ip`, `nft` and `socat` (`deploy/dev/install-deps.sh`); without them a test is skipped
//! (under CI it fails).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::placement::Placement;

/// Every worker's Raft port, inside its namespace.
pub const RAFT_PORT: u16 = 7100;
/// Every worker's API port, inside its namespace.
pub const API_PORT: u16 = 8080;

/// One fault: `to` drops what `from` sends it — everything, or only what goes to `to`'s Raft
/// and API ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fault {
    /// The sender.
    pub from: u64,
    /// The receiver, whose namespace drops the packets.
    pub to: u64,
    /// Only packets to `to`'s own server ports (connections `to` opens still work both ways).
    pub servers_only: bool,
}

/// The nftables script that installs, atomically, `faults` in the namespace of worker
/// `me` (worker `id` is at `addr(id)`), replacing the ones it had. Pure.
pub fn ruleset(me: u64, faults: &BTreeSet<Fault>, addr: impl Fn(u64) -> Ipv4Addr) -> String {
    let mut rules = String::new();
    for d in faults.iter().filter(|d| d.to == me) {
        let ports = if d.servers_only {
            format!(" tcp dport {{ {RAFT_PORT}, {API_PORT} }}")
        } else {
            String::new()
        };
        rules.push_str(&format!("    ip saddr {}{ports} drop\n", addr(d.from)));
    }
    format!(
        "table ip capstan_lab {{}}\ndelete table ip capstan_lab\ntable ip capstan_lab {{\n  \
         chain input {{\n    type filter hook input priority filter; policy accept;\n{rules}  }}\n}}\n"
    )
}

/// See the module documentation.
#[derive(Debug)]
pub struct NetLab {
    subnet: u8,
    bridge: String,
    namespaces: BTreeMap<u64, String>,
    forwarders: Vec<Child>,
    faults: BTreeSet<Fault>,
}

impl NetLab {
    /// A namespace for each of `ids` (ids 1..=250), with `services` (ports of 127.0.0.1 in the
    /// test's namespace) reachable from each on the same 127.0.0.1 port. `None` (after saying
    /// why) when the machine cannot host one; under CI that is a failure.
    pub fn create(ids: &[u64], services: &[u16]) -> Option<NetLab> {
        if let Some(why) = missing_prerequisite() {
            return crate::skip_or_fail(&why);
        }
        sweep_stale();
        static LABS: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "capstan-{}-{}",
            std::process::id(),
            LABS.fetch_add(1, Ordering::Relaxed)
        );
        let (subnet, bridge) = claim_bridge(&tag);
        let mut lab = NetLab {
            subnet,
            bridge,
            namespaces: BTreeMap::new(),
            forwarders: Vec::new(),
            faults: BTreeSet::new(),
        };
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", lab.gateway()),
            "dev",
            &lab.bridge,
        ]);
        run(&["ip", "link", "set", &lab.bridge, "up"]);
        for &id in ids {
            assert!((1..=250).contains(&id), "worker id {id} outside 1..=250");
            let ns = format!("{tag}-{id}");
            run(&["ip", "netns", "add", &ns]);
            lab.namespaces.insert(id, ns.clone());
            let veth = format!("cpv-{subnet}-{id}");
            // one left by an earlier lab of this subnet whose namespace the kernel has not
            // freed yet (that happens in the background)
            let _ = quiet(&["ip", "link", "del", &veth]);
            run(&[
                "ip", "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ]);
            run(&["ip", "link", "set", &veth, "master", &lab.bridge, "up"]);
            let addr = format!("{}/24", lab.addr(id));
            run(&["ip", "-n", &ns, "addr", "add", &addr, "dev", "eth0"]);
            run(&["ip", "-n", &ns, "link", "set", "eth0", "up"]);
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        }
        for &port in services {
            lab.forward(port);
        }
        lab.apply();
        Some(lab)
    }

    /// The bridge's address in the test's namespace.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, self.subnet, 1)
    }

    /// Worker `id`'s address.
    pub fn addr(&self, id: u64) -> Ipv4Addr {
        let host = u8::try_from(1 + id).expect("worker id within 1..=250");
        Ipv4Addr::new(10, 231, self.subnet, host)
    }

    /// Worker `id`'s namespace.
    pub fn namespace(&self, id: u64) -> &str {
        &self.namespaces[&id]
    }

    /// Where worker `id` runs: its namespace, its address, the lab's ports.
    pub fn placement(&self, id: u64) -> Placement {
        Placement {
            host: self.addr(id).to_string(),
            raft_port: RAFT_PORT,
            api_port: API_PORT,
            launcher: vec![
                "ip".into(),
                "netns".into(),
                "exec".into(),
                self.namespace(id).into(),
            ],
        }
    }

    /// Drops everything between workers `a` and `b`, both ways.
    pub fn cut(&mut self, a: u64, b: u64) {
        self.add(&[(a, b, false), (b, a, false)]);
    }

    /// Drops what `from` sends to `to`'s Raft and API ports: `from` can no longer reach `to`,
    /// while `to` still reaches `from` and gets its answers.
    pub fn cut_one_way(&mut self, from: u64, to: u64) {
        self.add(&[(from, to, true)]);
    }

    /// Cuts worker `n` from every other worker; it still reaches the services (and the test
    /// reaches it).
    pub fn isolate(&mut self, n: u64) {
        let others: Vec<(u64, u64, bool)> = self
            .namespaces
            .keys()
            .filter(|&&m| m != n)
            .flat_map(|&m| [(n, m, false), (m, n, false)])
            .collect();
        self.add(&others);
    }

    /// Lifts every fault.
    pub fn heal_all(&mut self) {
        self.faults.clear();
        self.apply();
    }

    /// The faults in force.
    pub fn faults(&self) -> &BTreeSet<Fault> {
        &self.faults
    }

    fn add(&mut self, faults: &[(u64, u64, bool)]) {
        for &(from, to, servers_only) in faults {
            assert!(self.namespaces.contains_key(&from) && self.namespaces.contains_key(&to));
            self.faults.insert(Fault {
                from,
                to,
                servers_only,
            });
        }
        self.apply();
    }

    /// Installs the faults in force in every namespace.
    fn apply(&self) {
        for (&id, ns) in &self.namespaces {
            let script = ruleset(id, &self.faults, |w| self.addr(w));
            run_with_input(&["ip", "netns", "exec", ns, "nft", "-f", "-"], &script);
        }
    }

    /// Makes 127.0.0.1:`port` of the test's namespace reachable on 127.0.0.1:`port` of every
    /// namespace.
    fn forward(&mut self, port: u16) {
        let gateway = self.gateway();
        // a port free on the bridge address a moment ago
        let relay = std::net::TcpListener::bind((gateway, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port on the bridge")
            .port();
        self.spawn_forwarder(
            &[],
            &format!("TCP-LISTEN:{relay},bind={gateway},reuseaddr,fork"),
            &format!("TCP:127.0.0.1:{port}"),
        );
        wait_listening(&[], gateway, relay);
        let namespaces: Vec<String> = self.namespaces.values().cloned().collect();
        for ns in namespaces {
            let launcher = ["ip", "netns", "exec", ns.as_str()];
            self.spawn_forwarder(
                &launcher,
                &format!("TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork"),
                &format!("TCP:{gateway}:{relay}"),
            );
            wait_listening(&launcher, Ipv4Addr::LOCALHOST, port);
        }
    }

    fn spawn_forwarder(&mut self, launcher: &[&str], listen: &str, to: &str) {
        let mut argv: Vec<&str> = launcher.to_vec();
        argv.extend(["socat", listen, to]);
        let child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // its own process group: stopping the lab stops the connections it forked too
            .process_group(0)
            .spawn()
            .expect("spawn socat");
        self.forwarders.push(child);
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for c in &mut self.forwarders {
            // the forwarder's process group: itself and the connections it forked
            let _ = Command::new("kill")
                .arg("--")
                .arg(format!("-{}", c.id()))
                .stderr(Stdio::null())
                .status();
            let _ = c.wait();
        }
        for (id, ns) in &self.namespaces {
            // deleting one end deletes the pair at once, not when the kernel frees the namespace
            let _ = quiet(&["ip", "link", "del", &format!("cpv-{}-{id}", self.subnet)]);
            delete_namespace(ns);
        }
        let _ = quiet(&["ip", "link", "del", &self.bridge]);
    }
}

/// Why this machine cannot host a lab, if it cannot.
fn missing_prerequisite() -> Option<String> {
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|u| u.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !root {
        return Some("the network partition tests need root (network namespaces)".into());
    }
    for (tool, args) in [
        ("ip", &["-V"][..]),
        ("nft", &["--version"][..]),
        ("socat", &["-V"][..]),
    ] {
        if !quiet(&[&[tool], args].concat()) {
            return Some(format!(
                "`{tool}` is not installed (deploy/dev/install-deps.sh installs it)"
            ));
        }
    }
    None
}

/// Claims the first free `10.231.<x>.0/24` by creating its bridge `cpb-<x>` (which fails when
/// another lab has it), named `tag` in its alias.
fn claim_bridge(tag: &str) -> (u8, String) {
    for x in 1..=254u8 {
        let bridge = format!("cpb-{x}");
        if quiet(&["ip", "link", "add", &bridge, "type", "bridge"]) {
            run(&["ip", "link", "set", "dev", &bridge, "alias", tag]);
            return (x, bridge);
        }
    }
    panic!("no free 10.231.<x>.0/24 for a network lab (254 bridges cpb-<x> exist)");
}

/// Deletes the namespaces and bridges of labs whose process no longer runs (a test killed
/// before its `Drop`), and the processes still running in those namespaces.
fn sweep_stale() {
    let dead = |name: &str| {
        name.strip_prefix("capstan-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    let namespaces = output(&["ip", "netns", "list"]);
    for ns in namespaces
        .lines()
        .filter_map(|l| l.split_whitespace().next())
    {
        if dead(ns) {
            for pid in output(&["ip", "netns", "pids", ns]).split_whitespace() {
                let _ = quiet(&["kill", "-9", pid]);
            }
            delete_namespace(ns);
        }
    }
    // `ip -o link show type bridge`: "<n>: cpb-<x>: <…> … alias capstan-<pid>-<lab>"
    let links = output(&["ip", "-o", "link", "show", "type", "bridge"]);
    for line in links.lines() {
        let name = line.split(": ").nth(1).unwrap_or("");
        let alias = line.split(" alias ").nth(1).unwrap_or("").trim();
        if name.starts_with("cpb-") && dead(alias) {
            let _ = quiet(&["ip", "link", "del", name]);
        }
    }
}

fn delete_namespace(ns: &str) {
    let _ = quiet(&["ip", "netns", "del", ns]);
}

/// Waits up to 5 s until something listens on `ip:port` as seen under `launcher`.
fn wait_listening(launcher: &[&str], ip: Ipv4Addr, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let filter = format!("sport = :{port}");
    while Instant::now() < deadline {
        let mut argv: Vec<&str> = launcher.to_vec();
        argv.extend(["ss", "-Hltn", &filter]);
        if output(&argv).contains(&format!("{ip}:{port}")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no forwarder listening on {ip}:{port} ({launcher:?}) after 5 s");
}

/// Runs `argv`, panicking with its error output when it fails.
fn run(argv: &[&str]) {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs `argv` with `input` on its standard input, panicking when it fails.
fn run_with_input(argv: &[&str], input: &str) {
    use std::io::Write;
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the script");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{argv:?} on\n{input}: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs `argv` without output: true when it succeeded.
fn quiet(argv: &[&str]) -> bool {
    Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `argv`'s standard output (empty when it cannot run).
fn output(argv: &[&str]) -> String {
    Command::new(argv[0])
        .args(&argv[1..])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(id: u64) -> Ipv4Addr {
        Ipv4Addr::new(10, 231, 7, 1 + id as u8)
    }

    #[test]
    fn a_namespace_drops_only_what_its_faults_name() {
        let faults = BTreeSet::from([
            Fault {
                from: 1,
                to: 2,
                servers_only: false,
            },
            Fault {
                from: 3,
                to: 2,
                servers_only: true,
            },
            Fault {
                from: 2,
                to: 1,
                servers_only: false,
            },
        ]);
        assert_eq!(
            ruleset(2, &faults, addr),
            "table ip capstan_lab {}\ndelete table ip capstan_lab\ntable ip capstan_lab {\n  \
             chain input {\n    type filter hook input priority filter; policy accept;\n    \
             ip saddr 10.231.7.2 drop\n    ip saddr 10.231.7.4 tcp dport { 7100, 8080 } drop\n  \
             }\n}\n"
        );
        // no fault names worker 3 as the receiver: its chain accepts everything
        assert_eq!(
            ruleset(3, &faults, addr),
            "table ip capstan_lab {}\ndelete table ip capstan_lab\ntable ip capstan_lab {\n  \
             chain input {\n    type filter hook input priority filter; policy accept;\n  \
             }\n}\n"
        );
    }
}
