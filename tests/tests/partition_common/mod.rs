//! [`Partitioned`]: the setup the partition scenarios share — three workers in network
//! namespaces of their own (`capstan_tests::net_lab`) streaming pipeline `load` (at-least-once)
//! from a fresh MySQL schema, writers and a tap on the table topic — and the checks they share.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capstan_tests::cluster::{idle_definition, Cluster};
use capstan_tests::net_lab::NetLab;
use capstan_tests::verify_run::verify_pipeline;
use capstan_tests::{kafka, mysql, unique_name, DbEnv, KafkaEnv};
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::json;
use tokio::task::block_in_place;

use crate::load_common::topic_tap::{Receipt, TopicTap};
use crate::load_common::{assert_histories, events, Writers};

pub const SETTLE: Duration = Duration::from_secs(30);
const WRITERS: u64 = 2;
/// The workers' owner lease (the default).
pub const LEASE: Duration = Duration::from_millis(700);
/// How much later than its lease a cut-off owner's last record may reach a consumer: records
/// enqueued just before the lease ran out, the client's batching, the consumer's fetch.
pub const ARRIVAL_MARGIN: Duration = Duration::from_millis(1_500);
/// Every worker.
pub const ALL: [u64; 3] = [1, 2, 3];

/// The other workers than `n`.
pub fn others(n: u64) -> Vec<u64> {
    ALL.into_iter().filter(|&m| m != n).collect()
}

/// What the consumer-side check found.
#[derive(Debug)]
pub struct Figures {
    /// Source transactions the writers committed.
    pub transactions: u64,
    /// Change events they make (each on the topic, in per-key order: none lost).
    pub events: usize,
    /// Records read again, each an exact replay identified by its headers.
    pub duplicates: usize,
    /// The same duplicates as `capstan verify` lists them (by key digest, partition and
    /// offset), counted by kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Every record's arrival at the tap.
    pub receipts: Vec<Receipt>,
}

/// A cluster in namespaces, streaming pipeline `load` on a fresh schema.
pub struct Partitioned {
    // dropped first: the workers stop before their namespaces go
    pub cluster: Cluster,
    pub net: NetLab,
    pub db: DbEnv,
    pub kafka: KafkaEnv,
    pub schema: String,
    pub topic: String,
}

