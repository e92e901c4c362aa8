//! Classifies QUERY-event statement text without keeping it: transaction control, XA, DDL
//! (with the kind and the first table it names), statement-based DML, or anything else.
//!
//! This is a keyword scanner, not a SQL parser: it skips whitespace and comments (running
//! the body of `/*!NNNNN … */` version comments as code, as the server does), reads the
//! leading keywords and, for DDL, the first qualified name after `TABLE`/`ON`/`DATABASE`.

use capstan_core::change::SchemaChangeKind;

/// What a statement is, as far as transaction assembly cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatementClass {
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK` (the whole transaction).
    Rollback,
    /// `SAVEPOINT x` or `RELEASE SAVEPOINT x`.
    Savepoint,
    /// `ROLLBACK TO [SAVEPOINT] x`.
    RollbackToSavepoint,
    /// `XA START` / `XA BEGIN`.
    XaStart,
    /// `XA END`.
    XaEnd,
    /// `XA PREPARE`.
    XaPrepare,
    /// `XA COMMIT` (MySQL logs a one-phase commit as an XA_PREPARE event instead; MariaDB
    /// may log `XA COMMIT … ONE PHASE` inside the transaction).
    XaCommit {
        /// True for `… ONE PHASE`.
        one_phase: bool,
    },
    /// `XA ROLLBACK`.
    XaRollback,
    /// A schema change.
    Ddl {
        /// Kind of change.
        kind: SchemaChangeKind,
        /// Schema named by the statement, if qualified (or the database for database DDL).
        schema: Option<String>,
        /// First table named, if any.
        table: Option<String>,
        /// True for MySQL 8's atomic `CREATE TABLE … SELECT`, logged as
        /// `CREATE TABLE … START TRANSACTION` and followed by row events and an XID.
        starts_transaction: bool,
    },
    /// Statement-based DML (`INSERT`, `UPDATE`, `DELETE`, `REPLACE`, `LOAD DATA`).
    Dml,
    /// Anything else (account management, `FLUSH`, `ANALYZE`, `SET`, …): no row changes.
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Dot,
    Other,
}

fn tokenize(text: &str, max_tokens: usize) -> Vec<Token> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() && out.len() < max_tokens {
        let c = b[i];
        if c.is_ascii_whitespace() || c == b';' {
            i += 1;
        } else if b[i..].starts_with(b"/*!") || b[i..].starts_with(b"/*M!") {
            // version comment: its body is code
            i += if b[i + 2] == b'M' { 4 } else { 3 };
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        } else if b[i..].starts_with(b"*/") {
            i += 2;
        } else if b[i..].starts_with(b"/*") {
            i = match text.get(i + 2..).and_then(|r| r.find("*/")) {
                Some(end) => i + 2 + end + 2,
                None => b.len(),
            };
        } else if c == b'#' || b[i..].starts_with(b"-- ") {
            i = match text.get(i..).and_then(|r| r.find('\n')) {
                Some(end) => i + end + 1,
                None => b.len(),
            };
        } else if c == b'`' || c == b'"' || c == b'\'' {
            let mut s = Vec::new();
            i += 1;
            while i < b.len() {
                if b[i] == c {
                    if b.get(i + 1) == Some(&c) {
                        s.push(c);
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                s.push(b[i]);
                i += 1;
            }
            let s = String::from_utf8_lossy(&s).into_owned();
            out.push(if c == b'\'' {
                Token::Other
            } else {
                Token::Quoted(s)
            });
        } else if c == b'.' {
            out.push(Token::Dot);
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
            {
                i += 1;
            }
            out.push(Token::Word(
                String::from_utf8_lossy(&b[start..i]).into_owned(),
            ));
        } else {
            out.push(Token::Other);
            i += 1;
        }
    }
    out
}

struct Cursor {
    tokens: Vec<Token>,
    at: usize,
}

