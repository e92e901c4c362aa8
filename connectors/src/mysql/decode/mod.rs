//! Row decoding: a rows event's images + the table map → typed [`Value`]s.
//!
//! A rows event holds, per row, one image (writes: after; deletes: before) or two (updates:
//! before then after). Each image starts with a NULL bitmap over the columns *present* in
//! that image (the event's column bitmap), followed by the non-NULL values back to back, each
//! laid out by its column type and metadata. We walk the images ourselves, one type family
//! per file, rather than through mysql_common's `BinlogRow`: that one panics on short
//! metadata and mis-decodes negative TIME(1)/TIME(2).

mod ahead;
mod cursor;
mod json;
mod numeric;
mod temporal;
pub(crate) mod text;

use capstan_core::change::Value;
use mysql_common::constants::ColumnType;

pub use self::ahead::{AheadSlot, RowsAhead};
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

/// The images a rows event carries: (before, after) column bitmaps, one of them absent for
/// writes and deletes.
type Images<'e> = (Option<&'e [bool]>, Option<&'e [bool]>);

fn images<'e>(schema: &TableSchema, event: &'e RowsEvent) -> Result<Images<'e>, Halt> {
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
    Ok((before, after))
}

/// Decodes every row of `event` against `schema`.
pub fn decode_rows(
    schema: &TableSchema,
    event: &RowsEvent,
    opts: &DecodeOptions,
) -> Result<Vec<DecodedRow>, Halt> {
    let (before, after) = images(schema, event)?;
    let image = |present: &[bool], cur: &mut Cursor<'_>| -> Result<RowImage, Halt> {
        let mut values = Vec::with_capacity(schema.columns.len());
        decode_image(schema, present, cur, opts, &mut values)?;
        let values = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| present.get(i).copied().unwrap_or(false).then_some(v))
            .collect();
        Ok(RowImage { values })
    };
    let mut cur = Cursor::new(&event.rows);
    let mut rows = Vec::new();
    while !cur.is_empty() {
        let before = before.map(|p| image(p, &mut cur)).transpose()?;
        let after = after.map(|p| image(p, &mut cur)).transpose()?;
        rows.push(DecodedRow { before, after });
    }
    Ok(rows)
}

/// Decodes every row of `event` whose images must be full (every column present), handing
/// each row's `(before, after)` values to `row` in order, without the per-column `Option` of
/// [`decode_rows`]. Halts in the order [`decode_rows`] then [`RowImage::into_full`] per row
/// gives: a decode failure anywhere in the event first, then the first row with a partial
/// image (`partial_row_image`) or the first error `row` returns.
pub fn decode_full_rows(
    schema: &TableSchema,
    event: &RowsEvent,
    opts: &DecodeOptions,
    mut row: impl FnMut(Option<Vec<Value>>, Option<Vec<Value>>) -> Result<(), Halt>,
) -> Result<(), Halt> {
    let (before, after) = images(schema, event)?;
    let n = schema.columns.len();
    let mut cur = Cursor::new(&event.rows);
    let image = |present: &[bool], cur: &mut Cursor<'_>| -> Result<(Vec<Value>, bool), Halt> {
        let mut values = Vec::with_capacity(n);
        let full = decode_image(schema, present, cur, opts, &mut values)?;
        Ok((values, full))
    };
    // The first failure in row order, reported once the whole event has decoded.
    let mut pending = Ok(());
    while !cur.is_empty() {
        let b = before.map(|p| image(p, &mut cur)).transpose()?;
        let a = after.map(|p| image(p, &mut cur)).transpose()?;
        if pending.is_err() {
            continue;
        }
        let partial = |i: &Option<(Vec<Value>, bool)>| i.as_ref().is_some_and(|(_, full)| !full);
        pending = if partial(&b) || partial(&a) {
            Err(Halt::PartialRowImage)
        } else {
            row(b.map(|(v, _)| v), a.map(|(v, _)| v))
        };
    }
    pending
}

/// Decodes one image into `values` (a value per table column, `Value::Null` standing in for
/// an absent one); returns true if every column was present.
fn decode_image(
    schema: &TableSchema,
    present: &[bool],
    cur: &mut Cursor<'_>,
    opts: &DecodeOptions,
    values: &mut Vec<Value>,
) -> Result<bool, Halt> {
    let n = schema.columns.len();
    let count = present.iter().take(n).filter(|&&p| p).count();
    cur.column = 0;
    let nulls = cur.take(count.div_ceil(8))?;
    let mut image_index = 0usize;
    for (i, col) in schema.columns.iter().enumerate() {
        if !present.get(i).copied().unwrap_or(false) {
            values.push(Value::Null);
            continue;
        }
        let is_null = nulls
            .get(image_index / 8)
            .is_some_and(|b| b & (1 << (image_index % 8)) != 0);
        image_index += 1;
        if is_null {
            values.push(Value::Null);
            continue;
        }
        cur.column = i;
        values.push(decode_value(col, cur, opts)?);
    }
    Ok(count == n)
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
