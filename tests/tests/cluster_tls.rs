//! Mutual TLS on the Raft port: three real `capstan worker` processes with `[tls]` elect a
//! leader and replicate (Raft RPCs and forwarded writes over https); a caller without a client
//! certificate from the cluster CA is refused; unusable TLS files stop a worker at start with
//! an error naming the file. Certificates are made here with rcgen.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use capstan_tests::cluster::{capstan_binary, free_port, Cluster};
use capstan_tests::test_ca::{tls_table, write_certs, TestCa};
use reqwest::Method;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(20);

/// A blocking client trusting `ca_pem`, presenting `client` (certificate, key) when given.
fn https_client(ca_pem: &str, client: Option<(&str, &str)>) -> reqwest::blocking::Client {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    reqwest::blocking::Client::builder()
        .use_preconfigured_tls(config)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn pipelines(c: &Cluster, id: u64) -> Vec<String> {
    c.get(id, "/pipelines")
        .and_then(|(s, v)| (s == 200).then_some(v))
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

#[test]
fn three_workers_over_mutual_tls_elect_replicate_and_refuse_uncertified_peers() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new("capstan test cluster ca");
    let tables = write_certs(certs.path(), &ca, &[1, 2, 3]);
    let Some(c) = Cluster::start_with(3, |id| {
        tables
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, t)| t.clone())
            .unwrap()
    }) else {
        return;
    };
    let leader = c
        .wait_for_leader(&[1, 2, 3], SETTLE)
        .unwrap_or_else(|| panic!("no leader over tls; node 1 log:\n{}", c.log_tail(1)));
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();

    let raft_port = c.workers[&leader].raft_port;
    let https = format!("https://127.0.0.1:{raft_port}/raft/vote");
    let vote = json!({ "bogus": true });

    // a caller with a certificate from the cluster CA reaches the leader's Raft port: it
    // writes commands through /raft/write (the pipeline API's definition checks are not the
    // subject here) ...
    let (cert, key) = ca.worker_cert("operator");
    let good = https_client(&ca.pem, Some((&cert, &key)));
    let write = format!("https://127.0.0.1:{raft_port}/raft/write");
    for name in ["p1", "p2", "p3"] {
        let reply: serde_json::Value = good
            .post(&write)
            .json(&json!({"command": "create_pipeline", "name": name, "spec": {"name": name}}))
            .send()
            .expect("tls accepted")
            .json()
            .unwrap();
        assert_eq!(reply["Ok"]["outcome"], "applied", "{reply}");
    }
    // ... and gets an HTTP answer to a malformed vote (refused by the handler, not by TLS)
    let answered = good.post(&https).json(&vote).send().expect("tls accepted");
    assert!(answered.status().is_client_error(), "{}", answered.status());

    // the commands replicate to every node over https
    for id in [1, 2, 3] {
        let seen = c.wait_until(SETTLE, |c| {
            (pipelines(c, id) == ["p1", "p2", "p3"]).then_some(())
        });
        assert!(
            seen.is_some(),
            "node {id} sees {:?}; log:\n{}",
            pipelines(&c, id),
            c.log_tail(id)
        );
    }
    // a write on a follower is forwarded to the leader's /raft/write over https
    let (status, body) = c
        .send(follower, Method::DELETE, "/pipelines/p3", None)
        .unwrap();
    assert_eq!(status, 204, "{body}");
    for id in [1, 2, 3] {
        let seen = c.wait_until(SETTLE, |c| (pipelines(c, id) == ["p1", "p2"]).then_some(()));
        assert!(seen.is_some(), "node {id} sees {:?}", pipelines(&c, id));
    }
    // every worker's lease renewals commit (a follower's are forwarded over https)
    for id in [1, 2, 3] {
        let healthy = c.wait_until(SETTLE, |c| {
            let (_, h) = c.get(id, "/health")?;
            (h["lease_valid"] == true && h["status"] == "ok").then_some(())
        });
        assert!(healthy.is_some(), "node {id}: {:?}", c.get(id, "/health"));
    }

    // no client certificate: refused during the handshake
    let anonymous = https_client(&ca.pem, None);
    let refused = anonymous.post(&https).json(&vote).send();
    assert!(
        refused.is_err(),
        "a caller without a certificate got {refused:?}"
    );

    // a certificate from another CA: refused
    let rogue = TestCa::new("rogue ca");
    let (cert, key) = rogue.worker_cert("intruder");
    let intruder = https_client(&ca.pem, Some((&cert, &key)));
    let refused = intruder.post(&https).json(&vote).send();
    assert!(refused.is_err(), "a rogue-CA certificate got {refused:?}");

    // plain http to the tls port: no answer, and no write through /raft/write either
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let refused = plain
        .post(format!("http://127.0.0.1:{raft_port}/raft/write"))
        .json(&json!({"command": "delete_pipeline", "name": "p1"}))
        .send();
    assert!(
        refused.as_ref().map_or(true, |r| !r.status().is_success()),
        "plain http got {refused:?}"
    );
    assert_eq!(pipelines(&c, leader), ["p1", "p2"]);

    // the refusals are logged by the leader, with no key material
    let logged = c.wait_until(Duration::from_secs(5), |c| {
        let log = c.log_tail(leader);
        (log.contains("connection dropped before a request") && log.contains("port=\"raft\""))
            .then_some(())
    });
    assert!(logged.is_some(), "leader log:\n{}", c.log_tail(leader));
    assert!(!c.log_tail(leader).contains("PRIVATE KEY"));

    // and the cluster still works: a follower's forwarded write still goes through
    let (status, body) = c
        .send(follower, Method::PUT, "/pipelines/p2/resume", None)
        .unwrap();
    assert_eq!(status, 202, "{body}");
}

