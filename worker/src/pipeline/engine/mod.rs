//! The pure decisions of a pipeline's owner: no tokio, rdkafka, Raft handle or clock of their
//! own. Each takes events and answers commands that the runtime (the runner and the
//! supervisor beside this module) only executes; each is tested by asserting on those
//! commands.
//!
//! - [`stream_engine`]: the runner's stream loop (batches, snapshot chunks, how it ends), with
//!   [`delivery_ledger`] (what Kafka and Raft hold, when the checkpoint moves) and
//!   [`lost_position`] (a purged position: re-snapshot or halt);
//! - [`chunk_pacer`]: when the snapshot driver reads a chunk, reads one ahead, retries one;
//! - [`runner_exit`]: how a runner ended, as the supervisor and Raft see it;
//! - [`supervision`]: which runners this node runs, stops, starts again or halts, with
//!   [`retry_schedule`] (backoff after a transient fault) and [`move_release`] (giving up a
//!   pipeline an operator moves).

pub(super) mod chunk_pacer;
pub(super) mod delivery_ledger;
pub(super) mod lost_position;
pub(super) mod move_release;
pub(super) mod retry_schedule;
pub(super) mod runner_exit;
pub(super) mod stream_engine;
pub(super) mod supervision;
#[cfg(test)]
mod test_cluster;
