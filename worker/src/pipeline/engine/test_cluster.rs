//! Applied cluster states for the engine's scenario tests.

use capstan_raft_store::{ClusterState, Command, DesiredState, NodeId, SpecJson};

/// Nodes 1–3 with a lease, and each of `pipelines` (name, desired state, owner) created with
/// the definition `spec` gives it and assigned to its owner.
pub(super) fn cluster(
    pipelines: &[(&str, DesiredState, NodeId)],
    spec: impl Fn(&str) -> SpecJson,
) -> ClusterState {
    let mut s = ClusterState::new();
    for node in [1, 2, 3] {
        s.apply(Command::RenewLease { node });
    }
    for &(name, desired, owner) in pipelines {
        let created = s.apply(Command::CreatePipeline {
            name: name.into(),
            spec: spec(name),
            incarnation: None,
        });
        assert!(created.is_applied(), "{created:?}");
        s.apply(Command::SetDesiredState {
            name: name.into(),
            state: desired,
        });
        assign(&mut s, name, owner);
    }
    s
}

/// Assigns `name` to `node` at the next epoch.
pub(super) fn assign(s: &mut ClusterState, name: &str, node: NodeId) {
    let epoch = s.next_epoch(name).unwrap();
    let r = s.apply(Command::AssignOwner {
        pipeline: name.into(),
        node,
        epoch,
    });
    assert!(r.is_applied(), "{r:?}");
}
