//! A worker's lease renewal loop (ADR-0004, decision 1). Wiring: how one renewal travels is
//! [`crate::lease_service::renew`], what a confirmation means is [`crate::owner_lease`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tracing::debug;

use crate::lease_service;
use crate::node::Node;

/// Renews this worker's lease every `lease / 10` (see
/// [`crate::worker_config::CheckedWorkerConfig::renew_every`]), and at once when a new leader
/// becomes known. Each renewal runs on its own task, so one that waits for an unreachable peer
/// does not hold back the next. A confirmed renewal confirms the lease from the moment it was
/// sent. While the replicated state does not know this worker as renewing (it just joined, or
/// released its lease at a clean shutdown and came back), it also writes a `RenewLease`
/// command to the log, one at a time, until the state shows it.
pub async fn renew_leases(node: Arc<Node>) {
    let mut tick = tokio::time::interval(node.config.renew_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut changes = node.raft.metrics();
    let mut leader = changes.borrow_and_update().current_leader;
    let registering = Arc::new(AtomicBool::new(false));
    while !node.is_stopping() {
        tokio::select! {
            _ = tick.tick() => {}
            changed = changes.changed() => {
                if changed.is_err() {
                    break; // raft stopped
                }
                let now_leader = changes.borrow_and_update().current_leader;
                if now_leader == leader || now_leader.is_none() {
                    leader = now_leader;
                    continue;
                }
                leader = now_leader;
                tick.reset();
            }
        }
        // refused while shutdown releases the lease
        let Some(in_flight) = node.renewal_guard() else {
            continue;
        };
        let unknown = node.state.read(|s| {
            s.released_nodes().contains(&node.id) || !s.lease_renewals().contains_key(&node.id)
        });
        let guard = if unknown { node.renewal_guard() } else { None };
        if guard.is_some() && !registering.swap(true, Ordering::AcqRel) {
            let node = node.clone();
            let registering = registering.clone();
            tokio::spawn(async move {
                let _guard = guard;
                let bound = node.config.lease;
                let _ = tokio::time::timeout(bound, lease_service::through_log(&node)).await;
                // once applied here the state shows it; until then one write at a time, the
                // next a renewal period after this one ended
                tokio::time::sleep(node.config.renew_every()).await;
                registering.store(false, Ordering::Release);
            });
        }
        tokio::spawn(renew_once(node.clone(), in_flight));
    }
}

/// One renewal, given up after a lease: a confirmation that late would extend nothing.
async fn renew_once(node: Arc<Node>, _in_flight: tokio::sync::OwnedRwLockReadGuard<()>) {
    if node.is_stopping() {
        return;
    }
    let sent = Instant::now();
    let renewal = lease_service::renew(&node);
    match tokio::time::timeout(node.config.lease, renewal).await {
        Ok(true) => node.lease_confirmed(sent),
        Ok(false) => debug!(node = node.id, "lease renewal not confirmed"),
        Err(_) => debug!(
            node = node.id,
            "lease renewal not confirmed within the lease"
        ),
    }
}
