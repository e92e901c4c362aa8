//! [`TablePatterns`]: the capture filter by pattern (Debezium's `database.include.list`,
//! `database.exclude.list`, `table.include.list` and `table.exclude.list`, with anchored
//! patterns written explicitly).

use capstan_core::change::TableId;
use capstan_core::name_pattern::{any_matches, NamePattern};

/// Include and exclude patterns for schemas (matched against the schema name) and tables
/// (matched against `schema.table`). A table is captured when its schema is included (every
/// schema when `schemas_include` is empty) and not excluded, and the table is included (every
/// table when `tables_include` is empty) and not excluded: an exclusion always wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TablePatterns {
    /// Schemas to capture (empty: all).
    pub schemas_include: Vec<NamePattern>,
    /// Schemas never captured.
    pub schemas_exclude: Vec<NamePattern>,
    /// Tables to capture, as `schema.table` (empty: all).
    pub tables_include: Vec<NamePattern>,
    /// Tables never captured, as `schema.table`.
    pub tables_exclude: Vec<NamePattern>,
}

impl TablePatterns {
    /// True if the schema passes the schema patterns.
    fn admits_schema(&self, schema: &str) -> bool {
        (self.schemas_include.is_empty() || any_matches(&self.schemas_include, schema))
            && !any_matches(&self.schemas_exclude, schema)
    }

    /// True if changes of `table` are captured.
    pub fn admits(&self, table: &TableId) -> bool {
        if !self.admits_schema(&table.schema) {
            return false;
        }
        let name = format!("{}.{}", table.schema, table.table);
        (self.tables_include.is_empty() || any_matches(&self.tables_include, &name))
            && !any_matches(&self.tables_exclude, &name)
    }

    /// True if some table of `schema` may be captured (for a DDL statement that names no
    /// table): the schema passes, and an include list, if any, has a pattern or a name that
    /// could be in it.
    pub fn may_capture_in(&self, schema: &str) -> bool {
        if !self.admits_schema(schema) {
            return false;
        }
        let prefix = format!("{schema}.");
        self.tables_include.is_empty()
            || self
                .tables_include
                .iter()
                .any(|p| !p.is_exact() || p.as_str().starts_with(&prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> NamePattern {
        NamePattern::regex(s).unwrap()
    }

    fn picks(p: &TablePatterns, names: &[(&str, &str)]) -> Vec<String> {
        names
            .iter()
            .map(|(s, t)| TableId::new(*s, *t))
            .filter(|t| p.admits(t))
            .map(|t| t.to_string())
            .collect()
    }

    const TABLES: &[(&str, &str)] = &[
        ("shop", "orders"),
        ("shop", "orders_1"),
        ("shop", "orders_22"),
        ("shop", "orders_x"),
        ("shop", "audit"),
        ("shop2", "orders_1"),
        ("tenant_7", "users"),
        ("tenant_x", "users"),
    ];

    #[test]
    fn table_patterns_include_then_exclude() {
        let p = TablePatterns {
            tables_include: vec![re(r"shop\.orders_\d+"), NamePattern::exact("shop.audit")],
            tables_exclude: vec![NamePattern::exact("shop.orders_22")],
            ..TablePatterns::default()
        };
        assert_eq!(picks(&p, TABLES), vec!["shop.orders_1", "shop.audit"]);
    }

    #[test]
    fn schema_patterns_narrow_every_table() {
        let p = TablePatterns {
            schemas_include: vec![re(r"tenant_\d+"), NamePattern::exact("shop")],
            tables_exclude: vec![re(r"shop\.orders.*")],
            ..TablePatterns::default()
        };
        assert_eq!(picks(&p, TABLES), vec!["shop.audit", "tenant_7.users"]);
        let p = TablePatterns {
            schemas_exclude: vec![re("shop.*")],
            ..TablePatterns::default()
        };
        assert_eq!(picks(&p, TABLES), vec!["tenant_7.users", "tenant_x.users"]);
    }

    #[test]
    fn schema_level_ddl_is_captured_where_a_table_may_be() {
        let p = TablePatterns {
            schemas_exclude: vec![NamePattern::exact("hr")],
            tables_include: vec![NamePattern::exact("shop.orders")],
            ..TablePatterns::default()
        };
        assert!(p.may_capture_in("shop"));
        assert!(!p.may_capture_in("other"));
        assert!(!p.may_capture_in("hr"));
        let p = TablePatterns {
            tables_include: vec![re(r"s.*\.t")],
            ..TablePatterns::default()
        };
        assert!(p.may_capture_in("anything"));
    }
}
