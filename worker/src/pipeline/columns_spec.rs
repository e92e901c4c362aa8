//! The `columns` block of a pipeline definition: columns included (per table), excluded,
//! masked or hashed in the source, before any record is built. Columns are named
//! `schema.table.column` (exactly) or by `{"regex": …}` matched against the whole
//! `schema.table.column`; an `include` rule names its tables (`schema.table`) and then the
//! columns by name alone.

use capstan_connectors::mysql::{ColumnControls, HashRule, IncludeRule, MaskRule, Password};
use capstan_core::change::TableId;
use capstan_kafka::record::MessageKeys;
use serde::{Deserialize, Serialize};

use super::pipeline_spec::PipelineSpecError;
use super::tables_spec::{patterns, table_name, NameSelector};

/// The `columns` block.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnsSpec {
    /// Per table pattern, the only columns kept (every other column of a matching table is
    /// left out). Not combined with `exclude`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<IncludeSpec>,
    /// Columns left out of every event and schema.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<NameSelector>,
    /// Columns whose values become `chars` asterisks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mask: Vec<MaskSpec>,
    /// Columns whose values become a salted SHA-256, in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HashSpec>,
}

/// One `columns.include` rule (Debezium's `column.include.list`, per table).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncludeSpec {
    /// The tables: `schema.table` or `{"regex": …}` matched against the whole `schema.table`.
    pub table: NameSelector,
    /// The columns kept: a column name or `{"regex": …}` matched against the whole name. Must
    /// list the table's key columns.
    pub columns: Vec<NameSelector>,
}

/// One `columns.mask` rule (Debezium's `column.mask.with.N.chars`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaskSpec {
    /// How many `*` replace a value: 1 to 255.
    pub chars: u16,
    /// The columns.
    pub columns: Vec<NameSelector>,
}

/// `columns.hash` (Debezium's `column.mask.hash.SHA-256.with.salt.<salt>`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashSpec {
    /// The salt: a secret (write-only in the API) or a reference `${env:NAME}` /
    /// `${file:/path}` the owner resolves.
    pub salt: Password,
    /// The columns.
    pub columns: Vec<NameSelector>,
}

/// `schema.table.column`, each part non-empty (split at the first two dots).
fn column_name(name: &str) -> Result<(), &'static str> {
    let mut parts = name.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(s), Some(t), Some(c)) if !s.is_empty() && !t.is_empty() && !c.is_empty() => Ok(()),
        _ => Err("must be `schema.table.column`"),
    }
}

/// A column name alone: non-empty, no dot (a dotted name is a `schema.table.column` written
/// where the rule's `table` already names the table).
fn bare_column_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.contains('.') {
        return Err("must be a column name (the rule's `table` names the table)");
    }
    Ok(())
}

fn non_empty(field: &str, list: &[NameSelector]) -> Result<(), PipelineSpecError> {
    if list.is_empty() {
        return Err(PipelineSpecError::new(
            field,
            "must name at least one column",
        ));
    }
    Ok(())
}

