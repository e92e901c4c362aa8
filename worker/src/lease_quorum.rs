//! The quorum rules of lease renewals held in memory (ADR-0004, decisions 1 and 2), pure:
//!
//! - a renewal is *confirmed* once a quorum of the voters noted its receipt ([`is_quorum`]);
//! - the leader may treat a worker as expired only once a quorum of the voters, each on its own
//!   clock, has seen no renewal of it within the expiry ([`ExpiryQuorum`]).
//!
//! Any two quorums share a voter, and that voter received the confirmed renewal after it was
//! sent: so a worker is declared expired only `lease + lease/8` after the send of its last
//! confirmed renewal, when its own lease (`lease` after that send) has ended.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use capstan_raft_store::NodeId;

/// True when `acked` holds a majority of every voter set in `configs` (one set, or the two of
/// a joint membership change). No set: never a quorum.
pub fn is_quorum(configs: &[BTreeSet<NodeId>], acked: &BTreeSet<NodeId>) -> bool {
    !configs.is_empty()
        && configs
            .iter()
            .all(|voters| voters.iter().filter(|v| acked.contains(v)).count() * 2 > voters.len())
}

/// The suspects that a quorum of `configs` reports expired: `reports` maps each voter that
/// answered (the asking leader included) to the suspects it sees expired.
pub fn expired_on_quorum(
    suspects: &BTreeSet<NodeId>,
    configs: &[BTreeSet<NodeId>],
    reports: &BTreeMap<NodeId, BTreeSet<NodeId>>,
) -> BTreeSet<NodeId> {
    suspects
        .iter()
        .filter(|s| {
            let agreeing = reports
                .iter()
                .filter(|(_, expired)| expired.contains(s))
                .map(|(voter, _)| *voter)
                .collect();
            is_quorum(configs, &agreeing)
        })
        .copied()
        .collect()
}

/// What the leader knows of expiries it had confirmed by a quorum, within one leader term.
#[derive(Debug)]
pub struct ExpiryQuorum {
    ask_every: Duration,
    term: Option<u64>,
    confirmed: BTreeSet<NodeId>,
    last_asked: Option<Instant>,
}

/// The outcome of [`ExpiryQuorum::plan`].
#[derive(Debug, PartialEq, Eq)]
pub struct ExpiryPlan {
    /// Expired on a quorum: their pipelines may move.
    pub confirmed: BTreeSet<NodeId>,
    /// Expired on this node's clock only; ask the other voters about these now (`None`: not
    /// now, they count as live until asked).
    pub ask: Option<BTreeSet<NodeId>>,
}

impl ExpiryQuorum {
    /// Asks the voters about the same unconfirmed suspects at most every `ask_every`.
    pub fn new(ask_every: Duration) -> Self {
        ExpiryQuorum {
            ask_every,
            term: None,
            confirmed: BTreeSet::new(),
            last_asked: None,
        }
    }

    /// The leader (in `term`) sees `local_expired` expired on its own clock at `now`. A worker
    /// seen renewing since (not in `local_expired`) is no longer confirmed; a new term forgets
    /// everything (another leader may have confirmed renewals this node never saw).
    pub fn plan(
        &mut self,
        term: u64,
        local_expired: &BTreeSet<NodeId>,
        now: Instant,
    ) -> ExpiryPlan {
        if self.term != Some(term) {
            self.term = Some(term);
            self.confirmed.clear();
            self.last_asked = None;
        }
        self.confirmed.retain(|n| local_expired.contains(n));
        let unknown: BTreeSet<NodeId> =
            local_expired.difference(&self.confirmed).copied().collect();
        let due = self
            .last_asked
            .is_none_or(|t| now.saturating_duration_since(t) >= self.ask_every);
        let ask = (!unknown.is_empty() && due).then(|| {
            self.last_asked = Some(now);
            unknown
        });
        ExpiryPlan {
            confirmed: self.confirmed.clone(),
            ask,
        }
    }

