//! Operator moves and the rebalance on three real workers.
//!
//! - A pipeline streaming four writers' transactions is moved to another worker
//!   (`POST /pipelines/{name}/move`): the new owner streams under a greater epoch, the old
//!   owner's runner ended (its log says so) before it released the pipeline and before the new
//!   owner's runner started, and an independent consumer reads every change the writers
//!   committed before, during and after the move, per key in source order, none twice (the
//!   old runner commits what it published before it ends).
//! - Nine pipelines gathered on one worker by moves are spread 3/3/3 by a rebalance: the dry
//!   run's plan is asserted move by move, then applied.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capstan_tests::cluster::{capstan_binary, idle_definition, Cluster};
use capstan_tests::{mysql, unique_name};
use load_common::*;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(30);

/// The timestamp (first field of a text log line) of the first line of `log` that holds
/// every one of `needles`.
fn logged_at(log: &str, needles: &[&str]) -> Option<String> {
    log.lines()
        .find(|l| needles.iter().all(|n| l.contains(n)))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_streaming_pipeline_moves_to_another_worker_without_a_gap() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let schema = unique_name("move");
    let mut admin = db.admin_conn().await;
    admin
        .query_drop(format!(
            "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)"
        ))
        .await
        .unwrap();
    let cluster = tokio::task::spawn_blocking(|| Cluster::start(3))
        .await
        .unwrap();
    let Some(cluster) = cluster else { return };
    let cluster = Arc::new(Mutex::new(cluster));
    let blocking = |f: Box<dyn FnOnce(&mut Cluster) -> Value + Send>| {
        let c = cluster.clone();
        tokio::task::spawn_blocking(move || f(&mut c.lock().unwrap()))
    };
    let definition = json!({
        "name": "mv",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": 7000 + (std::process::id() % 500),
            "flavor": "mysql"
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "mv"},
        "start_position": "current"
    });
    let started = blocking(Box::new(move |c| {
        c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
        let (owner, epoch) = c.create_streaming(1, &definition, SETTLE);
        json!([owner, epoch])
    }))
    .await
    .unwrap();
    let (from, old_epoch) = (started[0].as_u64().unwrap(), started[1].as_u64().unwrap());

    // before: the writers run on the first owner
    let writers = Writers::start(&db, &schema, 4);
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // during: the move, asked of a worker that is neither owner nor target
    let to = [1, 2, 3].into_iter().find(|&n| n != from).unwrap();
    let via = [1, 2, 3]
        .into_iter()
        .find(|&n| n != from && n != to)
        .unwrap();
    let moved = blocking(Box::new(move |c| {
        let asked = Instant::now();
        let (s, b) = c
            .send(
                via,
                Method::POST,
                "/pipelines/mv/move",
                Some(&json!({"to": to})),
            )
            .unwrap();
        assert_eq!(s, 202, "{b}");
        assert_eq!(
            b,
            json!({"name": "mv", "owner": from, "move_to": to, "epoch": old_epoch})
        );
        let (epoch, took) = c
            .wait_until(SETTLE, |c| {
                let st = c.pipeline_status(via, "mv")?;
                let done =
                    st["owner"] == to && st["move_to"].is_null() && st["state"] == "streaming";
                done.then(|| (st["epoch"].as_u64().unwrap(), asked.elapsed()))
            })
            .unwrap_or_else(|| {
                panic!(
                    "never moved: {:?}\nold owner:\n{}",
                    c.pipeline_status(via, "mv"),
                    c.log_tail(from)
                )
            });
        eprintln!("moved from node {from} to node {to}: streaming at epoch {epoch} after {took:?}");
        json!(epoch)
    }))
    .await
    .unwrap();
    let new_epoch = moved.as_u64().unwrap();
    assert!(new_epoch > old_epoch, "{new_epoch} > {old_epoch}");

    // after: the writers go on on the new owner
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (total_tx, expected) = writers.stop().await;
    assert!(total_tx > 50, "the writers really wrote ({total_tx})");

    // the old runner ended, then the release, then the new runner started
    {
        let c = cluster.lock().unwrap();
        let (old_log, new_log) = (c.log(from), c.log(to));
        let old_epoch_field = format!("epoch={old_epoch}");
        let new_epoch_field = format!("epoch={new_epoch}");
        let ended = logged_at(&old_log, &["runner ended", "pipeline=mv", &old_epoch_field])
            .unwrap_or_else(|| panic!("no end of the old runner:\n{}", c.log_tail(from)));
        let released = logged_at(
            &old_log,
            &[
                "releasing pipeline for a move",
                "pipeline=mv",
                &old_epoch_field,
            ],
        )
        .unwrap_or_else(|| panic!("no release:\n{}", c.log_tail(from)));
        let started = logged_at(
            &new_log,
            &["starting runner", "pipeline=mv", &new_epoch_field],
        )
        .unwrap_or_else(|| panic!("no start on the new owner:\n{}", c.log_tail(to)));
        eprintln!("old runner ended {ended}, released {released}, new runner started {started}");
        assert!(ended <= released, "{ended} <= {released}");
        assert!(released < started, "{released} < {started}");
        // the worker that was asked runs nothing of it
        assert!(
            !c.log(via).contains("starting runner pipeline=mv"),
            "{}",
            c.log_tail(via)
        );
    }

    let want = events(&expected);
    let topic = format!("mv.{schema}.t");
    let seen = read_topic_async(kafka.bootstrap_servers(), &topic, "read_uncommitted", want).await;
    assert_histories(&seen.histories, &expected);
    eprintln!(
        "{total_tx} source transactions, {want} change events, {} replays; records per epoch {:?}",
        seen.replays, seen.epochs
    );
    // both owners published, under their own epochs; a later epoch only if the new owner's
    // lease lapsed afterwards (a loaded machine: an ordinary failover, logged)
    let epochs: Vec<u64> = seen.epochs.keys().copied().collect();
    assert_eq!(epochs[..2], [old_epoch, new_epoch], "{:?}", seen.epochs);
    if epochs.len() == 2 {
        // the old runner committed what Kafka had acknowledged before it ended: the new
        // owner resumed exactly there
        assert_eq!(seen.replays, 0, "a move replayed records");
    }
    if epochs.len() > 2 {
        let c = cluster.lock().unwrap();
        assert!(
            c.logged("exit=Fenced { code: \"lease_expired\" }") > 0,
            "epochs {:?} without a lapsed lease",
            seen.epochs
        );
        eprintln!("a lease lapsed after the move: epochs {:?}", seen.epochs);
    }
    admin
        .query_drop(format!("DROP DATABASE `{schema}`"))
        .await
        .unwrap();
}

