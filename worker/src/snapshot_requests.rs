//! An operator's ad-hoc (incremental) snapshots through the REST API
//! (`/pipelines/{name}/snapshots`): the tables are checked — captured by the pipeline (pure),
//! then described on the source server as the initial snapshot describes them, so a missing
//! table or one without a usable key is refused before anything is written — and the request
//! goes through Raft (`RequestSnapshot`, `StopSnapshot`), which decides the conflicts where
//! it is applied. What happens next is the owner's: its runner is fenced by the new epoch and
//! the next one reads the tables (ADR-0005 §11).

use capstan_connectors::mysql::snapshot::{KeyKind, SnapshotError, SnapshotReader};
use capstan_connectors::mysql::TableFilter;
use capstan_core::change::TableId;
use capstan_raft_store::{Command, Response, SnapshotKind};
use capstan_rest_api::{ApiError, SnapshotChangeView, SnapshotRequest, SnapshotsView};
use tracing::info;

use crate::control_plane_replies::{
    checked_definition, rejected, table_offsets, unknown_pipeline, write_error,
};
use crate::node::Node;
use crate::pipeline::{resolve_secrets, CheckedPipelineSpec, HostSecrets};

/// Requests an ad-hoc snapshot of `request.tables` (already [`SnapshotRequest::check`]ed).
pub(crate) async fn request_snapshot(
    node: &Node,
    name: &str,
    request: SnapshotRequest,
) -> Result<SnapshotChangeView, ApiError> {
    let stored = node
        .state
        .read(|s| s.pipeline(name).map(|r| r.spec().clone()))
        .ok_or_else(|| unknown_pipeline(name))?;
    let spec = checked_definition(&stored.to_json())?;
    let ids = captured(&spec.tables, &request.tables)?;
    // a request bound to be refused (decided again where it is applied) costs no I/O
    let names = request.tables.iter().map(String::as_str);
    let refusal = node.state.read(|s| s.snapshot_request_refusal(name, names));
    if let Some(refusal) = refusal {
        change_view(name, Vec::new(), refusal)?;
    }
    let estimates = describe(spec, &ids).await?;
    let tables: Vec<(String, u64)> = request.tables.iter().cloned().zip(estimates).collect();
    let response = node
        .write_through_election(Command::RequestSnapshot {
            pipeline: name.to_string(),
            tables,
        })
        .await
        .map_err(write_error)?;
    let view = change_view(name, request.tables, response)?;
    info!(pipeline = %name, tables = view.tables.len(), owner = ?view.owner, epoch = view.epoch, "ad-hoc snapshot requested");
    Ok(view)
}

/// Stops the pipeline's ad-hoc snapshots.
pub(crate) async fn stop_snapshot(node: &Node, name: &str) -> Result<SnapshotChangeView, ApiError> {
    let response = node
        .write_through_election(Command::StopSnapshot {
            pipeline: name.to_string(),
        })
        .await
        .map_err(write_error)?;
    let view = change_view(name, Vec::new(), response)?;
    info!(pipeline = %name, tables = view.tables.len(), "ad-hoc snapshot stopped");
    Ok(view)
}

/// The pipeline's ad-hoc tables with their progress, from this node's applied state.
pub(crate) fn snapshots(node: &Node, name: &str) -> Result<SnapshotsView, ApiError> {
    node.state
        .read(|s| {
            s.pipeline(name).map(|r| {
                let tables = table_offsets(r)
                    .into_iter()
                    .filter(|t| t.kind == SnapshotKind::Incremental.as_str())
                    .collect();
                SnapshotsView {
                    name: name.to_string(),
                    tables,
                }
            })
        })
        .ok_or_else(|| unknown_pipeline(name))
}

/// The tables as ids, each captured by `filter`; else 400 naming the first that is not.
fn captured(filter: &TableFilter, tables: &[String]) -> Result<Vec<TableId>, ApiError> {
    tables
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = name
                .split_once('.')
                .map(|(s, t)| TableId::new(s, t))
                .ok_or_else(|| {
                    ApiError::invalid_field(
                        "invalid_snapshot_request",
                        &format!("tables[{i}]"),
                        "must be `schema.table`",
                    )
                })?;
            if !filter.admits(&id) {
                return Err(ApiError::invalid_field(
                    "snapshot_table_not_captured",
                    &format!("tables[{i}]"),
                    format!(
                        "the pipeline does not capture `{name}` (see `tables` in its definition)"
                    ),
                ));
            }
            Ok(id)
        })
        .collect()
}