impl Partitioned {
    /// The lab, the cluster, the schema and the pipeline streaming; `None` when skipped. The
    /// pipeline's MySQL `server_id` is `server_id` plus the process id modulo 500 (a range of
    /// its own per scenario, apart from the other tests' replicas).
    pub async fn start(prefix: &str, server_id: u32) -> Option<Partitioned> {
        let db = mysql()?;
        let kafka = kafka()?;
        let kafka_port: u16 = kafka
            .bootstrap_servers()
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .expect("CAPSTAN_KAFKA_BOOTSTRAP is host:port");
        let services = [db.port, kafka_port];
        let (net, cluster) = block_in_place(|| {
            let net = NetLab::create(&[1, 2, 3], &services)?;
            let cluster =
                Cluster::start_placed(3, |_| String::new(), Vec::new(), |id| net.placement(id))?;
            Some((net, cluster))
        })?;
        let schema = unique_name(prefix);
        db.admin_conn()
            .await
            .query_drop(format!(
                "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id BIGINT PRIMARY KEY, v BIGINT)"
            ))
            .await
            .unwrap();
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
    pub fn wait_streaming(
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
    pub fn move_to(&self, via: u64, to: u64) -> (u64, u64) {
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

    /// Waits until every worker is healthy (knows a leader, holds its lease) and names the same
    /// leader, the same three voters and the same owner and epoch of `load` (streaming, listed
    /// by that member only): the cluster converged. The leader and (owner, epoch).
    pub fn wait_converged(&self, timeout: Duration) -> Option<(u64, (u64, u64))> {
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
                    // owned once: only the owner lists it among its pipelines
                    let owning: Vec<u64> = v["members"]
                        .as_array()?
                        .iter()
                        .filter(|m| {
                            m["owned_pipelines"]
                                .as_array()
                                .is_some_and(|p| p.iter().any(|n| n == "load"))
                        })
                        .filter_map(|m| m["id"].as_u64())
                        .collect();
                    (owning == [o]).then_some(())?;
                    Some((v["leader"].as_u64()?, voters, (o, e)))
                })
                .collect::<Option<_>>()?;
            let first = views.first()?.clone();
            (views.iter().all(|v| *v == first) && first.1 == ALL).then_some((first.0, first.2))
        })
    }

    /// Stops the writers, reads the whole topic through the tap and checks it against what
    /// they committed: every change once in per-key order (0 lost, nothing extra), duplicates
    /// only as exact replays identified by their headers.
    pub async fn check(&self, writers: Writers, tap: TopicTap) -> Figures {
        let (transactions, expected) = writers.stop().await;
        assert!(
            transactions > 100,
            "the writers really wrote ({transactions})"
        );
        let want = events(&expected);
        let (seen, receipts) = block_in_place(|| tap.finish(want, Duration::from_secs(120)));
        assert_histories(&seen.histories, &expected);
        let by_kind = block_in_place(|| self.verify(seen.replays));
        Figures {
            transactions,
            events: want,
            duplicates: seen.replays,
            by_kind,
            receipts,
        }
    }

    /// `capstan verify`, as a user runs it after the partition (through worker 1's API): the
    /// topic replays to the table, no row missing, extra or different; every duplicate listed
    /// by key digest, partition and offset, as many as the tap's `replays`. The duplicates by
    /// kind.
    fn verify(&self, replays: usize) -> BTreeMap<String, u64> {
        let run = verify_pipeline(
            &self.cluster.workers[&1].api(),
            "load",
            &self.db.password,
            &["--format", "json", "--examples", "100000"],
        );
        let t = run.table(&format!("{}.t", self.schema));
        let mut counts = t.clone();
        counts["duplicates"]["examples"] = serde_json::Value::Null;
        for category in ["missing", "extra", "differing", "unreadable"] {
            assert_eq!(t[category]["count"], 0, "{category}: {counts}");
        }
        assert_eq!(run.code, Some(0), "{counts}\n{}", run.stderr);
        assert_eq!(t["source_rows"], t["topic_keys"], "{counts}");
        let listed = t["duplicates"]["examples"].as_array().unwrap();
        assert_eq!(
            t["duplicates"]["count"].as_u64(),
            Some(listed.len() as u64),
            "each duplicate identified: {counts}"
        );
        assert_eq!(listed.len(), replays, "the tap's replays: {counts}");
        let mut kinds = BTreeMap::new();
        for d in listed {
            assert!(
                d["key"].is_string() && d["partition"].is_i64() && d["offset"].is_i64(),
                "{d}"
            );
            *kinds
                .entry(d["kind"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        kinds
    }

    /// Places `load` on the worker `choose(leader)` names (moving it there if it is not): the
    /// leader, the owner and its epoch.
    pub fn place_owner(&self, choose: impl Fn(u64) -> u64) -> (u64, u64, u64) {
        block_in_place(|| {
            let leader = self
                .cluster
                .wait_for_leader(&ALL, SETTLE)
                .expect("a leader");
            let (owner, epoch) = self.wait_streaming(leader, SETTLE, |_, _| true).unwrap();
            let want = choose(leader);
            let (owner, epoch) = if owner == want {
                (owner, epoch)
            } else {
                self.move_to(leader, want)
            };
            (leader, owner, epoch)
        })
    }

    /// Starts the writers and, once the topic exists, the tap.
    pub async fn load(&self) -> (Writers, TopicTap) {
        let writers = Writers::start(&self.db, &self.schema, WRITERS);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let tap = block_in_place(|| TopicTap::start(self.kafka.bootstrap_servers(), &self.topic));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        (writers, tap)
    }

    /// Two Raft writes through worker `via` (a pipeline created, then deleted): true when both
    /// were accepted.
    pub fn writes_through(&self, via: u64) -> bool {
        let probe = idle_definition("probe");
        let created = self
            .cluster
            .send(via, Method::POST, "/pipelines", Some(&probe))
            .is_some_and(|(s, _)| s == 201);
        let deleted = self
            .cluster
            .send(via, Method::DELETE, "/pipelines/probe", None)
            .is_some_and(|(s, _)| s == 204);
        created && deleted
    }

    /// The leader a majority of the workers name (whichever it is), if they do.
    pub fn majority_leader(&self) -> Option<u64> {
        let named: Vec<u64> = ALL
            .into_iter()
            .filter_map(|id| {
                self.cluster
                    .get(id, "/cluster")
                    .and_then(|(_, v)| v["leader"].as_u64())
            })
            .collect();
        named
            .iter()
            .copied()
            .find(|l| named.iter().filter(|m| *m == l).count() * 2 > ALL.len())
    }

    /// The pipeline's epoch now, as worker 1 reports it.
    pub fn epoch_now(&self) -> u64 {
        self.cluster
            .pipeline_owner(1, "load")
            .map(|(_, e, _)| e)
            .expect("the pipeline's status")
    }

    /// Worker `id`'s `last_applied`, as it reports it.
    pub fn last_applied(&self, id: u64) -> Option<u64> {
        self.cluster
            .get(id, "/cluster")
            .and_then(|(_, v)| v["last_applied"].as_u64())
    }

    /// The line of worker `id`'s log saying its runner of `load` at `epoch` ended.
    pub fn runner_ended(&self, id: u64, epoch: u64) -> String {
        let log = self.cluster.log(id);
        log.lines()
            .find(|l| l.contains("runner ended") && l.contains(&format!("epoch={epoch} ")))
            .unwrap_or_else(|| {
                panic!(
                    "worker {id}'s runner at epoch {epoch} never ended: {}",
                    self.cluster.log_tail(id)
                )
            })
            .to_string()
    }

    pub async fn drop_schema(&self) {
        self.db
            .admin_conn()
            .await
            .query_drop(format!("DROP DATABASE `{}`", self.schema))
            .await
            .unwrap();
    }
}

/// Asserts that the owner at `epoch` was publishing when it was cut off at `cut` (a record of
/// its epoch arrived in the two seconds before) and stopped within its lease (none arrived
/// later than the lease and [`ARRIVAL_MARGIN`] after the cut): how long after the cut its last
/// record arrived.
pub fn stopped_within_lease(receipts: &[Receipt], epoch: u64, cut: Instant) -> Duration {
    stopped_within(receipts, epoch, cut, LEASE + ARRIVAL_MARGIN)
}

/// [`stopped_within_lease`] with the bound `bound` after the cut.
pub fn stopped_within(receipts: &[Receipt], epoch: u64, cut: Instant, bound: Duration) -> Duration {
    let of_epoch: Vec<&Receipt> = receipts.iter().filter(|r| r.epoch == Some(epoch)).collect();
    assert!(
        of_epoch
            .iter()
            .any(|r| r.at < cut && cut - r.at < Duration::from_secs(2)),
        "the owner at epoch {epoch} published in the two seconds before the cut"
    );
    let last = of_epoch.iter().map(|r| r.at).max().unwrap();
    let after = last.saturating_duration_since(cut);
    assert!(
        after <= bound,
        "a record of the cut-off owner's epoch {epoch} arrived {after:?} after the cut (bound {bound:?})"
    );
    after
}

/// Asserts that every record carries an epoch within `first..=last`: no older owner published,
/// and none took the pipeline after `last`.
pub fn epochs_within(receipts: &[Receipt], first: u64, last: u64) {
    let outside: Vec<Option<u64>> = receipts
        .iter()
        .map(|r| r.epoch)
        .filter(|e| !matches!(e, Some(e) if (first..=last).contains(e)))
        .collect();
    assert!(
        outside.is_empty(),
        "records of epochs {outside:?} outside {first}..={last}"
    );
}

/// Asserts that the pipeline `converged` (owner, epoch) after the heal where the takeover
/// `moved` it, or later: on a loaded machine a lease can lapse after the takeover, an ordinary
/// failover at a higher epoch (said in the output). The last epoch.
pub fn settled(converged: (u64, u64), moved: (u64, u64)) -> u64 {
    assert!(
        converged == moved || converged.1 > moved.1,
        "the pipeline went from {moved:?} to {converged:?}"
    );
    if converged != moved {
        eprintln!(
            "note: the pipeline moved again after the takeover ({moved:?} -> {converged:?}): a \
             lease lapsed, an ordinary failover"
        );
    }
    converged.1
}

/// How many records of `epoch` arrived.
pub fn count_of(receipts: &[Receipt], epoch: u64) -> usize {
    receipts.iter().filter(|r| r.epoch == Some(epoch)).count()
}
