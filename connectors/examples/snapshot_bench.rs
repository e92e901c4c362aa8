//! Initial snapshot benchmark (issue 7): rows/s of capstan's `SnapshotReader` over a whole
//! table, side by side with a raw `SELECT * … ORDER BY id` scan of the same table (the server's
//! send rate plus a minimal client: the limit) and with keyset pages of the same size read by
//! plain mysql_async; the per-chunk lock hold on MySQL and the per-chunk position capture cost
//! on MariaDB.
//!
//! ```text
//! eval "$(deploy/dev/services.sh env)"
//! cargo build --release -p capstan-connectors --example snapshot_bench
//! $CARGO_TARGET_DIR/release/examples/snapshot_bench --rows 1000000 --server both --rounds 9
//! ```
//!
//! Per server: the table `<schema>.t` (10 columns, `BIGINT` primary key; the column set of
//! `source_bench`) is created and loaded with `--rows` rows unless it already holds exactly
//! that many (the schema, `capstan_snapshot_bench` by default, is kept for the next run). Then
//! `--rounds` rounds, each reading the whole table three ways, one after the other, so all
//! three see the same machine load:
//!
//! 1. **raw scan**: `SELECT * FROM t ORDER BY id` as one prepared statement (binary protocol),
//!    streamed row by row as `mysql_async::Row`s, every value touched;
//! 2. **keyset**: `SELECT * FROM t WHERE id > ? ORDER BY id LIMIT <--keyset-page>` pages,
//!    prepared once, plain mysql_async, every value touched;
//! 3. **capstan**: `SnapshotReader::read_chunk` from the start to the last chunk (the position
//!    capture of every chunk, rows decoded into capstan `Row`s, the next cursor by
//!    `KeyShape::key_of`), each chunk sized as a pipeline sizes it: by `ChunkSizer` with
//!    `--chunk-size auto` (the default, as a pipeline without `chunk_size`), or fixed with
//!    `--chunk-size N`; and, as a pipeline reads them, on MariaDB each chunk after the first
//!    read ahead (`ChunkPrefetch`, a second connection opened inside the timed loop) while
//!    the one before is consumed (`--no-read-ahead`: each read when asked for; MySQL's lock
//!    capture never reads ahead); `open` and `describe` are outside the timed loop. With
//!    `--parallel N` (default 1, as a pipeline's `snapshot.parallel_reads`) the chunks are
//!    read in rounds of N at once, each on its own connection (`ParallelReads`: consecutive
//!    key ranges from `KeyRanges`, one open read after them, taken in key order), as the
//!    pipeline's driver reads them while its stream has no backlog.
//!
//! The rows/s figures are medians over the rounds. Every reader connects as the capstan account
//! over TLS without peer verification, with the reader's session settings (`time_zone`,
//! `character_set_results = NULL`, REPEATABLE READ).
//!
//! The per-chunk fixed cost is probed with `--probe N` one-row chunks at the table's middle
//! (capstan `read_chunk(…, 1)` against a one-row keyset page). On MariaDB the position capture
//! (`START TRANSACTION WITH CONSISTENT SNAPSHOT` → `SHOW STATUS LIKE 'binlog_snapshot_%'` →
//! `BINLOG_GTID_POS`) is also timed statement by statement; `BINLOG_GTID_POS` reads the current
//! binlog file from its start (ADR-0006), so MariaDB is measured twice: first **as found** (the
//! probe and one capstan pass, cut off after `--as-found-secs`), then after `FLUSH BINARY LOGS`
//! (as the admin account) for the rounds. `--no-flush` skips the flush. No row values or
//! passwords are printed.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use capstan_connectors::mysql::snapshot::{
    ChunkPrefetch, KeyPart, KeyRanges, ParallelReads, PositionCapture, RangeRead, ReaderOptions,
    SnapshotReader, SnapshotTable, TranslationStats,
};
use capstan_connectors::mysql::{Password, SourceConfig, TlsConfig, TlsMode, ValidSourceConfig};
use capstan_core::change::{TableId, Value};
use capstan_core::position::Position;
use capstan_core::snapshot::ChunkSizer;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, SslOpts, Statement};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TABLE: &str = "t";

/// Rows per `INSERT … SELECT` statement of the load.
const LOAD_STEP: u64 = 65_536;

#[derive(Debug)]
struct Args {
    rows: u64,
    /// `None`: adaptive, as a pipeline without `chunk_size` reads.
    chunk_size: Option<u32>,
    servers: Vec<&'static str>,
    rounds: usize,
    schema: String,
    probe: usize,
    as_found_secs: f64,
    flush: bool,
    /// `--capstan-only`: the capstan pass alone in each round (for profiling).
    capstan_only: bool,
    /// Rows per keyset page.
    keyset_page: u32,
    /// `--no-read-ahead`: every chunk read when asked for (no second connection).
    read_ahead: bool,
    /// `--binlog-mb N`: MariaDB, grow the current binlog file to at least N MB (1 MB blob
    /// rows into `<schema>.binlog_filler`) before measuring as found.
    binlog_mb: u64,
    /// `--no-walk`: MariaDB, `BINLOG_GTID_POS` for every chunk (the method before the walk).
    walk_binlog: bool,
    /// `--parallel N`: chunk reads at once, as a pipeline's `snapshot.parallel_reads` (1: one
    /// at a time, with the read ahead).
    parallel: usize,
}

