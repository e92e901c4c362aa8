//! The `capstan` command line against three real worker processes: validate, apply (create,
//! then update), get as JSON and YAML, offsets, stop --wait, reset-offsets, a wait that times
//! out, cluster add-member of an address where nothing listens, shell completions; and
//! `--ca-file` against a small HTTPS server. Pipelines point at an unreachable source: no
//! MySQL or Kafka is needed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::cluster::{capstan_binary, Cluster};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

const SETTLE: Duration = Duration::from_secs(20);
const SECRET: &str = "hunter2-cli-secret";

/// The idle definition (capstan_tests::cluster::idle_definition) as YAML, with a password.
fn yaml_definition(name: &str, topic_prefix: &str, port: &str) -> String {
    format!(
        "# an idle pipeline: nothing listens on its source or its brokers\n\
         name: {name}\n\
         source:\n  \
           host: 127.0.0.1\n  \
           port: {port}\n  \
           user: nobody\n  \
           password: {SECRET}\n  \
           tls:\n    mode: disabled\n  \
           server_id: 4242\n  \
           flavor: mysql\n  \
           max_reconnects: 1\n  \
           reconnect_backoff_ms: 100\n\
         kafka:\n  \
           bootstrap_servers: 127.0.0.1:1\n  \
           topic_prefix: {topic_prefix}\n"
    )
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        }
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(capstan_binary().expect("capstan built"));
    cmd.args(args)
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .env_remove("CAPSTAN_CA_FILE");
    cmd
}

fn capstan(args: &[&str]) -> Run {
    command(args)
        .stdin(Stdio::null())
        .output()
        .expect("run capstan")
        .into()
}

fn capstan_with_stdin(args: &[&str], input: &str) -> Run {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run capstan");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().expect("capstan ends").into()
}

fn ok(run: &Run) {
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains(SECRET), "the secret was printed: {run:?}");
}

fn fails_with(run: &Run, code: &str) {
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.starts_with(&format!("capstan: {code}: ")),
        "{code} not shown: {run:?}"
    );
    assert!(!run.stderr.contains(SECRET), "the secret was echoed: {run:?}");
}

#[test]
fn the_cli_on_three_workers() {
    let Some(c) = Cluster::start(3) else {
        return;
    };
    let leader = c
        .wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader; node 1 log:\n{}", c.log_tail(1)));
    // a follower: every write is forwarded to the leader
    let via = if leader == 1 { 2 } else { 1 };
    let url = c.workers[&via].api();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let good = file("cli-a.yaml", &yaml_definition("cli-a", "t", "1"));
    let changed = file("cli-a-v2.yml", &yaml_definition("cli-a", "t2", "1"));
    let bad = file("bad.yaml", &yaml_definition("cli-a", "t", "not-a-port"));

    // validate: a good definition, from a file and from standard input; nothing is written
    let run = capstan(&["pipeline", "validate", "-f", &good, "--url", &url]);
    ok(&run);
    assert_eq!(
        run.stdout.trim(),
        "the definition of pipeline cli-a is valid"
    );
    let run = capstan_with_stdin(
        &["pipeline", "validate", "-f", "-", "--url", &url],
        &yaml_definition("cli-stdin", "t", "1"),
    );
    ok(&run);
    assert!(run.stdout.contains("cli-stdin is valid"), "{run:?}");
    let run = capstan(&["pipeline", "list", "--url", &url]);
    assert_eq!(run.stdout.trim(), "no pipelines", "{run:?}");

    // a bad definition: the field is named, the value is not
    let run = capstan(&["pipeline", "validate", "-f", &bad, "--url", &url]);
    fails_with(&run, "invalid_pipeline");
    assert!(run.stderr.contains("source.port"), "{run:?}");
    // broken yaml: the place is named, the content is not
    let broken = file(
        "broken.yaml",
        &format!("name: x\nsource:\n  password: {SECRET}\n   host: [db\n"),
    );
    let run = capstan(&["pipeline", "validate", "-f", &broken, "--url", &url]);
    fails_with(&run, "invalid_definition");
    assert!(run.stderr.contains("line 4 column 8"), "{run:?}");

    // apply creates, then updates
    let run = capstan(&["pipeline", "apply", "-f", &good, "--url", &url]);
    ok(&run);
    assert!(run.stdout.starts_with("created pipeline cli-a"), "{run:?}");
    let run = capstan(&["pipeline", "apply", "-f", &changed, "--url", &url]);
    ok(&run);
    assert!(run.stdout.starts_with("updated pipeline cli-a"), "{run:?}");
    let shown = c.wait_until(SETTLE, |_| {
        let run = capstan(&["pipeline", "get", "cli-a", "--url", &url]);
        (run.code == Some(0) && run.stdout.contains("\"topic_prefix\": \"t2\"")).then_some(run)
    });
    let run = shown.expect("get shows the applied change");
    ok(&run);
    let config: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(config["source"]["password"], "<redacted>");
    let run = capstan(&["pipeline", "get", "cli-a", "-o", "yaml", "--url", &url]);
    ok(&run);
    assert!(run.stdout.lines().any(|l| l == "name: cli-a"), "{run:?}");
    assert!(run.stdout.contains("\n  topic_prefix: t2\n"), "{run:?}");
    assert!(run.stdout.contains("\n  password: <redacted>\n"), "{run:?}");
    let run = capstan(&["pipeline", "get", "missing", "--url", &url]);
    fails_with(&run, "unknown_pipeline");

    let run = capstan(&["pipeline", "offsets", "cli-a", "--url", &url]);
    ok(&run);
    assert!(run.stdout.starts_with("pipeline:      cli-a\n"), "{run:?}");
    assert!(run.stdout.contains("position:      none"), "{run:?}");

    // running: its offsets cannot be reset; stopped (waited for), they can
    let run = capstan(&["pipeline", "resume", "cli-a", "--url", &url]);
    ok(&run);
    c.wait_until(SETTLE, |c| c.pipeline_owner(via, "cli-a"))
        .expect("cli-a is owned");
    let run = capstan(&["pipeline", "reset-offsets", "cli-a", "--url", &url]);
    fails_with(&run, "pipeline_not_stopped");
    let run = capstan(&[
        "pipeline", "stop", "cli-a", "--wait", "stopped", "--timeout", "60", "--url", &url,
    ]);
    ok(&run);
    assert_eq!(
        run.stdout,
        "stop requested for cli-a\ncli-a is stopped\n",
        "{run:?}"
    );

    // a wait that cannot end well times out, saying what it saw
    let run = capstan(&[
        "pipeline", "status", "cli-a", "--wait", "streaming", "--timeout", "2", "--url", &url,
    ]);
    fails_with(&run, "wait_timed_out");
    assert!(
        run.stderr
            .contains("pipeline cli-a is not streaming after 2s: its state is stopped"),
        "{run:?}"
    );
    let run = capstan(&["pipeline", "status", "cli-a", "--url", &url]);
    ok(&run);
    assert!(run.stdout.contains("state:         stopped"), "{run:?}");

    let run = capstan(&["pipeline", "reset-offsets", "cli-a", "--url", &url]);
    ok(&run);
    assert!(run.stdout.starts_with("reset the offsets of cli-a"), "{run:?}");

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
        &url,
    ]);
    fails_with(&run, "member_unreachable");
    let run = capstan(&["cluster", "remove-member", "77", "--url", &url]);
    fails_with(&run, "unknown_member");

    let run = capstan(&["pipeline", "delete", "cli-a", "--url", &url]);
    ok(&run);
}

