//! [`StreamReader`]: the socket side of a live dump on its own task, so that reading (TLS,
//! framing, CRC32, event parsing) runs on one core while the caller assembles and decodes
//! rows on another.
//!
//! The task reads frames, turns each into an [`Event`] with the dump's [`EventReader`], and
//! sends them in order over a bounded channel, in batches: a batch is sent when nothing more
//! is buffered from the socket (so an idle stream never holds an event back), or when it
//! reaches [`BATCH_EVENTS`] events or [`BATCH_BYTES`] bytes. At most [`BATCHES_IN_FLIGHT`]
//! batches wait in the channel; the task waits for the caller beyond that (memory stays
//! bounded, the server is read no faster than the caller consumes). The first error — a
//! timeout (`stream_timeout` without a frame), an I/O failure, the server's EOF or error
//! packet, or a halt while parsing — is sent after the events before it, and ends the task.
//! Dropping the reader aborts the task and closes the connection.
//!
//! While the caller is the slower side (the channel is full), the task does not just wait:
//! it decodes rows events of the batch it holds — captured tables only, against the table map
//! in force before each — into their [`AheadSlot`]s, which the assembler uses instead of
//! decoding them again ([`AheadSlot`] says why that is exact). Row decoding so spreads over
//! both sides by itself, and not at all while the caller keeps up.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::task::JoinHandle;

use super::assembler::AssemblerConfig;
use super::decode::{AheadSlot, DecodeOptions};
use super::dump::classify_dump_error;
use super::event::Event;
use super::event_reader::EventReader;
use super::replica_conn::{Frame, ReplicaConn};
use super::source_error::SourceError;
use super::table_filter::TableFilter;
use super::table_schema::TableSchema;

/// What the task needs to decode rows ahead as the assembler would: its table filter and
/// decode options.
#[derive(Clone, Debug)]
pub(crate) struct DecodeAhead {
    filter: TableFilter,
    opts: DecodeOptions,
}

impl DecodeAhead {
    pub(crate) fn new(config: &AssemblerConfig) -> Self {
        DecodeAhead {
            filter: config.filter.clone(),
            opts: config.decode,
        }
    }
}

/// Events per batch at most.
pub(crate) const BATCH_EVENTS: usize = 256;
/// Event bytes per batch at most (a batch is sent once it holds this much).
pub(crate) const BATCH_BYTES: usize = 512 * 1024;
/// Batches waiting in the channel at most.
pub(crate) const BATCHES_IN_FLIGHT: usize = 4;

/// A run of events in stream order, possibly ended by the stream's final error.
#[derive(Debug)]
struct Batch {
    events: Vec<Event>,
    end: Option<SourceError>,
}

/// The receiving end of a dump read on its own task. See the module documentation.
#[derive(Debug)]
pub(crate) struct StreamReader {
    rx: mpsc::Receiver<Batch>,
    task: JoinHandle<()>,
    queue: VecDeque<Event>,
    end: Option<SourceError>,
}

impl StreamReader {
    /// Starts reading `conn` on a new task, parsing with `reader`.
    pub(crate) fn spawn(
        conn: ReplicaConn,
        reader: EventReader,
        timeout: Duration,
        ahead: DecodeAhead,
    ) -> Self {
        let (tx, rx) = mpsc::channel(BATCHES_IN_FLIGHT);
        let task = tokio::spawn(read_loop(conn, reader, timeout, ahead, tx));
        StreamReader {
            rx,
            task,
            queue: VecDeque::new(),
            end: None,
        }
    }

    /// The next event, or the error that ended the stream.
    pub(crate) async fn next(&mut self) -> Result<Event, SourceError> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Ok(event);
            }
            if let Some(e) = self.end.take() {
                return Err(e);
            }
            match self.rx.recv().await {
                Some(batch) => {
                    self.queue.extend(batch.events);
                    self.end = batch.end;
                }
                // the task ended without an error (it was aborted): a dropped stream
                None => return Err(SourceError::ServerClosed),
            }
        }
    }
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A batch being filled, and its rows events that could be decoded ahead.
struct Pending {
    events: Vec<Event>,
    bytes: usize,
    /// (index into `events`, the table map in force when it was read), in stream order.
    decodable: VecDeque<(usize, Arc<TableSchema>)>,
}

