//! When an owner gives up a pipeline an operator is moving: once nothing of it runs here.
//!
//! [`releases`] is pure: the supervisor passes the applied state and whether a runner of a
//! pipeline is still running or still ending, and proposes what it returns. A runner that was
//! told to stop has really ended before its pipeline is released, so the next owner (assigned
//! only after the release, with a greater epoch) never publishes while this one still may. A
//! paused, stopped, halted or backing-off pipeline has no runner and is released at once.

use capstan_raft_store::{ClusterState, Command, NodeId};

/// The `ReleasePipeline` commands node `me` should propose: one per pipeline it owns that has
/// a pending move and for which `busy(name)` (a runner running or still ending) is false.
pub(super) fn releases(
    state: &ClusterState,
    me: NodeId,
    busy: impl Fn(&str) -> bool,
) -> Vec<Command> {
    state
        .pipelines()
        .iter()
        .filter(|(name, record)| {
            record.owner() == Some(me) && record.move_to().is_some() && !busy(name)
        })
        .map(|(name, record)| Command::ReleasePipeline {
            pipeline: name.clone(),
            node: me,
            epoch: record.epoch(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::test_cluster::cluster;
    use super::*;
    use capstan_raft_store::{DesiredState, Response, SpecJson};

    /// Pipelines `a` (running), `b` (paused) and `c` (running) owned by node 1, `d` by node 2;
    /// `a`, `b` and `d` moving to node 3.
    fn state() -> ClusterState {
        let mut s = cluster(
            &[
                ("a", DesiredState::Running, 1),
                ("b", DesiredState::Paused, 1),
                ("c", DesiredState::Running, 1),
                ("d", DesiredState::Running, 2),
            ],
            |_| SpecJson::new(serde_json::json!({})),
        );
        for name in ["a", "b", "d"] {
            let r = s.apply(Command::MovePipeline {
                pipeline: name.into(),
                to: 3,
            });
            assert!(r.is_applied());
        }
        s
    }

    fn release(name: &str, node: NodeId, epoch: u64) -> Command {
        Command::ReleasePipeline {
            pipeline: name.into(),
            node,
            epoch,
        }
    }

    #[test]
    fn a_runner_still_running_or_ending_holds_the_release_back() {
        let s = state();
        let epoch = |n: &str| s.pipeline(n).unwrap().epoch();
        // `a`'s runner has not ended yet: only the paused `b` is released
        assert_eq!(
            releases(&s, 1, |n| n == "a"),
            vec![release("b", 1, epoch("b"))]
        );
        // once it has ended, both; never `c` (no move) nor another owner's `d`
        assert_eq!(
            releases(&s, 1, |_| false),
            vec![release("a", 1, epoch("a")), release("b", 1, epoch("b"))]
        );
        assert_eq!(
            releases(&s, 2, |_| false),
            vec![release("d", 2, epoch("d"))]
        );
        assert!(releases(&s, 3, |_| false).is_empty());
    }

    #[test]
    fn what_is_released_is_no_longer_released_again() {
        let mut s = state();
        for command in releases(&s, 1, |_| false) {
            assert_eq!(s.apply(command), Response::Applied);
        }
        assert!(releases(&s, 1, |_| false).is_empty());
        assert_eq!(s.pipeline("a").unwrap().owner(), None);
    }
}
