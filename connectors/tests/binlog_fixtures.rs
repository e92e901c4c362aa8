//! Decodes every binlog file under `../shared/testdata/external/` (read in place, never
//! copied) and compares with the expectations recorded beside them: the per-file NOTES.md
//! assertions and the `*.mysql_common.txt` oracle walks (event counts, row-image counts).
//!
//! Skips with a message when the fixture directory is absent, unless `CI=true`.

// clippy.toml allows these inside #[test] functions; the helpers here are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capstan_connectors::mysql::decode::{decode_rows, DecodeOptions};
use capstan_connectors::mysql::{
    AssemblerConfig, AssemblerOutput, BinlogFileEvents, Event, EventReader, Halt, TableSchema,
    TransactionAssembler,
};
use capstan_core::change::Value;

fn fixtures() -> Option<PathBuf> {
    // cargo's runtime CARGO_MANIFEST_DIR first: a binary built in another checkout sharing
    // the target directory still reads this checkout's fixtures
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let dir = manifest.join("../../shared/testdata/external");
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("fixture directory {} is missing", dir.display());
    }
    eprintln!("skipping: fixture directory {} is missing", dir.display());
    None
}

const LAX: DecodeOptions = DecodeOptions {
    legacy_temporal: true,
    enum_set_index_fallback: true,
};

/// (table, before image, after image), absent columns as NULL.
type DecodedRow = (String, Option<Vec<Value>>, Option<Vec<Value>>);

/// What our walk of one file found.
#[derive(Default, Debug)]
struct Walk {
    /// Outer events decoded or failed (one per framed event, like the oracle's `@` lines).
    events: usize,
    /// Event names, outer and inner.
    kinds: BTreeMap<&'static str, usize>,
    /// Row images decoded (before + after).
    images: usize,
    /// Decoded rows as (table, before, after) for value checks.
    rows: Vec<DecodedRow>,
    /// Halts: per-event decode errors and the framing error that ended the walk.
    errors: Vec<Halt>,
    /// Row decode halts.
    row_errors: Vec<Halt>,
    /// All events, for the assembler run.
    all: Vec<Event>,
}

fn note_event(walk: &mut Walk, maps: &mut HashMap<u64, Arc<TableSchema>>, e: &Event) {
    *walk.kinds.entry(e.name()).or_default() += 1;
    match e {
        Event::TableMap(t) => {
            maps.insert(t.table_id, Arc::clone(t));
        }
        Event::Rows(r) => match maps.get(&r.table_id) {
            None => walk.row_errors.push(Halt::UnmappedTableId {
                table_id: r.table_id,
            }),
            Some(t) => match decode_rows(t, r, &LAX) {
                Ok(rows) => {
                    for row in rows {
                        walk.images += usize::from(row.before.is_some());
                        walk.images += usize::from(row.after.is_some());
                        let full = |i: Option<capstan_connectors::mysql::decode::RowImage>| {
                            i.map(|i| {
                                i.values
                                    .into_iter()
                                    .map(|v| v.unwrap_or(Value::Null))
                                    .collect()
                            })
                        };
                        walk.rows
                            .push((t.table.to_string(), full(row.before), full(row.after)));
                    }
                }
                Err(h) => walk.row_errors.push(h),
            },
        },
        Event::TransactionPayload(inner) => {
            for i in inner {
                note_event(walk, maps, i);
            }
        }
        _ => {}
    }
}

fn walk_bytes(bytes: &[u8]) -> Walk {
    let mut walk = Walk::default();
    let mut maps = HashMap::new();
    for item in BinlogFileEvents::new(bytes) {
        walk.events += 1;
        match item {
            Ok(e) => {
                note_event(&mut walk, &mut maps, &e);
                walk.all.push(e);
            }
            Err(h) => walk.errors.push(h),
        }
    }
    walk
}

/// Counts from an oracle file: `@` event lines, row-image lines, `ERR` lines.
fn oracle(path: &Path) -> Option<(usize, usize, usize)> {
    let text = read_maybe_gz(path)?;
    let text = String::from_utf8_lossy(&text).into_owned();
    let events = text.lines().filter(|l| l.starts_with('@')).count();
    let images = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            l.starts_with(' ') && (t.starts_with("before=") || t.starts_with("after="))
        })
        .count();
    let errs = text.lines().filter(|l| l.contains("ERR")).count();
    Some((events, images, errs))
}

fn read_maybe_gz(path: &Path) -> Option<Vec<u8>> {
    if path.extension().is_some_and(|e| e == "gz") {
        let out = std::process::Command::new("gzip")
            .arg("-dc")
            .arg(path)
            .output()
            .ok()?;
        return out.status.success().then_some(out.stdout);
    }
    std::fs::read(path).ok()
}