fn usage() -> &'static str {
    "usage: snapshot_bench [--rows N (1000000)] [--chunk-size N|auto (auto)] [--keyset-page N (4096)] [--no-read-ahead] \
     [--server mysql|mariadb|both (both)] [--rounds N (3)] [--schema NAME (capstan_snapshot_bench)] \
     [--probe N (200)] [--as-found-secs S (60)] [--no-flush] [--capstan-only] \
     [--binlog-mb N (0)] [--no-walk] [--parallel N (1)]"
}

fn parse_args() -> Result<Args, BoxError> {
    let mut args = Args {
        rows: 1_000_000,
        chunk_size: None,
        keyset_page: 4096,
        read_ahead: true,
        servers: vec!["mysql", "mariadb"],
        rounds: 3,
        schema: "capstan_snapshot_bench".to_string(),
        probe: 200,
        as_found_secs: 60.0,
        flush: true,
        capstan_only: false,
        binlog_mb: 0,
        walk_binlog: true,
        parallel: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{a} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--rows" => args.rows = value()?.parse()?,
            "--chunk-size" => {
                args.chunk_size = match value()?.as_str() {
                    "auto" => None,
                    n => Some(n.parse()?),
                }
            }
            "--keyset-page" => args.keyset_page = value()?.parse()?,
            "--server" => {
                args.servers = match value()?.as_str() {
                    "mysql" => vec!["mysql"],
                    "mariadb" => vec!["mariadb"],
                    "both" => vec!["mysql", "mariadb"],
                    other => return Err(format!("unknown server {other}\n{}", usage()).into()),
                }
            }
            "--rounds" => args.rounds = value()?.parse()?,
            "--schema" => args.schema = value()?,
            "--probe" => args.probe = value()?.parse()?,
            "--as-found-secs" => args.as_found_secs = value()?.parse()?,
            "--no-flush" => args.flush = false,
            "--capstan-only" => args.capstan_only = true,
            "--no-read-ahead" => args.read_ahead = false,
            "--binlog-mb" => args.binlog_mb = value()?.parse()?,
            "--no-walk" => args.walk_binlog = false,
            "--parallel" => args.parallel = value()?.parse()?,
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{}", usage()).into()),
        }
    }
    if args.rows == 0
        || args.chunk_size == Some(0)
        || args.keyset_page == 0
        || args.rounds == 0
        || args.parallel == 0
    {
        return Err(
            "--rows, --chunk-size, --keyset-page, --rounds and --parallel must be > 0".into(),
        );
    }
    if args.schema.is_empty()
        || !args
            .schema
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err("--schema must be a plain identifier".into());
    }
    Ok(args)
}

#[derive(Clone, Debug)]
struct Server {
    name: &'static str,
    host: String,
    port: u16,
    user: String,
    password: String,
    admin_user: String,
    admin_password: String,
}

fn server_from_env(name: &'static str) -> Result<Server, BoxError> {
    let prefix = match name {
        "mysql" => "CAPSTAN_MYSQL",
        _ => "CAPSTAN_MARIADB",
    };
    let var = |k: &str| {
        std::env::var(format!("{prefix}_{k}")).map_err(|_| {
            format!("{prefix}_{k} is not set; run `eval \"$(deploy/dev/services.sh env)\"`")
        })
    };
    Ok(Server {
        name,
        host: var("HOST")?,
        port: var("PORT")?.parse()?,
        user: var("USER")?,
        password: var("PASSWORD")?,
        admin_user: var("ADMIN_USER")?,
        admin_password: var("ADMIN_PASSWORD")?,
    })
}

fn opts(s: &Server, user: &str, password: &str) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(s.host.clone())
        .tcp_port(s.port)
        .user(Some(user.to_string()))
        .pass(Some(password.to_string()))
        .ssl_opts(Some(
            SslOpts::default().with_danger_accept_invalid_certs(true),
        ))
        .prefer_socket(false)
}

async fn admin_conn(s: &Server) -> Result<Conn, BoxError> {
    Ok(Conn::new(opts(s, &s.admin_user, &s.admin_password)).await?)
}

/// A connection as the capstan account with the snapshot reader's session settings.
async fn reader_conn(s: &Server) -> Result<Conn, BoxError> {
    let mut conn = Conn::new(opts(s, &s.user, &s.password).stmt_cache_size(64)).await?;
    for sql in [
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "SET SESSION time_zone = '+00:00'",
        "SET SESSION character_set_results = NULL",
    ] {
        conn.query_drop(sql).await?;
    }
    Ok(conn)
}

fn source_config(s: &Server) -> Result<ValidSourceConfig, BoxError> {
    let mut c = SourceConfig::new(s.host.clone(), s.port, s.user.clone());
    c.password = Password::new(s.password.clone());
    // required by validation (the stream's replica id); the snapshot reader does not use it
    c.server_id = Some(3_500_000 + std::process::id() % 100_000);
    c.tls = Some(TlsConfig {
        mode: Some(TlsMode::VerifyNone),
        ca_file: None,
    });
    Ok(c.validate()?)
}

