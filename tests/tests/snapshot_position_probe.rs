#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Live probes (ADR-0006): which binlog position G describes a snapshot chunk's read view, per
//! server flavour, under many concurrent committers.
//!
//! A reader session captures G with the method under test and reads, inside its read view,
//! the highest `seq` each writer has visible in table `t`. Writers commit autocommit inserts
//! (one GTID each) into `t` and, interleaved, into `u` (so the binlog also moves for other
//! tables), and record the GTID of every `t` insert right after its commit. Because a writer
//! commits `seq = k` before it starts `k + 1`, what a view sees of one writer is a prefix, so
//! its max `seq` says exactly which of the writer's transactions are visible. After the run,
//! each observation is checked against the recorded GTIDs:
//!
//! - **lower-bound violation**: a `t` transaction whose GTID is in G but that the view does not
//!   see. A snapshot that trusts such a G would suppress the streamed change while its chunk
//!   holds the stale row: silent corruption. Must be zero for the method capstan uses.
//! - **upper-bound extra**: a `t` transaction the view sees whose GTID is not in G. Harmless
//!   (the stream re-delivers a row the chunk already had; upsert-by-key converges); counted.
//!
//! Every test runs the naive methods in the same run, under the same load, and asserts that
//! they DO show violations, so a green result cannot come from a checker that sees nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_tests::{mariadb, mysql, unique_name, DbEnv};
use mysql_async::prelude::*;
use mysql_async::Conn;

/// The probes load the machine; never run two at once.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Concurrent writers and seconds of load; `SNAPSHOT_PROBE_WRITERS` / `SNAPSHOT_PROBE_SECS`
/// override them for a deeper manual run.
fn writers_and_secs() -> (u32, u64) {
    let var = |k: &str, default| {
        std::env::var(k)
            .ok()
            .map(|v| v.parse().expect("a number"))
            .unwrap_or(default)
    };
    (
        var("SNAPSHOT_PROBE_WRITERS", 12) as u32,
        var("SNAPSHOT_PROBE_SECS", 30),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    Mysql,
    Mariadb,
}

impl Flavor {
    /// The server's "executed so far" position, read live.
    fn live_position_sql(self) -> &'static str {
        match self {
            Flavor::Mysql => "SELECT @@global.gtid_executed",
            Flavor::Mariadb => "SELECT @@global.gtid_binlog_pos",
        }
    }

    /// The GTID of this session's last committed transaction.
    fn own_gtid_sql(self) -> &'static str {
        match self {
            // MySQL has no @@last_gtid; the transaction event of this thread keeps the GTID
            // after the commit (the SELECT on performance_schema is not a transaction event).
            Flavor::Mysql => {
                "SELECT GTID FROM performance_schema.events_transactions_current \
                 WHERE THREAD_ID = PS_CURRENT_THREAD_ID()"
            }
            Flavor::Mariadb => "SELECT @@last_gtid",
        }
    }

    /// One GTID as (set key, number): MySQL `uuid:n` → (uuid, n); MariaDB `d-s-n` → (d, n).
    fn parse_gtid(self, text: &str) -> (String, u64) {
        match self {
            Flavor::Mysql => {
                let (uuid, n) = text
                    .trim()
                    .split_once(':')
                    .unwrap_or_else(|| panic!("not a MySQL GTID: {text:?}"));
                assert!(!n.contains(':'), "tagged GTID from a writer: {text:?}");
                (uuid.to_ascii_lowercase(), n.parse().expect("gno"))
            }
            Flavor::Mariadb => {
                let parts: Vec<&str> = text.trim().split('-').collect();
                assert_eq!(parts.len(), 3, "not a MariaDB GTID: {text:?}");
                (parts[0].to_owned(), parts[2].parse().expect("seq_no"))
            }
        }
    }

    fn parse_set(self, text: &str) -> GtidSet {
        match self {
            Flavor::Mysql => GtidSet::parse_mysql(text),
            Flavor::Mariadb => GtidSet::parse_mariadb(text),
        }
    }
}

/// A GTID set reduced to what membership needs: per key, closed intervals of numbers.
/// MySQL: key = source uuid (`uuid:tag` for tagged GTIDs). MariaDB: key = domain, and a
/// binlog position `d-s-n` contains every GTID of domain `d` up to `n`.
#[derive(Clone, Debug, Default)]
struct GtidSet(HashMap<String, Vec<(u64, u64)>>);

