//! Read access to the applied [`ClusterState`] for the rest of the worker (scheduler, REST
//! API, runners) while openraft owns the state machine.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockWriteGuard};
use std::time::Instant;

use crate::cluster_state::ClusterState;
use crate::renewal_receipts::RenewalReceipts;
use crate::type_config::NodeId;

/// A cheap-to-clone handle on the state machine's applied [`ClusterState`]. Readers see
/// whole apply batches: the state machine holds the write lock for a batch at a time.
#[derive(Clone, Debug, Default)]
pub struct SharedClusterState {
    inner: Arc<RwLock<ClusterState>>,
    /// When this node received each worker's latest applied lease renewal; updated with the
    /// state (the state's write lock is taken first).
    receipts: Arc<Mutex<RenewalReceipts>>,
}

impl SharedClusterState {
    pub(crate) fn new(state: ClusterState) -> Self {
        SharedClusterState {
            inner: Arc::new(RwLock::new(state)),
            receipts: Arc::default(),
        }
    }

    /// Runs `f` on the current state. Keep `f` short: applying waits for it.
    pub fn read<R>(&self, f: impl FnOnce(&ClusterState) -> R) -> R {
        // apply() never panics while holding the lock, and a poisoned state would still be a
        // fully applied one (every command is applied in place or not at all), so a poisoned
        // lock is safe to read through.
        let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        f(&guard)
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> ClusterState {
        self.read(ClusterState::clone)
    }

    /// When this node received the log entry of each worker's latest applied lease renewal
    /// (earlier than it was applied; see [`RenewalReceipts`]). Consistent with the state when
    /// called inside [`Self::read`].
    pub fn renewals_received(&self) -> BTreeMap<NodeId, Instant> {
        self.receipts().received().clone()
    }

    pub(crate) fn receipts(&self) -> MutexGuard<'_, RenewalReceipts> {
        // every update is a whole map operation: a poisoned lock still holds a usable map
        self.receipts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, ClusterState> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}