/// Each table described on the pipeline's source server, as the runner will (the key and
/// its collation checked): the estimated row counts, in order. A refusal is 400 naming the
/// table; a server that cannot be reached, 503.
async fn describe(spec: CheckedPipelineSpec, ids: &[TableId]) -> Result<Vec<u64>, ApiError> {
    let spec = resolve_secrets(spec, &HostSecrets).map_err(|e| {
        ApiError::unavailable(
            e.code(),
            format!("the source is not reachable from this worker: {e}"),
        )
    })?;
    let mut reader = SnapshotReader::open(&spec.source).await.map_err(|e| {
        ApiError::unavailable(
            e.code(),
            format!("the source server could not be reached to check the tables: {e}"),
        )
    })?;
    let mut estimates = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let refused = |e: SnapshotError| table_refusal(i, &e);
        let table = reader.describe(id).await.map_err(refused)?;
        for column in &table.key.columns {
            if matches!(column.kind, KeyKind::Text { .. }) {
                reader
                    .check_collation_order(column)
                    .await
                    .map_err(refused)?;
            }
        }
        estimates.push(table.estimated_rows);
    }
    Ok(estimates)
}

/// A table the reader refused: 400 naming `tables[i]` with the reader's code, or 503 when a
/// retry may succeed.
fn table_refusal(i: usize, e: &SnapshotError) -> ApiError {
    if e.is_transient() {
        return ApiError::unavailable(e.code(), format!("the tables could not be checked: {e}"));
    }
    ApiError::invalid_field(e.code(), &format!("tables[{i}]"), e)
}

/// The answer to a request (`tables` as asked) or a stop (the tables the response names).
fn change_view(
    name: &str,
    tables: Vec<String>,
    response: Response,
) -> Result<SnapshotChangeView, ApiError> {
    match response {
        Response::SnapshotRequested { owner, epoch } => Ok(SnapshotChangeView {
            name: name.to_string(),
            tables,
            owner,
            epoch,
        }),
        Response::SnapshotStopped {
            tables,
            owner,
            epoch,
        } => Ok(SnapshotChangeView {
            name: name.to_string(),
            tables,
            owner,
            epoch,
        }),
        other => {
            rejected(name, other)?;
            Err(ApiError::internal(
                "unexpected_response",
                "the snapshot request was answered with an unexpected outcome",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_captured_tables_may_be_snapshotted_and_the_refusal_names_the_field() {
        let filter = TableFilter::only([("shop", "a"), ("shop", "b")]);
        let tables = vec!["shop.b".to_string(), "shop.a".to_string()];
        assert_eq!(
            captured(&filter, &tables).unwrap(),
            vec![TableId::new("shop", "b"), TableId::new("shop", "a")]
        );
        let tables = vec!["shop.a".to_string(), "shop.z".to_string()];
        let e = captured(&filter, &tables).unwrap_err();
        assert_eq!(
            (e.status, e.error_code.as_str(), e.field.as_deref()),
            (400, "snapshot_table_not_captured", Some("tables[1]"))
        );
        let all = TableFilter::AllExcept([TableId::new("hr", "pay")].into_iter().collect());
        let e = captured(&all, &["hr.pay".to_string()]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("tables[0]"));
    }

    #[test]
    fn a_refused_table_is_400_naming_it_and_a_lost_connection_503() {
        let missing = SnapshotError::TableNotFound {
            table: TableId::new("shop", "gone"),
        };
        let e = table_refusal(2, &missing);
        assert_eq!(
            (e.status, e.error_code.as_str(), e.field.as_deref()),
            (400, "snapshot_table_not_found", Some("tables[2]"))
        );
        let lost = SnapshotError::QueryFailed {
            site: "describe",
            code: 2013,
        };
        assert_eq!(table_refusal(0, &lost).status, 503);
    }

    #[test]
    fn responses_become_views_or_statuses() {
        let view = change_view(
            "p",
            vec!["shop.a".into()],
            Response::SnapshotRequested {
                owner: Some(2),
                epoch: 7,
            },
        )
        .unwrap();
        assert_eq!(
            (view.tables, view.owner, view.epoch),
            (vec!["shop.a".to_string()], Some(2), 7)
        );
        let stopped = Response::SnapshotStopped {
            tables: vec!["shop.b".into()],
            owner: None,
            epoch: 3,
        };
        assert_eq!(
            change_view("p", vec![], stopped).unwrap().tables,
            ["shop.b"]
        );
        for (response, status, code) in [
            (Response::UnknownPipeline, 404, "unknown_pipeline"),
            (
                Response::SnapshotRunning {
                    table: "shop.a".into(),
                },
                409,
                "snapshot_running",
            ),
            (Response::NotStreamed, 409, "pipeline_not_streamed"),
            (Response::NoSnapshotRunning, 409, "no_snapshot_running"),
        ] {
            let e = change_view("p", vec![], response).unwrap_err();
            assert_eq!((e.status, e.error_code.as_str()), (status, code));
        }
    }
}
