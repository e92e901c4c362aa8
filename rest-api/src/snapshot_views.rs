//! What the API takes and shows about an operator's ad-hoc (incremental) snapshots
//! (`/pipelines/{name}/snapshots`). Value-free: table names and counts, never a key cursor.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api_error::ApiError;
use crate::pipeline_views::TableOffset;

/// The most tables one request may name.
pub const MAX_SNAPSHOT_TABLES: usize = 1000;

/// A request for an ad-hoc snapshot (`POST /pipelines/{name}/snapshots`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// The tables to snapshot again, each `schema.table`, captured by the pipeline (1 to
    /// 1000, no repeats).
    #[schema(min_items = 1, max_items = 1000)]
    pub tables: Vec<String>,
    /// A row filter. Not supported yet: any value other than `null` is refused with
    /// `snapshot_filter_not_supported` (a filter would be user text in SQL).
    #[serde(rename = "where", default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub filter: Option<serde_json::Value>,
}

impl SnapshotRequest {
    /// Checks the request without I/O: 400 naming the field (`tables`, `tables[i]`, `where`).
    /// Whether each table is captured, exists and has a usable key is the worker's to check.
    pub fn check(&self) -> Result<(), ApiError> {
        if self.filter.as_ref().is_some_and(|f| !f.is_null()) {
            return Err(ApiError::invalid_field(
                "snapshot_filter_not_supported",
                "where",
                "a row filter is not supported yet: omit it (or send null) to snapshot every row",
            ));
        }
        if self.tables.is_empty() || self.tables.len() > MAX_SNAPSHOT_TABLES {
            return Err(ApiError::invalid_field(
                "invalid_snapshot_request",
                "tables",
                format!("must name 1 to {MAX_SNAPSHOT_TABLES} tables"),
            ));
        }
        for (i, name) in self.tables.iter().enumerate() {
            let field = format!("tables[{i}]");
            let well_formed = name
                .split_once('.')
                .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty());
            if !well_formed {
                return Err(ApiError::invalid_field(
                    "invalid_snapshot_request",
                    &field,
                    "must be `schema.table`",
                ));
            }
            if self.tables[..i].contains(name) {
                return Err(ApiError::invalid_field(
                    "invalid_snapshot_request",
                    &field,
                    format!("`{name}` is named twice"),
                ));
            }
        }
        Ok(())
    }
}

/// The answer to a request or a stop: which tables, and the incarnation that acts on it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct SnapshotChangeView {
    /// Pipeline name.
    pub name: String,
    /// The tables whose ad-hoc snapshot was requested (or stopped), `schema.table`.
    pub tables: Vec<String>,
    /// The owner that runs (or stops) it, restarting its runner; `null` while unowned (a
    /// requested snapshot then runs when the pipeline next starts).
    pub owner: Option<u64>,
    /// The epoch after the change (grown by one when owned).
    pub epoch: u64,
}

/// A pipeline's ad-hoc snapshots (`GET /pipelines/{name}/snapshots`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct SnapshotsView {
    /// Pipeline name.
    pub name: String,
    /// Every table of kind `incremental` with its progress (`pending`, `in_progress`,
    /// `complete`, `stopped`, `needs_resnapshot`), in table order. A table's last ad-hoc
    /// snapshot stays listed until another one of it, a definition update that no longer
    /// captures it, or an offsets reset.
    pub tables: Vec<TableOffset>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tables: &[&str], filter: Option<serde_json::Value>) -> SnapshotRequest {
        SnapshotRequest {
            tables: tables.iter().map(|t| t.to_string()).collect(),
            filter,
        }
    }

    fn field(r: &SnapshotRequest) -> (String, Option<String>) {
        let e = r.check().unwrap_err();
        assert_eq!(e.status, 400);
        (e.error_code, e.field)
    }

    #[test]
    fn a_request_is_checked_field_by_field() {
        assert!(request(&["shop.a", "shop.b"], None).check().is_ok());
        assert!(request(&["shop.a"], Some(serde_json::Value::Null))
            .check()
            .is_ok());
        let refused = |code: &str, f: &str| (code.to_string(), Some(f.to_string()));
        assert_eq!(
            field(&request(&["shop.a"], Some(serde_json::json!("id > 5")))),
            refused("snapshot_filter_not_supported", "where")
        );
        assert_eq!(
            field(&request(&[], None)),
            refused("invalid_snapshot_request", "tables")
        );
        for bad in ["shop", ".a", "shop.", ""] {
            assert_eq!(
                field(&request(&["shop.a", bad], None)),
                refused("invalid_snapshot_request", "tables[1]"),
                "{bad}"
            );
        }
        assert_eq!(
            field(&request(&["shop.a", "shop.b", "shop.a"], None)),
            refused("invalid_snapshot_request", "tables[2]")
        );
        let many: Vec<String> = (0..=MAX_SNAPSHOT_TABLES)
            .map(|i| format!("s.t{i}"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            field(&request(&many, None)),
            refused("invalid_snapshot_request", "tables")
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let e = serde_json::from_str::<SnapshotRequest>(r#"{"tables": ["a.b"], "filter": 1}"#);
        assert!(e.is_err());
        let ok: SnapshotRequest =
            serde_json::from_str(r#"{"tables": ["a.b"], "where": null}"#).unwrap();
        assert_eq!(ok, request(&["a.b"], None));
    }
}
