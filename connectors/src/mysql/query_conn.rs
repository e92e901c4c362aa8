//! [`QueryConn`]: a query connection on the source's own protocol client — the snapshot
//! reader's connection.
//!
//! It is a [`ReplicaConn`] (TCP, handshake, rustls with capstan's verifiers, auth) that also
//! announces `CLIENT_MULTI_STATEMENTS` and `CLIENT_MULTI_RESULTS`, with three things on top:
//!
//! - **text queries with several results**: [`QueryConn::query`] sends one COM_QUERY (one or
//!   more statements), [`QueryConn::next_result`] reads one statement's result at a time
//!   until no `SERVER_MORE_RESULTS_EXISTS` is left — so a caller can act between the
//!   results of one round trip (the snapshot reader notes when `LOCK TABLES` returned);
//! - **prepared statements** (binary protocol, values come back typed): COM_STMT_PREPARE
//!   once per SQL text ([`StmtCache`], closed with COM_STMT_CLOSE when evicted),
//!   COM_STMT_EXECUTE with positional parameters ([`ComStmtExecuteRequestBuilder`]), and
//!   rows streamed one packet at a time ([`QueryConn::next_row`] lends a [`BinaryRow`] that
//!   parses its values straight from the packet buffer; nothing per row is kept);
//! - **one response at a time**: whatever the server still owes (rows a caller stopped
//!   reading, further results) is read and dropped before the next command, and after an
//!   I/O or protocol failure the connection refuses further use (its framing is lost).
//!
//! # Why not mysql_async
//!
//! The reasons of `replica_conn` hold here too: mysql_async 0.37 recognises rustls'
//! host-name mismatch by the error's text, which rustls 0.23 no longer prints, so VERIFY_CA
//! against a certificate without names (MySQL's auto-generated one) cannot connect there
//! (blackbeam/mysql_async#404). On this connection `verify_ca` is the stream's: chain
//! checked, name not (`tls`).
//!
//! Server errors keep their code only (`ServerErr` never prints its message).

use std::sync::Arc;

use mysql_common::constants::{CapabilityFlags, Command};
use mysql_common::packets::Column;
use mysql_common::params::Params;
use mysql_common::prelude::FromRow;
use mysql_common::row::{new_row, Row};
use mysql_common::value::Value;

use super::query_packets::{
    column_def, eof_more_results, response_head, text_values, BinaryRow, Malformed, ResponseHead,
};
use super::replica_conn::{parse_err, ReplicaConn, ServerOrIo};
use super::source_config::ValidSourceConfig;
use super::source_error::SourceError;
use super::stmt_cache::StmtCache;

/// Prepared statements kept per connection.
const STMT_CACHE: usize = 64;

/// ER_NEED_REPREPARE: the statement's tables changed; prepare it again.
const NEED_REPREPARE: u16 = 1615;

mod prepared_exec;

/// What the server still owes on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing: a command may be sent.
    Idle,
    /// The head of another result (SERVER_MORE_RESULTS_EXISTS).
    Head,
    /// Rows of the current result set, then its EOF.
    Rows,
    /// A failure lost the framing: the connection is unusable.
    Broken,
}

/// A query connection. See the module documentation.
pub(crate) struct QueryConn {
    conn: ReplicaConn,
    buf: Vec<u8>,
    stmts: StmtCache,
    /// The columns of the binary result set being read.
    columns: Arc<[Column]>,
    state: State,
}

impl std::fmt::Debug for QueryConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryConn")
            .field("conn", &self.conn)
            .field("prepared", &self.stmts.len())
            .field("state", &self.state)
            .finish()
    }
}

fn malformed(site: Malformed) -> ServerOrIo {
    ServerOrIo::Source(SourceError::UnexpectedPacket { site })
}

impl QueryConn {
    /// Connects like the dump connection (same TLS choice), able to run several statements
    /// per query. A server refusal keeps its error code (the caller bounds the time).
    pub(crate) async fn connect(config: &ValidSourceConfig) -> Result<QueryConn, ServerOrIo> {
        let caps = CapabilityFlags::CLIENT_MULTI_STATEMENTS
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_PS_MULTI_RESULTS;
        Ok(QueryConn::over(
            ReplicaConn::connect_with(config, caps).await?,
        ))
    }

    /// A query connection on an authenticated `conn`.
    pub(crate) fn over(conn: ReplicaConn) -> QueryConn {
        QueryConn {
            conn,
            buf: Vec::with_capacity(16 * 1024),
            stmts: StmtCache::new(STMT_CACHE),
            columns: Arc::from(Vec::new()),
            state: State::Idle,
        }
    }

