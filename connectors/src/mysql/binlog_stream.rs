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
//! MySQL has no such window: its `processed` and `position` are always equal.
//!
//! # A new source: resume with both positions
//!
//! A new source (another owner, a restart) is started with the pair a previous one reported,
//! [`StartPosition::Resume`]: it dumps from the checkpoint and dedups against the processed
//! position, so it re-pools the pending prepare and hands out nothing twice (checked first:
//! `processed` covers the checkpoint and, on MySQL, equals it, else
//! `processed_position_invalid`; the server executed it, else `source_identity_mismatch`).
//! In the window between the two, whether a prepare is still pending is unknown until its
//! resolution is (or is not) read: so the source also keeps `reached`, the start checkpoint
//! plus everything read to its end, skipped or handed out. The checkpoint is `reached` held
//! back (not `processed`); a prepare not yet reached is held before `reached`'s entry of its
//! domain, and a resolution read in the window (skipped) releases its prepare. Once the window
//! is read, `reached` equals `processed`, as in a source started from a checkpoint alone.
//! A start from the checkpoint alone ([`StartPosition::Checkpoint`]) hands the window out
//! again: at-least-once, like any replay after the last checkpoint. The positions are kept
//! by the pure `SourceProgress` (unit-tested).
//!
//! # Liveness
//!
//! The server is asked for a heartbeat every `heartbeat_period` of idleness. A stream with no
//! frame at all for `stream_timeout` is dropped and redialled after `reconnect_backoff`, as
//! is a stream the server closes or a socket that fails. Preconditions, the flavour and the
//! resume checks run again at every connect, and a server identity other than the first
//! connect's halts `source_identity_changed`. `max_reconnects` consecutive failed attempts
//! (no event received in between) halt `stream_stalled`; before the first stream,
//! `command_retries_exhausted`. Anything not transient halts at once. A [`LinkObserver`]
//! given to [`BinlogSource::start_observed`] hears of every open stream and every drop as it
//! happens (the counts are in [`SourceStats`] too).

use std::collections::VecDeque;

use capstan_core::position::{Flavor, Position};

use super::assembler::{AssemblerConfig, AssemblerOutput, TransactionAssembler, XaMode};
use super::connect::SourceClient;
use super::dump::{check_processed, check_resume, StartPosition};
use super::event::Event;
use super::event_reader::EventReader;
use super::source_config::ValidSourceConfig;
use super::source_error::SourceError;
use super::source_link::{LinkEvent, LinkObserver};
use super::source_progress::SourceProgress;
use super::stream_reader::{DecodeAhead, StreamReader};
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
    /// Rows events the reader task decoded ahead while the caller was busy, and the
    /// assembler took as they were.
    pub rows_events_decoded_ahead: u64,
}

/// The live binlog source. See the module documentation.
#[derive(Debug)]
pub struct BinlogSource {
    config: ValidSourceConfig,
    assembler: TransactionAssembler,
    flavor: Flavor,
    server_version: String,
    server_identity: String,
    /// The checkpoint, what was handed out, the MariaDB holds.
    progress: SourceProgress,
    live: Option<Live>,
    pending: VecDeque<AssemblerOutput>,
    out: Vec<AssemblerOutput>,
    failures: u32,
    stats: SourceStats,
    link: LinkObserver,
}

impl BinlogSource {
    /// Connects, checks the preconditions and the resume position, and opens the dump.
    pub async fn start(
        config: ValidSourceConfig,
        start: StartPosition,
        assembler: AssemblerConfig,
    ) -> Result<BinlogSource, SourceError> {
        Self::start_observed(config, start, assembler, LinkObserver::ignore()).await
    }