impl GtidSet {
    fn parse_mysql(text: &str) -> Self {
        let mut set = GtidSet::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let mut parts = entry.split(':');
            let uuid = parts.next().unwrap().to_ascii_lowercase();
            let mut key = uuid.clone();
            for part in parts {
                if part.starts_with(|c: char| c.is_ascii_digit()) {
                    let (lo, hi) = match part.split_once('-') {
                        Some((lo, hi)) => (lo.parse().unwrap(), hi.parse().unwrap()),
                        None => {
                            let n = part.parse().unwrap();
                            (n, n)
                        }
                    };
                    set.0.entry(key.clone()).or_default().push((lo, hi));
                } else {
                    key = format!("{uuid}:{}", part.to_ascii_lowercase());
                }
            }
        }
        set
    }

    fn parse_mariadb(text: &str) -> Self {
        let mut set = GtidSet::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (domain, n) = Flavor::Mariadb.parse_gtid(entry);
            set.0.entry(domain).or_default().push((0, n));
        }
        set
    }

    /// How many of `sorted` (ascending numbers under `key`) are in the set.
    fn count_members(&self, key: &str, sorted: &[u64]) -> usize {
        let Some(intervals) = self.0.get(key) else {
            return 0;
        };
        intervals
            .iter()
            .map(|&(lo, hi)| {
                sorted.partition_point(|&n| n <= hi) - sorted.partition_point(|&n| n < lo)
            })
            .sum()
    }
}

/// How a reader obtains G for its read view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Method {
    /// `START TRANSACTION WITH CONSISTENT SNAPSHOT`, then the live position.
    NaiveInside,
    /// The live position, then `START TRANSACTION WITH CONSISTENT SNAPSHOT`.
    NaiveBefore,
    /// `LOCK TABLES t READ`, live position, `START TRANSACTION WITH CONSISTENT SNAPSHOT`,
    /// `UNLOCK TABLES` (ADR-0005).
    LockTables,
    /// MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT`, `binlog_snapshot_file/position`,
    /// `BINLOG_GTID_POS(file, position)` — no lock.
    BinlogSnapshot,
    /// MariaDB, capstan's chunk order: `START TRANSACTION WITH CONSISTENT SNAPSHOT`, the rows,
    /// then `BINLOG_GTID_POS` of `information_schema.SESSION_STATUS`' `binlog_snapshot_*` —
    /// the view's binlog point read after other sessions went on committing.
    BinlogSnapshotAfterRead,
}

struct Observation {
    method: Method,
    g: GtidSet,
    /// Per writer, the highest `seq` visible in the view (0: none).
    visible: Vec<u64>,
}

#[derive(Default)]
struct Timings {
    /// LOCK TABLES issued → lock granted (what the reader waited for in-flight writers).
    lock_wait: Vec<Duration>,
    /// Lock granted → START TRANSACTION returned (the lock is released by then).
    lock_hold: Vec<Duration>,
    /// SHOW STATUS + BINLOG_GTID_POS (MariaDB lock-free path).
    binlog_gtid_pos: Vec<Duration>,
    /// The snapshot's offset in its binlog file (BINLOG_GTID_POS scans the file up to it).
    binlog_offset: Vec<u64>,
}

async fn read_view(conn: &mut Conn, schema: &str, writers: u32) -> Vec<u64> {
    let rows: Vec<(u32, u64)> = conn
        .query(format!(
            "SELECT writer, MAX(seq) FROM `{schema}`.t GROUP BY writer"
        ))
        .await
        .unwrap();
    let mut visible = vec![0; writers as usize];
    for (w, seq) in rows {
        visible[w as usize] = seq;
    }
    visible
}

async fn live_position(conn: &mut Conn, flavor: Flavor) -> GtidSet {
    let text: String = conn
        .query_first(flavor.live_position_sql())
        .await
        .unwrap()
        .unwrap();
    flavor.parse_set(&text)
}

const START_SNAPSHOT: &str = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

