//! [`SourceProgress`]: the positions of a [`BinlogSource`](super::BinlogSource), pure — what
//! was handed out (`processed`, what dedup checks), how far the stream was read (`reached`),
//! and the checkpoint (`position`: `reached`, held back on MariaDB before pending XA
//! prepares). The reasoning is in the module documentation of `binlog_stream`.

use std::collections::BTreeMap;

use capstan_core::change::TransactionGtid;
use capstan_core::position::{MariadbGtid, MariadbGtidPosition, Position};

/// The source's positions. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SourceProgress {
    /// The checkpoint: `reached`, held back on MariaDB by pending prepares.
    position: Position,
    /// Every transaction handed out (by this source, or before its start: the processed
    /// position of a `StartPosition::Resume`); what dedup checks.
    processed: Position,
    /// MariaDB: the start checkpoint plus every transaction read to its end, handed out or
    /// skipped. Equal to `processed` except while a start from a processed position ahead of
    /// its checkpoint reads the window between the two. Empty on MySQL.
    reached: MariadbGtidPosition,
    /// MariaDB prepares pooled and unresolved, by (domain, seq): the domain's `reached` GTID
    /// just before each (none if there was none).
    holds: BTreeMap<(u32, u64), Option<MariadbGtid>>,
}

impl SourceProgress {
    /// Starting after `checkpoint`, with everything `processed` covers already handed out
    /// (checked by the caller: `processed` covers `checkpoint`, and equals it on MySQL).
    pub(crate) fn new(checkpoint: Position, processed: Position) -> Self {
        let reached = match &checkpoint {
            Position::Mariadb(p) => p.clone(),
            Position::Mysql(_) => MariadbGtidPosition::new(),
        };
        SourceProgress {
            position: checkpoint,
            processed,
            reached,
            holds: BTreeMap::new(),
        }
    }

    /// The checkpoint.
    pub(crate) fn position(&self) -> &Position {
        &self.position
    }

    /// Everything handed out.
    pub(crate) fn processed(&self) -> &Position {
        &self.processed
    }

    /// Takes an output read to its end (`completes`; a `SchemaChange` inside a transaction
    /// does not) of `gtid` that also covers `also` (an XA resolution's prepare): false when
    /// it was already handed out (dedup by membership in `processed`), true when it is to be
    /// handed out now; the positions move over it either way.
    pub(crate) fn admit(
        &mut self,
        gtid: &TransactionGtid,
        also: &[TransactionGtid],
        completes: bool,
    ) -> bool {
        let covered = |g: &TransactionGtid| g.is_covered_by(&self.processed);
        // an XA resolution is processed once both of its GTIDs are (they are added together)
        let skip = covered(gtid) && also.iter().all(&covered);
        // a resolved prepare no longer holds its domain back (also when replayed)
        let mut released = false;
        for g in also {
            if let TransactionGtid::Mariadb(g) = g {
                released |= self.holds.remove(&(g.domain, g.seq)).is_some();
            }
        }
        if completes {
            for g in std::iter::once(gtid).chain(also) {
                match (&mut self.processed, &mut self.position, g) {
                    (Position::Mysql(done), Position::Mysql(cp), TransactionGtid::Mysql(g))
                        if !skip =>
                    {
                        done.insert(g);
                        cp.insert(g);
                    }
                    (
                        Position::Mariadb(done),
                        Position::Mariadb(cp),
                        TransactionGtid::Mariadb(g),
                    ) => {
                        // a skipped transaction was read to its end too: the checkpoint may
                        // pass it (it was delivered), unless a pending prepare holds the domain
                        if !skip {
                            done.advance(*g);
                        }
                        self.reached.advance(*g);
                        let mut held = self.holds.range((g.domain, 0)..=(g.domain, u64::MAX));
                        if held.next().is_none() {
                            cp.advance(*g);
                        }
                    }
                    _ => {}
                }
            }
        }
        if released {
            self.rebuild_checkpoint();
        }
        !skip
    }

    /// Holds the checkpoint's domain back before each pooled prepare that is not already
    /// held (a replay of a held one) or reached (a replay of a resolved one: read past and
    /// not held, so its resolution was read too). A prepare in the window after a `Resume`
    /// start's checkpoint is not reached yet: it is held, as it may still be pending, and its
    /// resolution, if the window holds it, releases it when skipped. Nothing on MySQL (a
    /// prepare is a hole in the set).
    pub(crate) fn hold(&mut self, pooled: Vec<TransactionGtid>) {
        if !matches!(self.position, Position::Mariadb(_)) {
            return;
        }
        let mut added = false;
        for g in pooled {
            let TransactionGtid::Mariadb(g) = g else {
                continue;
            };
            if self.holds.contains_key(&(g.domain, g.seq)) || self.reached.contains(&g) {
                continue;
            }
            self.holds
                .insert((g.domain, g.seq), self.reached.get(g.domain).copied());
            added = true;
        }
        if added {
            self.rebuild_checkpoint();
        }
    }

    /// Recomputes the MariaDB checkpoint from `reached` and the holds.
    fn rebuild_checkpoint(&mut self) {
        if let Position::Mariadb(_) = &self.position {
            self.position = Position::Mariadb(held_checkpoint(&self.reached, &self.holds));
        }
    }
}

/// The MariaDB checkpoint: `reached`, except that each domain with holds (pending prepares
/// by (domain, seq), each with the domain's entry before it) is at the entry before its
/// earliest prepare, or absent if there was none.
fn held_checkpoint(
    reached: &MariadbGtidPosition,
    holds: &BTreeMap<(u32, u64), Option<MariadbGtid>>,
) -> MariadbGtidPosition {
    let mut earliest: BTreeMap<u32, Option<MariadbGtid>> = BTreeMap::new();
    for ((domain, _), before) in holds {
        earliest.entry(*domain).or_insert(*before);
    }
    let mut cp = MariadbGtidPosition::new();
    for g in reached.iter().filter(|g| !earliest.contains_key(&g.domain)) {
        cp.advance(*g);
    }
    for before in earliest.values().flatten() {
        cp.advance(*before);
    }
    cp
}

#[cfg(test)]
mod tests;
