//! [`ColumnPlan`]: the column controls of one table version, resolved per column, and the
//! pure transform of its rows, changes and types. Built by
//! [`ColumnControls::plan`](super::column_controls::ColumnControls::plan).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use capstan_core::change::{Change, ColumnType, ColumnTypes, Row, SqlType, Value};
use sha2::{Digest, Sha256};

/// The collation of masked and hashed values: `utf8mb4_general_ci` (id 45 on MySQL and
/// MariaDB); the values are ASCII.
pub const TRANSFORMED_COLLATION: u16 = 45;

/// What happens to one column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Passed through.
    Keep,
    /// Left out of the row and its schema.
    Exclude,
    /// Replaced by this many `*` (a string column; NULL stays NULL).
    Mask(u8),
    /// Replaced by the lowercase hex SHA-256 of the salt followed by the value's bytes (a
    /// string column; NULL stays NULL).
    Hash,
}

/// One table version's column controls. `Debug` shows the actions, never the salt.
#[derive(Clone, PartialEq, Eq)]
pub struct ColumnPlan {
    actions: Vec<Action>,
    columns: Arc<[String]>,
    types: Option<ColumnTypes>,
    key: Arc<[usize]>,
    salt: Vec<u8>,
}

impl fmt::Debug for ColumnPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColumnPlan")
            .field("actions", &self.actions)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The bytes a value is hashed over: character and binary data as stored, BIT as its
/// big-endian bytes, geometry as the little-endian SRID and the WKB, a vector as its
/// little-endian elements, everything else as MySQL's text form ([`Value::to_sql_text`]).
fn hashed_bytes(value: &Value) -> Cow<'_, [u8]> {
    match value {
        Value::Text { bytes, .. } | Value::Bytes(bytes) | Value::Bit { bytes, .. } => {
            Cow::Borrowed(bytes)
        }
        Value::Geometry { srid, wkb } => {
            let mut v = srid.to_le_bytes().to_vec();
            v.extend_from_slice(wkb);
            Cow::Owned(v)
        }
        Value::Vector(elements) => {
            Cow::Owned(elements.iter().flat_map(|e| e.to_le_bytes()).collect())
        }
        other => Cow::Owned(other.to_sql_text().unwrap_or_default().into_bytes()),
    }
}

fn text(bytes: Vec<u8>) -> Value {
    Value::Text {
        bytes,
        collation: TRANSFORMED_COLLATION,
    }
}

impl ColumnPlan {
    pub(super) fn new(
        actions: Vec<Action>,
        columns: &Arc<[String]>,
        types: Option<&ColumnTypes>,
        key: &[usize],
        salt: Vec<u8>,
    ) -> Self {
        let kept = |i: &usize| actions.get(*i).is_some_and(|a| *a != Action::Exclude);
        let out_columns: Arc<[String]> = (0..columns.len())
            .filter(kept)
            .filter_map(|i| columns.get(i).cloned())
            .collect();
        let out_types = types.map(|types| {
            (0..types.len())
                .filter(kept)
                .filter_map(|i| {
                    let t = types.get(i)?;
                    Some(match actions.get(i) {
                        Some(Action::Mask(_) | Action::Hash) => ColumnType {
                            sql: SqlType::Text,
                            nullable: t.nullable,
                        },
                        _ => t.clone(),
                    })
                })
                .collect::<ColumnTypes>()
        });
        // a key column is kept (the planner refuses otherwise): its new index is the number
        // of kept columns before it
        let out_key: Arc<[usize]> = key.iter().map(|&k| (0..k).filter(kept).count()).collect();
        ColumnPlan {
            actions,
            columns: out_columns,
            types: out_types,
            key: out_key,
            salt,
        }
    }

    /// The column names after the plan, in table order.
    pub fn columns(&self) -> &Arc<[String]> {
        &self.columns
    }

    /// The column types after the plan (masked and hashed columns are text).
    pub fn types(&self) -> Option<&ColumnTypes> {
        self.types.as_ref()
    }

    /// The key column indexes after the plan, in key order.
    pub fn key(&self) -> &Arc<[usize]> {
        &self.key
    }

    /// The new index of input column `index`; `None` for an excluded one.
    pub fn index_of(&self, index: usize) -> Option<usize> {
        match self.actions.get(index)? {
            Action::Exclude => None,
            _ => Some(
                (0..index)
                    .filter(|i| self.actions.get(*i) != Some(&Action::Exclude))
                    .count(),
            ),
        }
    }

    fn value(&self, action: Action, value: Value) -> Option<Value> {
        match (action, value) {
            (Action::Exclude, _) => None,
            (Action::Keep, v) | (_, v @ Value::Null) => Some(v),
            (Action::Mask(n), _) => Some(text(vec![b'*'; usize::from(n)])),
            (Action::Hash, v) => {
                let digest = Sha256::new()
                    .chain_update(&self.salt)
                    .chain_update(hashed_bytes(&v))
                    .finalize();
                let mut hex = Vec::with_capacity(64);
                for b in digest {
                    hex.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                Some(text(hex))
            }
        }
    }

    /// A row of the table version the plan was built for, transformed. A row of another
    /// shape (never, the caller checks the version) keeps only what the plan knows.
    pub fn apply_row(&self, row: Row) -> Row {
        let values: Vec<Value> = row
            .into_values()
            .into_iter()
            .zip(&self.actions)
            .filter_map(|(v, a)| self.value(*a, v))
            .collect();
        let values = if values.len() == self.columns.len() {
            values
        } else {
            // defensive: a shape mismatch drops every value rather than pass one untouched
            vec![Value::Null; self.columns.len()]
        };
        Row::new(Arc::clone(&self.columns), values).unwrap_or_else(|_| empty_row())
    }

    /// A change of the table version, transformed: images, key indexes and types.
    pub fn apply_change(&self, change: Change) -> Change {
        Change {
            table: change.table,
            op: change.op,
            before: change.before.map(|r| self.apply_row(r)),
            after: change.after.map(|r| self.apply_row(r)),
            key: Arc::clone(&self.key),
            types: self.types.clone().or(change.types),
        }
    }
}

/// A row without columns (its shape always matches).
#[cold]
fn empty_row() -> Row {
    #[allow(clippy::expect_used)]
    Row::new(Arc::from(Vec::<String>::new()), Vec::new()).expect("an empty row has no shape")
}

#[cfg(test)]
mod tests {
    use super::super::column_controls::{ColumnControls, HashRule, MaskRule};
    use super::super::source_config::Password;
    use super::*;
    use capstan_core::change::{Op, TableId};
    use capstan_core::name_pattern::NamePattern;

