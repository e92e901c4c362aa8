//! [`FaultPoint`]: crash injection for tests, compiled into debug builds only.
//!
//! Some crash windows are a few instructions wide (a chunk acknowledged by Kafka, its
//! `pk_cursor` not yet in Raft); a `kill -9` from outside lands in them by luck only. A test
//! names such a window in the worker's environment:
//!
//! ```text
//! CAPSTAN_FAULT=<point>@<n>[/stop]:<marker file>
//! ```
//!
//! The `n`-th time this process passes `<point>` it creates `<marker file>` and aborts (no
//! destructor runs, no buffer is flushed: a crash). With `/stop` it freezes itself instead
//! (SIGSTOP to its own pid: every thread stops where it is, as in a long GC pause or a
//! network cut), and carries on from that very point when the test sends SIGCONT — a zombie
//! owner resumed mid-transaction. The marker is created with `create_new`, so among the
//! workers of one cluster that share the setting exactly one crashes, once; the marker is
//! also the test's proof that the crash happened at that point.
//!
//! Release builds compile every point to nothing and never read the variable.

use std::sync::atomic::{AtomicU64, Ordering};

use capstan_kafka::exactly_once::PublishStep;
use std::sync::OnceLock;

/// A place in the code where a test may inject a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// A batch carrying a snapshot chunk was acknowledged by Kafka; the chunk's `pk_cursor`
    /// is not yet written to Raft (its `delivered_pk` is).
    SnapshotChunkPublished,
    /// Exactly-once: a batch's rows are acknowledged inside its open Kafka transaction.
    ExactlyOnceRowsSent,
    /// Exactly-once: the offsets record is acknowledged too; the transaction is open.
    ExactlyOnceOffsetsSent,
    /// Exactly-once: the transaction committed; its checkpoint is not yet in Raft.
    ExactlyOnceCommitted,
    /// At-least-once: the publisher's fence found the lease held; the record it guards is
    /// not yet enqueued (with `/stop`: a zombie frozen right after its lease check).
    PublishLeaseChecked,
}

impl FaultPoint {
    fn name(self) -> &'static str {
        match self {
            FaultPoint::SnapshotChunkPublished => "snapshot_chunk_published",
            FaultPoint::ExactlyOnceRowsSent => "exactly_once_rows_sent",
            FaultPoint::ExactlyOnceOffsetsSent => "exactly_once_offsets_sent",
            FaultPoint::ExactlyOnceCommitted => "exactly_once_committed",
            FaultPoint::PublishLeaseChecked => "publish_lease_checked",
        }
    }

    /// The point after one step of an exactly-once batch (the publisher's step hook).
    pub fn exactly_once_step(step: PublishStep) {
        match step {
            PublishStep::RowsSent => FaultPoint::ExactlyOnceRowsSent,
            PublishStep::OffsetsSent => FaultPoint::ExactlyOnceOffsetsSent,
            PublishStep::Committed => FaultPoint::ExactlyOnceCommitted,
        }
        .hit()
    }

    /// Crashes the process here if the environment asks for it (debug builds only).
    pub fn hit(self) {
        if cfg!(debug_assertions) {
            armed(self);
        }
    }
}

/// What an armed point does when it is hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// `abort()`: a crash.
    Abort,
    /// SIGSTOP to the own process: frozen until SIGCONT.
    Stop,
}

/// The parsed `CAPSTAN_FAULT`: point name, the hit that fires, what it does, the marker file.
#[derive(Debug, PartialEq, Eq)]
struct Armed {
    point: String,
    at: u64,
    action: Action,
    marker: std::path::PathBuf,
}

fn parse(spec: &str) -> Option<Armed> {
    let (point, rest) = spec.split_once('@')?;
    let (at, marker) = rest.split_once(':')?;
    let (at, action) = match at.split_once('/') {
        None => (at, Action::Abort),
        Some((at, "stop")) => (at, Action::Stop),
        Some(_) => return None,
    };
    let at = at.parse().ok().filter(|n| *n > 0)?;
    (!point.is_empty() && !marker.is_empty()).then(|| Armed {
        point: point.to_string(),
        at,
        action,
        marker: marker.into(),
    })
}

