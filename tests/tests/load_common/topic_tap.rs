//! [`TopicTap`]: an independent consumer reading a table topic *while* a scenario runs, noting
//! when each record arrived: the evidence of when an owner stopped publishing.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};

use super::{consumer_from_start, Collector, TopicContents};

/// One record as the tap received it.
#[derive(Clone, Copy, Debug)]
pub struct Receipt {
    /// When the consumer had it.
    pub at: Instant,
    /// Its `capstan.epoch` header.
    pub epoch: Option<u64>,
}

/// See the module documentation.
pub struct TopicTap {
    want: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// The highest `capstan.epoch` read so far (0: none).
    max_epoch: Arc<AtomicU64>,
    handle: JoinHandle<(TopicContents, Vec<Receipt>)>,
}

impl TopicTap {
    /// Waits up to 30 s for `topic` to exist, then reads it `read_uncommitted` from its first
    /// offsets on a thread of its own.
    pub fn start(bootstrap: &str, topic: &str) -> TopicTap {
        Self::start_isolated(bootstrap, topic, "read_uncommitted")
    }

    /// [`TopicTap::start`] with the consumer's `isolation.level` (`read_committed` sees only
    /// committed transactions' records).
    pub fn start_isolated(bootstrap: &str, topic: &str, isolation: &str) -> TopicTap {
        let probe: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .create()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let partitions = probe
                .fetch_metadata(Some(topic), Duration::from_secs(5))
                .ok()
                .and_then(|m| {
                    m.topics()
                        .first()
                        .filter(|t| t.error().is_none())
                        .map(|t| t.partitions().len())
                })
                .unwrap_or(0);
            if partitions > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "topic {topic} never appeared");
            std::thread::sleep(Duration::from_millis(200));
        }
        let want = Arc::new(AtomicUsize::new(usize::MAX));
        let stop = Arc::new(AtomicBool::new(false));
        let max_epoch = Arc::new(AtomicU64::new(0));
        let (w, s, m) = (want.clone(), stop.clone(), max_epoch.clone());
        let consumer = consumer_from_start(bootstrap, topic, isolation);
        let handle = std::thread::spawn(move || {
            let mut collector = Collector::default();
            let mut receipts = Vec::new();
            let mut last_new = Instant::now();
            while !s.load(Ordering::Relaxed) {
                if collector.events() >= w.load(Ordering::Relaxed)
                    && last_new.elapsed() > Duration::from_secs(2)
                {
                    break;
                }
                let Some(Ok(msg)) = consumer.poll(Duration::from_millis(50)) else {
                    continue;
                };
                let at = Instant::now();
                last_new = at;
                let epoch = collector.add(&msg);
                if let Some(e) = epoch {
                    m.fetch_max(e, Ordering::Relaxed);
                }
                receipts.push(Receipt { at, epoch });
            }
            (collector.into_contents(), receipts)
        });
        TopicTap {
            want,
            stop,
            max_epoch,
            handle,
        }
    }

    /// Waits up to `timeout` until a record of `epoch` or a later one has been read: proof
    /// that the owner of that epoch published. Whether it was.
    #[allow(dead_code)] // not every test binary that includes this module waits
    pub fn wait_for_epoch(&self, epoch: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.max_epoch.load(Ordering::Relaxed) >= epoch {
                return true;
            }
            if Instant::now() >= deadline || self.handle.is_finished() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reads on until the topic holds at least `want` change events and then nothing new for
    /// two seconds (or `timeout` passed): what it read, and every record's receipt.
    pub fn finish(self, want: usize, timeout: Duration) -> (TopicContents, Vec<Receipt>) {
        self.want.store(want, Ordering::Relaxed);
        let deadline = Instant::now() + timeout;
        while !self.handle.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the tap's thread")
    }
}
