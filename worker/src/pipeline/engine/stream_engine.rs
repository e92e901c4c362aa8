//! [`StreamEngine`]: the decisions of a runner's stream loop — pure (no tokio, no Kafka, no
//! Raft, the clock passed in). The runner tells it what happened (an output taken from the
//! source task, a chunk read, a batch published, an acknowledgement, a Raft answer, a tick, a
//! stop) and executes the [`StreamCommand`]s it answers; nothing else in the loop decides.
//!
//! # What it decides
//!
//! - **When a snapshot chunk is read**: only while a snapshot runs, never inside a transaction
//!   handed out in slices (its parts are gated alike), and only when the snapshot says one is
//!   due (its throttle, and its pace while the stream has a backlog). A chunk ready at once is
//!   published on its own at the point the stream is paused at.
//! - **Where a batch ends**: outputs already waiting are taken into one batch (one round of
//!   acknowledgements instead of one per transaction) up to [`MAX_BATCH_TX`] outputs,
//!   [`MAX_BATCH_ROWS`] row changes or [`MAX_BATCH_BYTES`], whichever first.
//! - **What Kafka and Raft hold**: the [`DeliveryLedger`] (acknowledgements, the checkpoint).
//! - **How the stream ends**: a stop settles and commits what Kafka acknowledged, then ends
//!   [`RunnerExit::Stopped`]; a source that lost its position re-snapshots or halts
//!   ([`LostPosition`]); any other fault ends with the exit it maps to.
//! - **What the status says**: `streaming` once, when the snapshot completes.

use std::time::{Duration, Instant};

use capstan_core::position::{Position, ResumePoint};
use capstan_raft_store::RunnerState;

use super::delivery_ledger::{Delivered, DeliveryLedger, LedgerAction, CHECKPOINT_EVERY};
use super::lost_position::LostPosition;
use super::runner_exit::RunnerExit;
use crate::pipeline::pipeline_spec::SnapshotMode;

/// At most this many source outputs are published as one batch…
pub const MAX_BATCH_TX: u64 = 500;
/// …and no more once the batch holds this many row changes…
pub const MAX_BATCH_ROWS: usize = 20_000;
/// …or this many bytes (decoded changes, or records once encoded).
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// One output taken from the source task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Its row changes.
    pub rows: usize,
    /// Its bytes against the budgets.
    pub bytes: usize,
    /// The source's checkpoint after it (what a restart resumes from).
    pub checkpoint: Position,
    /// The source's processed position after it (everything handed out; ahead of the
    /// checkpoint only while a MariaDB XA prepare holds it back, ADR-0008).
    pub processed: Position,
}

/// How the source task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEnd {
    /// Its channel closed without an error.
    Closed,
    /// The server no longer has the stream's position (`data_gap`); the value-free detail.
    PositionLost(String),
    /// Any other fault, as the exit it maps to.
    Failed(RunnerExit),
}

/// What the loop does before it waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Read the next snapshot chunk with the stream paused at `processed` (`backlog`: outputs
    /// wait in the channel); a chunk ready at once is published alone at
    /// [`StreamEngine::point`].
    ReadChunk { processed: Position, backlog: bool },
    /// Wait for an output, a tick or the stop, at most this long.
    Wait(Duration),
}

/// What follows an output taken into the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Take the output already waiting too.
    More,
    /// Publish the batch: its outputs end at this point. Then report
    /// [`StreamEngine::published`].
    Publish(ResumePoint),
    /// The positions break their rule (a source bug that must not reach Raft).
    Halt(RunnerExit),
}

/// What the runner is to do after an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamCommand {
    /// The ledger's: settle, record the lag, commit a checkpoint (then report
    /// [`StreamEngine::settled`] / [`StreamEngine::committed`]).
    Ledger(LedgerAction),
    /// Mark the running snapshot's tables as needing a snapshot again.
    MarkSnapshotLost,
    /// Report this state to Raft.
    Report(RunnerState),
    /// The stream ends with this exit.
    Exit(RunnerExit),
}

/// The batch being taken.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    outputs: u64,
    rows: usize,
    bytes: usize,
}

/// Whether a snapshot runs beside the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Snapshot {
    None,
    Running,
    Complete,
}

