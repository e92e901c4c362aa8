//! `XaMode::Track`: the prepared pool, resolution, recovered prepares.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;

use capstan_core::change::TransactionGtid;
use capstan_core::position::{Gtid, MariadbGtid};
use proptest::prelude::*;

use super::{AssemblerConfig, AssemblerOutput, TransactionAssembler, XaMode};
use crate::mysql::event::{Event, MariadbGtidEvent, QueryEvent};
use crate::mysql::event_reader::EventReader;
use crate::mysql::test_support::decode;
use crate::mysql::xid::XidKey;

const TABLE_MAP_HEX: &str = "d3010000000001000474657374000a66756e6e797461626c650001010001";
const ROWS_HEX: &str = "d301000000000100020001fffe01fffe02";

fn gtid_of(n: u64) -> TransactionGtid {
    TransactionGtid::Mysql(
        Gtid::from_str(&format!("3e11fa47-71ca-11e1-9e33-c80aa9429562:{n}")).unwrap(),
    )
}

fn gtid(n: u64) -> Event {
    let TransactionGtid::Mysql(gtid) = gtid_of(n) else {
        unreachable!()
    };
    Event::Gtid {
        gtid,
        committed_at_micros: n * 1_000_000,
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

fn track(max_prepared: usize) -> AssemblerConfig {
    AssemblerConfig {
        require_full_metadata: false,
        xa: XaMode::Track { max_prepared },
        ..AssemblerConfig::default()
    }
}

fn xid(x: u8) -> String {
    format!("X'{:02x}',X'',1", x)
}

/// GTID n, XA START, rows (3 changes) or none, XA END, XA PREPARE.
fn prepare(n: u64, x: u8, with_rows: bool) -> Vec<Event> {
    let mut r = EventReader::new();
    let mut v = vec![gtid(n), q(&format!("XA START {}", xid(x)))];
    if with_rows {
        v.push(decode(&mut r, 19, TABLE_MAP_HEX));
        v.push(decode(&mut r, 30, ROWS_HEX));
    }
    v.push(q(&format!("XA END {}", xid(x))));
    v.push(Event::XaPrepare {
        one_phase: false,
        xid: key(x),
    });
    v
}

fn key(x: u8) -> XidKey {
    XidKey::new(1, &[x], b"")
}

fn resolve(n: u64, x: u8, commit: bool) -> Vec<Event> {
    let verb = if commit { "COMMIT" } else { "ROLLBACK" };
    vec![gtid(n), q(&format!("XA {verb} {}", xid(x)))]
}

fn run(a: &mut TransactionAssembler, events: Vec<Event>) -> Result<Vec<AssemblerOutput>, String> {
    let mut out = Vec::new();
    for e in events {
        a.push(e, &mut out).map_err(|h| h.code().to_string())?;
    }
    Ok(out)
}

#[test]
fn prepare_emits_nothing_and_commit_delivers_once() {
    let mut a = TransactionAssembler::new(track(10));
    assert!(run(&mut a, prepare(4, 1, true)).unwrap().is_empty());
    assert_eq!(a.prepared_xa(), 1);
    assert!(!a.in_transaction());
    let out = run(&mut a, resolve(5, 1, true)).unwrap();
    let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.gtid, gtid_of(5));
    assert_eq!(t.also_covers, vec![gtid_of(4)]);
    assert_eq!(t.changes.len(), 3);
    assert_eq!(t.committed_at_micros, 5_000_000);
    assert_eq!(a.prepared_xa(), 0);
    // a second commit of the same XID has no prepare any more
    assert_eq!(
        run(&mut a, resolve(6, 1, true)).unwrap_err(),
        "xa_commit_without_prepare"
    );
}

#[test]
fn rollback_delivers_nothing_and_covers_both_gtids() {
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, prepare(4, 1, true)).unwrap();
    let out = run(&mut a, resolve(7, 1, false)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: gtid_of(7),
            also_covers: vec![gtid_of(4)],
        }]
    );
    assert_eq!(
        run(&mut a, resolve(8, 1, false)).unwrap_err(),
        "xa_rollback_without_prepare"
    );
}

