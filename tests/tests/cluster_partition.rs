//! Network partitions (issue 17, item 2): three real workers, each in a network namespace of its
//! own (`capstan_tests::net_lab`), stream one at-least-once pipeline while two writers commit
//! on MySQL; packets between workers are dropped while every worker keeps reaching MySQL and
//! Kafka. A tap (`load_common::topic_tap`) reads the table topic throughout and notes when each
//! record arrived and with which `capstan.epoch`.
//!
//! - the owner cut off from both other workers: it stops publishing within its lease (no
//!   record of its epoch arrives later than the lease and a margin after the cut), another
//!   worker takes over at a higher epoch; healed, the old owner follows the same leader, owns
//!   nothing and publishes nothing again;
//!
//! Each scenario ends with the consumer-side check: every change the writers committed, in
//! per-key order, nothing extra; every duplicate an exact replay identified by its headers.
//! The scenarios run one at a time (timing bounds on two shared cores).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;

use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::net_lab::NetLab;
use capstan_tests::{kafka, mysql, unique_name, DbEnv, KafkaEnv};
use load_common::topic_tap::{Receipt, TopicTap};
use load_common::*;
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::json;
use tokio::sync::Mutex;
use tokio::task::block_in_place;

const SETTLE: Duration = Duration::from_secs(30);
const WRITERS: u64 = 2;
/// The workers' owner lease (the default).
const LEASE: Duration = Duration::from_millis(2_000);
/// How much later than its lease a cut-off owner's last record may reach a consumer: records
/// enqueued just before the lease ran out, the client's batching, the consumer's fetch.
const ARRIVAL_MARGIN: Duration = Duration::from_millis(1_500);

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// A cluster in namespaces, streaming pipeline `load` on a fresh schema.
struct Partitioned {
    // dropped first: the workers stop before their namespaces go
    cluster: Cluster,
    net: NetLab,
    db: DbEnv,
    kafka: KafkaEnv,
    schema: String,
    topic: String,
}

impl Partitioned {
    /// The lab, the cluster, the schema and the pipeline streaming; `None` when skipped.
    async fn start(prefix: &str, server_id: u32) -> Option<Partitioned> {
        let db = mysql()?;
        let kafka = kafka()?;
        let kafka_port: u16 = kafka
            .bootstrap_servers()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("CAPSTAN_KAFKA_BOOTSTRAP is host:port");
        let schema = unique_name(prefix);
        db.admin_conn()
            .await
            .query_drop(format!(
                "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)"
            ))
            .await
            .unwrap();
        let services = [db.port, kafka_port];
        let (net, cluster) = block_in_place(|| {
            let net = NetLab::create(&[1, 2, 3], &services)?;
            let cluster =
                Cluster::start_placed(3, |_| String::new(), Vec::new(), |id| net.placement(id))?;
            Some((net, cluster))
        })?;
        let definition = json!({
            "name": "load",
            "source": {
                "host": db.host, "port": db.port, "user": db.user, "password": db.password,
                "tls": {"mode": "verify_none"}, "server_id": server_id + std::process::id() % 500,
                "flavor": "mysql"
            },
            "tables": {"include": [format!("{schema}.t")]},
            "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "np"},
            "start_position": "current"
        });
        block_in_place(|| {
            let leader = cluster
                .wait_for_leader(&[1, 2, 3], SETTLE)
                .expect("a leader");
            cluster.create_streaming(leader, &definition, SETTLE);
        });
        let topic = format!("np.{schema}.t");
        Some(Partitioned {
            cluster,
            net,
            db,
            kafka,
            schema,
            topic,
        })
    }

    /// (owner, epoch) of `load` once worker `via` sees it streaming with `accept` true.
    fn wait_streaming(
        &self,
        via: u64,
        timeout: Duration,
        accept: impl Fn(u64, u64) -> bool,
    ) -> Option<(u64, u64)> {
        self.cluster.wait_until(timeout, |c| {
            c.pipeline_owner(via, "load")
                .filter(|(o, e, s)| s == "streaming" && accept(*o, *e))
                .map(|(o, e, _)| (o, e))
        })
    }

    /// Moves `load` to worker `to` and waits until it streams there.
    fn move_to(&self, via: u64, to: u64) -> (u64, u64) {
        let (s, b) = self
            .cluster
            .send(
                via,
                Method::POST,
                "/pipelines/load/move",
                Some(&json!({"to": to})),
            )
            .expect("api reachable");
        assert!(s == 202 || s == 200, "move: {s} {b}");
        self.wait_streaming(via, SETTLE, |o, _| o == to)
            .unwrap_or_else(|| panic!("never streaming on {to}"))
    }

    /// Waits until every worker names the same leader, the same voters and the same owner and
    /// epoch of `load` (streaming): the cluster converged. The leader and (owner, epoch).
    fn wait_converged(&self, timeout: Duration) -> Option<(u64, (u64, u64))> {
        self.cluster.wait_until(timeout, |c| {
            let views: Vec<_> = [1, 2, 3]
                .into_iter()
                .map(|id| {
                    let (s, v) = c.get(id, "/cluster")?;
                    (s == 200).then_some(())?;
                    let mut voters: Vec<u64> = v["members"]
                        .as_array()?
                        .iter()
                        .filter(|m| m["voter"] == true)
                        .filter_map(|m| m["id"].as_u64())
                        .collect();
                    voters.sort_unstable();
                    let health = c.get(id, "/health")?;
                    (health.0 == 200).then_some(())?;
                    let (o, e, state) = c.pipeline_owner(id, "load")?;
                    (state == "streaming").then_some(())?;
                    Some((v["leader"].as_u64()?, voters, (o, e)))
                })
                .collect::<Option<_>>()?;
            let first = views.first()?.clone();
            (views.iter().all(|v| *v == first) && first.1 == [1, 2, 3])
                .then_some((first.0, first.2))
        })
    }