    /// Sends `sql` (one statement, or several separated by `;`). Read its results with
    /// [`QueryConn::next_result`]; whatever is left unread is dropped before the next
    /// command.
    pub(crate) async fn query(&mut self, sql: &str) -> Result<(), ServerOrIo> {
        self.settle().await?;
        let mut cmd = Vec::with_capacity(sql.len() + 1);
        cmd.push(Command::COM_QUERY as u8);
        cmd.extend_from_slice(sql.as_bytes());
        self.send(&cmd).await?;
        self.state = State::Head;
        Ok(())
    }

    /// The next statement's result of the last [`QueryConn::query`]: its rows (none for a
    /// statement without a result set; values as text bytes or NULL), `None` once every
    /// result was read. A failed statement is its server error, and the server runs nothing
    /// after it.
    pub(crate) async fn next_result<T: FromRow>(&mut self) -> Result<Option<Vec<T>>, ServerOrIo> {
        match self.state {
            State::Idle => return Ok(None),
            State::Broken => return Err(broken()),
            // rows of an earlier result nobody read: an error among them is not this one's
            State::Rows => ignore_server_err(self.skip_rows().await)?,
            State::Head => {}
        }
        if self.state != State::Head {
            return Ok(None);
        }
        let columns = match self.read_head().await? {
            None => return Ok(Some(Vec::new())),
            Some(columns) => columns,
        };
        let mut defs = Vec::with_capacity(columns.min(4096));
        for _ in 0..columns {
            self.read().await?;
            match column_def(&self.buf) {
                Ok(c) => defs.push(c),
                Err(site) => return Err(self.fail(site)),
            }
        }
        self.expect_eof().await?;
        let defs: Arc<[Column]> = Arc::from(defs);
        let mut rows = Vec::new();
        loop {
            self.read().await?;
            if self.end_of_rows()? {
                return Ok(Some(rows));
            }
            match text_values(&self.buf, columns) {
                Ok(values) => rows.push(from_row(new_row(values, Arc::clone(&defs)))?),
                Err(site) => return Err(self.fail(site)),
            }
        }
    }

    /// Runs `sql` and drops every result; the first statement error is returned.
    pub(crate) async fn query_drop(&mut self, sql: impl AsRef<str>) -> Result<(), ServerOrIo> {
        self.query(sql.as_ref()).await?;
        self.drop_result().await
    }

    /// Runs `sql` (one statement, text protocol) and returns its first row as `T`.
    pub(crate) async fn query_first<T: FromRow, Q: AsRef<str>>(
        &mut self,
        sql: Q,
    ) -> Result<Option<T>, ServerOrIo> {
        self.query(sql.as_ref()).await?;
        let rows = self.next_result::<T>().await?.unwrap_or_default();
        self.drop_result().await?;
        Ok(rows.into_iter().next())
    }

