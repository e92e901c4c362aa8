//! [`FaultPoint`]: crash injection for tests, compiled into debug builds only.
//!
//! Some crash windows are a few instructions wide (a chunk acknowledged by Kafka, its
//! `pk_cursor` not yet in Raft); a `kill -9` from outside lands in them by luck only. A test
//! names such a window in the worker's environment:
//!
//! ```text
//! CAPSTAN_FAULT=<point>@<n>:<marker file>
//! ```
//!
//! The `n`-th time this process passes `<point>` it creates `<marker file>` and aborts (no
//! destructor runs, no buffer is flushed: a crash). The marker is created with `create_new`,
//! so among the workers of one cluster that share the setting exactly one crashes, once; the
//! marker is also the test's proof that the crash happened at that point.
//!
//! Release builds compile every point to nothing and never read the variable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A place in the code where a test may inject a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// A batch carrying a snapshot chunk was acknowledged by Kafka; the chunk's `pk_cursor`
    /// is not yet written to Raft (its `delivered_pk` is).
    SnapshotChunkPublished,
}

impl FaultPoint {
    fn name(self) -> &'static str {
        match self {
            FaultPoint::SnapshotChunkPublished => "snapshot_chunk_published",
        }
    }

    /// Crashes the process here if the environment asks for it (debug builds only).
    pub fn hit(self) {
        if cfg!(debug_assertions) {
            armed(self);
        }
    }
}

/// The parsed `CAPSTAN_FAULT`: point name, the hit that crashes, the marker file.
#[derive(Debug, PartialEq, Eq)]
struct Armed {
    point: String,
    at: u64,
    marker: std::path::PathBuf,
}

fn parse(spec: &str) -> Option<Armed> {
    let (point, rest) = spec.split_once('@')?;
    let (at, marker) = rest.split_once(':')?;
    let at = at.parse().ok().filter(|n| *n > 0)?;
    (!point.is_empty() && !marker.is_empty()).then(|| Armed {
        point: point.to_string(),
        at,
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
    if created.is_ok() {
        tracing::error!(point = %a.point, "fault injected: aborting");
        std::process::abort();
    }
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
                marker: "/tmp/x:y".into(),
            })
        );
        for bad in ["", "p", "p@", "p@0:/m", "p@x:/m", "@1:/m", "p@1:"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