impl ColumnsSpec {
    /// The checked controls; `message_keys` (the sink's `message_key_columns`) may name no
    /// column a control touches (those names are exact, so this is known without I/O).
    pub(super) fn check(
        &self,
        message_keys: &MessageKeys,
    ) -> Result<ColumnControls, PipelineSpecError> {
        if !self.include.is_empty() && !self.exclude.is_empty() {
            return Err(PipelineSpecError::new(
                "columns.include",
                "cannot be combined with `columns.exclude`: list the columns to keep or the \
                 columns to leave out, not both",
            ));
        }
        let mut include = Vec::with_capacity(self.include.len());
        for (i, rule) in self.include.iter().enumerate() {
            let table = rule
                .table
                .to_pattern(&format!("columns.include[{i}].table"), table_name)?;
            let field = format!("columns.include[{i}].columns");
            non_empty(&field, &rule.columns)?;
            include.push(IncludeRule {
                table,
                columns: patterns(&field, &rule.columns, bare_column_name)?,
            });
        }
        let exclude = patterns("columns.exclude", &self.exclude, column_name)?;
        let mut mask = Vec::with_capacity(self.mask.len());
        for (i, rule) in self.mask.iter().enumerate() {
            let chars = u8::try_from(rule.chars)
                .ok()
                .filter(|c| *c > 0)
                .ok_or_else(|| {
                    PipelineSpecError::new(format!("columns.mask[{i}].chars"), "must be 1 to 255")
                })?;
            let field = format!("columns.mask[{i}].columns");
            non_empty(&field, &rule.columns)?;
            mask.push(MaskRule {
                chars,
                columns: patterns(&field, &rule.columns, column_name)?,
            });
        }
        let hash = match &self.hash {
            None => None,
            Some(h) => {
                if h.salt.expose().is_empty() {
                    return Err(PipelineSpecError::new(
                        "columns.hash.salt",
                        "must not be empty",
                    ));
                }
                non_empty("columns.hash.columns", &h.columns)?;
                Some(HashRule {
                    salt: h.salt.clone(),
                    columns: patterns("columns.hash.columns", &h.columns, column_name)?,
                })
            }
        };
        let controls = ColumnControls {
            include,
            exclude,
            mask,
            hash,
        };
        for (table, columns) in message_keys.iter() {
            for column in columns.iter() {
                if controls.action(table, column) != capstan_connectors::mysql::Action::Keep {
                    return Err(PipelineSpecError::new(
                        "kafka.message_key_columns",
                        format!(
                            "column {column} of {} is excluded, masked or hashed by `columns` \
                             and cannot be in the record key",
                            TableId::to_string(table)
                        ),
                    ));
                }
            }
        }
        Ok(controls)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use capstan_connectors::mysql::Action;
    use serde_json::json;

    use super::*;

    fn check(v: serde_json::Value) -> Result<ColumnControls, PipelineSpecError> {
        serde_json::from_value::<ColumnsSpec>(v)
            .unwrap()
            .check(&Arc::new(BTreeMap::new()))
    }

    #[test]
    fn a_full_block_checks_into_controls() {
        let c = check(json!({
            "exclude": ["shop.customers.ssn"],
            "mask": [{"chars": 6, "columns": [{"regex": r"shop\.customers_\d+\.card"}]}],
            "hash": {"salt": "s", "columns": ["shop.customers.email"]}
        }))
        .unwrap();
        let t = TableId::new("shop", "customers");
        assert_eq!(c.action(&t, "ssn"), Action::Exclude);
        assert_eq!(c.action(&t, "email"), Action::Hash);
        assert_eq!(
            c.action(&TableId::new("shop", "customers_3"), "card"),
            Action::Mask(6)
        );
        assert_eq!(c.action(&t, "card"), Action::Keep);
    }

    #[test]
    fn an_include_rule_checks_into_controls() {
        let c = check(json!({
            "include": [
                {"table": {"regex": r"shop\.orders_\d+"}, "columns": ["id", {"regex": "total|note"}]},
                {"table": "shop.customers", "columns": ["id", "name"]}
            ],
            "mask": [{"chars": 2, "columns": ["shop.customers.name"]}]
        }))
        .unwrap();
        let o = TableId::new("shop", "orders_7");
        assert_eq!(c.action(&o, "id"), Action::Keep);
        assert_eq!(c.action(&o, "note"), Action::Keep);
        assert_eq!(c.action(&o, "secret"), Action::Exclude);
        let cu = TableId::new("shop", "customers");
        assert_eq!(c.action(&cu, "name"), Action::Mask(2));
        assert_eq!(c.action(&cu, "ssn"), Action::Exclude);
        assert_eq!(
            c.action(&TableId::new("shop", "audit"), "ssn"),
            Action::Keep
        );
    }

    #[test]
    fn every_error_names_its_field() {
        let cases = [
            (
                json!({"include": [{"table": "a.b", "columns": ["id"]}], "exclude": ["a.b.c"]}),
                "columns.include",
            ),
            (
                json!({"include": [{"table": "a", "columns": ["id"]}]}),
                "columns.include[0].table",
            ),
            (
                json!({"include": [{"table": "a.b", "columns": ["id"]}, {"table": "a.c", "columns": []}]}),
                "columns.include[1].columns",
            ),
            (
                json!({"include": [{"table": "a.b", "columns": ["id", "a.b.c"]}]}),
                "columns.include[0].columns[1]",
            ),
            (
                json!({"include": [{"table": "a.b", "columns": [{"regex": "("}]}]}),
                "columns.include[0].columns[0]",
            ),
            (json!({"exclude": ["a.b"]}), "columns.exclude[0]"),
            (
                json!({"exclude": ["a.b.c", {"regex": "("}]}),
                "columns.exclude[1]",
            ),
            (
                json!({"mask": [{"chars": 0, "columns": ["a.b.c"]}]}),
                "columns.mask[0].chars",
            ),
            (
                json!({"mask": [{"chars": 3, "columns": ["a.b.c"]}, {"chars": 256, "columns": ["a.b.c"]}]}),
                "columns.mask[1].chars",
            ),
            (
                json!({"mask": [{"chars": 3, "columns": []}]}),
                "columns.mask[0].columns",
            ),
            (
                json!({"mask": [{"chars": 3, "columns": ["a.b.c", "x"]}]}),
                "columns.mask[0].columns[1]",
            ),
            (
                json!({"hash": {"salt": "", "columns": ["a.b.c"]}}),
                "columns.hash.salt",
            ),
            (
                json!({"hash": {"salt": "s3cr3t-salt", "columns": [{"regex": "["}]}}),
                "columns.hash.columns[0]",
            ),
        ];
        for (v, field) in cases {
            let e = check(v).unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(!e.to_string().contains("s3cr3t"), "{e}");
        }
    }

    #[test]
    fn a_message_key_column_left_out_by_include_is_refused() {
        let keys: MessageKeys = Arc::new(
            [(TableId::new("shop", "t"), vec!["email".to_string()].into())]
                .into_iter()
                .collect(),
        );
        let spec: ColumnsSpec = serde_json::from_value(json!({
            "include": [{"table": "shop.t", "columns": ["id"]}]
        }))
        .unwrap();
        let e = spec.check(&keys).unwrap_err();
        assert_eq!(e.field, "kafka.message_key_columns");
    }

    #[test]
    fn a_message_key_column_cannot_be_controlled() {
        let keys: MessageKeys = Arc::new(
            [(TableId::new("shop", "t"), vec!["email".to_string()].into())]
                .into_iter()
                .collect(),
        );
        let spec: ColumnsSpec = serde_json::from_value(json!({
            "mask": [{"chars": 3, "columns": [{"regex": r"shop\..*\.email"}]}]
        }))
        .unwrap();
        let e = spec.check(&keys).unwrap_err();
        assert_eq!(e.field, "kafka.message_key_columns");
        assert_eq!(
            e.message,
            "column email of shop.t is excluded, masked or hashed by `columns` and cannot be in \
             the record key"
        );
    }
}
