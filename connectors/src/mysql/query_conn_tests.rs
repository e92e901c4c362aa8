//! [`QueryConn`] against a scripted server (an in-memory pipe, no socket): several results
//! per query, what is left unread dropped before the next command, the prepared-statement
//! cache (prepared once, re-prepared after an error or ER_NEED_REPREPARE, closed when
//! evicted), and a malformed packet leaving the connection refusing further use.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use mysql_common::constants::ColumnType;
use mysql_common::packets::Column;
use mysql_common::proto::MySerialize;
use mysql_common::row::Row;
use mysql_common::value::Value;
use tokio::io::{AsyncReadExt, DuplexStream};

use super::query_conn::QueryConn;
use super::replica_conn::{ReplicaConn, ServerOrIo};

const MORE: u8 = 0x08;
const AUTOCOMMIT: u8 = 0x02;

fn ok(more: bool) -> Vec<u8> {
    vec![
        0x00,
        0,
        0,
        AUTOCOMMIT | if more { MORE } else { 0 },
        0,
        0,
        0,
    ]
}

fn eof(more: bool) -> Vec<u8> {
    vec![0xFE, 0, 0, AUTOCOMMIT | if more { MORE } else { 0 }, 0]
}

fn err(code: u16) -> Vec<u8> {
    let mut p = vec![0xFF];
    p.extend_from_slice(&code.to_le_bytes());
    p.extend_from_slice(b"#HY000a message that may quote 'secret' values");
    p
}

fn coldef(t: ColumnType) -> Vec<u8> {
    let mut out = Vec::new();
    Column::new(t).with_name(b"c").serialize(&mut out);
    out
}

/// A text result set of one column with `rows`, ended by an EOF (`more` results after it).
fn text_result(rows: &[&[u8]], more: bool) -> Vec<Vec<u8>> {
    let mut out = vec![
        vec![1],
        coldef(ColumnType::MYSQL_TYPE_VAR_STRING),
        eof(false),
    ];
    for r in rows {
        let mut p = vec![u8::try_from(r.len()).unwrap()];
        p.extend_from_slice(r);
        out.push(p);
    }
    out.push(eof(more));
    out
}

/// A binary result set of one BIGINT column with `rows`.
fn binary_result(rows: &[i64]) -> Vec<Vec<u8>> {
    let mut out = vec![vec![1], coldef(ColumnType::MYSQL_TYPE_LONGLONG), eof(false)];
    for r in rows {
        let mut p = vec![0x00, 0x00];
        p.extend_from_slice(&r.to_le_bytes());
        out.push(p);
    }
    out.push(eof(false));
    out
}

/// The answer to COM_STMT_PREPARE of a statement with one parameter and one column.
fn prepared(id: u32) -> Vec<Vec<u8>> {
    let mut head = vec![0x00];
    head.extend_from_slice(&id.to_le_bytes());
    head.extend_from_slice(&[1, 0, 1, 0, 0, 0, 0]);
    vec![
        head,
        coldef(ColumnType::MYSQL_TYPE_LONGLONG),
        eof(false),
        coldef(ColumnType::MYSQL_TYPE_LONGLONG),
        eof(false),
    ]
}

/// Frames each response's packets with sequence numbers from 1 (the command is 0).
fn script(responses: &[Vec<Vec<u8>>]) -> Vec<u8> {
    let mut wire = Vec::new();
    for packets in responses {
        for (i, p) in packets.iter().enumerate() {
            let len = p.len();
            wire.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8]);
            wire.push(u8::try_from(i + 1).unwrap());
            wire.extend_from_slice(p);
        }
    }
    wire
}

/// A connection whose server already sent `responses`; the pipe's other end.
async fn scripted(responses: &[Vec<Vec<u8>>]) -> (QueryConn, DuplexStream) {
    let (client, mut server) = tokio::io::duplex(1 << 20);
    tokio::io::AsyncWriteExt::write_all(&mut server, &script(responses))
        .await
        .unwrap();
    (QueryConn::over(ReplicaConn::over(client)), server)
}

