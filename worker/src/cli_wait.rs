//! `--wait STATE`: poll a pipeline's status until its state is STATE, within `--timeout`. A
//! pipeline that reports `failed` meanwhile (while another state is awaited) ends the wait
//! with its reason.

use std::time::{Duration, Instant};

use clap::builder::PossibleValuesParser;
use clap::Args;
use serde_json::Value;

use crate::cli_client::ApiClient;
use crate::cli_error::CliError;

/// Every state a status reports (`PipelineStatus::state`).
pub const STATES: [&str; 9] = [
    "starting",
    "snapshotting",
    "streaming",
    "paused",
    "stopped",
    "failed",
    "retrying",
    "assigned",
    "unassigned",
];

/// The `--wait` and `--timeout` options.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// Then poll the status every second until the pipeline's state is STATE; a `failed`
    /// pipeline ends the wait (exit status 1) unless `failed` is awaited.
    #[arg(long, value_name = "STATE", value_parser = PossibleValuesParser::new(STATES))]
    pub wait: Option<String>,
    /// How long `--wait` waits, in seconds (exit status 1 after it).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "120",
        value_parser = parse_seconds,
        requires = "wait"
    )]
    pub timeout: Duration,
}

impl WaitArgs {
    /// The goal of `--wait`, if given, once the status shows `fresh`.
    pub fn goal(&self, fresh: Freshness) -> Option<WaitGoal> {
        self.wait.as_ref().map(|state| WaitGoal {
            state: state.clone(),
            fresh,
            timeout: self.timeout,
        })
    }
}

/// A number of seconds, fractions allowed (`0.5`), more than zero.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds, such as 1 or 0.5".to_string())?;
    if secs.is_nan() || secs <= 0.0 {
        return Err("must be more than zero seconds".into());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| "is too large a number of seconds".into())
}

/// When a status read reflects the request just made (a node's applied state may lag a write
/// the leader committed by a moment): before that, the state it shows is not judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// Any status (`status --wait`).
    Any,
    /// The status shows this desired state (after pause, resume, stop).
    Desired(&'static str),
    /// The status shows this epoch or a later one (after a restart).
    Epoch(u64),
    /// The pipeline may not be known yet to the node asked (just created): a 404 is pending.
    Created,
    /// The status shows this owner and no pending move (after a move).
    Moved(u64),
}

/// What `--wait` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitGoal {
    /// The awaited state.
    pub state: String,
    /// When a status counts.
    pub fresh: Freshness,
    /// How long to wait.
    pub timeout: Duration,
}

/// What one status says about a wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Not there yet.
    Pending,
    /// The state is the awaited one.
    Reached,
    /// The pipeline failed (and `failed` was not awaited): its reason and detail.
    Failed {
        /// `reason (detail)`.
        reason: String,
    },
}

/// Judges one status (`PipelineStatus` JSON) against `goal`.
pub fn wait_outcome(status: &Value, goal: &WaitGoal) -> WaitOutcome {
    let fresh = match &goal.fresh {
        Freshness::Any | Freshness::Created => true,
        Freshness::Desired(desired) => status["desired_state"] == *desired,
        Freshness::Epoch(epoch) => status["epoch"].as_u64().is_some_and(|e| e >= *epoch),
        Freshness::Moved(to) => {
            status["owner"].as_u64() == Some(*to) && status["move_to"].is_null()
        }
    };
    let state = status["state"].as_str().unwrap_or_default();
    if !fresh {
        WaitOutcome::Pending
    } else if state == goal.state {
        WaitOutcome::Reached
    } else if state == "failed" {
        WaitOutcome::Failed {
            reason: failure_reason(status),
        }
    } else {
        WaitOutcome::Pending
    }
}

/// `reason (detail)` of a failed status.
fn failure_reason(status: &Value) -> String {
    let reason = status["reason"].as_str().unwrap_or("no reason given");
    match status["detail"].as_str() {
        Some(detail) => format!("{reason} ({detail})"),
        None => reason.to_string(),
    }
}

