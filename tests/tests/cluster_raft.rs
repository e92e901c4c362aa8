//! Three real `capstan worker` processes on 127.0.0.1: leader election, replication, failover
//! of the leader, catch-up of a restarted node, ownership moving away from a killed or
//! departing owner with a higher epoch, and membership changes at runtime.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(20);

fn pipelines(c: &Cluster, id: u64) -> Vec<String> {
    c.get(id, "/pipelines")
        .and_then(|(s, v)| (s == 200).then_some(v))
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

fn definition(name: &str) -> Value {
    capstan_tests::cluster::idle_definition(name)
}

fn create(c: &Cluster, via: u64, name: &str) {
    let (status, body) = c
        .send(via, Method::POST, "/pipelines", Some(&definition(name)))
        .expect("api reachable");
    assert_eq!(status, 201, "create {name} via node {via}: {body}");
}

/// (owner, epoch) once the pipeline has an owner, as seen by node `id`.
fn owner(c: &Cluster, id: u64, name: &str) -> Option<(u64, u64)> {
    c.pipeline_owner(id, name)
        .map(|(owner, epoch, _)| (owner, epoch))
}

#[test]
fn leader_elected_commands_replicate_and_survive_leader_kill() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c
        .wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();

    // a write on a follower reaches the leader and replicates everywhere
    create(&c, follower, "p1");
    create(&c, leader, "p2");
    for id in [1, 2, 3] {
        let seen = c.wait_until(SETTLE, |c| {
            let p = pipelines(c, id);
            (p == ["p1", "p2"]).then_some(())
        });
        assert!(seen.is_some(), "node {id} sees {:?}", pipelines(&c, id));
    }
    // a duplicate name is a conflict
    let (code, body) = c
        .send(
            follower,
            Method::POST,
            "/pipelines",
            Some(&definition("p1")),
        )
        .unwrap();
    assert_eq!(code, 409, "{body}");
    assert_eq!(body["error_code"], "pipeline_exists");

    // kill -9 the leader: a new leader is elected among the survivors and nothing committed
    // is lost
    c.kill9(leader);
    assert!(
        !c.workers.get_mut(&leader).unwrap().is_running(),
        "the leader really died"
    );
    let survivors: Vec<u64> = [1, 2, 3].into_iter().filter(|&n| n != leader).collect();
    let new_leader = c
        .wait_for_leader(&survivors, SETTLE)
        .expect("a new leader among the survivors");
    assert_ne!(new_leader, leader);
    for &id in &survivors {
        assert_eq!(
            pipelines(&c, id),
            ["p1", "p2"],
            "node {id} lost a committed command"
        );
    }
    create(&c, survivors[0], "p3");

    // the killed node restarts from its RocksDB and catches up
    c.spawn(leader);
    let caught_up = c.wait_until(SETTLE, |c| {
        (pipelines(c, leader) == ["p1", "p2", "p3"]).then_some(())
    });
    assert!(
        caught_up.is_some(),
        "restarted node sees {:?}; log:\n{}",
        pipelines(&c, leader),
        c.log_tail(leader)
    );
}

#[test]
fn a_killed_owners_pipeline_moves_to_a_live_worker_with_a_higher_epoch() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    create(&c, leader, "orders");
    let (code, _) = c
        .send(leader, Method::PUT, "/pipelines/orders/resume", None)
        .unwrap();
    assert_eq!(code, 202);
    let (first_owner, first_epoch) = c
        .wait_until(SETTLE, |c| owner(c, leader, "orders"))
        .expect("the scheduler assigns an owner");

    // kill the owner (if it is the leader, a new leader takes over the scheduling too)
    let killed_at = Instant::now();
    c.kill9(first_owner);
    let others: Vec<u64> = [1, 2, 3]
        .into_iter()
        .filter(|&n| n != first_owner)
        .collect();
    let (new_owner, new_epoch) = c
        .wait_until(SETTLE, |c| {
            owner(c, others[0], "orders").filter(|&(o, _)| o != first_owner)
        })
        .expect("the pipeline moves");
    let took = killed_at.elapsed();
    assert!(others.contains(&new_owner), "moved to a live worker");
    assert!(new_epoch > first_epoch, "the move bumps the epoch");
    // lease 2 s + margin 0.5 s + scheduling; a leader change adds an election
    assert!(took < Duration::from_secs(8), "moved after {took:?}");
    eprintln!("failover: owner {first_owner} killed, {new_owner} owns after {took:?}");

    // the survivors see the killed member's lease as expired, and each other as live
    let health = |c: &Cluster, via: u64, id: u64| -> Option<String> {
        let (_, v) = c.get(via, "/cluster")?;
        v["members"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == id)
            .and_then(|m| m["health"].as_str().map(str::to_string))
    };
    // (a survivor that could not renew during an election shows expired until its next
    // renewal, as its own lease did: wait for that)
    for &via in &others {
        for &other in &others {
            let live = c.wait_until(Duration::from_secs(5), |c| {
                (health(c, via, other).as_deref() == Some("live")).then_some(())
            });
            assert!(
                live.is_some(),
                "node {via} sees {other} as {:?}",
                health(&c, via, other)
            );
        }
        assert_eq!(health(&c, via, first_owner).as_deref(), Some("expired"));
    }

    // the killed worker comes back: it does not take the pipeline back (no churn)
    c.spawn(first_owner);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(owner(&c, others[0], "orders"), Some((new_owner, new_epoch)));
}

