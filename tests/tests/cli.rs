//! The `capstan` command line against three real worker processes: validate (a file, standard
//! input, a bad field, broken YAML), apply (create, then update), get as JSON and YAML,
//! create --wait, offsets, resume/restart/stop --wait, status --watch without a terminal
//! (text and JSON lines) ended by --wait, reset-offsets, a wait that times out, cluster
//! add-member and remove-member of a real joining worker and their refusals, shell
//! completions. Pipelines point at an unreachable source: no MySQL or Kafka is needed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;

use std::time::Duration;

use capstan_tests::cluster::Cluster;
use cli_common::{
    capstan, capstan_with_stdin, fails_with, ok, write, yaml_definition, Run, SECRET,
};

const SETTLE: Duration = Duration::from_secs(20);

#[test]
fn the_cli_on_three_workers() {
    let Some(mut c) = Cluster::start(3) else {
        return;
    };
    let leader = c
        .wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    // a follower: every write is forwarded to the leader
    let via = if leader == 1 { 2 } else { 1 };
    let url = c.workers[&via].api();
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "cli-a.yaml",
        &yaml_definition("cli-a", "t", "1"),
    );
    let changed = write(
        dir.path(),
        "cli-a-v2.yml",
        &yaml_definition("cli-a", "t2", "1"),
    );
    let bad = write(
        dir.path(),
        "bad.yaml",
        &yaml_definition("cli-a", "t", "not-a-port"),
    );
    let pipeline = |args: &[&str]| -> Run {
        let mut all = vec!["pipeline"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--url", &url]);
        capstan(&all)
    };

    validate(&pipeline, &good, &bad, dir.path(), &url);

    // apply creates, then updates
    let run = pipeline(&["apply", "-f", &good]);
    ok(&run);
    assert!(run.stdout.starts_with("created pipeline cli-a"), "{run:?}");
    let run = pipeline(&["apply", "-f", &changed]);
    ok(&run);
    assert!(run.stdout.starts_with("updated pipeline cli-a"), "{run:?}");
    let shown = c.wait_until(SETTLE, |_| {
        let run = pipeline(&["get", "cli-a"]);
        (run.code == Some(0) && run.stdout.contains("\"topic_prefix\": \"t2\"")).then_some(run)
    });
    let run = shown.expect("get shows the applied change");
    ok(&run);
    let config: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(config["source"]["password"], "<redacted>");
    let run = pipeline(&["get", "cli-a", "-o", "yaml"]);
    ok(&run);
    assert!(run.stdout.lines().any(|l| l == "name: cli-a"), "{run:?}");
    assert!(run.stdout.contains("\n  topic_prefix: t2\n"), "{run:?}");
    assert!(run.stdout.contains("\n  password: <redacted>\n"), "{run:?}");
    fails_with(&pipeline(&["get", "missing"]), "unknown_pipeline");

    // create from JSON on standard input, waiting until the node asked knows it
    let json = capstan_tests::cluster::idle_definition("cli-b").to_string();
    let run = capstan_with_stdin(
        &[
            "pipeline",
            "create",
            "-f",
            "-",
            "--wait",
            "unassigned",
            "--url",
            &url,
        ],
        &json,
    );
    ok(&run);
    assert!(run.stdout.starts_with("created pipeline cli-b"), "{run:?}");
    assert!(run.stdout.ends_with("\ncli-b is unassigned\n"), "{run:?}");
    ok(&pipeline(&["delete", "cli-b"]));

    let run = pipeline(&["offsets", "cli-a"]);
    ok(&run);
    assert!(run.stdout.starts_with("pipeline:      cli-a\n"), "{run:?}");
    assert!(run.stdout.contains("position:      none"), "{run:?}");

    steer(&pipeline);

    cluster_members(&mut c, &url);

    ok(&pipeline(&["delete", "cli-a"]));
    assert_eq!(pipeline(&["list"]).stdout.trim(), "no pipelines");
}

/// `pipeline validate`: a good definition from a file and from standard input, a bad field,
/// broken YAML; nothing is written.
fn validate(
    pipeline: &impl Fn(&[&str]) -> Run,
    good: &str,
    bad: &str,
    dir: &std::path::Path,
    url: &str,
) {
    let run = pipeline(&["validate", "-f", good]);
    ok(&run);
    assert_eq!(
        run.stdout.trim(),
        "the definition of pipeline cli-a is valid"
    );
    let run = capstan_with_stdin(
        &["pipeline", "validate", "-f", "-", "--url", url],
        &yaml_definition("cli-stdin", "t", "1"),
    );
    ok(&run);
    assert!(run.stdout.contains("cli-stdin is valid"), "{run:?}");
    let run = pipeline(&["list"]);
    assert_eq!(run.stdout.trim(), "no pipelines", "{run:?}");

    // a bad definition: the field is named, the value is not
    let run = pipeline(&["validate", "-f", bad]);
    fails_with(&run, "invalid_pipeline");
    assert!(run.stderr.contains("source.port"), "{run:?}");
    // broken yaml: the place is named, the content is not
    let broken = write(
        dir,
        "broken.yaml",
        &format!("name: x\nsource:\n  password: {SECRET}\n   host: [db\n"),
    );
    let run = pipeline(&["validate", "-f", &broken]);
    fails_with(&run, "invalid_definition");
    assert!(run.stderr.contains("line 4 column 8"), "{run:?}");
}

