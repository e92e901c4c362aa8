//! [`LinkObserver`]: how a live [`BinlogSource`](super::BinlogSource) tells its owner that its
//! stream to the server opened or dropped, as it happens (a metric of the connection must not
//! wait for the next transaction to learn that the server went away). Value-free: an event
//! carries no address, position or error text.

use std::fmt;
use std::sync::Arc;

/// A change of a live source's stream to its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// A dump stream is open: the first connect, or a redial after a drop.
    Up,
    /// The stream dropped (a silent stream timed out, the socket failed, the server closed
    /// it or shut down); the source redials, and says [`LinkEvent::Up`] once it is back.
    Dropped,
}

/// Told of every [`LinkEvent`], on the task that drives the source. It must return at once
/// (set a gauge, count): it runs between reads of the stream.
#[derive(Clone)]
pub struct LinkObserver(Arc<dyn Fn(LinkEvent) + Send + Sync>);

impl LinkObserver {
    /// An observer that calls `f`.
    pub fn new(f: impl Fn(LinkEvent) + Send + Sync + 'static) -> Self {
        LinkObserver(Arc::new(f))
    }

    /// An observer that ignores every event.
    pub fn ignore() -> Self {
        LinkObserver::new(|_| {})
    }

    /// Tells the observer of `event` (the source does; a test may).
    pub fn notify(&self, event: LinkEvent) {
        (self.0)(event);
    }
}

impl fmt::Debug for LinkObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkObserver")
    }
}
