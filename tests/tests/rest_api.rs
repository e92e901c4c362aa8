//! The REST API and the `capstan` CLI against three real worker processes: bad input named by
//! field without echoing secrets, 404/409, config updates, restart, offsets, metrics, the
//! OpenAPI document and the bearer token. Pipelines point at an unreachable source: these
//! tests are about the control plane.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Output;
use std::time::Duration;

use capstan_tests::cluster::{capstan_binary, Cluster};
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(20);
const SECRET: &str = "hunter2-very-secret";

fn definition(name: &str) -> Value {
    json!({
        "name": name,
        "source": {
            "host": "127.0.0.1", "port": 1, "user": "nobody", "password": SECRET,
            "tls": {"mode": "disabled"}, "server_id": 4242, "flavor": "mysql",
            "max_reconnects": 1, "reconnect_backoff_ms": 100
        },
        "kafka": {"bootstrap_servers": "127.0.0.1:1", "topic_prefix": "t"}
    })
}

/// Sends a raw body (not necessarily JSON) with an optional bearer token.
fn raw(
    c: &Cluster,
    id: u64,
    method: Method,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> (u16, String) {
    let http = reqwest::blocking::Client::new();
    let mut req = http
        .request(method, format!("{}{path}", c.workers[&id].api()))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().expect("api reachable");
    (r.status().as_u16(), r.text().unwrap_or_default())
}

fn assert_bad_request(status: u16, text: &str, field_or_word: &str) {
    assert_eq!(status, 400, "{text}");
    assert!(!text.contains(SECRET), "the secret was echoed: {text}");
    let v: Value = serde_json::from_str(text).expect("json error body");
    assert!(v["error_code"].is_string(), "{text}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains(field_or_word) || v["field"] == field_or_word,
        "{field_or_word} not named: {text}"
    );
}

fn capstan(args: &[&str]) -> Output {
    let bin = capstan_binary().expect("capstan built");
    std::process::Command::new(bin)
        .args(args)
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .output()
        .expect("run capstan")
}

fn status(c: &Cluster, id: u64, name: &str) -> Value {
    let (code, v) = c.get(id, &format!("/pipelines/{name}/status")).unwrap();
    assert_eq!(code, 200, "{v}");
    v
}

#[test]
fn the_api_and_cli_on_three_workers() {
    let Some(c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let f = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();

    // bad input: malformed json, unknown keys, wrong types, missing fields
    let text = definition("bad").to_string();
    let (s, t) = raw(
        &c,
        f,
        Method::POST,
        "/pipelines",
        &text[..text.len() - 5],
        None,
    );
    assert_bad_request(s, &t, "json");
    let mut v = definition("bad");
    v["bogus_key"] = json!(1);
    let (s, t) = raw(&c, f, Method::POST, "/pipelines", &v.to_string(), None);
    assert_bad_request(s, &t, "bogus_key");
    let mut v = definition("bad");
    v["source"]["port"] = json!(SECRET);
    let (s, t) = raw(&c, f, Method::POST, "/pipelines", &v.to_string(), None);
    assert_bad_request(s, &t, "source.port");
    let mut v = definition("bad");
    v["source"]["password"] = json!(12345);
    let (s, t) = raw(&c, f, Method::POST, "/pipelines", &v.to_string(), None);
    assert_bad_request(s, &t, "source.password");
    let mut v = definition("bad");
    v.as_object_mut().unwrap().remove("kafka");
    let (s, t) = raw(&c, f, Method::POST, "/pipelines", &v.to_string(), None);
    assert_bad_request(s, &t, "kafka");
    let (s, t) = raw(&c, f, Method::POST, "/pipelines", "", None);
    assert_bad_request(s, &t, "empty");

    // 404s
    for path in [
        "/pipelines/nope",
        "/pipelines/nope/status",
        "/pipelines/nope/offsets",
    ] {
        let (code, v) = c.get(f, path).unwrap();
        assert_eq!(
            (code, v["error_code"].as_str()),
            (404, Some("unknown_pipeline")),
            "{path}"
        );
    }
    let (code, v) = c
        .send(
            f,
            Method::PUT,
            "/pipelines/nope/config",
            Some(&definition("nope")),
        )
        .unwrap();
    assert_eq!(code, 404, "{v}");

    // create on a follower (reaches the leader); a duplicate is a conflict
    let (code, v) = c
        .send(f, Method::POST, "/pipelines", Some(&definition("orders")))
        .unwrap();
    assert_eq!(code, 201, "{v}");
    assert!(!v.to_string().contains(SECRET), "{v}");
    let (code, v) = c
        .send(
            leader,
            Method::POST,
            "/pipelines",
            Some(&definition("orders")),
        )
        .unwrap();
    assert_eq!(
        (code, v["error_code"].as_str()),
        (409, Some("pipeline_exists")),
        "{v}"
    );

    // config: read (redacted), edit, put back; the stored password is kept
    let cfg = c
        .wait_until(SETTLE, |c| {
            c.get(f, "/pipelines/orders/config")
                .filter(|(s, _)| *s == 200)
                .map(|(_, v)| v)
        })
        .unwrap();
    assert_eq!(cfg["source"]["password"], "<redacted>");
    let mut edited = cfg.clone();
    edited["kafka"]["topic_prefix"] = json!("shop");
    let (code, v) = c
        .send(f, Method::PUT, "/pipelines/orders/config", Some(&edited))
        .unwrap();
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["config"]["kafka"]["topic_prefix"], "shop");
    let mut renamed = edited.clone();
    renamed["name"] = json!("other");
    let (s, t) = raw(
        &c,
        f,
        Method::PUT,
        "/pipelines/orders/config",
        &renamed.to_string(),
        None,
    );
    assert_bad_request(s, &t, "name");
    let mut wrong = edited.clone();
    wrong["source"]["port"] = json!(SECRET);
    let (s, t) = raw(
        &c,
        f,
        Method::PUT,
        "/pipelines/orders/config",
        &wrong.to_string(),
        None,
    );
    assert_bad_request(s, &t, "source.port");
    let updated = c.wait_until(SETTLE, |c| {
        let (_, v) = c.get(leader, "/pipelines/orders/config")?;
        (v["kafka"]["topic_prefix"] == "shop").then_some(())
    });
    assert!(updated.is_some(), "the update replicated");

    // offsets: refused while running, restart bumps the epoch, reset once stopped
    let (code, _) = c
        .send(f, Method::PUT, "/pipelines/orders/resume", None)
        .unwrap();
    assert_eq!(code, 202);
    let (code, v) = c
        .send(f, Method::DELETE, "/pipelines/orders/offsets", None)
        .unwrap();
    assert_eq!(
        (code, v["error_code"].as_str()),
        (409, Some("pipeline_not_stopped")),
        "{v}"
    );
    let (owner, epoch) = c
        .wait_until(SETTLE, |c| {
            let s = status(c, leader, "orders");
            Some((s["owner"].as_u64()?, s["epoch"].as_u64()?))
        })
        .expect("an owner is assigned");
    let (code, v) = c
        .send(f, Method::POST, "/pipelines/orders/restart", None)
        .unwrap();
    assert_eq!(code, 202, "{v}");
    assert_eq!(v["owner"].as_u64(), Some(owner), "{v}");
    assert!(v["epoch"].as_u64().unwrap() > epoch, "{v}");
    let bumped = c.wait_until(SETTLE, |c| {
        let s = status(c, leader, "orders");
        (s["epoch"].as_u64()? > epoch && s["owner"].as_u64() == Some(owner)).then_some(())
    });
    assert!(
        bumped.is_some(),
        "restart bumped the epoch on the same owner"
    );
    let (code, v) = c.get(f, "/pipelines/orders/offsets").unwrap();
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["name"], "orders");
    assert!(v["snapshot"].is_array(), "{v}");
    let (code, _) = c
        .send(f, Method::PUT, "/pipelines/orders/stop", None)
        .unwrap();
    assert_eq!(code, 202);
    let reset = c.wait_until(SETTLE, |c| {
        let (code, _) = c.send(f, Method::DELETE, "/pipelines/orders/offsets", None)?;
        (code == 204).then_some(())
    });
    assert!(reset.is_some(), "offsets reset once stopped");
    let (_, v) = c.get(leader, "/pipelines/orders/status").unwrap();
    assert_eq!(v["owner"], Value::Null, "a reset revokes the owner: {v}");

    // metrics parse as Prometheus (OpenMetrics) text
    let http = reqwest::blocking::Client::new();
    let r = http
        .get(format!("{}/metrics", c.workers[&f].api()))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let ctype = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    let text = r.text().unwrap();
    assert_prometheus_text(&text);
    for series in [
        "capstan_raft_term ",
        "capstan_raft_leader ",
        "capstan_raft_last_applied_index ",
        "capstan_pipelines{state=\"unassigned\"}",
        "capstan_pipeline_epoch{pipeline=\"orders\"}",
        "capstan_pipeline_config_generation{pipeline=\"orders\"} 2",
        "capstan_pipeline_checkpoint_present{pipeline=\"orders\"} 0",
        "capstan_raft_is_leader ",
        "capstan_node_lease_valid ",
        "capstan_pipelines_desired{desired_state=\"stopped\"}",
        &format!(
            "capstan_build_info{{version=\"{}\"",
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(text.contains(series), "{series} missing:\n{text}");
    }
    // Prometheus's naming: every counter's samples end in `_total`, no gauge's does
    let kinds: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split_once(' '))
        .collect();
    for (family, kind) in &kinds {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(['{', ' ']).next().unwrap_or(""));
        for sample in samples
            .filter(|s| *s == *family || s.strip_prefix(family).is_some_and(|r| r == "_total"))
        {
            match *kind {
                "counter" => assert_eq!(sample, format!("{family}_total")),
                _ => assert!(!sample.ends_with("_total"), "gauge {sample}"),
            }
        }
    }
    // (a family without a series, e.g. no halt yet, is not written at all)
    assert!(kinds.contains(&("capstan_build_info", "gauge")), "{text}");

    // the OpenAPI document lists the paths
    let (code, doc) = c.get(f, "/openapi.json").unwrap();
    assert_eq!(code, 200);
    let paths = doc["paths"].as_object().expect("paths");
    for p in [
        "/pipelines",
        "/pipelines/{name}/config",
        "/pipelines/{name}/restart",
        "/pipelines/{name}/offsets",
        "/metrics",
        "/cluster",
    ] {
        assert!(paths.contains_key(p), "{p} not in the openapi document");
    }

    // the CLI against a follower
    let url = c.workers[&f].api();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.json");
    std::fs::write(&file, definition("from-cli").to_string()).unwrap();
    let out = capstan(&[
        "pipeline",
        "create",
        "-f",
        file.to_str().unwrap(),
        "--url",
        &url,
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("created pipeline from-cli"));
    let listed = c.wait_until(SETTLE, |_| {
        let out = capstan(&["pipeline", "list", "--url", &url]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out.status.success() && text.lines().any(|l| l == "from-cli") && text.contains("orders"))
            .then_some(text)
    });
    assert!(listed.is_some(), "capstan pipeline list shows both");
    let out = capstan(&["pipeline", "list", "--json", "--url", &url]);
    let names: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(names.contains(&"from-cli".to_string()));
    for verb in ["resume", "pause", "restart", "stop"] {
        let out = capstan(&["pipeline", verb, "from-cli", "--url", &url]);
        assert!(out.status.success(), "{verb}: {out:?}");
    }
    let out = capstan(&["pipeline", "status", "from-cli", "--url", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pipeline:      from-cli"), "{text}");
    let out = capstan(&["cluster", "status", "--url", &url]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("leader"), "{text}");
    let out = capstan(&["pipeline", "status", "missing", "--url", &url]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown_pipeline: no pipeline named"), "{err}");
    let out = capstan(&["pipeline", "delete", "from-cli", "--url", &url]);
    assert!(out.status.success(), "{out:?}");
}

/// Every line is a comment (`# HELP`, `# TYPE`, `# UNIT`, `# EOF`) or `name{labels} value`.
fn assert_prometheus_text(text: &str) {
    assert!(text.ends_with("# EOF\n"), "no # EOF terminator");
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split(' ').next().unwrap();
            assert!(["HELP", "TYPE", "UNIT", "EOF"].contains(&kind), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':'),
            "bad metric name: {line}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "unterminated labels: {line}");
        }
        assert!(value.parse::<f64>().is_ok(), "bad value: {line}");
    }
}

#[test]
fn a_token_guards_mutations_across_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("api-token");
    std::fs::write(&token_file, "t0ken-for-tests\n").unwrap();
    let line = format!("api_token_file = \"{}\"\n", token_file.display());
    let Some(c) = Cluster::start_with(3, |_| line.clone()) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let f = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();
    let body = definition("guarded").to_string();
    for token in [None, Some("wrong")] {
        let (s, t) = raw(&c, f, Method::POST, "/pipelines", &body, token);
        assert_eq!(s, 401, "{t}");
        assert!(
            t.contains("\"unauthorized\"") && !t.contains("t0ken-for-tests"),
            "{t}"
        );
    }
    let (s, t) = raw(
        &c,
        f,
        Method::POST,
        "/pipelines",
        &body,
        Some("t0ken-for-tests"),
    );
    assert_eq!(s, 201, "{t}");
    let (s, _) = raw(&c, f, Method::PUT, "/pipelines/guarded/pause", "", None);
    assert_eq!(s, 401);
    // reads stay open
    let (code, v) = c.get(f, "/pipelines").unwrap();
    assert_eq!(code, 200, "{v}");
    // the CLI presents the token from a file or CAPSTAN_TOKEN
    let url = c.workers[&f].api();
    let out = capstan(&["pipeline", "stop", "guarded", "--url", &url]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unauthorized: "),
        "{out:?}"
    );
    let out = capstan(&[
        "pipeline",
        "stop",
        "guarded",
        "--url",
        &url,
        "--token-file",
        token_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let bin = capstan_binary().unwrap();
    let out = std::process::Command::new(bin)
        .args(["pipeline", "delete", "guarded"])
        .env("CAPSTAN_URL", &url)
        .env("CAPSTAN_TOKEN", "t0ken-for-tests")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // no worker logged the token
    for id in [1, 2, 3] {
        assert!(!c.log_tail(id).contains("t0ken-for-tests"));
    }
}

/// `CAPSTAN_LOG_FORMAT=json` makes every log line a JSON object with the event's fields at
/// the top level; a value other than `text` or `json` stops the worker at start, naming the
/// variable.
#[test]
fn json_logs_on_request_and_a_bad_format_refused() {
    let Some(bin) = capstan_binary() else { return };
    let out = std::process::Command::new(bin)
        .args(["worker", "--config", "/nonexistent/worker.toml"])
        .env("CAPSTAN_LOG_FORMAT", "xml")
        .output()
        .expect("run capstan");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("CAPSTAN_LOG_FORMAT must be `text` or `json`, not \"xml\""),
        "{err}"
    );

    let env = vec![("CAPSTAN_LOG_FORMAT".to_string(), "json".to_string())];
    let Some(c) = Cluster::start_with_env(1, |_| String::new(), env) else {
        return;
    };
    c.wait_for_leader(&[1], SETTLE).expect("leader");
    let log = c.log(1);
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no log lines");
    for line in &lines {
        let v: Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["message"].is_string(), "{line}");
        assert!(v["timestamp"].is_string(), "{line}");
    }
    let listening = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["message"] == "rest api listening")
        .unwrap_or_else(|| panic!("no `rest api listening` line:\n{log}"));
    assert_eq!(listening["level"], "INFO", "{listening}");
    assert_eq!(
        listening["api"],
        format!("127.0.0.1:{}", c.workers[&1].api_port),
        "the fields are at the top level: {listening}"
    );
}
