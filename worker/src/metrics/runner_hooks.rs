//! The recorded series: what the pipeline runner on the owner reports through these hooks
//! (rows, transactions, bytes, lag, snapshot counts, retries, the source's connection).

use std::collections::HashMap;
use std::sync::PoisonError;

use super::labels::{PipelineLabel, ReadAheadLabel, ReasonLabel, READ_AHEAD_OUTCOMES};
use super::Metrics;

/// The snapshot counts the current run of a pipeline reported last: its driver counts from
/// zero at every run, the counters go on growing.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RunTotals {
    suppressed: u64,
    read_ahead: [u64; 3],
}

/// Per pipeline, the current run's totals.
pub(super) type RunTotalsByPipeline = HashMap<String, RunTotals>;

impl Metrics {
    /// The runner's hook: a run of `pipeline` starts on this node. Its counters appear at zero
    /// (a rate over them is defined before the first row), its source is not connected yet,
    /// and the snapshot counts of the run before are forgotten.
    pub fn runner_started(&self, pipeline: &str) {
        let label = PipelineLabel::new(pipeline);
        for counter in [
            &self.rows,
            &self.transactions,
            &self.bytes,
            &self.source_reconnects,
        ] {
            counter.get_or_create(&label).inc_by(0);
        }
        self.source_connected.get_or_create(&label).set(0);
        self.run_totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(pipeline);
    }

    /// The runner's hook: its run ended on a transient fault with the stable `code`.
    pub fn record_retry(&self, pipeline: &str, code: &str) {
        let label = ReasonLabel::new(pipeline, code);
        self.remember_reason(&label);
        self.retries.get_or_create(&label).inc();
    }

    /// The runner's hook: a batch was published (acknowledged by Kafka).
    pub fn record_published(&self, pipeline: &str, rows: u64, transactions: u64, bytes: u64) {
        let label = PipelineLabel::new(pipeline);
        self.rows.get_or_create(&label).inc_by(rows);
        self.transactions.get_or_create(&label).inc_by(transactions);
        self.bytes.get_or_create(&label).inc_by(bytes);
    }

    /// Row changes of `pipeline` this node published since it started (its
    /// `capstan_pipeline_rows_total`); `None` if it never ran the pipeline.
    pub fn rows_total(&self, pipeline: &str) -> Option<u64> {
        Some(self.rows.get(&PipelineLabel::new(pipeline))?.get())
    }

    /// The runner's hook: the lag of the last published transaction.
    pub fn set_lag_seconds(&self, pipeline: &str, seconds: f64) {
        let label = PipelineLabel::new(pipeline);
        self.lag.get_or_create(&label).set(seconds);
    }

    /// The last lag the runner of `pipeline` reported on this node, in milliseconds.
    pub fn lag_ms(&self, pipeline: &str) -> Option<u64> {
        let seconds = self.lag.get(&PipelineLabel::new(pipeline))?.get();
        Some((seconds.max(0.0) * 1000.0).round() as u64)
    }

    /// The source's hook: its binlog stream is open (`true`) or not.
    pub fn set_source_connected(&self, pipeline: &str, connected: bool) {
        let label = PipelineLabel::new(pipeline);
        self.source_connected
            .get_or_create(&label)
            .set(i64::from(connected));
    }

    /// The source's hook: its binlog stream dropped and it redials.
    pub fn record_source_reconnect(&self, pipeline: &str) {
        let label = PipelineLabel::new(pipeline);
        self.source_reconnects.get_or_create(&label).inc();
    }

    /// The snapshot's hook: streamed row changes the cursor gate suppressed so far in this
    /// run (their rows reach the topic through a later chunk).
    pub fn set_snapshot_suppressed(&self, pipeline: &str, total: u64) {
        let mut runs = self
            .run_totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let run = runs.entry(pipeline.to_string()).or_default();
        let new = total.saturating_sub(run.suppressed);
        run.suppressed = run.suppressed.max(total);
        self.snapshot_suppressed
            .get_or_create(&PipelineLabel::new(pipeline))
            .inc_by(new);
    }

    /// The snapshot's hook: chunks read ahead so far in this run, used, stale and wasted.
    pub fn set_snapshot_read_ahead(&self, pipeline: &str, counts: [u64; 3]) {
        let mut runs = self
            .run_totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let run = runs.entry(pipeline.to_string()).or_default();
        for ((outcome, total), before) in READ_AHEAD_OUTCOMES
            .into_iter()
            .zip(counts)
            .zip(run.read_ahead.iter_mut())
        {
            let label = ReadAheadLabel {
                pipeline: pipeline.to_string(),
                outcome,
            };
            let new = total.saturating_sub(*before);
            *before = (*before).max(total);
            self.snapshot_read_ahead.get_or_create(&label).inc_by(new);
        }
    }

    /// The snapshot reader's hook: rows read by the snapshot, initial or ad hoc.
    pub fn record_snapshot_rows(&self, pipeline: &str, rows: u64) {
        let label = PipelineLabel::new(pipeline);
        self.snapshot_rows.get_or_create(&label).inc_by(rows);
    }
}
