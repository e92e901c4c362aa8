//! `capstan pipeline status NAME --watch` on a terminal during a real initial snapshot (MySQL
//! and the Kafka broker of the dev services): the watch runs under `script`, which gives it a
//! pseudo-terminal, and draws a progress bar for the table being read (rows done of the
//! estimate, rate, time left) until `--wait streaming` ends it. The snapshot is slowed by
//! `max_rows_per_second` so that several polls see it. Midway the owner is killed: the watch,
//! asking another worker, shows the pipeline move to a new owner and epoch and the snapshot
//! go on to the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use capstan_tests::cluster::{capstan_binary, Cluster};
use capstan_tests::live_pipeline::LiveSchema;
use capstan_tests::{kafka, mysql, unique_name};
use cli_common::{capstan, ok, write, Run};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(20);
const ROWS: u32 = 3000;

/// `text` quoted for `sh`.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs the binary with `args` on a pseudo-terminal 160 columns wide.
fn on_a_terminal(args: &[&str]) -> Run {
    let binary = capstan_binary().unwrap().display().to_string();
    let line: Vec<String> = std::iter::once(binary.as_str())
        .chain(args.iter().copied())
        .map(quoted)
        .collect();
    let shell = format!("stty cols 160 rows 40; exec {}", line.join(" "));
    Command::new("script")
        .args(["-q", "-e", "-f", "-c", &shell, "/dev/null"])
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .env_remove("CAPSTAN_CA_FILE")
        .output()
        .expect("run script")
        .into()
}

/// The text a terminal was sent, cut into lines at every line break and every escape
/// sequence (the redraw moves the cursor between lines with them).
fn drawn_lines(screen: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    let mut chars = screen.chars();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: `ESC [`, parameters, then one letter
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
                lines.push(String::new());
            }
            '\r' | '\n' => lines.push(String::new()),
            c => lines.last_mut().unwrap().push(c),
        }
    }
    lines.retain(|l| !l.trim().is_empty());
    lines
}

#[test]
fn the_watch_draws_a_bar_per_snapshot_table() {
    let Some(db) = mysql() else { return };
    let Some(kafka) = kafka() else { return };
    let live = LiveSchema::with_orders(db, "cli_watch", ROWS);
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    c.wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    let url = c.workers[&1].api();
    let name = unique_name("cli-watch").replace('_', "-");
    let server_id = 40_000 + std::process::id() % 10_000;
    let mut definition = live.definition(
        &name,
        "mysql",
        server_id,
        "orders",
        kafka.bootstrap_servers(),
        &name,
    );
    definition["snapshot"] =
        json!({"mode": "initial", "chunk_size": 100, "max_rows_per_second": 400});
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "watch.json", &definition.to_string());
    ok(&capstan(&["pipeline", "apply", "-f", &file, "--url", &url]));
    ok(&capstan(&["pipeline", "resume", &name, "--url", &url]));

    let (owner, epoch, _) = c
        .wait_until(SETTLE, |c| c.pipeline_owner(1, &name))
        .expect("the pipeline is owned");
    // the watch asks a worker that will survive
    let watcher = [1, 2, 3].into_iter().find(|&n| n != owner).unwrap();
    let watch_url = c.workers[&watcher].api();
    let watch = {
        let name = name.clone();
        std::thread::spawn(move || {
            on_a_terminal(&[
                "pipeline",
                "status",
                &name,
                "--watch",
                "--interval",
                "0.2",
                "--wait",
                "streaming",
                "--timeout",
                "120",
                "--url",
                &watch_url,
            ])
        })
    };
    // the owner dies while the table is being read
    let reading = c.wait_until(SETTLE, |c| {
        let v = c.pipeline_status(watcher, &name)?;
        let done = v["snapshot"][0]["rows_done"].as_u64()?;
        (done >= 400 && done < u64::from(ROWS)).then_some(done)
    });
    assert!(reading.is_some(), "the snapshot never got going");
    c.kill9(owner);
    let run = watch.join().unwrap();
    let (new_owner, new_epoch, _) = c
        .pipeline_owner(watcher, &name)
        .expect("the pipeline is owned again");
    assert_ne!(new_owner, owner);
    assert!(new_epoch > epoch, "epoch {new_epoch} after {epoch}");
    assert_eq!(run.code, Some(0), "{run:?}");
    let table = format!("{}.orders", live.name);
    let screen = &run.stdout;
    // a bar was drawn for the table while it was read: its name, state, the bar, the rows
    // done of the estimate (counts with separators), the rate and the time left
    let lines = drawn_lines(screen);
    let bars: BTreeSet<&str> = lines
        .iter()
        .filter_map(|l| l.find(&table).map(|at| l[at..].trim_end()))
        .filter(|bar| bar.contains("in_progress"))
        .collect();
    let drawn = bars
        .iter()
        .find(|bar| {
            bar.contains("[=")
                && bar.contains(" rows ")
                && bar.contains("/s")
                && bar.contains("eta")
        })
        .unwrap_or_else(|| panic!("no bar for {table}: {run:?}"));
    eprintln!("a bar drawn: {drawn}");
    // and it advanced while the watch ran
    assert!(bars.len() >= 2, "{bars:?}");
    // the header followed the state to the end
    assert!(screen.contains("state:         snapshotting"), "{run:?}");
    assert!(screen.contains("state:         streaming"), "{run:?}");
    // and showed the move: the old owner, then the new one with its new epoch
    let before = format!("owner:         node {owner} (epoch {epoch})");
    let after = format!("owner:         node {new_owner} (epoch {new_epoch})");
    let seen_before = screen.find(&before);
    let seen_after = screen.rfind(&after);
    assert!(
        matches!((seen_before, seen_after), (Some(b), Some(a)) if b < a),
        "{before} then {after}: {run:?}"
    );

    // the snapshot is done: the status lists the table complete
    let url = c.workers[&new_owner].api();
    let run = capstan(&["pipeline", "status", &name, "--url", &url]);
    ok(&run);
    assert!(
        run.stdout.contains("snapshot:      1 of 1 tables complete"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains(&format!("{ROWS} of ~"))
            || run.stdout.contains(&format!("{ROWS} rows")),
        "{run:?}"
    );
    ok(&capstan(&[
        "pipeline", "stop", &name, "--wait", "stopped", "--url", &url,
    ]));
    ok(&capstan(&["pipeline", "delete", &name, "--url", &url]));
}