/// One run of the `capstan` CLI: its exit status must be 0.
struct CliRun {
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

fn cli(args: &[&str]) -> CliRun {
    let out = std::process::Command::new(capstan_binary().expect("capstan built"))
        .args(args)
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .output()
        .expect("run capstan");
    let run = CliRun {
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    };
    assert!(out.status.success(), "{args:?}: {run:?}");
    run
}

/// `(owner, move_to, epoch)` of every pipeline in `names` as worker `via` sees them.
fn placement(
    c: &Cluster,
    via: u64,
    names: &[String],
) -> Option<BTreeMap<String, (u64, Value, u64)>> {
    names
        .iter()
        .map(|n| {
            let st = c.pipeline_status(via, n)?;
            Some((
                n.clone(),
                (
                    st["owner"].as_u64()?,
                    st["move_to"].clone(),
                    st["epoch"].as_u64()?,
                ),
            ))
        })
        .collect()
}

/// Waits until worker `via` shows every pipeline of `names` owned as `want` says, with no
/// move pending.
fn wait_placed(
    c: &Cluster,
    via: u64,
    names: &[String],
    want: impl Fn(&str) -> u64,
) -> BTreeMap<String, (u64, Value, u64)> {
    c.wait_until(SETTLE, |c| {
        let p = placement(c, via, names)?;
        p.iter()
            .all(|(n, (o, m, _))| *o == want(n) && m.is_null())
            .then_some(p)
    })
    .unwrap_or_else(|| panic!("not placed: {:?}", placement(c, via, names)))
}

#[test]
fn a_rebalance_spreads_nine_pipelines_gathered_on_one_worker() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let names: Vec<String> = (0..9).map(|i| format!("r{i}")).collect();
    for n in &names {
        let (s, b) = c
            .send(
                leader,
                Method::POST,
                "/pipelines",
                Some(&idle_definition(n)),
            )
            .unwrap();
        assert_eq!(s, 201, "{b}");
        // paused: owned, no runner
        let (s, b) = c
            .send(leader, Method::PUT, &format!("/pipelines/{n}/pause"), None)
            .unwrap();
        assert_eq!(s, 202, "{b}");
    }
    let spread = c
        .wait_until(SETTLE, |c| placement(c, 2, &names))
        .expect("all owned");
    // gather them on worker 1 by moves, asked of worker 2
    for (n, (owner, _, _)) in &spread {
        let (s, b) = c
            .send(
                2,
                Method::POST,
                &format!("/pipelines/{n}/move"),
                Some(&json!({"to": 1})),
            )
            .unwrap();
        let want = if *owner == 1 { 200 } else { 202 };
        assert_eq!(s, want, "{n}: {b}");
    }
    let gathered = wait_placed(&c, 2, &names, |_| 1);
    for (n, (_, _, epoch)) in &gathered {
        let (owner, _, before) = &spread[n];
        if *owner != 1 {
            assert!(epoch > before, "{n}: epoch {epoch} after {before}");
        }
    }

