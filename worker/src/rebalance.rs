//! An operator's rebalance: the fewest moves that even out the pipelines over the live
//! workers (`POST /cluster/rebalance`, `capstan cluster rebalance`). Never run by itself: the
//! scheduler keeps a live owner's pipelines where they are ([`crate::scheduler`]).
//!
//! [`plan`] is pure. A worker's load is the number of pipelines it owns that want an owner
//! (desired `running` or `paused`, as the scheduler counts); a pipeline with a pending move
//! counts on the worker it is moving to and is not moved again. Stopped pipelines run nothing
//! and are left alone, as are pipelines without a live owner (the scheduler places those).
//!
//! After the plan, the loads of the live workers differ by at most one (unless pending moves
//! pin more than that: run it again once they are done), and no plan does it
//! with fewer moves: the `total % workers` workers that keep one more than the others are the
//! most loaded (ties: lowest id), and each worker gives away exactly its load above its share.
//! Which pipelines go: paused ones first (they have no runner to stop), then by name; where:
//! the worker furthest below its share (ties: lowest id), one pipeline at a time.

use std::collections::{BTreeMap, BTreeSet};

use capstan_raft_store::{ClusterState, DesiredState, NodeId};

/// One planned move.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The pipeline.
    pub pipeline: String,
    /// Its owner.
    pub from: NodeId,
    /// The worker it moves to.
    pub to: NodeId,
}

/// The load of every live worker as the plan counts it.
pub fn loads(state: &ClusterState, live: &BTreeSet<NodeId>) -> BTreeMap<NodeId, usize> {
    let mut load: BTreeMap<NodeId, usize> = live.iter().map(|&n| (n, 0)).collect();
    for (_, at, _) in counted(state, live) {
        if let Some(l) = load.get_mut(&at) {
            *l += 1;
        }
    }
    load
}

/// The loads after `moves`.
pub fn loads_after(mut load: BTreeMap<NodeId, usize>, moves: &[Move]) -> BTreeMap<NodeId, usize> {
    for m in moves {
        if let Some(l) = load.get_mut(&m.from) {
            *l = l.saturating_sub(1);
        }
        *load.entry(m.to).or_default() += 1;
    }
    load
}

/// The moves that balance the live workers' loads, fewest first found.
pub fn plan(state: &ClusterState, live: &BTreeSet<NodeId>) -> Vec<Move> {
    if live.is_empty() {
        return Vec::new();
    }
    let load = loads(state, live);
    // what each worker may give: paused before running, then by name
    let mut movable: BTreeMap<NodeId, Vec<(bool, &str)>> = BTreeMap::new();
    for (name, at, free) in counted(state, live) {
        if let Some((desired, true)) = free {
            let running = desired == DesiredState::Running;
            movable.entry(at).or_default().push((running, name));
        }
    }
    for list in movable.values_mut() {
        list.sort();
    }
    let total: usize = load.values().sum();
    let share = total / live.len();
    let mut by_load: Vec<(NodeId, usize)> = load.iter().map(|(&n, &l)| (n, l)).collect();
    by_load.sort_by_key(|&(n, l)| (std::cmp::Reverse(l), n));
    let extra = total % live.len();
    let target: BTreeMap<NodeId, usize> = by_load
        .iter()
        .enumerate()
        .map(|(i, &(n, _))| (n, share + usize::from(i < extra)))
        .collect();
    let mut deficit: BTreeMap<NodeId, usize> = load
        .iter()
        .map(|(n, &l)| (*n, target[n].saturating_sub(l)))
        .collect();
    let mut moves = Vec::new();
    for (&from, &l) in &load {
        let excess = l.saturating_sub(target[&from]);
        let candidates = movable.get(&from).map(Vec::as_slice).unwrap_or_default();
        for &(_, name) in candidates.iter().take(excess) {
            let Some((&to, _)) = deficit
                .iter()
                .filter(|(_, &d)| d > 0)
                .max_by_key(|(&n, &d)| (d, std::cmp::Reverse(n)))
            else {
                return moves;
            };
            if let Some(d) = deficit.get_mut(&to) {
                *d -= 1;
            }
            moves.push(Move {
                pipeline: name.to_string(),
                from,
                to,
            });
        }
    }
    moves
}

