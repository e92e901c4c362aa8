//! Raft at a large state, with real `capstan worker` processes: a follower that fell behind the
//! kept log and a member added later both catch up from a snapshot of over 20 MB sent in
//! chunks over the HTTP transport, and a command too large for one Raft entry is refused with a
//! clear error while the log goes on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(20);
const CATCH_UP: Duration = Duration::from_secs(90);
const PIPELINES: usize = 200;
const TABLES_PER_PIPELINE: usize = 2_500;

/// A valid, stopped pipeline whose definition lists `tables` long table names (about 43 bytes
/// of json each); its source and Kafka do not exist, as nothing runs here.
fn definition(name: &str, tables: usize) -> Value {
    let include: Vec<String> = (0..tables)
        .map(|i| format!("warehouse_{:03}.inventory_movement_{i:06}", i % 97))
        .collect();
    let mut d = capstan_tests::cluster::idle_definition(name);
    d["tables"] = json!({ "include": include });
    d
}

fn pipeline_count(c: &Cluster, id: u64) -> usize {
    c.get(id, "/pipelines")
        .and_then(|(s, v)| (s == 200).then_some(v))
        .and_then(|v| v.as_array().map(Vec::len))
        .unwrap_or(0)
}

fn raft_index(c: &Cluster, id: u64, field: &str) -> Option<u64> {
    c.get(id, "/cluster").and_then(|(_, v)| v[field].as_u64())
}

#[test]
fn a_lagging_follower_and_a_new_member_catch_up_from_a_20_mb_state() {
    // snapshots every 100 entries, 10 kept: the follower below falls behind the kept log.
    // Raft timings for a shared test disk: three workers write 100 MB of log and 20 MB
    // snapshots on it, where one fsync took over a second, and openraft gives an append one
    // heartbeat interval (operations.md, "Raft timings and a slow disk")
    const CONFIG: &str = "raft_snapshot_logs = 100\nraft_logs_kept = 10\n\
        heartbeat_interval_ms = 500\nelection_timeout_min_ms = 2000\n\
        election_timeout_max_ms = 3000\nlease_ms = 12000\n";
    let Some(mut c) = Cluster::start_with(3, |_| CONFIG.to_string()) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let had = raft_index(&c, follower, "last_applied").expect("follower applied");
    c.kill9(follower);

    let mut state_bytes = 0;
    for i in 0..PIPELINES {
        let d = definition(&format!("wide-{i:03}"), TABLES_PER_PIPELINE);
        state_bytes += d.to_string().len();
        let (code, body) = c
            .send(leader, Method::POST, "/pipelines", Some(&d))
            .expect("api reachable");
        assert_eq!(
            code,
            201,
            "create wide-{i:03}: {body}; leader's log:\n{}",
            c.log_tail(leader)
        );
    }
    assert!(
        state_bytes > 20_000_000,
        "{state_bytes} bytes of definitions"
    );

    // the leader's log no longer holds what the follower lacks: only a snapshot can help it
    let purged = c.wait_until(SETTLE, |c| {
        raft_index(c, leader, "purged_index").filter(|&p| p > had)
    });
    assert!(purged.is_some(), "leader purged past {had}");

    c.spawn(follower);
    let caught_up = c.wait_until(CATCH_UP, |c| {
        (pipeline_count(c, follower) == PIPELINES).then_some(())
    });
    assert!(
        caught_up.is_some(),
        "restarted follower {follower} sees {} pipelines; log:\n{}",
        pipeline_count(&c, follower),
        c.log_tail(follower)
    );
    let installed = raft_index(&c, follower, "snapshot_index").unwrap_or(0);
    assert!(
        installed > had,
        "follower's snapshot covers {installed}, had {had}"
    );

    // a member added now is sent the same state
    let joiner = c.spawn_joiner_with(4, CONFIG);
    let body = json!({
        "id": 4,
        "raft_addr": format!("127.0.0.1:{}", joiner.raft_port),
        "api_addr": format!("127.0.0.1:{}", joiner.api_port),
    });
    // the worker waits up to 20 s for the member to catch up before making it a voter
    let (code, resp) = c
        .send_within(
            Duration::from_secs(30),
            leader,
            Method::POST,
            "/cluster/members",
            Some(&body),
        )
        .expect("the leader answers the membership change");
    assert_eq!(code, 201, "{resp}");
    let joined = c.wait_until(CATCH_UP, |c| {
        (pipeline_count(c, 4) == PIPELINES).then_some(())
    });
    assert!(
        joined.is_some(),
        "new member sees {} pipelines; log:\n{}",
        pipeline_count(&c, 4),
        c.log_tail(4)
    );

    // a definition over the 1 MiB entry limit (but under the API's 2 MiB body limit) is
    // refused before it reaches the log, naming both sizes
    let huge = definition("too-wide", 30_000);
    let huge_bytes = huge.to_string().len();
    assert!((1 << 20..2 << 20).contains(&huge_bytes), "{huge_bytes}");
    let (code, resp) = c
        .send(follower, Method::POST, "/pipelines", Some(&huge))
        .unwrap();
    assert_eq!(code, 413, "{resp}");
    assert_eq!(resp["error_code"], "command_too_large", "{resp}");
    let message = resp["message"].as_str().unwrap();
    assert!(
        message.contains("create_pipeline") && message.contains("1048576 bytes"),
        "{message}"
    );
    // and the log goes on: a write through each node reaches every node
    for (i, via) in [1, 2, 3, 4].into_iter().enumerate() {
        let (code, resp) = c
            .send(
                via,
                Method::POST,
                "/pipelines",
                Some(&definition(&format!("after-{i}"), 3)),
            )
            .unwrap();
        assert_eq!(code, 201, "via {via}: {resp}");
    }
    for id in [1, 2, 3, 4] {
        let all = c.wait_until(SETTLE, |c| {
            (pipeline_count(c, id) == PIPELINES + 4).then_some(())
        });
        assert!(all.is_some(), "node {id} sees {}", pipeline_count(&c, id));
    }
}