    fn cols(names: &[&str]) -> Arc<[String]> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn t(bytes: &str) -> Value {
        Value::Text {
            bytes: bytes.as_bytes().to_vec(),
            collation: 255,
        }
    }

    fn plan() -> Arc<ColumnPlan> {
        let controls = ColumnControls {
            include: Vec::new(),
            exclude: vec![NamePattern::exact("shop.c.ssn")],
            mask: vec![MaskRule {
                chars: 3,
                columns: vec![NamePattern::exact("shop.c.card")],
            }],
            hash: Some(HashRule {
                salt: Password::new("salt"),
                columns: vec![NamePattern::regex(r"shop\.c\.(email|n)").unwrap()],
            }),
        };
        let ty = |sql: SqlType, nullable: bool| ColumnType { sql, nullable };
        let types: ColumnTypes = vec![
            ty(SqlType::Text, false),
            ty(
                SqlType::Int {
                    bytes: 4,
                    unsigned: false,
                },
                false,
            ),
            ty(SqlType::Text, true),
            ty(SqlType::Bytes, true),
            ty(SqlType::Text, true),
            ty(
                SqlType::Int {
                    bytes: 8,
                    unsigned: false,
                },
                true,
            ),
        ]
        .into();
        controls
            .plan(
                &TableId::new("shop", "c"),
                &cols(&["ssn", "id", "email", "card", "name", "n"]),
                Some(&types),
                &[1],
            )
            .unwrap()
            .unwrap()
    }

    #[test]
    fn rows_lose_excluded_columns_and_masked_and_hashed_values() {
        let p = plan();
        let row = Row::new(
            cols(&["ssn", "id", "email", "card", "name", "n"]),
            vec![
                t("123-45-6789"),
                Value::Int(7),
                t("a@example.com"),
                Value::Bytes(b"4111111111111111".to_vec()),
                t("Ann"),
                Value::Int(42),
            ],
        )
        .unwrap();
        let out = p.apply_row(row);
        assert_eq!(
            out.columns(),
            &cols(&["id", "email", "card", "name", "n"])[..]
        );
        // sha256("salt" || "a@example.com") and sha256("salt" || "42"), as `sha256sum` prints
        let email = "3d7e5dcb069945de9b67403dd8c6a27f87660644ba789f2eb537043073736d42";
        let n = "ba5bf48c9d94fef61432ae21b346d1307be9476c9c8e98d111366abbb69d45cd";
        assert_eq!(
            out.values(),
            &[
                Value::Int(7),
                text(email.as_bytes().to_vec()),
                text(b"***".to_vec()),
                t("Ann"),
                text(n.as_bytes().to_vec()),
            ]
        );
        // NULL stays NULL
        let nulls = Row::new(
            cols(&["ssn", "id", "email", "card", "name", "n"]),
            vec![
                Value::Null,
                Value::Int(1),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ],
        )
        .unwrap();
        assert_eq!(
            p.apply_row(nulls).values(),
            &[
                Value::Int(1),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null
            ]
        );
    }

    #[test]
    fn changes_get_the_new_key_indexes_and_string_types() {
        let p = plan();
        assert_eq!(&p.key()[..], &[0]);
        assert_eq!(
            (p.index_of(0), p.index_of(1), p.index_of(5)),
            (None, Some(0), Some(4))
        );
        let types = p.types().unwrap();
        assert_eq!(types.len(), 5);
        assert_eq!(
            types[1],
            ColumnType {
                sql: SqlType::Text,
                nullable: true
            }
        );
        assert_eq!(
            types[4],
            ColumnType {
                sql: SqlType::Text,
                nullable: true
            }
        );
        assert_eq!(
            types[0],
            ColumnType {
                sql: SqlType::Int {
                    bytes: 4,
                    unsigned: false
                },
                nullable: false
            }
        );
        let row = Row::new(
            cols(&["ssn", "id", "email", "card", "name", "n"]),
            vec![
                t("x"),
                Value::Int(7),
                t("e"),
                Value::Null,
                t("n"),
                Value::Int(1),
            ],
        )
        .unwrap();
        let c = p.apply_change(Change {
            table: Arc::new(TableId::new("shop", "c")),
            op: Op::Delete,
            before: Some(row),
            after: None,
            key: vec![1].into(),
            types: None,
        });
        assert_eq!(c.key_column_names(), vec!["id"]);
        assert_eq!(c.before.unwrap().len(), 5);
        assert!(!format!("{p:?}").contains("salt\""));
    }
}