/// The commands the client sent (first byte and the rest), in order.
async fn commands(conn: QueryConn, mut server: DuplexStream) -> Vec<(u8, Vec<u8>)> {
    drop(conn);
    let mut wire = Vec::new();
    server.read_to_end(&mut wire).await.unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= wire.len() {
        let len = usize::from(wire[at])
            | usize::from(wire[at + 1]) << 8
            | usize::from(wire[at + 2]) << 16;
        assert_eq!(wire[at + 3], 0, "every command restarts the sequence");
        let p = &wire[at + 4..at + 4 + len];
        out.push((p[0], p[1..].to_vec()));
        at += 4 + len;
    }
    out
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), f)
        .await
        .expect("the connection waited for a packet the script does not have")
}

fn code(e: ServerOrIo) -> u16 {
    match e {
        ServerOrIo::Server(e) => e.code,
        ServerOrIo::Source(e) => panic!("not a server error: {e}"),
    }
}

#[tokio::test]
async fn a_batch_yields_each_statement_result_until_an_error_ends_it() {
    let mut batch = vec![ok(true)];
    batch.extend(text_result(&[b"x", b"y"], true));
    batch.push(err(1205));
    let (mut conn, server) = scripted(&[batch]).await;
    within(async {
        conn.query("LOCK TABLES t READ; SELECT 1; SELECT 2")
            .await
            .unwrap();
        let first: Vec<Row> = conn.next_result().await.unwrap().unwrap();
        assert!(first.is_empty());
        let second: Vec<String> = conn.next_result().await.unwrap().unwrap();
        assert_eq!(second, vec!["x".to_string(), "y".to_string()]);
        let third = conn.next_result::<Row>().await.unwrap_err();
        // the error keeps its code; its message is never shown
        assert!(!format!("{third:?}").contains("secret"));
        assert_eq!(code(third), 1205);
        assert!(conn.next_result::<Row>().await.unwrap().is_none());
    })
    .await;
    let sent = commands(conn, server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0],
        (0x03, b"LOCK TABLES t READ; SELECT 1; SELECT 2".to_vec())
    );
}

#[tokio::test]
async fn what_a_caller_left_unread_is_dropped_before_the_next_command() {
    let mut batch = vec![ok(true)];
    batch.extend(text_result(&[b"left", b"unread"], true));
    batch.push(err(1146));
    let (mut conn, server) = scripted(&[batch, text_result(&[b"7"], false)]).await;
    within(async {
        conn.query("START TRANSACTION; SHOW STATUS; SELECT x")
            .await
            .unwrap();
        conn.next_result::<Row>().await.unwrap();
        // the rest of the batch (rows, then an error) is not this query's
        let v: Option<u32> = conn.query_first("SELECT 7").await.unwrap();
        assert_eq!(v, Some(7));
    })
    .await;
    assert_eq!(commands(conn, server).await.len(), 2);
}

