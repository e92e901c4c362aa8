//! The worker's [`ControlPlane`]: the REST API's view of a [`Node`].
//!
//! Reads answer from this node's applied state; writes go through Raft (forwarded to the
//! leader by [`Node::write`]); membership changes run on the leader, so a follower forwards
//! them to the leader's API.

use std::sync::Arc;
use std::time::Duration;

use capstan_raft_store::{Command, DesiredState, NodeInfo, Response, SpecJson};
use capstan_rest_api::{
    AddMember, ApiError, ClusterView, ControlPlane, Health, MemberView, PipelineStatus,
    PipelineView,
};
use openraft::ServerState;

use crate::node::{Node, WriteError};
use crate::pipeline::PipelineSpec;

/// [`ControlPlane`] over a running node.
#[derive(Debug, Clone)]
pub struct NodeControlPlane {
    node: Arc<Node>,
    http: reqwest::Client,
}

impl NodeControlPlane {
    /// The control plane of `node`.
    pub fn new(node: Arc<Node>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        NodeControlPlane { node, http }
    }

    async fn write(&self, command: Command) -> Result<Response, ApiError> {
        self.node.write(command).await.map_err(write_error)
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
        let mut req = self
            .http
            .request(method, format!("http://{}{path}", leader.api_addr));
        if let Some(b) = body {
            req = req.json(b);
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

fn write_error(e: WriteError) -> ApiError {
    if e.is_retriable() {
        ApiError::unavailable(e.code(), e.to_string())
    } else {
        ApiError::internal(e.code(), e.to_string())
    }
}

fn rejected(name: &str, response: Response) -> Result<(), ApiError> {
    match response {
        Response::Applied => Ok(()),
        Response::UnknownPipeline => Err(ApiError::not_found(
            "unknown_pipeline",
            format!("no pipeline named `{name}`"),
        )),
        Response::PipelineExists => Err(ApiError::conflict(
            "pipeline_exists",
            format!("a pipeline named `{name}` already exists"),
        )),
        other => Err(ApiError::conflict(other.code(), other.to_string())),
    }
}

/// The definition as the API shows it: the source password is write-only.
fn redacted(spec: &serde_json::Value) -> serde_json::Value {
    let mut v = spec.clone();
    if let Some(source) = v.get_mut("source").and_then(|s| s.as_object_mut()) {
        if source.contains_key("password") {
            source.insert(
                "password".into(),
                serde_json::Value::String("<redacted>".into()),
            );
        }
    }
    v
}

#[async_trait::async_trait]
impl ControlPlane for NodeControlPlane {
    async fn cluster(&self) -> ClusterView {
        let m = self.node.raft.metrics().borrow().clone();
        let state = self.node.state.snapshot();
        let membership = m.membership_config.membership();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let released = state.released_nodes();
        let members = membership
            .nodes()
            .map(|(&id, info)| MemberView {
                id,
                raft_addr: info.raft_addr.clone(),
                api_addr: info.api_addr.clone(),
                voter: voters.contains(&id),
                health: if released.contains(&id) {
                    "released".into()
                } else {
                    "member".into()
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
        self.node
            .add_member(member.id, info)
            .await
            .map_err(write_error)
    }

    async fn remove_member(&self, id: u64) -> Result<(), ApiError> {
        let known = self
            .node
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .is_some();
        if !known {
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
        let spec = PipelineSpec::from_json(definition.clone())
            .and_then(|spec| spec.validate().map(|checked| checked.name))
            .map_err(|e| ApiError::bad_request(e.code(), e.to_string()))?;
        let name = spec;
        let response = self
            .write(Command::CreatePipeline {
                name: name.clone(),
                spec: SpecJson::new(definition.clone()),
            })
            .await?;
        rejected(&name, response)?;
        Ok(PipelineView {
            name,
            config: redacted(&definition),
        })
    }

    async fn pipeline(&self, name: &str) -> Result<PipelineView, ApiError> {
        self.node
            .state
            .read(|s| s.pipeline(name).map(|r| redacted(r.spec().as_json())))
            .map(|config| PipelineView {
                name: name.to_string(),
                config,
            })
            .ok_or_else(|| {
                ApiError::not_found("unknown_pipeline", format!("no pipeline named `{name}`"))
            })
    }

    async fn pipeline_status(&self, name: &str) -> Result<PipelineStatus, ApiError> {
        self.node
            .state
            .read(|s| {
                s.pipeline(name).map(|r| PipelineStatus {
                    name: name.to_string(),
                    desired_state: r.desired_state().as_str().to_string(),
                    owner: r.owner(),
                    epoch: r.epoch(),
                    state: r
                        .status()
                        .map(|st| st.state.as_str().to_string())
                        .unwrap_or_else(|| "unassigned".into()),
                    reason: r.status().and_then(|st| st.reason.clone()),
                    position: r.checkpoint().map(|p| p.to_string()),
                })
            })
            .ok_or_else(|| {
                ApiError::not_found("unknown_pipeline", format!("no pipeline named `{name}`"))
            })
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

    async fn delete_pipeline(&self, name: &str) -> Result<(), ApiError> {
        let response = self
            .write(Command::DeletePipeline {
                name: name.to_string(),
            })
            .await?;
        rejected(name, response)
    }
}
