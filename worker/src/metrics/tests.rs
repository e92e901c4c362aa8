use std::time::Duration;

use capstan_core::position::{Flavor, Position};
use capstan_raft_store::{ClusterState, Command, DesiredState, RunnerState, SpecJson};

use super::labels::{build_labels_of, reason_label};
use super::*;

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

fn state() -> ClusterState {
    let mut s = ClusterState::new();
    for name in ["a", "b"] {
        s.apply(Command::CreatePipeline {
            name: name.into(),
            spec: SpecJson::new(serde_json::json!({})),
            incarnation: None,
        });
    }
    s.apply(Command::SetDesiredState {
        name: "a".into(),
        state: DesiredState::Running,
    });
    s.apply(Command::AssignOwner {
        pipeline: "a".into(),
        node: 2,
        epoch: 1,
    });
    s
}

#[test]
fn derived_series_follow_the_state() {
    let m = Metrics::new();
    let mut s = state();
    let t0 = std::time::Instant::now();
    let raft = RaftView {
        term: 4,
        leader: Some(2),
        last_applied: Some(17),
        is_leader: true,
        lease_valid: true,
    };
    m.observe(&s, raft, t0);
    let text = m.encode().unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_eq!(
        line(&text, "capstan_raft_term "),
        Some("capstan_raft_term 4")
    );
    assert_eq!(
        line(&text, "capstan_raft_leader "),
        Some("capstan_raft_leader 2")
    );
    assert_eq!(
        line(&text, "capstan_raft_last_applied_index "),
        Some("capstan_raft_last_applied_index 17")
    );
    assert_eq!(
        line(&text, "capstan_pipelines{state=\"unassigned\"}"),
        Some("capstan_pipelines{state=\"unassigned\"} 2")
    );
    assert_eq!(
        line(&text, "capstan_pipelines{state=\"failed\"}"),
        Some("capstan_pipelines{state=\"failed\"} 0")
    );
    assert_eq!(
        line(
            &text,
            "capstan_pipelines_desired{desired_state=\"running\"}"
        ),
        Some("capstan_pipelines_desired{desired_state=\"running\"} 1")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_epoch{pipeline=\"a\"}"),
        Some("capstan_pipeline_epoch{pipeline=\"a\"} 1")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_checkpoint_present{pipeline=\"a\"}"),
        Some("capstan_pipeline_checkpoint_present{pipeline=\"a\"} 0")
    );

    // a checkpoint appears; its age grows until it changes
    let pos = Position::parse(Flavor::Mysql, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5").unwrap();
    s.apply(Command::CommitCheckpoint {
        pipeline: "a".into(),
        epoch: 1,
        position: pos,
        processed: None,
    });
    m.observe(&s, raft, t0);
    m.observe(&s, raft, t0 + Duration::from_secs(7));
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_pipeline_checkpoint_present{pipeline=\"a\"}"),
        Some("capstan_pipeline_checkpoint_present{pipeline=\"a\"} 1")
    );
    assert_eq!(
        line(
            &text,
            "capstan_pipeline_checkpoint_age_seconds{pipeline=\"a\"}"
        ),
        Some("capstan_pipeline_checkpoint_age_seconds{pipeline=\"a\"} 7.0")
    );

    // a failure counts one halt per incarnation, however often it is observed
    s.apply(Command::ReportStatus {
        pipeline: "a".into(),
        epoch: 1,
        state: RunnerState::Failed,
        reason: Some("x".into()),
        detail: None,
    });
    m.observe(&s, raft, t0);
    m.observe(&s, raft, t0);
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_pipeline_halts_total{"),
        Some("capstan_pipeline_halts_total{pipeline=\"a\",reason=\"x\"} 1")
    );
    assert!(
        text.contains("# TYPE capstan_pipeline_halts counter\n"),
        "{text}"
    );
    assert_eq!(
        line(&text, "capstan_pipelines{state=\"failed\"}"),
        Some("capstan_pipelines{state=\"failed\"} 1")
    );

    // a deleted pipeline loses its series
    s.apply(Command::DeletePipeline { name: "a".into() });
    m.observe(&s, raft, t0);
    let text = m.encode().unwrap();
    assert!(!text.contains("pipeline=\"a\""), "{text}");
    assert!(text.contains("pipeline=\"b\""), "{text}");
}

