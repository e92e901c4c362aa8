//! An in-memory model of Kafka's transactional contract (KIP-98), to prove the exactly-once
//! logic where no reachable broker filters aborted transactions (see ADR-0003).
//!
//! What it models, and how Kafka does it:
//!
//! - **Transaction coordinator.** Per `transactional.id`: a producer id, an epoch and at most
//!   one open transaction with the partitions it wrote. `init_transactions` bumps the epoch
//!   (fencing every older producer of the id) and aborts the open transaction, writing abort
//!   markers to its partitions.
//! - **Fencing.** Every operation of a producer whose epoch is older than the coordinator's
//!   fails with `ProducerFenced`; its records are never written.
//! - **Partition logs.** Records are appended at produce time, before commit, interleaved
//!   with other producers' records; commit/abort append a marker per partition.
//! - **read_committed.** A partition's last stable offset (LSO) is the first offset of a
//!   transaction still open; a read_committed consumer sees, below the LSO, the
//!   non-transactional records and those of committed transactions, never those of aborted
//!   ones. An open transaction therefore *blocks* read_committed readers of its partitions
//!   (until it commits, aborts, is aborted by the next `init_transactions`, or times out).
//! - **Timeouts.** [`MemoryTransactionalLog::expire_open_transactions`] does what the
//!   coordinator does after `transaction.timeout.ms`: aborts and bumps the epoch.
//!
//! Partitioning: a keyed record goes to partition `hash(key) % partitions` (FNV-1a, not
//! Kafka's murmur2: only determinism matters here), a keyless one to partition 0.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::transactional_log::{TransactionalLog, TransactionalProducer};
use crate::record::KafkaRecord;
use crate::topic_reader::ConsumedRecord;
use crate::SinkError;

#[derive(Clone)]
enum Entry {
    Data {
        record: KafkaRecord,
        producer_id: u64,
    },
    Marker {
        producer_id: u64,
        commit: bool,
    },
}

struct Coordinator {
    producer_id: u64,
    epoch: u32,
    open: Option<BTreeSet<(String, i32)>>,
}

#[derive(Default)]
struct LogState {
    partitions_per_topic: i32,
    logs: BTreeMap<(String, i32), Vec<Entry>>,
    coordinators: BTreeMap<String, Coordinator>,
    next_producer_id: u64,
}

impl LogState {
    fn partition_of(&self, record: &KafkaRecord) -> i32 {
        let n = self.partitions_per_topic.max(1) as u64;
        match &record.key {
            None => 0,
            Some(k) => {
                let h = k.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
                });
                (h % n) as i32
            }
        }
    }

    fn end_transaction(&mut self, transactional_id: &str, commit: bool) {
        let Some(c) = self.coordinators.get_mut(transactional_id) else {
            return;
        };
        let producer_id = c.producer_id;
        if let Some(partitions) = c.open.take() {
            for tp in partitions {
                self.logs.entry(tp).or_default().push(Entry::Marker {
                    producer_id,
                    commit,
                });
            }
        }
    }

    fn check_epoch(&self, transactional_id: &str, epoch: u32) -> Result<(), SinkError> {
        match self.coordinators.get(transactional_id) {
            Some(c) if c.epoch == epoch => Ok(()),
            _ => Err(SinkError::ProducerFenced),
        }
    }

    /// True when a transaction is still open in this partition: its last stable offset is
    /// below the end, and a read_committed reader of the end must wait.
    fn open_below_end(&self, entries: &[Entry]) -> bool {
        let mut pending: BTreeSet<u64> = BTreeSet::new();
        for entry in entries {
            match entry {
                Entry::Data { producer_id, .. } => {
                    pending.insert(*producer_id);
                }
                Entry::Marker { producer_id, .. } => {
                    pending.remove(producer_id);
                }
            }
        }
        !pending.is_empty()
    }

    /// read_committed view of one partition.
    fn committed(&self, topic: &str, partition: i32, entries: &[Entry]) -> Vec<ConsumedRecord> {
        // Pending data offsets per producer, resolved by that producer's next marker.
        let mut pending: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        let mut visible: Vec<usize> = Vec::new();
        for (offset, entry) in entries.iter().enumerate() {
            match entry {
                Entry::Data { producer_id, .. } => {
                    pending.entry(*producer_id).or_default().push(offset)
                }
                Entry::Marker {
                    producer_id,
                    commit,
                } => {
                    let resolved = pending.remove(producer_id).unwrap_or_default();
                    if *commit {
                        visible.extend(resolved);
                    }
                }
            }
        }
        let lso = pending
            .values()
            .filter_map(|offsets| offsets.first().copied())
            .min()
            .unwrap_or(entries.len());
        visible.sort_unstable();
        visible
            .into_iter()
            .filter(|o| *o < lso)
            .filter_map(|o| match &entries[o] {
                Entry::Data { record, .. } => Some(consumed(topic, partition, o, record)),
                Entry::Marker { .. } => None,
            })
            .collect()
    }
}

