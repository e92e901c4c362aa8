use std::time::Duration;

use capstan_core::position::{Flavor, Position};
use capstan_raft_store::{Command, DesiredState, SpecJson};

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
    let t0 = Instant::now();
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
        line(&text, "capstan_pipeline_halts_total{pipeline=\"a\"}"),
        Some("capstan_pipeline_halts_total{pipeline=\"a\"} 1")
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
    m.record_published("p", 10, 2, 5000);
    m.record_published("p", 5, 1, 100);
    m.set_lag_seconds("p", 0.25);
    m.record_snapshot_rows("p", 3);
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
    assert!(
        text.contains("# TYPE capstan_pipeline_rows counter"),
        "{text}"
    );
}
