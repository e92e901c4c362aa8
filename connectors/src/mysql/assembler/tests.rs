use std::str::FromStr;

use capstan_core::change::{Op, SchemaChangeKind, TransactionGtid, Value};
use capstan_core::position::{Gtid, MariadbGtid};

use super::{AssemblerConfig, AssemblerOutput, TransactionAssembler};
use crate::mysql::event::{Event, MariadbGtidEvent, QueryEvent};
use crate::mysql::event_reader::EventReader;
use crate::mysql::table_filter::TableFilter;
use crate::mysql::test_support::decode;
use crate::mysql::xid::XidKey;

const TABLE_MAP_HEX: &str = "d3010000000001000474657374000a66756e6e797461626c650001010001";
const ROWS_HEX: &str = "d301000000000100020001fffe01fffe02";

fn gtid(n: u64) -> Event {
    Event::Gtid {
        gtid: Gtid::from_str(&format!("3e11fa47-71ca-11e1-9e33-c80aa9429562:{n}")).unwrap(),
        committed_at_micros: 1_000_000,
        server_id: 1,
        position: 0,
    }
}

fn q(statement: &str) -> Event {
    Event::Query(QueryEvent {
        schema: "test".into(),
        statement: statement.into(),
    })
}

fn table_map_and_rows() -> (Event, Event) {
    let mut r = EventReader::new();
    (
        decode(&mut r, 19, TABLE_MAP_HEX),
        decode(&mut r, 30, ROWS_HEX),
    )
}

fn lax() -> AssemblerConfig {
    AssemblerConfig {
        require_full_metadata: false,
        ..AssemblerConfig::default()
    }
}

fn run(a: &mut TransactionAssembler, events: Vec<Event>) -> Result<Vec<AssemblerOutput>, String> {
    let mut out = Vec::new();
    for e in events {
        a.push(e, &mut out).map_err(|h| h.code().to_string())?;
    }
    Ok(out)
}

#[test]
fn gtid_begin_rows_xid_is_one_transaction() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(lax());
    let out = run(&mut a, vec![gtid(5), q("BEGIN"), tm, rows, Event::Xid]).unwrap();
    let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.gtid.to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:5");
    assert_eq!(t.changes.len(), 3);
    assert_eq!(t.changes[0].op, Op::Insert);
    assert_eq!(t.changes[0].table.to_string(), "test.funnytable");
    let after = t.changes[2].after.as_ref().unwrap();
    assert_eq!(after.values(), &[Value::Int(2)]);
    assert_eq!(
        t.changes[1].after.as_ref().unwrap().values(),
        &[Value::Null]
    );
    assert_eq!(after.columns(), &["@1".to_string()]);
    assert!(!a.in_transaction());
}

#[test]
fn a_transaction_carries_the_server_id_file_and_position_of_its_gtid_event() {
    let at = |server_id, position| Event::Gtid {
        gtid: Gtid::from_str("3e11fa47-71ca-11e1-9e33-c80aa9429562:9").unwrap(),
        committed_at_micros: 1,
        server_id,
        position,
    };
    let rotate = |file: &str| Event::Rotate {
        file: file.into(),
        position: 4,
    };
    let mut a = TransactionAssembler::new(lax());
    for (events, want) in [
        (
            vec![rotate("binlog.000003"), at(7, 4711)],
            (7, "binlog.000003", 4711),
        ),
        // a rotate between transactions: the next one is in the new file
        (
            vec![rotate("binlog.000004"), at(8, 157)],
            (8, "binlog.000004", 157),
        ),
    ] {
        let (tm, rows) = table_map_and_rows();
        let mut events = events;
        events.extend([q("BEGIN"), tm, rows, Event::Xid]);
        let out = run(&mut a, events).unwrap();
        let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
            panic!("{out:?}")
        };
        assert_eq!((t.origin.server_id, &*t.origin.file, t.origin.pos), want);
    }
    // a DDL statement's event carries its transaction's GTID event too
    let out = run(
        &mut a,
        vec![at(9, 900), q("CREATE TABLE t2 (a INT PRIMARY KEY)")],
    )
    .unwrap();
    let [AssemblerOutput::SchemaChange { origin, .. }] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(
        (origin.server_id, &*origin.file, origin.pos),
        (9, "binlog.000004", 900)
    );
}

#[test]
fn filtered_transaction_still_advances() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(AssemblerConfig {
        filter: TableFilter::only([("test", "other")]),
        ..lax()
    });
    let out = run(&mut a, vec![gtid(6), q("BEGIN"), tm, rows, Event::Xid]).unwrap();
    assert!(matches!(
        out.as_slice(),
        [AssemblerOutput::PositionAdvanced { .. }]
    ));
}