#[tokio::test]
async fn drop_result_reports_an_error_of_a_later_statement() {
    let (mut conn, _server) = scripted(&[vec![ok(true), err(1100)]]).await;
    within(async {
        conn.query("START TRANSACTION; UNLOCK TABLES")
            .await
            .unwrap();
        conn.next_result::<Row>().await.unwrap();
        assert_eq!(code(conn.drop_result().await.unwrap_err()), 1100);
        // the batch is over
        conn.drop_result().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn statements_are_prepared_once_and_rows_stream_typed() {
    let (mut conn, server) =
        scripted(&[prepared(7), binary_result(&[-1, 2, 3]), binary_result(&[])]).await;
    within(async {
        let rows: Vec<i64> = conn.exec("SELECT ?", (1,)).await.unwrap();
        assert_eq!(rows, vec![-1, 2, 3]);
        let columns = conn
            .exec_stream("SELECT ?", &[Value::Int(2)])
            .await
            .unwrap();
        assert_eq!(columns.len(), 1);
        assert!(conn.next_row().await.unwrap().is_none());
        // the wrong number of parameters never reaches the server
        assert!(matches!(
            conn.exec::<i64>("SELECT ?", ()).await,
            Err(ServerOrIo::Source(_))
        ));
    })
    .await;
    let sent = commands(conn, server).await;
    let kinds: Vec<u8> = sent.iter().map(|(k, _)| *k).collect();
    // COM_STMT_PREPARE once, COM_STMT_EXECUTE twice, both with statement id 7
    assert_eq!(kinds, vec![0x16, 0x17, 0x17]);
    assert_eq!(sent[0].1, b"SELECT ?");
    assert_eq!(sent[1].1[..4], 7u32.to_le_bytes());
    assert_eq!(sent[2].1[..4], 7u32.to_le_bytes());
}

#[tokio::test]
async fn a_failed_execution_closes_the_statement_and_reprepare_is_retried() {
    let (mut conn, server) = scripted(&[
        prepared(1),
        vec![err(1054)],
        prepared(2),
        vec![err(1615)],
        prepared(3),
        binary_result(&[5]),
    ])
    .await;
    within(async {
        let e = conn.exec_first::<i64>("SELECT ?", (1,)).await.unwrap_err();
        assert_eq!(code(e), 1054);
        // prepared afresh; ER_NEED_REPREPARE is retried once, transparently
        let v: Option<i64> = conn.exec_first("SELECT ?", (1,)).await.unwrap();
        assert_eq!(v, Some(5));
    })
    .await;
    let sent = commands(conn, server).await;
    let kinds: Vec<(u8, u8)> = sent.iter().map(|(k, b)| (*k, b[0])).collect();
    // prepare 1, execute 1, close 1, prepare 2, execute 2, close 2, prepare 3, execute 3
    assert_eq!(
        kinds,
        vec![
            (0x16, b'S'),
            (0x17, 1),
            (0x19, 1),
            (0x16, b'S'),
            (0x17, 2),
            (0x19, 2),
            (0x16, b'S'),
            (0x17, 3),
        ]
    );
}

#[tokio::test]
async fn a_malformed_packet_leaves_the_connection_unusable() {
    // a column count with trailing bytes, then an answer that must never be read
    let (mut conn, server) = scripted(&[vec![vec![1, 0]], vec![ok(false)]]).await;
    within(async {
        conn.query("SELECT 1").await.unwrap();
        assert!(matches!(
            conn.next_result::<Row>().await,
            Err(ServerOrIo::Source(_))
        ));
        assert!(matches!(
            conn.query_drop("SELECT 2").await,
            Err(ServerOrIo::Source(_))
        ));
    })
    .await;
    assert_eq!(commands(conn, server).await.len(), 1);
}

#[tokio::test]
async fn a_truncated_binary_row_is_an_error_not_a_panic() {
    let mut result = binary_result(&[1]);
    result[3].truncate(5);
    let (mut conn, _server) = scripted(&[prepared(1), result]).await;
    within(async {
        let e = conn.exec::<i64>("SELECT ?", (1,)).await.unwrap_err();
        assert!(matches!(e, ServerOrIo::Source(_)));
    })
    .await;
}

#[tokio::test]
async fn a_prelude_and_a_statement_share_a_round_trip() {
    let (mut conn, server) = scripted(&[
        prepared(3),
        vec![ok(false)],
        binary_result(&[5, 6]),
        vec![err(1205)],
        binary_result(&[7]),
        vec![ok(false)],
    ])
    .await;
    within(async {
        let columns = conn
            .exec_stream_after("START TRANSACTION", "SELECT ?", &[Value::Int(1)])
            .await
            .unwrap();
        assert_eq!(columns.len(), 1);
        let mut got = Vec::new();
        while let Some(row) = conn.next_row().await.unwrap() {
            got.push(row.len());
        }
        assert_eq!(got, vec![1, 1]);
        // a failed prelude: the statement still ran, its answer is read and dropped
        let e = conn
            .exec_stream_after("START TRANSACTION", "SELECT ?", &[Value::Int(2)])
            .await
            .unwrap_err();
        assert_eq!(code(e), 1205);
        // and the connection is in step for the next command
        conn.query_drop("ROLLBACK").await.unwrap();
    })
    .await;
    let sent = commands(conn, server).await;
    let kinds: Vec<u8> = sent.iter().map(|(k, _)| *k).collect();
    // prepared once; each prelude (COM_QUERY) right before its COM_STMT_EXECUTE
    assert_eq!(kinds, vec![0x16, 0x03, 0x17, 0x03, 0x17, 0x03]);
    assert_eq!(sent[1].1, b"START TRANSACTION");
}
