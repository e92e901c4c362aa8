//! Binlog source benchmark (issue 3): decoded rows/s from a live MySQL binlog stream, side by
//! side with `mysqlbinlog --read-from-remote-source` (the server's send rate: the limit) and
//! python-mysql-replication reading the same binlog range.
//!
//! ```text
//! eval "$(deploy/dev/services.sh env)"
//! cargo run --release -p capstan-connectors --example source_bench -- --rows 1000000
//! ```
//!
//! Steps: create a fresh schema and a 10-column table; rotate the binlog (`FLUSH BINARY
//! LOGS`); record the executed GTID set and the binlog coordinates; load `--rows` row changes (60% inserts, 25% updates, 15% deletes) in
//! multi-row transactions of `--txn-rows` changes; record the GTID set again; then read exactly
//! that range three times, one reader at a time:
//!
//! 1. capstan's `BinlogSource` from the before-set, decoding every row of the table, until its
//!    position covers the after-set;
//! 2. `mysqlbinlog` (inside the MySQL chroot), a file/position dump from the before-mark's
//!    coordinates to the after-mark's (`--start-position` in the first file of the range,
//!    `--stop-position` in the last), output to /dev/null: exactly the range capstan reads,
//!    even when the server has written more since. (With a GTID dump mysqlbinlog's
//!    `--stop-position` counts from where the dump starts, not in server positions, so it
//!    cannot bound a GTID dump to the range; the position dump also spares the server the
//!    skip over the excluded prefix that capstan's GTID dump costs it);
//! 3. python-mysql-replication from the binlog coordinates recorded before the load (its GTID
//!    parser rejects tagged GTID sets, which the dev server holds), counting decoded rows.
//!
//! `--repeat N` reads the range N times with each of capstan and mysqlbinlog (alternating, so
//! both see the same machine load) and prints the median and the spread of each; python reads
//! it once. `--range FILE` keeps the loaded range for later runs: the first run loads and
//! writes the schema, marks and counts to FILE (and keeps the schema); a run that finds FILE
//! reads that range again without loading.
//!
//! `--mysqlbinlog-verbose` adds, per round, a diagnostic read by `mysqlbinlog --verbose` (rows
//! decoded to pseudo-SQL comments: the closest mysqlbinlog gets to decoding every row).
//!
//! Readers connect as the replication account (`CAPSTAN_MYSQL_USER`) over TLS without peer
//! verification; the load runs as the admin account. No row values or passwords are printed.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_connectors::mysql::{
    AssemblerConfig, AssemblerOutput, BinlogSource, Password, SourceConfig, StartPosition,
    TableFilter, TlsConfig, TlsMode,
};
use capstan_core::position::{GtidSet, Position};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, SslOpts};

/// The allocator capstan's worker binary uses (see `worker/src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TABLE: &str = "t";

/// Python reader: prints `rows=<n> seconds=<s>`; the time excludes interpreter start-up and
/// imports. Settings arrive in the environment.
const PY_READER: &str = r#"
import os, time
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent
env = os.environ
settings = {"host": env["BENCH_HOST"], "port": int(env["BENCH_PORT"]),
            "user": env["BENCH_USER"], "passwd": env["BENCH_PASSWORD"]}
expected = int(env["BENCH_EXPECTED"])
start = time.perf_counter()
stream = BinLogStreamReader(
    connection_settings=settings, server_id=int(env["BENCH_SERVER_ID"]), blocking=False,
    log_file=env["BENCH_LOG_FILE"], log_pos=int(env["BENCH_LOG_POS"]), resume_stream=True,
    only_schemas=[env["BENCH_SCHEMA"]],
    only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
rows = 0
for event in stream:
    rows += len(event.rows)
    if rows >= expected:
        break
elapsed = time.perf_counter() - start
stream.close()
print(f"rows={rows} seconds={elapsed:.6f}")
"#;

#[derive(Debug)]
struct Args {
    rows: u64,
    txn_rows: u64,
    chroot: PathBuf,
    venv: PathBuf,
    skip_mysqlbinlog: bool,
    skip_python: bool,
    keep_schema: bool,
    read_only: bool,
    repeat: usize,
    range: Option<PathBuf>,
    verbose_mysqlbinlog: bool,
}

fn usage() -> &'static str {
    "usage: source_bench [--rows N (1000000)] [--txn-rows N (1000)] [--chroot DIR] [--venv DIR] \
     [--skip-mysqlbinlog] [--skip-python] [--keep-schema] [--read-only-pass] [--repeat N (1)] \
     [--range FILE] [--mysqlbinlog-verbose]"
}