/// Every binlog file in the fixture tree with its oracle file, if any.
fn binlog_files(root: &Path) -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut out = Vec::new();
    let rmc = root.join("rust_mysql_common");
    if let Ok(dir) = std::fs::read_dir(rmc.join("binlogs")) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let oracle = rmc
                .join("expected")
                .join(format!("{name}.mysql_common.txt"));
            out.push((e.path(), Some(oracle)));
        }
    }
    let java = root.join("mysql-binlog-connector-java");
    for name in [
        "mysql-bin.aurora-padding",
        "mysql-bin.checksum-crc32",
        "mysql-bin.checksum-none",
        "mysql-bin.compressed",
        "mysql-bin.sakila.gz",
    ] {
        let stem = name.trim_end_matches(".gz");
        let oracle = java.join("expected").join(if name.ends_with(".gz") {
            format!("{stem}.mysql_common.txt.gz")
        } else {
            format!("{stem}.mysql_common.txt")
        });
        out.push((java.join(name), Some(oracle)));
    }
    for version in ["5.7", "8.0"] {
        let base = root.join("mysql-cdc-rs/events").join(version);
        let Ok(dirs) = std::fs::read_dir(&base) else {
            continue;
        };
        for d in dirs.flatten() {
            let Ok(files) = std::fs::read_dir(d.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if name == "log.bin" || (name.starts_with("binlog.") && !name.ends_with(".txt")) {
                    let oracle = d.path().join(format!("{name}.mysql_common.txt"));
                    out.push((f.path(), Some(oracle)));
                }
            }
        }
    }
    out.sort();
    out
}

/// Files that are broken on purpose (see rust_mysql_common/NOTES.md).
const BROKEN: &[&str] = &[
    "binlog_truncated_event.000001",
    "binlog_truncated_prev_gtid_event.000001",
    "corrupt-relay-bin.000624",
    "ver_5_1-wl2325_r.001",
];