#[test]
fn commit_of_an_empty_or_filtered_prepare_advances_over_both() {
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, prepare(4, 2, false)).unwrap();
    let out = run(&mut a, resolve(5, 2, true)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: gtid_of(5),
            also_covers: vec![gtid_of(4)],
        }]
    );
}

#[test]
fn pool_exhaustion_halts_and_never_evicts() {
    let mut a = TransactionAssembler::new(track(2));
    run(&mut a, prepare(1, 1, true)).unwrap();
    run(&mut a, prepare(2, 2, true)).unwrap();
    assert_eq!(
        run(&mut a, prepare(3, 3, true)).unwrap_err(),
        "xa_prepared_pool_exhausted"
    );
    assert_eq!(a.prepared_xa(), 2);
    // sticky
    assert_eq!(
        run(&mut a, resolve(4, 1, true)).unwrap_err(),
        "xa_prepared_pool_exhausted"
    );
}

#[test]
fn resolution_without_prepare_halts_unless_recovered() {
    let mut a = TransactionAssembler::new(track(10));
    assert_eq!(
        run(&mut a, resolve(5, 9, true)).unwrap_err(),
        "xa_commit_without_prepare"
    );
    let mut a = TransactionAssembler::new(track(10));
    a.set_recovered_xa([
        XidKey::from_recover_row(1, 1, 0, &[9]).unwrap(),
        XidKey::from_recover_row(1, 1, 0, &[8]).unwrap(),
    ]);
    let out = run(&mut a, resolve(5, 9, true)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: gtid_of(5),
            also_covers: vec![],
        }]
    );
    let out = run(&mut a, resolve(6, 8, false)).unwrap();
    assert_eq!(out.len(), 1);
    // each recovered prepare resolves once
    assert_eq!(
        run(&mut a, resolve(7, 8, false)).unwrap_err(),
        "xa_rollback_without_prepare"
    );
}

#[test]
fn one_phase_is_ordinary_and_refuse_still_refuses() {
    let mut a = TransactionAssembler::new(track(10));
    let mut events = prepare(4, 1, true);
    events.pop();
    events.push(Event::XaPrepare {
        one_phase: true,
        xid: key(1),
    });
    let out = run(&mut a, events).unwrap();
    assert!(
        matches!(out.as_slice(), [AssemblerOutput::Transaction(t)] if t.also_covers.is_empty())
    );
    assert_eq!(a.prepared_xa(), 0);
    let mut a = TransactionAssembler::new(AssemblerConfig {
        require_full_metadata: false,
        ..AssemblerConfig::default()
    });
    assert_eq!(
        run(&mut a, prepare(4, 1, true)).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

#[test]
fn reset_empties_the_pool_for_the_replay() {
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, prepare(4, 1, true)).unwrap();
    a.reset();
    assert_eq!(a.prepared_xa(), 0);
    run(&mut a, prepare(4, 1, true)).unwrap();
    let out = run(&mut a, resolve(5, 1, true)).unwrap();
    assert_eq!(out.len(), 1);
}

#[test]
fn unparsable_xid_and_debug_keep_xids_out() {
    let mut a = TransactionAssembler::new(track(10));
    assert_eq!(
        run(&mut a, vec![gtid(1), q("XA START X'zz'")]).unwrap_err(),
        "unsupported_transaction_shape"
    );
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, prepare(4, 0xab, true)).unwrap();
    let debug = format!("{a:?}");
    assert!(!debug.to_lowercase().contains("ab'"), "{debug}");
    assert!(!debug.contains("171"), "{debug}");
}

