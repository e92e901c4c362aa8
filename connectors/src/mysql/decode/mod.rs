//! Row decoding: a rows event's images + the table map → typed [`Value`]s.
//!
//! A rows event holds, per row, one image (writes: after; deletes: before) or two (updates:
//! before then after). Each image starts with a NULL bitmap over the columns *present* in
//! that image (the event's column bitmap), followed by the non-NULL values back to back, each
//! laid out by its column type and metadata. We walk the images ourselves, one type family
//! per file, rather than through mysql_common's `BinlogRow`: that one panics on short
//! metadata and mis-decodes negative TIME(1)/TIME(2).

mod cursor;
mod json;
mod numeric;
mod temporal;
mod text;

use capstan_core::change::Value;
use mysql_common::constants::ColumnType;

use self::cursor::Cursor;
use super::event::{RowsEvent, RowsKind};
use super::halt::Halt;
use super::table_schema::{ColumnSchema, TableSchema};

/// Decoder switches. The defaults are the production posture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Decode the pre-5.6 TIME/DATETIME/TIMESTAMP formats instead of halting (fixture
    /// files from old servers; a supported source never emits them).
    pub legacy_temporal: bool,
    /// Without ENUM/SET member metadata, deliver the raw index/bitmask as [`Value::UInt`]
    /// instead of halting (fixture files captured with `binlog_row_metadata=MINIMAL`).
    pub enum_set_index_fallback: bool,
}

/// One decoded row image: a value per table column, `None` for a column absent from the
/// image (only with `binlog_row_image` other than FULL).
#[derive(Clone, PartialEq, Debug)]
pub struct RowImage {
    /// Values in table order.
    pub values: Vec<Option<Value>>,
}

impl RowImage {
    /// True if every column is present.
    pub fn is_full(&self) -> bool {
        self.values.iter().all(Option::is_some)
    }

    /// The values if every column is present.
    pub fn into_full(self) -> Option<Vec<Value>> {
        self.values.into_iter().collect()
    }
}

/// One decoded row of a rows event.
#[derive(Clone, PartialEq, Debug)]
pub struct DecodedRow {
    /// Before image (updates, deletes).
    pub before: Option<RowImage>,
    /// After image (writes, updates).
    pub after: Option<RowImage>,
}

/// Decodes every row of `event` against `schema`.
pub fn decode_rows(
    schema: &TableSchema,
    event: &RowsEvent,
    opts: &DecodeOptions,
) -> Result<Vec<DecodedRow>, Halt> {
    let n = schema.columns.len();
    if event.num_columns != n {
        return Err(Halt::RowDecodeFailed {
            column: n,
            reason: "column count differs from table map",
        });
    }
    let (before, after) = match event.kind {
        RowsKind::Write => (None, event.after_columns.as_deref()),
        RowsKind::Delete => (event.before_columns.as_deref(), None),
        RowsKind::Update => (
            event.before_columns.as_deref(),
            event.after_columns.as_deref(),
        ),
    };
    if before.is_none() && after.is_none() {
        return Err(Halt::RowDecodeFailed {
            column: 0,
            reason: "rows event without column bitmap",
        });
    }
    let mut cur = Cursor::new(&event.rows);
    let mut rows = Vec::new();
    while !cur.is_empty() {
        let before = match before {
            Some(present) => Some(decode_image(schema, present, &mut cur, opts)?),
            None => None,
        };
        let after = match after {
            Some(present) => Some(decode_image(schema, present, &mut cur, opts)?),
            None => None,
        };
        rows.push(DecodedRow { before, after });
    }
    Ok(rows)
}

