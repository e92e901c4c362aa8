//! Benchmarks of the Raft control plane on three real `capstan worker` processes (issue 4):
//! failover time (kill -9 an owner until the API shows every one of its pipelines on a new
//! owner) and checkpoint commits per second through the group. Ignored by default; run with
//!
//! ```text
//! cargo build -p capstan-worker --bin capstan
//! cargo test -p capstan-tests --test cluster_bench -- --ignored --nocapture --test-threads 1
//! ```
//!
//! Pipelines are created and checkpoints committed by posting `Command`s to the leader's
//! `/raft/write` (the endpoint a follower owner's writes are forwarded to), so the figures do
//! not depend on the pipeline definition schema; the pipelines stay `paused`, so owners are
//! assigned but no runner starts. Results are recorded in docs/performance.md.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(30);
const TRIALS: usize = 20;
const SOURCE_UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Posts `command` to node `id`'s `/raft/write`; the reply is `{"Ok": response}` or
/// `{"Err": error}`.
fn raft_write(c: &Cluster, http: &reqwest::blocking::Client, id: u64, command: &Value) -> Value {
    http.post(format!(
        "http://127.0.0.1:{}/raft/write",
        c.workers[&id].raft_port
    ))
    .json(command)
    .send()
    .unwrap()
    .json()
    .unwrap()
}

fn applied(reply: &Value) -> bool {
    reply["Ok"]["outcome"] == "applied"
}

/// Creates `name` through the leader, desired state `paused` (owned, no runner).
fn create_paused(c: &Cluster, http: &reqwest::blocking::Client, leader: u64, name: &str) {
    let r = raft_write(
        c,
        http,
        leader,
        &json!({"command": "create_pipeline", "name": name, "spec": {"name": name}}),
    );
    assert!(applied(&r), "create {name}: {r}");
    let r = raft_write(
        c,
        http,
        leader,
        &json!({"command": "set_desired_state", "name": name, "state": "paused"}),
    );
    assert!(applied(&r), "pause {name}: {r}");
}

/// (owner, epoch) of `name` as node `id` serves it.
fn owner(c: &Cluster, id: u64, name: &str) -> Option<(u64, u64)> {
    let (status, s) = c.get(id, &format!("/pipelines/{name}/status"))?;
    if status != 200 {
        return None;
    }
    Some((s["owner"].as_u64()?, s["epoch"].as_u64()?))
}

