//! The initial snapshot while a two-phase XA prepare is pending (`xa: track`), on both dev
//! servers: the prepare's GTID is in a chunk's position G but handed out only with its
//! resolution, so the processed position cannot cover G meanwhile (and on MariaDB the
//! checkpoint is held back before it, ADR-0008). A chunk must still be published before the
//! next streamed transaction outside G is gated (ADR-0005, decision 4). Had it waited for
//! the prepare, a change of one of its rows streamed meanwhile would be suppressed by the gate
//! (its key beyond the cursor) and lost, the chunk holding the older value: the update below
//! (without the rule five rows, one chunk, kept `v = 0`, on both servers).
//!
//! Writes an XA PREPARE, which halts every `xa: refuse` source that sees it: the write side of
//! SERVER_WIDE, and every test thread under nextest (`.config/nextest.toml`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod snapshot_common;
mod source_common;

use std::time::Duration;

use capstan_tests::unique_name;
use mysql_async::prelude::*;
use serde_json::{json, Value};
use snapshot_common::*;
use source_common::{rollback_xa_leftovers, SERVER_WIDE};

/// The XID prefix of this binary: a run rolls back what an earlier failed run left.
const XID_PREFIX: &str = "capstan_snapxa";

const ROWS: u64 = 60;

/// The rows read so far of the snapshot of `table`, from the pipeline's status.
async fn rows_done(world: &World, name: &str, table: &str) -> u64 {
    let status = world.status(name).await.unwrap_or(Value::Null);
    table_status(&status, table)["rows_done"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_snapshot_chunks_during_a_pending_prepare_lose_no_streamed_change() {
    chunks_during_a_prepare("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mariadb_snapshot_chunks_during_a_pending_prepare_lose_no_streamed_change() {
    chunks_during_a_prepare("mariadb").await;
}

async fn chunks_during_a_prepare(flavor: &'static str) {
    let Some(db) = flavor_db(flavor) else { return };
    let _exclusive = SERVER_WIDE.write().await;
    let mut admin = db.admin_conn().await;
    rollback_xa_leftovers(&mut admin, XID_PREFIX).await;
    let schema = create_schema(&mut admin, "sxa").await;
    let values: Vec<String> = (1..=ROWS).map(|i| format!("({i}, 0)")).collect();
    admin
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL); \
             CREATE TABLE {x} (id INT PRIMARY KEY); \
             INSERT INTO {t} VALUES {values}",
            t = qt(&schema, "t"),
            x = qt(&schema, "x"),
            values = values.join(", "),
        ))
        .await
        .unwrap();
    let Some(world) = World::start(db.clone(), flavor).await else {
        return;
    };
    let topic = topic("sxa", &schema, "t");
    world.one_partition(std::slice::from_ref(&topic));
    let tail = Tail::start(world.kafka.bootstrap_servers(), &topic);
    let table = format!("{schema}.t");
    let mut def = world.definition(
        "sxa",
        &[table.clone(), format!("{schema}.x")],
        // a chunk of 5 rows every half second
        json!({"mode": "initial", "tables": [table], "chunk_size": 5, "max_rows_per_second": 10}),
        "at_least_once",
        "sxa",
    );
    def["xa"] = json!("track");
    world.create_and_resume(def).await;
    world
        .wait_status("sxa", SETTLE, "10 snapshot rows", |s| {
            table_status(s, &table)["rows_done"]
                .as_u64()
                .is_some_and(|n| n >= 10)
        })
        .await;

    // a prepare stays pending while chunks are read; every row changes meanwhile
    let mut xa = db.admin_conn().await;
    let xid = unique_name(XID_PREFIX);
    xa.query_drop(format!(
        "XA START '{xid}'; INSERT INTO {} VALUES (1); XA END '{xid}'; XA PREPARE '{xid}'",
        qt(&schema, "x")
    ))
    .await
    .unwrap();
    let at_prepare = rows_done(&world, "sxa", &table).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    admin
        .query_drop(format!("UPDATE {} SET v = 1", qt(&schema, "t")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let at_commit = rows_done(&world, "sxa", &table).await;
    xa.query_drop(format!("XA COMMIT '{xid}'")).await.unwrap();
    // the scenario happened: the snapshot was still running when the prepare resolved
    assert!(
        at_commit < ROWS,
        "{flavor}: the snapshot ended before the prepare resolved"
    );

    world
        .wait_status("sxa", Duration::from_secs(60), "snapshot complete", |s| {
            table_status(s, &table)["status"] == "complete"
        })
        .await;
    admin
        .query_drop(format!("INSERT INTO {} VALUES (1000, 2)", qt(&schema, "t")))
        .await
        .unwrap();
    let sentinel = json!({ "id": 1000 });
    let recs = tail
        .until(SETTLE, |rs| {
            rs.last().and_then(|r| r.key.as_ref()) == Some(&sentinel)
        })
        .await;
    let replayed = replay(&recs, &["id"]);
    let source = source_rows(&mut admin, &schema, "t", &["id"]).await;
    assert_same(&replayed.state, &source, flavor);
    // and the chunks did not wait for the prepare
    assert!(
        at_commit > at_prepare,
        "{flavor}: no chunk published while the prepare was pending ({at_prepare} rows)"
    );
    admin
        .query_drop(format!("DROP DATABASE {}", q(&schema)))
        .await
        .unwrap();
}