const CREATE_TABLE: &str = "CREATE TABLE t (
    id BIGINT NOT NULL PRIMARY KEY,
    account INT NOT NULL,
    amount DECIMAL(12,2) NOT NULL,
    ratio DOUBLE,
    name VARCHAR(64) NOT NULL,
    note TEXT,
    created DATETIME(6) NOT NULL,
    day DATE,
    status ENUM('new','paid','void') NOT NULL,
    attrs JSON
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

/// splitmix64: deterministic filler values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn push_row(sql: &mut String, rng: &mut Rng, id: u64) -> Result<(), std::fmt::Error> {
    let r = rng.next();
    let account = (r % 2_000_000) as i64 - 1_000_000;
    let cents = rng.next() % 100_000_000;
    let ratio = (rng.next() % 1_000_000) as f64 / 7919.0;
    let note_len = 20 + (r >> 40) as usize % 100;
    let note: String = (0..note_len)
        .map(|i| char::from(b'a' + ((r >> (i % 48)) % 26) as u8))
        .collect();
    let secs = 1_600_000_000 + rng.next() % 100_000_000;
    let micros = rng.next() % 1_000_000;
    let status = ["new", "paid", "void"][(r % 3) as usize];
    write!(
        sql,
        "({id},{account},{}.{:02},{ratio},'customer-{:08x}','{note}',\
         FROM_UNIXTIME({secs}.{micros:06}),DATE(FROM_UNIXTIME({secs})),'{status}',\
         JSON_OBJECT('k',{},'tags',JSON_ARRAY('a','b'),'ok',{}))",
        cents / 100,
        cents % 100,
        r & 0xffff_ffff,
        r % 1000,
        if r & 1 == 0 { "true" } else { "false" },
    )
}