async fn observe(
    conn: &mut Conn,
    flavor: Flavor,
    schema: &str,
    method: Method,
    writers: u32,
    timings: &mut Timings,
) -> Observation {
    let g = match method {
        Method::NaiveInside => {
            conn.query_drop(START_SNAPSHOT).await.unwrap();
            live_position(conn, flavor).await
        }
        Method::NaiveBefore => {
            let g = live_position(conn, flavor).await;
            conn.query_drop(START_SNAPSHOT).await.unwrap();
            g
        }
        Method::LockTables => {
            let asked = Instant::now();
            conn.query_drop(format!("LOCK TABLES `{schema}`.t READ"))
                .await
                .unwrap();
            let granted = Instant::now();
            let g = live_position(conn, flavor).await;
            // START TRANSACTION releases the table lock implicitly, before the view exists.
            conn.query_drop(START_SNAPSHOT).await.unwrap();
            timings.lock_wait.push(granted - asked);
            timings.lock_hold.push(granted.elapsed());
            conn.query_drop("UNLOCK TABLES").await.unwrap();
            g
        }
        Method::BinlogSnapshotAfterRead => {
            // G is read after the rows, below
            conn.query_drop(START_SNAPSHOT).await.unwrap();
            GtidSet::default()
        }
        Method::BinlogSnapshot => {
            assert_eq!(flavor, Flavor::Mariadb);
            conn.query_drop(START_SNAPSHOT).await.unwrap();
            let started = Instant::now();
            let status: Vec<(String, String)> = conn
                .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
                .await
                .unwrap();
            let get = |name: &str| {
                status
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| panic!("{name} missing from {status:?}"))
            };
            let file = get("Binlog_snapshot_file");
            let position: u64 = get("Binlog_snapshot_position").parse().unwrap();
            let pos: Option<String> = conn
                .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file.clone(), position))
                .await
                .unwrap()
                .unwrap();
            timings.binlog_gtid_pos.push(started.elapsed());
            timings.binlog_offset.push(position);
            let pos = pos.unwrap_or_else(|| {
                panic!("BINLOG_GTID_POS({file}, {position}) is NULL (file rotated away?)")
            });
            flavor.parse_set(&pos)
        }
    };
    let visible = read_view(conn, schema, writers).await;
    let g = match method {
        Method::BinlogSnapshotAfterRead => {
            let pos: Option<String> = conn
                .query_first(
                    "SELECT BINLOG_GTID_POS(\
                     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_FILE', VARIABLE_VALUE, NULL)), \
                     MAX(IF(VARIABLE_NAME = 'BINLOG_SNAPSHOT_POSITION', VARIABLE_VALUE, NULL))) \
                     FROM information_schema.SESSION_STATUS \
                     WHERE VARIABLE_NAME IN ('BINLOG_SNAPSHOT_FILE', 'BINLOG_SNAPSHOT_POSITION')",
                )
                .await
                .unwrap()
                .unwrap();
            flavor.parse_set(&pos.expect("BINLOG_GTID_POS of the view's binlog point"))
        }
        _ => g,
    };
    conn.query_drop("COMMIT").await.unwrap();
    Observation { method, g, visible }
}

/// What one writer committed to `t`: the GTID number of each `seq` (index `seq - 1`).
struct WriterLog {
    key: String,
    gnos: Vec<u64>,
}

async fn writer(
    db: DbEnv,
    flavor: Flavor,
    schema: String,
    w: u32,
    stop: Arc<AtomicBool>,
) -> WriterLog {
    let mut conn = db.admin_conn().await;
    let mut log = WriterLog {
        key: String::new(),
        gnos: Vec::new(),
    };
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        conn.query_drop(format!(
            "INSERT INTO `{schema}`.t (writer, seq) VALUES ({w}, {seq})"
        ))
        .await
        .unwrap();
        let text: String = conn
            .query_first(flavor.own_gtid_sql())
            .await
            .unwrap()
            .unwrap_or_default();
        let (key, n) = flavor.parse_gtid(&text);
        if log.gnos.is_empty() {
            log.key = key;
        } else {
            assert_eq!(log.key, key, "writer {w} changed GTID source");
            assert!(
                n > *log.gnos.last().unwrap(),
                "writer {w}: GTIDs not rising"
            );
        }
        log.gnos.push(n);
        // Transactions on another table between the t inserts: the binlog, the group
        // commits and the position move for tables the lock does not cover.
        if (seq + u64::from(w)).is_multiple_of(2) {
            conn.query_drop(format!("INSERT INTO `{schema}`.u (writer) VALUES ({w})"))
                .await
                .unwrap();
        }
    }
    log
}

