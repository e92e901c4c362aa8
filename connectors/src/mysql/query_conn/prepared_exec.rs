//! Prepared statements on a [`QueryConn`]: COM_STMT_PREPARE once per SQL text (the LRU cache
//! closes what it evicts), COM_STMT_EXECUTE with positional parameters, the binary result's
//! head, and a text statement sent in the same round trip before an execution.

use std::sync::Arc;

use mysql_common::constants::Command;
use mysql_common::packets::{Column, ComStmtClose, ComStmtExecuteRequestBuilder};
use mysql_common::params::Params;
use mysql_common::prelude::FromRow;
use mysql_common::proto::MySerialize;
use mysql_common::row::new_row;
use mysql_common::value::Value;

use super::{from_row, ignore_server_err, positional, QueryConn, State, NEED_REPREPARE};
use crate::mysql::query_packets::{binary_column, prepare_ok};
use crate::mysql::replica_conn::{parse_err, ServerOrIo};
use crate::mysql::source_error::SourceError;
use crate::mysql::stmt_cache::PreparedStmt;

impl QueryConn {
    /// Every row of `sql` executed as a prepared statement with `params`, as `T`s.
    pub(crate) async fn exec<T: FromRow>(
        &mut self,
        sql: impl AsRef<str>,
        params: impl Into<Params>,
    ) -> Result<Vec<T>, ServerOrIo> {
        self.exec_stream(sql.as_ref(), &positional(params.into())?)
            .await?;
        let mut rows = Vec::new();
        while let Some(row) = self.next_row_values().await? {
            rows.push(from_row(new_row(row, Arc::clone(&self.columns)))?);
        }
        Ok(rows)
    }

    /// The first row of `sql` executed as a prepared statement with `params`, as `T`.
    pub(crate) async fn exec_first<T: FromRow>(
        &mut self,
        sql: impl AsRef<str>,
        params: impl Into<Params>,
    ) -> Result<Option<T>, ServerOrIo> {
        self.exec_stream(sql.as_ref(), &positional(params.into())?)
            .await?;
        let first = self.next_row_values().await?;
        self.drop_result().await?;
        first
            .map(|row| from_row(new_row(row, Arc::clone(&self.columns))))
            .transpose()
    }

    /// The next row of the current binary result set as values.
    async fn next_row_values(&mut self) -> Result<Option<Vec<Value>>, ServerOrIo> {
        let row = match self.next_row().await? {
            None => return Ok(None),
            Some(row) => row.to_vec(),
        };
        row.map(Some).map_err(|site| self.fail(site))
    }