    /// As [`BinlogSource::start`], telling `link` of the first stream and of every drop and
    /// redial after it. DDL text is kept when `assembler` or `config` asks for it
    /// ([`ValidSourceConfig::keep_ddl_statement`]).
    pub async fn start_observed(
        config: ValidSourceConfig,
        start: StartPosition,
        assembler: AssemblerConfig,
        link: LinkObserver,
    ) -> Result<BinlogSource, SourceError> {
        let assembler = AssemblerConfig {
            // the pipeline's opt-in travels with the source config (as its column controls)
            keep_ddl_statement: assembler.keep_ddl_statement || config.keep_ddl_statement,
            ..assembler
        };
        let mut attempts = 0u32;
        let track_xa = matches!(assembler.xa, XaMode::Track { .. });
        let ahead = DecodeAhead::new(&assembler);
        loop {
            attempts += 1;
            match Self::first_connect(&config, &start, track_xa, &ahead).await {
                Ok((flavor, server_version, server_identity, position, live, recovered)) => {
                    let mut assembler = TransactionAssembler::new(assembler.clone());
                    assembler.set_recovered_xa(recovered);
                    let processed = start.processed().unwrap_or(&position).clone();
                    assembler.set_replayed(processed.clone());
                    link.notify(LinkEvent::Up);
                    return Ok(BinlogSource {
                        config,
                        assembler,
                        flavor,
                        server_version,
                        server_identity,
                        progress: SourceProgress::new(position, processed),
                        live: Some(live),
                        pending: VecDeque::new(),
                        out: Vec::new(),
                        failures: 0,
                        stats: SourceStats {
                            connects: 1,
                            ..SourceStats::default()
                        },
                        link,
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
        ahead: &DecodeAhead,
    ) -> Result<(Flavor, String, String, Position, Live, Vec<XidKey>), SourceError> {
        let mut client = SourceClient::open(config, config.stream_timeout).await?;
        let server = client.positions().await?;
        let recovered = Self::recovered_xa(&mut client, track_xa).await?;
        let position = match start.checkpoint() {
            None => server.executed(),
            Some(p) => p.clone(),
        };
        if position.flavor() != client.flavor() {
            return Err(SourceError::PositionFlavorMismatch);
        }
        check_resume(&position, &server)?;
        if let StartPosition::Resume { processed, .. } = start {
            check_processed(&position, processed, &server)?;
        }
        let flavor = client.flavor();
        let version = client.server_version().to_string();
        let identity = client.server_identity().to_string();
        let live = Self::dump(client, config, &position, ahead.clone()).await?;
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
        ahead: DecodeAhead,
    ) -> Result<Live, SourceError> {
        let flavor = client.flavor();
        let conn = tokio::time::timeout(config.stream_timeout, client.into_dump(config, position))
            .await
            .map_err(|_| SourceError::Io {
                kind: "dump request timed out".to_string(),
            })??;
        let mut reader = EventReader::new();
        reader.set_flavor(flavor);
        Ok(StreamReader::spawn(
            conn,
            reader,
            config.stream_timeout,
            ahead,
        ))
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
    /// documentation). Persist it, with [`BinlogSource::processed`], after delivering what
    /// [`BinlogSource::next`] returned: a start from it loses nothing, and a start from both
    /// ([`StartPosition::resume`]) repeats nothing either.
    pub fn position(&self) -> &Position {
        self.progress.position()
    }

    /// Every transaction handed out so far (and, for a [`StartPosition::Resume`], before the
    /// start), held back by nothing: what dedup checks. Equal to [`BinlogSource::position`]
    /// on MySQL and whenever no MariaDB prepare is pending.
    pub fn processed(&self) -> &Position {
        self.progress.processed()
    }

    /// Counters.
    pub fn stats(&self) -> SourceStats {
        SourceStats {
            rows_events_decoded_ahead: self.assembler.decoded_ahead(),
            ..self.stats
        }
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
                self.link.notify(LinkEvent::Dropped);
            }
        }
    }

    /// Dedup by membership, then advance the position over a completed transaction.
    fn admit(&mut self, output: AssemblerOutput) -> Option<AssemblerOutput> {
        let (gtid, also, completes) = match &output {
            AssemblerOutput::Transaction(t) => (&t.gtid, t.also_covers.as_slice(), true),
            // a part of an open transaction: deduplicated, never covered
            AssemblerOutput::Slice(t) => (&t.gtid, &[][..], false),
            AssemblerOutput::PositionAdvanced { gtid, also_covers } => {
                (gtid, also_covers.as_slice(), true)
            }
            AssemblerOutput::SchemaChange {
                gtid,
                completes_transaction,
                ..
            } => (gtid, &[][..], *completes_transaction),
        };
        let handed_out = self.progress.admit(gtid, also, completes);
        if !handed_out {
            self.stats.skipped_already_processed += 1;
        }
        handed_out.then_some(output)
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
        // taken on MySQL too (where a prepare is a hole in the set), so the list stays empty
        self.progress.hold(self.assembler.take_pooled());
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
                    self.assembler
                        .set_replayed(self.progress.processed().clone());
                    self.live = Some(live);
                    self.stats.connects += 1;
                    self.link.notify(LinkEvent::Up);
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
        check_resume(self.progress.position(), &server)?;
        let ahead = DecodeAhead::new(self.assembler.config());
        let live = Self::dump(client, &self.config, self.progress.position(), ahead).await?;
        Ok((live, recovered))
    }
}
