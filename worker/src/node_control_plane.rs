//! The worker's [`ControlPlane`]: the REST API's view of a [`Node`].
//!
//! Reads answer from this node's applied state; writes go through Raft (forwarded to the
//! leader by [`Node::write`]); membership changes run on the leader, so a follower forwards
//! them to the leader's API.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capstan_raft_store::{Command, DesiredState, NodeInfo, Response, SpecJson};
use capstan_rest_api::{
    AddMember, ApiError, ApiToken, ClusterView, ControlPlane, Health, MemberView, MoveView,
    PipelineOffsets, PipelineStatus, PipelineValidation, PipelineView, RebalanceView, RestartView,
    SnapshotChangeView, SnapshotRequest, SnapshotsView,
};
use openraft::ServerState;

use crate::api_tls::{self, ApiTls};
use crate::control_plane_replies::{
    checked_definition, keep_stored_secrets, redacted, refusal, rejected, table_offsets,
    unknown_pipeline, write_error,
};
use crate::membership_guard::{check_addition, check_removal};
use crate::metrics::{Metrics, RaftView};
use crate::node::{check_size, Node, WriteError};

/// How long adding a member waits for it to catch up before it is made a voter (a follower
/// forwarding the request waits 30 s for the leader's answer).
const CATCH_UP_WAIT: Duration = Duration::from_secs(20);

/// [`ControlPlane`] over a running node.
#[derive(Debug, Clone)]
pub struct NodeControlPlane {
    node: Arc<Node>,
    metrics: Arc<Metrics>,
    token: Option<ApiToken>,
    http: reqwest::Client,
    /// `http` or `https`, as every worker's API speaks.
    scheme: &'static str,
}

impl NodeControlPlane {
    /// The control plane of `node`, reporting into `metrics`. `token` is presented when this
    /// node calls another's API (a membership change forwarded to the leader, an owner's lag;
    /// every node shares one token, which is good for reads too), over TLS with `tls`.
    pub fn new(
        node: Arc<Node>,
        metrics: Arc<Metrics>,
        token: Option<ApiToken>,
        tls: Option<&ApiTls>,
    ) -> Self {
        let http = api_tls::client_builder(tls, reqwest::Client::builder())
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        NodeControlPlane {
            node,
            metrics,
            token,
            http,
            scheme: api_tls::scheme(tls),
        }
    }

    /// The status as the replicated state has it (no lag, no throughput).
    fn replicated_status(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        self.node
            .state
            .read(|s| {
                s.pipeline(name).map(|r| {
                    // a report of an earlier epoch is history: the new owner has not
                    // reported yet; a halt holds whatever the epoch
                    let current = r.status().filter(|st| st.epoch == r.epoch());
                    PipelineStatus {
                        name: name.to_string(),
                        desired_state: r.desired_state().as_str().to_string(),
                        owner: r.owner(),
                        epoch: r.epoch(),
                        move_to: r.move_to(),
                        state: match (r.halt(), r.owner(), current) {
                            (Some(_), _, _) => "failed".into(),
                            (None, _, Some(st)) => st.state.as_str().to_string(),
                            (None, Some(_), None) => "assigned".into(),
                            (None, None, None) => "unassigned".into(),
                        },
                        reason: r.halt().or(current).and_then(|st| st.reason.clone()),
                        detail: r.halt().or(current).and_then(|st| st.detail.clone()),
                        position: r.checkpoint().map(|p| p.to_string()),
                        lag_ms: None,
                        rows_total: None,
                        snapshot: table_offsets(r),
                    }
                })
            })
            .ok_or_else(|| unknown_pipeline(name))
    }