fn consumed(topic: &str, partition: i32, offset: usize, r: &KafkaRecord) -> ConsumedRecord {
    ConsumedRecord {
        topic: topic.to_string(),
        partition,
        offset: offset as i64,
        key: r.key.clone(),
        value: r.value.clone(),
        headers: r.headers_owned(),
    }
}

/// The in-memory transactional log. Clones share one log.
#[derive(Clone)]
pub struct MemoryTransactionalLog {
    state: Arc<Mutex<LogState>>,
}

impl fmt::Debug for MemoryTransactionalLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryTransactionalLog")
            .finish_non_exhaustive()
    }
}

impl MemoryTransactionalLog {
    /// An empty log whose topics have `partitions_per_topic` partitions each.
    pub fn new(partitions_per_topic: i32) -> Self {
        MemoryTransactionalLog {
            state: Arc::new(Mutex::new(LogState {
                partitions_per_topic,
                ..LogState::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every record of `topic` a read_committed consumer sees now: committed transactions'
    /// records below each partition's last stable offset, in partition/offset order.
    pub fn read_committed(&self, topic: &str) -> Vec<ConsumedRecord> {
        let state = self.lock();
        state
            .logs
            .iter()
            .filter(|((t, _), _)| t == topic)
            .flat_map(|((t, p), entries)| state.committed(t, *p, entries))
            .collect()
    }

    /// Every record of `topic` as a read_uncommitted consumer sees it (open and aborted
    /// transactions included).
    pub fn read_uncommitted(&self, topic: &str) -> Vec<ConsumedRecord> {
        let state = self.lock();
        state
            .logs
            .iter()
            .filter(|((t, _), _)| t == topic)
            .flat_map(|((t, p), entries)| {
                entries
                    .iter()
                    .enumerate()
                    .filter_map(move |(o, e)| match e {
                        Entry::Data { record, .. } => Some(consumed(t, *p, o, record)),
                        Entry::Marker { .. } => None,
                    })
            })
            .collect()
    }

    /// What the coordinator does after `transaction.timeout.ms`: aborts every open
    /// transaction and bumps its id's epoch (fencing the producer that left it open).
    pub fn expire_open_transactions(&self) {
        let mut state = self.lock();
        let ids: Vec<String> = state
            .coordinators
            .iter()
            .filter(|(_, c)| c.open.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            state.end_transaction(&id, false);
            if let Some(c) = state.coordinators.get_mut(&id) {
                c.epoch += 1;
            }
        }
    }
}

/// A producer of the in-memory log.
pub struct MemoryProducer {
    log: MemoryTransactionalLog,
    transactional_id: String,
    producer_id: u64,
    epoch: u32,
    in_transaction: bool,
}

impl fmt::Debug for MemoryProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryProducer")
            .field("transactional_id", &self.transactional_id)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl MemoryProducer {
    /// Simulates the process dying: no abort, no commit; the open transaction stays open in
    /// the log until the next `init_transactions` for the id (or a timeout).
    pub fn kill(self) {}
}

fn no_transaction() -> SinkError {
    SinkError::TransactionFailed {
        kafka_code: "State".to_string(),
        retriable: false,
    }
}

#[async_trait]
impl TransactionalLog for MemoryTransactionalLog {
    type Producer = MemoryProducer;

    async fn init_producer(&self, transactional_id: &str) -> Result<MemoryProducer, SinkError> {
        let mut state = self.lock();
        state.end_transaction(transactional_id, false);
        let next_id = state.next_producer_id;
        let c = state
            .coordinators
            .entry(transactional_id.to_string())
            .or_insert(Coordinator {
                producer_id: next_id,
                epoch: 0,
                open: None,
            });
        c.epoch += 1;
        let (producer_id, epoch) = (c.producer_id, c.epoch);
        if producer_id == next_id {
            state.next_producer_id += 1;
        }
        Ok(MemoryProducer {
            log: self.clone(),
            transactional_id: transactional_id.to_string(),
            producer_id,
            epoch,
            in_transaction: false,
        })
    }

    async fn latest_committed(
        &self,
        topic: &str,
        key: &[u8],
    ) -> Result<Option<ConsumedRecord>, SinkError> {
        let state = self.lock();
        let mut latest = None;
        for ((t, p), entries) in state.logs.iter().filter(|((t, _), _)| t == topic) {
            let committed = state.committed(t, *p, entries);
            if state.open_below_end(entries) {
                // the real reader waits for the open transaction, up to its timeout; the
                // model cannot wait, so it answers as that reader does when time runs out
                return Err(SinkError::Timeout {
                    operation: "read_offsets",
                });
            }
            if let Some(r) = committed
                .into_iter()
                .rev()
                .find(|r| r.key.as_deref() == Some(key))
            {
                latest = Some(r);
            }
        }
        Ok(latest)
    }
}

#[async_trait]
impl TransactionalProducer for MemoryProducer {
    async fn begin(&mut self) -> Result<(), SinkError> {
        let mut state = self.log.lock();
        state.check_epoch(&self.transactional_id, self.epoch)?;
        if self.in_transaction {
            return Err(no_transaction());
        }
        if let Some(c) = state.coordinators.get_mut(&self.transactional_id) {
            c.open = Some(BTreeSet::new());
        }
        self.in_transaction = true;
        Ok(())
    }

    async fn send(&mut self, records: &[KafkaRecord]) -> Result<(), SinkError> {
        let mut state = self.log.lock();
        state.check_epoch(&self.transactional_id, self.epoch)?;
        if !self.in_transaction {
            return Err(no_transaction());
        }
        for record in records {
            let tp = (record.topic.clone(), state.partition_of(record));
            if let Some(open) = state
                .coordinators
                .get_mut(&self.transactional_id)
                .and_then(|c| c.open.as_mut())
            {
                open.insert(tp.clone());
            }
            state.logs.entry(tp).or_default().push(Entry::Data {
                record: record.clone(),
                producer_id: self.producer_id,
            });
        }
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), SinkError> {
        let mut state = self.log.lock();
        state.check_epoch(&self.transactional_id, self.epoch)?;
        if !self.in_transaction {
            return Err(no_transaction());
        }
        state.end_transaction(&self.transactional_id, true);
        self.in_transaction = false;
        Ok(())
    }

    async fn abort(&mut self) -> Result<(), SinkError> {
        let mut state = self.log.lock();
        state.check_epoch(&self.transactional_id, self.epoch)?;
        state.end_transaction(&self.transactional_id, false);
        self.in_transaction = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(topic: &str, key: &str) -> KafkaRecord {
        KafkaRecord {
            topic: topic.into(),
            key: Some(key.as_bytes().to_vec()),
            value: Some(b"v".to_vec()),
            headers: vec![],
            timestamp_ms: None,
            registry: None,
        }
    }

    fn keys(rs: &[ConsumedRecord]) -> Vec<String> {
        rs.iter()
            .map(|r| String::from_utf8(r.key.clone().unwrap()).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn open_transaction_blocks_later_committed_records() {
        let log = MemoryTransactionalLog::new(1);
        let mut a = log.init_producer("a").await.unwrap();
        let mut b = log.init_producer("b").await.unwrap();
        a.begin().await.unwrap();
        a.send(&[rec("t", "a1")]).await.unwrap();
        b.begin().await.unwrap();
        b.send(&[rec("t", "b1")]).await.unwrap();
        b.commit().await.unwrap();
        // b1 is committed but above a's open transaction: not yet stable.
        assert!(log.read_committed("t").is_empty());
        assert_eq!(log.read_uncommitted("t").len(), 2);
        a.abort().await.unwrap();
        assert_eq!(keys(&log.read_committed("t")), vec!["b1"]);
    }

    #[tokio::test]
    async fn init_fences_and_aborts_and_timeouts_fence_too() {
        let log = MemoryTransactionalLog::new(2);
        let mut old = log.init_producer("x").await.unwrap();
        old.begin().await.unwrap();
        old.send(&[rec("t", "zombie")]).await.unwrap();
        let mut new = log.init_producer("x").await.unwrap();
        assert_eq!(old.commit().await, Err(SinkError::ProducerFenced));
        assert_eq!(
            old.send(&[rec("t", "z2")]).await,
            Err(SinkError::ProducerFenced)
        );
        new.begin().await.unwrap();
        new.send(&[rec("t", "ok")]).await.unwrap();
        new.commit().await.unwrap();
        assert_eq!(keys(&log.read_committed("t")), vec!["ok"]);

        new.begin().await.unwrap();
        new.send(&[rec("t", "late")]).await.unwrap();
        log.expire_open_transactions();
        assert_eq!(new.commit().await, Err(SinkError::ProducerFenced));
        assert_eq!(keys(&log.read_committed("t")), vec!["ok"]);
    }
}
