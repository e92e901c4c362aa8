//! Helpers shared by the live source tests: a source config for a dev server, and readers
//! that wait for this test's own transactions in a stream shared with parallel tests.

#![allow(dead_code)]

use std::time::Duration;

use capstan_connectors::mysql::{
    AssemblerConfig, AssemblerOutput, BinlogSource, Password, SourceConfig, SourceError,
    StartPosition, TableFilter, TlsConfig, TlsMode, ValidSourceConfig,
};
use capstan_core::change::{SchemaChange, Transaction};
use capstan_tests::DbEnv;

/// How long a test waits for its own output before failing.
pub const WAIT: Duration = Duration::from_secs(60);

/// A server id unique to this process and call (MySQL drops a dump whose server id a newer
/// dump reuses, so parallel tests must not share one).
pub fn unique_server_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    1_000_000 + (std::process::id() % 20_000) * 100 + n % 100
}

/// A TLS `verify_none` config for `db` as the capstan account, with short liveness timers.
pub fn raw_config(db: &DbEnv) -> SourceConfig {
    let mut c = SourceConfig::new(db.host.clone(), db.port, db.user.clone());
    c.password = Password::new(db.password.clone());
    c.server_id = Some(unique_server_id());
    c.tls = Some(TlsConfig {
        mode: Some(TlsMode::VerifyNone),
        ca_file: None,
    });
    c.heartbeat_period_ms = 1_000;
    c.stream_timeout_ms = 5_000;
    c.reconnect_backoff_ms = 200;
    c.max_reconnects = 20;
    c
}

/// [`raw_config`], validated.
pub fn config(db: &DbEnv) -> ValidSourceConfig {
    raw_config(db).validate().unwrap()
}

/// An assembler capturing only `tables` of `schema`.
pub fn only(schema: &str, tables: &[&str]) -> AssemblerConfig {
    AssemblerConfig {
        filter: TableFilter::only(tables.iter().map(|t| (schema.to_string(), t.to_string()))),
        ..AssemblerConfig::default()
    }
}

/// A source from the server's current position.
pub async fn start_current(db: &DbEnv, assembler: AssemblerConfig) -> BinlogSource {
    BinlogSource::start(config(db), StartPosition::Current, assembler)
        .await
        .unwrap_or_else(|e| panic!("start {}: {e}", db.name))
}

/// The next output, or a failure after [`WAIT`].
pub async fn next(source: &mut BinlogSource) -> Result<AssemblerOutput, SourceError> {
    tokio::time::timeout(WAIT, source.next())
        .await
        .expect("no output within the wait")
}

/// The next transaction with a change in `schema` (skipping everything else).
pub async fn next_txn(source: &mut BinlogSource, schema: &str) -> Transaction {
    loop {
        match next(source).await.unwrap() {
            AssemblerOutput::Transaction(t)
                if t.changes.iter().any(|c| c.table.schema == schema) =>
            {
                return t
            }
            _ => continue,
        }
    }
}

/// The next schema change naming `schema`.
pub async fn next_schema_change(source: &mut BinlogSource, schema: &str) -> SchemaChange {
    loop {
        if let AssemblerOutput::SchemaChange { change, .. } = next(source).await.unwrap() {
            if change.schema.as_deref() == Some(schema) {
                return change;
            }
        }
    }
}

/// The halt the source stops with, skipping outputs before it.
pub async fn halt(source: &mut BinlogSource) -> SourceError {
    loop {
        if let Err(e) = next(source).await {
            return e;
        }
    }
}