impl Cursor {
    fn peek_kw(&self, kw: &str) -> bool {
        matches!(self.tokens.get(self.at), Some(Token::Word(w)) if w.eq_ignore_ascii_case(kw))
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.peek_kw(kw);
        if hit {
            self.at += 1;
        }
        hit
    }
    fn eat_any(&mut self, kws: &[&str]) -> bool {
        let mut any = false;
        while kws.iter().any(|k| self.eat_kw(k)) {
            any = true;
        }
        any
    }
    fn word(&mut self) -> Option<String> {
        let w = match self.tokens.get(self.at)? {
            Token::Word(w) => w.to_ascii_uppercase(),
            _ => return None,
        };
        self.at += 1;
        Some(w)
    }
    fn ident(&mut self) -> Option<String> {
        let s = match self.tokens.get(self.at)? {
            Token::Word(w) | Token::Quoted(w) => w.clone(),
            _ => return None,
        };
        self.at += 1;
        Some(s)
    }
    /// `name` or `schema.name` → (schema, name).
    fn qualified(&mut self) -> (Option<String>, Option<String>) {
        let Some(first) = self.ident() else {
            return (None, None);
        };
        if self.tokens.get(self.at) == Some(&Token::Dot) {
            self.at += 1;
            if let Some(second) = self.ident() {
                return (Some(first), Some(second));
            }
        }
        (None, Some(first))
    }
    fn skip_to_kw(&mut self, kw: &str) -> bool {
        while self.at < self.tokens.len() {
            if self.eat_kw(kw) {
                return true;
            }
            self.at += 1;
        }
        false
    }
}

const MAX_TOKENS: usize = 64;

/// Classifies a statement. See [`StatementClass`].
pub fn classify_statement(text: &str) -> StatementClass {
    let mut c = Cursor {
        tokens: tokenize(text, MAX_TOKENS),
        at: 0,
    };
    let Some(first) = c.word() else {
        return StatementClass::Other;
    };
    let ddl = |kind, (schema, table): (Option<String>, Option<String>)| StatementClass::Ddl {
        kind,
        schema,
        table,
        starts_transaction: false,
    };
    match first.as_str() {
        "BEGIN" => StatementClass::Begin,
        "START" if c.peek_kw("TRANSACTION") => StatementClass::Begin,
        "COMMIT" => StatementClass::Commit,
        "ROLLBACK" => {
            c.eat_kw("WORK");
            if c.eat_kw("TO") {
                StatementClass::RollbackToSavepoint
            } else {
                StatementClass::Rollback
            }
        }
        "SAVEPOINT" | "RELEASE" => StatementClass::Savepoint,
        "XA" => match c.word().as_deref() {
            Some("START" | "BEGIN") => StatementClass::XaStart,
            Some("END") => StatementClass::XaEnd,
            Some("PREPARE") => StatementClass::XaPrepare,
            Some("COMMIT") => StatementClass::XaCommit {
                one_phase: c.skip_to_kw("ONE") && c.eat_kw("PHASE"),
            },
            Some("ROLLBACK") => StatementClass::XaRollback,
            _ => StatementClass::Other,
        },
        "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "LOAD" => StatementClass::Dml,
        "GRANT" | "REVOKE" | "SET" | "FLUSH" | "ANALYZE" | "OPTIMIZE" | "REPAIR" | "CHECK"
        | "INSTALL" | "UNINSTALL" => StatementClass::Other,
        "TRUNCATE" => {
            c.eat_kw("TABLE");
            ddl(SchemaChangeKind::TruncateTable, c.qualified())
        }
        "RENAME" => {
            if c.eat_kw("TABLE") || c.eat_kw("TABLES") {
                ddl(SchemaChangeKind::RenameTable, c.qualified())
            } else {
                StatementClass::Other
            }
        }
        "CREATE" => classify_create(&mut c, text),
        "ALTER" => {
            c.eat_any(&["ONLINE", "IGNORE"]);
            match c.word().as_deref() {
                Some("TABLE") => ddl(SchemaChangeKind::AlterTable, c.qualified()),
                Some("DATABASE" | "SCHEMA") => database(&mut c, SchemaChangeKind::AlterDatabase),
                Some("USER" | "ROLE" | "INSTANCE" | "SERVER" | "LOGFILE" | "RESOURCE") => {
                    StatementClass::Other
                }
                _ => ddl(SchemaChangeKind::Other, (None, None)),
            }
        }
        "DROP" => {
            c.eat_any(&["TEMPORARY"]);
            match c.word().as_deref() {
                Some("TABLE" | "TABLES") => {
                    c.eat_any(&["IF", "EXISTS"]);
                    ddl(SchemaChangeKind::DropTable, c.qualified())
                }
                Some("DATABASE" | "SCHEMA") => database(&mut c, SchemaChangeKind::DropDatabase),
                Some("INDEX") => {
                    c.eat_any(&["ONLINE", "OFFLINE", "IF", "EXISTS"]);
                    let _ = c.ident();
                    if c.skip_to_kw("ON") {
                        ddl(SchemaChangeKind::DropIndex, c.qualified())
                    } else {
                        ddl(SchemaChangeKind::DropIndex, (None, None))
                    }
                }
                Some("USER" | "ROLE" | "SERVER" | "RESOURCE") => StatementClass::Other,
                _ => ddl(SchemaChangeKind::Other, (None, None)),
            }
        }
        _ => StatementClass::Other,
    }
}