/// Waits until every worker in `ids` agrees on a leader and reports a valid lease.
fn settled(c: &Cluster, ids: &[u64]) -> u64 {
    let leader = c
        .wait_for_leader(ids, SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    for &id in ids {
        let ok = c.wait_until(SETTLE, |c| {
            let (_, h) = c.get(id, "/health")?;
            (h["status"] == "ok").then_some(())
        });
        assert!(ok.is_some(), "node {id} never healthy:\n{}", c.log_tail(id));
    }
    leader
}

/// The value at quantile `q` (nearest rank) of sorted `v`.
fn quantile(v: &[Duration], q: f64) -> Duration {
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn summary(label: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        println!("{label}: no trials");
        return;
    }
    v.sort();
    println!(
        "{label}: n={} p50={:.2}s p95={:.2}s max={:.2}s min={:.2}s",
        v.len(),
        quantile(&v, 0.50).as_secs_f64(),
        quantile(&v, 0.95).as_secs_f64(),
        v[v.len() - 1].as_secs_f64(),
        v[0].as_secs_f64(),
    );
}

/// kill -9 an owner, 20 times; each trial measures from the kill until a survivor's API shows
/// every pipeline of the victim on another worker with a higher epoch (polled every 20 ms).
/// Three pipelines spread over the three workers; trials alternate between killing an owner
/// that is the Raft leader and one that is a follower, so both paths are measured. Meanwhile
/// the survivors' `/health` is polled: a survivor whose lease lapsed (a healthy owner that
/// would have stopped its pipelines) is reported.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn bench_failover_after_kill9_of_an_owner() {
    // other timings than the defaults, to compare: e.g.
    // CAPSTAN_BENCH_WORKER_TOML=$'lease_ms = 2000\nheartbeat_interval_ms = 100'
    let extra = std::env::var("CAPSTAN_BENCH_WORKER_TOML").unwrap_or_default();
    if !extra.is_empty() {
        println!("worker timings: defaults overridden by {extra:?}");
    }
    let Some(mut c) = Cluster::start_with(3, |_| format!("{extra}\n")) else {
        return;
    };
    let http = client();
    let ids = [1u64, 2, 3];
    let leader = settled(&c, &ids);
    let names = ["f1", "f2", "f3"];
    for n in names {
        create_paused(&c, &http, leader, n);
    }
    let mut all = Vec::new();
    let mut by_kind: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    let mut elections = Vec::new();
    let mut lease_lapses = 0;
    println!(
        "trial  killed  was_leader  pipelines  new_owners  failover_s  new_leader_s  lapsed_leases"
    );
    for trial in 1..=TRIALS {
        let leader = settled(&c, &ids);
        let owners: BTreeMap<&str, (u64, u64)> = c
            .wait_until(SETTLE, |c| {
                let o: BTreeMap<&str, (u64, u64)> = names
                    .iter()
                    .filter_map(|&n| owner(c, leader, n).map(|x| (n, x)))
                    .collect();
                (o.len() == names.len()).then_some(o)
            })
            .expect("all pipelines owned");
        let owns = |id: u64| owners.values().filter(|(o, _)| *o == id).count();
        let followers_owning: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|&id| id != leader && owns(id) > 0)
            .collect();
        let want_leader = trial % 2 == 1;
        let victim = if (want_leader && owns(leader) > 0) || followers_owning.is_empty() {
            leader
        } else {
            followers_owning[0]
        };
        let moved: Vec<(&str, u64)> = owners
            .iter()
            .filter(|(_, (o, _))| *o == victim)
            .map(|(n, (_, e))| (*n, *e))
            .collect();
        let observer = ids.iter().copied().find(|&id| id != victim).unwrap();
        let survivors: Vec<u64> = ids.iter().copied().filter(|&id| id != victim).collect();
        // survivors seen without a valid lease (a healthy worker must keep it, even through
        // the election that follows a leader's death)
        let mut lapsed: Vec<u64> = Vec::new();

        let killed_at = Instant::now();
        c.kill9(victim);
        let mut new_leader_after: Option<Duration> = None;
        let new_owners: Vec<u64> = loop {
            if victim == leader && new_leader_after.is_none() {
                let seen = c
                    .get(observer, "/cluster")
                    .and_then(|(_, v)| v["leader"].as_u64())
                    .filter(|&l| l != victim);
                if seen.is_some() {
                    new_leader_after = Some(killed_at.elapsed());
                }
            }
            for &id in &survivors {
                let valid = c.get(id, "/health").map(|(_, h)| h["lease_valid"] == true);
                if valid == Some(false) && !lapsed.contains(&id) {
                    lapsed.push(id);
                }
            }
            let now_owned: Vec<u64> = moved
                .iter()
                .filter_map(|(n, e)| {
                    owner(&c, observer, n).filter(|(o, ne)| *o != victim && ne > e)
                })
                .map(|(o, _)| o)
                .collect();
            if now_owned.len() == moved.len() {
                break now_owned;
            }
            assert!(
                killed_at.elapsed() < SETTLE,
                "trial {trial}: not moved; observer log:\n{}",
                c.log_tail(observer)
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = killed_at.elapsed();
        let kind = if victim == leader {
            "owner was the leader"
        } else {
            "owner was a follower"
        };
        println!(
            "{trial:>5}  {victim:>6}  {:>10}  {:>9}  {:>10}  {:>10.3}  {:>12}  {:>13}",
            victim == leader,
            moved.len(),
            format!("{new_owners:?}"),
            took.as_secs_f64(),
            new_leader_after.map_or("-".into(), |d| format!("{:.3}", d.as_secs_f64())),
            format!("{lapsed:?}"),
        );
        lease_lapses += lapsed.len();
        elections.extend(new_leader_after);
        all.push(took);
        by_kind.entry(kind).or_default().push(took);

        // bring the victim back before the next trial (it owns nothing after the move)
        c.spawn(victim);
    }
    println!("survivor leases that lapsed during a failover: {lease_lapses}");
    summary("failover, all trials", all);
    summary("new leader seen (leader kills)", elections);
    for (kind, v) in by_kind {
        summary(&format!("failover, {kind}"), v);
    }
}

/// Checkpoint commits through the group: `CommitCheckpoint` with the owner's epoch, each
/// covering the previous one, posted to the leader's `/raft/write` and waited for (committed
/// by a quorum and applied). First one writer (one pipeline, as one owner commits), then
/// eight writers on eight pipelines at once.
#[test]
#[ignore = "benchmark: run with --ignored --nocapture"]
fn bench_checkpoint_commits_per_second() {
    let Some(c) = Cluster::start(3) else {
        return;
    };
    let http = client();
    let leader = settled(&c, &[1, 2, 3]);
    let names: Vec<String> = (0..8).map(|i| format!("ck{i}")).collect();
    for n in &names {
        create_paused(&c, &http, leader, n);
    }
    let epochs: Vec<u64> = names
        .iter()
        .map(|n| {
            c.wait_until(SETTLE, |c| owner(c, leader, n))
                .expect("owned")
                .1
        })
        .collect();

    let run = |name: &str, epoch: u64, start: u64, for_how_long: Duration| {
        let http = client();
        let mut latencies = Vec::new();
        let mut next = start;
        let began = Instant::now();
        while began.elapsed() < for_how_long {
            let cmd = json!({
                "command": "commit_checkpoint",
                "pipeline": name,
                "epoch": epoch,
                "position": {"flavor": "mysql", "gtids": format!("{SOURCE_UUID}:1-{next}")},
            });
            let sent = Instant::now();
            let r = raft_write(&c, &http, leader, &cmd);
            latencies.push(sent.elapsed());
            assert!(applied(&r), "checkpoint {next} of {name}: {r}");
            next += 1;
        }
        (latencies, began.elapsed(), next)
    };

    // warm up the connection and the leader's path
    let (_, _, after_warmup) = run(&names[0], epochs[0], 1, Duration::from_secs(1));

    let (mut lat, took, _) = run(&names[0], epochs[0], after_warmup, Duration::from_secs(10));
    let n = lat.len();
    lat.sort();
    println!(
        "checkpoint commits, 1 writer: {n} in {:.1}s = {:.0}/s; latency p50={:.1}ms p99={:.1}ms max={:.1}ms",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        quantile(&lat, 0.50).as_secs_f64() * 1e3,
        quantile(&lat, 0.99).as_secs_f64() * 1e3,
        lat[n - 1].as_secs_f64() * 1e3,
    );

    let began = Instant::now();
    let results: Vec<(Vec<Duration>, Duration, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .zip(&epochs)
            .enumerate()
            .map(|(i, (n, &e))| {
                let start = if i == 0 { 1_000_000 } else { 1 };
                let run = &run;
                s.spawn(move || run(n, e, start, Duration::from_secs(10)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let took = began.elapsed();
    let mut lat: Vec<Duration> = results.iter().flat_map(|r| r.0.clone()).collect();
    let n = lat.len();
    lat.sort();
    println!(
        "checkpoint commits, 8 writers: {n} in {:.1}s = {:.0}/s; latency p50={:.1}ms p99={:.1}ms max={:.1}ms",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        quantile(&lat, 0.50).as_secs_f64() * 1e3,
        quantile(&lat, 0.99).as_secs_f64() * 1e3,
        lat[n - 1].as_secs_f64() * 1e3,
    );

    // every node applied the last checkpoints
    for id in [1, 2, 3] {
        let caught_up = c.wait_until(SETTLE, |c| {
            let (_, s) = c.get(id, "/pipelines/ck1/status")?;
            s["position"].as_str().map(|p| p.to_string())
        });
        assert!(caught_up.is_some(), "node {id} has no checkpoint for ck1");
    }
}
