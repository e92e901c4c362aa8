//! The operator's moves through the REST API: one pipeline (`POST /pipelines/{name}/move`)
//! or a rebalance (`POST /cluster/rebalance`). Checks against this node's view of the
//! members and their leases, then `MovePipeline` through Raft; what happens next is the
//! owner's ([`crate::pipeline`], it releases once its runner ended) and the scheduler's.

use capstan_raft_store::{Command, NodeId, Response};
use capstan_rest_api::{ApiError, MoveView, PlannedMove, RebalanceView, WorkerLoad};
use tracing::{info, warn};

use crate::control_plane_replies::{rejected, unknown_pipeline, write_error};
use crate::node::Node;
use crate::rebalance;

/// Moves `name` to `to`; `to` = its owner cancels a pending move.
pub(crate) async fn move_pipeline(
    node: &Node,
    name: &str,
    to: NodeId,
) -> Result<MoveView, ApiError> {
    let owner = node
        .state
        .read(|s| s.pipeline(name).map(|r| r.owner()))
        .ok_or_else(|| unknown_pipeline(name))?;
    if !node.members().contains_key(&to) {
        return Err(
            ApiError::not_found("unknown_member", format!("no member with id {to}"))
                .with_field("to"),
        );
    }
    if owner != Some(to) && !node.live_members().contains(&to) {
        return Err(not_live(to));
    }
    let response = write_move(node, name, to).await?;
    match response {
        Response::Moving {
            owner,
            move_to,
            epoch,
        } => {
            info!(pipeline = %name, owner = ?owner, to, pending = move_to.is_some(), "operator moves pipeline");
            Ok(MoveView {
                name: name.to_string(),
                owner,
                move_to,
                epoch,
            })
        }
        Response::UnknownNode { node } => Err(not_live(node)),
        other => {
            rejected(name, other)?;
            Err(ApiError::internal(
                "unexpected_response",
                "the move was answered with an unexpected outcome",
            ))
        }
    }
}

/// Plans the rebalance over the live workers as this node sees them, and starts its moves
/// unless `dry_run`.
pub(crate) async fn rebalance(node: &Node, dry_run: bool) -> Result<RebalanceView, ApiError> {
    let live = node.live_members();
    let (moves, before) = node
        .state
        .read(|s| (rebalance::plan(s, &live), rebalance::loads(s, &live)));
    let after = rebalance::loads_after(before.clone(), &moves);
    if !dry_run {
        info!(moves = moves.len(), "operator rebalances the pipelines");
        for m in &moves {
            match write_move(node, &m.pipeline, m.to).await? {
                Response::Moving { .. } => {}
                // deleted meanwhile, or the worker vanished: the rest still goes
                other => {
                    warn!(pipeline = %m.pipeline, to = m.to, outcome = other.code(), "rebalance move refused")
                }
            }
        }
    }
    Ok(RebalanceView {
        dry_run,
        moves: moves
            .into_iter()
            .map(|m| PlannedMove {
                pipeline: m.pipeline,
                from: m.from,
                to: m.to,
            })
            .collect(),
        workers: before
            .iter()
            .map(|(&node, &b)| WorkerLoad {
                node,
                before: b as u64,
                after: after.get(&node).copied().unwrap_or_default() as u64,
            })
            .collect(),
    })
}

async fn write_move(node: &Node, name: &str, to: NodeId) -> Result<Response, ApiError> {
    node.write_through_election(Command::MovePipeline {
        pipeline: name.to_string(),
        to,
    })
    .await
    .map_err(write_error)
}

fn not_live(to: NodeId) -> ApiError {
    ApiError::conflict(
        "member_not_live",
        format!("member {to} is not live (no lease renewal seen within the lease): a pipeline moved there could not run"),
    )
}
