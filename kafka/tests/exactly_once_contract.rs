//! The exactly-once logic against Kafka's transactional contract: on the in-memory model, and
//! on the dev services' real Apache Kafka broker (`CAPSTAN_KAFKA_BOOTSTRAP`; skipped without
//! it, a failure under CI). The mock cluster cannot run these: it writes no transaction
//! markers (ADR-0003).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use capstan_core::position::{Flavor, Position};
use capstan_kafka::config::SinkConfig;
use capstan_kafka::exactly_once::{
    Checkpoint, CheckpointSource, ExactlyOncePublisher, KafkaTransactionalLog,
    MemoryTransactionalLog, OwnerIdentity, SnapshotProgress, TransactionalLog,
    TransactionalProducer, WithinTransaction,
};
use capstan_kafka::record::{TransactionProgress, HEADER_POSITION, HEADER_RECORD};
use capstan_kafka::topic_reader::ConsumedRecord;
use capstan_kafka::SinkError;

/// Topic names for one run (unique on a shared real broker).
struct Names {
    prefix: String,
    offsets: String,
    txn_id: String,
}

impl Names {
    fn new(test: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        Names {
            prefix: format!("eos-{test}-{nanos}"),
            offsets: format!("capstan.offsets.{test}.{nanos}"),
            txn_id: format!("capstan-{test}-{nanos}"),
        }
    }
    fn data_topic(&self) -> String {
        format!("{}.shop.orders", self.prefix)
    }
    fn owner(&self, epoch: u64) -> OwnerIdentity<'_> {
        self.owner_of("orders", &self.txn_id, epoch)
    }
    fn owner_of<'a>(&'a self, pipeline: &'a str, txn_id: &'a str, epoch: u64) -> OwnerIdentity<'a> {
        OwnerIdentity {
            pipeline,
            epoch,
            transactional_id: txn_id,
            offsets_topic: &self.offsets,
            incarnation: None,
        }
    }
}

fn checkpoint(upto: u64) -> Checkpoint {
    let text = if upto == 0 {
        String::new()
    } else {
        format!("{}:1-{upto}", common::UUID)
    };
    Checkpoint {
        position: Position::parse(Flavor::Mysql, &text).unwrap(),
        processed: None,
        snapshot: SnapshotProgress::default(),
        within: None,
    }
}

/// What an independent read_committed consumer of a topic sees.
trait CommittedView {
    async fn committed(&self, topic: &str) -> Vec<ConsumedRecord>;
}

impl CommittedView for MemoryTransactionalLog {
    async fn committed(&self, topic: &str) -> Vec<ConsumedRecord> {
        self.read_committed(topic)
    }
}

impl CommittedView for KafkaTransactionalLog {
    async fn committed(&self, topic: &str) -> Vec<ConsumedRecord> {
        self.committed_reader().read_all(topic).await.unwrap()
    }
}

/// (position, record) of every committed data record.
async fn committed_ids<L: CommittedView>(log: &L, topic: &str) -> Vec<(String, String)> {
    log.committed(topic)
        .await
        .iter()
        .map(|r| {
            (
                r.header_str(HEADER_POSITION).unwrap().to_string(),
                r.header_str(HEADER_RECORD).unwrap().to_string(),
            )
        })
        .collect()
}

fn gnos(ids: &[(String, String)]) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for (p, _) in ids {
        *m.entry(p.rsplit(':').next().unwrap().parse().unwrap())
            .or_insert(0) += 1;
    }
    m
}

async fn aborted_rows_are_invisible<L: TransactionalLog + CommittedView>(log: &L) {
    let names = Names::new("abort");
    let builder = common::builder(&names.prefix);
    let mut p = log.init_producer(&names.txn_id).await.unwrap();
    p.begin().await.unwrap();
    p.send(&common::records_of(
        &builder,
        &common::insert_tx(1, 1, 3),
        1,
    ))
    .await
    .unwrap();
    p.abort().await.unwrap();
    p.begin().await.unwrap();
    p.send(&common::records_of(
        &builder,
        &common::insert_tx(2, 10, 2),
        1,
    ))
    .await
    .unwrap();
    p.commit().await.unwrap();
    let ids = committed_ids(log, &names.data_topic()).await;
    assert_eq!(
        gnos(&ids),
        BTreeMap::from([(2, 2)]),
        "only the committed rows"
    );
}

async fn killed_owner_never_shows_and_new_owner_resumes_exactly<
    L: TransactionalLog + CommittedView,
