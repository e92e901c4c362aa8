//! Network partitions (issue 17, item 2): three real workers, each in a network namespace of its
//! own (`capstan_tests::net_lab`), stream one at-least-once pipeline while two writers commit
//! on MySQL; packets between workers are dropped (silently, as in a partition) while every
//! worker keeps reaching MySQL and Kafka. A tap (`load_common::topic_tap`) reads the table
//! topic throughout and notes when each record arrived and with which `capstan.epoch`.
//!
//! - the owner cut off from both other workers: it stops publishing within its lease (no
//!   record of its epoch arrives later than the lease and a margin after the cut), another
//!   worker takes over at a higher epoch; healed, it follows the same leader, the pipeline
//!   stays with the new owner and nothing of the old epoch is published again;
//! - the leader isolated, owning the pipeline: the other two elect a leader and take writes,
//!   the pipeline moves; healed, the old leader follows the new one and catches up;
//! - an asymmetric link, the leader unable to reach the owner (which still reaches it): the
//!   cluster keeps a leader that takes writes and the pipeline streams on;
//! - an asymmetric link, the owner unable to reach the leader (which still reaches it): the
//!   owner cannot renew its lease, stops within it, and the pipeline moves.
//!
//! Every scenario heals the partition and waits for convergence (every worker healthy and
//! naming the same leader, voters and owner; the pipeline listed by its owner only; a later
//! epoch only after a lease that lapsed on a loaded machine, said in the output), then the
//! consumer-side check: every change the writers committed, in per-key order, nothing extra
//! (0 lost); every duplicate an exact replay identified by its headers. Each prints its
//! figures. The scenarios run one at a time (timing bounds on two shared cores).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod load_common;
mod partition_common;

use std::time::{Duration, Instant};

use partition_common::*;
use tokio::sync::Mutex;
use tokio::task::block_in_place;

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

/// The owner cut off from the other two workers while it still reaches MySQL and Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_owner_cut_off_from_the_cluster_stops_within_its_lease_and_another_takes_over() {
    let _serial = SERIAL.lock().await;
    let Some(mut p) = Partitioned::start("np_owner", 31_000).await else {
        return;
    };
    // the owner a follower, so that only the partition (not a leader change) stops it
    let (_, owner, epoch) = p.place_owner(|leader| others(leader)[0]);
    let (writers, tap) = p.load().await;

    p.net.isolate(owner);
    let cut = Instant::now();
    let (new_owner, new_epoch) = block_in_place(|| {
        p.wait_streaming(others(owner)[0], SETTLE, |o, e| o != owner && e > epoch)
            .expect("another worker takes over")
    });
    let takeover = cut.elapsed();
    // the cut-off worker knows it lost its lease: its health says so
    block_in_place(|| {
        p.cluster
            .wait_until(SETTLE, |c| {
                c.get(owner, "/health").filter(|(s, _)| *s == 503)
            })
            .expect("the cut-off owner reports degraded");
    });
    tokio::time::sleep(Duration::from_secs(3)).await;

    p.net.heal_all();
    let healed = Instant::now();
    let (leader, converged) =
        block_in_place(|| p.wait_converged(SETTLE)).expect("convergence after the heal");
    let convergence = healed.elapsed();
    settled(converged, (new_owner, new_epoch));
    tokio::time::sleep(Duration::from_secs(3)).await;

    let f = p.check(writers, tap).await;
    let stopped = stopped_within_lease(&f.receipts, epoch, cut);
    // no older epoch, and after the heal nobody but the owners the cluster assigned
    epochs_within(&f.receipts, epoch, block_in_place(|| p.epoch_now()));
    assert!(
        count_of(&f.receipts, new_epoch) > 0,
        "the new owner published"
    );
    eprintln!("owner {owner}: {}", p.runner_ended(owner, epoch));
    eprintln!(
        "figures: owner cut off: faults survived 1 (owner {owner} isolated at epoch {epoch} for \
         {:?}); its last record arrived {stopped:?} after the cut (lease {LEASE:?}); worker \
         {new_owner} streamed at epoch {new_epoch} {takeover:?} after the cut; converged on \
         leader {leader} {convergence:?} after the heal; {} transactions, {} change events, \
         0 lost, {} duplicates (replays identified by capstan.position and capstan.record; capstan verify: 0 missing, \
         extra or differing, each duplicate listed, by kind {:?})",
        healed - cut,
        f.transactions,
        f.events,
        f.duplicates,
        f.by_kind
    );
    p.drop_schema().await;
}