fn armed(point: FaultPoint) {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let armed = ARMED.get_or_init(|| {
        let spec = std::env::var("CAPSTAN_FAULT").ok()?;
        let parsed = parse(&spec);
        match &parsed {
            Some(a) => tracing::warn!(point = %a.point, at = a.at, "fault injection armed"),
            None => tracing::warn!("CAPSTAN_FAULT is malformed, ignored"),
        }
        parsed
    });
    let Some(a) = armed.as_ref().filter(|a| a.point == point.name()) else {
        return;
    };
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 != a.at {
        return;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&a.marker);
    if created.is_err() {
        return;
    }
    match a.action {
        Action::Abort => {
            tracing::error!(point = %a.point, "fault injected: aborting");
            std::process::abort();
        }
        Action::Stop => {
            tracing::error!(point = %a.point, "fault injected: stopping this process");
            // `kill` delivers SIGSTOP before it returns; this thread stops as it wakes
            let stopped = std::process::Command::new("kill")
                .arg("-STOP")
                .arg(std::process::id().to_string())
                .status();
            tracing::warn!(point = %a.point, ok = stopped.is_ok_and(|s| s.success()), "fault injection: continued after stop");
            // the frozen thread is the last to run again: the process's lease renewal, which
            // wakes with it, is confirmed first (or RESUME_WAIT_NAPS pass). That order once let a
            // resumed owner go on publishing under its renewed lease
            // (the stop can take effect a moment after `kill` returned, so the wait is counted
            // in naps taken, not by a clock that also runs while the process is stopped)
            let renewed = LEASE_CONFIRMATIONS.load(Ordering::Relaxed);
            let wait = || {
                for _ in 0..RESUME_WAIT_NAPS {
                    if LEASE_CONFIRMATIONS.load(Ordering::Relaxed) != renewed {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            };
            // on a multi-threaded runtime, hand this worker's queued tasks (the renewal among
            // them) to another thread while this one waits
            match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
                Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                    tokio::task::block_in_place(wait);
                }
                _ => wait(),
            }
            tracing::warn!(
                point = %a.point,
                renewed = LEASE_CONFIRMATIONS.load(Ordering::Relaxed) > renewed,
                "fault injection: the stopped thread goes on"
            );
        }
    }
}

/// How long a thread frozen by `/stop` waits, once the process is continued, for a lease
/// renewal to be confirmed: at most this many naps of 5 ms (5 s).
const RESUME_WAIT_NAPS: u32 = 1_000;

/// Lease renewals confirmed in this process (see [`lease_confirmed`]).
static LEASE_CONFIRMATIONS: AtomicU64 = AtomicU64::new(0);

/// Counts a confirmed lease renewal: a thread resumed after `/stop` waits for the next one.
pub fn lease_confirmed() {
    LEASE_CONFIRMATIONS.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_names_point_hit_and_marker() {
        assert_eq!(
            parse("snapshot_chunk_published@3:/tmp/x:y"),
            Some(Armed {
                point: "snapshot_chunk_published".into(),
                at: 3,
                action: Action::Abort,
                marker: "/tmp/x:y".into(),
            })
        );
        assert_eq!(
            parse("exactly_once_rows_sent@2/stop:/tmp/m"),
            Some(Armed {
                point: "exactly_once_rows_sent".into(),
                at: 2,
                action: Action::Stop,
                marker: "/tmp/m".into(),
            })
        );
        for bad in [
            "",
            "p",
            "p@",
            "p@0:/m",
            "p@x:/m",
            "@1:/m",
            "p@1:",
            "p@1/kill:/m",
            "p@/stop:/m",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
