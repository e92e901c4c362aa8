//! How a pipeline's status and offsets read on a terminal: pure functions of the API's JSON
//! (`PipelineStatus`, `PipelineOffsets`), and the progress of each snapshot table.

use serde_json::Value;

/// The snapshot states that still have rows to read.
const UNFINISHED: [&str; 2] = ["in_progress", "pending"];

/// `pipeline status NAME`: the state, owner, position, lag and each snapshot table.
pub fn status_lines(v: &Value) -> String {
    let mut lines = header_lines(v);
    lines.extend(snapshot_lines(&v["snapshot"], false));
    lines.join("\n")
}

/// The status without the per-table lines (`--watch` draws those as bars), with the count of
/// complete tables when there is a snapshot.
pub fn header_lines(v: &Value) -> Vec<String> {
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    let owner = match v["owner"].as_u64() {
        Some(o) => format!("node {o}"),
        None => "none".into(),
    };
    let mut lines = vec![
        format!("pipeline:      {}", text("name")),
        format!("desired state: {}", text("desired_state")),
        format!("state:         {}", text("state")),
    ];
    if let Some(reason) = v["reason"].as_str() {
        lines.push(format!("reason:        {reason}"));
    }
    if let Some(detail) = v["detail"].as_str() {
        lines.push(format!("detail:        {detail}"));
    }
    lines.push(format!(
        "owner:         {owner} (epoch {})",
        v["epoch"].as_u64().unwrap_or_default()
    ));
    if let Some(to) = v["move_to"].as_u64() {
        lines.push(format!(
            "moving to:     node {to} (once the owner's runner has ended)"
        ));
    }
    lines.push(format!("position:      {}", text("position")));
    if let Some(lag) = v["lag_ms"].as_u64() {
        lines.push(format!("lag:           {lag} ms"));
    }
    if let Some(rows) = v["rows_total"].as_u64() {
        lines.push(format!("rows:          {rows} published by the owner"));
    }
    if let Some(summary) = snapshot_summary(&v["snapshot"]) {
        lines.push(summary);
    }
    lines
}

/// `pipeline offsets NAME`: where streaming resumes and how far the snapshot got.
pub fn offsets_lines(v: &Value) -> String {
    let mut lines = vec![
        format!("pipeline:      {}", v["name"].as_str().unwrap_or("-")),
        format!("epoch:         {}", v["epoch"].as_u64().unwrap_or_default()),
    ];
    match (v["position"].as_str(), v["flavor"].as_str()) {
        (Some(position), Some(flavor)) => {
            lines.push(format!("position:      {position} ({flavor})"));
        }
        (Some(position), None) => lines.push(format!("position:      {position}")),
        (None, _) => lines.push(
            "position:      none (no checkpoint: the next start resolves start_position)".into(),
        ),
    }
    if let Some(processed) = v["processed"].as_str() {
        lines.push(format!("processed:     {processed}"));
    }
    if tables(&v["snapshot"]).is_empty() {
        lines.push("snapshot:      none".into());
    }
    lines.extend(snapshot_lines(&v["snapshot"], true));
    lines.join("\n")
}

/// `pipeline snapshot NAME`: the ad-hoc snapshots (`SnapshotsView`), one line per table.
pub fn ad_hoc_lines(v: &Value) -> String {
    let mut lines = vec![format!(
        "pipeline:      {}",
        v["name"].as_str().unwrap_or("-")
    )];
    if tables(&v["tables"]).is_empty() {
        lines.push("ad-hoc snapshots: none".into());
    }
    lines.extend(snapshot_lines(&v["tables"], true));
    lines.join("\n")
}

