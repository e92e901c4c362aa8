//! No secret comes back from the API or lands in a log. A pipeline is created with a source
//! password and Kafka credentials in `producer_overrides` (the SASL password; the
//! other credential properties need a librdkafka built with TLS or OIDC, and the unit tests of
//! the redaction cover them) on a cluster whose mutations need a token; it runs (its producer tries to
//! authenticate against the real broker, which speaks plaintext only, so librdkafka fails and
//! complains in the logs). Then every GET endpoint the OpenAPI document lists, on every
//! worker, with and without the token, the answers of create and update, `/metrics`, and every
//! worker's whole log are searched for each secret. Before the fix the SASL password came back
//! in the `201` answer and in every `GET /pipelines/{name}`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use capstan_tests::{kafka, mysql, unique_name};
use mysql_async::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(30);
const TOKEN: &str = "api-t0ken-under-test";
const SASL_PASSWORD: &str = "sasl-pw-under-test";

fn request(
    c: &Cluster,
    id: u64,
    method: Method,
    path: &str,
    body: Option<&Value>,
    token: bool,
) -> (u16, String) {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut req = http.request(method, format!("{}{path}", c.workers[&id].api()));
    if let Some(b) = body {
        req = req.json(b);
    }
    if token {
        req = req.bearer_auth(TOKEN);
    }
    let r = req.send().expect("api reachable");
    (r.status().as_u16(), r.text().unwrap_or_default())
}

fn assert_no_secret(what: &str, text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!text.contains(s), "{what} shows a secret: {text}");
    }
}

#[test]
fn no_secret_comes_back_from_any_endpoint_or_log() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let schema = unique_name("secrets");
    rt.block_on(async {
        db.admin_conn()
            .await
            .query_drop(format!(
                "CREATE DATABASE `{schema}`; CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"
            ))
            .await
            .unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("api-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let line = format!("api_token_file = \"{}\"\n", token_file.display());
    let Some(c) = Cluster::start_with(3, |_| line.clone()) else {
        return;
    };
    let secrets = [db.password.as_str(), TOKEN, SASL_PASSWORD];
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let definition = json!({
        "name": "secretive",
        "source": {
            "host": db.host, "port": db.port, "user": db.user, "password": db.password,
            "tls": {"mode": "verify_none"}, "server_id": 7600 + (std::process::id() % 300),
            "flavor": "mysql"
        },
        "tables": {"include": [format!("{schema}.t")]},
        "kafka": {
            "bootstrap_servers": bootstrap, "topic_prefix": unique_name("secrets"),
            "producer_overrides": {
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "svc",
                "sasl.password": SASL_PASSWORD
            }
        },
        "start_position": "current"
    });
    let (s, text) = request(
        &c,
        leader,
        Method::POST,
        "/pipelines",
        Some(&definition),
        true,
    );
    assert_eq!(s, 201, "{text}");
    assert_no_secret("POST /pipelines", &text, &secrets);
    let created: Value = serde_json::from_str(&text).unwrap();
    let overrides = &created["config"]["kafka"]["producer_overrides"];
    assert_eq!(overrides["sasl.password"], "<redacted>");
    assert_eq!(
        overrides["sasl.username"], "svc",
        "a non-secret setting is shown"
    );
    assert_eq!(created["config"]["source"]["password"], "<redacted>");

    // the shown definition sent back keeps the stored secrets, and its answer shows none
    let (s, text) = request(
        &c,
        leader,
        Method::PUT,
        "/pipelines/secretive/config",
        Some(&created["config"]),
        true,
    );
    assert_eq!(s, 200, "{text}");
    assert_no_secret("PUT config", &text, &secrets);

    // let it run: the producer fails to authenticate and librdkafka logs why
    let (s, _) = request(
        &c,
        leader,
        Method::PUT,
        "/pipelines/secretive/resume",
        None,
        true,
    );
    assert_eq!(s, 202);
    c.wait_until(SETTLE, |c| {
        let st = c.pipeline_status(leader, "secretive")?;
        (st["state"] != "assigned" && st["state"] != "unassigned" && st["state"] != "paused")
            .then_some(())
    })
    .expect("the pipeline ran");
    rt.block_on(async {
        db.admin_conn()
            .await
            .query_drop(format!("INSERT INTO `{schema}`.t VALUES (1), (2)"))
            .await
            .unwrap();
    });
    std::thread::sleep(Duration::from_secs(5));

    // every GET path in the OpenAPI document, on every worker, with and without the token
    let (s, text) = request(&c, leader, Method::GET, "/openapi.json", None, false);
    assert_eq!(s, 200);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    let mut fetched = 0;
    for (path, ops) in paths {
        if ops.get("get").is_none() {
            continue;
        }
        let concrete = path.replace("{name}", "secretive").replace("{id}", "1");
        for id in [1, 2, 3] {
            for token in [false, true] {
                let (s, text) = request(&c, id, Method::GET, &concrete, None, token);
                assert!(s < 500, "GET {concrete} on {id}: {s} {text}");
                assert_no_secret(&format!("GET {concrete} on worker {id}"), &text, &secrets);
                fetched += 1;
            }
        }
    }
    for path in ["/pipelines/{name}", "/pipelines/{name}/config", "/metrics"] {
        assert!(
            paths.contains_key(path),
            "{path} is documented and fetched above"
        );
    }
    assert!(fetched >= 6 * 8, "fetched {fetched} answers");

    // and no worker logged one
    for id in [1, 2, 3] {
        assert_no_secret(&format!("the log of worker {id}"), &c.log(id), &secrets);
    }
    assert!(
        c.logged("start position resolved") >= 1,
        "the pipeline really ran on some worker"
    );
}
