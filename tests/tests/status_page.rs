//! The status page (`GET /`) in a real browser: Debian's chromium, driven by playwright-core
//! through `tests/browser/status_page.mjs` (installed by `deploy/dev/browser-deps.sh`). On a
//! running 3-worker cluster the page renders the members and the leader, a pipeline halted on
//! a wrong password shows its reason, a pipeline streaming rows into Kafka shows its
//! throughput in its row and in the chart, and when the owner of another pipeline is killed
//! the page (served by a surviving worker) shows the new owner within seconds. A pipeline whose
//! initial snapshot is being read shows a progress bar for its table. Every check leaves
//! a screenshot in `$CARGO_TARGET_DIR/test-artifacts/status-page` (or `target/...`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::live_pipeline::LiveSchema;
use reqwest::Method;
use serde_json::{json, Value};

const SETTLE: Duration = Duration::from_secs(40);
const WRONG: &str = "wrong-pw-7334";

fn browser_dir() -> PathBuf {
    capstan_tests::manifest_dir().join("browser")
}

/// The harness, its packages and the browser are there; a skip (a failure under CI) if not.
fn harness_ready() -> Option<()> {
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|o| o.status.success()) {
        return capstan_tests::skip_or_fail("node is not installed (deploy/dev/browser-deps.sh)");
    }
    if !browser_dir().join("node_modules/playwright-core").is_dir() {
        return capstan_tests::skip_or_fail(
            "tests/browser/node_modules is missing (deploy/dev/browser-deps.sh)",
        );
    }
    if !std::path::Path::new("/usr/bin/chromium").exists() {
        return capstan_tests::skip_or_fail(
            "/usr/bin/chromium is missing (deploy/dev/browser-deps.sh)",
        );
    }
    Some(())
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| capstan_tests::manifest_dir().join("../target"));
    let dir = target.join("test-artifacts/status-page");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

fn harness(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(browser_dir().join("status_page.mjs"))
        .arg(url)
        .arg(screenshots())
        .args(args)
        .stdin(Stdio::null());
    cmd
}

/// Runs one check of the harness; its report line.
fn check(url: &str, args: &[&str]) -> String {
    let Output {
        status,
        stdout,
        stderr,
    } = harness(url, args).output().expect("run the harness");
    let (out, err) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "{args:?} failed ({status}):\n{out}\n{err}"
    );
    print!("{out}");
    out.into_owned()
}

