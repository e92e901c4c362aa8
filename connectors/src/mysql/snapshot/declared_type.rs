//! A snapshot column's declared type ([`ColumnType`]) from its `information_schema.COLUMNS`
//! row: the same types the binlog's table map gives the stream's changes, so a table's
//! snapshot rows and its changes carry one schema.

use capstan_core::change::{ColumnType, SqlType};

use super::table::{ColKind, ColumnRow};

/// The members of an `enum('a','b')` / `set('a','b')` column type, unquoted (`''` is `'`).
fn members(column_type: &str) -> Vec<String> {
    let Some(open) = column_type.find('(') else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chars = column_type[open + 1..].chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\'' {
            continue;
        }
        let mut member = String::new();
        loop {
            match chars.next() {
                Some('\'') if chars.peek() == Some(&'\'') => {
                    chars.next();
                    member.push('\'');
                }
                Some('\'') | None => break,
                Some(c) => member.push(c),
            }
        }
        out.push(member);
    }
    out
}

/// `(precision, scale)` of a `decimal(p,s)` column type.
fn precision_scale(column_type: &str) -> (u8, u8) {
    let inner = column_type
        .split_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(inner, _)| inner);
    let mut parts = inner
        .split(',')
        .map(|p| p.trim().parse::<u8>().unwrap_or(0));
    let precision = parts.next().unwrap_or(10);
    (precision, parts.next().unwrap_or(0))
}

/// The declared type of column `c`, read as `kind`.
pub(crate) fn declared_type(c: &ColumnRow, kind: ColKind) -> ColumnType {
    let data_type = c.data_type.to_ascii_lowercase();
    let sql = match kind {
        ColKind::Int { unsigned } => SqlType::Int {
            bytes: match data_type.as_str() {
                "tinyint" => 1,
                "smallint" => 2,
                "mediumint" => 3,
                "bigint" => 8,
                _ => 4,
            },
            unsigned,
        },
        ColKind::Decimal => {
            let (precision, scale) = precision_scale(&c.column_type);
            SqlType::Decimal { precision, scale }
        }
        ColKind::Float => SqlType::Float,
        ColKind::Double => SqlType::Double,
        ColKind::Year => SqlType::Year,
        ColKind::Date => SqlType::Date,
        ColKind::Time { fsp } => SqlType::Time { fsp },
        ColKind::DateTime { fsp } => SqlType::DateTime { fsp },
        ColKind::Timestamp { fsp } => SqlType::Timestamp { fsp },
        ColKind::Text { .. } => SqlType::Text,
        ColKind::Bytes | ColKind::FixedBinary => SqlType::Bytes,
        ColKind::Bit { bits } => SqlType::Bit { bits },
        ColKind::Enum => SqlType::Enum {
            members: members(&c.column_type).into(),
        },
        ColKind::Set => SqlType::Set {
            members: members(&c.column_type).into(),
        },
        ColKind::Json => SqlType::Json,
        ColKind::Geometry => SqlType::Geometry,
        ColKind::Vector => SqlType::Vector,
    };
    ColumnType {
        sql,
        nullable: c.nullable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_members_and_decimal_digits_come_from_the_column_type() {
        assert_eq!(members("enum('a','b''c','')"), vec!["a", "b'c", ""]);
        assert_eq!(members("set('x,y','z')"), vec!["x,y", "z"]);
        assert_eq!(precision_scale("decimal(10,2)"), (10, 2));
        assert_eq!(precision_scale("decimal(65,30) unsigned"), (65, 30));
        assert_eq!(precision_scale("decimal(5)"), (5, 0));
    }

    #[test]
    fn integer_widths_follow_the_data_type() {
        let c = ColumnRow {
            data_type: "MEDIUMINT".into(),
            column_type: "mediumint unsigned".into(),
            nullable: true,
            ..ColumnRow::default()
        };
        assert_eq!(
            declared_type(&c, ColKind::Int { unsigned: true }),
            ColumnType {
                sql: SqlType::Int {
                    bytes: 3,
                    unsigned: true
                },
                nullable: true
            }
        );
    }
}
