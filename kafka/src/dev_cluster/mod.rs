//! librdkafka's mock cluster, hosted in-process: for tests, and for `capstan dev kafka`
//! (multi-process tests and the quickstart share one through its bootstrap address).
//!
//! Known limit (see `docs/adr/0003-exactly-once-kafka.md`): the mock cluster accepts
//! `init_transactions`, commit and abort and fences producers, but writes no transaction
//! markers, so a `read_committed` consumer still sees the records of aborted transactions.

#[allow(clippy::module_inception)]
mod dev_cluster;

pub use dev_cluster::{run_dev_cluster, DevCluster};
pub use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
