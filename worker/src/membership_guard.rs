//! Which membership changes the leader refuses, decided without I/O from the membership and
//! the members whose lease it sees live. The control plane asks before it changes anything.
//!
//! - The leader is never removed in one step (openraft 0.9's core panicked on it).
//! - Removing a voter must leave a quorum of live voters: with three voters of which one is
//!   down, removing a live one leaves two voters of which one answers, and every later write
//!   (lease renewals included) would wait forever.
//! - An id names one machine for good: adding an id that is a member with other addresses, or
//!   an address another member has, is refused; adding a member again with the same
//!   addresses is allowed (it finishes a change that was cut short).

use std::collections::{BTreeMap, BTreeSet};

use capstan_raft_store::{NodeId, NodeInfo};

/// Why a membership change is refused. Each is a 409 with a stable code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipRefusal {
    /// The member to remove is the Raft leader.
    #[error("member {id} is the raft leader: stop that worker (SIGTERM) so another is elected, then remove it")]
    MemberIsLeader {
        /// The member.
        id: NodeId,
    },
    /// Removing the member would leave fewer live voters than a quorum of those left.
    #[error("removing member {id} would leave {voters_left} voters of which {live_left} are live, fewer than the {quorum} a quorum needs: bring a voter back first")]
    WouldLoseQuorum {
        /// The member.
        id: NodeId,
        /// Voters after the change.
        voters_left: usize,
        /// Of those, the ones whose lease is live.
        live_left: usize,
        /// A majority of `voters_left`.
        quorum: usize,
    },
    /// The id is a member with other addresses.
    #[error("member {id} exists with other addresses: an id is never reused; remove it first or choose a new id")]
    IdInUse {
        /// The id asked for.
        id: NodeId,
    },
    /// Another member has that Raft address.
    #[error("member {other} already has raft address {raft_addr}")]
    AddressInUse {
        /// The member holding it.
        other: NodeId,
        /// The address.
        raft_addr: String,
    },
}

impl MembershipRefusal {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            MembershipRefusal::MemberIsLeader { .. } => "member_is_leader",
            MembershipRefusal::WouldLoseQuorum { .. } => "would_lose_quorum",
            MembershipRefusal::IdInUse { .. } => "member_id_in_use",
            MembershipRefusal::AddressInUse { .. } => "member_address_in_use",
        }
    }
}

/// Whether `id` may be removed by `leader`, given the voters and the live members.
pub fn check_removal(
    leader: NodeId,
    voters: &BTreeSet<NodeId>,
    live: &BTreeSet<NodeId>,
    id: NodeId,
) -> Result<(), MembershipRefusal> {
    if id == leader {
        return Err(MembershipRefusal::MemberIsLeader { id });
    }
    if !voters.contains(&id) {
        return Ok(()); // a learner: no vote to lose
    }
    let left: BTreeSet<NodeId> = voters.iter().copied().filter(|&v| v != id).collect();
    let live_left = left
        .iter()
        .filter(|&&v| v == leader || live.contains(&v))
        .count();
    let quorum = left.len() / 2 + 1;
    if live_left < quorum {
        return Err(MembershipRefusal::WouldLoseQuorum {
            id,
            voters_left: left.len(),
            live_left,
            quorum,
        });
    }
    Ok(())
}

/// Whether `id` with `info` may be added to `members` (every member, voters and learners).
pub fn check_addition(
    members: &BTreeMap<NodeId, NodeInfo>,
    id: NodeId,
    info: &NodeInfo,
) -> Result<(), MembershipRefusal> {
    if let Some(existing) = members.get(&id) {
        if existing != info {
            return Err(MembershipRefusal::IdInUse { id });
        }
    }
    if let Some((&other, _)) = members
        .iter()
        .find(|(&m, i)| m != id && i.raft_addr == info.raft_addr)
    {
        return Err(MembershipRefusal::AddressInUse {
            other,
            raft_addr: info.raft_addr.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn set(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    fn info(raft: &str) -> NodeInfo {
        NodeInfo {
            raft_addr: raft.into(),
            api_addr: format!("{raft}0"),
        }
    }

    #[test]
    fn the_leader_is_not_removed() {
        let e = check_removal(1, &set(&[1, 2, 3]), &set(&[1, 2, 3]), 1).unwrap_err();
        assert_eq!(e.code(), "member_is_leader");
    }

    #[test]
    fn a_removal_must_leave_a_live_quorum() {
        // all live: 3 -> 2 voters, both live
        assert_eq!(
            check_removal(1, &set(&[1, 2, 3]), &set(&[1, 2, 3]), 3),
            Ok(())
        );
        // the dead one may go: 2 left, both live
        assert_eq!(check_removal(1, &set(&[1, 2, 3]), &set(&[1, 2]), 3), Ok(()));
        // a live one may not while another is down: 2 left, 1 live, quorum 2
        assert_eq!(
            check_removal(1, &set(&[1, 2, 3]), &set(&[1, 2]), 2),
            Err(MembershipRefusal::WouldLoseQuorum {
                id: 2,
                voters_left: 2,
                live_left: 1,
                quorum: 2
            })
        );
        // five voters, two down: removing a live one leaves 4 with 2 live (quorum 3)
        let e = check_removal(1, &set(&[1, 2, 3, 4, 5]), &set(&[1, 2, 3]), 3).unwrap_err();
        assert_eq!(e.code(), "would_lose_quorum");
        // the leader counts as live even before its own renewal is seen
        assert_eq!(check_removal(1, &set(&[1, 2, 3]), &set(&[2, 3]), 3), Ok(()));
        // a learner is always removable
        assert_eq!(check_removal(1, &set(&[1, 2, 3]), &set(&[1]), 4), Ok(()));
    }

    #[test]
    fn an_id_names_one_machine() {
        let members: BTreeMap<NodeId, NodeInfo> =
            [(1, info("h1:7100")), (2, info("h2:7100"))].into();
        assert_eq!(check_addition(&members, 3, &info("h3:7100")), Ok(()));
        // the same again: allowed (finishes a cut-short change)
        assert_eq!(check_addition(&members, 2, &info("h2:7100")), Ok(()));
        assert_eq!(
            check_addition(&members, 2, &info("h9:7100"))
                .unwrap_err()
                .code(),
            "member_id_in_use"
        );
        assert_eq!(
            check_addition(&members, 3, &info("h1:7100")),
            Err(MembershipRefusal::AddressInUse {
                other: 1,
                raft_addr: "h1:7100".into()
            })
        );
    }
}
