//! [`SourceClient`]: one connection to the source, opened at every connect. It detects the
//! server flavour, checks the preconditions and reads the positions the dump is planned
//! from, then becomes the dump connection ([`SourceClient::into_dump`]).

use std::time::Duration;

use capstan_core::position::{Flavor, GtidSet, MariadbGtidPosition, Position};

use super::dump::{request_dump, ServerPositions};
use super::preconditions::ServerSettings;
use super::replica_conn::ReplicaConn;
use super::source_config::{FlavorChoice, ValidSourceConfig};
use super::source_error::SourceError;
use super::text_query::{query_first, query_rows};

/// The flavour a server version string announces.
pub fn detect_flavor(version: &str) -> Flavor {
    if version.to_ascii_lowercase().contains("mariadb") {
        Flavor::Mariadb
    } else {
        Flavor::Mysql
    }
}

/// A connection to the source, flavour known and preconditions checked.
#[derive(Debug)]
pub struct SourceClient {
    conn: ReplicaConn,
    flavor: Flavor,
    server_version: String,
}

impl SourceClient {
    /// Connects and authenticates (within `timeout`), detects the flavour (refusing one the
    /// configuration excludes) and checks the preconditions.
    pub async fn open(
        config: &ValidSourceConfig,
        timeout: Duration,
    ) -> Result<SourceClient, SourceError> {
        tokio::time::timeout(timeout, Self::open_inner(config))
            .await
            .map_err(|_| SourceError::Io {
                kind: "connect timed out".to_string(),
            })?
    }

    async fn open_inner(config: &ValidSourceConfig) -> Result<SourceClient, SourceError> {
        let mut conn = ReplicaConn::connect(config).await?;
        let server_version = query_first(&mut conn, "SELECT VERSION()")
            .await?
            .into_iter()
            .next()
            .unwrap_or_default();
        let flavor = detect_flavor(&server_version);
        let configured = match config.flavor {
            FlavorChoice::Detect => flavor,
            FlavorChoice::Mysql => Flavor::Mysql,
            FlavorChoice::Mariadb => Flavor::Mariadb,
        };
        if configured != flavor {
            return Err(SourceError::FlavorMismatch {
                configured: configured.as_str(),
                actual: flavor.as_str(),
            });
        }
        let mut client = SourceClient {
            conn,
            flavor,
            server_version,
        };
        client.settings().await?.check()?;
        Ok(client)
    }

    /// The server flavour.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// The server version string.
    pub fn server_version(&self) -> &str {
        &self.server_version
    }

    /// Reads the precondition settings (as checked at connect).
    pub async fn settings(&mut self) -> Result<ServerSettings, SourceError> {
        let row = query_first(&mut self.conn, ServerSettings::query(self.flavor))
            .await
            .map_err(|e| match e {
                SourceError::QueryFailed { .. } => SourceError::PreconditionQueryFailed,
                other => other,
            })?;
        ServerSettings::from_row(self.flavor, row)
    }

    /// Everything the dump is planned from: MySQL `gtid_executed` and `gtid_purged`;
    /// MariaDB `gtid_binlog_pos` and the GTID state at the start of the oldest binlog.
    pub async fn positions(&mut self) -> Result<ServerPositions, SourceError> {
        match self.flavor {
            Flavor::Mysql => {
                let row = query_first(
                    &mut self.conn,
                    "SELECT @@global.gtid_executed, @@global.gtid_purged",
                )
                .await?;
                let [executed, purged]: [String; 2] = row
                    .try_into()
                    .map_err(|_| SourceError::PreconditionQueryFailed)?;
                Ok(ServerPositions::Mysql {
                    executed: parse_gtid_set(&executed)?,
                    purged: parse_gtid_set(&purged)?,
                })
            }
            Flavor::Mariadb => {
                let pos = query_first(&mut self.conn, "SELECT @@global.gtid_binlog_pos").await?;
                let binlog_pos = parse_mariadb(pos.first().map_or("", String::as_str))?;
                let logs = query_rows(&mut self.conn, "SHOW BINARY LOGS")
                    .await
                    .map_err(|_| SourceError::PreconditionQueryFailed)?;
                let first = logs.first().and_then(|r| r.first().cloned().flatten());
                let oldest = match first {
                    None => MariadbGtidPosition::new(),
                    Some(file) if is_plain_file_name(&file) => {
                        let sql = format!("SELECT BINLOG_GTID_POS('{file}', 4)");
                        let state = query_first(&mut self.conn, &sql).await?;
                        parse_mariadb(state.first().map_or("", String::as_str))?
                    }
                    Some(_) => return Err(SourceError::PreconditionQueryFailed),
                };
                Ok(ServerPositions::Mariadb { binlog_pos, oldest })
            }
        }
    }

    /// Turns this connection into the dump stream from `position`.
    pub(crate) async fn into_dump(
        mut self,
        config: &ValidSourceConfig,
        position: &Position,
    ) -> Result<ReplicaConn, SourceError> {
        request_dump(
            &mut self.conn,
            config.server_id,
            config.heartbeat_period,
            position,
        )
        .await?;
        Ok(self.conn)
    }
}

/// A binlog file name safe to quote: the server's own names are `[A-Za-z0-9._-]`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn parse_gtid_set(text: &str) -> Result<GtidSet, SourceError> {
    text.parse()
        .map_err(|_| SourceError::PreconditionQueryFailed)
}

fn parse_mariadb(text: &str) -> Result<MariadbGtidPosition, SourceError> {
    text.parse()
        .map_err(|_| SourceError::PreconditionQueryFailed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavour_from_version_string() {
        assert_eq!(detect_flavor("9.7.4-2"), Flavor::Mysql);
        assert_eq!(detect_flavor("8.4.3"), Flavor::Mysql);
        assert_eq!(
            detect_flavor("10.11.19-MariaDB-0+deb12u1-log"),
            Flavor::Mariadb
        );
        assert_eq!(detect_flavor("5.5.5-10.11.6-MariaDB"), Flavor::Mariadb);
        assert!(is_plain_file_name("mariadb-bin.000001"));
        assert!(!is_plain_file_name("x'; DROP"));
    }
}