>(
    log: &L,
) {
    let names = Names::new("resume");
    let builder = common::builder(&names.prefix);
    let (mut a, plan) = ExactlyOncePublisher::open(log, names.owner(1), checkpoint(0))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Raft);
    for gno in 1..=3 {
        let tx = common::insert_tx(gno, gno as i64 * 10, 2);
        a.publish(&common::records_of(&builder, &tx, 1), &checkpoint(gno))
            .await
            .unwrap();
    }
    // Owner A writes half of transaction 4 and dies before committing.
    let mut raw = a.into_producer();
    raw.begin().await.unwrap();
    raw.send(&common::records_of(
        &builder,
        &common::insert_tx(4, 40, 2),
        1,
    ))
    .await
    .unwrap();
    drop(raw);
    // Raft only heard about 1-2 (A died before recording 3).
    let (mut b, plan) = ExactlyOncePublisher::open(log, names.owner(2), checkpoint(2))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Kafka);
    assert!(plan.raft_behind);
    assert_eq!(plan.checkpoint, checkpoint(3));
    // B resumes after the checkpoint: every transaction the plan does not cover.
    for gno in 1..=5u64 {
        let g = format!("{}:{gno}", common::UUID).parse().unwrap();
        let Position::Mysql(set) = &plan.checkpoint.position else {
            panic!("mysql position")
        };
        if set.contains(&g) {
            continue;
        }
        let tx = common::insert_tx(gno, gno as i64 * 10, 2);
        b.publish(&common::records_of(&builder, &tx, 2), &checkpoint(gno))
            .await
            .unwrap();
    }
    let ids = committed_ids(log, &names.data_topic()).await;
    assert_eq!(
        gnos(&ids),
        BTreeMap::from([(1, 2), (2, 2), (3, 2), (4, 2), (5, 2)]),
        "every row exactly once"
    );
    // And a third owner resumes after 5.
    let (_c, plan) = ExactlyOncePublisher::open(log, names.owner(3), checkpoint(5))
        .await
        .unwrap();
    assert_eq!(plan.checkpoint, checkpoint(5));
    assert!(!plan.raft_behind);
}

async fn zombie_owner_is_fenced<L: TransactionalLog + CommittedView>(log: &L) {
    let names = Names::new("fence");
    let builder = common::builder(&names.prefix);
    let (mut zombie, _) = ExactlyOncePublisher::open(log, names.owner(1), checkpoint(0))
        .await
        .unwrap();
    zombie
        .publish(
            &common::records_of(&builder, &common::insert_tx(1, 1, 1), 1),
            &checkpoint(1),
        )
        .await
        .unwrap();
    let (mut owner, plan) = ExactlyOncePublisher::open(log, names.owner(2), checkpoint(1))
        .await
        .unwrap();
    assert_eq!(plan.checkpoint, checkpoint(1));
    let err = zombie
        .publish(
            &common::records_of(&builder, &common::insert_tx(2, 2, 1), 1),
            &checkpoint(2),
        )
        .await
        .unwrap_err();
    assert_eq!(err, SinkError::ProducerFenced);
    assert!(zombie.is_fenced());
    owner
        .publish(
            &common::records_of(&builder, &common::insert_tx(2, 2, 1), 2),
            &checkpoint(2),
        )
        .await
        .unwrap();
    let ids = committed_ids(log, &names.data_topic()).await;
    assert_eq!(gnos(&ids), BTreeMap::from([(1, 1), (2, 1)]));
}

#[tokio::test]
async fn model_aborted_rows_are_invisible() {
    aborted_rows_are_invisible(&MemoryTransactionalLog::new(3)).await;
}

#[tokio::test]
async fn model_killed_owner_never_shows_and_new_owner_resumes_exactly() {
    killed_owner_never_shows_and_new_owner_resumes_exactly(&MemoryTransactionalLog::new(3)).await;
}

#[tokio::test]
async fn model_zombie_owner_is_fenced() {
    zombie_owner_is_fenced(&MemoryTransactionalLog::new(3)).await;
}

#[tokio::test]
async fn model_half_written_transaction_blocks_then_vanishes() {
    let log = MemoryTransactionalLog::new(1);
    let names = Names::new("block");
    let builder = common::builder(&names.prefix);
    let mut a = log.init_producer(&names.txn_id).await.unwrap();
    a.begin().await.unwrap();
    a.send(&common::records_of(
        &builder,
        &common::insert_tx(1, 1, 2),
        1,
    ))
    .await
    .unwrap();
    drop(a);
    assert!(committed_ids(&log, &names.data_topic()).await.is_empty());
    assert_eq!(log.read_uncommitted(&names.data_topic()).len(), 2);
    let _b = log.init_producer(&names.txn_id).await.unwrap();
    assert!(committed_ids(&log, &names.data_topic()).await.is_empty());
}

