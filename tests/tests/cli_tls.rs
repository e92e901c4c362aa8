//! The `capstan` command line against three workers whose REST API speaks only https
//! (`[api_tls]`) with a write token and a read token: `--ca-file` (or `CAPSTAN_CA_FILE`)
//! makes the CLI trust the API CA and nothing else; the token (`--token-file` or
//! `CAPSTAN_TOKEN`) is sent with every request, so the read token serves the commands that
//! read and is refused for those that write.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;

use std::time::{Duration, Instant};

use capstan_tests::cluster::Cluster;
use capstan_tests::test_ca::{write_certs, TestCa};
use cli_common::{capstan, command, fails_with, ok, write, yaml_definition, Run};

const SETTLE: Duration = Duration::from_secs(20);
const WRITE_TOKEN: &str = "cli-write-t0ken";
const READ_TOKEN: &str = "cli-read-t0ken";

#[test]
fn the_cli_over_https_with_the_read_token() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new("capstan cli test api ca");
    let tables = write_certs(certs.path(), &ca, &[1, 2, 3]);
    let ca_file = certs.path().join("ca.pem").display().to_string();
    let write_file = write(certs.path(), "write", &format!("{WRITE_TOKEN}\n"));
    let read_file = write(certs.path(), "read", READ_TOKEN);
    let tokens =
        format!("api_token_file = \"{write_file}\"\napi_read_token_file = \"{read_file}\"\n");
    let Some(c) = Cluster::start_with(3, |id| {
        let table = &tables.iter().find(|(i, _)| *i == id).unwrap().1;
        format!("{tokens}{}", table.replace("[tls]", "[api_tls]"))
    }) else {
        return;
    };
    let url = format!("https://127.0.0.1:{}", c.workers[&2].api_port);
    let cli = |token_file: &str, args: &[&str]| -> Run {
        let mut all = args.to_vec();
        all.extend_from_slice(&[
            "--url",
            &url,
            "--ca-file",
            &ca_file,
            "--token-file",
            token_file,
        ]);
        capstan(&all)
    };

    // the read token reads: wait until the node asked knows a leader
    let deadline = Instant::now() + SETTLE;
    loop {
        let run = cli(&read_file, &["cluster", "status", "--json"]);
        let leader = serde_json::from_str::<serde_json::Value>(&run.stdout)
            .ok()
            .and_then(|v| v["leader"].as_u64());
        if run.code == Some(0) && leader.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "no leader over https: {run:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let run = cli(&read_file, &["pipeline", "list"]);
    ok(&run);
    assert_eq!(run.stdout, "no pipelines\n");

    // the read token writes nothing, not even a dry run; the write token does
    let dir = tempfile::tempdir().unwrap();
    let def = write(
        dir.path(),
        "tls.yaml",
        &yaml_definition("over-tls", "t", "1"),
    );
    fails_with(
        &cli(&read_file, &["pipeline", "validate", "-f", &def]),
        "unauthorized",
    );
    fails_with(
        &cli(&read_file, &["pipeline", "apply", "-f", &def]),
        "unauthorized",
    );
    ok(&cli(&write_file, &["pipeline", "validate", "-f", &def]));
    let run = cli(&write_file, &["pipeline", "apply", "-f", &def]);
    ok(&run);
    assert!(
        run.stdout.starts_with("created pipeline over-tls"),
        "{run:?}"
    );
    let seen = c.wait_until(SETTLE, |_| {
        let run = cli(&read_file, &["pipeline", "get", "over-tls", "-o", "yaml"]);
        (run.code == Some(0)).then_some(run)
    });
    let run = seen.expect("the read token reads the pipeline");
    assert!(run.stdout.contains("password: <redacted>"), "{run:?}");

    // the variables: CAPSTAN_CA_FILE and CAPSTAN_TOKEN
    let run: Run = command(&["pipeline", "list", "--url", &url])
        .env("CAPSTAN_CA_FILE", &ca_file)
        .env("CAPSTAN_TOKEN", READ_TOKEN)
        .output()
        .unwrap()
        .into();
    ok(&run);
    assert_eq!(run.stdout, "over-tls\n");
    // without a token a read is refused
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &ca_file]);
    fails_with(&run, "unauthorized");

    // only the given CA is trusted: no system roots, and another CA's bundle is refused
    let run = capstan(&[
        "pipeline",
        "list",
        "--url",
        &url,
        "--token-file",
        &read_file,
    ]);
    fails_with(&run, "api_unreachable");
    let other = write(dir.path(), "other-ca.pem", &TestCa::new("another ca").pem);
    let run = capstan(&[
        "pipeline",
        "list",
        "--url",
        &url,
        "--ca-file",
        &other,
        "--token-file",
        &read_file,
    ]);
    fails_with(&run, "api_unreachable");
    // plain http to an https API is no answer
    let plain = url.replace("https://", "http://");
    let run = capstan(&[
        "pipeline",
        "list",
        "--url",
        &plain,
        "--token-file",
        &read_file,
    ]);
    fails_with(&run, "api_unreachable");

    // a file that is no bundle is named, its content is not shown
    let junk = write(dir.path(), "junk.pem", &format!("{READ_TOKEN}\n"));
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &junk]);
    fails_with(&run, "invalid_ca_file");
    assert!(run.stderr.contains(&junk), "{run:?}");
    assert!(!run.stderr.contains(READ_TOKEN), "{run:?}");
    let missing = dir.path().join("missing.pem").display().to_string();
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &missing]);
    fails_with(&run, "invalid_ca_file");
    assert!(run.stderr.contains(&missing), "{run:?}");

    ok(&cli(&write_file, &["pipeline", "delete", "over-tls"]));
    for id in [1, 2, 3] {
        let log = c.log(id);
        assert!(
            !log.contains(WRITE_TOKEN) && !log.contains(READ_TOKEN),
            "worker {id} logged a token"
        );
    }
}
