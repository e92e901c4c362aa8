//! Length-prefixed and member-indexed types: CHAR/VARCHAR/TEXT/BLOB, ENUM, SET, BIT, JSON,
//! GEOMETRY and VECTOR.

use capstan_core::change::Value;

use super::cursor::Cursor;
use crate::mysql::halt::Halt;
use crate::mysql::table_schema::ColumnSchema;

/// The binary collation: character columns with it hold bytes, not text.
pub(crate) const BINARY_COLLATION: u16 = 63;

fn meta(col: &ColumnSchema, i: usize) -> u8 {
    col.meta.get(i).copied().unwrap_or(0)
}

fn string_value(col: &ColumnSchema, bytes: &[u8]) -> Value {
    match col.collation {
        Some(BINARY_COLLATION) => Value::Bytes(bytes.to_vec()),
        Some(collation) => Value::Text {
            bytes: bytes.to_vec(),
            collation,
        },
        None => Value::Text {
            bytes: bytes.to_vec(),
            collation: 0,
        },
    }
}

/// VARCHAR / VAR_STRING: metadata is the declared byte length (LE u16); values are prefixed
/// by one length byte below 256, two above.
pub(crate) fn varchar(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let max = u16::from_le_bytes([meta(col, 0), meta(col, 1)]);
    let len = cur.le(if max < 256 { 1 } else { 2 })? as usize;
    let bytes = cur.take(len)?;
    Ok(string_value(col, bytes))
}

/// The declared byte length of a CHAR / BINARY (type STRING) column: split over the two
/// metadata bytes (MySQL bug #37426 packs its high bits into the type byte).
pub(crate) fn fixed_string_bytes(col: &ColumnSchema) -> usize {
    let (b0, b1) = (usize::from(meta(col, 0)), usize::from(meta(col, 1)));
    if b0 == 0 {
        b1 << 8
    } else if (b0 & 0x30) != 0x30 {
        b1 | (((b0 & 0x30) ^ 0x30) << 4)
    } else {
        b1
    }
}

/// CHAR / BINARY (type STRING): the declared byte length is split over the two metadata
/// bytes (MySQL bug #37426 packs its high bits into the type byte).
pub(crate) fn fixed_string(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let max = fixed_string_bytes(col);
    let len = cur.le(if max < 256 { 1 } else { 2 })? as usize;
    let bytes = cur.take(len)?;
    Ok(string_value(col, bytes))
}

/// The bytes of a BLOB-family value: metadata byte 0 is the length prefix size (1..=4).
pub(crate) fn blob_bytes<'a>(cur: &mut Cursor<'a>, col: &ColumnSchema) -> Result<&'a [u8], Halt> {
    let pack = usize::from(meta(col, 0));
    if !(1..=4).contains(&pack) {
        return Err(cur.fail("blob length size out of range"));
    }
    let len = cur.le(pack)? as usize;
    cur.take(len)
}

/// BLOB / TEXT.
pub(crate) fn blob(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let bytes = blob_bytes(cur, col)?;
    Ok(match col.collation {
        Some(c) if c != BINARY_COLLATION => Value::Text {
            bytes: bytes.to_vec(),
            collation: c,
        },
        _ => Value::Bytes(bytes.to_vec()),
    })
}

/// GEOMETRY: 4-byte little-endian SRID, then WKB.
pub(crate) fn geometry(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let bytes = blob_bytes(cur, col)?;
    if bytes.len() < 4 {
        return Err(cur.fail("geometry shorter than its srid"));
    }
    let (srid, wkb) = bytes.split_at(4);
    Ok(Value::Geometry {
        srid: u32::from_le_bytes([srid[0], srid[1], srid[2], srid[3]]),
        wkb: wkb.to_vec(),
    })
}

/// VECTOR: little-endian IEEE-754 single-precision elements.
pub(crate) fn vector(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let bytes = blob_bytes(cur, col)?;
    if bytes.len() % 4 != 0 {
        return Err(cur.fail("vector length not a multiple of 4"));
    }
    Ok(Value::Vector(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    ))
}

/// MySQL JSON: binary JSON → JSON text (our one-pass writer; mysql_common's DOM for what it
/// defers). An empty value is JSON null (MySQL writes a NOT NULL JSON column without a value
/// that way).
pub(crate) fn json(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let bytes = blob_bytes(cur, col)?;
    if bytes.is_empty() {
        return Ok(Value::Json("null".into()));
    }
    if let Some(text) = super::json::json_text(bytes) {
        return Ok(Value::Json(text));
    }
    super::json::via_dom(bytes)
        .map(Value::Json)
        .ok_or_else(|| cur.fail("malformed binary json"))
}

/// BIT(n): metadata `[n % 8, n / 8]`; `ceil(n / 8)` big-endian bytes.
pub(crate) fn bit(cur: &mut Cursor<'_>, col: &ColumnSchema) -> Result<Value, Halt> {
    let bits = u16::from(meta(col, 1)) * 8 + u16::from(meta(col, 0));
    if bits == 0 || bits > 64 {
        return Err(cur.fail("bit width out of range"));
    }
    let bytes = cur.take(usize::from(bits.div_ceil(8)))?;
    Ok(Value::Bit {
        bytes: bytes.to_vec(),
        bits,
    })
}

/// ENUM: a 1- or 2-byte member index (1-based; 0 is MySQL's invalid-value `''`).
pub(crate) fn enumeration(
    cur: &mut Cursor<'_>,
    col: &ColumnSchema,
    index_fallback: bool,
) -> Result<Value, Halt> {
    let width = usize::from(meta(col, 1));
    if !(1..=2).contains(&width) {
        return Err(cur.fail("enum width out of range"));
    }
    let index = cur.le(width)?;
    let Some(names) = col.enum_values.as_ref() else {
        if index_fallback {
            return Ok(Value::UInt(index));
        }
        return Err(Halt::TableMapMetadataMissing {
            missing: "enum_str_value",
        });
    };
    if index == 0 {
        return Ok(Value::Enum(String::new()));
    }
    let name = usize::try_from(index - 1)
        .ok()
        .and_then(|i| names.get(i))
        .ok_or(Halt::UnsupportedColumnType {
            column: cur.column,
            type_code: col.type_code,
            reason: "enum_index_out_of_range",
        })?;
    Ok(Value::Enum(name.clone()))
}

/// SET: a 1..=8-byte little-endian bitmask over the members; a bit beyond the declared
/// members is a metadata desync and halts.
pub(crate) fn set(
    cur: &mut Cursor<'_>,
    col: &ColumnSchema,
    index_fallback: bool,
) -> Result<Value, Halt> {
    let width = usize::from(meta(col, 1));
    if !(1..=8).contains(&width) {
        return Err(cur.fail("set width out of range"));
    }
    let mask = cur.le(width)?;
    let Some(names) = col.set_values.as_ref() else {
        if index_fallback {
            return Ok(Value::UInt(mask));
        }
        return Err(Halt::TableMapMetadataMissing {
            missing: "set_str_value",
        });
    };
    let mut out = String::new();
    for bit in 0..64usize {
        if mask & (1u64 << bit) == 0 {
            continue;
        }
        let name = names.get(bit).ok_or(Halt::UnsupportedColumnType {
            column: cur.column,
            type_code: col.type_code,
            reason: "set_member_out_of_range",
        })?;
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(name);
    }
    Ok(Value::Set(out))
}