fn database(c: &mut Cursor, kind: SchemaChangeKind) -> StatementClass {
    c.eat_any(&["IF", "NOT", "EXISTS"]);
    StatementClass::Ddl {
        kind,
        schema: c.ident(),
        table: None,
        starts_transaction: false,
    }
}

fn classify_create(c: &mut Cursor, text: &str) -> StatementClass {
    c.eat_any(&["OR", "REPLACE", "TEMPORARY", "ONLINE", "OFFLINE"]);
    c.eat_any(&["UNIQUE", "FULLTEXT", "SPATIAL"]);
    match c.word().as_deref() {
        Some("TABLE") => {
            c.eat_any(&["IF", "NOT", "EXISTS"]);
            let (schema, table) = c.qualified();
            StatementClass::Ddl {
                kind: SchemaChangeKind::CreateTable,
                schema,
                table,
                starts_transaction: ends_with_start_transaction(text),
            }
        }
        Some("INDEX") => {
            c.eat_any(&["IF", "NOT", "EXISTS"]);
            let _ = c.ident();
            let (schema, table) = if c.skip_to_kw("ON") {
                c.qualified()
            } else {
                (None, None)
            };
            StatementClass::Ddl {
                kind: SchemaChangeKind::CreateIndex,
                schema,
                table,
                starts_transaction: false,
            }
        }
        Some("DATABASE" | "SCHEMA") => database(c, SchemaChangeKind::CreateDatabase),
        Some("USER" | "ROLE" | "SERVER" | "RESOURCE" | "LOGFILE") => StatementClass::Other,
        _ => StatementClass::Ddl {
            kind: SchemaChangeKind::Other,
            schema: None,
            table: None,
            starts_transaction: false,
        },
    }
}

