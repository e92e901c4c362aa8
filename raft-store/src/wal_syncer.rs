//! Group commit for the Raft log. An append is written to RocksDB unsynced, so its entries are
//! readable as soon as `append` returns (what openraft asks), and this syncer's thread makes the
//! write-ahead log durable (`flush_wal(sync)`) and only then completes the appends' callbacks,
//! in the order they were queued: an entry still counts in a quorum only once it is on disk.
//!
//! Before, the append synced inline, and the Raft core waited on the fsync: on a busy disk
//! (100–200 ms fsyncs were measured beside a MySQL and a Kafka writing hard) it sent no
//! heartbeats meanwhile, followers called elections, and healthy owners lost their leases.
//! Now the core goes on while the disk syncs, and one fsync covers every append queued behind
//! it.
//!
//! An unsynced write has reached the operating system before `append` returns, so a killed
//! process loses nothing it acknowledged; a machine that loses power loses only appends whose
//! callbacks were never called, which no one counted.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use openraft::storage::LogFlushed;
use rocksdb::DB;

use crate::store::SLOW_WRITE;
use crate::type_config::TypeConfig;

enum Job {
    /// Complete this append's callback once the log is synced.
    Flushed(LogFlushed<TypeConfig>),
    /// Signal once everything queued before it is synced and completed.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// The handle on the syncer thread. Clones share the thread; when the last one is dropped, the
/// thread is told to end and joined, so the database is closed when the store is.
#[derive(Clone)]
pub(crate) struct WalSyncer {
    inner: Arc<Inner>,
}

struct Inner {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // the thread ends once its queue is closed and drained
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for WalSyncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WalSyncer")
    }
}

impl WalSyncer {
    /// Starts the syncer thread for `db`.
    pub(crate) fn start(db: Arc<DB>) -> std::io::Result<WalSyncer> {
        let (jobs, queue) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("capstan-raft-wal".into())
            .spawn(move || run(&db, &queue))?;
        Ok(WalSyncer {
            inner: Arc::new(Inner {
                jobs: Some(jobs),
                thread: Some(thread),
            }),
        })
    }

    fn send(&self, job: Job) -> Result<(), mpsc::SendError<Job>> {
        match &self.inner.jobs {
            Some(jobs) => jobs.send(job),
            None => Err(mpsc::SendError(job)),
        }
    }

    /// Completes `callback` once the appends written so far are on disk. Without the thread
    /// (it ended on a panic), completes it with an error, which stops the Raft core.
    pub(crate) fn flushed(&self, callback: LogFlushed<TypeConfig>) {
        if let Err(mpsc::SendError(Job::Flushed(callback))) = self.send(Job::Flushed(callback)) {
            callback.log_io_completed(Err(std::io::Error::other("raft log syncer stopped")));
        }
    }

    /// Resolves once every append queued before this call is synced and its callback
    /// completed: a truncation or a purge waits for it, so no callback completes for entries
    /// already deleted.
    pub(crate) async fn barrier(&self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.send(Job::Barrier(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

fn run(db: &DB, queue: &mpsc::Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        // everything queued by now rides on one sync
        let mut jobs = vec![first];
        jobs.extend(queue.try_iter());
        let callbacks = jobs.iter().filter(|j| matches!(j, Job::Flushed(_))).count();
        let started = Instant::now();
        let synced = if callbacks > 0 {
            db.flush_wal(true).map_err(|e| e.to_string())
        } else {
            Ok(())
        };
        let took = started.elapsed();
        if took > SLOW_WRITE {
            tracing::warn!(
                appends = callbacks,
                took_ms = took.as_millis() as u64,
                "slow raft log sync; acknowledgements of appends wait on it"
            );
        }
        for job in jobs {
            match job {
                Job::Flushed(callback) => callback.log_io_completed(
                    synced
                        .clone()
                        .map_err(|e| std::io::Error::other(format!("raft log sync: {e}"))),
                ),
                Job::Barrier(done) => {
                    let _ = done.send(());
                }
            }
        }
    }
}