fn tables(snapshot: &Value) -> &[Value] {
    snapshot.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// `snapshot:      2 of 3 tables complete`, when there is a snapshot.
fn snapshot_summary(snapshot: &Value) -> Option<String> {
    let all = tables(snapshot);
    if all.is_empty() {
        return None;
    }
    let complete = all.iter().filter(|t| t["status"] == "complete").count();
    Some(format!(
        "snapshot:      {complete} of {} tables complete",
        all.len()
    ))
}

/// One line per table (after the summary line when `with_summary`): name, status, rows done
/// of the estimate and the share, and `(incremental)` for an operator's ad-hoc snapshot.
fn snapshot_lines(snapshot: &Value, with_summary: bool) -> Vec<String> {
    let all = tables(snapshot);
    let width = all
        .iter()
        .filter_map(|t| t["table"].as_str())
        .map(str::len)
        .max()
        .unwrap_or_default();
    let mut lines: Vec<String> = if with_summary {
        snapshot_summary(snapshot).into_iter().collect()
    } else {
        Vec::new()
    };
    for t in all {
        let status = t["status"].as_str().unwrap_or("-");
        let done = t["rows_done"].as_u64().unwrap_or_default();
        let estimated = t["rows_estimated"].as_u64().unwrap_or_default();
        let mut rows = match percent(done, estimated, status) {
            Some(p) => format!("{done} of ~{estimated} rows ({p}%)"),
            None => format!("{done} rows"),
        };
        if t["kind"] == "incremental" {
            rows.push_str("  (incremental)");
        }
        lines.push(format!(
            "  {:<width$}  {status:<16}  {rows}",
            t["table"].as_str().unwrap_or("-")
        ));
    }
    lines
}

/// The share of a table read: 100 once complete; otherwise rows done over the estimate (made
/// when the snapshot began, so rows done may pass it), at most 99. `None` without an estimate.
pub fn percent(done: u64, estimated: u64, status: &str) -> Option<u64> {
    if status == "complete" {
        return Some(100);
    }
    if estimated == 0 {
        return None;
    }
    let share = u128::from(done) * 100 / u128::from(estimated);
    Some(u64::try_from(share.min(99)).unwrap_or(99))
}

/// A progress bar of one table still being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableBar {
    /// `schema.table`.
    pub table: String,
    /// `in_progress` or `pending`.
    pub status: String,
    /// Rows published so far.
    pub done: u64,
    /// The bar's length: the estimate, or the rows done when they passed it (0: unknown).
    pub total: u64,
}