    /// A quorum confirmed `expired` (asked in `term`); ignored if the term moved on meanwhile.
    pub fn settle(&mut self, term: u64, expired: &BTreeSet<NodeId>) {
        if self.term == Some(term) {
            self.confirmed.extend(expired.iter().copied());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[NodeId]) -> BTreeSet<NodeId> {
        v.iter().copied().collect()
    }

    fn plan_of(confirmed: &[NodeId], ask: Option<&[NodeId]>) -> ExpiryPlan {
        ExpiryPlan {
            confirmed: set(confirmed),
            ask: ask.map(set),
        }
    }

    #[test]
    fn a_quorum_is_a_majority_of_every_voter_set() {
        let three = vec![set(&[1, 2, 3])];
        assert!(!is_quorum(&three, &set(&[1])));
        assert!(is_quorum(&three, &set(&[1, 3])));
        assert!(is_quorum(&three, &set(&[1, 2, 3, 9])));
        // acknowledgements of non-voters do not count
        assert!(!is_quorum(&three, &set(&[1, 7, 8])));
        // four voters need three
        assert!(!is_quorum(&[set(&[1, 2, 3, 4])], &set(&[1, 2])));
        assert!(is_quorum(&[set(&[1, 2, 3, 4])], &set(&[1, 2, 4])));
        // a joint change needs a majority of both sets
        let joint = vec![set(&[1, 2, 3]), set(&[3, 4, 5])];
        assert!(!is_quorum(&joint, &set(&[1, 2])));
        assert!(is_quorum(&joint, &set(&[1, 3, 4])));
        assert!(!is_quorum(&[], &set(&[1])));
    }

    #[test]
    fn a_suspect_expires_only_where_a_quorum_agrees() {
        let configs = vec![set(&[1, 2, 3])];
        let suspects = set(&[2, 3]);
        // the leader (1) sees both expired; voter 3 is itself a suspect and did not answer;
        // voter 2 still sees 3 renewing (its renewals reached 2 but not 1)
        let reports: BTreeMap<NodeId, BTreeSet<NodeId>> = [(1, set(&[2, 3])), (2, set(&[]))].into();
        assert_eq!(expired_on_quorum(&suspects, &configs, &reports), set(&[]));
        let reports: BTreeMap<NodeId, BTreeSet<NodeId>> =
            [(1, set(&[2, 3])), (2, set(&[3]))].into();
        assert_eq!(expired_on_quorum(&suspects, &configs, &reports), set(&[3]));
        // the leader's own report alone is never enough in a three-voter cluster
        let reports: BTreeMap<NodeId, BTreeSet<NodeId>> = [(1, set(&[2, 3]))].into();
        assert_eq!(expired_on_quorum(&suspects, &configs, &reports), set(&[]));
        // a single-voter cluster decides alone
        let alone = vec![set(&[1])];
        assert_eq!(
            expired_on_quorum(&set(&[2]), &alone, &[(1, set(&[2]))].into()),
            set(&[2])
        );
    }

    #[test]
    fn the_leader_asks_about_new_suspects_at_most_every_period_and_keeps_confirmations() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut q = ExpiryQuorum::new(ms(70));
        let plan = q.plan(5, &set(&[3]), t0);
        assert_eq!(plan, plan_of(&[], Some(&[3])));
        // asked again only after the period
        assert_eq!(q.plan(5, &set(&[3]), t0 + ms(30)).ask, None);
        assert_eq!(q.plan(5, &set(&[3]), t0 + ms(70)).ask, Some(set(&[3])));
        q.settle(5, &set(&[3]));
        // confirmed: no question needed any more
        let plan = q.plan(5, &set(&[3]), t0 + ms(200));
        assert_eq!(plan, plan_of(&[3], None));
        // a second suspect is asked about alone
        let plan = q.plan(5, &set(&[2, 3]), t0 + ms(300));
        assert_eq!(plan, plan_of(&[3], Some(&[2])));
    }

    #[test]
    fn a_renewal_seen_again_or_a_new_term_drops_a_confirmation() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut q = ExpiryQuorum::new(ms(70));
        q.plan(5, &set(&[3]), t0);
        q.settle(5, &set(&[3]));
        // 3 renewed again (the leader saw it): no longer expired, and a later expiry is
        // asked about afresh
        assert_eq!(q.plan(5, &set(&[]), t0 + ms(100)).confirmed, set(&[]));
        let plan = q.plan(5, &set(&[3]), t0 + ms(200));
        assert_eq!(plan, plan_of(&[], Some(&[3])));
        q.settle(5, &set(&[3]));
        // a new term starts over, and an answer from the old term is ignored
        let plan = q.plan(6, &set(&[3]), t0 + ms(210));
        assert_eq!(plan, plan_of(&[], Some(&[3])));
        q.settle(5, &set(&[3]));
        assert_eq!(q.plan(6, &set(&[3]), t0 + ms(220)).confirmed, set(&[]));
    }
}