/// What the last status read showed, for the timeout's message.
pub fn last_seen(status: Option<&Value>) -> String {
    let Some(status) = status else {
        return "no status was read".into();
    };
    let state = status["state"].as_str().unwrap_or("-");
    let desired = status["desired_state"].as_str().unwrap_or("-");
    match status["reason"].as_str() {
        Some(reason) => {
            format!("its state is {state} (reason: {reason}), its desired state {desired}")
        }
        None => format!("its state is {state}, its desired state {desired}"),
    }
}

/// The error that ends a wait: a failure, or the timeout.
pub fn wait_error(
    name: &str,
    goal: &WaitGoal,
    outcome: WaitOutcome,
    last: Option<&Value>,
) -> CliError {
    match outcome {
        WaitOutcome::Failed { reason } => CliError::PipelineFailed {
            name: name.to_string(),
            wanted: goal.state.clone(),
            reason,
        },
        WaitOutcome::Pending | WaitOutcome::Reached => CliError::WaitTimedOut {
            name: name.to_string(),
            wanted: goal.state.clone(),
            after: format!("{:?}", goal.timeout),
            last: last_seen(last),
        },
    }
}

/// True for an error that means "not there yet" under `goal`: a pipeline just created that
/// the node asked does not know yet.
pub fn is_pending_error(e: &CliError, goal: &WaitGoal) -> bool {
    goal.fresh == Freshness::Created
        && matches!(e, CliError::Api { code, .. } if code == "unknown_pipeline")
}

