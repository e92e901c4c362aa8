//! [`BinlogSource`]: the live source. Connects, checks, dumps, decodes and assembles, and
//! keeps the stream alive; hands out [`AssemblerOutput`]s one at a time with the processed
//! position that covers them.
//!
//! # Position and resume
//!
//! [`BinlogSource::position`] is the start checkpoint plus every transaction handed out by
//! [`BinlogSource::next`] (delivered or advanced over). A reconnect dumps from exactly that
//! position and resets the assembler, so a transaction cut by the disconnect is replayed
//! whole. Every output is also checked by set membership against the position before it is
//! handed out (never by ordinal comparison): a transaction the position already covers is
//! skipped, so a server that replays more than asked (a restart, a MariaDB domain that
//! resumes from an older point) repeats nothing.
//!
//! A `SchemaChange` that does not complete its transaction (MySQL's `CREATE TABLE … SELECT`)
//! does not advance the position; the output that completes it does. If the stream drops in
//! between, the statement is handed out again after the reconnect.
//!
//! An XA COMMIT / ROLLBACK under `xa: track` covers two GTIDs (the prepare's and its own):
//! both are checked and added in the one output. The prepare alone is never covered by the
//! position, so a restart from it (a reconnect, or a new source from a persisted checkpoint)
//! replays the prepare into the emptied pool. Prepares the server holds at connect
//! (`XA RECOVER`) are handed to the assembler at every connect: those the stream does not
//! replay predate the position and resolve row-lessly.
//!
//! # MariaDB: a checkpoint held back by a pending prepare
//!
//! A MySQL position is a set: the pending prepare's GTID is simply absent while later
//! transactions are present. A MariaDB position is one GTID per domain, "everything up to
//! here": once a transaction after the prepare is handed out, the same position would cover
//! the prepare too, and a restart would skip it — its rows, pooled only in memory, lost at
//! its XA COMMIT. So on MariaDB the source keeps two positions:
//!
//! - [`BinlogSource::processed`]: every transaction handed out (what dedup checks against, as
//!   on MySQL);
//! - [`BinlogSource::position`], the checkpoint: the same, except that a domain with a pooled,
//!   unresolved prepare stays at the GTID processed just before its earliest such prepare
//!   (when the prepare was the first of its domain since the start position, the domain is
//!   left out, and a start from it reads that domain from the oldest retained binlog, or
//!   halts `data_gap` if that is gone).
//!
//! The held domain moves on when the prepare resolves (the resolution covers both GTIDs). A
//! reconnect dumps from the checkpoint and dedups against `processed`, so it repeats nothing.
//! A new source started from a persisted held-back checkpoint re-pools the prepare, and also
//! hands out again the domain's transactions after it that a previous source already handed
//! out: at-least-once, like any replay after the last checkpoint. MySQL has no such window: its
//! `processed` and `position` are always equal.
//!
//! # Liveness
//!
//! The server is asked for a heartbeat every `heartbeat_period` of idleness. A stream with no
//! frame at all for `stream_timeout` is dropped and redialled after `reconnect_backoff`, as
//! is a stream the server closes or a socket that fails. Preconditions, the flavour and the
//! resume checks run again at every connect, and a server identity other than the first
//! connect's halts `source_identity_changed`. `max_reconnects` consecutive failed attempts
//! (no event received in between) halt `stream_stalled`; before the first stream,
//! `command_retries_exhausted`. Anything not transient halts at once.

use std::collections::{BTreeMap, VecDeque};

use capstan_core::change::TransactionGtid;
use capstan_core::position::{Flavor, MariadbGtid, MariadbGtidPosition, Position};

use super::assembler::{AssemblerConfig, AssemblerOutput, TransactionAssembler, XaMode};
use super::connect::SourceClient;
use super::dump::{check_resume, StartPosition};
use super::event::Event;
use super::event_reader::EventReader;
use super::source_config::ValidSourceConfig;
use super::source_error::SourceError;
use super::stream_reader::StreamReader;
use super::xid::XidKey;

/// A live dump: the connection, read and parsed into events on its own task.
type Live = StreamReader;

/// Counters for status pages and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Successful connects (the first one included).
    pub connects: u64,
    /// Streams dropped and redialled (timeouts, closed sockets, server shutdowns).
    pub reconnects: u64,
    /// Outputs skipped because the position already covered them.
    pub skipped_already_processed: u64,
    /// Events decoded (heartbeats included).
    pub events: u64,
    /// Server heartbeats received (the server sends one per `heartbeat_period` of idleness).
    pub heartbeats: u64,
}