fn parse_args() -> Result<Args, BoxError> {
    let cache = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".to_string()))
        .join(".cache/capstan");
    let mut args = Args {
        rows: 1_000_000,
        txn_rows: 1_000,
        chroot: cache.join("mysql-sid-chroot"),
        venv: cache.join("bench-venv"),
        skip_mysqlbinlog: false,
        skip_python: false,
        keep_schema: false,
        read_only: false,
        repeat: 1,
        range: None,
        verbose_mysqlbinlog: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{a} needs a value\n{}", usage()))
        };
        match a.as_str() {
            "--rows" => args.rows = value()?.parse()?,
            "--txn-rows" => args.txn_rows = value()?.parse()?,
            "--chroot" => args.chroot = PathBuf::from(value()?),
            "--venv" => args.venv = PathBuf::from(value()?),
            "--skip-mysqlbinlog" => args.skip_mysqlbinlog = true,
            "--skip-python" => args.skip_python = true,
            "--keep-schema" => args.keep_schema = true,
            "--read-only-pass" => args.read_only = true,
            "--repeat" => args.repeat = value()?.parse()?,
            "--range" => args.range = Some(PathBuf::from(value()?)),
            "--mysqlbinlog-verbose" => args.verbose_mysqlbinlog = true,
            "-h" | "--help" => {
                println!("{}", usage());
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}\n{}", usage()).into()),
        }
    }
    if args.rows == 0 || args.txn_rows < 4 || args.repeat == 0 {
        return Err("--rows and --repeat must be > 0 and --txn-rows >= 4".into());
    }
    Ok(args)
}

#[derive(Clone, Debug)]
struct Server {
    host: String,
    port: u16,
    user: String,
    password: String,
    admin_user: String,
    admin_password: String,
}

fn server_from_env() -> Result<Server, BoxError> {
    let var = |k: &str| {
        std::env::var(format!("CAPSTAN_MYSQL_{k}")).map_err(|_| {
            format!("CAPSTAN_MYSQL_{k} is not set; run `eval \"$(deploy/dev/services.sh env)\"`")
        })
    };
    Ok(Server {
        host: var("HOST")?,
        port: var("PORT")?.parse()?,
        user: var("USER")?,
        password: var("PASSWORD")?,
        admin_user: var("ADMIN_USER")?,
        admin_password: var("ADMIN_PASSWORD")?,
    })
}

async fn admin_conn(s: &Server) -> Result<Conn, BoxError> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(s.host.clone())
        .tcp_port(s.port)
        .user(Some(s.admin_user.clone()))
        .pass(Some(s.admin_password.clone()))
        .ssl_opts(Some(
            SslOpts::default().with_danger_accept_invalid_certs(true),
        ));
    Ok(Conn::new(opts).await?)
}

/// Binlog coordinates and the executed GTID set at one instant.
#[derive(Clone, Debug)]
struct Mark {
    gtids: GtidSet,
    file: String,
    pos: u64,
}

async fn mark(conn: &mut Conn) -> Result<Mark, BoxError> {
    let row: Option<mysql_async::Row> = conn.query_first("SHOW BINARY LOG STATUS").await?;
    let row = row.ok_or("binary logging is off")?;
    let file: String = row.get(0).ok_or("no binlog file")?;
    let pos: u64 = row.get(1).ok_or("no binlog position")?;
    let gtids: String = row.get(4).ok_or("no executed GTID set")?;
    Ok(Mark {
        gtids: gtids.parse()?,
        file,
        pos,
    })
}

/// Bytes of binlog between two marks (every file in between counted whole).
async fn binlog_bytes(conn: &mut Conn, from: &Mark, to: &Mark) -> Result<u64, BoxError> {
    let logs: Vec<mysql_async::Row> = conn.query("SHOW BINARY LOGS").await?;
    let mut total = 0u64;
    let mut inside = false;
    for row in logs {
        let name: String = row.get(0).ok_or("no log name")?;
        let size: u64 = row.get(1).ok_or("no log size")?;
        if name == from.file {
            inside = true;
        }
        if !inside {
            continue;
        }
        let start = if name == from.file { from.pos } else { 0 };
        let end = if name == to.file { to.pos } else { size };
        total += end.saturating_sub(start);
        if name == to.file {
            return Ok(total);
        }
    }
    Err("binlog files of the load range not found (purged?)".into())
}