fn decode_image(
    schema: &TableSchema,
    present: &[bool],
    cur: &mut Cursor<'_>,
    opts: &DecodeOptions,
) -> Result<RowImage, Halt> {
    let n = schema.columns.len();
    let count = present.iter().take(n).filter(|&&p| p).count();
    cur.column = 0;
    let nulls = cur.take(count.div_ceil(8))?;
    let mut values = Vec::with_capacity(n);
    let mut image_index = 0usize;
    for (i, col) in schema.columns.iter().enumerate() {
        if !present.get(i).copied().unwrap_or(false) {
            values.push(None);
            continue;
        }
        let is_null = nulls
            .get(image_index / 8)
            .is_some_and(|b| b & (1 << (image_index % 8)) != 0);
        image_index += 1;
        if is_null {
            values.push(Some(Value::Null));
            continue;
        }
        cur.column = i;
        values.push(Some(decode_value(col, cur, opts)?));
    }
    Ok(RowImage { values })
}

fn unsupported(cur: &Cursor<'_>, col: &ColumnSchema, reason: &'static str) -> Halt {
    Halt::UnsupportedColumnType {
        column: cur.column,
        type_code: col.type_code,
        reason,
    }
}

fn decode_value(
    col: &ColumnSchema,
    cur: &mut Cursor<'_>,
    opts: &DecodeOptions,
) -> Result<Value, Halt> {
    use ColumnType::*;
    let m0 = col.meta.first().copied().unwrap_or(0);
    let m1 = col.meta.get(1).copied().unwrap_or(0);
    match col.column_type {
        MYSQL_TYPE_TINY => numeric::integer(cur, 1, col.unsigned),
        MYSQL_TYPE_SHORT => numeric::integer(cur, 2, col.unsigned),
        MYSQL_TYPE_INT24 => numeric::integer(cur, 3, col.unsigned),
        MYSQL_TYPE_LONG => numeric::integer(cur, 4, col.unsigned),
        MYSQL_TYPE_LONGLONG => numeric::integer(cur, 8, col.unsigned),
        MYSQL_TYPE_FLOAT => numeric::float(cur),
        MYSQL_TYPE_DOUBLE => numeric::double(cur),
        MYSQL_TYPE_NEWDECIMAL => numeric::decimal(cur, m0, m1),
        MYSQL_TYPE_YEAR => temporal::year(cur),
        MYSQL_TYPE_NEWDATE | MYSQL_TYPE_DATE => temporal::date(cur),
        MYSQL_TYPE_TIME2 => temporal::time2(cur, m0),
        MYSQL_TYPE_DATETIME2 => temporal::datetime2(cur, m0),
        MYSQL_TYPE_TIMESTAMP2 => temporal::timestamp2(cur, m0),
        MYSQL_TYPE_TIMESTAMP if opts.legacy_temporal => temporal::legacy_timestamp(cur),
        MYSQL_TYPE_DATETIME if opts.legacy_temporal => temporal::legacy_datetime(cur),
        MYSQL_TYPE_TIME if opts.legacy_temporal => temporal::legacy_time(cur),
        MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIME => {
            Err(unsupported(cur, col, "pre_5_6_temporal"))
        }
        MYSQL_TYPE_VARCHAR | MYSQL_TYPE_VAR_STRING => text::varchar(cur, col),
        MYSQL_TYPE_STRING => text::fixed_string(cur, col),
        MYSQL_TYPE_BLOB | MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB => {
            text::blob(cur, col)
        }
        MYSQL_TYPE_GEOMETRY => text::geometry(cur, col),
        MYSQL_TYPE_JSON => text::json(cur, col),
        MYSQL_TYPE_VECTOR => text::vector(cur, col),
        MYSQL_TYPE_BIT => text::bit(cur, col),
        MYSQL_TYPE_ENUM => text::enumeration(cur, col, opts.enum_set_index_fallback),
        MYSQL_TYPE_SET => text::set(cur, col, opts.enum_set_index_fallback),
        MYSQL_TYPE_NULL => Ok(Value::Null),
        MYSQL_TYPE_DECIMAL => Err(unsupported(cur, col, "pre_5_0_decimal")),
        MYSQL_TYPE_TYPED_ARRAY => Err(unsupported(cur, col, "typed_array")),
        MYSQL_TYPE_UNKNOWN => Err(unsupported(cur, col, "unknown_type")),
    }
}

#[cfg(test)]
mod tests;
