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

/// Every file under `dir`, as bytes (a worker's RocksDB: its write-ahead log, tables and
/// manifest, where every Raft entry lands).
fn raw_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(raw_files(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
    out
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// With references (`${env:…}`, `password_file`) no secret crosses the API or enters Raft: the
/// owner resolves them and streams (so the password it read was right), the API shows the
/// references, and no answer, metric, log line or byte of any worker's RocksDB holds the
/// password, while the reference itself is found there (the search can see definitions). A
/// reference no worker can resolve is retried, visibly, naming the field and the variable.
#[test]
fn references_keep_secrets_out_of_the_api_raft_and_logs() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let bootstrap = kafka.bootstrap_servers().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let schema = unique_name("secretref");
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
    let pw_file = dir.path().join("source-password");
    std::fs::write(&pw_file, format!("{}\n", db.password)).unwrap();
    const VAR: &str = "CAPSTAN_TEST_SOURCE_PW";
    let Some(c) = Cluster::start_with_env(
        3,
        |_| String::new(),
        vec![(VAR.to_string(), db.password.clone())],
    ) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let definition = |name: &str, source: Value| {
        let mut src = json!({
            "host": db.host, "port": db.port, "user": db.user,
            "tls": {"mode": "verify_none"}, "server_id": 7000 + (std::process::id() % 300),
            "flavor": "mysql"
        });
        for (k, v) in source.as_object().unwrap() {
            src[k] = v.clone();
        }
        json!({
            "name": name, "source": src,
            "tables": {"include": [format!("{schema}.t")]},
            "kafka": {"bootstrap_servers": bootstrap, "topic_prefix": unique_name(name)},
            "start_position": "current"
        })
    };
    let reference = format!("${{env:{VAR}}}");
    let defs = [
        ("by-env", json!({"password": reference})),
        (
            "by-file",
            json!({"password_file": pw_file.display().to_string()}),
        ),
        (
            "unresolvable",
            json!({"password": "${env:CAPSTAN_TEST_NOWHERE_PW}"}),
        ),
    ];
    let secrets = [db.password.as_str()];
    for (i, (name, source)) in defs.iter().enumerate() {
        let mut def = definition(name, source.clone());
        def["source"]["server_id"] = json!(7000 + (std::process::id() % 300) * 3 + i as u32);
        let (s, text) = c
            .send(leader, Method::POST, "/pipelines", Some(&def))
            .unwrap();
        assert_eq!(s, 201, "{text}");
        assert_no_secret("POST /pipelines", &text.to_string(), &secrets);
        let (s, _) = c
            .send(
                leader,
                Method::PUT,
                &format!("/pipelines/{name}/resume"),
                None,
            )
            .unwrap();
        assert_eq!(s, 202);
    }
    // the owners resolved the references and streamed: their passwords were right
    for name in ["by-env", "by-file"] {
        c.wait_until(Duration::from_secs(60), |c| {
            let st = c.pipeline_status(leader, name)?;
            (st["state"] == "streaming").then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} never streamed: {:?}",
                c.pipeline_status(leader, name)
            )
        });
    }
    // the unresolvable one is retried, saying which field and which variable
    let st = c
        .wait_until(Duration::from_secs(30), |c| {
            let st = c.pipeline_status(leader, "unresolvable")?;
            (st["reason"] == "secret_unavailable").then_some(st)
        })
        .expect("the missing variable is reported");
    assert_eq!(st["state"], "retrying", "{st}");
    let detail = st["detail"].as_str().unwrap();
    assert!(
        detail.contains("source.password") && detail.contains("CAPSTAN_TEST_NOWHERE_PW"),
        "{detail}"
    );
    // the api shows the references, never the secret
    let (_, shown) = c.get(leader, "/pipelines/by-env/config").unwrap();
    assert_eq!(shown["source"]["password"], reference.as_str(), "{shown}");
    for id in [1, 2, 3] {
        for path in [
            "/pipelines/by-env",
            "/pipelines/by-env/config",
            "/pipelines/by-file/config",
            "/pipelines/by-env/status",
            "/pipelines/unresolvable/status",
            "/cluster",
            "/metrics",
        ] {
            let (status, text) = request(&c, id, Method::GET, path, None, false);
            assert_eq!(status, 200, "GET {path} on {id}: {text}");
            assert_no_secret(&format!("GET {path} on {id}"), &text, &secrets);
        }
        assert_no_secret(&format!("the log of worker {id}"), &c.log(id), &secrets);
    }
    // and no worker's raft store holds it, while the references are there to be found
    let mut reference_found = 0;
    for id in [1, 2, 3] {
        for (file, bytes) in raw_files(&c.data_dir(id)) {
            assert!(
                !holds(&bytes, &db.password),
                "{file} holds the source password"
            );
            if holds(&bytes, &reference) {
                reference_found += 1;
            }
        }
    }
    assert!(
        reference_found >= 3,
        "the search must see the stored definitions on every worker: {reference_found} files"
    );
}