#[derive(Default, Debug)]
struct Tally {
    iterations: usize,
    lower_iterations: usize,
    lower_txns: usize,
    lower_max: usize,
    extra_iterations: usize,
    extra_txns: usize,
    extra_max: usize,
}

fn tally(observations: &[Observation], logs: &[WriterLog]) -> HashMap<Method, Tally> {
    let mut out: HashMap<Method, Tally> = HashMap::new();
    for obs in observations {
        let (mut lower, mut extra) = (0, 0);
        for (log, &v) in logs.iter().zip(&obs.visible) {
            let v = v as usize;
            assert!(v <= log.gnos.len(), "view shows a seq no writer committed");
            let seen_in_g = obs.g.count_members(&log.key, &log.gnos[..v]);
            lower += obs.g.count_members(&log.key, &log.gnos[v..]);
            extra += v - seen_in_g;
        }
        let t = out.entry(obs.method).or_default();
        t.iterations += 1;
        if lower > 0 {
            t.lower_iterations += 1;
            t.lower_txns += lower;
            t.lower_max = t.lower_max.max(lower);
        }
        if extra > 0 {
            t.extra_iterations += 1;
            t.extra_txns += extra;
            t.extra_max = t.extra_max.max(extra);
        }
    }
    out
}

fn percentiles(name: &str, mut d: Vec<Duration>) {
    if d.is_empty() {
        return;
    }
    d.sort();
    let at = |q: f64| d[((d.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "  {name}: n={} p50={:?} p99={:?} max={:?}",
        d.len(),
        at(0.50),
        at(0.99),
        d[d.len() - 1]
    );
}

struct Run {
    tallies: HashMap<Method, Tally>,
    t_transactions: usize,
}

/// Observations per method the checks ask for (`iterations > 1000`).
const MIN_ROUNDS: usize = 1000;

/// Runs the writers while one reader cycles through `methods` (one observation each per
/// round, so every method sees the same load), then checks every observation against the
/// writers' GTID logs. With `rotate`, an admin session rotates the binlog at that interval
/// (MariaDB: `BINLOG_GTID_POS` scans the file from its start, see ADR-0006; rotation keeps
/// files small enough for thousands of observations, and covers a snapshot taken just
/// before a rotation).
async fn probe(db: &DbEnv, flavor: Flavor, methods: &[Method], rotate: Option<Duration>) -> Run {
    let (n_writers, secs) = writers_and_secs();
    let schema = unique_name("snap_pos");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; \
             CREATE TABLE `{schema}`.t (id INT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, \
               seq INT NOT NULL, KEY ws (writer, seq)) ENGINE=InnoDB; \
             CREATE TABLE `{schema}`.u (id INT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL) \
               ENGINE=InnoDB"
        ))
        .await
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..n_writers)
        .map(|w| tokio::spawn(writer(db.clone(), flavor, schema.clone(), w, stop.clone())))
        .collect();
    let rotator = rotate.map(|every| {
        let (db, stop) = (db.clone(), stop.clone());
        tokio::spawn(async move {
            let mut admin = db.admin_conn().await;
            let mut rotations = 0u32;
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(every).await;
                admin.query_drop("FLUSH BINARY LOGS").await.unwrap();
                rotations += 1;
            }
            rotations
        })
    });

    // The reader is the least-privilege capstan account (SELECT, LOCK TABLES, binlog monitor).
    let mut reader = db.capstan_conn().await;
    reader
        .query_drop(
            "SET SESSION lock_wait_timeout = 10; \
             SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        )
        .await
        .unwrap();
    // Let every writer get going before observing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut timings = Timings::default();
    let mut observations = Vec::new();
    // the planned duration, and then on until every method has more than MIN_ROUNDS
    // observations (a loaded machine observes fewer per second), within three times it
    let deadline = Instant::now() + Duration::from_secs(secs);
    let hard_deadline = Instant::now() + Duration::from_secs(3 * secs);
    let mut rounds = 0;
    while Instant::now() < deadline || (rounds <= MIN_ROUNDS && Instant::now() < hard_deadline) {
        rounds += 1;
        for &m in methods {
            let obs = observe(&mut reader, flavor, &schema, m, n_writers, &mut timings).await;
            observations.push(obs);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut logs = Vec::new();
    for w in writers {
        logs.push(w.await.unwrap());
    }
    let rotations = match rotator {
        Some(r) => r.await.unwrap(),
        None => 0,
    };

    // Sanity: per writer, the committed rows are exactly seq 1..=n (views see prefixes), and
    // every recorded GTID is a distinct transaction.
    let counts: Vec<(u32, u64, u64)> = admin
        .query(format!(
            "SELECT writer, COUNT(*), MAX(seq) FROM `{schema}`.t GROUP BY writer ORDER BY writer"
        ))
        .await
        .unwrap();
    assert_eq!(counts.len(), n_writers as usize);
    for (w, count, max) in counts {
        assert_eq!(count, max, "writer {w} has holes");
        assert_eq!(count as usize, logs[w as usize].gnos.len());
    }
    let t_transactions: usize = logs.iter().map(|l| l.gnos.len()).sum();
    let distinct: std::collections::HashSet<(&str, u64)> = logs
        .iter()
        .flat_map(|l| l.gnos.iter().map(|&n| (l.key.as_str(), n)))
        .collect();
    assert_eq!(
        distinct.len(),
        t_transactions,
        "two writers recorded one GTID"
    );

    let tallies = tally(&observations, &logs);
    eprintln!(
        "{flavor:?}: {n_writers} writers, {secs} s, {t_transactions} t-transactions \
         (plus about half as many on u), {} observations, {rotations} binlog rotations",
        observations.len()
    );
    for m in methods {
        eprintln!("  {m:?}: {:?}", tallies[m]);
    }
    percentiles("lock wait (LOCK TABLES → granted)", timings.lock_wait);
    percentiles(
        "lock hold (granted → START TRANSACTION returned)",
        timings.lock_hold,
    );
    percentiles(
        "SHOW STATUS binlog_snapshot_% + BINLOG_GTID_POS",
        timings.binlog_gtid_pos,
    );
    if let Some(max) = timings.binlog_offset.iter().max() {
        let mut offsets = timings.binlog_offset.clone();
        offsets.sort_unstable();
        eprintln!(
            "  snapshot offset into its binlog file: p50={} B max={max} B",
            offsets[offsets.len() / 2]
        );
    }
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
    Run {
        tallies,
        t_transactions,
    }
}

/// MySQL: G read under `LOCK TABLES t READ` (then the view is opened and the lock dropped) is
/// a lower bound for the view — and the lock is what makes it one: without it, G read just
/// after (or just before) opening the view names `t` transactions the view does not see.
#[tokio::test]
async fn mysql_lock_tables_position_is_a_lower_bound_of_the_view() {
    let Some(db) = mysql() else { return };
    let _serial = SERIAL.lock().await;
    let run = probe(
        &db,
        Flavor::Mysql,
        &[Method::NaiveInside, Method::NaiveBefore, Method::LockTables],
        None,
    )
    .await;
    assert!(
        run.t_transactions > 1000,
        "too little load to prove anything"
    );
    let t = &run.tallies;
    // Red capability: the checker does see the naive method's missing transactions. The
    // other naive order (G, then the view) is printed but not asserted: on 9.7.4 it showed
    // no lower-bound violation in ~7000 observations (ADR-0006); only extras.
    assert!(
        t[&Method::NaiveInside].lower_iterations > 0,
        "naive (snapshot, then @@gtid_executed) showed no violation: the probe is blind"
    );
    // The guarded property.
    assert_eq!(
        t[&Method::LockTables].lower_txns,
        0,
        "LOCK TABLES path: a t transaction in G is missing from the view"
    );
    assert!(t[&Method::LockTables].iterations > 1000);
}

/// Sets MariaDB's group-commit wait (a global setting: other sessions on the shared dev server
/// see it for the probe's 30 s) for the duration of `body`, restoring it afterwards
/// (even when `body` panics).
async fn with_commit_wait<F>(db: &DbEnv, count: u32, usec: u32, body: F) -> Run
where
    F: std::future::Future<Output = Run> + Send + 'static,
{
    let mut admin = db.admin_conn().await;
    let (old_count, old_usec): (u64, u64) = admin
        .query_first("SELECT @@global.binlog_commit_wait_count, @@global.binlog_commit_wait_usec")
        .await
        .unwrap()
        .unwrap();
    let status = |rows: Vec<(String, String)>| -> HashMap<String, u64> {
        rows.into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.parse().unwrap_or(0)))
            .collect()
    };
    let before = status(
        admin
            .query("SHOW GLOBAL STATUS LIKE 'binlog_%commit%'")
            .await
            .unwrap(),
    );
    admin
        .query_drop(format!(
            "SET GLOBAL binlog_commit_wait_count = {count}, \
             GLOBAL binlog_commit_wait_usec = {usec}"
        ))
        .await
        .unwrap();
    let result = tokio::spawn(body).await;
    admin
        .query_drop(format!(
            "SET GLOBAL binlog_commit_wait_count = {old_count}, \
             GLOBAL binlog_commit_wait_usec = {old_usec}"
        ))
        .await
        .unwrap();
    let after = status(
        admin
            .query("SHOW GLOBAL STATUS LIKE 'binlog_%commit%'")
            .await
            .unwrap(),
    );
    let delta = |k: &str| after.get(k).unwrap_or(&0) - before.get(k).unwrap_or(&0);
    let (commits, groups) = (delta("binlog_commits"), delta("binlog_group_commits"));
    eprintln!(
        "  group commit (binlog_commit_wait_count={count}, usec={usec}): {commits} commits in \
         {groups} groups ({:.2} per group)",
        commits as f64 / groups.max(1) as f64
    );
    match result {
        Ok(run) => run,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// MariaDB: inside `START TRANSACTION WITH CONSISTENT SNAPSHOT`, `binlog_snapshot_file` /
/// `binlog_snapshot_position` is the binlog point of the read view, and `BINLOG_GTID_POS` of
/// it is an exact G — no transaction of `t` in G is missing from the view, none outside G is
/// in it — with no lock, under group commit. `@@gtid_binlog_pos` read in or before the
/// transaction is not (both red-capability checks run in the same load); the lock path is
/// measured for comparison.
#[tokio::test]
async fn mariadb_binlog_snapshot_position_is_exact_for_the_view() {
    let Some(db) = mariadb() else { return };
    let _serial = SERIAL.lock().await;
    let probe_db = db.clone();
    // Group commit: wait up to 2 ms for 4 commits per group (`SNAPSHOT_PROBE_COMMIT_WAIT=0`
    // for the server's default, no wait).
    let wait_count = std::env::var("SNAPSHOT_PROBE_COMMIT_WAIT")
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(4);
    let run = with_commit_wait(&db, wait_count, 2000, async move {
        probe(
            &probe_db,
            Flavor::Mariadb,
            &[
                Method::NaiveInside,
                Method::NaiveBefore,
                Method::BinlogSnapshot,
                Method::BinlogSnapshotAfterRead,
                Method::LockTables,
            ],
            Some(Duration::from_secs(2)),
        )
        .await
    })
    .await;
    assert!(
        run.t_transactions > 1000,
        "too little load to prove anything"
    );
    let t = &run.tallies;
    // Red capability, both directions: the checker sees missing transactions and extras.
    assert!(
        t[&Method::NaiveInside].lower_iterations > 0,
        "naive (snapshot, then @@gtid_binlog_pos) showed no violation: the probe is blind"
    );
    assert!(
        t[&Method::NaiveBefore].extra_iterations > 0,
        "naive (@@gtid_binlog_pos, then snapshot) showed no extra: the probe is blind"
    );
    // The guarded property: exact, both bounds.
    let exact = &t[&Method::BinlogSnapshot];
    assert!(exact.iterations > 1000);
    assert_eq!(
        exact.lower_txns, 0,
        "binlog_snapshot_* path: a t transaction in G is missing from the view"
    );
    assert_eq!(
        exact.extra_txns, 0,
        "binlog_snapshot_* path: the view holds a t transaction beyond G"
    );
    // capstan's order: the view's binlog point read after the rows is the same exact G
    let after = &t[&Method::BinlogSnapshotAfterRead];
    assert!(after.iterations > 1000);
    assert_eq!(
        (after.lower_txns, after.extra_txns),
        (0, 0),
        "binlog_snapshot_* read after the rows: G and the view disagree"
    );
    assert_eq!(
        t[&Method::LockTables].lower_txns,
        0,
        "LOCK TABLES path on MariaDB: a t transaction in G is missing from the view"
    );
}
