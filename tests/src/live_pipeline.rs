//! The setup most live pipeline scenarios share: a schema of their own on a dev server, the
//! standard pipeline definition for it, and a pipeline created, resumed and streaming.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use reqwest::Method;
use serde_json::{json, Value};

use crate::cluster::Cluster;
use crate::{unique_name, DbEnv};

/// A current-thread runtime and a fresh schema on `db`.
pub struct LiveSchema {
    /// Runs the scenario's SQL.
    pub rt: tokio::runtime::Runtime,
    /// The server.
    pub db: DbEnv,
    /// The schema's name (unique to this run).
    pub name: String,
}

impl std::fmt::Debug for LiveSchema {
    /// The schema's name only (the server's settings hold a password).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSchema")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl LiveSchema {
    /// Creates a schema named after `prefix`, then runs `ddl` with every `{schema}` replaced
    /// by its name (e.g. `"CREATE TABLE `{schema}`.t (id INT PRIMARY KEY)"`).
    pub fn create(db: DbEnv, prefix: &str, ddl: &str) -> LiveSchema {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let name = unique_name(prefix);
        let live = LiveSchema { rt, db, name };
        live.sql(&format!(
            "CREATE DATABASE `{}`; {}",
            live.name,
            ddl.replace("{schema}", &live.name)
        ));
        live
    }

    /// A schema named after `prefix` with one table, `orders (id INT PRIMARY KEY, note
    /// VARCHAR(32))`, holding `rows` rows (ids 1..=rows) and analysed, so its row estimate is
    /// current: the table the snapshot progress tests read.
    pub fn with_orders(db: DbEnv, prefix: &str, rows: u32) -> LiveSchema {
        let live = LiveSchema::create(
            db,
            prefix,
            "CREATE TABLE `{schema}`.orders (id INT PRIMARY KEY, note VARCHAR(32) NOT NULL)",
        );
        live.sql(&format!(
            "SET SESSION cte_max_recursion_depth = {rows}; \
             INSERT INTO `{{schema}}`.orders (id, note) \
             WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {rows}) \
             SELECT n, 'an order' FROM seq; \
             ANALYZE TABLE `{{schema}}`.orders"
        ));
        live
    }

    /// Runs `sql` on an admin connection, with every `{schema}` replaced by the schema's name.
    pub fn sql(&self, sql: &str) {
        let sql = sql.replace("{schema}", &self.name);
        self.rt.block_on(async {
            self.db
                .admin_conn()
                .await
                .query_drop(sql)
                .await
                .expect("the scenario's sql runs");
        });
    }

    /// The definition of pipeline `name` capturing `{schema}.{table}` from `current` into
    /// topics under `topic_prefix` (at-least-once, default producer settings, TLS without
    /// verification); `server_id` must be unique among the server's replicas.
    pub fn definition(
        &self,
        pipeline: &str,
        flavor: &str,
        server_id: u32,
        table: &str,
        bootstrap: &str,
        topic_prefix: &str,
    ) -> Value {
        let db = &self.db;
        json!({
            "name": pipeline,
            "source": {
                "host": db.host, "port": db.port, "user": db.user, "password": db.password,
                "tls": {"mode": "verify_none"},
                "server_id": server_id, "flavor": flavor
            },
            "tables": {"include": [format!("{}.{table}", self.name)]},
            "kafka": {"bootstrap_servers": bootstrap, "topic_prefix": topic_prefix},
            "start_position": "current"
        })
    }
}

impl Cluster {
    /// POSTs `definition` via worker `via`, resumes it, and waits up to `timeout` until it
    /// streams: its owner and epoch.
    pub fn create_streaming(&self, via: u64, definition: &Value, timeout: Duration) -> (u64, u64) {
        let name = self.create_running(via, definition);
        self.wait_until(timeout, |c| {
            c.pipeline_owner(via, &name)
                .filter(|(_, _, s)| s == "streaming")
                .map(|(o, e, _)| (o, e))
        })
        .unwrap_or_else(|| panic!("never streaming: {:?}", self.pipeline_status(via, &name)))
    }

    /// POSTs `definition` via worker `via` and resumes it, asserting both were accepted; its
    /// name.
    pub fn create_running(&self, via: u64, definition: &Value) -> String {
        let name = definition["name"].as_str().expect("a named definition");
        let (s, b) = self
            .send(via, Method::POST, "/pipelines", Some(definition))
            .expect("api reachable");
        assert_eq!(s, 201, "{b}");
        let (s, b) = self
            .send(via, Method::PUT, &format!("/pipelines/{name}/resume"), None)
            .expect("api reachable");
        assert!(s < 300, "resume: {s} {b}");
        name.to_string()
    }
}
