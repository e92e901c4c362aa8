//! Multi-process clusters of real `capstan worker` processes, for failover tests: on 127.0.0.1,
//! or each in a network namespace of its own ([`Cluster::start_placed`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::placement::Placement;

/// The `capstan` binary built beside the test executable (deploy/dev/test.sh builds it), or
/// the one `CAPSTAN_TEST_BINARY` names.
pub fn capstan_binary() -> Option<PathBuf> {
    // a build to test other than the one beside the tests (another checkout sharing the
    // target directory, an installed release)
    if let Some(bin) = std::env::var_os("CAPSTAN_TEST_BINARY") {
        return Some(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().ok()?;
    // target/debug/deps/<test> -> target/debug/capstan
    let bin = exe.parent()?.parent()?.join("capstan");
    if bin.is_file() {
        Some(bin)
    } else {
        crate::skip_or_fail(&format!(
            "{} not built; run `cargo build --workspace --all-targets` first",
            bin.display()
        ))
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// One worker process.
#[derive(Debug)]
pub struct Worker {
    /// Node id.
    pub id: u64,
    /// Raft port.
    pub raft_port: u16,
    /// API port.
    pub api_port: u16,
    /// The address its ports listen on.
    pub host: String,
    launcher: Vec<String>,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Worker {
    /// The API base URL.
    pub fn api(&self) -> String {
        format!("http://{}:{}", self.host, self.api_port)
    }

    /// The OS process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// How the process ended, once it has (`None` while it runs or before it started).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

/// A cluster of worker processes sharing one temporary directory.
#[derive(Debug)]
pub struct Cluster {
    binary: PathBuf,
    dir: tempfile::TempDir,
    /// The workers by id.
    pub workers: BTreeMap<u64, Worker>,
    http: reqwest::blocking::Client,
    env: Vec<(String, String)>,
}

impl Cluster {
    /// Starts `n` workers (ids 1..=n) that initialise one cluster together.
    pub fn start(n: u64) -> Option<Cluster> {
        Self::start_with(n, |_| String::new())
    }

    /// Like [`Cluster::start`], appending `extra(id)` to worker `id`'s config (e.g. `[tls]`).
    pub fn start_with(n: u64, extra: impl Fn(u64) -> String) -> Option<Cluster> {
        Self::start_with_env(n, extra, Vec::new())
    }

    /// Like [`Cluster::start_with`], with `env` set for every worker process it ever spawns
    /// (e.g. `CAPSTAN_FAULT`).
    ///
    /// The ports come from [`free_port`], which another process may take before the worker
    /// binds it (a mock Kafka broker of a test running beside this one, say); a worker that
    /// cannot listen exits at once, and without the lowest id no cluster is ever initialised.
    /// So the start waits until every worker's API answers, and when one exited first it
    /// starts the whole cluster again on fresh ports (three attempts).
    pub fn start_with_env(
        n: u64,
        extra: impl Fn(u64) -> String,
        env: Vec<(String, String)>,
    ) -> Option<Cluster> {
        Self::start_placed(n, extra, env, |_| Placement::loopback())
    }

    /// Like [`Cluster::start_with_env`], each worker `id` where `place(id)` says (its address,
    /// ports and launcher: a network namespace, say).
    pub fn start_placed(
        n: u64,
        extra: impl Fn(u64) -> String,
        env: Vec<(String, String)>,
        place: impl Fn(u64) -> Placement,
    ) -> Option<Cluster> {
        let mut attempt = 1;
        loop {
            let mut cluster = Self::spawn_all(n, &extra, env.clone(), &place)?;
            if cluster.listening(Duration::from_secs(20)) || attempt == 3 {
                return Some(cluster);
            }
            eprintln!("a worker exited before listening (port taken?): starting the cluster again");
            attempt += 1;
        }
    }

    /// False when a worker exited before its API answered; true when every API answers (or
    /// `timeout` passed with all of them still running).
    fn listening(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let mut answering = 0;
            for w in self.workers.values_mut() {
                if !w.is_running() {
                    return false;
                }
                let ip: std::net::IpAddr = w.host.parse().expect("an IP address");
                let addr = std::net::SocketAddr::new(ip, w.api_port);
                if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    answering += 1;
                }
            }
            if answering == self.workers.len() || Instant::now() > deadline {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn_all(
        n: u64,
        extra: &impl Fn(u64) -> String,
        env: Vec<(String, String)>,
        place: &impl Fn(u64) -> Placement,
    ) -> Option<Cluster> {
        let binary = capstan_binary()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut workers = BTreeMap::new();
        for id in 1..=n {
            workers.insert(id, Self::new_worker(dir.path(), id, place(id)));
        }
        let members: Vec<String> = workers
            .values()
            .map(|w| {
                format!(
                    "{{ id = {}, raft = \"{host}:{}\", api = \"{host}:{}\" }}",
                    w.id,
                    w.raft_port,
                    w.api_port,
                    host = w.host
                )
            })
            .collect();
        for w in workers.values() {
            write_config(w, dir.path(), &members, &extra(w.id));
        }
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("http client");
        let mut cluster = Cluster {
            binary,
            dir,
            workers,
            http,
            env,
        };
        let ids: Vec<u64> = cluster.workers.keys().copied().collect();
        for id in ids {
            cluster.spawn(id);
        }
        Some(cluster)
    }

    fn new_worker(dir: &Path, id: u64, place: Placement) -> Worker {
        Worker {
            id,
            raft_port: place.raft_port,
            api_port: place.api_port,
            host: place.host,
            launcher: place.launcher,
            config: dir.join(format!("worker-{id}.toml")),
            log: dir.join(format!("worker-{id}.log")),
            child: None,
        }
    }

    /// Adds a worker process with no initial members (it waits to be added).
    pub fn spawn_joiner(&mut self, id: u64) -> &Worker {
        self.spawn_joiner_with(id, "")
    }

    /// [`Cluster::spawn_joiner`] with `extra` lines in its configuration (the same Raft
    /// timings as the members it joins, say).
    pub fn spawn_joiner_with(&mut self, id: u64, extra: &str) -> &Worker {
        let w = Self::new_worker(self.dir.path(), id, Placement::loopback());
        write_config(&w, self.dir.path(), &[], extra);
        self.workers.insert(id, w);
        self.spawn(id);
        &self.workers[&id]
    }

    /// (Re)starts worker `id` with its configuration and data directory.
    pub fn spawn(&mut self, id: u64) {
        let w = self.workers.get_mut(&id).expect("known worker");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&w.log)
            .expect("log file");
        let mut command = match w.launcher.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.binary);
                c
            }
            None => Command::new(&self.binary),
        };
        let child = command
            .arg("worker")
            .arg("--config")
            .arg(&w.config)
            .env("CAPSTAN_LOG", "info,openraft=warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn capstan worker");
        w.child = Some(child);
    }

    /// SIGKILLs worker `id` and reaps it.
    pub fn kill9(&mut self, id: u64) {
        let w = self.workers.get_mut(&id).expect("known worker");
        if let Some(mut c) = w.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "TERM") to worker `id`.
    pub fn signal(&self, id: u64, signal: &str) {
        let pid = self.workers[&id].pid().expect("running worker");
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill");
        assert!(ok.success(), "kill -{signal} {pid}");
    }

    /// True when worker `id`'s process is stopped by a signal (state `T` in `/proc`): proof
    /// that a SIGSTOP really froze it.
    pub fn is_stopped(&self, id: u64) -> bool {
        let Some(pid) = self.workers[&id].pid() else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // "pid (comm) S …": the state follows the last ')'
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            == Some('T')
    }

    /// The peak resident set size of worker `id`'s process so far (`VmHWM` in `/proc`), while
    /// it runs.
    pub fn peak_rss_bytes(&self, id: u64) -> Option<u64> {
        let pid = self.workers[&id].pid()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    /// Waits for worker `id` to exit on its own, up to `timeout`.
    pub fn wait_exit(&mut self, id: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.workers.get_mut(&id).expect("known").is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// GET a JSON document from worker `id`'s API.
    pub fn get(&self, id: u64, path: &str) -> Option<(u16, Value)> {
        let r = self
            .http
            .get(format!("{}{path}", self.workers[&id].api()))
            .send()
            .ok()?;
        let status = r.status().as_u16();
        Some((status, r.json().unwrap_or(Value::Null)))
    }

    /// Sends a request with an optional JSON body to worker `id`'s API.
    pub fn send(
        &self,
        id: u64,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Option<(u16, Value)> {
        self.send_within(Duration::from_secs(5), id, method, path, body)
    }

    /// [`Cluster::send`] waiting up to `wait` for the answer instead of 5 s: for
    /// a call the worker itself may take longer to answer (adding a member waits up to 20 s for
    /// it to catch up).
    pub fn send_within(
        &self,
        wait: Duration,
        id: u64,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Option<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.workers[&id].api()))
            .timeout(wait);
        if let Some(b) = body {
            req = req.json(b);
        }
        let r = req.send().ok()?;
        let status = r.status().as_u16();
        Some((status, r.json().unwrap_or(Value::Null)))
    }

    /// Pipeline `name`'s status as worker `via` reports it (a 200 answer only).
    pub fn pipeline_status(&self, via: u64, name: &str) -> Option<Value> {
        self.get(via, &format!("/pipelines/{name}/status"))
            .and_then(|(s, v)| (s == 200).then_some(v))
    }

    /// (owner, epoch, state) of pipeline `name` as worker `via` sees it, once it is owned.
    pub fn pipeline_owner(&self, via: u64, name: &str) -> Option<(u64, u64, String)> {
        let v = self.pipeline_status(via, name)?;
        Some((
            v["owner"].as_u64()?,
            v["epoch"].as_u64()?,
            v["state"].as_str()?.to_string(),
        ))
    }

    /// The leader that every running worker in `ids` agrees on, waiting up to `timeout`.
    pub fn wait_for_leader(&self, ids: &[u64], timeout: Duration) -> Option<u64> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let leaders: Vec<Option<u64>> = ids
                .iter()
                .map(|&id| {
                    self.get(id, "/cluster")
                        .and_then(|(_, v)| v["leader"].as_u64())
                })
                .collect();
            if let Some(Some(l)) = leaders.first() {
                if leaders.iter().all(|x| *x == Some(*l)) && ids.contains(l) {
                    return Some(*l);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// Polls `f` every 100 ms until it returns `Some`, up to `timeout`.
    pub fn wait_until<T>(
        &self,
        timeout: Duration,
        mut f: impl FnMut(&Cluster) -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = f(self) {
                return Some(v);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Worker `id`'s RocksDB directory (its Raft log and state machine).
    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("data-{id}"))
    }

    /// Worker `id`'s whole log.
    pub fn log(&self, id: u64) -> String {
        std::fs::read_to_string(&self.workers[&id].log).unwrap_or_default()
    }

    /// How many times `text` occurs in the logs of every worker of the cluster.
    pub fn logged(&self, text: &str) -> usize {
        self.workers
            .keys()
            .map(|&id| self.log(id).matches(text).count())
            .sum()
    }

    /// The last lines of worker `id`'s log, for assertion messages.
    pub fn log_tail(&self, id: u64) -> String {
        let text = std::fs::read_to_string(&self.workers[&id].log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for w in self.workers.values_mut() {
            if let Some(mut c) = w.child.take() {
                let _ = Command::new("kill")
                    .arg("-CONT")
                    .arg(c.id().to_string())
                    .stderr(Stdio::null())
                    .status();
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        // a failed test's worker logs, kept for a look after the temporary directory goes
        if let (true, Some(keep)) = (
            std::thread::panicking(),
            std::env::var_os("CAPSTAN_TEST_KEEP_LOGS"),
        ) {
            let keep = PathBuf::from(keep);
            let _ = std::fs::create_dir_all(&keep);
            for (id, w) in &self.workers {
                let _ = std::fs::copy(&w.log, keep.join(format!("worker-{id}.log")));
            }
        }
    }
}

fn write_config(w: &Worker, dir: &Path, members: &[String], extra: &str) {
    let text = format!(
        "node_id = {id}\ndata_dir = \"{data}\"\nraft_listen = \"{host}:{raft}\"\napi_listen = \"{host}:{api}\"\ninitial_members = [\n{members}\n]\n{extra}",
        id = w.id,
        host = w.host,
        data = dir.join(format!("data-{}", w.id)).display(),
        raft = w.raft_port,
        api = w.api_port,
        members = members.join(",\n"),
    );
    std::fs::write(&w.config, text).expect("write worker config");
}

/// A valid pipeline definition whose source and Kafka are closed loopback ports: for the tests
/// of the control plane, where a started runner just fails to connect (its status says so).
pub fn idle_definition(name: &str) -> Value {
    serde_json::json!({
        "name": name,
        "source": {
            "host": "127.0.0.1", "port": 1, "user": "nobody", "tls": {"mode": "disabled"},
            "server_id": 4242, "flavor": "mysql", "max_reconnects": 1, "reconnect_backoff_ms": 100
        },
        "kafka": {"bootstrap_servers": "127.0.0.1:1", "topic_prefix": "t"}
    })
}