#[test]
fn desync_halts_and_halts_are_sticky() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(lax());
    assert_eq!(
        run(&mut a, vec![tm.clone()]).unwrap_err(),
        "rows_without_transaction"
    );
    assert_eq!(
        run(&mut a, vec![gtid(1)]).unwrap_err(),
        "rows_without_transaction"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![q("BEGIN")]).unwrap_err(),
        "begin_without_gtid"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![gtid(1), q("BEGIN"), rows.clone()]).unwrap_err(),
        "unmapped_table_id"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![gtid(1), gtid(2)]).unwrap_err(),
        "gtid_inside_transaction"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![Event::Xid]).unwrap_err(),
        "commit_without_transaction"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![Event::AnonymousGtid]).unwrap_err(),
        "anonymous_transaction"
    );
    a.reset();
    assert_eq!(
        run(
            &mut a,
            vec![gtid(1), q("BEGIN"), q("INSERT INTO t VALUES (1)")]
        )
        .unwrap_err(),
        "statement_based_change"
    );
    a.reset();
    assert_eq!(
        run(&mut a, vec![gtid(1), q("BEGIN"), tm, rows, q("ROLLBACK")]).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

#[test]
fn full_metadata_is_required_by_default() {
    let (tm, _) = table_map_and_rows();
    let mut a = TransactionAssembler::new(AssemblerConfig::default());
    assert_eq!(
        run(&mut a, vec![gtid(1), q("BEGIN"), tm]).unwrap_err(),
        "table_map_metadata_missing"
    );
}

#[test]
fn ddl_is_a_redacted_schema_change() {
    let mut a = TransactionAssembler::new(lax());
    let out = run(
        &mut a,
        vec![gtid(7), q("CREATE TABLE t (a INT DEFAULT 42)")],
    )
    .unwrap();
    let [AssemblerOutput::SchemaChange {
        change,
        completes_transaction: true,
        ..
    }] = out.as_slice()
    else {
        panic!("{out:?}")
    };
    assert_eq!(change.kind, SchemaChangeKind::CreateTable);
    assert_eq!(change.schema.as_deref(), Some("test"));
    assert_eq!(change.table.as_deref(), Some("t"));
    assert_eq!(change.statement, None);

    let mut a = TransactionAssembler::new(AssemblerConfig {
        keep_ddl_statement: true,
        ..lax()
    });
    let out = run(&mut a, vec![gtid(8), q("DROP TABLE s.t")]).unwrap();
    let [AssemblerOutput::SchemaChange { change, .. }] = out.as_slice() else {
        panic!()
    };
    assert_eq!(change.statement.as_deref(), Some("DROP TABLE s.t"));
    assert_eq!(change.schema.as_deref(), Some("s"));
    // a non-DDL statement transaction advances the position
    let out = run(&mut a, vec![gtid(9), q("GRANT ALL ON *.* TO u")]).unwrap();
    assert!(matches!(
        out.as_slice(),
        [AssemblerOutput::PositionAdvanced { .. }]
    ));
    assert_eq!(
        run(&mut a, vec![q("DROP TABLE x")]).unwrap_err(),
        "statement_without_gtid"
    );
}

#[test]
fn create_table_select_is_schema_change_then_rows() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(lax());
    let out = run(
        &mut a,
        vec![
            gtid(3),
            q("CREATE TABLE funnytable (value tinyint) START TRANSACTION"),
            tm,
            rows,
            Event::Xid,
        ],
    )
    .unwrap();
    assert!(matches!(
        out.as_slice(),
        [
            AssemblerOutput::SchemaChange {
                completes_transaction: false,
                ..
            },
            AssemblerOutput::Transaction(_)
        ]
    ));
}