/// The live binlog source. See the module documentation.
#[derive(Debug)]
pub struct BinlogSource {
    config: ValidSourceConfig,
    assembler: TransactionAssembler,
    flavor: Flavor,
    server_version: String,
    server_identity: String,
    /// The checkpoint: `processed`, held back on MariaDB by pending prepares.
    position: Position,
    /// Every transaction handed out.
    processed: Position,
    /// MariaDB prepares pooled and unresolved, by (domain, seq): the domain's processed GTID
    /// just before each (none if there was none).
    holds: BTreeMap<(u32, u64), Option<MariadbGtid>>,
    live: Option<Live>,
    pending: VecDeque<AssemblerOutput>,
    out: Vec<AssemblerOutput>,
    failures: u32,
    stats: SourceStats,
}

impl BinlogSource {
    /// Connects, checks the preconditions and the resume position, and opens the dump.
    pub async fn start(
        config: ValidSourceConfig,
        start: StartPosition,
        assembler: AssemblerConfig,
    ) -> Result<BinlogSource, SourceError> {
        let mut attempts = 0u32;
        let track_xa = matches!(assembler.xa, XaMode::Track { .. });
        loop {
            attempts += 1;
            match Self::first_connect(&config, &start, track_xa).await {
                Ok((flavor, server_version, server_identity, position, live, recovered)) => {
                    let mut assembler = TransactionAssembler::new(assembler.clone());
                    assembler.set_recovered_xa(recovered);
                    return Ok(BinlogSource {
                        config,
                        assembler,
                        flavor,
                        server_version,
                        server_identity,
                        processed: position.clone(),
                        position,
                        holds: BTreeMap::new(),
                        live: Some(live),
                        pending: VecDeque::new(),
                        out: Vec::new(),
                        failures: 0,
                        stats: SourceStats {
                            connects: 1,
                            ..SourceStats::default()
                        },
                    });
                }
                Err(e) if e.is_transient() && attempts <= config.max_reconnects => {
                    tracing::warn!(code = e.code(), attempt = attempts, "source connect failed");
                    tokio::time::sleep(config.reconnect_backoff).await;
                }
                Err(e) if e.is_transient() => {
                    return Err(SourceError::CommandRetriesExhausted { attempts })
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn first_connect(
        config: &ValidSourceConfig,
        start: &StartPosition,
        track_xa: bool,
    ) -> Result<(Flavor, String, String, Position, Live, Vec<XidKey>), SourceError> {
        let mut client = SourceClient::open(config, config.stream_timeout).await?;
        let server = client.positions().await?;
        let recovered = Self::recovered_xa(&mut client, track_xa).await?;
        let position = match start {
            StartPosition::Current => server.executed(),
            StartPosition::Checkpoint(p) => p.clone(),
        };
        if position.flavor() != client.flavor() {
            return Err(SourceError::PositionFlavorMismatch);
        }
        check_resume(&position, &server)?;
        let flavor = client.flavor();
        let version = client.server_version().to_string();
        let identity = client.server_identity().to_string();
        let live = Self::dump(client, config, &position).await?;
        Ok((flavor, version, identity, position, live, recovered))
    }

    /// The prepares the server holds, read after the positions: a prepare logged in between
    /// is in the stream, and its pooled copy wins over the recovered key.
    async fn recovered_xa(
        client: &mut SourceClient,
        track_xa: bool,
    ) -> Result<Vec<XidKey>, SourceError> {
        if track_xa {
            client.recovered_xa().await
        } else {
            Ok(Vec::new())
        }
    }

    async fn dump(
        client: SourceClient,
        config: &ValidSourceConfig,
        position: &Position,
    ) -> Result<Live, SourceError> {
        let flavor = client.flavor();
        let conn = tokio::time::timeout(config.stream_timeout, client.into_dump(config, position))
            .await
            .map_err(|_| SourceError::Io {
                kind: "dump request timed out".to_string(),
            })??;
        let mut reader = EventReader::new();
        reader.set_flavor(flavor);
        Ok(StreamReader::spawn(conn, reader, config.stream_timeout))
    }

    /// The server flavour.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The server version string seen at the first connect.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// The server's identity seen at the first connect (MySQL `@@server_uuid`; MariaDB
    /// `server_id=…,host=…,port=…`); a reconnect to another identity halts
    /// `source_identity_changed`.
    pub fn server_identity(&self) -> &str {
        &self.server_identity
    }

    /// The checkpoint: the start checkpoint plus every transaction handed out so far, except
    /// that on MariaDB a domain with a pending XA prepare stays just before it (see the module
    /// documentation). Persist it after delivering what [`BinlogSource::next`] returned: a
    /// start from it loses nothing.
    pub fn position(&self) -> &Position {
        &self.position
    }

    /// The start checkpoint plus every transaction handed out so far, held back by nothing.
    /// Equal to [`BinlogSource::position`] on MySQL and whenever no MariaDB prepare is
    /// pending.
    pub fn processed(&self) -> &Position {
        &self.processed
    }

    /// Counters.
    pub fn stats(&self) -> SourceStats {
        self.stats
    }

    /// The next output, in binlog order. An error is final: the source has halted.
    pub async fn next(&mut self) -> Result<AssemblerOutput, SourceError> {
        loop {
            while let Some(output) = self.pending.pop_front() {
                if let Some(output) = self.admit(output) {
                    return Ok(output);
                }
            }
            if self.live.is_none() {
                self.reconnect().await?;
            }
            if let Err(e) = self.read_one().await {
                if !e.is_transient() {
                    self.live = None;
                    return Err(e);
                }
                tracing::warn!(code = e.code(), "binlog stream dropped; reconnecting");
                self.live = None;
                self.stats.reconnects += 1;
            }
        }
    }

    /// Dedup by membership, then advance the position over a completed transaction.
    fn admit(&mut self, output: AssemblerOutput) -> Option<AssemblerOutput> {
        let (gtid, also, completes) = match &output {
            AssemblerOutput::Transaction(t) => (&t.gtid, t.also_covers.as_slice(), true),
            AssemblerOutput::PositionAdvanced { gtid, also_covers } => {
                (gtid, also_covers.as_slice(), true)
            }
            AssemblerOutput::SchemaChange {
                gtid,
                completes_transaction,
                ..
            } => (gtid, &[][..], *completes_transaction),
        };
        let covered = |g: &TransactionGtid| match (&self.processed, g) {
            (Position::Mysql(set), TransactionGtid::Mysql(g)) => set.contains(g),
            (Position::Mariadb(pos), TransactionGtid::Mariadb(g)) => pos.contains(g),
            _ => false,
        };
        // an XA resolution is processed once both of its GTIDs are (they are added together)
        let skip = covered(gtid) && also.iter().all(&covered);
        // a resolved prepare no longer holds its domain back (also when replayed)
        let mut released = false;
        for g in also {
            if let TransactionGtid::Mariadb(g) = g {
                released |= self.holds.remove(&(g.domain, g.seq)).is_some();
            }
        }
        if skip {
            self.stats.skipped_already_processed += 1;
        } else if completes {
            for g in std::iter::once(gtid).chain(also) {
                match (&mut self.processed, &mut self.position, g) {
                    (Position::Mysql(done), Position::Mysql(cp), TransactionGtid::Mysql(g)) => {
                        done.insert(g);
                        cp.insert(g);
                    }
                    (
                        Position::Mariadb(done),
                        Position::Mariadb(cp),
                        TransactionGtid::Mariadb(g),
                    ) => {
                        done.advance(*g);
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
        (!skip).then_some(output)
    }

    /// Holds the checkpoint's domain back before each prepare the assembler pooled that is
    /// not already held (a replay of a held one) or processed (a replay of a resolved one).
    fn hold_pooled(&mut self) {
        // taken on MySQL too (where a prepare is a hole in the set), so the list stays empty
        let pooled = self.assembler.take_pooled();
        let Position::Mariadb(done) = &self.processed else {
            return;
        };
        let mut added = false;
        for g in pooled {
            let TransactionGtid::Mariadb(g) = g else {
                continue;
            };
            if self.holds.contains_key(&(g.domain, g.seq)) || done.contains(&g) {
                continue;
            }
            self.holds
                .insert((g.domain, g.seq), done.get(g.domain).copied());
            added = true;
        }
        if added {
            self.rebuild_checkpoint();
        }
    }

    /// Recomputes the MariaDB checkpoint from `processed` and the holds.
    fn rebuild_checkpoint(&mut self) {
        if let Position::Mariadb(done) = &self.processed {
            self.position = Position::Mariadb(held_checkpoint(done, &self.holds));
        }
    }

    /// Takes the next event of the live stream (read and parsed on the reader task) and
    /// assembles it.
    async fn read_one(&mut self) -> Result<(), SourceError> {
        let Some(live) = self.live.as_mut() else {
            return Err(SourceError::ServerClosed);
        };
        let event = live.next().await?;
        self.failures = 0;
        self.stats.events += 1;
        if matches!(event, Event::Heartbeat) {
            self.stats.heartbeats += 1;
        }
        self.assembler.push(event, &mut self.out)?;
        self.hold_pooled();
        self.pending.extend(self.out.drain(..));
        Ok(())
    }

    /// Redials with backoff until a dump is open again or the budget is spent.
    async fn reconnect(&mut self) -> Result<(), SourceError> {
        loop {
            tokio::time::sleep(self.config.reconnect_backoff).await;
            self.failures += 1;
            if self.failures > self.config.max_reconnects {
                return Err(SourceError::StreamStalled {
                    attempts: self.failures - 1,
                });
            }
            match self.redial().await {
                Ok((live, recovered)) => {
                    self.assembler.reset();
                    self.assembler.set_recovered_xa(recovered);
                    self.live = Some(live);
                    self.stats.connects += 1;
                    return Ok(());
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(code = e.code(), attempt = self.failures, "reconnect failed");
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn redial(&mut self) -> Result<(Live, Vec<XidKey>), SourceError> {
        let mut client = SourceClient::open(&self.config, self.config.stream_timeout).await?;
        if client.flavor() != self.flavor {
            return Err(SourceError::PositionFlavorMismatch);
        }
        if client.server_identity() != self.server_identity {
            return Err(SourceError::SourceIdentityChanged);
        }
        let server = client.positions().await?;
        let track_xa = matches!(self.assembler.config().xa, XaMode::Track { .. });
        let recovered = Self::recovered_xa(&mut client, track_xa).await?;
        check_resume(&self.position, &server)?;
        let live = Self::dump(client, &self.config, &self.position).await?;
        Ok((live, recovered))
    }
}

/// The MariaDB checkpoint: `processed`, except that each domain with holds (pending prepares
/// by (domain, seq), each with the domain's entry before it) is at the entry before its
/// earliest prepare, or absent if there was none.
fn held_checkpoint(
    processed: &MariadbGtidPosition,
    holds: &BTreeMap<(u32, u64), Option<MariadbGtid>>,
) -> MariadbGtidPosition {
    let mut earliest: BTreeMap<u32, Option<MariadbGtid>> = BTreeMap::new();
    for ((domain, _), before) in holds {
        earliest.entry(*domain).or_insert(*before);
    }
    let mut cp = MariadbGtidPosition::new();
    for g in processed
        .iter()
        .filter(|g| !earliest.contains_key(&g.domain))
    {
        cp.advance(*g);
    }
    for before in earliest.values().flatten() {
        cp.advance(*before);
    }
    cp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(domain: u32, seq: u64) -> MariadbGtid {
        MariadbGtid::new(domain, 2, seq)
    }

    #[test]
    fn held_checkpoint_stops_each_domain_before_its_earliest_pending_prepare() {
        let processed: MariadbGtidPosition = "0-2-50,1-2-9,7-2-4".parse().unwrap();
        let mut holds = BTreeMap::new();
        assert_eq!(held_checkpoint(&processed, &holds), processed);
        // domain 0: prepares at 20 (entry before it 19) and 30 (29); domain 1: 5 (4)
        holds.insert((0, 30), Some(g(0, 29)));
        holds.insert((0, 20), Some(g(0, 19)));
        holds.insert((1, 5), Some(g(1, 4)));
        let cp = held_checkpoint(&processed, &holds);
        assert_eq!(cp.to_string(), "0-2-19,1-2-4,7-2-4");
        for p in [g(0, 20), g(0, 30), g(1, 5)] {
            assert!(!cp.contains(&p) && processed.contains(&p));
        }
        // the earliest resolves: the domain moves up to the next pending one
        holds.remove(&(0, 20));
        assert_eq!(
            held_checkpoint(&processed, &holds).to_string(),
            "0-2-29,1-2-4,7-2-4"
        );
        // a prepare first in its domain since the start: the domain is left out
        holds.insert((7, 3), None);
        assert_eq!(
            held_checkpoint(&processed, &holds).to_string(),
            "0-2-29,1-2-4"
        );
        holds.clear();
        assert_eq!(held_checkpoint(&processed, &holds), processed);
    }
}
