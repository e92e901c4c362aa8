//! Running the real `capstan` binary as a command line: its exit status and output, with the
//! checks every CLI test makes (a failure's `capstan: <code>: ` line, no secret printed).

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use capstan_tests::cluster::capstan_binary;

/// The password in the tests' definitions: never printed.
pub const SECRET: &str = "hunter2-cli-secret";

/// The idle definition (capstan_tests::cluster::idle_definition) as YAML, with a password:
/// nothing listens on its source or its brokers.
pub fn yaml_definition(name: &str, topic_prefix: &str, port: &str) -> String {
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

/// Writes `text` to `dir/name`; answers the path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// One run of the binary.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
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

/// The binary with `args`, none of the CLI's variables inherited.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(capstan_binary().expect("capstan built"));
    cmd.args(args)
        .env_remove("CAPSTAN_URL")
        .env_remove("CAPSTAN_TOKEN")
        .env_remove("CAPSTAN_CA_FILE")
        .stdin(Stdio::null());
    cmd
}

pub fn capstan(args: &[&str]) -> Run {
    command(args).output().expect("run capstan").into()
}

pub fn capstan_with_stdin(args: &[&str], input: &str) -> Run {
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

/// Exit status 0, and no secret on standard output.
pub fn ok(run: &Run) {
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        !run.stdout.contains(SECRET),
        "the secret was printed: {run:?}"
    );
}

/// Exit status 1 with `capstan: <code>: …` as the last line of standard error (a wait notes
/// what it saw before it), no secret in it.
pub fn fails_with(run: &Run, code: &str) {
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(&format!("capstan: {code}: "))),
        "{code} not shown: {run:?}"
    );
    assert!(
        !run.stderr.contains(SECRET),
        "the secret was echoed: {run:?}"
    );
}