#[test]
fn the_page_shows_the_cluster_a_halt_and_a_failover() {
    if harness_ready().is_none() {
        return;
    }
    let Some(db) = capstan_tests::mysql() else {
        return;
    };
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let definition = |name: &str, port: u16, password: &str, server_id: u32| -> Value {
        json!({
            "name": name,
            "source": {
                "host": db.host, "port": port, "user": db.user, "password": password,
                "tls": {"mode": "verify_none"}, "server_id": server_id,
                "flavor": "mysql", "max_reconnects": 1, "reconnect_backoff_ms": 100
            },
            "kafka": {"bootstrap_servers": "127.0.0.1:1", "topic_prefix": "page"},
            "start_position": "current"
        })
    };
    let id = std::process::id() % 500;
    for d in [
        definition("badpw", db.port, WRONG, 9100 + id),
        definition("moving", 1, "irrelevant-pw", 9700 + id),
    ] {
        let name = d["name"].as_str().unwrap().to_string();
        let (s, b) = c
            .send(leader, Method::POST, "/pipelines", Some(&d))
            .unwrap();
        assert_eq!(s, 201, "{b}");
        c.send(
            leader,
            Method::PUT,
            &format!("/pipelines/{name}/resume"),
            None,
        )
        .unwrap();
    }
    let failed = c.wait_until(SETTLE, |c| {
        let v = c.pipeline_status(leader, "badpw")?;
        (v["state"] == "failed").then_some(v)
    });
    assert!(failed.is_some(), "{:?}", c.pipeline_status(leader, "badpw"));
    let (owner, _) = c
        .wait_until(SETTLE, |c| {
            c.pipeline_owner(leader, "moving").map(|(o, e, _)| (o, e))
        })
        .expect("moving has an owner");
    // the page is served by a worker that survives the owner's death
    let viewer = [1, 2, 3].into_iter().find(|&n| n != owner).unwrap();
    let url = c.workers[&viewer].api();

    check(&url, &["renders", "30"]);
    check(
        &url,
        &["halt-reason", "badpw", "authentication failed", "30"],
    );
    let page =
        std::fs::read_to_string(screenshots().join("halt-reason-badpw.log")).unwrap_or_default();
    assert!(!page.contains(WRONG), "the password reached the page's log");
    throughput_is_shown(&c, leader, &url, 9400 + id);

    // a failover: the harness watches the page, the owner dies, the page shows another owner
    let mut watcher = harness(&url, &["owner-changes", "moving", &owner.to_string(), "40"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the harness");
    let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("ready:"));
    assert!(ready.is_some(), "the harness never showed the page");
    let killed = Instant::now();
    c.kill9(owner);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = watcher.wait().expect("wait for the harness");
    let seen_after = killed.elapsed();
    let mut err = String::new();
    if let Some(mut e) = watcher.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(
        status.success(),
        "owner-changes failed ({status}):\n{rest:?}\n{err}"
    );
    println!("{rest:?}: the page showed the new owner {seen_after:?} after the kill");
    // the lease (2 s) and its margin, a scheduling round, and the page's 1 s poll
    assert!(seen_after < Duration::from_secs(15), "{seen_after:?}");
}

/// A pipeline streaming rows shows a rate above 0 rows/s in its row and in the chart, on the
/// page of whichever worker serves it (the rows are counted by the owner). Rows are inserted
/// while the harness watches.
fn throughput_is_shown(c: &Cluster, leader: u64, url: &str, server_id: u32) {
    let (Some(db), Some(kafka)) = (capstan_tests::mysql(), capstan_tests::kafka()) else {
        return;
    };
    let live = LiveSchema::create(
        db,
        "page",
        "CREATE TABLE `{schema}`.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
    );
    let prefix = capstan_tests::unique_name("page");
    let definition = live.definition(
        "flowing",
        "mysql",
        server_id,
        "t",
        kafka.bootstrap_servers(),
        &prefix,
    );
    c.create_streaming(leader, &definition, SETTLE);
    let mut watcher = harness(url, &["throughput", "flowing", "40"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the harness");
    let started = Instant::now();
    while watcher.try_wait().expect("the harness").is_none()
        && started.elapsed() < Duration::from_secs(60)
    {
        live.sql("INSERT INTO `{schema}`.t (v) VALUES (1), (2), (3)");
        std::thread::sleep(Duration::from_millis(200));
    }
    let Output {
        status,
        stdout,
        stderr,
    } = watcher.wait_with_output().expect("the harness's output");
    let (out, err) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "throughput failed ({status}):\n{out}\n{err}"
    );
    print!("{out}");
    // every worker's answer carries the owner's count
    for id in [1, 2, 3] {
        let st = c.pipeline_status(id, "flowing").expect("status");
        assert!(
            st["rows_total"].as_u64().is_some_and(|n| n > 0),
            "node {id}: {st}"
        );
    }
}

/// A worker with `api_read_token_file` answers reads only with the token, but serves the page
/// itself: the page asks for the token on the first 401 (its field focused), refuses a wrong
/// one, shows the cluster once the right one is typed in, keeps it in the tab's
/// sessionStorage only (never in the URL or the page), keeps it across a reload and forgets it
/// on request.
#[test]
fn the_page_asks_for_the_read_token() {
    if harness_ready().is_none() {
        return;
    }
    const READ_TOKEN: &str = "page-read-t0ken";
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("read-token");
    std::fs::write(&file, format!("{READ_TOKEN}\n")).expect("token file");
    // a read token goes with a write token
    let write = dir.path().join("write-token");
    std::fs::write(&write, "page-write-t0ken").expect("token file");
    let Some(c) = Cluster::start_with(1, |_| {
        format!(
            "api_token_file = \"{}\"\napi_read_token_file = \"{}\"\n",
            write.display(),
            file.display()
        )
    }) else {
        return;
    };
    let url = c.workers[&1].api();
    let http = reqwest::blocking::Client::new();
    let ready = c.wait_until(SETTLE, |_| {
        let (page, reads) = (
            http.get(format!("{url}/")).send().ok()?,
            http.get(format!("{url}/cluster")).send().ok()?,
        );
        (page.status() == 200 && reads.status() == 401).then_some(())
    });
    assert!(
        ready.is_some(),
        "the worker did not come up:\n{}",
        c.log_tail(1)
    );

    let Output {
        status,
        stdout,
        stderr,
    } = harness(&url, &["token-prompt", "40"])
        .env("CAPSTAN_PROMPT_TOKEN", READ_TOKEN)
        .env_remove("CAPSTAN_TOKEN")
        .output()
        .expect("run the harness");
    let (out, err) = (
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr),
    );
    assert!(
        status.success(),
        "token-prompt failed ({status}):\n{out}\n{err}"
    );
    print!("{out}");
    assert!(!out.contains(READ_TOKEN) && !err.contains(READ_TOKEN));
    let page_log =
        std::fs::read_to_string(screenshots().join("token-prompt.log")).unwrap_or_default();
    assert!(
        !page_log.contains(READ_TOKEN),
        "the token reached the page's log"
    );
    assert!(
        !c.log(1).contains(READ_TOKEN),
        "the token reached the worker's log"
    );
}

/// A pipeline whose initial snapshot is being read (3,000 rows at 400 rows/s) shows a progress
/// bar for its table with the rows done of the estimate while the table is in progress.
#[test]
fn the_page_shows_a_snapshot_progressing() {
    if harness_ready().is_none() {
        return;
    }
    let (Some(db), Some(kafka)) = (capstan_tests::mysql(), capstan_tests::kafka()) else {
        return;
    };
    let live = LiveSchema::with_orders(db, "page_snapshot", 3000);
    let Some(c) = Cluster::start(3) else {
        return;
    };
    let leader = c.wait_for_leader(&[1, 2, 3], SETTLE).expect("leader");
    let name = capstan_tests::unique_name("page-snapshot").replace('_', "-");
    let mut definition = live.definition(
        &name,
        "mysql",
        9800 + std::process::id() % 100,
        "orders",
        kafka.bootstrap_servers(),
        &name,
    );
    definition["snapshot"] =
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 400});
    c.create_running(leader, &definition);
    let url = c.workers[&leader].api();
    let report = check(&url, &["snapshot-progress", &name, "30"]);
    let table = format!("{}.orders", live.name);
    assert!(
        report.contains(&format!("{table} in_progress")),
        "the page never showed the table being read: {report}"
    );
    assert!(
        report.contains(" / ~") && report.contains(" rows"),
        "rows done of the estimate: {report}"
    );
}