/// resume, restart and stop with --wait; status --wait that times out; status --watch without
/// a terminal; reset-offsets refused while running and done once stopped.
fn steer(pipeline: &impl Fn(&[&str]) -> Run) {
    // its source does not answer: the owner retries
    let run = pipeline(&["resume", "cli-a", "--wait", "retrying", "--timeout", "60"]);
    ok(&run);
    assert!(run.stdout.ends_with("\ncli-a is retrying\n"), "{run:?}");
    fails_with(
        &pipeline(&["reset-offsets", "cli-a"]),
        "pipeline_not_stopped",
    );
    let run = pipeline(&["restart", "cli-a", "--wait", "retrying", "--timeout", "60"]);
    ok(&run);
    assert!(
        run.stdout.starts_with("restarting cli-a on node "),
        "{run:?}"
    );
    assert!(run.stdout.ends_with("\ncli-a is retrying\n"), "{run:?}");
    let run = pipeline(&["stop", "cli-a", "--wait", "stopped", "--timeout", "60"]);
    ok(&run);
    assert_eq!(
        run.stdout, "stop requested for cli-a\ncli-a is stopped\n",
        "{run:?}"
    );

    // a wait that cannot end well times out, saying what it saw
    let run = pipeline(&["status", "cli-a", "--wait", "streaming", "--timeout", "2"]);
    fails_with(&run, "wait_timed_out");
    assert!(
        run.stderr
            .contains("pipeline cli-a is not streaming after 2s: its state is stopped"),
        "{run:?}"
    );
    let run = pipeline(&["status", "cli-a"]);
    ok(&run);
    assert!(run.stdout.contains("state:         stopped"), "{run:?}");

    // --watch without a terminal prints the status (each change once), and --wait ends it
    let run = pipeline(&[
        "status",
        "cli-a",
        "--watch",
        "--interval",
        "0.2",
        "--wait",
        "stopped",
    ]);
    ok(&run);
    assert!(run.stdout.starts_with("pipeline:      cli-a\n"), "{run:?}");
    assert!(run.stdout.contains("\nstate:         stopped\n"), "{run:?}");
    // with --json, one JSON status a line
    let run = pipeline(&[
        "status",
        "cli-a",
        "--watch",
        "--json",
        "--interval",
        "0.2",
        "--wait",
        "stopped",
    ]);
    ok(&run);
    let last: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["state"], "stopped", "{run:?}");
    assert_eq!(last["name"], "cli-a", "{run:?}");

    // a watch of what does not exist ends at once, with the API's code
    fails_with(
        &pipeline(&["status", "missing", "--watch"]),
        "unknown_pipeline",
    );

    let run = pipeline(&["reset-offsets", "cli-a"]);
    ok(&run);
    assert!(
        run.stdout.starts_with("reset the offsets of cli-a"),
        "{run:?}"
    );
}

/// cluster add-member of a joining worker (it becomes a voter), remove-member (it stops), and
/// the API's refusals with their codes.
fn cluster_members(c: &mut Cluster, url: &str) {
    let joiner = c.spawn_joiner(4);
    let raft = format!("127.0.0.1:{}", joiner.raft_port);
    let api = format!("127.0.0.1:{}", joiner.api_port);
    let run = capstan(&[
        "cluster",
        "add-member",
        "--id",
        "4",
        "--raft",
        &raft,
        "--api",
        &api,
        "--url",
        url,
    ]);
    ok(&run);
    assert_eq!(
        run.stdout,
        format!("added member 4 (raft {raft}, api {api}) as a voter\n"),
        "{run:?}"
    );
    let voter = c.wait_until(SETTLE, |_| {
        let run = capstan(&["cluster", "status", "--json", "--url", url]);
        let v: serde_json::Value = serde_json::from_str(&run.stdout).ok()?;
        v["members"]
            .as_array()?
            .iter()
            .any(|m| m["id"] == 4 && m["voter"] == true)
            .then_some(())
    });
    assert!(voter.is_some(), "node 4 never listed as a voter");
    let run = capstan(&["cluster", "status", "--url", url]);
    ok(&run);
    assert!(run.stdout.contains(&raft), "{run:?}");

    let run = capstan(&["cluster", "remove-member", "4", "--url", url]);
    ok(&run);
    assert_eq!(run.stdout, "removed member 4\n", "{run:?}");
    assert!(
        c.wait_exit(4, Duration::from_secs(10)),
        "removed worker still runs; log:\n{}",
        c.log_tail(4)
    );

    // a member whose raft address does not answer is refused, with the API's code
    let run = capstan(&[
        "cluster",
        "add-member",
        "--id",
        "9",
        "--raft",
        "127.0.0.1:1",
        "--api",
        "127.0.0.1:2",
        "--url",
        url,
    ]);
    fails_with(&run, "member_unreachable");
    fails_with(
        &capstan(&["cluster", "remove-member", "77", "--url", url]),
        "unknown_member",
    );
    // bad input is refused by the command line, naming the option
    let run = capstan(&[
        "cluster",
        "add-member",
        "--id",
        "0",
        "--raft",
        "x",
        "--api",
        "y",
        "--url",
        url,
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--id"), "{run:?}");
}

#[test]
fn completions_are_printed() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let run = capstan(&["completions", shell]);
        ok(&run);
        assert!(run.stdout.contains("capstan"), "{shell}: {run:?}");
        assert!(run.stdout.contains("reset-offsets"), "{shell}: {run:?}");
    }
    let run = capstan(&["completions", "tcsh"]);
    assert_eq!(run.code, Some(2), "{run:?}");
}