    // refused moves
    let (s, b) = c
        .send(
            2,
            Method::POST,
            "/pipelines/nope/move",
            Some(&json!({"to": 1})),
        )
        .unwrap();
    assert_eq!(
        (s, b["error_code"].as_str()),
        (404, Some("unknown_pipeline")),
        "{b}"
    );
    let (s, b) = c
        .send(
            2,
            Method::POST,
            "/pipelines/r0/move",
            Some(&json!({"to": 9})),
        )
        .unwrap();
    assert_eq!(
        (s, b["error_code"].as_str(), b["field"].as_str()),
        (404, Some("unknown_member"), Some("to")),
        "{b}"
    );

    // the CLI prints the plan
    let url = c.workers[&3].api();
    let run = cli(&["cluster", "rebalance", "--url", &url]);
    assert_eq!(
        run.stdout,
        "6 moves planned (dry run; `capstan cluster rebalance --apply` starts them)\n\
         \x20 r0 node 1 -> node 2\n\
         \x20 r1 node 1 -> node 3\n\
         \x20 r2 node 1 -> node 2\n\
         \x20 r3 node 1 -> node 3\n\
         \x20 r4 node 1 -> node 2\n\
         \x20 r5 node 1 -> node 3\n\
         NODE   BEFORE  AFTER\n\
         1           9      3\n\
         2           0      3\n\
         3           0      3\n",
        "{run:?}"
    );

    // the dry run: the plan, move by move, and nothing moves
    let (s, plan) = c.send(3, Method::POST, "/cluster/rebalance", None).unwrap();
    assert_eq!(s, 200, "{plan}");
    let moves = |pairs: &[(&str, u64)]| -> Value {
        pairs
            .iter()
            .map(|(p, to)| json!({"pipeline": p, "from": 1, "to": to}))
            .collect()
    };
    let six = moves(&[
        ("r0", 2),
        ("r1", 3),
        ("r2", 2),
        ("r3", 3),
        ("r4", 2),
        ("r5", 3),
    ]);
    assert_eq!(
        plan,
        json!({"dry_run": true, "moves": six, "workers": [
            {"node": 1, "before": 9, "after": 3},
            {"node": 2, "before": 0, "after": 3},
            {"node": 3, "before": 0, "after": 3}]})
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(placement(&c, 2, &names), Some(gathered.clone()));

    // applied: 3/3/3, exactly as planned
    let (s, applied) = c
        .send(
            3,
            Method::POST,
            "/cluster/rebalance",
            Some(&json!({"dry_run": false})),
        )
        .unwrap();
    assert_eq!(s, 202, "{applied}");
    assert_eq!(applied["moves"], six);
    let target: BTreeMap<String, u64> = six
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["pipeline"].as_str().unwrap().to_string(),
                m["to"].as_u64().unwrap(),
            )
        })
        .collect();
    let placed = wait_placed(&c, 2, &names, |n| target.get(n).copied().unwrap_or(1));
    let (_, cluster) = c.get(1, "/cluster").unwrap();
    let counts: BTreeMap<u64, usize> = cluster["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["id"].as_u64().unwrap(),
                m["owned_pipelines"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        counts,
        BTreeMap::from([(1, 3), (2, 3), (3, 3)]),
        "{cluster}"
    );
    for (n, (_, _, epoch)) in &placed {
        let before = gathered[n].2;
        if target.contains_key(n) {
            assert!(*epoch > before, "{n} moved: epoch {epoch} after {before}");
        } else {
            assert_eq!(*epoch, before, "{n} stayed");
        }
    }
    let (s, again) = c
        .send(
            1,
            Method::POST,
            "/cluster/rebalance",
            Some(&json!({"dry_run": true})),
        )
        .unwrap();
    assert_eq!((s, &again["moves"]), (200, &json!([])), "{again}");

    // the CLI moves one and waits until its new owner holds it
    let run = cli(&[
        "pipeline",
        "move",
        "r0",
        "--to",
        "3",
        "--wait",
        "paused",
        "--timeout",
        "30",
        "--url",
        &url,
    ]);
    assert_eq!(
        run.stdout,
        "moving r0 from node 2 to node 3: node 2 stops its runner, then node 3 takes it\n\
         r0 is paused\n",
        "{run:?}"
    );
    let (owner, move_to, epoch) = placement(&c, 1, &names[..1]).unwrap()["r0"].clone();
    assert_eq!((owner, move_to), (3, Value::Null));
    assert!(epoch > placed["r0"].2);

    // a worker whose lease expired takes nothing
    c.kill9(3);
    c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(1, "/cluster")?;
        v["members"]
            .as_array()?
            .iter()
            .any(|m| m["id"] == 3 && m["health"] == "expired")
            .then_some(())
    })
    .expect("worker 3 expired");
    let (s, b) = c
        .send(
            1,
            Method::POST,
            "/pipelines/r6/move",
            Some(&json!({"to": 3})),
        )
        .unwrap();
    assert_eq!(
        (s, b["error_code"].as_str()),
        (409, Some("member_not_live")),
        "{b}"
    );
}