    /// Executes `sql` as a prepared statement (prepared once per text) with positional
    /// `params`, and returns its result set's columns (empty without a result set). Read the
    /// rows with [`QueryConn::next_row`].
    pub(crate) async fn exec_stream(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Arc<[Column]>, ServerOrIo> {
        match self.exec_once(sql, params).await {
            Err(ServerOrIo::Server(e)) if e.code == NEED_REPREPARE => {
                self.exec_once(sql, params).await
            }
            other => other,
        }
    }

    async fn exec_once(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Arc<[Column]>, ServerOrIo> {
        let cmd = self.execute_command(sql, params).await?;
        self.send(&cmd).await?;
        self.state = State::Head;
        self.exec_head(sql).await
    }

    /// After what is owed was dropped, the COM_STMT_EXECUTE of `sql` (prepared if it is not
    /// cached) with `params`; refused before the server sees it when the parameter count is
    /// wrong or the parameters would need long data.
    async fn execute_command(
        &mut self,
        sql: &str,
        params: &[Value],
    ) -> Result<Vec<u8>, ServerOrIo> {
        self.settle().await?;
        let stmt = self.prepare(sql).await?;
        if usize::from(stmt.params) != params.len() {
            return Err(ServerOrIo::Source(SourceError::UnexpectedPacket {
                site: "statement parameter count",
            }));
        }
        let (request, as_long_data) = ComStmtExecuteRequestBuilder::new(stmt.id).build(params);
        if as_long_data {
            return Err(ServerOrIo::Source(SourceError::UnexpectedPacket {
                site: "statement parameters too large",
            }));
        }
        let mut cmd = Vec::new();
        request.serialize(&mut cmd);
        Ok(cmd)
    }

    /// Sends the text statement `prelude` (one statement without a result set) and, in the
    /// same round trip, the prepared statement `sql` with `params`; returns the statement's
    /// columns as [`QueryConn::exec_stream`] does. The server runs the statement whatever
    /// `prelude` did: when `prelude` fails, the statement's answer is read and dropped and
    /// `prelude`'s error returned.
    pub(crate) async fn exec_stream_after(
        &mut self,
        prelude: &str,
        sql: &str,
        params: &[Value],
    ) -> Result<Arc<[Column]>, ServerOrIo> {
        let cmd = self.execute_command(sql, params).await?;
        let mut first = Vec::with_capacity(prelude.len() + 1);
        first.push(Command::COM_QUERY as u8);
        first.extend_from_slice(prelude.as_bytes());
        self.send(&first).await?;
        self.send(&cmd).await?;
        // prelude's answer, then the statement's (each reply's packets count from 1)
        self.conn.expect_reply();
        self.state = State::Head;
        let prelude_result = self.read_head().await;
        self.conn.expect_reply();
        match prelude_result {
            Ok(None) if self.state == State::Idle => {}
            Ok(_) => return Err(self.fail("a prelude statement with a result")),
            Err(ServerOrIo::Server(e)) => {
                self.state = State::Head;
                ignore_server_err(self.drop_result().await)?;
                return Err(ServerOrIo::Server(e));
            }
            Err(e) => return Err(e),
        }
        self.state = State::Head;
        match self.exec_head(sql).await {
            // the prelude stands (its transaction is open): execute the statement again alone
            Err(ServerOrIo::Server(e)) if e.code == NEED_REPREPARE => {
                self.exec_once(sql, params).await
            }
            other => other,
        }
    }

    /// Reads the answer to a COM_STMT_EXECUTE of `sql`: its result set's columns (empty
    /// without one), the rows left to [`QueryConn::next_row`].
    async fn exec_head(&mut self, sql: &str) -> Result<Arc<[Column]>, ServerOrIo> {
        let columns = match self.read_head().await {
            Ok(None) => return Ok(Arc::from(Vec::new())),
            Ok(Some(columns)) => columns,
            Err(ServerOrIo::Server(e)) => {
                // the statement may be what failed: prepare it afresh next time
                if let Some(stmt) = self.stmts.remove(sql) {
                    self.close(stmt).await?;
                }
                return Err(ServerOrIo::Server(e));
            }
            Err(e) => return Err(e),
        };
        let mut defs = Vec::with_capacity(columns);
        for _ in 0..columns {
            self.read().await?;
            match binary_column(&self.buf) {
                Ok(c) => defs.push(c),
                Err(site) => return Err(self.fail(site)),
            }
        }
        self.expect_eof().await?;
        self.columns = Arc::from(defs);
        self.state = State::Rows;
        Ok(Arc::clone(&self.columns))
    }

    /// The statement prepared for `sql` (from the cache, else COM_STMT_PREPARE).
    async fn prepare(&mut self, sql: &str) -> Result<PreparedStmt, ServerOrIo> {
        if let Some(stmt) = self.stmts.get(sql) {
            return Ok(stmt);
        }
        let mut cmd = Vec::with_capacity(sql.len() + 1);
        cmd.push(Command::COM_STMT_PREPARE as u8);
        cmd.extend_from_slice(sql.as_bytes());
        self.send(&cmd).await?;
        self.read().await?;
        if self.buf.first() == Some(&0xFF) {
            return Err(ServerOrIo::Server(parse_err(&self.buf)));
        }
        let ok = match prepare_ok(&self.buf) {
            Ok(ok) => ok,
            Err(site) => return Err(self.fail(site)),
        };
        // parameter definitions, then column definitions, each block closed by an EOF
        for block in [usize::from(ok.stmt.params), usize::from(ok.columns)] {
            if block > 0 {
                self.skip_definitions(block).await?;
            }
        }
        for closed in self.stmts.insert(sql, ok.stmt) {
            self.close(closed).await?;
        }
        Ok(ok.stmt)
    }

    /// COM_STMT_CLOSE (the server sends no answer).
    async fn close(&mut self, stmt: PreparedStmt) -> Result<(), ServerOrIo> {
        let mut cmd = Vec::with_capacity(5);
        ComStmtClose::new(stmt.id).serialize(&mut cmd);
        self.send(&cmd).await
    }
}