/// A TCP proxy in front of a dev server that can go silent (a half-open partition: the
/// sockets stay up, nothing is forwarded) and refuse new connections.
pub struct Proxy {
    /// The local port to connect to.
    pub port: u16,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
    frozen_up_to: std::sync::Arc<std::sync::atomic::AtomicU64>,
    refuse: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Proxy {
    /// Listens on an ephemeral loopback port and forwards to `db`.
    pub async fn start(db: &DbEnv) -> Proxy {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let generation = Arc::new(AtomicU64::new(1));
        let frozen_up_to = Arc::new(AtomicU64::new(0));
        let refuse = Arc::new(AtomicBool::new(false));
        let upstream = (db.host.clone(), db.port);
        let (g, f, r) = (generation.clone(), frozen_up_to.clone(), refuse.clone());
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if r.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = tokio::net::TcpStream::connect(upstream.clone()).await else {
                    continue;
                };
                let conn_gen = g.fetch_add(1, Ordering::SeqCst);
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, conn_gen, f.clone()));
                tokio::spawn(pump(sr, cw, conn_gen, f.clone()));
            }
        });
        Proxy {
            port,
            generation,
            frozen_up_to,
            refuse,
        }
    }

    /// Existing connections stop forwarding (new ones still flow).
    pub fn freeze(&self) {
        use std::sync::atomic::Ordering;
        let current = self.generation.load(Ordering::SeqCst);
        self.frozen_up_to.store(current, Ordering::SeqCst);
    }

    /// New connections are accepted and closed at once.
    pub fn refuse(&self) {
        self.refuse.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    conn_gen: u64,
    frozen_up_to: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while conn_gen <= frozen_up_to.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Serializes tests that disturb every stream on a server (an XA PREPARE halts every source
/// that sees it; a purge or a killed dump thread affects every reader) or need a quiet server
/// (heartbeats on an idle stream): they take the write side, ordinary streaming tests the read
/// side.
///
/// The lock is an `flock` on one file in the temporary directory, so it holds across test
/// processes (nextest runs every test in its own process, several at once) as well as across
/// the threads of one `cargo test` binary (each acquisition opens the file anew, and `flock`
/// locks of separate opens exclude each other). Tests that take no lock at all (the pipeline and
/// snapshot suites, whose workers also stream from the dev servers) are kept away from the
/// write-side tests by `.config/nextest.toml`, which gives each of those the whole run.
pub static SERVER_WIDE: ServerWide = ServerWide;

/// See [`SERVER_WIDE`].
pub struct ServerWide;

/// A held side of [`SERVER_WIDE`]; released on drop (or when the process exits).
pub struct ServerWideGuard {
    _file: std::fs::File,
}

impl ServerWide {
    /// The shared side: streams that tolerate each other but not a server-wide disturbance.
    pub async fn read(&self) -> ServerWideGuard {
        Self::lock(false).await
    }

    /// The exclusive side: no other holder of either side runs meanwhile.
    pub async fn write(&self) -> ServerWideGuard {
        Self::lock(true).await
    }

    async fn lock(exclusive: bool) -> ServerWideGuard {
        let path = std::env::temp_dir().join("capstan-tests-server-wide.lock");
        tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
            let locked = if exclusive {
                file.lock()
            } else {
                file.lock_shared()
            };
            locked.unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
            ServerWideGuard { _file: file }
        })
        .await
        .unwrap()
    }
}

/// Kills every binlog dump thread of the capstan account (they reconnect).
pub async fn kill_dump_threads(db: &DbEnv) -> usize {
    use mysql_async::prelude::*;
    let mut admin = db.admin_conn().await;
    let ids: Vec<u64> = admin
        .exec(
            "SELECT id FROM information_schema.processlist \
             WHERE user = ? AND command LIKE 'Binlog Dump%'",
            (db.user.clone(),),
        )
        .await
        .unwrap();
    for id in &ids {
        let _ = admin.query_drop(format!("KILL {id}")).await;
    }
    ids.len()
}

/// With `heartbeat_period_ms` 1000 and `stream_timeout_ms` 3000, a stream that receives
/// nothing but heartbeats for 8 s (well past the liveness window) stays on its first
/// connection, and the heartbeats are what arrived: at least 5 of them in that stretch.
///
/// The caller holds the write side of [`SERVER_WIDE`], and nextest runs this test alone, but
/// other test runs on the same machine may write meanwhile (each of their events resets the
/// server's idle timer, and no heartbeat is due). So the stream is watched second by second
/// for up to 90 s until 8 consecutive seconds brought heartbeats only.
pub async fn heartbeats_keep_an_idle_stream_alive(db: &DbEnv) {
    let mut raw = raw_config(db);
    raw.heartbeat_period_ms = 1_000;
    raw.stream_timeout_ms = 3_000;
    let mut source = BinlogSource::start(
        raw.validate().unwrap(),
        StartPosition::Current,
        only("capstan_no_such_schema", &["t"]),
    )
    .await
    .unwrap();
    const QUIET: usize = 8;
    let give_up = tokio::time::Instant::now() + Duration::from_secs(90);
    let mut tick = tokio::time::Instant::now();
    let mut last = source.stats();
    // (heartbeats, was the second free of any other frame) per second, newest last
    let mut seconds: Vec<(u64, bool)> = Vec::new();
    loop {
        tick += Duration::from_secs(1);
        while let Ok(output) = tokio::time::timeout_at(tick, source.next()).await {
            // another session's write: not ours, but never an error
            output.unwrap_or_else(|e| panic!("{}: idle stream failed: {e}", db.name));
        }
        let now = source.stats();
        assert_eq!(now.connects, 1, "{}: {now:?}", db.name);
        assert_eq!(now.reconnects, 0, "{}: {now:?}", db.name);
        let heartbeats = now.heartbeats - last.heartbeats;
        seconds.push((heartbeats, now.events - last.events == heartbeats));
        last = now;
        let quiet = seconds.iter().rev().take_while(|(_, only)| *only).count();
        if quiet >= QUIET {
            let arrived: u64 = seconds.iter().rev().take(QUIET).map(|(h, _)| h).sum();
            assert!(
                arrived >= 5,
                "{}: {arrived} heartbeats in {QUIET} s",
                db.name
            );
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "{}: never {QUIET} s without other writers in 90 s: {seconds:?}",
            db.name
        );
    }
}