/// Another pipeline (its own transactional id) leaves a transaction open on the shared offsets
/// topic; this pipeline commits two more offsets records after it. A new owner must resume from
/// the newest of them. Reading only up to the last stable offset (the first end of partition
/// under read_committed) used to return the record before the open transaction: a resume one
/// batch too old, every row after it published twice.
async fn open_transaction_of_another_pipeline_does_not_hide_newer_offsets<L>(
    log: &L,
) -> (ExactlyOncePublisher<L::Producer>, Names)
where
    L: TransactionalLog + CommittedView,
{
    let names = Names::new("shared");
    let builder = common::builder(&names.prefix);
    let (mut a, _) = ExactlyOncePublisher::open(log, names.owner(1), checkpoint(0))
        .await
        .unwrap();
    let tx = common::insert_tx(1, 10, 1);
    a.publish(&common::records_of(&builder, &tx, 1), &checkpoint(1))
        .await
        .unwrap();
    // the other pipeline: its offsets record written, its transaction left open
    let other_txn = format!("{}-other", names.txn_id);
    let (other, _) =
        ExactlyOncePublisher::open(log, names.owner_of("other", &other_txn, 1), checkpoint(0))
            .await
            .unwrap();
    let mut other = other.into_producer();
    other.begin().await.unwrap();
    let record = capstan_kafka::exactly_once::OffsetsRecord {
        version: capstan_kafka::exactly_once::OFFSETS_RECORD_VERSION,
        pipeline: "other".into(),
        epoch: 1,
        checkpoint: checkpoint(1),
        incarnation: None,
    }
    .to_record(&names.offsets)
    .unwrap();
    other.send(&[record]).await.unwrap();
    for gno in 2..=3 {
        let tx = common::insert_tx(gno, gno as i64 * 10, 1);
        a.publish(&common::records_of(&builder, &tx, 1), &checkpoint(gno))
            .await
            .unwrap();
    }
    // the other pipeline's transaction resolves two seconds into the new owner's read
    let resolve = async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        other.abort().await.unwrap();
    };
    let (opened, ()) = tokio::join!(
        ExactlyOncePublisher::open(log, names.owner(2), checkpoint(1)),
        resolve
    );
    let (b, plan) = match opened {
        Ok(opened) => opened,
        // the model cannot wait: it answers as the real reader would at its timeout
        Err(SinkError::Timeout { .. }) => {
            ExactlyOncePublisher::open(log, names.owner(2), checkpoint(1))
                .await
                .unwrap()
        }
        Err(e) => panic!("open: {e}"),
    };
    assert_eq!(plan.source, CheckpointSource::Kafka);
    assert_eq!(plan.checkpoint, checkpoint(3), "the newest offsets record");
    assert!(plan.raft_behind);
    (b, names)
}

/// A pipeline deleted and created again (or its offsets reset, or created by another cluster on
/// the same Kafka) starts over: the offsets record its earlier life left in Kafka (another
/// incarnation) is ignored, and the resume comes from Raft.
async fn offsets_record_from_an_earlier_life_is_ignored<L>(log: &L)
where
    L: TransactionalLog + CommittedView,
{
    let names = Names::new("reset");
    let builder = common::builder(&names.prefix);
    let mut first_life = names.owner(3);
    first_life.incarnation = Some("life-1");
    let (mut a, _) = ExactlyOncePublisher::open(log, first_life, checkpoint(0))
        .await
        .unwrap();
    let tx = common::insert_tx(1, 10, 1);
    a.publish(&common::records_of(&builder, &tx, 3), &checkpoint(5))
        .await
        .unwrap();
    // the same pipeline, recreated: Raft has nothing and a new incarnation
    let mut second_life = names.owner(1);
    second_life.incarnation = Some("life-2");
    let (_b, plan) = ExactlyOncePublisher::open(log, second_life, checkpoint(0))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Raft);
    assert_eq!(plan.checkpoint, checkpoint(0));
    // its own life's record is taken, as before
    let mut first_again = names.owner(5);
    first_again.incarnation = Some("life-1");
    let (_c, plan) = ExactlyOncePublisher::open(log, first_again, checkpoint(0))
        .await
        .unwrap();
    assert_eq!(plan.source, CheckpointSource::Kafka);
    assert_eq!(plan.checkpoint, checkpoint(5));
}

#[tokio::test]
async fn model_open_transaction_of_another_pipeline_does_not_hide_newer_offsets() {
    open_transaction_of_another_pipeline_does_not_hide_newer_offsets(&MemoryTransactionalLog::new(
        1,
    ))
    .await;
}

#[tokio::test]
async fn model_offsets_record_from_an_earlier_life_is_ignored() {
    offsets_record_from_an_earlier_life_is_ignored(&MemoryTransactionalLog::new(1)).await;
}