    /// The lag and the rows published as the owner counts them, asked of the owner's API
    /// (bounded wait; `None` on any failure: they are information, never a reason to fail
    /// the status call).
    async fn owner_figures(&self, owner: u64, name: &str) -> Option<(Option<u64>, Option<u64>)> {
        let api = self.node.members().remove(&owner)?.api_addr;
        let mut request = self
            .http
            .get(format!("{}://{api}/pipelines/{name}/status", self.scheme))
            .timeout(std::time::Duration::from_millis(500));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose_secret());
        }
        let reply = request.send().await.ok()?;
        let status: PipelineStatus = reply.json().await.ok()?;
        Some((status.lag_ms, status.rows_total))
    }

    /// Updates the metrics derived from the applied state and this node's Raft view.
    pub fn observe_metrics(&self) {
        let m = self.node.raft.metrics().borrow().clone();
        let raft = RaftView {
            term: m.current_term,
            leader: m.current_leader,
            last_applied: m.last_applied.map(|l| l.index),
            is_leader: m.state == ServerState::Leader,
            lease_valid: self.node.holds_lease(),
        };
        self.node
            .state
            .read(|s| self.metrics.observe(s, raft, Instant::now()));
    }

    /// The stored definition of `name`, unredacted (it may hold the password).
    fn stored_spec(&self, name: &str) -> Result<serde_json::Value, ApiError> {
        // the text is copied under the state's lock and parsed after it
        self.node
            .state
            .read(|s| s.pipeline(name).map(|r| r.spec().clone()))
            .map(|spec| spec.to_json())
            .ok_or_else(|| unknown_pipeline(name))
    }

    async fn write(&self, command: Command) -> Result<Response, ApiError> {
        self.node
            .write_through_election(command)
            .await
            .map_err(write_error)
    }

    /// Forwards a membership request to the leader's API when this node is not the leader.
    async fn forward_to_leader(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&AddMember>,
    ) -> Result<(), ApiError> {
        let leader = self
            .node
            .leader_info()
            .ok_or_else(|| write_error(WriteError::NoLeader))?;
        let mut req = self.http.request(
            method,
            format!("{}://{}{path}", self.scheme, leader.api_addr),
        );
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token.expose_secret());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| write_error(WriteError::LeaderUnreachable(e.without_url().to_string())))?;
        if resp.status().is_success() {
            return Ok(());
        }
        let status = resp.status();
        let mut err: ApiError = resp.json().await.unwrap_or_else(|_| {
            ApiError::internal(
                "leader_error",
                "the leader answered with an unreadable error",
            )
        });
        err.status = status.as_u16();
        Err(err)
    }

    fn is_leader(&self) -> bool {
        self.node.raft.metrics().borrow().state == ServerState::Leader
    }
}

#[async_trait::async_trait]
impl ControlPlane for NodeControlPlane {
    async fn cluster(&self) -> ClusterView {
        let m = self.node.raft.metrics().borrow().clone();
        let state = self.node.state.snapshot();
        let membership = m.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let released = state.released_nodes();
        let live = self.node.live_members();
        let members = membership
            .nodes()
            .map(|(&id, info)| MemberView {
                id,
                raft_addr: info.raft_addr.clone(),
                api_addr: info.api_addr.clone(),
                voter: voters.contains(&id),
                health: if released.contains(&id) {
                    "released".into()
                } else if live.contains(&id) {
                    "live".into()
                } else {
                    "expired".into()
                },
                owned_pipelines: state
                    .pipelines()
                    .iter()
                    .filter(|(_, r)| r.owner() == Some(id))
                    .map(|(n, _)| n.clone())
                    .collect(),
            })
            .collect();
        ClusterView {
            node_id: self.node.id,
            leader: m.current_leader,
            term: m.current_term,
            last_applied: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            members,
        }
    }

    async fn health(&self) -> Health {
        let leader = self.node.raft.metrics().borrow().current_leader;
        let lease_valid = self.node.holds_lease();
        Health {
            status: if leader.is_some() && lease_valid {
                "ok".into()
            } else {
                "degraded".into()
            },
            node_id: self.node.id,
            leader,
            lease_valid,
        }
    }