/// The leader, owning the pipeline, isolated from the other two workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolated_leader_is_replaced_and_its_pipeline_moves_then_it_rejoins_as_a_follower() {
    let _serial = SERIAL.lock().await;
    let Some(mut p) = Partitioned::start("np_leader", 31_500).await else {
        return;
    };
    let (old_leader, owner, epoch) = p.place_owner(|leader| leader);
    assert_eq!(owner, old_leader);
    let (writers, tap) = p.load().await;

    p.net.isolate(old_leader);
    let cut = Instant::now();
    let rest = others(old_leader);
    let new_leader = block_in_place(|| {
        p.cluster
            .wait_until(SETTLE, |c| {
                c.wait_for_leader(&rest, Duration::from_millis(200))
                    .filter(|&l| l != old_leader)
            })
            .expect("the other two elect a leader")
    });
    let election = cut.elapsed();
    assert!(
        block_in_place(|| p.writes_through(rest[0]) && p.writes_through(rest[1])),
        "writes through the majority succeed"
    );
    let (new_owner, new_epoch) = block_in_place(|| {
        p.wait_streaming(rest[0], SETTLE, |o, e| o != old_leader && e > epoch)
            .expect("the pipeline moves")
    });
    let takeover = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;

    p.net.heal_all();
    let healed = Instant::now();
    let applied = block_in_place(|| p.last_applied(new_leader)).expect("leader's last_applied");
    let (leader, converged) =
        block_in_place(|| p.wait_converged(SETTLE)).expect("convergence after the heal");
    let convergence = healed.elapsed();
    assert_ne!(leader, old_leader, "the old leader stepped down");
    settled(converged, (new_owner, new_epoch));
    block_in_place(|| {
        p.cluster
            .wait_until(SETTLE, |_| {
                p.last_applied(old_leader).filter(|&a| a >= applied)
            })
            .expect("the old leader catches up")
    });
    tokio::time::sleep(Duration::from_secs(3)).await;

    let f = p.check(writers, tap).await;
    let stopped = stopped_within_lease(&f.receipts, epoch, cut);
    // no older epoch, and after the heal nobody but the owners the cluster assigned
    epochs_within(&f.receipts, epoch, block_in_place(|| p.epoch_now()));
    assert!(
        count_of(&f.receipts, new_epoch) > 0,
        "the new owner published"
    );
    eprintln!(
        "old leader {old_leader}: {}",
        p.runner_ended(old_leader, epoch)
    );
    eprintln!(
        "figures: leader isolated: faults survived 1 (leader and owner {old_leader} isolated \
         at epoch {epoch} for {:?}); {new_leader} elected {election:?} after the cut, writes \
         through both others accepted; the old owner's last record arrived {stopped:?} after \
         the cut; worker {new_owner} streamed at epoch {new_epoch} {takeover:?} after the cut; \
         converged on leader {leader} {convergence:?} after the heal, the old leader caught up \
         to index {applied}; {} transactions, {} change events, 0 lost, {} duplicates \
         (replays identified by capstan.position and capstan.record; capstan verify: 0 missing, \
         extra or differing, each duplicate listed, by kind {:?})",
        healed - cut,
        f.transactions,
        f.events,
        f.duplicates,
        f.by_kind
    );
    p.drop_schema().await;
}

