//! Where the snapshot-complete marker of a table goes, as users choose it.

use serde::{Deserialize, Serialize};

/// Where the record that closes a table's snapshot (`{"snapshot_complete": …}`) is written.
///
/// The default keeps table topics free of anything but change events (Flink's
/// `debezium-json`, for one, fails a job on a record without `op`); the marker goes to one
/// control topic instead, a header on the table's last row could not carry it: an empty table,
/// or a table whose last chunk read back empty, has no last row.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMarker {
    /// `<topic_prefix>.snapshot_complete` (the default): one record per table snapshot,
    /// keyed by the table.
    #[default]
    ControlTopic,
    /// The table's own topic, after its last row (capstan's behaviour before the control
    /// topic; opt-in).
    TableTopic,
}

/// The suffix of the control topic under the topic prefix.
pub const SNAPSHOT_MARKER_TOPIC_SUFFIX: &str = "snapshot_complete";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_names_and_the_control_topic_by_default() {
        assert_eq!(SnapshotMarker::default(), SnapshotMarker::ControlTopic);
        let m: SnapshotMarker = serde_json::from_str(r#""table_topic""#).unwrap();
        assert_eq!(m, SnapshotMarker::TableTopic);
        assert!(serde_json::from_str::<SnapshotMarker>(r#""header""#).is_err());
    }
}