#[test]
fn completions_are_printed() {
    for shell in ["bash", "zsh", "fish"] {
        let run = capstan(&["completions", shell]);
        ok(&run);
        assert!(run.stdout.contains("capstan"), "{shell}: {run:?}");
        assert!(run.stdout.contains("reset-offsets"), "{shell}: {run:?}");
    }
}

/// A CA and a server certificate for 127.0.0.1 it signed: (CA PEM, certificate PEM, key PEM).
fn certificates() -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, "capstan cli test ca");
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = server.signed_by(&key, &issuer).unwrap();
    (ca_pem, cert.pem(), key.serialize_pem())
}

/// An HTTPS server on 127.0.0.1 answering every request with `["tls-ok"]`, for `connections`
/// connections (handshakes that fail count too); answers its port.
fn https_server(cert_pem: &str, key_pem: &str, connections: usize) -> u16 {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let config = Arc::new(config);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(tcp) = stream else { continue };
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            if request.is_empty() {
                continue;
            }
            let body = r#"["tls-ok"]"#;
            let _ = write!(
                tls,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = tls.flush();
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    port
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn an_https_url_is_trusted_through_the_ca_file() {
    let (ca, cert, key) = certificates();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", &ca);
    let port = https_server(&cert, &key, 2);
    let url = format!("https://127.0.0.1:{port}");

    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &ca_file]);
    ok(&run);
    assert_eq!(run.stdout, "tls-ok\n");
    // through the variable too
    let run: Run = command(&["pipeline", "list", "--url", &url])
        .env("CAPSTAN_CA_FILE", &ca_file)
        .output()
        .unwrap()
        .into();
    ok(&run);
    assert_eq!(run.stdout, "tls-ok\n");

    // no system roots are trusted: without the bundle the server is refused
    let other = tempfile::tempdir().unwrap();
    let (other_ca, _, _) = certificates();
    let other_file = write(other.path(), "other-ca.pem", &other_ca);
    let port = https_server(&cert, &key, 1);
    let url = format!("https://127.0.0.1:{port}");
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &other_file]);
    fails_with(&run, "api_unreachable");

    // a file that is no bundle is named, its content is not shown
    let junk = write(dir.path(), "junk.pem", &format!("{SECRET}\n"));
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &junk]);
    fails_with(&run, "invalid_ca_file");
    assert!(run.stderr.contains(&junk), "{run:?}");
    let missing = dir.path().join("missing.pem").display().to_string();
    let run = capstan(&["pipeline", "list", "--url", &url, "--ca-file", &missing]);
    fails_with(&run, "invalid_ca_file");
    assert!(run.stderr.contains(&missing), "{run:?}");
}