/// The binlog files from the one holding `from` to the one holding `to`, in order.
async fn binlog_files(conn: &mut Conn, from: &Mark, to: &Mark) -> Result<Vec<String>, BoxError> {
    let logs: Vec<mysql_async::Row> = conn.query("SHOW BINARY LOGS").await?;
    let mut files = Vec::new();
    for row in logs {
        let name: String = row.get(0).ok_or("no log name")?;
        if name == from.file || !files.is_empty() {
            files.push(name.clone());
        }
        if name == to.file && !files.is_empty() {
            return Ok(files);
        }
    }
    Err("binlog files of the load range not found (purged?)".into())
}

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
) ENGINE=InnoDB";

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

/// Loads `rows` row changes; returns (inserts, updates, deletes).
async fn load(conn: &mut Conn, rows: u64, txn_rows: u64) -> Result<(u64, u64, u64), BoxError> {
    let mut rng = Rng(0x00C0_FFEE);
    let (mut ins_total, mut upd_total, mut del_total) = (0u64, 0u64, 0u64);
    let mut next_id = 1u64;
    let mut remaining = rows;
    let mut sql = String::with_capacity(256 * 1024);
    while remaining > 0 {
        let size = remaining.min(txn_rows);
        let upd = size / 4;
        let del = size * 3 / 20;
        let ins = size - upd - del;
        let first = next_id;
        next_id += ins;
        conn.query_drop("START TRANSACTION").await?;
        sql.clear();
        sql.push_str("INSERT INTO t VALUES ");
        for id in first..first + ins {
            if id != first {
                sql.push(',');
            }
            push_row(&mut sql, &mut rng, id)?;
        }
        conn.query_drop(sql.as_str()).await?;
        if conn.affected_rows() != ins {
            return Err("insert affected an unexpected row count".into());
        }
        if upd > 0 {
            conn.query_drop(format!(
                "UPDATE t SET amount = amount + 1.25, status = 'paid', \
                 note = CONCAT(note, '!'), created = created + INTERVAL 1 SECOND \
                 WHERE id BETWEEN {first} AND {}",
                first + upd - 1
            ))
            .await?;
            if conn.affected_rows() != upd {
                return Err("update affected an unexpected row count".into());
            }
        }
        if del > 0 {
            let last = first + ins - 1;
            conn.query_drop(format!(
                "DELETE FROM t WHERE id BETWEEN {} AND {last}",
                last + 1 - del
            ))
            .await?;
            if conn.affected_rows() != del {
                return Err("delete affected an unexpected row count".into());
            }
        }
        conn.query_drop("COMMIT").await?;
        ins_total += ins;
        upd_total += upd;
        del_total += del;
        remaining -= size;
    }
    Ok((ins_total, upd_total, del_total))
}

fn unique_server_id(offset: u32) -> u32 {
    3_000_000 + (std::process::id() % 100_000) * 10 + offset
}

struct Measured {
    rows: u64,
    elapsed: Duration,
}

/// Reads the range with `BinlogSource`. With `decode_rows` false the table filter names a
/// table that does not exist, so rows are framed, checksummed and skipped but never decoded:
/// the read path alone, for profiling.
async fn run_capstan(
    s: &Server,
    schema: &str,
    before: &Mark,
    after: &Mark,
    decode_rows: bool,
) -> Result<Measured, BoxError> {
    let mut config = SourceConfig::new(s.host.clone(), s.port, s.user.clone());
    config.password = Password::new(s.password.clone());
    config.server_id = Some(unique_server_id(1));
    config.tls = Some(TlsConfig {
        mode: Some(TlsMode::VerifyNone),
        ca_file: None,
    });
    let config = config.validate()?;
    let assembler = AssemblerConfig {
        filter: TableFilter::only([(
            schema.to_string(),
            if decode_rows { TABLE } else { "no_such_table" }.to_string(),
        )]),
        ..AssemblerConfig::default()
    };
    let target = Position::Mysql(after.gtids.clone());
    let start = Instant::now();
    let mut source = BinlogSource::start(
        config,
        StartPosition::Checkpoint(Position::Mysql(before.gtids.clone())),
        assembler,
    )
    .await?;
    let mut rows = 0u64;
    while !target.is_subset(source.position()) {
        if let AssemblerOutput::Transaction(t) = source.next().await? {
            rows += t.changes.len() as u64;
        }
    }
    let elapsed = start.elapsed();
    let stats = source.stats();
    drop(source);
    if stats.reconnects > 0 {
        println!("  note: capstan reconnected {} time(s)", stats.reconnects);
    }
    Ok(Measured { rows, elapsed })
}

