//! [`SourceClient`]: the query connection (mysql_async, rustls) opened at every connect. It
//! detects the server flavour, checks the preconditions, and reads the positions the dump is
//! planned from. The dump itself runs on a separate connection
//! ([`ReplicaConn`](super::replica_conn)).

use std::time::Duration;

use capstan_core::position::{Flavor, GtidSet, MariadbGtidPosition};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts};

use super::dump::ServerPositions;
use super::preconditions::ServerSettings;
use super::source_config::{FlavorChoice, TlsChoice, ValidSourceConfig};
use super::source_error::SourceError;

/// The flavour a server version string announces.
pub fn detect_flavor(version: &str) -> Flavor {
    if version.to_ascii_lowercase().contains("mariadb") {
        Flavor::Mariadb
    } else {
        Flavor::Mysql
    }
}

/// A query connection to the source, preconditions checked.
#[derive(Debug)]
pub struct SourceClient {
    conn: Conn,
    flavor: Flavor,
    server_version: String,
}

impl SourceClient {
    /// Connects (within `timeout`), detects the flavour (refusing one the configuration
    /// excludes) and checks the preconditions.
    pub async fn open(
        config: &ValidSourceConfig,
        timeout: Duration,
    ) -> Result<SourceClient, SourceError> {
        let conn = tokio::time::timeout(timeout, Conn::new(opts(config)))
            .await
            .map_err(|_| SourceError::Io {
                kind: "connect timed out".to_string(),
            })??;
        let mut client = SourceClient {
            conn,
            flavor: Flavor::Mysql,
            server_version: String::new(),
        };
        let version: Option<String> = client.conn.query_first("SELECT VERSION()").await?;
        client.server_version = version.ok_or(SourceError::PreconditionQueryFailed)?;
        client.flavor = detect_flavor(&client.server_version);
        let configured = match config.flavor {
            FlavorChoice::Detect => client.flavor,
            FlavorChoice::Mysql => Flavor::Mysql,
            FlavorChoice::Mariadb => Flavor::Mariadb,
        };
        if configured != client.flavor {
            return Err(SourceError::FlavorMismatch {
                configured: configured.as_str(),
                actual: client.flavor.as_str(),
            });
        }
        ServerSettings::read(&mut client.conn, client.flavor)
            .await?
            .check()?;
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

    /// The underlying connection, for callers that need other queries.
    pub fn conn(&mut self) -> &mut Conn {
        &mut self.conn
    }

    /// Everything the dump is planned from: MySQL `gtid_executed` and `gtid_purged`;
    /// MariaDB `gtid_binlog_pos` and the GTID state at the start of the oldest binlog.
    pub async fn positions(&mut self) -> Result<ServerPositions, SourceError> {
        match self.flavor {
            Flavor::Mysql => {
                let row: Option<(String, String)> = self
                    .conn
                    .query_first("SELECT @@global.gtid_executed, @@global.gtid_purged")
                    .await?;
                let (executed, purged) = row.ok_or(SourceError::PreconditionQueryFailed)?;
                Ok(ServerPositions::Mysql {
                    executed: parse_gtid_set(&executed)?,
                    purged: parse_gtid_set(&purged)?,
                })
            }
            Flavor::Mariadb => {
                let pos: Option<String> = self
                    .conn
                    .query_first("SELECT @@global.gtid_binlog_pos")
                    .await?;
                let binlog_pos = parse_mariadb(&pos.unwrap_or_default())?;
                let logs: Vec<mysql_async::Row> = self.conn.query("SHOW BINARY LOGS").await?;
                let first: Option<String> = logs.first().and_then(|r| r.get(0));
                let oldest = match first {
                    None => MariadbGtidPosition::new(),
                    Some(file) => {
                        let state: Option<Option<String>> = self
                            .conn
                            .exec_first("SELECT BINLOG_GTID_POS(?, 4)", (file,))
                            .await?;
                        parse_mariadb(&state.flatten().unwrap_or_default())?
                    }
                };
                Ok(ServerPositions::Mariadb { binlog_pos, oldest })
            }
        }
    }

    /// Closes the connection (best effort).
    pub async fn close(self) {
        let _ = self.conn.disconnect().await;
    }
}

fn parse_gtid_set(text: &str) -> Result<GtidSet, SourceError> {
    text.parse()
        .map_err(|_| SourceError::PreconditionQueryFailed)
}

fn parse_mariadb(text: &str) -> Result<MariadbGtidPosition, SourceError> {
    text.parse()
        .map_err(|_| SourceError::PreconditionQueryFailed)
}

/// mysql_async options for `config`: same host, account and TLS choice as the dump
/// connection, no pool, no socket shortcut.
fn opts(config: &ValidSourceConfig) -> Opts {
    let ssl = match &config.tls {
        TlsChoice::Disabled => None,
        TlsChoice::VerifyNone => Some(
            SslOpts::default()
                .with_danger_accept_invalid_certs(true)
                .with_danger_skip_domain_validation(true),
        ),
        TlsChoice::VerifyCa(ca) => Some(
            SslOpts::default()
                .with_root_certs(vec![ca.clone().into()])
                .with_danger_skip_domain_validation(true),
        ),
    };
    OptsBuilder::default()
        .ip_or_hostname(config.host.clone())
        .tcp_port(config.port)
        .user(Some(config.user.clone()))
        .pass(Some(config.password.expose().to_string()))
        .prefer_socket(false)
        .ssl_opts(ssl)
        .into()
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
    }
}