#[test]
fn an_xa_prepare_event_of_another_xid_halts() {
    let mut a = TransactionAssembler::new(track(10));
    let mut events = prepare(4, 1, true);
    events.pop();
    events.push(Event::XaPrepare {
        one_phase: false,
        xid: key(2),
    });
    assert_eq!(
        run(&mut a, events).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

// MariaDB: the XID rides on the GTID events; no XA START statement.

fn maria_gtid_of(seq: u64) -> TransactionGtid {
    TransactionGtid::Mariadb(MariadbGtid::new(0, 2, seq))
}

fn maria_gtid(seq: u64, flags: u8, xid: Option<XidKey>) -> Event {
    Event::MariadbGtid(MariadbGtidEvent {
        gtid: MariadbGtid::new(0, 2, seq),
        flags,
        timestamp: 1_000,
        position: 0,
        xid,
    })
}

/// MariaDB's XA PREPARE group: GTID (FL_PREPARED_XA, the XID), rows, XA END, XA_PREPARE.
fn maria_prepare(seq: u64, x: u8, with_rows: bool) -> Vec<Event> {
    let mut r = EventReader::new();
    let mut v = vec![maria_gtid(seq, 0x4c, Some(key(x)))];
    if with_rows {
        v.push(decode(&mut r, 19, TABLE_MAP_HEX));
        v.push(decode(&mut r, 30, ROWS_HEX));
    }
    v.push(q(&format!("XA END {}", xid(x))));
    v.push(Event::XaPrepare {
        one_phase: false,
        xid: key(x),
    });
    v
}

/// MariaDB's XA COMMIT / ROLLBACK group: a standalone GTID (FL_COMPLETED_XA, the XID), then
/// the statement.
fn maria_resolve(seq: u64, x: u8, commit: bool) -> Vec<Event> {
    let verb = if commit { "COMMIT" } else { "ROLLBACK" };
    vec![
        maria_gtid(seq, 0x8d, Some(key(x))),
        q(&format!("XA {verb} {}", xid(x))),
    ]
}

#[test]
fn mariadb_prepare_is_pooled_and_delivered_once_at_the_commit() {
    let mut a = TransactionAssembler::new(track(10));
    assert!(run(&mut a, maria_prepare(4, 1, true)).unwrap().is_empty());
    assert_eq!(a.prepared_xa(), 1);
    assert_eq!(a.take_pooled(), vec![maria_gtid_of(4)]);
    assert!(a.take_pooled().is_empty());
    // an ordinary transaction in between is delivered at once
    let mut r = EventReader::new();
    let plain = vec![
        maria_gtid(5, 0x0c, None),
        decode(&mut r, 19, TABLE_MAP_HEX),
        decode(&mut r, 30, ROWS_HEX),
        Event::Xid,
    ];
    let out = run(&mut a, plain).unwrap();
    assert!(
        matches!(out.as_slice(), [AssemblerOutput::Transaction(t)] if t.gtid == maria_gtid_of(5))
    );
    let out = run(&mut a, maria_resolve(6, 1, true)).unwrap();
    let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.gtid, maria_gtid_of(6));
    assert_eq!(t.also_covers, vec![maria_gtid_of(4)]);
    assert_eq!(t.changes.len(), 3);
    assert_eq!(a.prepared_xa(), 0);
    assert_eq!(
        run(&mut a, maria_resolve(7, 1, true)).unwrap_err(),
        "xa_commit_without_prepare"
    );
}

#[test]
fn mariadb_rollback_delivers_nothing_and_recovered_resolve_rowlessly() {
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, maria_prepare(4, 1, true)).unwrap();
    let out = run(&mut a, maria_resolve(5, 1, false)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: maria_gtid_of(5),
            also_covers: vec![maria_gtid_of(4)],
        }]
    );
    a.set_recovered_xa([key(9)]);
    let out = run(&mut a, maria_resolve(6, 9, true)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: maria_gtid_of(6),
            also_covers: vec![],
        }]
    );
    assert_eq!(
        run(&mut a, maria_resolve(7, 8, false)).unwrap_err(),
        "xa_rollback_without_prepare"
    );
}