fn ends_with_start_transaction(text: &str) -> bool {
    let t = text.trim_end_matches(|c: char| c.is_whitespace() || c == ';');
    let words: Vec<&str> = t.rsplitn(3, char::is_whitespace).collect();
    matches!(words.as_slice(), [last, prev, ..]
        if last.eq_ignore_ascii_case("TRANSACTION") && prev.eq_ignore_ascii_case("START"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddl(text: &str) -> (SchemaChangeKind, Option<String>, Option<String>, bool) {
        match classify_statement(text) {
            StatementClass::Ddl {
                kind,
                schema,
                table,
                starts_transaction,
            } => (kind, schema, table, starts_transaction),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn control_statements() {
        assert_eq!(classify_statement("BEGIN"), StatementClass::Begin);
        assert_eq!(classify_statement(" COMMIT "), StatementClass::Commit);
        assert_eq!(classify_statement("ROLLBACK"), StatementClass::Rollback);
        assert_eq!(
            classify_statement("ROLLBACK TO `sp1`"),
            StatementClass::RollbackToSavepoint
        );
        assert_eq!(
            classify_statement("SAVEPOINT `a`"),
            StatementClass::Savepoint
        );
        assert_eq!(
            classify_statement("XA START X'31',X'',1"),
            StatementClass::XaStart
        );
        assert_eq!(
            classify_statement("XA END X'31',X'',1"),
            StatementClass::XaEnd
        );
        assert_eq!(
            classify_statement("XA COMMIT X'31',X'',1"),
            StatementClass::XaCommit { one_phase: false }
        );
        assert_eq!(
            classify_statement("XA COMMIT 'x' ONE PHASE"),
            StatementClass::XaCommit { one_phase: true }
        );
        assert_eq!(
            classify_statement("XA ROLLBACK X'31',X'',1"),
            StatementClass::XaRollback
        );
        assert_eq!(
            classify_statement("insert into t values (1)"),
            StatementClass::Dml
        );
        assert_eq!(
            classify_statement("ALTER USER 'root'@'localhost' IDENTIFIED WITH 'x' AS 'y'"),
            StatementClass::Other
        );
        assert_eq!(
            classify_statement("GRANT ALL ON *.* TO u"),
            StatementClass::Other
        );
        assert_eq!(classify_statement(""), StatementClass::Other);
    }

    #[test]
    fn ddl_kinds_and_names() {
        assert_eq!(
            ddl("CREATE TABLE t(f1 CHAR(128), f2 ENUM('a'))"),
            (SchemaChangeKind::CreateTable, None, Some("t".into()), false)
        );
        assert_eq!(
            ddl("create table if not exists `db`.`t 1` (a int)"),
            (
                SchemaChangeKind::CreateTable,
                Some("db".into()),
                Some("t 1".into()),
                false
            )
        );
        assert_eq!(
            ddl("CREATE TABLE `t2` (`a` int) START TRANSACTION"),
            (SchemaChangeKind::CreateTable, None, Some("t2".into()), true)
        );
        assert_eq!(
            ddl("DROP TABLE `int_table` /* generated by server */"),
            (
                SchemaChangeKind::DropTable,
                None,
                Some("int_table".into()),
                false
            )
        );
        assert_eq!(
            ddl("DROP TABLE IF EXISTS s.t"),
            (
                SchemaChangeKind::DropTable,
                Some("s".into()),
                Some("t".into()),
                false
            )
        );
        assert_eq!(
            ddl("ALTER TABLE x ADD c INT").0,
            SchemaChangeKind::AlterTable
        );
        assert_eq!(ddl("ALTER ONLINE TABLE x ADD c INT").2, Some("x".into()));
        assert_eq!(ddl("TRUNCATE TABLE s.t").0, SchemaChangeKind::TruncateTable);
        assert_eq!(ddl("RENAME TABLE a TO b").2, Some("a".into()));
        assert_eq!(
            ddl("CREATE UNIQUE INDEX i ON s.t (a)"),
            (
                SchemaChangeKind::CreateIndex,
                Some("s".into()),
                Some("t".into()),
                false
            )
        );
        assert_eq!(ddl("DROP INDEX i ON t").2, Some("t".into()));
        assert_eq!(
            ddl("CREATE DATABASE IF NOT EXISTS shop"),
            (
                SchemaChangeKind::CreateDatabase,
                Some("shop".into()),
                None,
                false
            )
        );
        assert_eq!(ddl("DROP SCHEMA shop").0, SchemaChangeKind::DropDatabase);
        assert_eq!(
            ddl("/*!50001 CREATE ALGORITHM=UNDEFINED */ /*!50001 VIEW v AS SELECT 1 */").0,
            SchemaChangeKind::Other
        );
        assert_eq!(ddl("/* x */ CREATE TABLE t (a int)").2, Some("t".into()));
    }

    #[test]
    fn never_panics_on_odd_text() {
        for t in [
            "/*",
            "/*!",
            "/*M!",
            "`",
            "'",
            "-- ",
            "#",
            "CREATE",
            "DROP INDEX",
            "\u{fffd}x",
        ] {
            let _ = classify_statement(t);
        }
    }
}
