//! The statements the snapshot reader sends, built from identifiers only. Pure.
//!
//! Every schema, table and column name is backquoted with its backquotes doubled; character
//! set and collation names are spliced only after [`is_plain_identifier`] accepted them.
//! Values are never interpolated: every key value is a bound parameter. Byte strings are
//! bound as their hex text and read back with `UNHEX(?)`: a string parameter is taken in the
//! connection character set, which may reject or convert bytes that are not valid in it (a
//! latin1 key is not valid utf8mb4), while hex text is plain ASCII. A character key part is
//! read as `CONVERT(UNHEX(?) USING <charset>) COLLATE <collation>`: the conversion labels the
//! bytes with the column's character set (no transcoding from binary), and the explicit
//! collation makes the comparison the column's own (the index stays usable).

use capstan_core::change::TableId;

use super::key::{KeyKind, KeyPart};
use super::table::{is_plain_identifier, TableLayout};
use super::weighing::Weighing;

/// `name` as a backquoted identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `` `schema`.`table` ``.
pub(crate) fn quote_table(table: &TableId) -> String {
    format!(
        "{}.{}",
        quote_ident(&table.schema),
        quote_ident(&table.table)
    )
}

/// The placeholder of a key value of `kind`.
pub(crate) fn placeholder(kind: &KeyKind) -> String {
    match kind {
        KeyKind::Text {
            charset, collation, ..
        } if is_plain_identifier(charset) && is_plain_identifier(collation) => {
            format!("CONVERT(UNHEX(?) USING {charset}) COLLATE {collation}")
        }
        // describe refuses other names; never splice one
        KeyKind::Text { .. } | KeyKind::FixedBinary | KeyKind::VarBinary => "UNHEX(?)".to_string(),
        KeyKind::Int | KeyKind::UInt => "?".to_string(),
    }
}

/// The chunk statement: every column in table order, rows after the cursor (when
/// `with_after`) and up to a bound (when `with_upto`: a single-column key ≤ `?`) in key
/// order, `LIMIT ?`.
pub(crate) fn chunk_select(layout: &TableLayout, with_after: bool, with_upto: bool) -> String {
    let cols: Vec<String> = layout
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let key = &layout.table.key.columns;
    let order: Vec<String> = key.iter().map(|k| quote_ident(&k.name)).collect();
    let mut sql = format!(
        "SELECT {} FROM {}",
        cols.join(", "),
        quote_table(&layout.table.id)
    );
    if with_after {
        // (k0 > ?) OR (k0 = ? AND k1 > ?) OR …
        let mut ors = Vec::with_capacity(key.len());
        for i in 0..key.len() {
            let mut ands = Vec::with_capacity(i + 1);
            for (j, k) in key.iter().enumerate().take(i + 1) {
                let op = if j == i { ">" } else { "=" };
                ands.push(format!(
                    "{} {op} {}",
                    quote_ident(&k.name),
                    placeholder(&k.kind)
                ));
            }
            ors.push(format!("({})", ands.join(" AND ")));
        }
        sql.push_str(" WHERE (");
        sql.push_str(&ors.join(" OR "));
        sql.push(')');
    }
    if let (true, Some(first)) = (with_upto, key.first()) {
        sql.push_str(if with_after { " AND " } else { " WHERE " });
        sql.push_str(&format!(
            "{} <= {}",
            quote_ident(&first.name),
            placeholder(&first.kind)
        ));
    }
    sql.push_str(" ORDER BY ");
    sql.push_str(&order.join(", "));
    sql.push_str(" LIMIT ?");
    sql
}

/// The bound value of [`chunk_select`]'s upper bound: a single integer key part of the
/// table's single integer key column. `None` otherwise.
pub(crate) fn range_bound(layout: &TableLayout, upto: &[KeyPart]) -> Option<mysql_common::Value> {
    match (upto, layout.table.key.columns.as_slice()) {
        ([KeyPart::Int(v)], [c]) if c.kind == KeyKind::Int => Some(mysql_common::Value::Int(*v)),
        ([KeyPart::UInt(v)], [c]) if c.kind == KeyKind::UInt => Some(mysql_common::Value::UInt(*v)),
        _ => None,
    }
}

/// The bound values of [`chunk_select`]'s cursor predicate, in placeholder order; `BINARY(n)`
/// parts padded back to `n` bytes. `None` if `after` does not fit the key.
pub(crate) fn chunk_params(
    layout: &TableLayout,
    after: &[KeyPart],
) -> Option<Vec<mysql_common::Value>> {
    if !layout.table.key.accepts(after) {
        return None;
    }
    let values: Vec<mysql_common::Value> = after
        .iter()
        .zip(&layout.fixed_len)
        .map(|(part, fixed)| match part {
            KeyPart::Int(v) => mysql_common::Value::Int(*v),
            KeyPart::UInt(v) => mysql_common::Value::UInt(*v),
            KeyPart::Bytes(b) => {
                let mut b = b.clone();
                if let Some(n) = fixed {
                    if b.len() < *n {
                        b.resize(*n, 0);
                    }
                }
                hex_param(&b)
            }
            KeyPart::Text(b) => hex_param(b),
        })
        .collect();
    let mut params = Vec::new();
    for i in 0..values.len() {
        params.extend(values.iter().take(i + 1).cloned());
    }
    Some(params)
}