#[test]
fn mariadb_refuse_halts_at_the_prepare_event_and_at_a_resolution() {
    let refuse = AssemblerConfig {
        require_full_metadata: false,
        ..AssemblerConfig::default()
    };
    let mut a = TransactionAssembler::new(refuse.clone());
    let mut events = maria_prepare(4, 1, true);
    let prepare_event = events.pop().unwrap();
    // the GTID, rows and XA END pass; the XA_PREPARE event halts, as on MySQL
    assert!(run(&mut a, events).unwrap().is_empty());
    assert_eq!(
        run(&mut a, vec![prepare_event]).unwrap_err(),
        "unsupported_transaction_shape"
    );
    let mut a = TransactionAssembler::new(refuse);
    assert_eq!(
        run(&mut a, maria_resolve(5, 1, true)).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

#[test]
fn mariadb_xid_disagreements_halt() {
    // the XA_PREPARE event names another XID than the GTID event
    let mut a = TransactionAssembler::new(track(10));
    let mut events = maria_prepare(4, 1, true);
    events.pop();
    events.push(Event::XaPrepare {
        one_phase: false,
        xid: key(2),
    });
    assert_eq!(
        run(&mut a, events).unwrap_err(),
        "unsupported_transaction_shape"
    );
    // the completed-XA GTID names another XID than its statement
    let mut a = TransactionAssembler::new(track(10));
    run(&mut a, maria_prepare(4, 1, true)).unwrap();
    let events = vec![
        maria_gtid(5, 0x8d, Some(key(2))),
        q(&format!("XA COMMIT {}", xid(1))),
    ];
    assert_eq!(
        run(&mut a, events).unwrap_err(),
        "unsupported_transaction_shape"
    );
    // a completed-XA group with anything but its resolution
    for statement in ["CREATE TABLE x (a int)", "BEGIN", "FLUSH LOGS"] {
        let mut a = TransactionAssembler::new(track(10));
        let events = vec![maria_gtid(5, 0x8d, Some(key(1))), q(statement)];
        assert_eq!(
            run(&mut a, events).unwrap_err(),
            "unsupported_transaction_shape",
            "{statement}"
        );
    }
    // an XA flag without an XID
    let mut a = TransactionAssembler::new(track(10));
    assert_eq!(
        run(&mut a, vec![maria_gtid(5, 0x8d, None)]).unwrap_err(),
        "unsupported_transaction_shape"
    );
}

/// The events as MariaDB 10.11 wrote them (GTID and XA_PREPARE bodies read back from a live
/// binlog: `XA START 'ab','c',7; INSERT …; XA END …; XA PREPARE …; XA COMMIT …`), decoded
/// by the reader and assembled.
#[test]
fn mariadb_xa_from_live_binlog_bytes() {
    let mut r = EventReader::new();
    let prepare_gtid = decode(
        &mut r,
        162,
        "0300000000000000000000004c07000000020161626301ff",
    );
    let prepare_event = decode(&mut r, 38, "00070000000200000001000000616263");
    let commit_gtid = decode(&mut r, 162, "0500000000000000000000008d070000000201616263");
    let events = vec![
        prepare_gtid,
        decode(&mut r, 19, TABLE_MAP_HEX),
        decode(&mut r, 30, ROWS_HEX),
        q("XA END X'6162',X'63',7"),
        prepare_event,
        commit_gtid,
        q("XA COMMIT X'6162',X'63',7"),
    ];
    let mut a = TransactionAssembler::new(track(10));
    let out = run(&mut a, events).unwrap();
    let [AssemblerOutput::Transaction(t)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(t.changes.len(), 3);
    assert_eq!(
        t.also_covers,
        vec![TransactionGtid::Mariadb(MariadbGtid::new(0, 1, 3))]
    );
}

#[derive(Clone, Debug)]
enum Op {
    Prepare(u8, bool),
    Commit(u8),
    Rollback(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..5, any::<bool>()).prop_map(|(x, r)| Op::Prepare(x, r)),
        (0u8..5).prop_map(Op::Commit),
        (0u8..5).prop_map(Op::Rollback),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Against a model: the pool never exceeds its bound, every committed prepare with rows
    /// is delivered exactly once (at its commit, covering its prepare), a rollback delivers
    /// nothing, and the first impossible step halts with the model's reason.
    #[test]
    fn pool_is_bounded_and_delivers_exactly_once(
        max in 1usize..4,
        ops in proptest::collection::vec(op(), 0..40),
    ) {
        let mut a = TransactionAssembler::new(track(max));
        // xid -> (prepare gno, has rows)
        let mut model: BTreeMap<u8, (u64, bool)> = BTreeMap::new();
        let mut delivered: HashMap<TransactionGtid, usize> = HashMap::new();
        let mut expected_delivered: HashMap<TransactionGtid, usize> = HashMap::new();
        let mut gno = 0u64;
        for op in ops {
            gno += 1;
            let (events, expect_halt) = match &op {
                Op::Prepare(x, r) => {
                    let halt = if model.contains_key(x) {
                        Some("unsupported_transaction_shape")
                    } else if model.len() >= max {
                        Some("xa_prepared_pool_exhausted")
                    } else {
                        None
                    };
                    (prepare(gno, *x, *r), halt)
                }
                Op::Commit(x) => (
                    resolve(gno, *x, true),
                    (!model.contains_key(x)).then_some("xa_commit_without_prepare"),
                ),
                Op::Rollback(x) => (
                    resolve(gno, *x, false),
                    (!model.contains_key(x)).then_some("xa_rollback_without_prepare"),
                ),
            };
            let result = run(&mut a, events);
            if let Some(reason) = expect_halt {
                prop_assert_eq!(result.unwrap_err(), reason);
                break;
            }
            let out = result.unwrap();
            match op {
                Op::Prepare(x, r) => {
                    prop_assert!(out.is_empty());
                    model.insert(x, (gno, r));
                }
                Op::Commit(x) | Op::Rollback(x) => {
                    let commit = matches!(op, Op::Commit(_));
                    let (pgno, rows) = model.remove(&x).unwrap();
                    prop_assert_eq!(out.len(), 1);
                    match &out[0] {
                        AssemblerOutput::Transaction(t) => {
                            prop_assert!(commit && rows);
                            prop_assert_eq!(&t.gtid, &gtid_of(gno));
                            prop_assert_eq!(&t.also_covers, &vec![gtid_of(pgno)]);
                            *delivered.entry(gtid_of(pgno)).or_default() += 1;
                        }
                        AssemblerOutput::PositionAdvanced { gtid, also_covers } => {
                            prop_assert!(!(commit && rows));
                            prop_assert_eq!(gtid, &gtid_of(gno));
                            prop_assert_eq!(also_covers, &vec![gtid_of(pgno)]);
                        }
                        other => prop_assert!(false, "unexpected {:?}", other),
                    }
                    if commit && rows {
                        *expected_delivered.entry(gtid_of(pgno)).or_default() += 1;
                    }
                }
            }
            prop_assert!(a.prepared_xa() <= max);
            prop_assert_eq!(a.prepared_xa(), model.len());
        }
        prop_assert_eq!(delivered, expected_delivered);
    }
}

/// A restart from a held-back checkpoint replays the resolution of a prepare that lies before
/// the checkpoint and is resolved (so neither pooled nor recovered): covered by what was
/// handed out before, it resolves row-lessly; beyond that it still halts.
#[test]
fn replayed_resolution_of_an_unknown_prepare_resolves_rowlessly() {
    use capstan_core::position::{MariadbGtidPosition, Position};
    let mut a = TransactionAssembler::new(track(10));
    let mut handed_out = MariadbGtidPosition::new();
    handed_out.advance(MariadbGtid::new(0, 2, 6));
    a.set_replayed(Position::Mariadb(handed_out));
    let out = run(&mut a, maria_resolve(6, 1, true)).unwrap();
    assert_eq!(
        out,
        vec![AssemblerOutput::PositionAdvanced {
            gtid: maria_gtid_of(6),
            also_covers: vec![],
        }]
    );
    assert_eq!(
        run(&mut a, maria_resolve(7, 2, true)).unwrap_err(),
        "xa_commit_without_prepare"
    );
}