/// Creates `schema.t` with `rows` rows unless it already has exactly that many.
async fn ensure_table(admin: &mut Conn, schema: &str, rows: u64) -> Result<(), BoxError> {
    admin
        .query_drop(format!(
            "CREATE DATABASE IF NOT EXISTS `{schema}` CHARACTER SET utf8mb4"
        ))
        .await?;
    admin.query_drop(format!("USE `{schema}`")).await?;
    let exists: Option<u64> = admin
        .exec_first(
            "SELECT COUNT(*) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (schema, TABLE),
        )
        .await?;
    if exists.unwrap_or(0) > 0 {
        let count: Option<u64> = admin.query_first("SELECT COUNT(*) FROM t").await?;
        let max: Option<Option<u64>> = admin.query_first("SELECT MAX(id) FROM t").await?;
        if count == Some(rows) && max.flatten() == Some(rows) {
            println!("  reusing {schema}.{TABLE} ({rows} rows)");
            return Ok(());
        }
        admin.query_drop("DROP TABLE t").await?;
    }
    admin.query_drop(CREATE_TABLE).await?;
    println!("  loading {rows} rows into {schema}.{TABLE} ...");
    let start = Instant::now();
    // 1024 distinct seed rows, then INSERT … SELECT doubling (ids id + n)
    let seed = rows.min(1024);
    let mut rng = Rng(0x5EED_CAFE);
    let mut sql = String::from("INSERT INTO t VALUES ");
    for id in 1..=seed {
        if id > 1 {
            sql.push(',');
        }
        push_row(&mut sql, &mut rng, id)?;
    }
    admin.query_drop(sql).await?;
    let mut n = seed;
    while n < rows {
        let copy = n.min(rows - n);
        let mut from = 1;
        while from <= copy {
            let to = (from + LOAD_STEP - 1).min(copy);
            admin
                .query_drop(format!(
                    "INSERT INTO t SELECT id + {n}, account, amount, ratio, name, note, \
                     created, day, status, attrs FROM t WHERE id BETWEEN {from} AND {to}"
                ))
                .await?;
            from = to + 1;
        }
        n += copy;
    }
    admin.query_drop("ANALYZE TABLE t").await?;
    println!("  loaded in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

/// Touches every value of a mysql_async row (so no reader skips the work of reading them).
fn touch_wire(row: &mysql_async::Row) -> u64 {
    let mut h = 0u64;
    for i in 0..row.len() {
        h = h.wrapping_add(match row.as_ref(i) {
            Some(mysql_async::Value::Bytes(b)) => {
                b.len() as u64 + u64::from(b.first().copied().unwrap_or(0))
            }
            Some(mysql_async::Value::Int(v)) => *v as u64,
            Some(mysql_async::Value::UInt(v)) => *v,
            Some(mysql_async::Value::Float(v)) => u64::from(v.to_bits()),
            Some(mysql_async::Value::Double(v)) => v.to_bits(),
            Some(mysql_async::Value::Date(y, mo, d, h, mi, s, us)) => {
                u64::from(*y)
                    + u64::from(*mo)
                    + u64::from(*d)
                    + u64::from(*h)
                    + u64::from(*mi)
                    + u64::from(*s)
                    + u64::from(*us)
            }
            Some(mysql_async::Value::Time(_, d, h, mi, s, us)) => {
                u64::from(*d) + u64::from(*h) + u64::from(*mi) + u64::from(*s) + u64::from(*us)
            }
            Some(mysql_async::Value::NULL) | None => 1,
        });
    }
    h
}

/// The same for a capstan row.
fn touch_value(v: &Value) -> u64 {
    match v {
        Value::Null => 1,
        Value::Int(i) => *i as u64,
        Value::UInt(u) => *u,
        Value::Decimal(s) | Value::Json(s) | Value::Enum(s) | Value::Set(s) => s.len() as u64,
        Value::Float(f) => u64::from(f.to_bits()),
        Value::Double(d) => d.to_bits(),
        Value::Text { bytes, .. } | Value::Bytes(bytes) => bytes.len() as u64,
        _ => 2,
    }
}

struct Measured {
    rows: u64,
    secs: f64,
    /// This process's CPU time (user + system, all threads) over the pass, in seconds.
    cpu: f64,
}

/// This process's CPU time so far (user + system, all threads), in seconds; 10 ms ticks.
fn process_cpu() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // the fields after the parenthesised command name; utime and stime are fields 14 and 15
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / 100.0
}

async fn run_raw(s: &Server, schema: &str) -> Result<Measured, BoxError> {
    let mut conn = reader_conn(s).await?;
    let stmt: Statement = conn
        .prep(format!("SELECT * FROM `{schema}`.`{TABLE}` ORDER BY id"))
        .await?;
    let cpu = process_cpu();
    let start = Instant::now();
    let mut result = conn.exec_iter(&stmt, ()).await?;
    let mut rows = 0u64;
    let mut check = 0u64;
    while let Some(row) = result.next().await? {
        rows += 1;
        check = check.wrapping_add(touch_wire(&row));
    }
    drop(result);
    let secs = start.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu;
    conn.disconnect().await?;
    std::hint::black_box(check);
    Ok(Measured { rows, secs, cpu })
}

async fn run_keyset(s: &Server, schema: &str, chunk_size: u32) -> Result<Measured, BoxError> {
    let mut conn = reader_conn(s).await?;
    let first: Statement = conn
        .prep(format!(
            "SELECT * FROM `{schema}`.`{TABLE}` ORDER BY id LIMIT ?"
        ))
        .await?;
    let next: Statement = conn
        .prep(format!(
            "SELECT * FROM `{schema}`.`{TABLE}` WHERE id > ? ORDER BY id LIMIT ?"
        ))
        .await?;
    let cpu = process_cpu();
    let start = Instant::now();
    let mut rows = 0u64;
    let mut check = 0u64;
    let mut after: Option<i64> = None;
    loop {
        let page: Vec<mysql_async::Row> = match after {
            None => conn.exec(&first, (chunk_size,)).await?,
            Some(k) => conn.exec(&next, (k, chunk_size)).await?,
        };
        for row in &page {
            check = check.wrapping_add(touch_wire(row));
        }
        rows += page.len() as u64;
        if page.len() < chunk_size as usize {
            break;
        }
        after = page.last().and_then(|r| r.get::<i64, _>(0));
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu;
    conn.disconnect().await?;
    std::hint::black_box(check);
    Ok(Measured { rows, secs, cpu })
}

/// One capstan pass: every chunk of the table, or until `limit` elapsed.
struct CapstanPass {
    measured: Measured,
    chunks: u64,
    /// The most rows a chunk asked for.
    largest: u32,
    /// Chunks read ahead and used.
    read_ahead: u64,
    lock_held: Vec<Duration>,
    chunk_times: Vec<Duration>,
    complete: bool,
}

fn reader_options(walk_binlog: bool) -> ReaderOptions {
    ReaderOptions {
        walk_binlog,
        ..ReaderOptions::default()
    }
}

async fn open_reader(
    s: &Server,
    schema: &str,
    walk_binlog: bool,
) -> Result<(SnapshotReader, SnapshotTable), BoxError> {
    let mut reader =
        SnapshotReader::open_with(&source_config(s)?, reader_options(walk_binlog)).await?;
    let table = reader.describe(&TableId::new(schema, TABLE)).await?;
    Ok((reader, table))
}

/// MariaDB: how a reader's chunk positions were translated (nothing on MySQL's lock path).
fn print_translations(who: &str, t: Option<TranslationStats>) {
    let Some(t) = t.filter(|t| t.by_server + t.walked + t.unchanged > 0) else {
        return;
    };
    println!(
        "    {who} positions: {} by BINLOG_GTID_POS, {} walked ({} events), {} unchanged, {} \
         fallbacks{}",
        t.by_server,
        t.walked,
        t.events_read,
        t.unchanged,
        t.fallbacks,
        t.last_fallback
            .map_or(String::new(), |c| format!(" (last: {c})"))
    );
}

/// Touches every value of `rows`.
fn touch_rows(rows: &[capstan_core::change::Row]) -> u64 {
    let mut check = 0u64;
    for row in rows {
        for v in row.values() {
            check = check.wrapping_add(touch_value(v));
        }
    }
    check
}

/// The capstan pass as a pipeline with `parallel_reads` > 1 reads: rounds of `parallel`
/// reads at once, consecutive key ranges ([`KeyRanges`], learned from the chunks read) with
/// one open read after them, taken in key order up to the first range cut short.
async fn run_capstan_rounds(
    s: &Server,
    schema: &str,
    chunk_size: Option<u32>,
    parallel: usize,
    walk_binlog: bool,
    limit: Option<Duration>,
) -> Result<CapstanPass, BoxError> {
    let (mut reader, table) = open_reader(s, schema, walk_binlog).await?;
    let config = source_config(s)?;
    let identity = reader.server_identity().await?;
    let mut pool = ParallelReads::with_options(reader_options(walk_binlog));
    let mut ranges = KeyRanges::new();
    let mut sizer = ChunkSizer::for_config(chunk_size);
    let (mut largest, mut rows, mut check, mut chunks) = (0u32, 0u64, 0u64, 0u64);
    let mut lock_held = Vec::new();
    let mut chunk_times = Vec::new();
    let mut after: Option<Vec<KeyPart>> = None;
    let cpu = process_cpu();
    let start = Instant::now();
    let complete = 'pass: loop {
        let asked = sizer.next_size();
        largest = largest.max(asked);
        let last = match &after {
            Some(_) => reader.last_key(&table).await?,
            None => None,
        };
        let bounds = match (&after, &last) {
            (Some(a), Some(last)) => ranges.bounds(a, asked, parallel, last),
            _ => Vec::new(),
        };
        let reads = RangeRead::consecutive(&table, after.clone(), bounds, asked);
        let t0 = Instant::now();
        let outcomes = pool.read_all(&mut reader, &config, &identity, &reads).await;
        chunk_times.push(t0.elapsed());
        for (read, outcome) in reads.iter().zip(outcomes) {
            let (chunk, elapsed) = outcome?;
            sizer.observe(asked, chunk.rows.len(), chunk.bytes, elapsed);
            chunks += 1;
            lock_held.extend(chunk.lock_held);
            if let (Some(first), Some(last)) = (chunk.rows.first(), chunk.rows.last()) {
                ranges.observe(
                    &table.key.key_of(first)?,
                    &table.key.key_of(last)?,
                    chunk.rows.len(),
                );
            }
            check = check.wrapping_add(touch_rows(&chunk.rows));
            rows += chunk.rows.len() as u64;
            if chunk.last {
                break 'pass true;
            }
            let whole = read.read_whole(&chunk);
            after = match chunk.covers_to {
                Some(bound) => Some(bound),
                None => match chunk.rows.last() {
                    Some(last) => Some(table.key.key_of(last)?),
                    None => after,
                },
            };
            if !whole {
                // the ranges after it are read again from its end
                break;
            }
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            break false;
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu;
    std::hint::black_box(check);
    print_translations("main reader", Some(reader.translation_stats()));
    Ok(CapstanPass {
        measured: Measured { rows, secs, cpu },
        chunks,
        largest,
        read_ahead: 0,
        lock_held,
        chunk_times,
        complete,
    })
}

async fn run_capstan(
    s: &Server,
    schema: &str,
    chunk_size: Option<u32>,
    read_ahead: bool,
    walk_binlog: bool,
    limit: Option<Duration>,
    parallel: usize,
) -> Result<CapstanPass, BoxError> {
    if parallel > 1 {
        return run_capstan_rounds(s, schema, chunk_size, parallel, walk_binlog, limit).await;
    }
    let (mut reader, table) = open_reader(s, schema, walk_binlog).await?;
    let config = source_config(s)?;
    let identity = reader.server_identity().await?;
    let mut ahead = ChunkPrefetch::with_options(reader_options(walk_binlog));
    let mut previous: Option<Position> = None;
    let mut sizer = ChunkSizer::for_config(chunk_size);
    let mut largest = 0u32;
    let cpu = process_cpu();
    let start = Instant::now();
    let mut rows = 0u64;
    let mut check = 0u64;
    let mut chunks = 0u64;
    let mut lock_held = Vec::new();
    let mut chunk_times = Vec::new();
    let mut after: Option<Vec<KeyPart>> = None;
    let complete = loop {
        let t0 = Instant::now();
        let asked = sizer.next_size();
        largest = largest.max(asked);
        // as a pipeline reads: the chunk read ahead if there is one (no stream moves here,
        // so it is never stale), else read now
        let taken = match &previous {
            Some(g) => ahead.take(&table.id, after.as_deref(), asked, g).await,
            None => None,
        };
        let (chunk, elapsed) = match taken {
            Some(read) => read,
            None => {
                let chunk = reader.read_chunk(&table, after.as_deref(), asked).await?;
                (chunk, t0.elapsed())
            }
        };
        sizer.observe(asked, chunk.rows.len(), chunk.bytes, elapsed);
        chunk_times.push(t0.elapsed());
        if read_ahead && reader.reads_ahead() && !chunk.last {
            if let Some(last) = chunk.rows.last() {
                let next = table.key.key_of(last)?;
                ahead.seed(reader.translation_anchor());
                ahead.start(&config, &identity, &table, next, sizer.next_size());
            }
        }
        previous = Some(chunk.position.clone());
        chunks += 1;
        if let Some(held) = chunk.lock_held {
            lock_held.push(held);
        }
        check = check.wrapping_add(touch_rows(&chunk.rows));
        rows += chunk.rows.len() as u64;
        if chunk.last {
            break true;
        }
        if let Some(last) = chunk.rows.last() {
            after = Some(table.key.key_of(last)?);
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            break false;
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu;
    std::hint::black_box(check);
    print_translations("main reader", Some(reader.translation_stats()));
    print_translations("read-ahead reader", ahead.translation_stats());
    Ok(CapstanPass {
        measured: Measured { rows, secs, cpu },
        chunks,
        largest,
        read_ahead: ahead.used,
        lock_held,
        chunk_times,
        complete,
    })
}

/// Per-chunk fixed cost: `n` one-row chunks at the middle of the table, capstan against a
/// one-row keyset page.
async fn probe_chunk_cost(
    s: &Server,
    schema: &str,
    rows: u64,
    n: usize,
    walk_binlog: bool,
) -> Result<(Vec<Duration>, Vec<Duration>), BoxError> {
    let (mut reader, table) = open_reader(s, schema, walk_binlog).await?;
    let mid = i64::try_from(rows / 2)?;
    let cursor = vec![KeyPart::Int(mid)];
    let mut capstan = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let chunk = reader.read_chunk(&table, Some(&cursor), 1).await?;
        capstan.push(t0.elapsed());
        if chunk.rows.len() != 1 {
            return Err("probe chunk is not one row".into());
        }
    }
    let mut conn = reader_conn(s).await?;
    let stmt: Statement = conn
        .prep(format!(
            "SELECT * FROM `{schema}`.`{TABLE}` WHERE id > ? ORDER BY id LIMIT ?"
        ))
        .await?;
    let mut plain = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let page: Vec<mysql_async::Row> = conn.exec(&stmt, (mid, 2u32)).await?;
        plain.push(t0.elapsed());
        if page.len() != 2 {
            return Err("probe page is not two rows".into());
        }
    }
    conn.disconnect().await?;
    Ok((capstan, plain))
}

/// MariaDB: the binlog snapshot capture statement by statement (`n` times): start, status,
/// `BINLOG_GTID_POS`.
struct CaptureProbe {
    start: Vec<Duration>,
    status: Vec<Duration>,
    gtid_pos: Vec<Duration>,
    offset: u64,
}

async fn probe_mariadb_capture(s: &Server, n: usize) -> Result<CaptureProbe, BoxError> {
    let mut conn = reader_conn(s).await?;
    let mut probe = CaptureProbe {
        start: Vec::with_capacity(n),
        status: Vec::with_capacity(n),
        gtid_pos: Vec::with_capacity(n),
        offset: 0,
    };
    for _ in 0..n {
        let t0 = Instant::now();
        conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            .await?;
        let t1 = Instant::now();
        let status: Vec<(String, String)> =
            conn.query("SHOW STATUS LIKE 'binlog_snapshot_%'").await?;
        let t2 = Instant::now();
        let get = |name: &str| {
            status
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let file = get("binlog_snapshot_file").ok_or("no binlog_snapshot_file")?;
        let pos: u64 = get("binlog_snapshot_position")
            .ok_or("no binlog_snapshot_position")?
            .parse()?;
        let g: Option<Option<String>> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file, pos))
            .await?;
        let t3 = Instant::now();
        conn.query_drop("COMMIT").await?;
        if g.flatten().is_none() {
            return Err("BINLOG_GTID_POS returned NULL".into());
        }
        probe.start.push(t1 - t0);
        probe.status.push(t2 - t1);
        probe.gtid_pos.push(t3 - t2);
        probe.offset = pos;
    }
    conn.disconnect().await?;
    Ok(probe)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// (p50, p99, max) in milliseconds, nearest rank.
fn percentiles(v: &[Duration]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let i = ((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1;
        ms[i]
    };
    (rank(0.50), rank(0.99), ms[ms.len() - 1])
}

fn pct_line(label: &str, v: &[Duration]) -> String {
    let (p50, p99, max) = percentiles(v);
    format!(
        "{label:<44} n={:<6} p50 {p50:>8.3} ms  p99 {p99:>8.3} ms  max {max:>8.3} ms",
        v.len()
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// MariaDB: grows the current binlog file to at least `mb` MB with 1 MB blob rows (16 per
/// statement) into `<schema>.binlog_filler`, emptied afterwards (`TRUNCATE`, a few bytes of
/// binlog). No `FLUSH`: the file is the one the measurement finds.
async fn grow_binlog(admin: &mut Conn, schema: &str, mb: u64) -> Result<(), BoxError> {
    let want = mb * 1_000_000;
    let (file, mut offset) = binlog_status(admin, "mariadb").await?;
    if offset >= want {
        return Ok(());
    }
    println!(
        "  growing binlog file {file} from {:.1} MB to {mb} MB",
        offset as f64 / 1e6
    );
    admin
        .query_drop(format!(
            "CREATE TABLE IF NOT EXISTS `{schema}`.binlog_filler \
             (id BIGINT AUTO_INCREMENT PRIMARY KEY, b LONGBLOB) ENGINE=InnoDB"
        ))
        .await?;
    let rows = vec!["(REPEAT(MD5(RAND()), 32768))"; 16].join(", ");
    let started = Instant::now();
    while offset < want {
        admin
            .query_drop(format!(
                "INSERT INTO `{schema}`.binlog_filler (b) VALUES {rows}"
            ))
            .await?;
        let (_, now) = binlog_status(admin, "mariadb").await?;
        offset = now;
    }
    admin
        .query_drop(format!("TRUNCATE TABLE `{schema}`.binlog_filler"))
        .await?;
    let (file, offset) = binlog_status(admin, "mariadb").await?;
    println!(
        "  binlog file {file} now at {:.1} MB ({:.1} s)",
        offset as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The current binlog file and offset (admin).
async fn binlog_status(admin: &mut Conn, name: &str) -> Result<(String, u64), BoxError> {
    let sql = if name == "mysql" {
        "SHOW BINARY LOG STATUS"
    } else {
        "SHOW MASTER STATUS"
    };
    let row: Option<mysql_async::Row> = admin.query_first(sql).await?;
    let row = row.ok_or("binary logging is off")?;
    Ok((
        row.get::<String, _>(0).ok_or("no binlog file")?,
        row.get::<u64, _>(1).ok_or("no binlog offset")?,
    ))
}

struct Line {
    name: &'static str,
    rows: u64,
    secs: Vec<f64>,
    cpu: Vec<f64>,
}

async fn bench_server(args: &Args, s: &Server) -> Result<(), BoxError> {
    let mut admin = admin_conn(s).await?;
    let version: Option<String> = admin.query_first("SELECT VERSION()").await?;
    println!(
        "== {}: {} at {}:{} ==",
        s.name,
        version.unwrap_or_default(),
        s.host,
        s.port
    );
    ensure_table(&mut admin, &args.schema, args.rows).await?;
    let (file, offset) = binlog_status(&mut admin, s.name).await?;
    println!(
        "  current binlog file {file} at {:.1} MB",
        offset as f64 / 1e6
    );
    let mariadb = s.name == "mariadb";
    let capture_default = if mariadb {
        PositionCapture::BinlogSnapshot
    } else {
        PositionCapture::LockTables
    };
    println!("  capstan position capture: {capture_default:?}");

    if mariadb && args.binlog_mb > 0 {
        grow_binlog(&mut admin, &args.schema, args.binlog_mb).await?;
    }
    let (file, offset) = binlog_status(&mut admin, s.name).await?;
    if mariadb {
        println!(
            "  -- as found (binlog file {file} at {:.1} MB) --",
            offset as f64 / 1e6
        );
        let probe = probe_mariadb_capture(s, args.probe.clamp(1, 50)).await?;
        print_capture_probe(&probe);
        let (capstan, plain) = probe_chunk_cost(
            s,
            &args.schema,
            args.rows,
            args.probe.clamp(1, 50),
            args.walk_binlog,
        )
        .await?;
        println!("{}", pct_line("  capstan read_chunk(1 row)", &capstan));
        println!("{}", pct_line("  plain one-row keyset page", &plain));
        let pass = run_capstan(
            s,
            &args.schema,
            args.chunk_size,
            args.read_ahead,
            args.walk_binlog,
            Some(Duration::from_secs_f64(args.as_found_secs)),
            args.parallel,
        )
        .await?;
        println!(
            "  capstan pass as found: {} rows in {} chunks, {:.3} s, {:.0} rows/s{}",
            pass.measured.rows,
            pass.chunks,
            pass.measured.secs,
            pass.measured.rows as f64 / pass.measured.secs,
            if pass.complete { "" } else { " (cut off)" }
        );
        println!(
            "{}",
            pct_line("  capstan chunk time as found", &pass.chunk_times)
        );
        if args.flush {
            admin.query_drop("FLUSH BINARY LOGS").await?;
            let (file, offset) = binlog_status(&mut admin, s.name).await?;
            println!("  -- after FLUSH BINARY LOGS: {file} at offset {offset} --");
        }
    }
    admin.disconnect().await?;

    let mut raw = Line {
        name: "raw SELECT * ORDER BY id",
        rows: 0,
        secs: Vec::new(),
        cpu: Vec::new(),
    };
    let mut keyset = Line {
        name: "keyset pages (mysql_async)",
        rows: 0,
        secs: Vec::new(),
        cpu: Vec::new(),
    };
    let mut capstan = Line {
        name: "capstan SnapshotReader",
        rows: 0,
        secs: Vec::new(),
        cpu: Vec::new(),
    };
    let mut lock_held = Vec::new();
    let mut chunk_times = Vec::new();
    let mut loads = vec![load_average()];
    for round in 0..args.rounds {
        if args.capstan_only {
            let c = run_capstan(
                s,
                &args.schema,
                args.chunk_size,
                args.read_ahead,
                args.walk_binlog,
                None,
                args.parallel,
            )
            .await?;
            println!(
                "  round {}: capstan {:.3} s ({} rows, {} chunks)",
                round + 1,
                c.measured.secs,
                c.measured.rows,
                c.chunks
            );
            continue;
        }
        let r = run_raw(s, &args.schema).await?;
        let k = run_keyset(s, &args.schema, args.keyset_page).await?;
        let c = run_capstan(
            s,
            &args.schema,
            args.chunk_size,
            args.read_ahead,
            args.walk_binlog,
            None,
            args.parallel,
        )
        .await?;
        for (line, m) in [
            (&mut raw, &r),
            (&mut keyset, &k),
            (&mut capstan, &c.measured),
        ] {
            if m.rows != args.rows {
                println!(
                    "  WARNING: {} read {} rows, expected {}",
                    line.name, m.rows, args.rows
                );
            }
            line.rows = m.rows;
            line.secs.push(m.secs);
            line.cpu.push(m.cpu);
        }
        lock_held.extend(c.lock_held);
        chunk_times.extend(c.chunk_times);
        let load = load_average();
        println!(
            "  round {}: raw {:.3} s, keyset {:.3} s, capstan {:.3} s ({} chunks, largest {} \
             rows, {} read ahead), capstan/raw {:.2}x (load {load})",
            round + 1,
            r.secs,
            k.secs,
            c.measured.secs,
            c.chunks,
            c.largest,
            c.read_ahead,
            r.secs / c.measured.secs,
        );
        loads.push(load);
    }
    if args.capstan_only {
        return Ok(());
    }

    let (probe_capstan, probe_plain) =
        probe_chunk_cost(s, &args.schema, args.rows, args.probe, args.walk_binlog).await?;
    let capture = if mariadb {
        Some(probe_mariadb_capture(s, args.probe).await?)
    } else {
        None
    };

    println!();
    println!(
        "  {:<28} {:>9} {:>9} {:>17} {:>11} {:>10} {:>14}",
        "reader", "rows", "seconds", "(min-max)", "rows/s", "capstan is", "client CPU/row"
    );
    let rate = |l: &Line| l.rows as f64 / median(&l.secs);
    let capstan_rate = rate(&capstan);
    for l in [&raw, &keyset, &capstan] {
        let min = l.secs.iter().copied().fold(f64::MAX, f64::min);
        let max = l.secs.iter().copied().fold(0.0, f64::max);
        println!(
            "  {:<28} {:>9} {:>9.3} {:>17} {:>11.0} {:>9.2}x {:>11.2} us",
            l.name,
            l.rows,
            median(&l.secs),
            format!("({min:.3}-{max:.3})"),
            rate(l),
            capstan_rate / rate(l),
            median(&l.cpu) / l.rows as f64 * 1e6
        );
    }
    println!(
        "  capstan / raw scan = {:.2}x (target >= 0.95x: {}), capstan / keyset = {:.2}x",
        capstan_rate / rate(&raw),
        if capstan_rate / rate(&raw) >= 0.95 {
            "met"
        } else {
            "MISSED"
        },
        capstan_rate / rate(&keyset)
    );
    println!(
        "{}",
        pct_line("  capstan chunk time (all rounds)", &chunk_times)
    );
    if !lock_held.is_empty() {
        println!(
            "{}",
            pct_line("  lock held per chunk (all rounds)", &lock_held)
        );
    }
    println!(
        "{}",
        pct_line("  capstan read_chunk(1 row)", &probe_capstan)
    );
    println!("{}", pct_line("  plain one-row keyset page", &probe_plain));
    if let Some(p) = &capture {
        print_capture_probe(p);
    }
    println!(
        "  ({} round(s), seconds = median; chunk size {}; keyset page {}; load average (1 min) \
         before and after each round: {})",
        args.rounds,
        args.chunk_size
            .map_or_else(|| "auto".to_string(), |n| n.to_string()),
        args.keyset_page,
        loads.join(", ")
    );
    println!();
    Ok(())
}

fn print_capture_probe(p: &CaptureProbe) {
    let mut total = Vec::with_capacity(p.start.len());
    for i in 0..p.start.len() {
        total.push(p.start[i] + p.status[i] + p.gtid_pos[i]);
    }
    println!(
        "  binlog snapshot capture at binlog offset {} ({:.1} MB):",
        p.offset,
        p.offset as f64 / 1e6
    );
    println!(
        "{}",
        pct_line("    START TRANSACTION WITH CONSISTENT SNAPSHOT", &p.start)
    );
    println!(
        "{}",
        pct_line("    SHOW STATUS LIKE 'binlog_snapshot_%'", &p.status)
    );
    println!(
        "{}",
        pct_line("    SELECT BINLOG_GTID_POS(file, pos)", &p.gtid_pos)
    );
    println!("{}", pct_line("    capture total", &total));
}

/// The allocator capstan's worker binary uses (see `worker/src/main.rs`), so the reader is
/// measured as it runs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        for name in &args.servers {
            let server = server_from_env(name)?;
            bench_server(&args, &server).await?;
        }
        Ok(())
    })
}