impl Pending {
    fn new() -> Self {
        Pending {
            events: Vec::new(),
            bytes: 0,
            decodable: VecDeque::new(),
        }
    }

    /// Decodes the next decodable rows event ahead; false when none is left.
    fn decode_one(&mut self, opts: DecodeOptions) -> bool {
        let Some((i, schema)) = self.decodable.pop_front() else {
            return false;
        };
        if let Some(Event::Rows(rows)) = self.events.get_mut(i) {
            rows.ahead = AheadSlot::fill(rows, schema, opts);
        }
        true
    }
}

/// Sends `pending` as a batch. While the channel is full, decodes its rows ahead one event
/// at a time between attempts, then waits. False when the receiver is gone.
async fn send(tx: &mpsc::Sender<Batch>, mut pending: Pending, opts: DecodeOptions) -> bool {
    loop {
        let batch = Batch {
            events: std::mem::take(&mut pending.events),
            end: None,
        };
        match tx.try_send(batch) {
            Ok(()) => return true,
            Err(TrySendError::Closed(_)) => return false,
            Err(TrySendError::Full(batch)) => {
                pending.events = batch.events;
                if !pending.decode_one(opts) {
                    let batch = Batch {
                        events: pending.events,
                        end: None,
                    };
                    return tx.send(batch).await.is_ok();
                }
            }
        }
    }
}

async fn read_loop(
    mut conn: ReplicaConn,
    mut reader: EventReader,
    timeout: Duration,
    ahead: DecodeAhead,
    tx: mpsc::Sender<Batch>,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut pending = Pending::new();
    // the table maps of captured tables by id, as last seen in the stream
    let mut tables: HashMap<u64, Arc<TableSchema>> = HashMap::new();
    loop {
        let flush = !pending.events.is_empty()
            && (pending.bytes >= BATCH_BYTES
                || pending.events.len() >= BATCH_EVENTS
                || !conn.has_buffered_packet());
        if flush
            && !send(
                &tx,
                std::mem::replace(&mut pending, Pending::new()),
                ahead.opts,
            )
            .await
        {
            return;
        }
        match read_event(&mut conn, &mut reader, timeout, &mut buf).await {
            Ok(event) => {
                pending.bytes += buf.len();
                match &event {
                    Event::TableMap(schema) if ahead.filter.admits(&schema.table) => {
                        tables.insert(schema.table_id, Arc::clone(schema));
                    }
                    Event::TableMap(schema) => {
                        tables.remove(&schema.table_id);
                    }
                    Event::Rows(rows) => {
                        if let Some(schema) = tables.get(&rows.table_id) {
                            let at = pending.events.len();
                            pending.decodable.push_back((at, Arc::clone(schema)));
                        }
                    }
                    _ => {}
                }
                pending.events.push(event);
            }
            Err(e) => {
                let _ = tx
                    .send(Batch {
                        events: pending.events,
                        end: Some(e),
                    })
                    .await;
                return;
            }
        }
    }
}

async fn read_event(
    conn: &mut ReplicaConn,
    reader: &mut EventReader,
    timeout: Duration,
    buf: &mut Vec<u8>,
) -> Result<Event, SourceError> {
    let frame = tokio::time::timeout(timeout, conn.next_frame(buf))
        .await
        .map_err(|_| SourceError::StreamTimeout)??;
    match frame {
        Frame::End => Err(SourceError::ServerClosed),
        Frame::Error(err) => Err(classify_dump_error(&err)),
        Frame::Event => Ok(reader.decode(buf.get(1..).unwrap_or_default())?),
    }
}