    /// The next row of the binary result set [`QueryConn::exec_stream`] started; `None`
    /// after the last one. The row borrows the connection's buffer until the next call.
    pub(crate) async fn next_row(&mut self) -> Result<Option<BinaryRow<'_>>, ServerOrIo> {
        match self.state {
            State::Rows => {}
            State::Broken => return Err(broken()),
            State::Idle | State::Head => return Ok(None),
        }
        self.read().await?;
        if self.end_of_rows()? {
            return Ok(None);
        }
        let QueryConn {
            buf,
            columns,
            state,
            ..
        } = self;
        match BinaryRow::parse(buf, columns) {
            Ok(row) => Ok(Some(row)),
            Err(site) => {
                *state = State::Broken;
                Err(malformed(site))
            }
        }
    }

    /// Reads and drops whatever the last command still owes (rows, further results); the
    /// first statement error among them is returned.
    pub(crate) async fn drop_result(&mut self) -> Result<(), ServerOrIo> {
        let mut first_err = None;
        loop {
            let step = match self.state {
                State::Idle => break,
                State::Broken => return Err(broken()),
                State::Rows => self.skip_rows().await,
                State::Head => match self.read_head().await {
                    Ok(None) => Ok(()),
                    Ok(Some(columns)) => self.skip_definitions(columns).await,
                    Err(e) => Err(e),
                },
            };
            match step {
                Ok(()) => {}
                Err(ServerOrIo::Server(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(e) => return Err(e),
            }
        }
        match first_err {
            Some(e) => Err(ServerOrIo::Server(e)),
            None => Ok(()),
        }
    }

    /// Drops what is owed before a new command; statement errors in it are not this
    /// command's.
    async fn settle(&mut self) -> Result<(), ServerOrIo> {
        ignore_server_err(self.drop_result().await)
    }

    /// Reads a result head: `None` for a statement without rows (the state moves to the
    /// next result or idle), `Some(columns)` for a result set (its definitions follow).
    async fn read_head(&mut self) -> Result<Option<usize>, ServerOrIo> {
        self.read().await?;
        match response_head(&self.buf) {
            Ok(ResponseHead::Done { more }) => {
                self.state = if more { State::Head } else { State::Idle };
                Ok(None)
            }
            Ok(ResponseHead::Error(e)) => {
                self.state = State::Idle;
                Err(ServerOrIo::Server(e))
            }
            Ok(ResponseHead::ResultSet { columns }) => {
                self.state = State::Rows;
                Ok(Some(columns))
            }
            Err(site) => Err(self.fail(site)),
        }
    }

    /// Skips `n` definition packets and the EOF after them.
    async fn skip_definitions(&mut self, n: usize) -> Result<(), ServerOrIo> {
        for _ in 0..n {
            self.read().await?;
            if eof_more_results(&self.buf) != Ok(None) {
                return Err(self.fail("fewer definitions than announced"));
            }
        }
        self.expect_eof().await
    }

    async fn expect_eof(&mut self) -> Result<(), ServerOrIo> {
        self.read().await?;
        match eof_more_results(&self.buf) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(self.fail("more definitions than announced")),
            Err(site) => Err(self.fail(site)),
        }
    }

    /// Reads rows up to the end of the current result set (an error packet ends it too,
    /// and is returned).
    async fn skip_rows(&mut self) -> Result<(), ServerOrIo> {
        while self.state == State::Rows {
            self.read().await?;
            self.end_of_rows()?;
        }
        Ok(())
    }

    /// True (and the state moved on) if the packet just read ends the result set: its EOF,
    /// or an error packet (returned).
    fn end_of_rows(&mut self) -> Result<bool, ServerOrIo> {
        if self.buf.first() == Some(&0xFF) {
            self.state = State::Idle;
            return Err(ServerOrIo::Server(parse_err(&self.buf)));
        }
        match eof_more_results(&self.buf) {
            Ok(None) => Ok(false),
            Ok(Some(more)) => {
                self.state = if more { State::Head } else { State::Idle };
                Ok(true)
            }
            Err(site) => Err(self.fail(site)),
        }
    }

    async fn send(&mut self, payload: &[u8]) -> Result<(), ServerOrIo> {
        if self.state == State::Broken {
            return Err(broken());
        }
        match self.conn.command(payload).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.state = State::Broken;
                Err(ServerOrIo::Source(e))
            }
        }
    }

    async fn read(&mut self) -> Result<(), ServerOrIo> {
        if self.state == State::Broken {
            return Err(broken());
        }
        match self.conn.read(&mut self.buf).await {
            Ok(()) => Ok(()),
            Err(e) => {
                self.state = State::Broken;
                Err(ServerOrIo::Source(e))
            }
        }
    }

    /// Marks the connection unusable and returns the error for `site`.
    fn fail(&mut self, site: Malformed) -> ServerOrIo {
        self.state = State::Broken;
        malformed(site)
    }
}

/// Positional parameters (named ones are not used here).
fn positional(params: Params) -> Result<Vec<Value>, ServerOrIo> {
    match params {
        Params::Empty => Ok(Vec::new()),
        Params::Positional(values) => Ok(values),
        Params::Named(_) => Err(ServerOrIo::Source(SourceError::UnexpectedPacket {
            site: "named statement parameters",
        })),
    }
}

/// `row` as `T`; a row of another shape is an error, its values dropped unseen.
fn from_row<T: FromRow>(row: Row) -> Result<T, ServerOrIo> {
    T::from_row_opt(row).map_err(|_| {
        ServerOrIo::Source(SourceError::UnexpectedPacket {
            site: "row of an unexpected shape",
        })
    })
}

/// `r` with a server error taken as done: it ended a result nobody is waiting for.
fn ignore_server_err(r: Result<(), ServerOrIo>) -> Result<(), ServerOrIo> {
    match r {
        Ok(()) | Err(ServerOrIo::Server(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

fn broken() -> ServerOrIo {
    ServerOrIo::Source(SourceError::UnexpectedPacket {
        site: "connection unusable after an earlier failure",
    })
}