/// A byte string as the hex text `UNHEX(?)` reads.
pub(crate) fn hex_param(bytes: &[u8]) -> mysql_common::Value {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
    mysql_common::Value::Bytes(out)
}

/// `SELECT <weight of placeholder>, …` for `n` values, weighed by `weighing`.
pub(crate) fn weights_select(kind: &KeyKind, weighing: &Weighing, n: usize) -> String {
    let one = weighing.expr(&placeholder(kind));
    format!("SELECT {}", vec![one; n].join(", "))
}

/// The weights of one space and of two spaces under `kind`'s collation, from which
/// [`Weighing::of`] tells a PAD SPACE collation's weight unit. `None` for a kind that is not
/// a character kind with plain names.
pub(crate) fn space_weights_select(kind: &KeyKind) -> Option<String> {
    match kind {
        KeyKind::Text {
            charset, collation, ..
        } if is_plain_identifier(charset) && is_plain_identifier(collation) => {
            let space = |s: &str| {
                format!("WEIGHT_STRING(CONVERT('{s}' USING {charset}) COLLATE {collation})")
            };
            Some(format!("SELECT {}, {}", space(" "), space("  ")))
        }
        _ => None,
    }
}

/// The order-contract canary over `n` values: each value's index, its rank under the
/// collation's comparison (how many of the values are smaller by `<`, the comparison the
/// index and the chunk predicate use), and its weight (the expression [`weights_select`]
/// uses). Not `ORDER BY`: MariaDB's sort orders a trailing NUL of a NO PAD value before the
/// end of the shorter value, where `<` and the index order it after.
pub(crate) fn canary_select(kind: &KeyKind, weighing: &Weighing, n: usize) -> String {
    let ph = placeholder(kind);
    let rows: Vec<String> = (0..n)
        .map(|i| format!("SELECT {i} AS i, {ph} AS v"))
        .collect();
    format!(
        "WITH d AS ({}) SELECT a.i, (SELECT COUNT(*) FROM d b WHERE b.v < a.v) AS r, {} AS w \
         FROM d a",
        rows.join(" UNION ALL "),
        weighing.expr("a.v"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::snapshot::table::{describe_from, ColumnRow, IndexRow};

    fn layout() -> TableLayout {
        let c = |name: &str, dt: &str, ct: &str| ColumnRow {
            name: name.into(),
            data_type: dt.into(),
            column_type: ct.into(),
            charset: (dt == "varchar").then(|| "utf8mb4".into()),
            collation: (dt == "varchar").then(|| "utf8mb4_0900_ai_ci".into()),
            collation_id: (dt == "varchar").then_some(255),
            octet_length: Some(4),
            char_length: (dt == "varchar").then_some(5),
            pad_attribute: (dt == "varchar").then(|| "NO PAD".into()),
            ..ColumnRow::default()
        };
        let cols = vec![
            c("we`ird; DROP TABLE x; --", "int", "int"),
            c("b", "binary", "binary(4)"),
            c("v", "varchar", "varchar(5)"),
        ];
        let idx = |seq: u64, col: &str| IndexRow {
            index: "PRIMARY".into(),
            seq,
            column: Some(col.into()),
            sub_part: None,
        };
        let keys = [idx(1, "we`ird; DROP TABLE x; --"), idx(2, "b"), idx(3, "v")];
        describe_from(&TableId::new("s`", "t"), cols, &keys, 0).unwrap()
    }

    #[test]
    fn a_bounded_range_of_a_single_integer_key() {
        let c = |name: &str, ct: &str| ColumnRow {
            name: name.into(),
            data_type: "bigint".into(),
            column_type: ct.into(),
            ..ColumnRow::default()
        };
        let idx = IndexRow {
            index: "PRIMARY".into(),
            seq: 1,
            column: Some("id".into()),
            sub_part: None,
        };
        let t = TableId::new("s", "t");
        let signed = describe_from(
            &t,
            vec![c("id", "bigint"), c("v", "bigint")],
            std::slice::from_ref(&idx),
            0,
        )
        .unwrap();
        assert_eq!(
            chunk_select(&signed, true, true),
            "SELECT `id`, `v` FROM `s`.`t` WHERE ((`id` > ?)) AND `id` <= ? ORDER BY `id` LIMIT ?"
        );
        assert_eq!(
            chunk_select(&signed, false, true),
            "SELECT `id`, `v` FROM `s`.`t` WHERE `id` <= ? ORDER BY `id` LIMIT ?"
        );
        assert_eq!(
            range_bound(&signed, &[KeyPart::Int(-4)]),
            Some(mysql_common::Value::Int(-4))
        );
        // the bound must have the key's own shape
        assert_eq!(range_bound(&signed, &[KeyPart::UInt(4)]), None);
        assert_eq!(
            range_bound(&signed, &[KeyPart::Int(1), KeyPart::Int(2)]),
            None
        );
        let unsigned = describe_from(
            &t,
            vec![c("id", "bigint unsigned"), c("v", "bigint")],
            &[idx],
            0,
        )
        .unwrap();
        assert_eq!(
            range_bound(&unsigned, &[KeyPart::UInt(u64::MAX)]),
            Some(mysql_common::Value::UInt(u64::MAX))
        );
        // composite keys are not split
        assert_eq!(range_bound(&layout(), &[KeyPart::Int(1)]), None);
    }

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(quote_table(&TableId::new("s`", "t")), "`s```.`t`");
    }

    #[test]
    fn chunk_statement_expands_the_composite_predicate() {
        let l = layout();
        let first = chunk_select(&l, false, false);
        assert_eq!(
            first,
            "SELECT `we``ird; DROP TABLE x; --`, `b`, `v` FROM `s```.`t` \
             ORDER BY `we``ird; DROP TABLE x; --`, `b`, `v` LIMIT ?"
        );
        let next = chunk_select(&l, true, false);
        let conv = "CONVERT(UNHEX(?) USING utf8mb4) COLLATE utf8mb4_0900_ai_ci";
        assert!(next.contains(&format!(
            "WHERE ((`we``ird; DROP TABLE x; --` > ?) OR (`we``ird; DROP TABLE x; --` = ? AND `b` > UNHEX(?)) \
             OR (`we``ird; DROP TABLE x; --` = ? AND `b` = UNHEX(?) AND `v` > {conv}))"
        )), "{next}");
        assert_eq!(next.matches('?').count(), 7);
        let params = chunk_params(
            &l,
            &[
                KeyPart::Int(1),
                KeyPart::Bytes(vec![9]),
                KeyPart::Text(b"x".to_vec()),
            ],
        )
        .unwrap();
        assert_eq!(params.len(), 6);
        assert_eq!(params[2], mysql_common::Value::Bytes(b"09000000".to_vec()));
        assert_eq!(params[5], mysql_common::Value::Bytes(b"78".to_vec()));
        assert!(chunk_params(&l, &[KeyPart::UInt(1)]).is_none());
    }

    #[test]
    fn weights_and_canary_statements() {
        let kind = KeyKind::Text {
            charset: "latin1".into(),
            collation: "latin1_swedish_nopad_ci".into(),
            pad_to: None,
        };
        let bare = Weighing::of(&kind, None).unwrap();
        let w = weights_select(&kind, &bare, 2);
        assert_eq!(
            w.matches(
                "WEIGHT_STRING(CONVERT(UNHEX(?) USING latin1) COLLATE latin1_swedish_nopad_ci)"
            )
            .count(),
            2
        );
        let c = canary_select(&kind, &bare, 3);
        assert_eq!(c.matches('?').count(), 3);
        assert!(
            c.contains("(SELECT COUNT(*) FROM d b WHERE b.v < a.v) AS r, WEIGHT_STRING(a.v) AS w"),
            "{c}"
        );
        // PAD SPACE in units: the bare weight too (encoded afterwards), in the canary too
        let pad = KeyKind::Text {
            charset: "latin1".into(),
            collation: "latin1_swedish_ci".into(),
            pad_to: Some(12),
        };
        assert_eq!(
            space_weights_select(&pad).unwrap(),
            "SELECT WEIGHT_STRING(CONVERT(' ' USING latin1) COLLATE latin1_swedish_ci), \
             WEIGHT_STRING(CONVERT('  ' USING latin1) COLLATE latin1_swedish_ci)"
        );
        let units = Weighing::of(&pad, Some((b" ", b"  "))).unwrap();
        let w = weights_select(&pad, &units, 2);
        assert_eq!(
            w.matches("WEIGHT_STRING(CONVERT(UNHEX(?) USING latin1) COLLATE latin1_swedish_ci)")
                .count(),
            2,
            "{w}"
        );
        // multi-level PAD SPACE: at the column's length
        let multi = Weighing::of(&pad, Some((&[1, 1], &[1, 1]))).unwrap();
        let w = weights_select(&pad, &multi, 2);
        assert_eq!(
            w.matches(
                "WEIGHT_STRING(CONVERT(UNHEX(?) USING latin1) COLLATE latin1_swedish_ci AS CHAR(12))"
            )
            .count(),
            2,
            "{w}"
        );
        let c = canary_select(&pad, &multi, 3);
        assert!(c.contains("WEIGHT_STRING(a.v AS CHAR(12)) AS w"), "{c}");
        // never a spliced name that is not plain
        let odd = KeyKind::Text {
            charset: "latin1".into(),
            collation: "x`y".into(),
            pad_to: Some(1),
        };
        assert_eq!(space_weights_select(&odd), None);
        assert_eq!(space_weights_select(&KeyKind::Int), None);
    }
}
