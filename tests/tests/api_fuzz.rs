//! schemathesis (PyPI, pinned in deploy/dev/schemathesis.sh) against `/openapi.json` of a real
//! 3-worker cluster with an API token: generated valid and invalid requests to every operation
//! find no 5xx, no status code the document does not list, no body or content type that does
//! not match it, no valid request refused, no invalid one accepted, no mutating request let
//! through without the token, and kill no worker.
//!
//! The requests go to a follower when worker 1 is one, so that forwarding to the leader is
//! fuzzed too. The pipelines `fuzz` and `fuzz-delete` exist so that half of the requests to
//! /pipelines/{name}/... reach the handlers past the 404 (deploy/dev/schemathesis.toml); the
//! hooks in deploy/dev/schemathesis_hooks.py keep generated member addresses on loopback and
//! keep the fuzzer from removing members, so the cluster stays whole for the whole run.
//!
//! The run is bounded by a fixed seed and a cap of examples per operation (about 25 s here on
//! two cores with a debug build), and killed after a hard limit. schemathesis is installed
//! into a venv in the cache on the first run; with CI=true one that cannot be installed is a
//! failure, not a skip.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use serde_json::Value;

const SETTLE: Duration = Duration::from_secs(20);
/// The token every worker is configured with, and schemathesis presents.
const TOKEN: &str = "api-fuzz-token";
/// A fixed seed: a failure reproduces with the same command line.
const SEED: &str = "17";
/// Generated cases per operation (and phase).
const MAX_EXAMPLES: &str = "100";
/// After this, schemathesis is killed and the test fails.
const HARD_LIMIT: Duration = Duration::from_secs(170);
/// The exit code of deploy/dev/schemathesis.sh when schemathesis could not be installed.
const NOT_INSTALLED: i32 = 75;

fn script() -> PathBuf {
    capstan_tests::manifest_dir().join("../deploy/dev/schemathesis.sh")
}

/// Installs schemathesis (idempotent); `None` after a skip, a panic under CI.
fn schemathesis_installed() -> Option<()> {
    let out = Command::new(script())
        .arg("install")
        .output()
        .expect("run deploy/dev/schemathesis.sh install");
    if out.status.success() {
        return Some(());
    }
    capstan_tests::skip_or_fail(&format!(
        "schemathesis could not be installed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    ))
}

fn definition(name: &str) -> Value {
    capstan_tests::cluster::idle_definition(name)
}

fn create(api: &str, name: &str) {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    let r = http
        .post(format!("{api}/pipelines"))
        .bearer_auth(TOKEN)
        .json(&definition(name))
        .send()
        .expect("api reachable");
    let status = r.status().as_u16();
    let body = r.text().unwrap_or_default();
    assert_eq!(status, 201, "create {name}: {body}");
}

#[test]
fn openapi_fuzzing_finds_no_server_error_or_undocumented_status() {
    if schemathesis_installed().is_none() {
        return;
    }
    let secrets = tempfile::tempdir().expect("tempdir");
    let token_file = secrets.path().join("api-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write the token file");
    let Some(mut c) = Cluster::start_with(3, |_| {
        format!("api_token_file = \"{}\"\n", token_file.display())
    }) else {
        return;
    };
    let leader = c
        .wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    let target = if leader == 1 { 2 } else { 1 };
    let api = c.workers[&target].api();
    create(&api, "fuzz");
    create(&api, "fuzz-delete");

    // schemathesis' own files (.hypothesis, .schemathesis) go here, not into the checkout
    let work = tempfile::tempdir().expect("tempdir");
    let output = work.path().join("schemathesis.log");
    let log = std::fs::File::create(&output).expect("output file");
    let started = Instant::now();
    let mut child = Command::new(script())
        .arg(&api)
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--seed", SEED, "--max-examples", MAX_EXAMPLES])
        .args(["--workers", "1"])
        // a request left unanswered this long is a failure (no handler waits more than 30 s)
        .args(["--request-timeout", "40"])
        .args(["--generation-database", "none", "--no-color"])
        .current_dir(work.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("output file"))
        .stderr(log)
        .spawn()
        .expect("run deploy/dev/schemathesis.sh");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for schemathesis") {
            break Some(status);
        }
        if started.elapsed() > HARD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let took = started.elapsed();
    let text = std::fs::read_to_string(&output).unwrap_or_default();
    let Some(status) = status else {
        panic!("schemathesis still ran after {HARD_LIMIT:?}; its output:\n{text}");
    };
    if status.code() == Some(NOT_INSTALLED) {
        // the venv went away between the install above and the run
        capstan_tests::skip_or_fail::<()>(&format!("schemathesis not installed:\n{text}"));
        return;
    }
    assert!(
        status.success(),
        "schemathesis found failures ({status}, after {took:?}) fuzzing worker {target} \
         (leader {leader}); its output:\n{text}\n--- worker {target} log ---\n{}",
        c.log_tail(target)
    );
    eprintln!(
        "schemathesis: no failure in {took:?} fuzzing worker {target}\n{}",
        summary(&text)
    );

    // no request killed a worker (a Raft core that dies takes its process down), and the
    // cluster is still whole
    for id in [1, 2, 3] {
        assert!(
            c.workers.get_mut(&id).expect("worker").is_running(),
            "worker {id} exited during the fuzzing; its log:\n{}",
            c.log_tail(id)
        );
    }
    assert!(
        c.wait_for_leader(&[1, 2, 3], SETTLE).is_some(),
        "no leader after the fuzzing; worker {target} log:\n{}",
        c.log_tail(target)
    );
    let (code, cluster) = c.get(target, "/cluster").expect("api reachable");
    assert_eq!(code, 200);
    let members = cluster["members"].as_array().map_or(0, Vec::len);
    assert_eq!(members, 3, "the fuzzing changed the membership: {cluster}");
}

/// schemathesis' closing summary (from its "SUMMARY" heading on), for the test's output.
fn summary(text: &str) -> &str {
    text.find("SUMMARY").map_or(text, |i| &text[i..])
}