    async fn add_member(&self, member: AddMember) -> Result<(), ApiError> {
        if member.id == 0 {
            return Err(ApiError::bad_request(
                "invalid_field",
                "field `id`: must be a positive integer",
            ));
        }
        for (field, addr) in [
            ("raft_addr", &member.raft_addr),
            ("api_addr", &member.api_addr),
        ] {
            if addr
                .rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(ApiError::bad_request(
                    "invalid_field",
                    format!("field `{field}`: must be host:port"),
                ));
            }
        }
        if !self.is_leader() {
            return self
                .forward_to_leader(reqwest::Method::POST, "/cluster/members", Some(&member))
                .await;
        }
        let info = NodeInfo {
            raft_addr: member.raft_addr,
            api_addr: member.api_addr,
        };
        let _serialised = self.node.membership_change().await;
        check_addition(&self.node.members(), member.id, &info).map_err(refusal)?;
        // a member that cannot be reached would count towards the quorum without voting
        if let Err(reason) = self.node.probe_raft(&info.raft_addr).await {
            return Err(ApiError::conflict(
                "member_unreachable",
                format!(
                    "the raft address of member {} does not answer ({reason}): start the worker first",
                    member.id
                ),
            ));
        }
        self.node
            .add_member(member.id, info, CATCH_UP_WAIT)
            .await
            .map_err(write_error)
    }

    async fn remove_member(&self, id: u64) -> Result<(), ApiError> {
        if !self.node.members().contains_key(&id) {
            return Err(ApiError::not_found(
                "unknown_member",
                format!("no member with id {id}"),
            ));
        }
        if !self.is_leader() {
            return self
                .forward_to_leader(
                    reqwest::Method::DELETE,
                    &format!("/cluster/members/{id}"),
                    None,
                )
                .await;
        }
        let _serialised = self.node.membership_change().await;
        let voters = self.node.voters();
        // openraft 0.9's core on the leader panicked on removing the leader and left a zombie
        // that still named itself leader; a removal that leaves no live quorum wedges writes
        check_removal(self.node.id, &voters, &self.node.live_members(), id).map_err(refusal)?;
        self.node.remove_member(id).await.map_err(write_error)
    }

    async fn list_pipelines(&self) -> Result<Vec<String>, ApiError> {
        Ok(self
            .node
            .state
            .read(|s| s.pipelines().keys().cloned().collect()))
    }

    async fn create_pipeline(
        &self,
        definition: serde_json::Value,
    ) -> Result<PipelineView, ApiError> {
        let name = checked_definition(&definition)?.name;
        let response = self
            .write(create_command(name.clone(), &definition))
            .await?;
        rejected(&name, response)?;
        Ok(PipelineView {
            name,
            config: redacted(&definition),
        })
    }

    async fn validate_pipeline(
        &self,
        definition: serde_json::Value,
    ) -> Result<PipelineValidation, ApiError> {
        let name = checked_definition(&definition)?.name;
        // the create's own size check, on the command it would write
        check_size(&create_command(name.clone(), &definition)).map_err(write_error)?;
        Ok(PipelineValidation { valid: true, name })
    }

    async fn pipeline(&self, name: &str) -> Result<PipelineView, ApiError> {
        self.node
            .state
            .read(|s| s.pipeline(name).map(|r| r.spec().clone()))
            .map(|spec| PipelineView {
                name: name.to_string(),
                config: redacted(&spec.to_json()),
            })
            .ok_or_else(|| unknown_pipeline(name))
    }

    async fn pipeline_status(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        let mut status = self.replicated_status(name)?;
        let streaming = status.state == "streaming";
        if !streaming && status.state != "snapshotting" {
            return Ok(status);
        }
        let (lag_ms, rows_total) = match status.owner {
            // a runner that published nothing yet has published 0 rows
            Some(owner) if owner == self.node.id => (
                self.metrics.lag_ms(name),
                Some(self.metrics.rows_total(name).unwrap_or(0)),
            ),
            Some(owner) => self.owner_figures(owner, name).await.unwrap_or_default(),
            None => (None, None),
        };
        status.lag_ms = lag_ms.filter(|_| streaming);
        status.rows_total = rows_total;
        Ok(status)
    }

    async fn set_desired_state(&self, name: &str, state: &str) -> Result<(), ApiError> {
        let state = match state {
            "running" => DesiredState::Running,
            "paused" => DesiredState::Paused,
            "stopped" => DesiredState::Stopped,
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_field",
                    "field `state`: must be running, paused or stopped",
                ))
            }
        };
        let response = self
            .write(Command::SetDesiredState {
                name: name.to_string(),
                state,
            })
            .await?;
        rejected(name, response)
    }

    async fn update_pipeline_config(
        &self,
        name: &str,
        mut definition: serde_json::Value,
    ) -> Result<PipelineView, ApiError> {
        let stored = self.stored_spec(name)?;
        keep_stored_secrets(&mut definition, &stored)?;
        let checked = checked_definition(&definition)?;
        if checked.name != name {
            return Err(ApiError::invalid_field(
                "invalid_pipeline",
                "name",
                "must equal the pipeline name in the path, or be absent",
            ));
        }
        let response = self
            .write(Command::UpdatePipelineConfig {
                name: name.to_string(),
                spec: SpecJson::new(definition.clone()),
            })
            .await?;
        rejected(name, response)?;
        Ok(PipelineView {
            name: name.to_string(),
            config: redacted(&definition),
        })
    }

    async fn restart_pipeline(&self, name: &str) -> Result<RestartView, ApiError> {
        // decided where it is applied: this node's view may lag an ownership change
        let response = self
            .write(Command::RestartPipeline {
                name: name.to_string(),
            })
            .await?;
        match response {
            Response::Restarted { owner, epoch } => Ok(RestartView {
                name: name.to_string(),
                owner,
                epoch,
            }),
            other => {
                rejected(name, other)?;
                Err(ApiError::internal(
                    "unexpected_response",
                    "the restart was answered with an unexpected outcome",
                ))
            }
        }
    }

    async fn move_pipeline(&self, name: &str, to: u64) -> Result<MoveView, ApiError> {
        crate::operator_moves::move_pipeline(&self.node, name, to).await
    }

    async fn rebalance(&self, dry_run: bool) -> Result<RebalanceView, ApiError> {
        crate::operator_moves::rebalance(&self.node, dry_run).await
    }

    async fn pipeline_offsets(&self, name: &str) -> Result<PipelineOffsets, ApiError> {
        self.node
            .state
            .read(|s| {
                s.pipeline(name).map(|r| PipelineOffsets {
                    name: name.to_string(),
                    epoch: r.epoch(),
                    flavor: r.checkpoint().map(|p| p.flavor().as_str().to_string()),
                    position: r.checkpoint().map(|p| p.to_string()),
                    processed: r
                        .processed()
                        .filter(|p| Some(*p) != r.checkpoint())
                        .map(|p| p.to_string()),
                    snapshot: table_offsets(r),
                })
            })
            .ok_or_else(|| unknown_pipeline(name))
    }

    async fn request_snapshot(
        &self,
        name: &str,
        request: SnapshotRequest,
    ) -> Result<SnapshotChangeView, ApiError> {
        crate::snapshot_requests::request_snapshot(&self.node, name, request).await
    }

    async fn pipeline_snapshots(&self, name: &str) -> Result<SnapshotsView, ApiError> {
        crate::snapshot_requests::snapshots(&self.node, name)
    }

    async fn stop_snapshot(&self, name: &str) -> Result<SnapshotChangeView, ApiError> {
        crate::snapshot_requests::stop_snapshot(&self.node, name).await
    }

    async fn reset_offsets(&self, name: &str) -> Result<(), ApiError> {
        let response = self
            .write(Command::ResetOffsets {
                pipeline: name.to_string(),
                incarnation: Some(uuid::Uuid::new_v4().to_string()),
            })
            .await?;
        if let Response::NotStopped { desired } = response {
            return Err(ApiError::conflict(
                response.code(),
                format!("offsets can be reset only while the pipeline is stopped; its desired state is {desired} (stop it first)"),
            ));
        }
        rejected(name, response)
    }

    async fn metrics(&self) -> Result<String, ApiError> {
        self.observe_metrics();
        self.metrics
            .encode()
            .map_err(|_| ApiError::internal("metrics_failed", "the metrics could not be encoded"))
    }

    async fn delete_pipeline(&self, name: &str) -> Result<(), ApiError> {
        let response = self
            .write(Command::DeletePipeline {
                name: name.to_string(),
            })
            .await?;
        rejected(name, response)
    }
}

/// The Raft command that creates pipeline `name`, in a fresh incarnation.
fn create_command(name: String, definition: &serde_json::Value) -> Command {
    Command::CreatePipeline {
        name,
        spec: SpecJson::new(definition.clone()),
        incarnation: Some(uuid::Uuid::new_v4().to_string()),
    }
}