#[test]
fn sigterm_hands_ownership_off_before_the_lease_would_expire() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    // give every worker a pipeline so one of them is a non-leader owner
    for name in ["a", "b", "c"] {
        create(&c, leader, name);
        c.send(
            leader,
            Method::PUT,
            &format!("/pipelines/{name}/resume"),
            None,
        )
        .unwrap();
    }
    let owned = c
        .wait_until(SETTLE, |c| {
            let o: Vec<(u64, u64)> = ["a", "b", "c"]
                .iter()
                .filter_map(|n| owner(c, leader, n))
                .collect();
            (o.len() == 3).then_some(o)
        })
        .expect("all assigned");
    let (victim, victim_epoch, name) = ["a", "b", "c"]
        .iter()
        .zip(&owned)
        .find(|(_, (o, _))| *o != leader)
        .map(|(n, (o, e))| (*o, *e, *n))
        .expect("a non-leader owner");

    let sent = Instant::now();
    c.signal(victim, "TERM");
    assert!(
        c.wait_exit(victim, Duration::from_secs(10)),
        "worker exits on SIGTERM"
    );
    let moved = c
        .wait_until(SETTLE, |c| {
            owner(c, leader, name).filter(|&(o, _)| o != victim)
        })
        .expect("moved after a clean shutdown");
    let took = sent.elapsed();
    assert!(moved.1 > victim_epoch);
    // a released lease is acted on at the next scheduling round, well inside the lease
    assert!(took < Duration::from_millis(1900), "handoff took {took:?}");
}

#[test]
fn workers_join_and_leave_at_runtime() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    create(&c, leader, "before-join");
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let joiner = c.spawn_joiner(4);
    let body = json!({
        "id": 4,
        "raft_addr": format!("127.0.0.1:{}", joiner.raft_port),
        "api_addr": format!("127.0.0.1:{}", joiner.api_port),
    });
    // asked on a follower: forwarded to the leader
    let (code, resp) = c
        .send(follower, Method::POST, "/cluster/members", Some(&body))
        .unwrap();
    assert_eq!(code, 201, "{resp}");
    let voter = c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(leader, "/cluster")?;
        v["members"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == 4)
            .and_then(|m| m["voter"].as_bool())
            .filter(|&v| v)
    });
    assert!(voter.is_some(), "node 4 became a voter");
    // the joiner replicated the existing state
    let synced = c.wait_until(SETTLE, |c| {
        (pipelines(c, 4) == ["before-join"]).then_some(())
    });
    assert!(synced.is_some(), "joiner sees {:?}", pipelines(&c, 4));

    // bad input names the field
    let (code, resp) = c
        .send(
            leader,
            Method::POST,
            "/cluster/members",
            Some(&json!({"id": 5, "raft_addr": "x", "api_addr": "127.0.0.1:1"})),
        )
        .unwrap();
    assert_eq!(code, 400, "{resp}");
    assert!(resp["message"].as_str().unwrap().contains("raft_addr"));
    let (code, resp) = c
        .send(
            leader,
            Method::POST,
            "/cluster/members",
            Some(&json!({"id": 5, "bogus": 1})),
        )
        .unwrap();
    assert_eq!(code, 400, "{resp}");

    // remove it again
    let (code, resp) = c
        .send(follower, Method::DELETE, "/cluster/members/4", None)
        .unwrap();
    assert_eq!(code, 204, "{resp}");
    let gone = c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(leader, "/cluster")?;
        (!v["members"].as_array()?.iter().any(|m| m["id"] == 4)).then_some(())
    });
    assert!(gone.is_some(), "node 4 removed");
    // the removed worker is told and stops (it used to run on, degraded, calling elections)
    assert!(
        c.wait_exit(4, Duration::from_secs(10)),
        "removed worker still runs; log:\n{}",
        c.log_tail(4)
    );
    assert!(c
        .log(4)
        .contains("this worker was removed from the cluster; stopping"));
    let (code, _) = c
        .send(leader, Method::DELETE, "/cluster/members/99", None)
        .unwrap();
    assert_eq!(code, 404);

    // the leader is not removed in one step (openraft's core panicked on it): refused, asked
    // on the leader or on a follower, and the cluster keeps working through both
    for via in [leader, follower] {
        let (code, resp) = c
            .send(
                via,
                Method::DELETE,
                &format!("/cluster/members/{leader}"),
                None,
            )
            .unwrap();
        assert_eq!(code, 409, "{resp}");
        assert_eq!(resp["error_code"], "member_is_leader", "{resp}");
    }
    create(&c, leader, "after-refusal");
    create(&c, follower, "after-refusal-via-follower");
    let (_, health) = c.get(leader, "/health").unwrap();
    assert_eq!(health["status"], "ok", "{health}");
}