/// See the module documentation.
#[derive(Debug)]
pub struct StreamEngine {
    ledger: DeliveryLedger,
    /// The point after the last batch cut (the start, before any).
    point: ResumePoint,
    /// The source's positions after the last output taken.
    checkpoint: Position,
    processed: Position,
    /// The batch being taken from the channel, and the one published and not yet reported.
    taking: Tally,
    publishing: Option<(ResumePoint, u64)>,
    snapshot: Snapshot,
    mode: Option<SnapshotMode>,
    stopping: bool,
}

impl StreamEngine {
    /// An engine for a stream starting at `start` at `now`; `snapshot`: a snapshot runs
    /// beside it; `mode`: the pipeline's snapshot mode (what a lost position does).
    pub fn new(
        start: ResumePoint,
        snapshot: bool,
        mode: Option<SnapshotMode>,
        now: Instant,
    ) -> Self {
        StreamEngine {
            checkpoint: start.checkpoint().clone(),
            processed: start.processed().clone(),
            ledger: DeliveryLedger::new(start.clone(), now),
            point: start,
            taking: Tally::default(),
            publishing: None,
            snapshot: if snapshot {
                Snapshot::Running
            } else {
                Snapshot::None
            },
            mode,
            stopping: false,
        }
    }

    /// The point after the last batch: where the stream is paused between batches.
    pub fn point(&self) -> &ResumePoint {
        &self.point
    }

    /// The loop is about to wait. `backlog`: outputs wait in the channel; `inside`: the
    /// stream is inside a transaction handed out in slices; `chunk_due_in`: when the snapshot
    /// wants its next chunk (`None`: none wanted now).
    pub fn next(&self, backlog: bool, inside: bool, chunk_due_in: Option<Duration>) -> Next {
        let due = chunk_due_in.filter(|_| self.snapshot == Snapshot::Running && !inside);
        match due {
            Some(Duration::ZERO) => Next::ReadChunk {
                processed: self.point.processed().clone(),
                backlog,
            },
            Some(wait) => Next::Wait(wait.min(CHECKPOINT_EVERY)),
            None => Next::Wait(CHECKPOINT_EVERY),
        }
    }

    /// An output was taken from the channel; `waiting`: another waits behind it. The batch
    /// takes it too while it has room.
    pub fn taken(&mut self, taken: Taken, waiting: bool) -> Take {
        self.taking.outputs += 1;
        self.taking.rows += taken.rows;
        self.taking.bytes += taken.bytes;
        self.checkpoint = taken.checkpoint;
        self.processed = taken.processed;
        let room = self.taking.outputs < MAX_BATCH_TX
            && self.taking.rows < MAX_BATCH_ROWS
            && self.taking.bytes < MAX_BATCH_BYTES;
        if room && waiting {
            return Take::More;
        }
        self.cut()
    }

    /// Ends the batch taken so far (the output said to wait was not there after all).
    pub fn cut(&mut self) -> Take {
        let outputs = std::mem::take(&mut self.taking).outputs;
        match resume_point(&self.checkpoint, &self.processed) {
            Ok(point) => {
                self.point = point.clone();
                self.publishing = Some((point.clone(), outputs));
                Take::Publish(point)
            }
            Err(exit) => Take::Halt(exit),
        }
    }

    /// The batch of the last [`Take::Publish`] was delivered as `outcome`.
    pub fn published(&mut self, outcome: Delivered) -> Vec<StreamCommand> {
        let Some((point, outputs)) = self.publishing.take() else {
            return Vec::new();
        };
        ledger(self.ledger.delivered(point, outputs, outcome))
    }

    /// The source task ended. A lost position marks a running snapshot's tables when its
    /// mode says so, and re-snapshots or halts.
    pub fn source_ended(&mut self, end: SourceEnd) -> Vec<StreamCommand> {
        match end {
            SourceEnd::Closed => vec![StreamCommand::Exit(RunnerExit::failed("source_stopped"))],
            SourceEnd::Failed(exit) => vec![StreamCommand::Exit(exit)],
            SourceEnd::PositionLost(detail) => {
                let running = self.snapshot == Snapshot::Running;
                let lost = LostPosition::decide(self.mode, running, &format!("source: {detail}"));
                let mut commands = Vec::new();
                if lost.mark_tables {
                    commands.push(StreamCommand::MarkSnapshotLost);
                }
                commands.push(StreamCommand::Exit(lost.exit));
                commands
            }
        }
    }

