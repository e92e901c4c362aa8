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

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::dump::classify_dump_error;
use super::event::Event;
use super::event_reader::EventReader;
use super::replica_conn::{Frame, ReplicaConn};
use super::source_error::SourceError;

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
    pub(crate) fn spawn(conn: ReplicaConn, reader: EventReader, timeout: Duration) -> Self {
        let (tx, rx) = mpsc::channel(BATCHES_IN_FLIGHT);
        let task = tokio::spawn(read_loop(conn, reader, timeout, tx));
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

async fn read_loop(
    mut conn: ReplicaConn,
    mut reader: EventReader,
    timeout: Duration,
    tx: mpsc::Sender<Batch>,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut events = Vec::new();
    let mut bytes = 0usize;
    loop {
        let flush = !events.is_empty()
            && (bytes >= BATCH_BYTES
                || events.len() >= BATCH_EVENTS
                || !conn.has_buffered_packet());
        if flush {
            let batch = Batch {
                events: std::mem::take(&mut events),
                end: None,
            };
            bytes = 0;
            if tx.send(batch).await.is_err() {
                return;
            }
        }
        match read_event(&mut conn, &mut reader, timeout, &mut buf).await {
            Ok(event) => {
                bytes += buf.len();
                events.push(event);
            }
            Err(e) => {
                let _ = tx
                    .send(Batch {
                        events,
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