#[test]
fn every_fixture_decodes_and_matches_the_oracle_counts() {
    let Some(root) = fixtures() else { return };
    let files = binlog_files(&root);
    assert!(files.len() >= 60, "found only {} binlog files", files.len());
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for (path, oracle_path) in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = read_maybe_gz(path).unwrap();
        let walk = walk_bytes(&bytes);
        let expected = oracle_path.as_deref().and_then(oracle);
        report.push(format!(
            "{name}: events={} images={} errors={:?} row_errors={:?} oracle={expected:?}",
            walk.events,
            walk.images,
            walk.errors.iter().map(Halt::code).collect::<Vec<_>>(),
            walk.row_errors.iter().map(Halt::code).collect::<Vec<_>>(),
        ));
        if BROKEN.contains(&name.as_str()) {
            if walk.errors.is_empty() {
                failures.push(format!("{name}: a broken file must fail"));
            }
            continue;
        }
        if !walk.errors.is_empty() || !walk.row_errors.is_empty() {
            failures.push(format!("{name}: {:?} {:?}", walk.errors, walk.row_errors));
        }
        if let Some((events, images, _)) = expected {
            if walk.events != events {
                failures.push(format!("{name}: {} events, oracle {events}", walk.events));
            }
            // PARTIAL_UPDATE_ROWS is refused by design (binlog_row_value_options must be
            // empty), so its images are not decoded here
            let refused = walk.kinds.get("unsupported").copied().unwrap_or(0);
            if walk.images != images && refused == 0 {
                failures.push(format!("{name}: {} images, oracle {images}", walk.images));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn file(root: &Path, rel: &str) -> Walk {
    walk_bytes(&std::fs::read(root.join(rel)).unwrap())
}

fn sql(v: &Value) -> String {
    match v {
        Value::Text { bytes, .. } | Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into(),
        Value::Null => "NULL".into(),
        other => other.to_sql_text().unwrap_or_else(|| other.kind().into()),
    }
}

fn after(w: &Walk, i: usize) -> Vec<String> {
    w.rows[i].2.as_ref().unwrap().iter().map(sql).collect()
}

#[test]
fn recorded_values_decode_exactly() {
    let Some(root) = fixtures() else { return };
    let rmc = |f: &str| file(&root, &format!("rust_mysql_common/binlogs/{f}"));

    // MariaDB 10.5: GTID/GTID_LIST/ANNOTATE_ROWS/BINLOG_CHECKPOINT decoded raw, rows v1
    let w = rmc("mariadb-bin.000001");
    assert_eq!(w.kinds["mariadb_gtid"], 2);
    assert_eq!(w.kinds["mariadb_gtid_list"], 1);
    assert_eq!(w.rows[0].0, "toddy_test.outbox");
    assert_eq!(
        after(&w, 0),
        ["62", "foo", "JSON", "{\"foo\":1}", "1650493084"]
    );
    assert_eq!(after(&w, 1)[0], "63");
    let Some(Event::TableMap(t)) = w.all.iter().find(|e| matches!(e, Event::TableMap(_))) else {
        panic!()
    };
    assert_eq!(&t.column_names[..2], ["id", "topic"]);
    assert_eq!(&t.key[..], [0]);
    assert_eq!(t.columns[3].collation, Some(63)); // `event` is binary
                                                  // event_type is ENUM index 2; with FULL metadata the member name is delivered
    assert_eq!(t.columns[2].enum_values.as_deref().unwrap()[1], "JSON");
    assert_eq!(t.columns[2].enum_values.as_deref().unwrap()[1], "JSON");

    // negative TIME(0) beyond 24h
    assert_eq!(after(&rmc("time_issue.000001"), 0), ["-507:48:27"]);
    // BIT
    let w = rmc("mysql_type_bit.000001");
    assert_eq!(
        w.rows[0].2.as_ref().unwrap()[0],
        Value::Bit {
            bytes: vec![0b100],
            bits: 3
        }
    );
    assert_eq!(after(&w, 0)[1], "foo");
    // unsigned INT above 2^31, sparse MINIMAL image
    let w = rmc("minimal_row_metadata.000001");
    assert!(after(&w, 0).contains(&"3230202323".to_string()));
    // VECTOR
    let w = rmc("vector.binlog");
    assert_eq!(
        w.rows[0].2.as_ref().unwrap()[1],
        Value::Vector(vec![1.1, 2.2, 3.3])
    );
    assert_eq!(
        w.rows[1].2.as_ref().unwrap()[1],
        Value::Vector(vec![1.0, -1.0, 0.0])
    );
    // binary JSON → JSON text, opaque scalars included
    let w = rmc("json-opaque.binlog");
    let json: Vec<String> = (0..8).map(|i| after(&w, i)[0].clone()).collect();
    assert_eq!(json[0], r#"{"a":"base64:type15:VQ=="}"#);
    assert_eq!(json[1], r#"{"b":"2012-03-18"}"#);
    assert_eq!(json[2], r#"{"c":"2012-03-18 11:30:45.000000"}"#);
    assert_eq!(json[3], r#"{"c":"87:31:46.654321"}"#);
    assert_eq!(json[4], r#"{"d":"123.456"}"#);
    assert_eq!(json[6], r#"{"e":[0,1,true,false]}"#);
    assert_eq!(json[7], r#"{"e":null}"#);
    // compressed transaction: exactly QUERY, TABLE_MAP, WRITE_ROWS, XID inside
    let w = rmc("transaction_compression.000001");
    let Some(Event::TransactionPayload(inner)) = w
        .all
        .iter()
        .find(|e| matches!(e, Event::TransactionPayload(_)))
    else {
        panic!()
    };
    let names: Vec<&str> = inner.iter().map(Event::name).collect();
    assert_eq!(names, ["query", "table_map", "write_rows", "xid"]);
    assert_eq!(after(&w, 0), ["1"]);
    // tagged GTID
    let w = rmc("binlog_transaction_with_GTID_TAG.000001");
    let Some(Event::Gtid { gtid, .. }) = w.all.iter().find(|e| matches!(e, Event::Gtid { .. }))
    else {
        panic!()
    };
    assert_eq!(
        gtid.to_string(),
        "55778904-0299-11f1-b1b8-4ef0c4956feb:mytag:3"
    );
    // ENUM/SET member names from the metadata: index 1, bits 0b0101; then 2, 0b1010
    let w = rmc("mysql-enum-string-set.000001");
    assert_eq!(after(&w, 0)[0], "0123456789".repeat(10));
    assert_eq!(&after(&w, 0)[2..4], ["var1", "one,three"]);
    assert_eq!(&after(&w, 1)[2..4], ["variant2", "two,four"]);
    assert_eq!(
        &w.rows[1].2.as_ref().unwrap()[..2]
            .iter()
            .map(sql)
            .collect::<Vec<_>>(),
        &["field1", "field_2"]
    );

    // MySQL's own mysqlbinlog dump: update (1,11,111,1111,11111,1) -> (1,22,222,...)
    let w = file(
        &root,
        "mysql-cdc-rs/events/8.0/31_update_rows_v2/binlog.000001",
    );
    let last = w.rows.last().unwrap();
    let before: Vec<String> = last.1.as_ref().unwrap().iter().map(sql).collect();
    assert_eq!(before, ["1", "11", "111", "1111", "11111", "1"]);
    let after_row: Vec<String> = last.2.as_ref().unwrap().iter().map(sql).collect();
    assert_eq!(after_row, ["1", "22", "222", "1111", "11111", "1"]);
    // DECIMAL(10,4) and FLOAT/DOUBLE from 5.7
    let w = file(&root, "mysql-cdc-rs/events/5.7/31_update_rows_v2/log.bin");
    let a: Vec<String> = w.rows[0].2.as_ref().unwrap().iter().map(sql).collect();
    assert_eq!(a.last().unwrap(), "4.0000");
}

#[test]
fn aurora_padding_is_skipped_as_ignorable() {
    let Some(root) = fixtures() else { return };
    let w = file(
        &root,
        "mysql-binlog-connector-java/mysql-bin.aurora-padding",
    );
    let names: Vec<&str> = w.all.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "format_description",
            "ignored",
            "anonymous_gtid",
            "ignored",
            "query"
        ]
    );
}

#[test]
fn checksums_are_verified() {
    let Some(root) = fixtures() else { return };
    let mut bytes =
        std::fs::read(root.join("mysql-binlog-connector-java/mysql-bin.checksum-crc32")).unwrap();
    // flip one byte inside the body of the event at offset 308 (a TABLE_MAP)
    bytes[330] ^= 0x01;
    let w = walk_bytes(&bytes);
    assert!(
        w.errors.iter().any(|h| h.code() == "checksum_mismatch"),
        "{:?}",
        w.errors
    );
}

#[test]
fn truncation_anywhere_fails_cleanly() {
    let Some(root) = fixtures() else { return };
    for rel in [
        "rust_mysql_common/binlogs/transaction_compression.000001",
        "rust_mysql_common/binlogs/mariadb-bin.000001",
        "rust_mysql_common/binlogs/json-opaque.binlog",
    ] {
        let bytes = std::fs::read(root.join(rel)).unwrap();
        for cut in 0..bytes.len() {
            let _ = walk_bytes(&bytes[..cut]);
        }
    }
}

#[test]
fn go_mysql_payload_inflates_to_its_inner_events() {
    let Some(root) = fixtures() else { return };
    let z = std::fs::read(root.join("go-mysql/txn_payload_mysql8027.zst")).unwrap();
    let inflated = zstd::decode_all(&z[..]).unwrap();
    assert_eq!(inflated.len(), 2442);
    let mut reader = EventReader::new();
    let mut rest = &inflated[..];
    let mut names = Vec::new();
    while !rest.is_empty() {
        let len = capstan_connectors::mysql::frame_len(rest).unwrap();
        names.push(reader.decode(&rest[..len]).unwrap().name());
        rest = &rest[len..];
    }
    assert_eq!(
        names,
        [
            "query",
            "table_map",
            "write_rows",
            "table_map",
            "update_rows",
            "table_map",
            "delete_rows",
            "xid"
        ]
    );
}

#[test]
fn gtid_files_assemble_into_transactions() {
    let Some(root) = fixtures() else { return };
    let config = AssemblerConfig {
        require_full_metadata: false,
        decode: LAX,
        ..AssemblerConfig::default()
    };
    let cases = [
        // (file, transactions, schema changes, position-only)
        (
            "rust_mysql_common/binlogs/mysql-enum-string-set.000001",
            3,
            1,
            1,
        ),
        ("rust_mysql_common/binlogs/mariadb-bin.000001", 2, 0, 0),
        // gno 1 is ALTER USER: no schema change, the position just advances
        ("rust_mysql_common/binlogs/mysql_type_bit.000001", 1, 1, 1),
        (
            "rust_mysql_common/binlogs/binlog_transaction_with_GTID_TAG.000001",
            1,
            0,
            0,
        ),
        (
            "mysql-cdc-rs/events/5.7/33_35_gtid_prev_gtid/log.bin",
            1,
            2,
            0,
        ),
    ];
    for (rel, txns, ddl, advanced) in cases {
        let w = file(&root, rel);
        let mut a = TransactionAssembler::new(config.clone());
        let mut out = Vec::new();
        for e in w.all {
            a.push(e, &mut out).unwrap_or_else(|h| panic!("{rel}: {h}"));
        }
        let count = |f: fn(&AssemblerOutput) -> bool| out.iter().filter(|o| f(o)).count();
        assert_eq!(
            (
                count(|o| matches!(o, AssemblerOutput::Transaction(_))),
                count(|o| matches!(o, AssemblerOutput::SchemaChange { .. })),
                count(|o| matches!(o, AssemblerOutput::PositionAdvanced { .. })),
            ),
            (txns, ddl, advanced),
            "{rel}: {out:?}"
        );
        assert!(!a.in_transaction(), "{rel}");
    }
}

#[test]
fn anonymous_gtid_files_halt_in_the_assembler() {
    let Some(root) = fixtures() else { return };
    let w = file(
        &root,
        "mysql-binlog-connector-java/mysql-bin.checksum-crc32",
    );
    let mut a = TransactionAssembler::new(AssemblerConfig::default());
    let mut out = Vec::new();
    let halt = w
        .all
        .into_iter()
        .find_map(|e| a.push(e, &mut out).err())
        .unwrap();
    assert_eq!(halt.code(), "anonymous_transaction");
}