#[test]
fn runner_hooks_count() {
    let m = Metrics::new();
    m.runner_started("p");
    assert_eq!(m.rows_total("p"), Some(0));
    m.record_published("p", 10, 2, 5000);
    m.record_published("p", 5, 1, 100);
    m.set_lag_seconds("p", 0.25);
    m.record_snapshot_rows("p", 3);
    assert_eq!(m.rows_total("p"), Some(15));
    assert_eq!(m.rows_total("q"), None);
    assert_eq!(m.lag_ms("p"), Some(250));
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_pipeline_rows_total{"),
        Some("capstan_pipeline_rows_total{pipeline=\"p\"} 15")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_transactions_total{"),
        Some("capstan_pipeline_transactions_total{pipeline=\"p\"} 3")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_bytes_total{"),
        Some("capstan_pipeline_bytes_total{pipeline=\"p\"} 5100")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_lag_seconds{"),
        Some("capstan_pipeline_lag_seconds{pipeline=\"p\"} 0.25")
    );
    assert_eq!(
        line(&text, "capstan_pipeline_snapshot_rows_total{"),
        Some("capstan_pipeline_snapshot_rows_total{pipeline=\"p\"} 3")
    );
    for meta in [
        "# TYPE capstan_pipeline_rows counter\n",
        "# TYPE capstan_pipeline_bytes counter\n# UNIT capstan_pipeline_bytes bytes\n",
        "# TYPE capstan_pipeline_lag_seconds gauge\n# UNIT capstan_pipeline_lag_seconds seconds\n",
    ] {
        assert!(text.contains(meta), "{meta} missing:\n{text}");
    }
}

#[test]
fn snapshot_counts_of_each_run_add_up() {
    let m = Metrics::new();
    m.runner_started("p");
    m.set_snapshot_suppressed("p", 4);
    m.set_snapshot_suppressed("p", 6);
    m.set_snapshot_read_ahead("p", [1, 0, 0]);
    m.set_snapshot_read_ahead("p", [3, 1, 0]);
    // the next run's driver counts from zero again
    m.runner_started("p");
    m.set_snapshot_suppressed("p", 2);
    m.set_snapshot_read_ahead("p", [2, 0, 1]);
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_pipeline_snapshot_suppressed_total{"),
        Some("capstan_pipeline_snapshot_suppressed_total{pipeline=\"p\"} 8")
    );
    for (outcome, n) in [("used", 5), ("stale", 1), ("wasted", 1)] {
        let series = format!(
            "capstan_pipeline_snapshot_read_ahead_total{{pipeline=\"p\",outcome=\"{outcome}\"}}"
        );
        assert_eq!(
            line(&text, &series),
            Some(format!("{series} {n}").as_str()),
            "{text}"
        );
    }
    assert!(text.contains("# TYPE capstan_pipeline_snapshot_suppressed counter\n"));
    assert!(text.contains("# TYPE capstan_pipeline_snapshot_read_ahead counter\n"));
}

#[test]
fn halts_and_retries_count_by_reason() {
    let m = Metrics::new();
    m.record_retry("p", "kafka_delivery_failed");
    m.record_retry("p", "kafka_delivery_failed");
    m.record_retry("p", "source_unreachable");
    // free text never becomes a label value
    m.record_retry("p", "delivery failed: host 10.0.0.7");
    let text = m.encode().unwrap();
    for (reason, n) in [
        ("kafka_delivery_failed", 2),
        ("source_unreachable", 1),
        ("other", 1),
    ] {
        let series =
            format!("capstan_pipeline_retries_total{{pipeline=\"p\",reason=\"{reason}\"}}");
        assert_eq!(
            line(&text, &series),
            Some(format!("{series} {n}").as_str()),
            "{text}"
        );
    }
    assert!(!text.contains("10.0.0.7"), "{text}");
    assert!(text.contains("# TYPE capstan_pipeline_retries counter\n"));

    // a halt is counted under the code the owner reported
    let mut s = state();
    s.apply(Command::ReportStatus {
        pipeline: "a".into(),
        epoch: 1,
        state: RunnerState::Failed,
        reason: Some("authentication_failed".into()),
        detail: Some("source: authentication failed".into()),
    });
    m.observe(&s, RaftView::default(), std::time::Instant::now());
    m.record_retry("a", "source_unreachable");
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_pipeline_halts_total{"),
        Some("capstan_pipeline_halts_total{pipeline=\"a\",reason=\"authentication_failed\"} 1")
    );

    // deleting the pipeline removes its series of every reason
    s.apply(Command::DeletePipeline { name: "a".into() });
    m.observe(&s, RaftView::default(), std::time::Instant::now());
    let text = m.encode().unwrap();
    assert!(!text.contains("pipeline=\"a\""), "{text}");
}

#[test]
fn reasons_are_stable_codes_or_other() {
    assert_eq!(
        reason_label("kafka_delivery_failed"),
        "kafka_delivery_failed"
    );
    assert_eq!(reason_label("http2_error"), "http2_error");
    let long = "a".repeat(65);
    for bad in ["", "Timeout", "2fast", "a b", "a-b", "x:y", long.as_str()] {
        assert_eq!(reason_label(bad), "other", "{bad}");
    }
}

#[test]
fn build_info_names_the_version() {
    let m = Metrics::new();
    let text = m.encode().unwrap();
    assert!(text.contains("# TYPE capstan_build_info gauge\n"), "{text}");
    let info = line(&text, "capstan_build_info{").unwrap();
    let version = format!(
        "capstan_build_info{{version=\"{}\"",
        env!("CARGO_PKG_VERSION")
    );
    assert!(info.starts_with(&version), "{info}");
    assert!(info.ends_with("} 1"), "{info}");

    assert_eq!(
        build_labels_of("1.2.3", None),
        vec![("version", "1.2.3".to_string())]
    );
    assert_eq!(
        build_labels_of("1.2.3", Some("0A1B2C3D4E5F\n")),
        vec![
            ("version", "1.2.3".to_string()),
            ("commit", "0a1b2c3d4e5f".to_string())
        ]
    );
    for no_commit in ["", "unknown", "0a1b2c3-dirty", "abc"] {
        assert_eq!(
            build_labels_of("1.2.3", Some(no_commit)).len(),
            1,
            "{no_commit}"
        );
    }
}

#[test]
fn source_connection_and_reconnects() {
    let m = Metrics::new();
    m.runner_started("p");
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_source_connected{"),
        Some("capstan_source_connected{pipeline=\"p\"} 0")
    );
    assert_eq!(
        line(&text, "capstan_source_reconnects_total{"),
        Some("capstan_source_reconnects_total{pipeline=\"p\"} 0")
    );
    m.set_source_connected("p", true);
    m.set_source_connected("p", false);
    m.record_source_reconnect("p");
    m.set_source_connected("p", true);
    let text = m.encode().unwrap();
    assert_eq!(
        line(&text, "capstan_source_connected{"),
        Some("capstan_source_connected{pipeline=\"p\"} 1")
    );
    assert_eq!(
        line(&text, "capstan_source_reconnects_total{"),
        Some("capstan_source_reconnects_total{pipeline=\"p\"} 1")
    );
    assert!(text.contains("# TYPE capstan_source_connected gauge\n"));
    assert!(text.contains("# TYPE capstan_source_reconnects counter\n"));
}

/// Every counter's samples end in `_total`, no gauge's does, and every family has a HELP.
#[test]
fn names_follow_the_prometheus_conventions() {
    let m = Metrics::new();
    m.runner_started("p");
    m.record_published("p", 1, 1, 1);
    m.record_retry("p", "x");
    m.set_lag_seconds("p", 1.0);
    m.set_snapshot_suppressed("p", 1);
    m.set_snapshot_read_ahead("p", [1, 1, 1]);
    m.record_snapshot_rows("p", 1);
    m.observe(&state(), RaftView::default(), std::time::Instant::now());
    let text = m.encode().unwrap();
    let mut types = std::collections::BTreeMap::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            types.insert(name.to_string(), kind.to_string());
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no HELP"
            );
        }
    }
    assert!(types.len() >= 20, "{types:?}");
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let sample = l.split(['{', ' ']).next().unwrap();
        let (family, kind) = types
            .iter()
            .filter(|(name, _)| sample.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .unwrap_or_else(|| panic!("{sample} has no TYPE"));
        match kind.as_str() {
            "counter" => assert_eq!(sample, format!("{family}_total"), "{l}"),
            "gauge" => {
                assert_eq!(sample, family, "{l}");
                assert!(
                    !sample.ends_with("_total"),
                    "a gauge named like a counter: {l}"
                );
            }
            other => panic!("unexpected type {other} of {family}"),
        }
    }
}