fn run_mysqlbinlog(
    s: &Server,
    chroot: &std::path::Path,
    before: &Mark,
    after: &Mark,
    files: &[String],
    verbose: bool,
) -> Result<Duration, BoxError> {
    use std::os::unix::fs::OpenOptionsExt;
    // The password goes in an option file readable by root only, never on a command line.
    let cnf_name = format!("tmp/capstan-source-bench-{}.cnf", std::process::id());
    let cnf_host = chroot.join(&cnf_name);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&cnf_host)?;
        writeln!(f, "[client]\npassword={}", s.password)?;
    }
    let devnull = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let start = Instant::now();
    let status = Command::new("chroot")
        .arg(chroot)
        .arg("mysqlbinlog")
        .arg(format!("--defaults-extra-file=/{cnf_name}"))
        .args(verbose.then_some("--verbose"))
        .arg("--read-from-remote-source=BINLOG-DUMP-NON-GTIDS")
        .arg(format!("--start-position={}", before.pos))
        .arg(format!("--stop-position={}", after.pos))
        .arg(format!("--host={}", s.host))
        .arg(format!("--port={}", s.port))
        .arg(format!("--user={}", s.user))
        .arg("--ssl-mode=REQUIRED")
        .arg(format!("--connection-server-id={}", unique_server_id(2)))
        .args(files)
        .stdout(Stdio::from(devnull))
        .stderr(Stdio::inherit())
        .status();
    let elapsed = start.elapsed();
    let _ = std::fs::remove_file(&cnf_host);
    let status = status?;
    if !status.success() {
        return Err(format!("mysqlbinlog failed: {status}").into());
    }
    Ok(elapsed)
}

fn mysqlbinlog_command_shape(s: &Server, before: &Mark, after: &Mark, files: &[String]) -> String {
    format!(
        "chroot <chroot> mysqlbinlog --defaults-extra-file=<password file> \
         --read-from-remote-source=BINLOG-DUMP-NON-GTIDS --start-position={} \
         --stop-position={} --host={} --port={} --user={} --ssl-mode=REQUIRED \
         --connection-server-id=<id> {} > /dev/null",
        before.pos,
        after.pos,
        s.host,
        s.port,
        s.user,
        files.join(" ")
    )
}

fn run_python(
    s: &Server,
    venv: &std::path::Path,
    schema: &str,
    before: &Mark,
    expected: u64,
) -> Result<Measured, BoxError> {
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(PY_READER)
        .env("BENCH_HOST", &s.host)
        .env("BENCH_PORT", s.port.to_string())
        .env("BENCH_USER", &s.user)
        .env("BENCH_PASSWORD", &s.password)
        .env("BENCH_SERVER_ID", unique_server_id(3).to_string())
        .env("BENCH_LOG_FILE", &before.file)
        .env("BENCH_LOG_POS", before.pos.to_string())
        .env("BENCH_SCHEMA", schema)
        .env("BENCH_EXPECTED", expected.to_string())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("python reader failed: {}", out.status).into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("rows="))
        .ok_or("python reader printed no result")?;
    let mut rows = None;
    let mut secs = None;
    for field in line.split_whitespace() {
        if let Some(v) = field.strip_prefix("rows=") {
            rows = Some(v.parse::<u64>()?);
        } else if let Some(v) = field.strip_prefix("seconds=") {
            secs = Some(v.parse::<f64>()?);
        }
    }
    let (Some(rows), Some(secs)) = (rows, secs) else {
        return Err("python reader result unreadable".into());
    };
    Ok(Measured {
        rows,
        elapsed: Duration::from_secs_f64(secs),
    })
}

/// A loaded range: what `--range FILE` keeps between runs.
#[derive(Clone, Debug)]
struct Range {
    schema: String,
    before: Mark,
    after: Mark,
    bytes: u64,
    expected: u64,
}

impl Range {
    fn save(&self, path: &std::path::Path) -> Result<(), BoxError> {
        let text = format!(
            "schema={}\nbefore_file={}\nbefore_pos={}\nbefore_gtids={}\nafter_file={}\n\
             after_pos={}\nafter_gtids={}\nbytes={}\nexpected={}\n",
            self.schema,
            self.before.file,
            self.before.pos,
            self.before.gtids,
            self.after.file,
            self.after.pos,
            self.after.gtids,
            self.bytes,
            self.expected
        );
        std::fs::write(path, text)?;
        Ok(())
    }