#[test]
fn without_quorum_writes_get_503_and_sigterm_still_exits() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    c.kill9(2);
    c.kill9(3);
    // without a quorum a write is refused with 503 in bounded time, never left hanging
    let asked = Instant::now();
    let (code, body) = c
        .send(
            1,
            Method::POST,
            "/pipelines",
            Some(&definition("no-quorum")),
        )
        .expect("the api answers");
    assert_eq!(code, 503, "{body}");
    assert!(
        asked.elapsed() < Duration::from_secs(8),
        "{:?}",
        asked.elapsed()
    );
    let sent = Instant::now();
    c.signal(1, "TERM");
    // the lease release cannot commit; it is abandoned after one lease (2 s)
    assert!(
        c.wait_exit(1, Duration::from_secs(10)),
        "worker 1 hangs on shutdown without quorum; log:\n{}",
        c.log_tail(1)
    );
    assert!(sent.elapsed() < Duration::from_secs(8));
}

#[test]
fn membership_changes_that_would_break_the_cluster_are_refused() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let mut followers = [1, 2, 3].into_iter().filter(|&n| n != leader);
    let (alive, dead) = (followers.next().unwrap(), followers.next().unwrap());

    // a member whose raft port does not answer is refused: it would count towards the quorum
    // without ever voting (it used to be made a voter, 201)
    let nobody = capstan_tests::cluster::free_port();
    let (code, resp) = c
        .send(
            alive,
            Method::POST,
            "/cluster/members",
            Some(&json!({"id": 7, "raft_addr": format!("127.0.0.1:{nobody}"), "api_addr": "127.0.0.1:1"})),
        )
        .unwrap();
    assert_eq!(code, 409, "{resp}");
    assert_eq!(resp["error_code"], "member_unreachable", "{resp}");
    // an id is one machine: the same id with another address is refused
    let (code, resp) = c
        .send(
            leader,
            Method::POST,
            "/cluster/members",
            Some(&json!({"id": alive, "raft_addr": "127.0.0.1:9", "api_addr": "127.0.0.1:9"})),
        )
        .unwrap();
    assert_eq!(code, 409, "{resp}");
    assert_eq!(resp["error_code"], "member_id_in_use", "{resp}");
    let (_, v) = c.get(leader, "/cluster").unwrap();
    assert_eq!(v["members"].as_array().unwrap().len(), 3, "{v}");

    // one follower dies; once the leader sees its lease expired, removing the other (live)
    // follower would leave two voters of which one answers: refused, asked on either node
    c.kill9(dead);
    let expired = c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(leader, "/cluster")?;
        v["members"]
            .as_array()?
            .iter()
            .any(|m| m["id"] == dead && m["health"] == "expired")
            .then_some(())
    });
    assert!(expired.is_some(), "leader sees {dead} expired");
    for via in [leader, alive] {
        let (code, resp) = c
            .send(
                via,
                Method::DELETE,
                &format!("/cluster/members/{alive}"),
                None,
            )
            .unwrap();
        assert_eq!(code, 409, "via {via}: {resp}");
        assert_eq!(resp["error_code"], "would_lose_quorum", "{resp}");
        assert!(
            resp["message"]
                .as_str()
                .unwrap()
                .contains("2 voters of which 1 are live"),
            "{resp}"
        );
    }
    // the cluster still writes, and the dead member may go
    create(&c, alive, "still-writing");
    let (code, resp) = c
        .send(
            leader,
            Method::DELETE,
            &format!("/cluster/members/{dead}"),
            None,
        )
        .unwrap();
    assert_eq!(code, 204, "{resp}");
    create(&c, leader, "after-removal");
    let both = c.wait_until(SETTLE, |c| {
        (pipelines(c, alive) == ["after-removal", "still-writing"]).then_some(())
    });
    assert!(both.is_some(), "{:?}", pipelines(&c, alive));
}