/// A point inside transaction `gno`: its first `next_change` changes committed.
fn inside(upto: u64, gno: u64, next_change: u64) -> Checkpoint {
    checkpoint(upto).inside(Some(WithinTransaction {
        gtid: format!("{}:{gno}", common::UUID),
        next_change,
        records: TransactionProgress::default(),
        capture: "orders".into(),
    }))
}

/// A source transaction handed out in slices is committed slice by slice, each slice in a
/// Kafka transaction of its own with an offsets record naming the point inside the source
/// transaction; an owner that dies in the middle of a slice leaves nothing of that slice
/// visible, and the next owner resumes after the last committed slice: every record once.
async fn a_sliced_source_transaction_commits_slice_by_slice_exactly_once<L>(log: &L)
where
    L: TransactionalLog + CommittedView,
{
    let names = Names::new("sliced");
    let builder = common::builder(&names.prefix);
    let (mut a, _) = ExactlyOncePublisher::open(log, names.owner(1), checkpoint(0))
        .await
        .unwrap();
    // tx 1 whole; tx 2 in three slices of 4 rows, each committed as it comes
    a.publish(
        &common::records_of(&builder, &common::insert_tx(1, 1, 2), 1),
        &checkpoint(1),
    )
    .await
    .unwrap();
    let tx2 = common::records_of(&builder, &common::insert_tx(2, 10, 12), 1);
    a.publish(&tx2[..4], &inside(1, 2, 4)).await.unwrap();
    a.publish(&tx2[4..8], &inside(1, 2, 8)).await.unwrap();
    assert_eq!(
        gnos(&committed_ids(log, &names.data_topic()).await),
        BTreeMap::from([(1, 2), (2, 8)]),
        "a slice is visible once committed"
    );
    a.publish(&tx2[8..], &checkpoint(2)).await.unwrap();
    // tx 3: one slice committed, then the owner dies halfway through the next one
    let tx3 = common::records_of(&builder, &common::insert_tx(3, 30, 6), 1);
    a.publish(&tx3[..3], &inside(2, 3, 3)).await.unwrap();
    let mut dying = a.into_producer();
    dying.begin().await.unwrap();
    dying.send(&tx3[3..5]).await.unwrap();
    let (mut b, plan) = ExactlyOncePublisher::open(log, names.owner(2), checkpoint(1))
        .await
        .unwrap();
    assert_eq!(
        plan.checkpoint,
        inside(2, 3, 3),
        "resumes inside tx 3, after its committed slice"
    );
    assert!(matches!(plan.source, CheckpointSource::Kafka));
    assert!(plan.raft_behind);
    // the new owner publishes the rest of tx 3 (its runner replays the transaction and cuts
    // the changes the checkpoint names as committed)
    let replay = common::records_of(&builder, &common::insert_tx(3, 30, 6), 2);
    b.publish(&replay[3..], &checkpoint(3)).await.unwrap();
    let ids = committed_ids(log, &names.data_topic()).await;
    assert_eq!(
        gnos(&ids),
        BTreeMap::from([(1, 2), (2, 12), (3, 6)]),
        "each row once: the dead owner's open slice never shows"
    );
    let distinct: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "no record twice: {ids:?}");
    drop(dying);
}

#[tokio::test]
async fn model_a_sliced_source_transaction_commits_slice_by_slice_exactly_once() {
    a_sliced_source_transaction_commits_slice_by_slice_exactly_once(&MemoryTransactionalLog::new(
        3,
    ))
    .await;
}

/// The dev services' real broker: every scenario above on Apache Kafka.
fn real_log() -> Option<KafkaTransactionalLog> {
    let bootstrap = common::real_kafka()?;
    let mut config = SinkConfig::new(&bootstrap, "unused");
    config.delivery_timeout_ms = 30_000;
    let checked = config.validate(Flavor::Mysql).unwrap();
    Some(KafkaTransactionalLog::new(
        checked.producer,
        60_000,
        Duration::from_secs(30),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_broker_contract() {
    let Some(log) = real_log() else { return };
    aborted_rows_are_invisible(&log).await;
    killed_owner_never_shows_and_new_owner_resumes_exactly(&log).await;
    zombie_owner_is_fenced(&log).await;
    let (_owner, names) =
        open_transaction_of_another_pipeline_does_not_hide_newer_offsets(&log).await;
    // an independent read_committed consumer sees each row once, none of the other's
    let ids = committed_ids(&log, &names.data_topic()).await;
    assert_eq!(gnos(&ids), BTreeMap::from([(1, 1), (2, 1), (3, 1)]));
    offsets_record_from_an_earlier_life_is_ignored(&log).await;
    a_sliced_source_transaction_commits_slice_by_slice_exactly_once(&log).await;
}