    /// Stops the writers, reads the whole topic through the tap and checks it against what
    /// they committed: every change once in per-key order, duplicates only as identified
    /// replays. The figures: (transactions, change events, replays), and the receipts.
    async fn check(&self, writers: Writers, tap: TopicTap) -> (u64, usize, usize, Vec<Receipt>) {
        let (total_tx, expected) = writers.stop().await;
        assert!(total_tx > 100, "the writers really wrote ({total_tx})");
        let want = events(&expected);
        let (seen, receipts) = block_in_place(|| tap.finish(want, Duration::from_secs(120)));
        assert_histories(&seen.histories, &expected);
        (total_tx, want, seen.replays, receipts)
    }

    async fn drop_schema(&self) {
        self.db
            .admin_conn()
            .await
            .query_drop(format!("DROP DATABASE `{}`", self.schema))
            .await
            .unwrap();
    }
}

/// The owner cut off from the other two workers while it still reaches MySQL and Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_owner_cut_off_from_the_cluster_stops_within_its_lease_and_another_takes_over() {
    let _serial = SERIAL.lock().await;
    let Some(mut p) = Partitioned::start("np_owner", 7000).await else {
        return;
    };
    // the owner a follower, so that only the partition (not a leader change) stops it
    let (owner, epoch) = block_in_place(|| {
        let leader = p.cluster.wait_for_leader(&[1, 2, 3], SETTLE).unwrap();
        let (owner, epoch) = p.wait_streaming(leader, SETTLE, |_, _| true).unwrap();
        if owner == leader {
            p.move_to(
                leader,
                [1, 2, 3].into_iter().find(|&n| n != leader).unwrap(),
            )
        } else {
            (owner, epoch)
        }
    });
    let writers = Writers::start(&p.db, &p.schema, WRITERS);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let tap = block_in_place(|| TopicTap::start(p.kafka.bootstrap_servers(), &p.topic));
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let others: Vec<u64> = [1, 2, 3].into_iter().filter(|&n| n != owner).collect();
    p.net.isolate(owner);
    let cut = Instant::now();
    let (new_owner, new_epoch, takeover) = block_in_place(|| {
        let (o, e) = p
            .wait_streaming(others[0], SETTLE, |o, e| o != owner && e > epoch)
            .unwrap_or_else(|| {
                panic!(
                    "no takeover: {:?}",
                    p.cluster.pipeline_status(others[0], "load")
                )
            });
        (o, e, cut.elapsed())
    });
    // the cut-off worker knows it lost its lease: its health says so
    block_in_place(|| {
        p.cluster
            .wait_until(SETTLE, |c| {
                c.get(owner, "/health").filter(|(s, _)| *s == 503)
            })
            .expect("the cut-off owner reports degraded");
    });
    tokio::time::sleep(Duration::from_secs(3)).await;

    p.net.heal_all();
    let healed = Instant::now();
    let (leader, converged_owner) = block_in_place(|| p.wait_converged(SETTLE))
        .unwrap_or_else(|| panic!("no convergence after the heal"));
    let converged = healed.elapsed();
    assert_eq!(
        converged_owner,
        (new_owner, new_epoch),
        "the pipeline stays where it went"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    let (total_tx, want, replays, receipts) = p.check(writers, tap).await;
    let of_old: Vec<&Receipt> = receipts.iter().filter(|r| r.epoch == Some(epoch)).collect();
    // it was publishing when cut off ...
    assert!(
        of_old
            .iter()
            .any(|r| r.at < cut && cut - r.at < Duration::from_secs(1)),
        "owner {owner} published in the second before the cut"
    );
    // ... and stopped within its lease
    let last_old = of_old.iter().map(|r| r.at).max().unwrap();
    let stopped_after = last_old.saturating_duration_since(cut);
    assert!(
        stopped_after <= LEASE + ARRIVAL_MARGIN,
        "a record of the cut-off owner's epoch {epoch} arrived {stopped_after:?} after the cut"
    );
    assert!(
        receipts.iter().all(|r| r.epoch >= Some(epoch)),
        "no record of an older epoch"
    );
    let of_new = receipts
        .iter()
        .filter(|r| r.epoch == Some(new_epoch))
        .count();
    assert!(of_new > 0, "the new owner published");
    assert!(
        receipts.iter().all(|r| r.epoch <= Some(new_epoch)),
        "healed, nobody took the pipeline again"
    );
    let log = p.cluster.log(owner);
    let ended = log
        .lines()
        .find(|l| l.contains("runner ended") && l.contains(&format!("epoch={epoch} ")));
    assert!(
        ended.is_some(),
        "the cut-off owner's runner ended: {}",
        p.cluster.log_tail(owner)
    );
    eprintln!("owner {owner}: {}", ended.unwrap_or_default());
    eprintln!(
        "figures: owner cut off: faults survived 1 (owner {owner} isolated at epoch {epoch}, \
         healed after {:?}); its last record arrived {stopped_after:?} after the cut (lease \
         {LEASE:?}); worker {new_owner} streamed at epoch {new_epoch} {takeover:?} after the \
         cut; converged on leader {leader} {converged:?} after the heal; {total_tx} \
         transactions, {want} change events, 0 lost, {replays} duplicates (replays identified \
         by capstan.position and capstan.record); records of the old epoch {}, of the new {of_new}",
        healed - cut,
        of_old.len()
    );
    p.drop_schema().await;
}
