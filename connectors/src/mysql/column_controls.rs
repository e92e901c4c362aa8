//! [`ColumnControls`]: what a pipeline does to columns before a row leaves the source —
//! include (per table pattern, only the listed columns remain: every other one is excluded),
//! exclude (the column is absent), mask (`column.mask.with.N.chars`: N `*`), hash
//! (`column.mask.hash.SHA-256.with.salt.<salt>`: lowercase hex of SHA-256 over the salt and
//! the value). Columns are named `schema.table.column`, exactly or by an anchored pattern.
//!
//! Applied to binlog rows in the assembler and to snapshot chunk rows in the snapshot reader,
//! through a per-table [`ColumnPlan`] built once per table version. A key column (the primary
//! key, or the unique key a keyless table is read by) is never transformed: a plan that would
//! exclude, mask or hash one is refused (`column_control_on_key`), because the record key,
//! the snapshot cursor and compaction need its real, unique value.

use std::sync::Arc;

use capstan_core::change::{ColumnType, TableId};
use capstan_core::name_pattern::{any_matches, NamePattern};

use super::column_plan::{Action, ColumnPlan};
use super::source_config::Password;

/// Columns masked with `chars` asterisks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MaskRule {
    /// How many `*` replace the value (1 to 255).
    pub chars: u8,
    /// `schema.table.column` names or patterns.
    pub columns: Vec<NamePattern>,
}

/// Columns replaced by a salted SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashRule {
    /// The salt (a secret, or a reference the owner resolves; `Debug` hides it).
    pub salt: Password,
    /// `schema.table.column` names or patterns.
    pub columns: Vec<NamePattern>,
}

/// The columns kept of the tables a pattern matches (Debezium's `column.include.list`, per
/// table): any other column of such a table is excluded. A key column must be listed: one
/// left out is refused like any control on a key column (`column_control_on_key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncludeRule {
    /// `schema.table` name or pattern.
    pub table: NamePattern,
    /// Column names or patterns (the column name alone, matched whole).
    pub columns: Vec<NamePattern>,
}

/// The column controls of a pipeline. When one column matches several controls, exclusion
/// (by `exclude`, or by an `include` rule of its table not listing it) wins over hashing,
/// hashing over masking, and the first mask rule over later ones. Of several `include` rules
/// matching a table, the first decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnControls {
    /// Include rules.
    pub include: Vec<IncludeRule>,
    /// Columns left out of every row image and schema.
    pub exclude: Vec<NamePattern>,
    /// Mask rules.
    pub mask: Vec<MaskRule>,
    /// The hash rule.
    pub hash: Option<HashRule>,
}

/// A key column a control would change. Names the table and column (structure, no value).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column} of {table} is a key column and cannot be excluded, masked or hashed")]
pub struct ColumnControlOnKey {
    /// `schema.table`.
    pub table: String,
    /// The column.
    pub column: String,
}

impl ColumnControlOnKey {
    /// `column_control_on_key`.
    pub fn code(&self) -> &'static str {
        "column_control_on_key"
    }
}