/// Runs `capstan worker` with `tls` appended to a one-node config; returns (exit ok, stderr).
fn start_alone(binary: &Path, dir: &Path, tls: &str) -> (bool, String) {
    let config: PathBuf = dir.join("alone.toml");
    let text = format!(
        "node_id = 1\ndata_dir = \"{}\"\nraft_listen = \"127.0.0.1:{}\"\napi_listen = \"127.0.0.1:{}\"\n{tls}",
        dir.join("data-alone").display(),
        free_port(),
        free_port(),
    );
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(binary)
        .arg("worker")
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // a worker that starts would run forever: give it a moment, then stop it
    for _ in 0..100 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unusable_tls_files_stop_the_worker_naming_the_file() {
    let Some(binary) = capstan_binary() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("capstan test cluster ca");
    write_certs(dir.path(), &ca, &[1, 2]);

    // a missing CA file
    let table = tls_table(dir.path(), "w1").replace("ca.pem", "absent-ca.pem");
    let (ok, err) = start_alone(&binary, dir.path(), &table);
    eprintln!("refused: {}", err.trim());
    assert!(!ok);
    assert!(err.contains("tls.ca_file"), "{err}");
    assert!(err.contains("absent-ca.pem"), "{err}");

    // a key that is not the certificate's
    let table = tls_table(dir.path(), "w1").replace("w1.key", "w2.key");
    let (ok, err) = start_alone(&binary, dir.path(), &table);
    eprintln!("refused: {}", err.trim());
    assert!(!ok);
    assert!(err.contains("w2.key"), "{err}");
    assert!(err.contains("does not belong to the certificate"), "{err}");
    assert!(err.contains("tls_setup_failed"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");

    // a key file holding a certificate instead
    let table = tls_table(dir.path(), "w1").replace("w1.key", "w1.pem");
    let (ok, err) = start_alone(&binary, dir.path(), &table);
    eprintln!("refused: {}", err.trim());
    assert!(!ok);
    assert!(err.contains("tls.key_file"), "{err}");
    assert!(err.contains("holds no private key"), "{err}");
}

/// `[api_tls]` with a write and a read token: the REST API answers only over https with a
/// certificate from the API CA; reads need the read (or write) token but for `/health`; the
/// read token writes nothing; and a follower forwards a membership change to the leader's API
/// over https (the leader's own refusal, `member_unreachable`, comes back: a failed forward
/// would be `leader_unreachable`).
#[test]
fn the_rest_api_over_tls_with_a_read_token() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new("capstan test api ca");
    let tables = write_certs(certs.path(), &ca, &[1, 2, 3]);
    let (write_token, read_token) = ("api-write-t0ken", "api-read-t0ken");
    std::fs::write(certs.path().join("write"), write_token).unwrap();
    std::fs::write(certs.path().join("read"), format!("{read_token}\n")).unwrap();
    let tokens = format!(
        "api_token_file = \"{}\"\napi_read_token_file = \"{}\"\n",
        certs.path().join("write").display(),
        certs.path().join("read").display()
    );
    let Some(c) = Cluster::start_with(3, |id| {
        let table = tables
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, t)| t)
            .unwrap();
        format!("{tokens}{}", table.replace("[tls]", "[api_tls]"))
    }) else {
        return;
    };
    let https = https_client(&ca.pem, None);
    let url = |id: u64, path: &str| format!("https://127.0.0.1:{}{path}", c.workers[&id].api_port);
    let call = |id: u64,
                method: Method,
                path: &str,
                token: Option<&str>,
                body: Option<&serde_json::Value>| {
        let mut req = https.request(method, url(id, path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        req.send().ok().map(|r| {
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().unwrap_or_default())
        })
    };
    let deadline = std::time::Instant::now() + SETTLE;
    let leader = loop {
        let seen = call(1, Method::GET, "/cluster", Some(read_token), None)
            .and_then(|(s, v)| (s == 200).then(|| v["leader"].as_u64()).flatten());
        if let Some(l) = seen {
            break l;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no leader seen over https; node 1 log:\n{}",
            c.log_tail(1)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let follower = [1, 2, 3].into_iter().find(|&n| n != leader).unwrap();

    // plain http gets nothing
    let plain = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
        .get(format!(
            "http://127.0.0.1:{}/health",
            c.workers[&1].api_port
        ))
        .send();
    assert!(
        plain.map_or(true, |r| !r.status().is_success()),
        "the api answered plain http"
    );
    // probes stay open, reads need a token, and either token reads
    assert_eq!(call(1, Method::GET, "/health", None, None).unwrap().0, 200);
    let (s, v) = call(1, Method::GET, "/pipelines", None, None).unwrap();
    assert_eq!((s, v["error_code"].as_str()), (401, Some("unauthorized")));
    for token in [read_token, write_token] {
        assert_eq!(
            call(1, Method::GET, "/pipelines", Some(token), None)
                .unwrap()
                .0,
            200
        );
    }
    // the read token writes nothing; the write token does
    let def = capstan_tests::cluster::idle_definition("over-tls");
    let (s, _) = call(
        follower,
        Method::POST,
        "/pipelines",
        Some(read_token),
        Some(&def),
    )
    .unwrap();
    assert_eq!(s, 401);
    let (s, v) = call(
        follower,
        Method::POST,
        "/pipelines",
        Some(write_token),
        Some(&def),
    )
    .unwrap();
    assert_eq!(s, 201, "{v}");
    // a membership change on a follower is forwarded to the leader's api over https
    let nobody = free_port();
    let member =
        json!({"id": 7, "raft_addr": format!("127.0.0.1:{nobody}"), "api_addr": "127.0.0.1:1"});
    let (s, v) = call(
        follower,
        Method::POST,
        "/cluster/members",
        Some(write_token),
        Some(&member),
    )
    .unwrap();
    assert_eq!(
        (s, v["error_code"].as_str()),
        (409, Some("member_unreachable")),
        "{v}"
    );
    for id in [1, 2, 3] {
        let log = c.log(id);
        assert!(
            !log.contains(write_token) && !log.contains(read_token),
            "worker {id} logged a token"
        );
    }
}