/// Every counted pipeline: its name, the worker it counts on, and, when it is not moving,
/// its desired state with whether its owner is that worker (`Some((desired, true))`: the
/// plan may move it).
fn counted<'a>(
    state: &'a ClusterState,
    live: &'a BTreeSet<NodeId>,
) -> impl Iterator<Item = (&'a str, NodeId, Option<(DesiredState, bool)>)> + 'a {
    state.pipelines().iter().filter_map(move |(name, record)| {
        let desired = record.desired_state();
        if !desired.wants_owner() {
            return None;
        }
        let owner = record.owner().filter(|o| live.contains(o))?;
        match record.move_to() {
            Some(to) if live.contains(&to) => Some((name.as_str(), to, None)),
            // moving to a worker that is not live: it stays where it is for now
            Some(_) => Some((name.as_str(), owner, None)),
            None => Some((name.as_str(), owner, Some((desired, true)))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_raft_store::{Command, SpecJson};

    /// Pipelines `(name, desired, owner)`; nodes 1 to 4 known.
    fn state_with(pipelines: &[(&str, DesiredState, Option<NodeId>)]) -> ClusterState {
        let mut s = ClusterState::new();
        for node in 1..=4 {
            s.apply(Command::RenewLease { node });
        }
        for &(name, desired, owner) in pipelines {
            s.apply(Command::CreatePipeline {
                name: name.into(),
                spec: SpecJson::new(serde_json::json!({})),
                incarnation: None,
            });
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

    fn mv(pipeline: &str, from: NodeId, to: NodeId) -> Move {
        Move {
            pipeline: pipeline.into(),
            from,
            to,
        }
    }

    /// `n` running pipelines `{prefix}{i}` on `owner`.
    fn on(prefix: &str, n: usize, owner: NodeId) -> Vec<(String, DesiredState, Option<NodeId>)> {
        (0..n)
            .map(|i| (format!("{prefix}{i}"), DesiredState::Running, Some(owner)))
            .collect()
    }

    fn state_of(list: &[(String, DesiredState, Option<NodeId>)]) -> ClusterState {
        let borrowed: Vec<(&str, DesiredState, Option<NodeId>)> =
            list.iter().map(|(n, d, o)| (n.as_str(), *d, *o)).collect();
        state_with(&borrowed)
    }

    #[test]
    fn nine_on_one_worker_go_three_each() {
        let s = state_of(&on("p", 9, 1));
        let moves = plan(&s, &live(&[1, 2, 3]));
        assert_eq!(
            moves,
            vec![
                mv("p0", 1, 2),
                mv("p1", 1, 3),
                mv("p2", 1, 2),
                mv("p3", 1, 3),
                mv("p4", 1, 2),
                mv("p5", 1, 3),
            ]
        );
        let after = loads_after(loads(&s, &live(&[1, 2, 3])), &moves);
        assert_eq!(after, BTreeMap::from([(1, 3), (2, 3), (3, 3)]));
    }

    #[test]
    fn a_balanced_cluster_needs_no_move() {
        let mut list = on("a", 4, 1);
        list.extend(on("b", 3, 2));
        list.extend(on("c", 3, 3));
        assert!(plan(&state_of(&list), &live(&[1, 2, 3])).is_empty());
    }

    #[test]
    fn the_most_loaded_keep_the_remainder_so_moves_are_fewest() {
        // 8 over 3: shares 3, 3, 2; the two loaded workers keep 3 each
        let mut list = on("a", 4, 1);
        list.extend(on("b", 4, 2));
        let moves = plan(&state_of(&list), &live(&[1, 2, 3]));
        assert_eq!(moves, vec![mv("a0", 1, 3), mv("b0", 2, 3)]);
    }

    #[test]
    fn paused_pipelines_move_first_then_by_name() {
        let s = state_with(&[
            ("a", DesiredState::Running, Some(1)),
            ("b", DesiredState::Running, Some(1)),
            ("z", DesiredState::Paused, Some(1)),
            ("c", DesiredState::Running, Some(1)),
        ]);
        let moves = plan(&s, &live(&[1, 2]));
        assert_eq!(moves, vec![mv("z", 1, 2), mv("a", 1, 2)]);
    }

    #[test]
    fn pending_moves_count_where_they_go_and_the_plan_is_a_fixpoint() {
        let mut s = state_of(&on("p", 6, 1));
        let first = plan(&s, &live(&[1, 2]));
        assert_eq!(first.len(), 3);
        for m in &first {
            let r = s.apply(Command::MovePipeline {
                pipeline: m.pipeline.clone(),
                to: m.to,
            });
            assert!(r.is_applied(), "{r:?}");
        }
        // the moves are pending (node 1 still owns all six): nothing more to plan
        assert!(plan(&s, &live(&[1, 2])).is_empty());
        assert_eq!(loads(&s, &live(&[1, 2])), BTreeMap::from([(1, 3), (2, 3)]));
        // a new worker: pending moves are not planned again, so this round evens out only
        // what is not moving (a rebalance after the moves are done finishes the job)
        assert_eq!(plan(&s, &live(&[1, 2, 3])), vec![mv("p3", 1, 3)]);
    }

    #[test]
    fn stopped_pipelines_and_dead_owners_are_left_alone() {
        let mut list = on("r", 2, 1);
        list.push(("s1".into(), DesiredState::Stopped, Some(1)));
        list.push(("s2".into(), DesiredState::Stopped, Some(1)));
        list.extend(on("d", 3, 4));
        let s = state_of(&list);
        // node 4 is not live: its pipelines are the scheduler's; 2 running over 2 workers
        let moves = plan(&s, &live(&[1, 2]));
        assert_eq!(moves, vec![mv("r0", 1, 2)]);
        assert!(plan(&s, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn any_spread_ends_within_one_with_the_fewest_moves() {
        for spread in [
            [7, 0, 0],
            [5, 1, 0],
            [2, 2, 7],
            [0, 0, 1],
            [3, 9, 4],
            [10, 10, 0],
        ] {
            let mut list = Vec::new();
            for (i, &n) in spread.iter().enumerate() {
                list.extend(on(&format!("n{i}-"), n, i as NodeId + 1));
            }
            let s = state_of(&list);
            let workers = live(&[1, 2, 3]);
            let moves = plan(&s, &workers);
            let after = loads_after(loads(&s, &workers), &moves);
            let (lo, hi) = (after.values().min().unwrap(), after.values().max().unwrap());
            assert!(hi - lo <= 1, "{spread:?} -> {after:?}");
            // fewest: the surplus above the ceiling share of the workers that keep it
            let total: usize = spread.iter().sum();
            let mut sorted = spread.to_vec();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let least: usize = sorted
                .iter()
                .enumerate()
                .map(|(i, &l)| l.saturating_sub(total / 3 + usize::from(i < total % 3)))
                .sum();
            assert_eq!(moves.len(), least, "{spread:?}: {moves:?}");
        }
    }
}