impl ColumnControls {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.include.is_empty()
            && self.exclude.is_empty()
            && self.mask.iter().all(|m| m.columns.is_empty())
            && self.hash.as_ref().is_none_or(|h| h.columns.is_empty())
    }

    /// The action for column `column` of `table`.
    pub fn action(&self, table: &TableId, column: &str) -> Action {
        if self.is_empty() {
            return Action::Keep;
        }
        if !self.include.is_empty() {
            let table_name = format!("{}.{}", table.schema, table.table);
            if let Some(rule) = self.include.iter().find(|r| r.table.matches(&table_name)) {
                if !any_matches(&rule.columns, column) {
                    return Action::Exclude;
                }
            }
        }
        let name = format!("{}.{}.{}", table.schema, table.table, column);
        if any_matches(&self.exclude, &name) {
            return Action::Exclude;
        }
        if self
            .hash
            .as_ref()
            .is_some_and(|h| any_matches(&h.columns, &name))
        {
            return Action::Hash;
        }
        match self.mask.iter().find(|m| any_matches(&m.columns, &name)) {
            Some(m) => Action::Mask(m.chars),
            None => Action::Keep,
        }
    }

    /// The plan for one version of `table` (its column names in table order, their types
    /// when known, and its key column indexes); `Ok(None)` when no column is touched.
    pub fn plan(
        &self,
        table: &TableId,
        columns: &Arc<[String]>,
        types: Option<&Arc<[ColumnType]>>,
        key: &[usize],
    ) -> Result<Option<Arc<ColumnPlan>>, ColumnControlOnKey> {
        if self.is_empty() {
            return Ok(None);
        }
        let actions: Vec<Action> = columns.iter().map(|c| self.action(table, c)).collect();
        if actions.iter().all(|a| *a == Action::Keep) {
            return Ok(None);
        }
        if let Some(&k) = key
            .iter()
            .find(|&&k| actions.get(k).is_some_and(|a| *a != Action::Keep))
        {
            return Err(ColumnControlOnKey {
                table: table.to_string(),
                column: columns.get(k).cloned().unwrap_or_default(),
            });
        }
        let salt = self
            .hash
            .as_ref()
            .map(|h| h.salt.expose().as_bytes().to_vec())
            .unwrap_or_default();
        Ok(Some(Arc::new(ColumnPlan::new(
            actions, columns, types, key, salt,
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capstan_core::change::SqlType;

    fn re(s: &str) -> NamePattern {
        NamePattern::regex(s).unwrap()
    }

    fn controls() -> ColumnControls {
        ColumnControls {
            include: Vec::new(),
            exclude: vec![NamePattern::exact("shop.customers.ssn")],
            mask: vec![
                MaskRule {
                    chars: 4,
                    columns: vec![re(r"shop\.customers\.(card|ssn)")],
                },
                MaskRule {
                    chars: 8,
                    columns: vec![re(r".*\.card")],
                },
            ],
            hash: Some(HashRule {
                salt: Password::new("pepper"),
                columns: vec![re(r"shop\.[a-z]+\.email")],
            }),
        }
    }

    #[test]
    fn actions_follow_the_precedence() {
        let c = controls();
        let t = TableId::new("shop", "customers");
        assert_eq!(c.action(&t, "ssn"), Action::Exclude);
        assert_eq!(c.action(&t, "card"), Action::Mask(4));
        assert_eq!(c.action(&t, "email"), Action::Hash);
        assert_eq!(c.action(&t, "name"), Action::Keep);
        let other = TableId::new("crm", "leads");
        assert_eq!(c.action(&other, "card"), Action::Mask(8));
        assert_eq!(c.action(&other, "email"), Action::Keep);
        assert_eq!(c.action(&other, "ssn"), Action::Keep);
    }

    #[test]
    fn an_untouched_table_has_no_plan_and_a_key_column_is_refused() {
        let c = controls();
        let cols: Arc<[String]> = vec!["id".to_string(), "name".to_string()].into();
        assert!(c
            .plan(&TableId::new("shop", "customers"), &cols, None, &[0])
            .unwrap()
            .is_none());
        let cols: Arc<[String]> = vec!["email".to_string(), "name".to_string()].into();
        let types: Arc<[ColumnType]> = vec![
            ColumnType {
                sql: SqlType::Text,
                nullable: false,
            };
            2
        ]
        .into();
        let e = c
            .plan(
                &TableId::new("shop", "customers"),
                &cols,
                Some(&types),
                &[0],
            )
            .unwrap_err();
        assert_eq!(e.code(), "column_control_on_key");
        assert_eq!(
            e.to_string(),
            "column email of shop.customers is a key column and cannot be excluded, masked or \
             hashed"
        );
        assert!(ColumnControls::default().is_empty());
        assert!(!format!("{c:?}").contains("pepper"));
    }

    fn include_orders() -> ColumnControls {
        ColumnControls {
            include: vec![
                IncludeRule {
                    table: re(r"shop\.orders_\d+"),
                    columns: vec![NamePattern::exact("id"), re(r"total|note_.*")],
                },
                // a later rule for a table the first matches never applies to it
                IncludeRule {
                    table: NamePattern::exact("shop.orders_1"),
                    columns: vec![NamePattern::exact("secret")],
                },
            ],
            mask: vec![MaskRule {
                chars: 3,
                columns: vec![re(r".*\.note_b")],
            }],
            ..ColumnControls::default()
        }
    }

    #[test]
    fn an_include_rule_keeps_only_the_listed_columns_of_its_tables() {
        let c = include_orders();
        assert!(!c.is_empty());
        let t = TableId::new("shop", "orders_1");
        assert_eq!(c.action(&t, "id"), Action::Keep);
        assert_eq!(c.action(&t, "total"), Action::Keep);
        assert_eq!(c.action(&t, "note_a"), Action::Keep);
        // listed, and masked by another control
        assert_eq!(c.action(&t, "note_b"), Action::Mask(3));
        // unlisted (and the second rule is not consulted)
        assert_eq!(c.action(&t, "secret"), Action::Exclude);
        assert_eq!(c.action(&t, "totals"), Action::Exclude);
        assert_eq!(c.action(&t, "xid"), Action::Exclude);
        // a table no rule matches keeps everything
        let other = TableId::new("shop", "orders_x");
        assert_eq!(c.action(&other, "secret"), Action::Keep);
        assert_eq!(c.action(&other, "note_b"), Action::Mask(3));

        let cols: Arc<[String]> = ["id", "secret", "total", "note_b"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let plan = c.plan(&t, &cols, None, &[0]).unwrap().unwrap();
        assert_eq!(&plan.columns()[..], ["id", "total", "note_b"]);
        assert_eq!(&plan.key()[..], [0]);
        let row = capstan_core::change::Row::new(
            Arc::clone(&cols),
            vec![
                capstan_core::change::Value::Int(7),
                capstan_core::change::Value::Bytes(b"hidden".to_vec()),
                capstan_core::change::Value::Int(70),
                capstan_core::change::Value::Bytes(b"b".to_vec()),
            ],
        )
        .unwrap();
        let out = plan.apply_row(row);
        assert_eq!(out.columns(), ["id", "total", "note_b"]);
        assert_eq!(
            out.values(),
            [
                capstan_core::change::Value::Int(7),
                capstan_core::change::Value::Int(70),
                capstan_core::change::Value::Text {
                    bytes: b"***".to_vec(),
                    collation: crate::mysql::column_plan::TRANSFORMED_COLLATION,
                },
            ]
        );
    }

    #[test]
    fn an_include_rule_leaving_out_a_key_column_is_refused() {
        let c = include_orders();
        let cols: Arc<[String]> = ["order_no", "id", "total"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let e = c
            .plan(&TableId::new("shop", "orders_2"), &cols, None, &[0])
            .unwrap_err();
        assert_eq!(e.code(), "column_control_on_key");
        assert_eq!(
            (e.table.as_str(), e.column.as_str()),
            ("shop.orders_2", "order_no")
        );
        // every column listed: no plan at all
        let cols: Arc<[String]> = ["id", "total"].iter().map(|s| s.to_string()).collect();
        assert!(c
            .plan(&TableId::new("shop", "orders_2"), &cols, None, &[0])
            .unwrap()
            .is_none());
    }
}