/// A second replica connection with the same server id makes the server end the first one's
/// dump: the first source halts `server_id_conflict` (no reconnect, which would in turn evict
/// the second, and so on), and the second streams on undisturbed.
pub async fn same_server_id_halts_the_older_stream(db: &DbEnv) {
    use mysql_async::prelude::*;
    let schema = capstan_tests::unique_name("src_sid");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
        ))
        .await
        .unwrap();
    let config = config(db);
    let mut first = BinlogSource::start(
        config.clone(),
        StartPosition::Current,
        only(&schema, &["t"]),
    )
    .await
    .unwrap();
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (1)"))
        .await
        .unwrap();
    assert_eq!(next_txn(&mut first, &schema).await.changes.len(), 1);
    let mut second = BinlogSource::start(config, StartPosition::Current, only(&schema, &["t"]))
        .await
        .unwrap();
    let err = halt(&mut first).await;
    assert_eq!(err.code(), "server_id_conflict", "{}: {err}", db.name);
    assert_eq!(
        first.stats().reconnects,
        0,
        "{}: {:?}",
        db.name,
        first.stats()
    );
    admin
        .query_drop(format!("INSERT INTO `{schema}`.t VALUES (2)"))
        .await
        .unwrap();
    let t = next_txn(&mut second, &schema).await;
    assert_eq!(t.changes.len(), 1);
    assert_eq!(
        second.stats().reconnects,
        0,
        "{}: {:?}",
        db.name,
        second.stats()
    );
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

/// The subject name of the dev CA that `deploy/dev/services.sh` makes for MariaDB.
pub const MARIADB_DEV_CA_NAME: &str = "capstan-dev-mariadb-ca";

/// The CA file that signs `db`'s server certificate (`CAPSTAN_<SERVER>_CA_FILE`, printed by
/// `services.sh env`; else where `services.sh` keeps it), or `None` after skipping (a failure
/// under CI).
pub fn ca_file(db: &DbEnv) -> Option<std::path::PathBuf> {
    let var = format!("CAPSTAN_{}_CA_FILE", db.name.to_uppercase());
    let path = match std::env::var_os(&var) {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let cache =
                std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/capstan");
            match db.name {
                "mysql" => cache.join("mysql-sid-chroot/var/lib/capstan-mysql/ca.pem"),
                _ => cache.join("mariadb-data/capstan-dev-ca.pem"),
            }
        }
    };
    if path.is_file() {
        Some(path)
    } else {
        capstan_tests::skip_or_fail(&format!(
            "{}: no CA file at {} (set {var}, or run `deploy/dev/services.sh up`)",
            db.name,
            path.display()
        ))
    }
}

/// The PEM of a fresh self-signed CA named `name`: the same name as a real CA, another key.
pub fn foreign_ca_pem(name: &str) -> String {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    params.self_signed(&key).unwrap().pem()
}

/// Rolls back the XA prepares an earlier failed run left on the server (their XID starts with
/// `prefix`): a pending prepare would halt every `xa: refuse` source of later tests.
pub async fn rollback_xa_leftovers(admin: &mut mysql_async::Conn, prefix: &str) {
    use mysql_async::prelude::*;
    let rows: Vec<mysql_async::Row> = admin.query("XA RECOVER").await.unwrap();
    for row in rows {
        let data: Vec<u8> = row.get(3).unwrap();
        let data = String::from_utf8_lossy(&data).into_owned();
        if data.starts_with(prefix) {
            admin
                .query_drop(format!("XA ROLLBACK '{data}'"))
                .await
                .unwrap();
        }
    }
}

/// MariaDB's `@@global.gtid_binlog_pos`.
pub async fn mariadb_binlog_pos(
    conn: &mut mysql_async::Conn,
) -> capstan_core::position::MariadbGtidPosition {
    use mysql_async::prelude::*;
    let text: String = conn
        .query_first("SELECT @@global.gtid_binlog_pos")
        .await
        .unwrap()
        .unwrap();
    text.parse().unwrap()
}
