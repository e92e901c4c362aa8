//! Support for capstan's integration tests: where the dev servers are, and how to reach them.
//!
//! The servers come from `deploy/dev/services.sh`; its `env` command prints the variables read
//! here. A test whose server is not configured is skipped with a message, except under CI
//! (`CI=true`), where a missing server is a failure: CI must never go green by testing nothing.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used)]

pub mod cluster;
pub mod switch_proxy;

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

/// `../shared/testdata/external` beside the repository, if present (skip or fail otherwise).
pub fn external_testdata() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/external");
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