    fn load(path: &std::path::Path) -> Result<Range, BoxError> {
        let text = std::fs::read_to_string(path)?;
        let get = |k: &str| -> Result<&str, BoxError> {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                .ok_or_else(|| format!("{} has no {k}", path.display()).into())
        };
        Ok(Range {
            schema: get("schema")?.to_string(),
            before: Mark {
                file: get("before_file")?.to_string(),
                pos: get("before_pos")?.parse()?,
                gtids: get("before_gtids")?.parse()?,
            },
            after: Mark {
                file: get("after_file")?.to_string(),
                pos: get("after_pos")?.parse()?,
                gtids: get("after_gtids")?.parse()?,
            },
            bytes: get("bytes")?.parse()?,
            expected: get("expected")?.parse()?,
        })
    }
}

/// Times of one reader over the repeats.
struct Line {
    name: &'static str,
    rows: u64,
    secs: Vec<f64>,
}

impl Line {
    fn median(&self) -> f64 {
        median(&self.secs)
    }

    fn spread(&self) -> (f64, f64) {
        let min = self.secs.iter().copied().fold(f64::MAX, f64::min);
        let max = self.secs.iter().copied().fold(0.0, f64::max);
        (min, max)
    }
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

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

fn main() -> Result<(), BoxError> {
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

/// Creates a schema, loads `args.rows` changes and returns the range.
async fn load_range(args: &Args, admin: &mut Conn) -> Result<Range, BoxError> {
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let schema = format!("capstan_bench_{unix}_{}", std::process::id());
    admin
        .query_drop(format!("CREATE DATABASE `{schema}`"))
        .await?;
    admin.query_drop(format!("USE `{schema}`")).await?;
    admin.query_drop(CREATE_TABLE).await?;
    // a fresh binlog file for the range: capstan's GTID dump then starts where the range
    // does instead of the server skipping whatever the current file already holds
    admin.query_drop("FLUSH BINARY LOGS").await?;

    let before = mark(admin).await?;
    println!(
        "loading {} row changes into {schema}.{TABLE} ({} per transaction) ...",
        args.rows, args.txn_rows
    );
    let load_start = Instant::now();
    let (ins, upd, del) = load(admin, args.rows, args.txn_rows).await?;
    let load_secs = load_start.elapsed().as_secs_f64();
    let after = mark(admin).await?;
    let bytes = binlog_bytes(admin, &before, &after).await?;
    println!("loaded in {load_secs:.1} s: {ins} inserts, {upd} updates, {del} deletes");
    Ok(Range {
        schema,
        before,
        after,
        bytes,
        expected: ins + upd + del,
    })
}

async fn run(args: Args) -> Result<(), BoxError> {
    let server = server_from_env()?;
    let mut admin = admin_conn(&server).await?;
    let version: Option<String> = admin.query_first("SELECT VERSION()").await?;
    println!(
        "server: MySQL {} at {}:{}",
        version.unwrap_or_default(),
        server.host,
        server.port
    );
    let reused = match &args.range {
        Some(path) if path.exists() => Some(Range::load(path)?),
        _ => None,
    };
    let keep_schema = args.keep_schema || args.range.is_some();
    let range = match reused {
        Some(r) => {
            println!("reusing the range of {}", r.schema);
            r
        }
        None => {
            let r = load_range(&args, &mut admin).await?;
            if let Some(path) = &args.range {
                r.save(path)?;
                println!("range kept in {}", path.display());
            }
            r
        }
    };
    let Range {
        schema,
        before,
        after,
        bytes,
        expected,
    } = &range;
    let (bytes, expected) = (*bytes, *expected);
    let txns = after.gtids.difference(&before.gtids).len();
    println!(
        "{expected} row changes; {txns} transactions in the range (other sessions' included), \
         {:.1} MB of binlog",
        bytes as f64 / 1e6
    );
    println!(
        "range: {}:{} .. {}:{}; before-set {}",
        before.file, before.pos, after.file, after.pos, before.gtids
    );
    println!("after-set {}", after.gtids);
    let files = binlog_files(&mut admin, before, after).await?;
    if !args.skip_mysqlbinlog {
        println!(
            "mysqlbinlog: {}",
            mysqlbinlog_command_shape(&server, before, after, &files)
        );
    }

    let mut capstan = Line {
        name: "capstan BinlogSource",
        rows: expected,
        secs: Vec::new(),
    };
    let mut read_only = Vec::new();
    let mut verbose = Vec::new();
    let mut mysqlbinlog = Line {
        name: "mysqlbinlog > /dev/null",
        rows: expected,
        secs: Vec::new(),
    };
    let mut loads = vec![load_average()];
    for round in 0..args.repeat {
        let m = run_capstan(&server, schema, before, after, true).await?;
        if m.rows != expected {
            println!(
                "  WARNING: capstan decoded {} rows, expected {expected}",
                m.rows
            );
        }
        capstan.rows = m.rows;
        capstan.secs.push(m.elapsed.as_secs_f64());
        let mut note = format!(
            "round {}: capstan {:.3} s",
            round + 1,
            m.elapsed.as_secs_f64()
        );
        if args.read_only {
            let m = run_capstan(&server, schema, before, after, false).await?;
            read_only.push(m.elapsed.as_secs_f64());
            let _ = write!(note, ", read+frame only {:.3} s", m.elapsed.as_secs_f64());
        }
        if !args.skip_mysqlbinlog {
            let elapsed =
                run_mysqlbinlog(&server, &args.chroot, before, after, &files, false)?.as_secs_f64();
            mysqlbinlog.secs.push(elapsed);
            let _ = write!(
                note,
                ", mysqlbinlog {elapsed:.3} s, ratio {:.2}x",
                elapsed / m.elapsed.as_secs_f64()
            );
        }
        if args.verbose_mysqlbinlog {
            let elapsed =
                run_mysqlbinlog(&server, &args.chroot, before, after, &files, true)?.as_secs_f64();
            verbose.push(elapsed);
            let _ = write!(note, ", mysqlbinlog --verbose {elapsed:.3} s");
        }
        let load = load_average();
        let _ = write!(note, " (load {load})");
        loads.push(load);
        println!("{note}");
    }

    let mut lines = vec![capstan];
    if !args.skip_mysqlbinlog {
        lines.push(mysqlbinlog);
    }
    if !args.skip_python {
        println!("reading the range with python-mysql-replication ...");
        let py = run_python(&server, &args.venv, schema, before, expected)?;
        if py.rows != expected {
            println!(
                "  WARNING: python-mysql-replication decoded {} rows, expected {expected}",
                py.rows
            );
        }
        lines.push(Line {
            name: "python-mysql-replication",
            rows: py.rows,
            secs: vec![py.elapsed.as_secs_f64()],
        });
    }

    if !keep_schema {
        admin
            .query_drop(format!("DROP DATABASE `{schema}`"))
            .await?;
    }
    admin.disconnect().await?;

    println!();
    println!(
        "{:<26} {:>10} {:>9} {:>15} {:>12} {:>8} {:>12}",
        "reader", "rows", "seconds", "(min-max)", "rows/s", "MB/s", "capstan is"
    );
    let capstan_rate = lines[0].rows as f64 / lines[0].median();
    for l in &lines {
        let secs = l.median();
        let (min, max) = l.spread();
        let rate = l.rows as f64 / secs;
        println!(
            "{:<26} {:>10} {:>9.3} {:>15} {:>12.0} {:>8.1} {:>11.2}x",
            l.name,
            l.rows,
            secs,
            format!("({min:.3}-{max:.3})"),
            rate,
            bytes as f64 / 1e6 / secs,
            capstan_rate / rate
        );
    }
    if !read_only.is_empty() {
        let secs = median(&read_only);
        println!(
            "{:<26} {:>10} {:>9.3} {:>15} {:>12} {:>8.1}   (diagnostic: same range, rows not decoded)",
            "capstan, read+frame only",
            0,
            secs,
            "",
            "-",
            bytes as f64 / 1e6 / secs
        );
    }
    if !verbose.is_empty() {
        let secs = median(&verbose);
        println!(
            "{:<26} {:>10} {:>9.3} {:>15} {:>12.0} {:>8.1} {:>11.2}x (diagnostic: rows decoded to pseudo-SQL)",
            "mysqlbinlog --verbose",
            expected,
            secs,
            "",
            expected as f64 / secs,
            bytes as f64 / 1e6 / secs,
            capstan_rate / (expected as f64 / secs)
        );
    }
    println!(
        "({} round(s), seconds = median; load average (1 min) before and after each round: {}; \
         mysqlbinlog rows = the row changes in the range it read; MB = binlog bytes of the load \
         range; targets: capstan >= 0.8x mysqlbinlog, >= 10x python-mysql-replication)",
        args.repeat,
        loads.join(", ")
    );
    Ok(())
}