#[test]
fn xa_refuse_halts_at_prepare_and_one_phase_is_delivered() {
    let (tm, rows) = table_map_and_rows();
    let xa = |one_phase| {
        vec![
            gtid(4),
            q("XA START X'31',X'',1"),
            tm.clone(),
            rows.clone(),
            q("XA END X'31',X'',1"),
            Event::XaPrepare {
                one_phase,
                xid: XidKey::from_statement("XA END X'31',X'',1").unwrap(),
            },
        ]
    };
    let mut a = TransactionAssembler::new(lax());
    assert_eq!(
        run(&mut a, xa(false)).unwrap_err(),
        "unsupported_transaction_shape"
    );
    let mut a = TransactionAssembler::new(lax());
    let out = run(&mut a, xa(true)).unwrap();
    assert!(matches!(out.as_slice(), [AssemblerOutput::Transaction(t)] if t.changes.len() == 3));
    assert_eq!(
        run(&mut a, vec![gtid(5), q("XA COMMIT X'31',X'',1")]).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

#[test]
fn mariadb_gtid_opens_without_begin() {
    let (tm, rows) = table_map_and_rows();
    let g = MariadbGtidEvent {
        gtid: MariadbGtid::new(0, 1, 18),
        flags: 0,
        timestamp: 1650493084,
        position: 0,
        xid: None,
    };
    let mut a = TransactionAssembler::new(lax());
    let out = run(
        &mut a,
        vec![
            Event::MariadbGtid(g),
            Event::Ignored { event_type: 160 },
            tm,
            rows,
            Event::Xid,
        ],
    )
    .unwrap();
    let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
        panic!()
    };
    assert_eq!(t.gtid, TransactionGtid::Mariadb(MariadbGtid::new(0, 1, 18)));
    assert_eq!(t.committed_at_micros, 1_650_493_084_000_000);
    // standalone DDL
    let ddl = MariadbGtidEvent {
        flags: MariadbGtidEvent::FL_STANDALONE | MariadbGtidEvent::FL_DDL,
        ..g
    };
    let out = run(
        &mut a,
        vec![Event::MariadbGtid(ddl), q("CREATE TABLE x (a int)")],
    )
    .unwrap();
    assert!(matches!(
        out.as_slice(),
        [AssemblerOutput::SchemaChange {
            completes_transaction: true,
            ..
        }]
    ));
    // an XA PREPARE's GTID without its XID (the decoder never makes one)
    let xa = MariadbGtidEvent {
        flags: MariadbGtidEvent::FL_PREPARED_XA,
        ..g
    };
    assert_eq!(
        run(&mut a, vec![Event::MariadbGtid(xa)]).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

#[test]
fn payload_events_fold_through() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(lax());
    let out = run(
        &mut a,
        vec![
            gtid(10),
            Event::TransactionPayload(vec![q("BEGIN"), tm, rows, Event::Xid]),
        ],
    )
    .unwrap();
    assert!(matches!(out.as_slice(), [AssemblerOutput::Transaction(t)] if t.changes.len() == 3));
}

fn sliced(bytes: usize) -> AssemblerConfig {
    AssemblerConfig {
        slice_bytes: Some(bytes),
        ..lax()
    }
}

/// The kind of a part, the index of its first change and its change count.
fn part_of(out: &AssemblerOutput) -> (&'static str, u64, usize) {
    match out {
        AssemblerOutput::Slice(t) => ("slice", t.first_change, t.changes.len()),
        AssemblerOutput::Transaction(t) => ("transaction", t.first_change, t.changes.len()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transaction_over_the_slice_budget_comes_in_slices_then_its_last_part() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(sliced(1));
    let events = vec![
        gtid(5),
        q("BEGIN"),
        tm,
        rows.clone(),
        rows.clone(),
        rows,
        Event::Xid,
    ];
    let out = run(&mut a, events).unwrap();
    let parts: Vec<_> = out.iter().map(part_of).collect();
    // cut before each further rows event, never after the last: the last part is not empty
    assert_eq!(
        parts,
        vec![("slice", 0, 3), ("slice", 3, 3), ("transaction", 6, 3)]
    );
    for o in &out {
        let (AssemblerOutput::Slice(t) | AssemblerOutput::Transaction(t)) = o else {
            unreachable!()
        };
        assert_eq!(t.gtid.to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:5");
        assert_eq!(t.committed_at_micros, 1_000_000);
    }
}

#[test]
fn a_transaction_under_the_budget_and_an_unset_budget_stay_whole() {
    for config in [sliced(1 << 20), lax()] {
        let (tm, rows) = table_map_and_rows();
        let mut a = TransactionAssembler::new(config);
        let events = vec![gtid(5), q("BEGIN"), tm, rows.clone(), rows, Event::Xid];
        let out = run(&mut a, events).unwrap();
        let parts: Vec<_> = out.iter().map(part_of).collect();
        assert_eq!(parts, vec![("transaction", 0, 6)]);
    }
}

#[test]
fn an_xa_transaction_is_never_sliced() {
    let (tm, rows) = table_map_and_rows();
    let mut a = TransactionAssembler::new(AssemblerConfig {
        xa: super::XaMode::track(),
        ..sliced(1)
    });
    let x = "X'01',X'',1";
    let mut events = vec![
        gtid(4),
        q(&format!("XA START {x}")),
        tm,
        rows.clone(),
        rows,
        q(&format!("XA END {x}")),
        Event::XaPrepare {
            one_phase: false,
            xid: XidKey::new(1, &[1], b""),
        },
    ];
    events.extend([gtid(5), q(&format!("XA COMMIT {x}"))]);
    let out = run(&mut a, events).unwrap();
    let parts: Vec<_> = out.iter().map(part_of).collect();
    assert_eq!(parts, vec![("transaction", 0, 6)]);
}
