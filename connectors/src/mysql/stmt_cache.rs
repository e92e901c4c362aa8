//! [`StmtCache`]: the prepared statements of one query connection, keyed by their SQL text,
//! least recently used first out. Pure: the connection closes what the cache evicts.

use std::collections::HashMap;

/// A statement prepared on the server (COM_STMT_PREPARE's answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PreparedStmt {
    /// The server's statement id.
    pub(crate) id: u32,
    /// How many `?` parameters the statement takes.
    pub(crate) params: u16,
}

/// At most `capacity` statements by SQL text. See the module documentation.
#[derive(Debug)]
pub(crate) struct StmtCache {
    entries: HashMap<String, (PreparedStmt, u64)>,
    clock: u64,
    capacity: usize,
}

impl StmtCache {
    /// An empty cache holding at most `capacity` (at least one) statements.
    pub(crate) fn new(capacity: usize) -> Self {
        StmtCache {
            entries: HashMap::new(),
            clock: 0,
            capacity: capacity.max(1),
        }
    }

    /// The statement prepared for `sql`, marked as just used.
    pub(crate) fn get(&mut self, sql: &str) -> Option<PreparedStmt> {
        self.clock += 1;
        let clock = self.clock;
        let (stmt, used) = self.entries.get_mut(sql)?;
        *used = clock;
        Some(*stmt)
    }

    /// Adds `stmt` for `sql`; returns the statements the server should close: one replaced
    /// for the same text, and the least recently used one beyond the capacity.
    pub(crate) fn insert(&mut self, sql: &str, stmt: PreparedStmt) -> Vec<PreparedStmt> {
        self.clock += 1;
        let mut closed = Vec::new();
        if let Some((old, _)) = self.entries.insert(sql.to_string(), (stmt, self.clock)) {
            closed.push(old);
        }
        while self.entries.len() > self.capacity {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((evicted, _)) = self.entries.remove(&oldest) {
                closed.push(evicted);
            }
        }
        closed
    }

    /// Forgets the statement of `sql` (the caller closes it).
    pub(crate) fn remove(&mut self, sql: &str) -> Option<PreparedStmt> {
        self.entries.remove(sql).map(|(stmt, _)| stmt)
    }

    /// How many statements are cached.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(id: u32) -> PreparedStmt {
        PreparedStmt { id, params: 0 }
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut c = StmtCache::new(2);
        assert!(c.insert("a", stmt(1)).is_empty());
        assert!(c.insert("b", stmt(2)).is_empty());
        assert_eq!(c.get("a"), Some(stmt(1)));
        // b is the least recently used now
        assert_eq!(c.insert("c", stmt(3)), vec![stmt(2)]);
        assert_eq!(c.get("b"), None);
        assert_eq!(c.get("a"), Some(stmt(1)));
        assert_eq!(c.get("c"), Some(stmt(3)));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn replacing_a_text_closes_the_old_statement() {
        let mut c = StmtCache::new(4);
        c.insert("a", stmt(1));
        assert_eq!(c.insert("a", stmt(7)), vec![stmt(1)]);
        assert_eq!(c.get("a"), Some(stmt(7)));
        assert_eq!(c.remove("a"), Some(stmt(7)));
        assert_eq!(c.remove("a"), None);
        assert_eq!(c.len(), 0);
        // a zero capacity still keeps the statement just prepared
        let mut one = StmtCache::new(0);
        one.insert("x", stmt(1));
        assert_eq!(one.insert("y", stmt(2)), vec![stmt(1)]);
        assert_eq!(one.get("y"), Some(stmt(2)));
    }
}
