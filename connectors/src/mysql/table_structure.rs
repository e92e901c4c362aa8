//! [`table_structure`]: a table map ([`TableSchema`]) as the [`TableStructure`] a
//! schema-change event's `tableChanges` describe. Pure. The table map names each column's
//! binlog type, metadata (lengths, precision, fractional digits), signedness, collation and
//! nullability, and the primary key; it carries no default, comment, auto-increment or
//! generation flag, and no table charset, so neither does the structure.

use capstan_core::change::{ColumnStructure, TableStructure};
use mysql_common::collations::{Collation, CollationId};
use mysql_common::constants::ColumnType as Binlog;

use super::column_plan::ColumnPlan;
use super::decode::text::{fixed_string_bytes, BINARY_COLLATION};
use super::table_schema::{ColumnSchema, TableSchema};

/// The structure of the columns `plan` keeps (all without a plan), in table order.
pub(crate) fn table_structure(schema: &TableSchema, plan: Option<&ColumnPlan>) -> TableStructure {
    let kept = |i: usize| plan.is_none_or(|p| p.index_of(i).is_some());
    let name = |i: usize| schema.column_names.get(i).cloned().unwrap_or_default();
    TableStructure {
        columns: schema
            .columns
            .iter()
            .enumerate()
            .filter(|(i, _)| kept(*i))
            .map(|(i, c)| (i as u32 + 1, column_structure(name(i), c)))
            .collect(),
        primary_key: schema.key.iter().map(|&i| name(i)).collect(),
    }
}

/// The charset of a character column's collation, and its bytes per character at most;
/// `None` for binary data or an unknown collation.
fn charset(col: &ColumnSchema) -> Option<(String, u32)> {
    let id = col.collation.filter(|&c| c != BINARY_COLLATION)?;
    let collation = Collation::resolve(CollationId::from(id));
    let max_len = u32::from(collation.max_len());
    (max_len > 0 && collation.charset() != "unknown")
        .then(|| (collation.charset().to_string(), max_len))
}