    /// The loop woke and published what it had (`backlog`: outputs already wait): settle the
    /// batch in flight or commit the checkpoint when due; `snapshot_complete`: every table of
    /// the running snapshot is done (reported `streaming`, once).
    pub fn idle(
        &mut self,
        backlog: bool,
        snapshot_complete: bool,
        now: Instant,
    ) -> Vec<StreamCommand> {
        let mut commands = ledger(self.ledger.idle(backlog, now));
        if snapshot_complete && self.snapshot == Snapshot::Running {
            self.snapshot = Snapshot::Complete;
            commands.push(StreamCommand::Report(RunnerState::Streaming));
        }
        commands
    }

    /// The batch in flight is acknowledged.
    pub fn settled(&mut self, now: Instant) -> Vec<StreamCommand> {
        let mut actions = self.ledger.settled(now);
        if !self.stopping {
            return ledger(actions);
        }
        // stopping: the commit comes from the closing sequence (due or not), once
        actions.retain(|a| !matches!(a, LedgerAction::CommitCheckpoint(_)));
        let mut commands = ledger(actions);
        commands.extend(self.closing());
        commands
    }

    /// Raft accepted `point` as the checkpoint.
    pub fn committed(&mut self, point: ResumePoint, now: Instant) -> Vec<StreamCommand> {
        self.ledger.committed_at(point, now);
        if self.stopping {
            self.closing()
        } else {
            Vec::new()
        }
    }

    /// The runner is asked to stop: settle what is in flight, commit what Kafka acknowledged,
    /// then end [`RunnerExit::Stopped`] (the next owner resumes where this one stopped).
    pub fn stop(&mut self) -> Vec<StreamCommand> {
        self.stopping = true;
        self.closing()
    }

    fn closing(&mut self) -> Vec<StreamCommand> {
        let actions = self.ledger.closing();
        if actions.is_empty() {
            return vec![StreamCommand::Exit(RunnerExit::Stopped)];
        }
        ledger(actions)
    }
}

/// The source's checkpoint and processed position as one point; a pair that breaks the rule
/// (a source bug) halts rather than reaching Raft.
pub fn resume_point(
    checkpoint: &Position,
    processed: &Position,
) -> Result<ResumePoint, RunnerExit> {
    ResumePoint::new(checkpoint.clone(), Some(processed.clone()))
        .map_err(|e| RunnerExit::failed(e.code()))
}