/// Polls `name`'s status every `interval` until `goal` holds; answers the last status. Each
/// change of state is noted on standard error.
pub async fn wait_for(
    api: &ApiClient,
    name: &str,
    goal: &WaitGoal,
    interval: Duration,
) -> Result<Value, CliError> {
    let path = format!("/pipelines/{}/status", crate::cli_pipeline::encode(name));
    let deadline = Instant::now() + goal.timeout;
    let mut last: Option<Value> = None;
    loop {
        match api.get(&path).await {
            Ok(status) => match wait_outcome(&status, goal) {
                WaitOutcome::Reached => return Ok(status),
                WaitOutcome::Pending => {
                    if last.as_ref().map(|l| &l["state"]) != Some(&status["state"]) {
                        eprintln!(
                            "{name}: {} (waiting for {})",
                            status["state"].as_str().unwrap_or("-"),
                            goal.state
                        );
                    }
                    last = Some(status);
                }
                failed => return Err(wait_error(name, goal, failed, Some(&status))),
            },
            Err(e) if is_pending_error(&e, goal) => {}
            // an election, a node restarting: asked again until the deadline
            Err(e) if e.is_transient() => {
                eprintln!("{name}: the poll failed, polling again: {}: {e}", e.code());
            }
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(wait_error(name, goal, WaitOutcome::Pending, last.as_ref()));
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn goal(state: &str, fresh: Freshness) -> WaitGoal {
        WaitGoal {
            state: state.into(),
            fresh,
            timeout: Duration::from_secs(120),
        }
    }

    fn status(desired: &str, state: &str, epoch: u64) -> Value {
        json!({"name": "p", "desired_state": desired, "state": state, "epoch": epoch,
            "reason": null, "owner": 1, "position": null, "lag_ms": null, "snapshot": []})
    }

    #[test]
    fn the_awaited_state_is_reached() {
        let g = goal("streaming", Freshness::Any);
        assert_eq!(
            wait_outcome(&status("running", "starting", 1), &g),
            WaitOutcome::Pending
        );
        assert_eq!(
            wait_outcome(&status("running", "streaming", 1), &g),
            WaitOutcome::Reached
        );
    }

    #[test]
    fn a_failure_ends_the_wait_unless_awaited() {
        let mut s = status("running", "failed", 3);
        s["reason"] = json!("kafka_delivery_failed");
        s["detail"] = json!("kafka delivery failed: MsgTimedOut");
        assert_eq!(
            wait_outcome(&s, &goal("streaming", Freshness::Any)),
            WaitOutcome::Failed {
                reason: "kafka_delivery_failed (kafka delivery failed: MsgTimedOut)".into()
            }
        );
        assert_eq!(
            wait_outcome(&s, &goal("failed", Freshness::Any)),
            WaitOutcome::Reached
        );
        s["detail"] = Value::Null;
        s["reason"] = Value::Null;
        assert_eq!(
            wait_outcome(&s, &goal("stopped", Freshness::Any)),
            WaitOutcome::Failed {
                reason: "no reason given".into()
            }
        );
    }

    #[test]
    fn a_status_from_before_the_request_is_not_judged() {
        // stopped but not yet applied here: the old failure and the old state do not count
        let g = goal("stopped", Freshness::Desired("stopped"));
        assert_eq!(
            wait_outcome(&status("running", "failed", 2), &g),
            WaitOutcome::Pending
        );
        assert_eq!(
            wait_outcome(&status("running", "stopped", 2), &g),
            WaitOutcome::Pending
        );
        assert_eq!(
            wait_outcome(&status("stopped", "stopped", 2), &g),
            WaitOutcome::Reached
        );
        // restarted into epoch 5: epoch 4's halt is history
        let g = goal("streaming", Freshness::Epoch(5));
        assert_eq!(
            wait_outcome(&status("running", "failed", 4), &g),
            WaitOutcome::Pending
        );
        assert_eq!(
            wait_outcome(&status("running", "streaming", 5), &g),
            WaitOutcome::Reached
        );
    }

    #[test]
    fn a_move_is_judged_once_the_new_owner_holds_it() {
        let g = goal("streaming", Freshness::Moved(2));
        // still on node 1, moving: its streaming is the old owner's
        let mut s = status("running", "streaming", 4);
        s["move_to"] = json!(2);
        assert_eq!(wait_outcome(&s, &g), WaitOutcome::Pending);
        s["owner"] = json!(2);
        s["state"] = json!("assigned");
        s["move_to"] = Value::Null;
        assert_eq!(wait_outcome(&s, &g), WaitOutcome::Pending);
        s["state"] = json!("streaming");
        assert_eq!(wait_outcome(&s, &g), WaitOutcome::Reached);
    }

    #[test]
    fn only_a_new_pipeline_may_be_unknown() {
        let unknown = CliError::Api {
            status: 404,
            code: "unknown_pipeline".into(),
            message: "no pipeline named `p`".into(),
        };
        assert!(is_pending_error(
            &unknown,
            &goal("stopped", Freshness::Created)
        ));
        assert!(!is_pending_error(
            &unknown,
            &goal("stopped", Freshness::Any)
        ));
        let other = CliError::Api {
            status: 503,
            code: "no_leader".into(),
            message: "x".into(),
        };
        assert!(!is_pending_error(
            &other,
            &goal("stopped", Freshness::Created)
        ));
    }

    #[test]
    fn only_unreachable_nodes_and_server_errors_are_asked_again() {
        let api = |status: u16, code: &str| CliError::Api {
            status,
            code: code.into(),
            message: "m".into(),
        };
        assert!(api(503, "no_leader").is_transient());
        assert!(api(502, "leader_unreachable").is_transient());
        assert!(CliError::Unreachable {
            url: "u".into(),
            reason: "r".into()
        }
        .is_transient());
        assert!(!api(401, "unauthorized").is_transient());
        assert!(!api(404, "unknown_pipeline").is_transient());
        assert!(!CliError::Input("x".into()).is_transient());
    }

    #[test]
    fn the_errors_say_what_was_seen() {
        let g = goal("streaming", Freshness::Any);
        let mut s = status("running", "retrying", 2);
        s["reason"] = json!("source_unreachable");
        let e = wait_error("p", &g, WaitOutcome::Pending, Some(&s));
        assert_eq!(e.code(), "wait_timed_out");
        assert_eq!(
            e.to_string(),
            "pipeline p is not streaming after 120s: its state is retrying (reason: source_unreachable), its desired state running"
        );
        let e = wait_error("p", &g, WaitOutcome::Pending, None);
        assert_eq!(
            e.to_string(),
            "pipeline p is not streaming after 120s: no status was read"
        );
        let e = wait_error(
            "p",
            &g,
            WaitOutcome::Failed {
                reason: "authentication_failed".into(),
            },
            Some(&s),
        );
        assert_eq!(e.code(), "pipeline_failed");
        assert_eq!(
            e.to_string(),
            "pipeline p failed while waiting for streaming: authentication_failed"
        );
    }

    #[test]
    fn seconds_are_positive_numbers() {
        assert_eq!(parse_seconds("120"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds("2m").is_err());
        assert!(parse_seconds("1e300").is_err());
    }
}