fn column_structure(name: String, col: &ColumnSchema) -> ColumnStructure {
    use Binlog::*;
    let m0 = col.meta.first().copied().unwrap_or(0);
    let m1 = col.meta.get(1).copied().unwrap_or(0);
    let cs = charset(col);
    let binary = col.collation.is_none_or(|c| c == BINARY_COLLATION);
    let int = |n: &str| {
        if col.unsigned {
            format!("{n} UNSIGNED")
        } else {
            n.to_string()
        }
    };
    // fractional digits: a length only when declared (DATETIME(0) and DATETIME are alike)
    let fsp = (m0 > 0).then_some(u32::from(m0.min(6)));
    // characters from a byte length, when the charset is known
    let chars = |bytes: usize| cs.as_ref().map(|(_, max)| bytes as u32 / max);
    let (type_name, length, scale) = match col.column_type {
        MYSQL_TYPE_TINY => (int("TINYINT"), None, None),
        MYSQL_TYPE_SHORT => (int("SMALLINT"), None, None),
        MYSQL_TYPE_INT24 => (int("MEDIUMINT"), None, None),
        MYSQL_TYPE_LONG => (int("INT"), None, None),
        MYSQL_TYPE_LONGLONG => (int("BIGINT"), None, None),
        MYSQL_TYPE_FLOAT => (int("FLOAT"), None, None),
        MYSQL_TYPE_DOUBLE => (int("DOUBLE"), None, None),
        MYSQL_TYPE_NEWDECIMAL | MYSQL_TYPE_DECIMAL => {
            (int("DECIMAL"), Some(u32::from(m0)), Some(u32::from(m1)))
        }
        MYSQL_TYPE_YEAR => ("YEAR".into(), None, None),
        MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATE => ("DATE".into(), None, None),
        MYSQL_TYPE_TIME2 => ("TIME".into(), fsp, None),
        MYSQL_TYPE_TIME => ("TIME".into(), None, None),
        MYSQL_TYPE_DATETIME2 => ("DATETIME".into(), fsp, None),
        MYSQL_TYPE_DATETIME => ("DATETIME".into(), None, None),
        MYSQL_TYPE_TIMESTAMP2 => ("TIMESTAMP".into(), fsp, None),
        MYSQL_TYPE_TIMESTAMP => ("TIMESTAMP".into(), None, None),
        MYSQL_TYPE_VARCHAR | MYSQL_TYPE_VAR_STRING => {
            let bytes = usize::from(u16::from_le_bytes([m0, m1]));
            if binary {
                ("VARBINARY".into(), Some(bytes as u32), None)
            } else {
                ("VARCHAR".into(), chars(bytes), None)
            }
        }
        MYSQL_TYPE_STRING => {
            let bytes = fixed_string_bytes(col);
            if binary {
                ("BINARY".into(), Some(bytes as u32), None)
            } else {
                ("CHAR".into(), chars(bytes), None)
            }
        }
        MYSQL_TYPE_BLOB | MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB => {
            let size = match m0 {
                1 => "TINY",
                3 => "MEDIUM",
                4 => "LONG",
                _ => "",
            };
            let kind = if binary { "BLOB" } else { "TEXT" };
            (format!("{size}{kind}"), None, None)
        }
        MYSQL_TYPE_BIT => ("BIT".into(), Some(u32::from(m1) * 8 + u32::from(m0)), None),
        MYSQL_TYPE_ENUM => ("ENUM".into(), None, None),
        MYSQL_TYPE_SET => ("SET".into(), None, None),
        MYSQL_TYPE_JSON => ("JSON".into(), None, None),
        MYSQL_TYPE_GEOMETRY => ("GEOMETRY".into(), None, None),
        MYSQL_TYPE_VECTOR => ("VECTOR".into(), None, None),
        // never decoded (the decoder halts on them)
        MYSQL_TYPE_NULL | MYSQL_TYPE_TYPED_ARRAY | MYSQL_TYPE_UNKNOWN => {
            ("UNKNOWN".into(), None, None)
        }
    };
    ColumnStructure {
        name,
        type_name,
        length,
        scale,
        charset: cs.map(|(name, _)| name),
        nullable: col.nullable,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use capstan_core::change::TableId;
    use capstan_core::name_pattern::NamePattern;

    use super::*;
    use crate::mysql::column_controls::ColumnControls;
    use crate::mysql::column_types::column_types;

    fn col(column_type: Binlog, meta: &[u8], collation: Option<u16>) -> ColumnSchema {
        ColumnSchema {
            column_type,
            type_code: column_type as u8,
            meta: meta.to_vec(),
            nullable: true,
            unsigned: false,
            collation,
            enum_values: None,
            set_values: None,
        }
    }

    fn structure(name: &str, type_name: &str, length: Option<u32>) -> ColumnStructure {
        ColumnStructure {
            name: name.into(),
            type_name: type_name.into(),
            length,
            scale: None,
            charset: None,
            nullable: true,
        }
    }

    #[test]
    fn a_table_map_gives_names_types_lengths_charsets_and_the_key() {
        use Binlog::*;
        let id = ColumnSchema {
            nullable: false,
            unsigned: true,
            ..col(MYSQL_TYPE_LONGLONG, &[], None)
        };
        let columns = vec![
            ("id", id),
            ("price", col(MYSQL_TYPE_NEWDECIMAL, &[12, 2], None)),
            // VARCHAR(64) utf8mb4 (255): 256 bytes
            ("name", col(MYSQL_TYPE_VARCHAR, &[0, 1], Some(255))),
            // CHAR(10) latin1 (8): type byte 0xfe, 10 bytes
            ("code", col(MYSQL_TYPE_STRING, &[0xfe, 10], Some(8))),
            ("raw", col(MYSQL_TYPE_VARCHAR, &[16, 0], Some(63))),
            ("body", col(MYSQL_TYPE_BLOB, &[3], Some(255))),
            ("img", col(MYSQL_TYPE_BLOB, &[4], Some(63))),
            ("at", col(MYSQL_TYPE_DATETIME2, &[6], None)),
            ("ts", col(MYSQL_TYPE_TIMESTAMP2, &[0], None)),
            ("flags", col(MYSQL_TYPE_BIT, &[3, 1], None)),
            ("state", col(MYSQL_TYPE_ENUM, &[1], Some(255))),
            ("doc", col(MYSQL_TYPE_JSON, &[4], None)),
            ("secret", col(MYSQL_TYPE_LONG, &[], None)),
        ];
        let names: Arc<[String]> = columns.iter().map(|(n, _)| n.to_string()).collect();
        let cols: Vec<ColumnSchema> = columns.into_iter().map(|(_, c)| c).collect();
        let schema = TableSchema {
            table_id: 1,
            table: Arc::new(TableId::new("shop", "t")),
            types: column_types(&cols),
            columns: cols,
            column_names: Arc::clone(&names),
            key: vec![0].into(),
            has_column_names: true,
            has_signedness: true,
        };
        let controls = ColumnControls {
            exclude: vec![NamePattern::exact("shop.t.secret")],
            ..ColumnControls::default()
        };
        let plan = controls
            .plan(&schema.table, &names, Some(&schema.types), &schema.key)
            .unwrap();
        let charset = |c: ColumnStructure, cs: &str| ColumnStructure {
            charset: Some(cs.into()),
            ..c
        };
        let want = vec![
            ColumnStructure {
                nullable: false,
                ..structure("id", "BIGINT UNSIGNED", None)
            },
            ColumnStructure {
                scale: Some(2),
                ..structure("price", "DECIMAL", Some(12))
            },
            charset(structure("name", "VARCHAR", Some(64)), "utf8mb4"),
            charset(structure("code", "CHAR", Some(10)), "latin1"),
            structure("raw", "VARBINARY", Some(16)),
            charset(structure("body", "MEDIUMTEXT", None), "utf8mb4"),
            structure("img", "LONGBLOB", None),
            structure("at", "DATETIME", Some(6)),
            structure("ts", "TIMESTAMP", None),
            structure("flags", "BIT", Some(11)),
            charset(structure("state", "ENUM", None), "utf8mb4"),
            structure("doc", "JSON", None),
        ];
        let got = table_structure(&schema, plan.as_deref());
        assert_eq!(
            got,
            TableStructure {
                columns: want
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| (i as u32 + 1, c))
                    .collect(),
                primary_key: vec!["id".into()],
            },
            "the excluded column (13) is left out"
        );
        // without a plan every column is there
        assert_eq!(table_structure(&schema, None).columns.len(), 13);
    }
}
