//! Read access to the applied [`ClusterState`] for the rest of the worker (scheduler, REST
//! API, runners) while openraft owns the state machine.

use std::sync::{Arc, PoisonError, RwLock, RwLockWriteGuard};

use crate::cluster_state::ClusterState;

/// A cheap-to-clone handle on the state machine's applied [`ClusterState`]. Readers see
/// whole apply batches: the state machine holds the write lock for a batch at a time.
#[derive(Clone, Debug, Default)]
pub struct SharedClusterState {
    inner: Arc<RwLock<ClusterState>>,
}

impl SharedClusterState {
    pub(crate) fn new(state: ClusterState) -> Self {
        SharedClusterState {
            inner: Arc::new(RwLock::new(state)),
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

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, ClusterState> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }
}