/// An asymmetric link: the leader cannot reach the owner's ports; the owner still reaches the
/// leader (and gets its answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_cannot_reach_the_owner_keeps_the_cluster_writable_and_the_pipeline_streaming(
) {
    let _serial = SERIAL.lock().await;
    let Some(mut p) = Partitioned::start("np_oneway", 32_000).await else {
        return;
    };
    let (leader, owner, epoch) = p.place_owner(|leader| others(leader)[0]);
    let (writers, tap) = p.load().await;

    p.net.cut_one_way(leader, owner);
    let cut = Instant::now();
    let third = ALL
        .into_iter()
        .find(|&n| n != leader && n != owner)
        .unwrap();
    // watch the fault for 10 s from the worker on neither side
    let mut leaders = Vec::new();
    let mut owners = Vec::new();
    block_in_place(|| {
        while cut.elapsed() < Duration::from_secs(10) {
            // (leader, term) as the third worker sees them
            let l = p
                .cluster
                .get(third, "/cluster")
                .map(|(_, v)| (v["leader"].as_u64(), v["term"].as_u64()));
            if leaders.last() != Some(&l) {
                leaders.push(l);
            }
            let o = p
                .cluster
                .pipeline_owner(third, "load")
                .map(|(o, e, _)| (o, e));
            if owners.last() != Some(&o) {
                owners.push(o);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let during = block_in_place(|| {
        p.cluster
            .wait_until(Duration::from_secs(5), |_| p.majority_leader())
            .unwrap_or_else(|| {
                panic!(
                    "no leader at the end of the fault; (leader, term) seen by worker {third}: \
                     {leaders:?}; the owner's view: {:?}",
                    p.cluster
                        .get(owner, "/cluster")
                        .map(|(_, v)| (v["leader"].clone(), v["term"].clone()))
                )
            })
    });
    assert!(
        block_in_place(|| p.writes_through(third)),
        "writes succeed during the fault"
    );
    let end = Instant::now();
    p.net.heal_all();
    let healed = Instant::now();
    let (final_leader, (final_owner, final_epoch)) =
        block_in_place(|| p.wait_converged(SETTLE)).expect("convergence after the heal");
    let convergence = healed.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;

    let f = p.check(writers, tap).await;
    epochs_within(&f.receipts, epoch, block_in_place(|| p.epoch_now()));
    // an owner that hears no leader campaigns (refused: the others heard from the leader
    // recently), so it cannot renew its lease either: if the pipeline moved, the old owner
    // stopped within its lease of its last renewal, which went through until its election
    // timeout (at most twice the 450 ms maximum, after openraft's leader lease) made it a
    // candidate
    let stopped = if final_epoch == epoch {
        "never: it kept the pipeline".to_string()
    } else {
        let bound = LEASE + Duration::from_secs(1) + ARRIVAL_MARGIN;
        format!(
            "{:?} after the cut",
            stopped_within(&f.receipts, epoch, cut, bound)
        )
    };
    // the pipeline streamed through the fault: records arrived in its last two seconds
    let streamed = f
        .receipts
        .iter()
        .filter(|r| r.at > end - Duration::from_secs(2) && r.at <= end)
        .count();
    assert!(streamed > 0, "records arrived in the last 2 s of the fault");
    eprintln!(
        "figures: one-way link (leader {leader} -> owner {owner} dropped): faults survived 1 \
         ({:?}); (leader, term) seen by worker {third}: {leaders:?}, owners (owner, epoch): {owners:?}; \
         leader {during} at the end of the fault, writes accepted; the first owner's last \
         record arrived {stopped}; {streamed} records in the fault's last 2 s; \
         converged on leader {final_leader}, owner {final_owner} at epoch \
         {final_epoch}, {convergence:?} after the heal; {} transactions, {} change events, \
         0 lost, {} duplicates (replays identified by capstan.position and capstan.record; capstan verify: 0 missing, \
         extra or differing, each duplicate listed, by kind {:?})",
        end - cut,
        f.transactions,
        f.events,
        f.duplicates,
        f.by_kind
    );
    p.drop_schema().await;
}

/// An asymmetric link: the owner cannot reach the leader's ports; the leader still reaches
/// the owner (its heartbeats arrive, so the owner never campaigns).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_owner_that_cannot_reach_the_leader_stops_within_its_lease_and_the_pipeline_moves() {
    let _serial = SERIAL.lock().await;
    let Some(mut p) = Partitioned::start("np_noreach", 32_500).await else {
        return;
    };
    let (leader, owner, epoch) = p.place_owner(|leader| others(leader)[0]);
    let (writers, tap) = p.load().await;

    p.net.cut_one_way(owner, leader);
    let cut = Instant::now();
    let (new_owner, new_epoch) = block_in_place(|| {
        p.wait_streaming(leader, SETTLE, |o, e| o != owner && e > epoch)
            .expect("the pipeline moves")
    });
    let takeover = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    p.net.heal_all();
    let healed = Instant::now();
    let (final_leader, converged) =
        block_in_place(|| p.wait_converged(SETTLE)).expect("convergence after the heal");
    let convergence = healed.elapsed();
    settled(converged, (new_owner, new_epoch));
    tokio::time::sleep(Duration::from_secs(3)).await;

    let f = p.check(writers, tap).await;
    let stopped = stopped_within_lease(&f.receipts, epoch, cut);
    // no older epoch, and after the heal nobody but the owners the cluster assigned
    epochs_within(&f.receipts, epoch, block_in_place(|| p.epoch_now()));
    eprintln!("owner {owner}: {}", p.runner_ended(owner, epoch));
    eprintln!(
        "figures: one-way link (owner {owner} -> leader {leader} dropped): faults survived 1 \
         ({:?}); the owner's last record arrived {stopped:?} after the cut; worker {new_owner} \
         streamed at epoch {new_epoch} {takeover:?} after the cut; converged on leader \
         {final_leader} {convergence:?} after the heal; {} transactions, {} change events, \
         0 lost, {} duplicates (replays identified by capstan.position and capstan.record; capstan verify: 0 missing, \
         extra or differing, each duplicate listed, by kind {:?})",
        healed - cut,
        f.transactions,
        f.events,
        f.duplicates,
        f.by_kind
    );
    p.drop_schema().await;
}
