//! Support for capstan's integration tests: where the dev servers are, and how to reach them.
//!
//! The servers come from `deploy/dev/services.sh`; its `env` command prints the variables read
//! here. A test whose server is not configured is skipped with a message, except under CI
//! (`CI=true`), where a missing server is a failure: CI must never go green by testing nothing.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

pub mod cluster;
pub mod live_pipeline;
pub mod net_lab;
pub mod placement;
pub mod switch_proxy;
pub mod test_ca;
pub mod verify_run;

use std::path::PathBuf;

use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

/// Connection settings of one dev server.
#[derive(Clone, Debug)]
pub struct DbEnv {
    /// Which server, for messages: "mysql" or "mariadb".
    pub name: &'static str,
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The least-privilege capstan account.
    pub user: String,
    /// Its password.
    pub password: String,
    /// An account allowed to write, for tests that make changes.
    pub admin_user: String,
    /// Its password.
    pub admin_password: String,
}

/// True when running under CI, where skipping is not allowed.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (returns `None` after saying why) or, under CI, fails.
pub fn skip_or_fail<T>(why: &str) -> Option<T> {
    if under_ci() {
        panic!("{why} (CI=true: a missing prerequisite is a failure)");
    }
    eprintln!("skipping: {why}");
    None
}

fn from_env(name: &'static str, prefix: &str) -> Option<DbEnv> {
    let var = |k: &str| std::env::var(format!("{prefix}_{k}")).ok();
    let (
        Some(host),
        Some(port),
        Some(user),
        Some(password),
        Some(admin_user),
        Some(admin_password),
    ) = (
        var("HOST"),
        var("PORT"),
        var("USER"),
        var("PASSWORD"),
        var("ADMIN_USER"),
        var("ADMIN_PASSWORD"),
    )
    else {
        return skip_or_fail(&format!(
            "{prefix}_* is not set; run `eval \"$(deploy/dev/services.sh env)\"` after `deploy/dev/services.sh up`"
        ));
    };
    let port = port.parse().expect("port is a number");
    Some(DbEnv {
        name,
        host,
        port,
        user,
        password,
        admin_user,
        admin_password,
    })
}

/// The MySQL 9.x dev server, if configured.
pub fn mysql() -> Option<DbEnv> {
    from_env("mysql", "CAPSTAN_MYSQL")
}

/// The MySQL *twin*: another MySQL dev server (its own data and `server_uuid`), with the
/// accounts of [`mysql`], on `CAPSTAN_MYSQL_TWIN_PORT`.
pub fn mysql_twin() -> Option<DbEnv> {
    let db = mysql()?;
    let Some(port) = std::env::var("CAPSTAN_MYSQL_TWIN_PORT").ok() else {
        return skip_or_fail(
            "CAPSTAN_MYSQL_TWIN_PORT is not set; run `eval \"$(deploy/dev/services.sh env)\"` after `deploy/dev/services.sh up`",
        );
    };
    Some(DbEnv {
        port: port.parse().expect("port is a number"),
        ..db
    })
}

/// The MariaDB dev server, if configured.
pub fn mariadb() -> Option<DbEnv> {
    from_env("mariadb", "CAPSTAN_MARIADB")
}

impl DbEnv {
    fn opts(&self, user: &str, password: &str) -> Opts {
        // The dev servers use self-signed certificates; tests encrypt but do not verify.
        let ssl = SslOpts::default().with_danger_accept_invalid_certs(true);
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(user))
            .pass(Some(password))
            .ssl_opts(Some(ssl))
            .into()
    }

    /// A connection as the least-privilege capstan account.
    pub async fn capstan_conn(&self) -> Conn {
        Conn::new(self.opts(&self.user, &self.password))
            .await
            .unwrap_or_else(|e| panic!("connect to {} as capstan: {e}", self.name))
    }

    /// A connection as the admin account, for writes.
    pub async fn admin_conn(&self) -> Conn {
        Conn::new(self.opts(&self.admin_user, &self.admin_password))
            .await
            .unwrap_or_else(|e| panic!("connect to {} as admin: {e}", self.name))
    }
}

/// The dev services' real Apache Kafka broker (a KRaft controller+broker started by
/// `deploy/dev/services.sh up`).
#[derive(Clone, Debug)]
pub struct KafkaEnv {
    bootstrap: String,
}

/// The real broker (`CAPSTAN_KAFKA_BOOTSTRAP`, printed by `deploy/dev/services.sh env`), if
/// configured.
pub fn kafka() -> Option<KafkaEnv> {
    match std::env::var("CAPSTAN_KAFKA_BOOTSTRAP") {
        Ok(b) if !b.is_empty() => Some(KafkaEnv { bootstrap: b }),
        _ => skip_or_fail(
            "CAPSTAN_KAFKA_BOOTSTRAP is not set; run `eval \"$(deploy/dev/services.sh env)\"` after `deploy/dev/services.sh up`",
        ),
    }
}

impl KafkaEnv {
    /// Its `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// Creates `topic` with `partitions` partitions (an existing one is left as it is).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
    ) -> Result<(), String> {
        use rdkafka::admin::{NewTopic, TopicReplication};
        let admin = self.admin_client()?;
        let topic_spec = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        let options = admin_options();
        let results = on_own_thread(admin.create_topics(std::iter::once(&topic_spec), &options))?
            .map_err(|e| e.to_string())?;
        for r in results {
            match r {
                Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((t, code)) => return Err(format!("create {t}: {code:?}")),
            }
        }
        Ok(())
    }

    /// Deletes `topics` (one that does not exist is no error): a benchmark's topics hold
    /// gigabytes, and the dev broker keeps every topic until it is deleted.
    pub fn delete_topics(&self, topics: &[&str]) -> Result<(), String> {
        let admin = self.admin_client()?;
        let options = admin_options();
        let results =
            on_own_thread(admin.delete_topics(topics, &options))?.map_err(|e| e.to_string())?;
        for r in results {
            match r {
                Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition)) => {}
                Err((t, code)) => return Err(format!("delete {t}: {code:?}")),
            }
        }
        Ok(())
    }

    fn admin_client(
        &self,
    ) -> Result<rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>, String> {
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()
            .map_err(|e| e.to_string())
    }
}

/// Admin requests wait 30 s at most.
fn admin_options() -> rdkafka::admin::AdminOptions {
    rdkafka::admin::AdminOptions::new().operation_timeout(Some(std::time::Duration::from_secs(30)))
}

/// Runs `request` to completion on a thread and runtime of its own: callers may be inside a
/// tokio runtime.
fn on_own_thread<F>(request: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|rt| rt.block_on(request))
                .map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "admin thread panicked".to_string())?
    })
}

/// This package's directory in the checkout being tested: cargo's runtime
/// `CARGO_MANIFEST_DIR` (a test binary built in another checkout that shares the target
/// directory still looks here), else the one it was compiled in.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `../shared/testdata/external` beside the repository, if present (skip or fail otherwise).
pub fn external_testdata() -> Option<PathBuf> {
    let dir = manifest_dir().join("../../shared/testdata/external");
    if dir.is_dir() {
        Some(dir)
    } else {
        skip_or_fail(&format!("fixtures not found at {}", dir.display()))
    }
}

/// A name unique to this process and call, for schemas and tags that tests create.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        nanos % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}
