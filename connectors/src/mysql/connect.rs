//! [`SourceClient`]: one connection to the source, opened at every connect. It detects the
//! server flavour, checks the preconditions and reads the positions the dump is planned
//! from, then becomes the dump connection ([`SourceClient::into_dump`]).

use std::time::Duration;

use capstan_core::position::{Flavor, GtidSet, MariadbGtidPosition, Position};

use super::dump::{request_dump, ServerPositions};
use super::preconditions::ServerSettings;
use super::replica_conn::{ReplicaConn, ServerOrIo};
use super::snapshot::server_identity_sql;
use super::source_config::{FlavorChoice, ValidSourceConfig};
use super::source_error::SourceError;
use super::text_query::{query_first, query_rows};
use super::xid::XidKey;

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
    server_identity: String,
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
        let server_identity = query_first(&mut conn, server_identity_sql(flavor))
            .await?
            .into_iter()
            .next()
            .filter(|s| !s.is_empty())
            .ok_or(SourceError::PreconditionQueryFailed)?;
        let mut client = SourceClient {
            conn,
            flavor,
            server_version,
            server_identity,
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

    /// The server's identity, read at connect with the snapshot reader's query: MySQL
    /// `@@server_uuid`; MariaDB `server_id=…,host=…,port=…`.
    pub fn server_identity(&self) -> &str {
        &self.server_identity
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

    /// The XA transactions prepared and not resolved on the server, as XID keys; the XIDs
    /// themselves are dropped here. MySQL: `XA RECOVER CONVERT XID` (needs
    /// `XA_RECOVER_ADMIN`). MariaDB: `XA RECOVER FORMAT='SQL'` (no privilege beyond the
    /// source account's; the XID comes as a statement would name it).
    pub async fn recovered_xa(&mut self) -> Result<Vec<XidKey>, SourceError> {
        let (sql, key): (_, RecoverRowKey) = match self.flavor {
            Flavor::Mysql => ("XA RECOVER CONVERT XID", recover_row_key),
            Flavor::Mariadb => ("XA RECOVER FORMAT='SQL'", recover_sql_row_key),
        };
        let rows = query_rows(&mut self.conn, sql).await.map_err(|e| match e {
            ServerOrIo::Server(err) => SourceError::QueryFailed { code: err.code },
            ServerOrIo::Source(s) => s,
        })?;
        rows.iter()
            .map(|row| key(row).ok_or(SourceError::PreconditionQueryFailed))
            .collect()
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

/// One `XA RECOVER CONVERT XID` row (formatID, gtrid_length, bqual_length, data as `0x…`).
fn recover_row_key(row: &[Option<String>]) -> Option<XidKey> {
    let [Some(format_id), Some(gtrid_len), Some(bqual_len), Some(data)] = row else {
        return None;
    };
    let hex = data
        .strip_prefix("0x")
        .or_else(|| data.strip_prefix("0X"))?;
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    XidKey::from_recover_row(
        format_id.parse().ok()?,
        gtrid_len.parse().ok()?,
        bqual_len.parse().ok()?,
        &bytes,
    )
}

/// Reads the XID key of one `XA RECOVER` row.
type RecoverRowKey = fn(&[Option<String>]) -> Option<XidKey>;

/// One MariaDB `XA RECOVER FORMAT='SQL'` row (formatID, gtrid_length, bqual_length, data as
/// `'gtrid'` or `X'…',X'…',formatID`).
fn recover_sql_row_key(row: &[Option<String>]) -> Option<XidKey> {
    let [Some(format_id), Some(gtrid_len), Some(bqual_len), Some(data)] = row else {
        return None;
    };
    XidKey::from_recover_sql(
        format_id.parse().ok()?,
        gtrid_len.parse().ok()?,
        bqual_len.parse().ok()?,
        data,
    )
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

    #[test]
    fn recover_rows_key_like_statements() {
        let row = |d: &str| {
            ["1", "2", "1", d]
                .iter()
                .map(|s| Some(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            recover_row_key(&row("0x616263")),
            XidKey::from_statement("XA COMMIT X'6162',X'63',1")
        );
        assert_eq!(recover_row_key(&row("616263")), None);
        assert_eq!(recover_row_key(&row("0x6162")), None);
        assert_eq!(recover_row_key(&[None]), None);
        let sql_row = |f: &str, g: &str, b: &str, d: &str| {
            [f, g, b, d]
                .iter()
                .map(|s| Some(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            recover_sql_row_key(&sql_row("1", "2", "1", "X'6162',X'63',1")),
            XidKey::from_statement("XA COMMIT X'6162',X'63',1")
        );
        assert_eq!(
            recover_sql_row_key(&sql_row("1", "3", "0", "'rec'")),
            XidKey::from_statement("XA COMMIT 'rec'")
        );
        assert_eq!(recover_sql_row_key(&sql_row("1", "9", "0", "'rec'")), None);
        assert_eq!(recover_sql_row_key(&[None]), None);
    }
}
