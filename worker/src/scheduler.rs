//! The leader's placement plan: which live worker owns which pipeline.
//!
//! [`plan`] is pure: given the replicated [`ClusterState`] and the set of workers whose lease
//! is live, it returns the `AssignOwner` commands that make every pipeline that wants to run
//! (desired `running` or `paused`) owned by a live worker. A pipeline keeps its owner while the
//! owner is live — moving a healthy pipeline costs a restart and buys nothing — so the plan only
//! places unowned pipelines and moves those whose owner's lease expired. Each move carries the
//! pipeline's next epoch, which fences every later write of the previous owner.
//!
//! New pipelines go to the live worker with the fewest owned pipelines (ties: lowest id). A
//! worker that joins takes new and moved pipelines; running ones are not rebalanced onto it
//! automatically — an operator moves them (`MovePipeline`, or a rebalance, see
//! [`crate::rebalance`]). A pipeline an operator is moving goes to the worker it is moving to
//! once its owner released it (or its owner's lease expired), if that worker is live; else to
//! the least loaded like any other.

use std::collections::{BTreeMap, BTreeSet};

use capstan_raft_store::{ClusterState, Command, NodeId};

/// The commands that bring ownership in line with the live workers.
pub fn plan(state: &ClusterState, live: &BTreeSet<NodeId>) -> Vec<Command> {
    if live.is_empty() {
        return Vec::new();
    }
    let mut load: BTreeMap<NodeId, usize> = live.iter().map(|&n| (n, 0)).collect();
    for record in state.pipelines().values() {
        if let Some(owner) = record.owner() {
            if record.desired_state().wants_owner() {
                if let Some(l) = load.get_mut(&owner) {
                    *l += 1;
                }
            }
        }
    }
    let mut commands = Vec::new();
    for (name, record) in state.pipelines() {
        if !record.desired_state().wants_owner() {
            continue;
        }
        if record.owner().is_some_and(|o| live.contains(&o)) {
            continue;
        }
        let target = record.move_to().filter(|to| live.contains(to));
        let Some(node) =
            target.or_else(|| load.iter().min_by_key(|(&n, &l)| (l, n)).map(|(&n, _)| n))
        else {
            break;
        };
        let Some(epoch) = state.next_epoch(name) else {
            continue;
        };
        if let Some(l) = load.get_mut(&node) {
            *l += 1;
        }
        commands.push(Command::AssignOwner {
            pipeline: name.clone(),
            node,
            epoch,
        });
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_raft_store::{DesiredState, Response, SpecJson};

    fn state_with(pipelines: &[(&str, DesiredState, Option<NodeId>)]) -> ClusterState {
        let mut s = ClusterState::new();
        for &(name, desired, owner) in pipelines {
            let r = s.apply(Command::CreatePipeline {
                name: name.into(),
                spec: SpecJson::new(serde_json::json!({})),
                incarnation: None,
            });
            assert!(!matches!(r, Response::PipelineExists));
            s.apply(Command::SetDesiredState {
                name: name.into(),
                state: desired,
            });
            if let Some(node) = owner {
                let epoch = s.next_epoch(name).unwrap();
                s.apply(Command::AssignOwner {
                    pipeline: name.into(),
                    node,
                    epoch,
                });
            }
        }
        s
    }

    fn live(nodes: &[NodeId]) -> BTreeSet<NodeId> {
        nodes.iter().copied().collect()
    }

    fn assigned(cmds: &[Command]) -> Vec<(String, NodeId)> {
        cmds.iter()
            .map(|c| match c {
                Command::AssignOwner { pipeline, node, .. } => (pipeline.clone(), *node),
                other => panic!("unexpected {}", other.kind()),
            })
            .collect()
    }

    #[test]
    fn spreads_unowned_pipelines_over_live_workers() {
        let s = state_with(&[
            ("a", DesiredState::Running, None),
            ("b", DesiredState::Running, None),
            ("c", DesiredState::Paused, None),
            ("d", DesiredState::Stopped, None),
        ]);
        let cmds = plan(&s, &live(&[1, 2]));
        assert_eq!(
            assigned(&cmds),
            vec![("a".into(), 1), ("b".into(), 2), ("c".into(), 1)]
        );
    }

    #[test]
    fn keeps_live_owners_and_moves_dead_ones_with_a_higher_epoch() {
        let s = state_with(&[
            ("a", DesiredState::Running, Some(1)),
            ("b", DesiredState::Running, Some(2)),
        ]);
        let old = s.ownership("b").unwrap();
        let cmds = plan(&s, &live(&[1, 3]));
        assert_eq!(assigned(&cmds), vec![("b".into(), 3)]);
        match &cmds[0] {
            Command::AssignOwner { epoch, .. } => assert!(*epoch > old.epoch),
            _ => unreachable!(),
        }
        // applying the plan makes it a fixpoint
        let mut s = s;
        for c in cmds {
            s.apply(c);
        }
        assert!(plan(&s, &live(&[1, 3])).is_empty());
    }

    #[test]
    fn a_released_pipeline_goes_where_it_was_moved_while_that_worker_is_live() {
        let mut s = state_with(&[
            ("a", DesiredState::Running, Some(1)),
            ("b", DesiredState::Running, Some(1)),
            ("c", DesiredState::Running, Some(2)),
        ]);
        s.apply(Command::RenewLease { node: 3 });
        s.apply(Command::MovePipeline {
            pipeline: "a".into(),
            to: 3,
        });
        // still owned: nothing to place before the owner releases
        assert!(plan(&s, &live(&[1, 2, 3])).is_empty());
        let epoch = s.pipeline("a").unwrap().epoch();
        let released = s.apply(Command::ReleasePipeline {
            pipeline: "a".into(),
            node: 1,
            epoch,
        });
        assert_eq!(released, Response::Applied);
        // node 2 is the least loaded, but the move names node 3
        assert_eq!(
            plan(&s, &live(&[1, 2, 3])),
            vec![Command::AssignOwner {
                pipeline: "a".into(),
                node: 3,
                epoch: epoch + 1
            }]
        );
        // node 3 not live: the least loaded takes it (1 and 2 own one each: the lowest id)
        assert_eq!(assigned(&plan(&s, &live(&[1, 2]))), vec![("a".into(), 1)]);
    }

    #[test]
    fn an_owner_that_dies_during_a_move_hands_over_to_the_target() {
        let mut s = state_with(&[
            ("a", DesiredState::Paused, Some(1)),
            ("b", DesiredState::Running, Some(3)),
        ]);
        s.apply(Command::RenewLease { node: 3 });
        s.apply(Command::MovePipeline {
            pipeline: "a".into(),
            to: 3,
        });
        // node 1's lease expired before it released: node 3 (load 1) over node 2 (load 0)
        assert_eq!(assigned(&plan(&s, &live(&[2, 3]))), vec![("a".into(), 3)]);
    }

    #[test]
    fn no_live_worker_no_plan() {
        let s = state_with(&[("a", DesiredState::Running, Some(1))]);
        assert!(plan(&s, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn moved_pipelines_go_to_the_least_loaded() {
        let s = state_with(&[
            ("a", DesiredState::Running, Some(1)),
            ("b", DesiredState::Running, Some(1)),
            ("c", DesiredState::Running, Some(2)),
            ("d", DesiredState::Running, Some(3)),
        ]);
        // node 3 dies: d goes to 2 (load 1) rather than 1 (load 2)
        assert_eq!(assigned(&plan(&s, &live(&[1, 2]))), vec![("d".into(), 2)]);
    }
}
