//! Bad sources are loud and value-free: a wrong password is a definite fault (`failed`, sticky
//! until the definition changes), an unreachable server a transient one (`retrying`: started
//! again by itself with backoff, the reason and detail naming the connection failure).
//! Nothing crashes, no secret is echoed, and a corrected definition brings the pipeline back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::mysql;
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(40);
const WRONG: &str = "wrong-pw-5150";

#[test]
fn wrong_password_and_unreachable_source_fail_closed_without_echoing_secrets() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = capstan_tests::kafka() else {
        return;
    };
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let definition = |name: &str, port: u16, password: &str| {
        json!({
            "name": name,
            "source": {
                "host": db.host, "port": port, "user": db.user, "password": password,
                "tls": {"mode": "verify_none"}, "server_id": 8100 + (std::process::id() % 500),
                "flavor": "mysql", "max_reconnects": 1, "reconnect_backoff_ms": 100
            },
            "kafka": {"bootstrap_servers": kafka.bootstrap_servers(), "topic_prefix": "bad"},
            "start_position": "current"
        })
    };
    let (s, b) = c
        .send(
            leader,
            Method::POST,
            "/pipelines",
            Some(&definition("badpw", db.port, WRONG)),
        )
        .unwrap();
    assert_eq!(s, 201, "{b}");
    assert!(!b.to_string().contains(WRONG));
    let mut unreachable = definition("nowhere", 1, "irrelevant-pw");
    unreachable["source"]["server_id"] = json!(8700 + (std::process::id() % 500));
    let (s, b) = c
        .send(leader, Method::POST, "/pipelines", Some(&unreachable))
        .unwrap();
    assert_eq!(s, 201, "{b}");
    for name in ["badpw", "nowhere"] {
        c.send(
            leader,
            Method::PUT,
            &format!("/pipelines/{name}/resume"),
            None,
        )
        .unwrap();
    }

    let in_state = |c: &Cluster, name: &str, state: &str| {
        c.wait_until(SETTLE, |c| {
            let v = c.pipeline_status(leader, name)?;
            (v["state"] == state).then_some(v)
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} never {state}: {:?}",
                c.pipeline_status(leader, name)
            )
        })
    };
    let bad_pw = in_state(&c, "badpw", "failed");
    let reason = bad_pw["reason"].as_str().unwrap();
    eprintln!("wrong password -> {reason}");
    assert!(!reason.is_empty() && !reason.contains(WRONG));
    assert_eq!(bad_pw["detail"], "source: authentication failed");
    let nowhere = in_state(&c, "nowhere", "retrying");
    let reason_nowhere = nowhere["reason"].as_str().unwrap();
    let detail_nowhere = nowhere["detail"].as_str().unwrap();
    eprintln!("unreachable -> {reason_nowhere}: {detail_nowhere}");
    assert_ne!(reason, reason_nowhere, "distinct reasons");
    assert!(detail_nowhere.starts_with("source: "), "{detail_nowhere}");
    assert!(!detail_nowhere.contains("irrelevant-pw"));
    // it keeps trying by itself: later attempts are logged by the owner
    let owner = nowhere["owner"].as_u64().unwrap();
    let tries = c.wait_until(SETTLE, |c| {
        let n = c
            .log(owner)
            .matches("pipeline retries after a backoff")
            .count();
        (n >= 2).then_some(n)
    });
    assert!(tries.is_some(), "the unreachable source was not retried");

    // nothing crashed, and no secret reached any response or log
    for id in [1, 2, 3] {
        assert!(
            c.workers.get_mut(&id).unwrap().is_running(),
            "worker {id} alive"
        );
        assert!(
            !c.log(id).contains(WRONG),
            "worker {id} logged the password"
        );
        let (_, config) = c.get(id, "/pipelines/badpw/config").unwrap();
        assert!(!config.to_string().contains(WRONG));
    }

    // a failure is sticky until restarted, also across a move: the halt is kept in Raft, so
    // the next owner does not run the pipeline again
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        c.pipeline_status(leader, "badpw").unwrap()["state"],
        "failed"
    );
    let victim = bad_pw["owner"].as_u64().unwrap();
    let old_epoch = bad_pw["epoch"].as_u64().unwrap();
    c.kill9(victim);
    assert!(
        !c.workers.get_mut(&victim).unwrap().is_running(),
        "owner really died"
    );
    let via = [1, 2, 3].into_iter().find(|&n| n != victim).unwrap();
    let moved = c
        .wait_until(SETTLE, |c| {
            let v = c.pipeline_status(via, "badpw")?;
            (v["epoch"].as_u64()? > old_epoch && v["owner"].as_u64()? != victim).then_some(v)
        })
        .unwrap_or_else(|| panic!("badpw never moved: {:?}", c.pipeline_status(via, "badpw")));
    std::thread::sleep(Duration::from_secs(2));
    let after = c.pipeline_status(via, "badpw").unwrap();
    assert_eq!(after["state"], "failed", "{after}");
    assert_eq!(after["reason"], bad_pw["reason"], "{after}");
    let new_owner = moved["owner"].as_u64().unwrap();
    let started = format!(
        "starting runner pipeline=badpw epoch={}",
        moved["epoch"].as_u64().unwrap()
    );
    assert!(
        !c.log(new_owner).contains(&started),
        "the new owner ran the halted pipeline again"
    );
    c.spawn(victim);
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let (s, b) = c
        .send(
            leader,
            Method::PUT,
            "/pipelines/badpw/config",
            Some(&definition("badpw", db.port, &db.password)),
        )
        .unwrap();
    assert!(s == 200 || s == 202, "{s} {b}");
    let streaming = c.wait_until(SETTLE, |c| {
        let v = c.pipeline_status(leader, "badpw")?;
        (v["state"] == "streaming").then_some(())
    });
    assert!(
        streaming.is_some(),
        "corrected pipeline: {:?}",
        c.pipeline_status(leader, "badpw")
    );
}