/// One bar per table with rows still to read, in table order.
pub fn table_bars(v: &Value) -> Vec<TableBar> {
    tables(&v["snapshot"])
        .iter()
        .filter(|t| UNFINISHED.iter().any(|s| t["status"] == *s))
        .map(|t| {
            let done = t["rows_done"].as_u64().unwrap_or_default();
            TableBar {
                table: t["table"].as_str().unwrap_or("-").to_string(),
                status: t["status"].as_str().unwrap_or("-").to_string(),
                done,
                total: t["rows_estimated"].as_u64().unwrap_or_default().max(done),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snapshotting() -> Value {
        json!({"name": "orders", "desired_state": "running", "owner": 2, "epoch": 7,
        "state": "snapshotting", "reason": null, "position": "uuid:1-5", "lag_ms": null,
        "snapshot": [
            {"table": "shop.orders", "status": "complete", "rows_done": 1204331, "rows_estimated": 1198000},
            {"table": "shop.order_items", "status": "in_progress", "rows_done": 2500, "rows_estimated": 10000},
            {"table": "shop.x", "kind": "incremental", "status": "pending", "rows_done": 0, "rows_estimated": 0}
        ]})
    }

    #[test]
    fn status_shows_lag_and_each_table() {
        let mut v = snapshotting();
        v["state"] = json!("streaming");
        v["lag_ms"] = json!(12);
        v["rows_total"] = json!(4021);
        assert_eq!(
            status_lines(&v),
            "pipeline:      orders\n\
             desired state: running\n\
             state:         streaming\n\
             owner:         node 2 (epoch 7)\n\
             position:      uuid:1-5\n\
             lag:           12 ms\n\
             rows:          4021 published by the owner\n\
             snapshot:      1 of 3 tables complete\n  \
               shop.orders       complete          1204331 of ~1198000 rows (100%)\n  \
               shop.order_items  in_progress       2500 of ~10000 rows (25%)\n  \
               shop.x            pending           0 rows  (incremental)"
        );
    }

    #[test]
    fn a_failure_shows_its_reason_and_detail() {
        let v = json!({"name": "p", "desired_state": "running", "state": "failed",
            "reason": "kafka_delivery_failed", "detail": "kafka delivery failed: MsgTimedOut",
            "owner": null, "epoch": 5, "position": null, "lag_ms": null, "snapshot": []});
        assert_eq!(
            status_lines(&v),
            "pipeline:      p\n\
             desired state: running\n\
             state:         failed\n\
             reason:        kafka_delivery_failed\n\
             detail:        kafka delivery failed: MsgTimedOut\n\
             owner:         none (epoch 5)\n\
             position:      -"
        );
    }

    #[test]
    fn offsets_show_position_and_snapshot() {
        let v = json!({"name": "orders", "epoch": 3, "flavor": "mariadb", "position": "0-1-42",
            "processed": "0-1-45", "snapshot": snapshotting()["snapshot"]});
        assert_eq!(
            offsets_lines(&v),
            "pipeline:      orders\n\
             epoch:         3\n\
             position:      0-1-42 (mariadb)\n\
             processed:     0-1-45\n\
             snapshot:      1 of 3 tables complete\n  \
               shop.orders       complete          1204331 of ~1198000 rows (100%)\n  \
               shop.order_items  in_progress       2500 of ~10000 rows (25%)\n  \
               shop.x            pending           0 rows  (incremental)"
        );
        let v = json!({"name": "orders", "epoch": 4, "flavor": null, "position": null,
            "snapshot": []});
        assert_eq!(
            offsets_lines(&v),
            "pipeline:      orders\n\
             epoch:         4\n\
             position:      none (no checkpoint: the next start resolves start_position)\n\
             snapshot:      none"
        );
    }

    #[test]
    fn ad_hoc_snapshots_show_each_table() {
        let v = json!({"name": "p", "tables": [
            {"table": "shop.a", "kind": "incremental", "status": "in_progress",
             "rows_done": 50, "rows_estimated": 200}]});
        assert_eq!(
            ad_hoc_lines(&v),
            "pipeline:      p\n\
             snapshot:      0 of 1 tables complete\n  \
               shop.a  in_progress       50 of ~200 rows (25%)  (incremental)"
        );
        let v = json!({"name": "p", "tables": []});
        assert_eq!(ad_hoc_lines(&v), "pipeline:      p\nad-hoc snapshots: none");
    }

    #[test]
    fn shares_are_capped_until_complete() {
        assert_eq!(percent(50, 200, "in_progress"), Some(25));
        assert_eq!(percent(250, 200, "in_progress"), Some(99));
        assert_eq!(percent(199, 200, "in_progress"), Some(99));
        assert_eq!(percent(150, 200, "complete"), Some(100));
        assert_eq!(percent(0, 0, "complete"), Some(100));
        assert_eq!(percent(10, 0, "in_progress"), None);
        assert_eq!(percent(u64::MAX, 1, "in_progress"), Some(99));
    }

    #[test]
    fn bars_cover_the_tables_still_read() {
        let mut v = snapshotting();
        v["snapshot"][1]["rows_done"] = json!(12000);
        assert_eq!(
            table_bars(&v),
            vec![
                TableBar {
                    table: "shop.order_items".into(),
                    status: "in_progress".into(),
                    done: 12000,
                    total: 12000
                },
                TableBar {
                    table: "shop.x".into(),
                    status: "pending".into(),
                    done: 0,
                    total: 0
                },
            ]
        );
        assert_eq!(
            header_lines(&v).last().map(String::as_str),
            Some("snapshot:      1 of 3 tables complete")
        );
        assert!(table_bars(&json!({"snapshot": []})).is_empty());
    }
}
