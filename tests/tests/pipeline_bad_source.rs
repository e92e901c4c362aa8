//! Bad sources fail closed and loudly: a wrong password and an unreachable server put the
//! pipeline in `failed` with a value-free reason, nothing crashes, no secret is echoed, and a
//! corrected definition brings the pipeline back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_kafka::dev_cluster::DevCluster;
use capstan_tests::cluster::Cluster;
use capstan_tests::mysql;
use reqwest::Method;
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(40);
const WRONG: &str = "wrong-pw-5150";

#[test]
fn wrong_password_and_unreachable_source_fail_closed_without_echoing_secrets() {
    let Some(db) = mysql() else { return };
    let kafka = DevCluster::start(1).unwrap();
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

    let failed = |c: &Cluster, name: &str| {
        c.wait_until(SETTLE, |c| {
            let v = c.pipeline_status(leader, name)?;
            (v["state"] == "failed").then_some(v)
        })
        .unwrap_or_else(|| panic!("{name} never failed: {:?}", c.pipeline_status(leader, name)))
    };
    let bad_pw = failed(&c, "badpw");
    let reason = bad_pw["reason"].as_str().unwrap();
    eprintln!("wrong password -> {reason}");
    assert!(!reason.is_empty() && !reason.contains(WRONG));
    let nowhere = failed(&c, "nowhere");
    let reason_nowhere = nowhere["reason"].as_str().unwrap();
    eprintln!("unreachable -> {reason_nowhere}");
    assert_ne!(reason, reason_nowhere, "distinct reasons");

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

    // a failure is sticky until restarted; a corrected definition brings it back
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        c.pipeline_status(leader, "badpw").unwrap()["state"],
        "failed"
    );
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
