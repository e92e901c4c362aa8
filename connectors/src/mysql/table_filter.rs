//! The capture allowlist, applied to a table map before any row of it is decoded.

use std::collections::HashSet;
use std::sync::Arc;

use capstan_core::change::TableId;

use super::table_patterns::TablePatterns;

/// Which tables a pipeline captures. Names compare exactly (as the server reports them);
/// [`TableFilter::Matching`] adds anchored patterns for schemas and tables.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TableFilter {
    /// Every table.
    #[default]
    All,
    /// Only the listed tables.
    Only(HashSet<TableId>),
    /// Every table but the listed ones.
    AllExcept(HashSet<TableId>),
    /// Include and exclude patterns for schemas and tables.
    Matching(Arc<TablePatterns>),
}

impl TableFilter {
    /// An allowlist from `(schema, table)` pairs.
    pub fn only<S: Into<String>, T: Into<String>>(
        tables: impl IntoIterator<Item = (S, T)>,
    ) -> Self {
        TableFilter::Only(
            tables
                .into_iter()
                .map(|(s, t)| TableId::new(s, t))
                .collect(),
        )
    }

    /// True if changes of `table` are captured.
    pub fn admits(&self, table: &TableId) -> bool {
        match self {
            TableFilter::All => true,
            TableFilter::Only(set) => set.contains(table),
            TableFilter::AllExcept(set) => !set.contains(table),
            TableFilter::Matching(patterns) => patterns.admits(table),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_is_exact() {
        let f = TableFilter::only([("shop", "orders")]);
        assert!(f.admits(&TableId::new("shop", "orders")));
        assert!(!f.admits(&TableId::new("shop", "Orders")));
        assert!(!f.admits(&TableId::new("other", "orders")));
        assert!(TableFilter::All.admits(&TableId::new("a", "b")));
        let f = TableFilter::AllExcept([TableId::new("shop", "audit")].into());
        assert!(!f.admits(&TableId::new("shop", "audit")));
        assert!(f.admits(&TableId::new("shop", "orders")));
    }
}