fn ledger(actions: Vec<LedgerAction>) -> Vec<StreamCommand> {
    actions.into_iter().map(StreamCommand::Ledger).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_core::position::Flavor;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    fn gtids(n: u64) -> Position {
        let text = if n == 0 {
            String::new()
        } else {
            format!("{A}:1-{n}")
        };
        Position::parse(Flavor::Mysql, &text).unwrap()
    }

    /// The point after transaction `n`.
    fn at(n: u64) -> ResumePoint {
        ResumePoint::at(gtids(n))
    }

    /// Transaction `n` taken, `rows` row changes of 100 bytes each.
    fn tx(n: u64, rows: usize) -> Taken {
        Taken {
            rows,
            bytes: rows * 100,
            checkpoint: gtids(n),
            processed: gtids(n),
        }
    }

    fn streaming(now: Instant) -> StreamEngine {
        StreamEngine::new(at(0), false, None, now)
    }

    fn snapshotting(mode: SnapshotMode, now: Instant) -> StreamEngine {
        StreamEngine::new(at(0), true, Some(mode), now)
    }

    fn commit(n: u64) -> StreamCommand {
        StreamCommand::Ledger(LedgerAction::CommitCheckpoint(at(n)))
    }

    const SETTLE: StreamCommand = StreamCommand::Ledger(LedgerAction::Settle);

    #[test]
    fn a_chunk_is_read_only_while_a_snapshot_runs_and_never_inside_a_sliced_transaction() {
        let t0 = Instant::now();
        let mut e = snapshotting(SnapshotMode::Initial, t0);
        assert_eq!(
            e.next(true, false, Some(Duration::ZERO)),
            Next::ReadChunk {
                processed: gtids(0),
                backlog: true
            }
        );
        // inside a transaction handed out in slices: no chunk, and no busy wake-up either
        // (a chunk due now does not make the loop spin while the slices come)
        assert_eq!(
            e.next(false, true, Some(Duration::ZERO)),
            Next::Wait(CHECKPOINT_EVERY)
        );
        // due later (the throttle, the backlog pace): wake then, but at least as often as
        // a checkpoint may fall due
        let soon = Duration::from_millis(120);
        assert_eq!(e.next(false, false, Some(soon)), Next::Wait(soon));
        assert_eq!(
            e.next(false, false, Some(Duration::from_secs(9))),
            Next::Wait(CHECKPOINT_EVERY)
        );
        // none wanted (a chunk waits for its position)
        assert_eq!(e.next(false, false, None), Next::Wait(CHECKPOINT_EVERY));
        // the snapshot completes: reported streaming once, then no chunk is read again
        assert_eq!(
            e.idle(false, true, t0),
            vec![StreamCommand::Report(RunnerState::Streaming)]
        );
        assert_eq!(e.idle(false, true, t0), vec![]);
        assert_eq!(
            e.next(false, false, Some(Duration::ZERO)),
            Next::Wait(CHECKPOINT_EVERY)
        );
        // a stream without a snapshot never reads one
        let plain = streaming(t0);
        assert_eq!(
            plain.next(false, false, Some(Duration::ZERO)),
            Next::Wait(CHECKPOINT_EVERY)
        );
    }

    #[test]
    fn a_chunk_goes_by_the_processed_position_of_the_last_batch() {
        // MariaDB: a prepare holds the checkpoint at 10 while 11–13 are handed out; a chunk
        // read now must go by what was handed out (its rows' later changes are gated and
        // suppressed past it), and is published alone at the batch's pair
        let maria = |t: &str| Position::parse(Flavor::Mariadb, t).unwrap();
        let t0 = Instant::now();
        let start = ResumePoint::at(maria("0-1-10"));
        let mut e = StreamEngine::new(start.clone(), true, Some(SnapshotMode::Initial), t0);
        assert_eq!(e.point(), &start);
        let taken = Taken {
            rows: 1,
            bytes: 100,
            checkpoint: maria("0-1-10"),
            processed: maria("0-1-13"),
        };
        let held = ResumePoint::new(maria("0-1-10"), Some(maria("0-1-13"))).unwrap();
        assert_eq!(e.taken(taken, false), Take::Publish(held.clone()));
        assert_eq!(e.published(Delivered::Durable), vec![]);
        assert_eq!(
            e.next(false, false, Some(Duration::ZERO)),
            Next::ReadChunk {
                processed: maria("0-1-13"),
                backlog: false
            }
        );
        assert_eq!(e.point(), &held);
    }

    #[test]
    fn a_batch_takes_what_waits_until_the_first_limit() {
        let t0 = Instant::now();
        // by outputs
        let mut e = streaming(t0);
        for n in 1..MAX_BATCH_TX {
            assert_eq!(e.taken(tx(n, 1), true), Take::More, "output {n}");
        }
        assert_eq!(
            e.taken(tx(MAX_BATCH_TX, 1), true),
            Take::Publish(at(MAX_BATCH_TX))
        );
        // by rows
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(1, MAX_BATCH_ROWS - 1), true), Take::More);
        assert_eq!(e.taken(tx(2, 1), true), Take::Publish(at(2)));
        // by bytes: one large output is a batch of its own
        let mut e = streaming(t0);
        let large = Taken {
            bytes: MAX_BATCH_BYTES,
            ..tx(1, 10)
        };
        assert_eq!(e.taken(large, true), Take::Publish(at(1)));
        // nothing waits: published at once
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(1, 1), false), Take::Publish(at(1)));
        // what was said to wait was not there: the batch ends where it is
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(1, 1), true), Take::More);
        assert_eq!(e.cut(), Take::Publish(at(1)));
    }

    #[test]
    fn a_batch_counts_its_outputs_towards_the_checkpoint() {
        let t0 = Instant::now();
        let mut e = streaming(t0);
        let n = super::super::delivery_ledger::CHECKPOINT_EVERY_TX;
        for i in 1..=n {
            assert_eq!(e.taken(tx(i, 0), false), Take::Publish(at(i)));
            assert_eq!(e.published(Delivered::Durable), vec![]);
            if i < n {
                assert_eq!(e.idle(false, false, t0), vec![], "after {i}");
            }
        }
        // a thousand transactions durable: a checkpoint is due before its interval
        assert_eq!(e.idle(false, false, t0), vec![commit(n)]);
    }

    #[test]
    fn positions_that_break_their_rule_halt_before_reaching_raft() {
        let mut e = streaming(Instant::now());
        let behind = Taken {
            rows: 1,
            bytes: 1,
            checkpoint: gtids(5),
            processed: gtids(4),
        };
        assert_eq!(
            e.taken(behind, false),
            Take::Halt(RunnerExit::failed("processed_behind_checkpoint"))
        );
        // nothing was handed to the ledger
        assert_eq!(e.published(Delivered::Durable), vec![]);
        assert_eq!(e.point(), &at(0));
    }

    #[test]
    fn a_stop_settles_the_batch_in_flight_commits_it_and_ends() {
        let t0 = Instant::now();
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(3, 10), false), Take::Publish(at(3)));
        let in_flight = Delivered::InFlight {
            committed_at_micros: Some(7),
        };
        assert_eq!(e.published(in_flight), vec![]);
        assert_eq!(e.stop(), vec![SETTLE]);
        // the commit is due by time as well: asked once, not twice
        assert_eq!(
            e.settled(t0 + CHECKPOINT_EVERY * 2),
            vec![
                StreamCommand::Ledger(LedgerAction::RecordLag {
                    committed_at_micros: 7
                }),
                commit(3)
            ]
        );
        assert_eq!(
            e.committed(at(3), t0 + CHECKPOINT_EVERY * 2),
            vec![StreamCommand::Exit(RunnerExit::Stopped)]
        );
        // a stop with nothing delivered ends at once
        let mut idle = streaming(t0);
        assert_eq!(idle.stop(), vec![StreamCommand::Exit(RunnerExit::Stopped)]);
    }

    #[test]
    fn a_stop_commits_what_was_acknowledged_though_not_yet_due() {
        let t0 = Instant::now();
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(2, 1), false), Take::Publish(at(2)));
        assert_eq!(e.published(Delivered::Durable), vec![]);
        // not due: neither by count nor by time
        assert_eq!(e.idle(false, false, t0), vec![]);
        assert_eq!(e.stop(), vec![commit(2)]);
        assert_eq!(
            e.committed(at(2), t0),
            vec![StreamCommand::Exit(RunnerExit::Stopped)]
        );
    }

    #[test]
    fn commits_while_streaming_do_not_end_the_stream() {
        let t0 = Instant::now();
        let mut e = streaming(t0);
        assert_eq!(e.taken(tx(1, 1), false), Take::Publish(at(1)));
        assert_eq!(e.published(Delivered::Durable), vec![]);
        assert_eq!(e.idle(false, false, t0 + CHECKPOINT_EVERY), vec![commit(1)]);
        assert_eq!(e.committed(at(1), t0 + CHECKPOINT_EVERY), vec![]);
        assert_eq!(e.settled(t0 + CHECKPOINT_EVERY), vec![]);
    }

    #[test]
    fn a_lost_position_resnapshots_or_halts_by_the_snapshot_mode() {
        let t0 = Instant::now();
        let lost = || SourceEnd::PositionLost("binlog purged".into());
        // when_needed, snapshot running: its tables are marked, and it starts again
        let mut e = snapshotting(SnapshotMode::WhenNeeded, t0);
        assert_eq!(
            e.source_ended(lost()),
            vec![
                StreamCommand::MarkSnapshotLost,
                StreamCommand::Exit(RunnerExit::Retry {
                    code: "snapshot_resnapshot_due".into(),
                    detail: "the stream's position was purged; snapshotting again: source: \
                             binlog purged"
                        .into()
                })
            ]
        );
        // initial, snapshot running: marked, and halted
        let mut e = snapshotting(SnapshotMode::Initial, t0);
        assert_eq!(
            e.source_ended(lost()),
            vec![
                StreamCommand::MarkSnapshotLost,
                StreamCommand::Exit(RunnerExit::failed("snapshot_data_gap"))
            ]
        );
        // the snapshot completed before: nothing to mark; a halt with the detail
        let mut e = snapshotting(SnapshotMode::Initial, t0);
        let _ = e.idle(false, true, t0);
        assert_eq!(
            e.source_ended(lost()),
            vec![StreamCommand::Exit(RunnerExit::Failed {
                code: "data_gap".into(),
                detail: Some("source: binlog purged".into())
            })]
        );
    }

    #[test]
    fn other_source_ends_exit_as_they_map() {
        let mut e = streaming(Instant::now());
        assert_eq!(
            e.source_ended(SourceEnd::Closed),
            vec![StreamCommand::Exit(RunnerExit::failed("source_stopped"))]
        );
        let retry = RunnerExit::Retry {
            code: "source_connect_failed".into(),
            detail: "source: connection refused".into(),
        };
        assert_eq!(
            e.source_ended(SourceEnd::Failed(retry.clone())),
            vec![StreamCommand::Exit(retry)]
        );
    }
}
