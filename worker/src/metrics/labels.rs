//! The label sets of the metric families, and the fixed values some labels take. Every label
//! value is a pipeline name, a state, an outcome or a stable error code: never a row value, a
//! position or a secret.

use prometheus_client::encoding::EncodeLabelSet;

/// The runner states a pipeline can report, plus `unassigned` before any report.
pub(super) const STATES: [&str; 8] = [
    "unassigned",
    "starting",
    "snapshotting",
    "streaming",
    "paused",
    "stopped",
    "failed",
    "retrying",
];

/// The desired states.
pub(super) const DESIRED: [&str; 3] = ["running", "paused", "stopped"];

/// The outcomes of a chunk read ahead, in the order of `Metrics::set_snapshot_read_ahead`.
pub(super) const READ_AHEAD_OUTCOMES: [&str; 3] = ["used", "stale", "wasted"];

/// The `reason` of a halt or a retry whose code is not a stable snake_case code.
pub(super) const OTHER_REASON: &str = "other";

/// The longest code kept as a `reason` label.
const MAX_REASON_LEN: usize = 64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PipelineLabel {
    pub(super) pipeline: String,
}

impl PipelineLabel {
    pub(super) fn new(pipeline: &str) -> Self {
        PipelineLabel {
            pipeline: pipeline.to_string(),
        }
    }
}

/// A pipeline and the stable code of why something happened to it (a halt, a retry).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) pipeline: String,
    pub(super) reason: String,
}

impl ReasonLabel {
    pub(super) fn new(pipeline: &str, code: &str) -> Self {
        ReasonLabel {
            pipeline: pipeline.to_string(),
            reason: reason_label(code),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReadAheadLabel {
    pub(super) pipeline: String,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabel {
    pub(super) state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DesiredLabel {
    pub(super) desired_state: String,
}

/// The labels of `capstan_build_info`: the crate version, and the commit when the build was
/// given one (`CAPSTAN_GIT_COMMIT` in the build's environment, as `deploy/release.sh` does).
pub(super) type BuildLabels = Vec<(&'static str, String)>;

/// This build's labels.
pub(super) fn build_labels() -> BuildLabels {
    build_labels_of(env!("CARGO_PKG_VERSION"), option_env!("CAPSTAN_GIT_COMMIT"))
}

/// The labels of a build of `version` at `commit`; a commit that is not a plain hex string
/// (empty, `unknown`, a dirty marker) is left out.
pub(super) fn build_labels_of(version: &str, commit: Option<&str>) -> BuildLabels {
    let mut labels = vec![("version", version.to_string())];
    let commit = commit
        .map(str::trim)
        .filter(|c| (7..=64).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_hexdigit()));
    if let Some(commit) = commit {
        labels.push(("commit", commit.to_ascii_lowercase()));
    }
    labels
}

/// `code` when it is a stable snake_case code (`[a-z0-9_]`, starting with a letter, at most
/// 64 characters), else `other`: a label value is never free text, so the series stay few
/// and value-free whatever a code's source.
pub(super) fn reason_label(code: &str) -> String {
    let stable = code.len() <= MAX_REASON_LEN
        && code.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if stable { code } else { OTHER_REASON }.to_string()
}
