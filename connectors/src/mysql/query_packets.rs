//! The packets of query responses, parsed without I/O: what a response starts with, the
//! EOF and OK packets that end results (and say whether another result follows), the
//! COM_STMT_PREPARE answer, column definitions, and binary-protocol rows as
//! `mysql_common` [`Value`]s.
//!
//! The connection announces no `CLIENT_DEPRECATE_EOF`: column definitions and rows each end
//! with a classic EOF packet (`0xFE`, warnings, status flags). Layouts come from
//! `mysql_common` ([`StmtPacket`], [`Column`], [`ValueDeserializer`], [`NullBitmap`]); what is
//! written here is the bounds checking around them. Every length read from the wire is
//! checked against the packet, so a malformed packet is an error (a value-free site name),
//! never a panic — including the column types `mysql_common`'s binary value reader does not
//! implement (it would panic on them), which are refused with the column definition.

use std::borrow::Cow;

use mysql_common::constants::{CapabilityFlags, ColumnType, StatusFlags};
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    Column, CommonOkPacket, NullBitmap, OkPacketDeserializer, OldEofPacket, StmtPacket,
};
use mysql_common::value::{BinValue, ServerSide, Value, ValueDeserializer};

use super::replica_conn::{parse_err, ServerErr};
use super::stmt_cache::PreparedStmt;
use super::text_query::{is_eof, lenenc_int};

/// Where a packet was malformed (value-free).
pub(crate) type Malformed = &'static str;

/// Most columns a result set may announce (MySQL allows 4096 per table; a select list of
/// expressions can be wider, but not beyond the 16-bit counts of the prepare answer).
pub(crate) const MAX_COLUMNS: u64 = u16::MAX as u64;

/// The first packet of the answer to COM_QUERY (per statement) or COM_STMT_EXECUTE.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ResponseHead {
    /// A statement without a result set; `more` when another result follows.
    Done {
        /// SERVER_MORE_RESULTS_EXISTS.
        more: bool,
    },
    /// The statement failed; nothing of this command follows.
    Error(ServerErr),
    /// A result set: this many column definitions, an EOF, rows, an EOF.
    ResultSet {
        /// The number of columns.
        columns: usize,
    },
}

/// Classifies the first packet of a response.
pub(crate) fn response_head(packet: &[u8]) -> Result<ResponseHead, Malformed> {
    match packet.first() {
        Some(0x00) => Ok(ResponseHead::Done {
            more: ok_more_results(packet)?,
        }),
        Some(0xFF) => Ok(ResponseHead::Error(parse_err(packet))),
        // 0xFB asks for LOCAL INFILE, never requested; 0xFE is no result head
        None | Some(0xFB | 0xFE) => Err("response head"),
        Some(_) => {
            let (n, used) = lenenc_int(packet).ok_or("column count")?;
            if used != packet.len() || n == 0 || n > MAX_COLUMNS {
                return Err("column count");
            }
            Ok(ResponseHead::ResultSet {
                columns: usize::try_from(n).map_err(|_| "column count")?,
            })
        }
    }
}

/// SERVER_MORE_RESULTS_EXISTS of an OK packet.
pub(crate) fn ok_more_results(packet: &[u8]) -> Result<bool, Malformed> {
    let ok = ParseBuf(packet)
        .parse::<OkPacketDeserializer<'_, CommonOkPacket>>(CapabilityFlags::CLIENT_PROTOCOL_41)
        .map_err(|_| "ok packet")?
        .into_inner();
    Ok(ok
        .status_flags()
        .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS))
}

/// `Some(more results follow)` if `packet` is an EOF packet, `None` if it is something else.
pub(crate) fn eof_more_results(packet: &[u8]) -> Result<Option<bool>, Malformed> {
    if !is_eof(packet) {
        return Ok(None);
    }
    let eof = ParseBuf(packet)
        .parse::<OkPacketDeserializer<'_, OldEofPacket>>(CapabilityFlags::CLIENT_PROTOCOL_41)
        .map_err(|_| "eof packet")?
        .into_inner();
    Ok(Some(
        eof.status_flags()
            .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS),
    ))
}

/// The answer to COM_STMT_PREPARE: the statement and how many parameter and column
/// definitions follow (each block ends with an EOF).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PrepareOk {
    /// The statement.
    pub(crate) stmt: PreparedStmt,
    /// Column definitions that follow the parameter definitions.
    pub(crate) columns: u16,
}

/// Parses the prepare answer (`0x00`, id, columns, params, filler, warnings; an error
/// packet is the caller's to check first).
pub(crate) fn prepare_ok(packet: &[u8]) -> Result<PrepareOk, Malformed> {
    let p: StmtPacket = ParseBuf(packet).parse(()).map_err(|_| "prepare answer")?;
    Ok(PrepareOk {
        stmt: PreparedStmt {
            id: p.statement_id(),
            params: p.num_params(),
        },
        columns: p.num_columns(),
    })
}

/// A column definition of a text result set (any type: its values arrive as text).
pub(crate) fn column_def(packet: &[u8]) -> Result<Column, Malformed> {
    ParseBuf(packet).parse(()).map_err(|_| "column definition")
}

/// A text-protocol row of `columns` values: each one its bytes (length-encoded) or NULL
/// (`0xFB`), as `mysql_common` holds text values; nothing may follow the last one.
pub(crate) fn text_values(packet: &[u8], columns: usize) -> Result<Vec<Value>, Malformed> {
    let mut values = Vec::with_capacity(columns.min(4096));
    let mut rest = packet;
    for _ in 0..columns {
        if rest.first() == Some(&0xFB) {
            values.push(Value::NULL);
            rest = &rest[1..];
            continue;
        }
        let (len, used) = lenenc_int(rest).ok_or("text value length")?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| used.checked_add(len))
            .ok_or("text value overruns the row")?;
        let bytes = rest.get(used..end).ok_or("text value overruns the row")?;
        values.push(Value::Bytes(bytes.to_vec()));
        rest = &rest[end..];
    }
    if !rest.is_empty() {
        return Err("text row has bytes after its last value");
    }
    Ok(values)
}

/// A column definition of a binary result set. Refuses a type the binary protocol does not
/// send (the binlog-only `*2` types, typed arrays): `mysql_common` cannot read its values.
pub(crate) fn binary_column(packet: &[u8]) -> Result<Column, Malformed> {
    let column: Column = ParseBuf(packet)
        .parse(())
        .map_err(|_| "column definition")?;
    if !binary_readable(column.column_type()) {
        return Err("column type outside the binary protocol");
    }
    Ok(column)
}

/// True for the column types whose binary values `mysql_common` reads.
fn binary_readable(t: ColumnType) -> bool {
    !matches!(
        t,
        ColumnType::MYSQL_TYPE_TIMESTAMP2
            | ColumnType::MYSQL_TYPE_DATETIME2
            | ColumnType::MYSQL_TYPE_TIME2
            | ColumnType::MYSQL_TYPE_TYPED_ARRAY
            | ColumnType::MYSQL_TYPE_UNKNOWN
    )
}

/// One binary-protocol row (`0x00`, NULL bitmap, the non-NULL values), read lazily: the
/// values are parsed as [`BinaryRow::values`] iterates, straight from the packet.
#[derive(Debug)]
pub(crate) struct BinaryRow<'a> {
    nulls: NullBitmap<ServerSide, Cow<'a, [u8]>>,
    values: &'a [u8],
    columns: &'a [Column],
}

impl<'a> BinaryRow<'a> {
    /// Splits a row packet of `columns` into its NULL bitmap and values.
    pub(crate) fn parse(packet: &'a [u8], columns: &'a [Column]) -> Result<Self, Malformed> {
        let mut buf = ParseBuf(packet);
        if buf.checked_eat_u8() != Some(0x00) {
            return Err("binary row header");
        }
        let nulls = buf
            .parse::<NullBitmap<ServerSide, Cow<'a, [u8]>>>(columns.len())
            .map_err(|_| "binary row null bitmap")?;
        Ok(BinaryRow {
            nulls,
            values: buf.0,
            columns,
        })
    }

    /// The number of values.
    pub(crate) fn len(&self) -> usize {
        self.columns.len()
    }

    /// The bytes of the row's values on the wire (without the header and NULL bitmap).
    pub(crate) fn value_bytes(&self) -> usize {
        self.values.len()
    }

    /// The values in column order (NULL as [`Value::NULL`]); an error for a value that
    /// overruns the packet, or for bytes left after the last one.
    pub(crate) fn values(&self) -> BinaryValues<'a, '_> {
        BinaryValues {
            row: self,
            buf: ParseBuf(self.values),
            at: 0,
        }
    }

    /// Every value, checked.
    pub(crate) fn to_vec(&self) -> Result<Vec<Value>, Malformed> {
        self.values().collect()
    }
}

/// The iterator of [`BinaryRow::values`].
#[derive(Debug)]
pub(crate) struct BinaryValues<'a, 'r> {
    row: &'r BinaryRow<'a>,
    buf: ParseBuf<'a>,
    at: usize,
}

impl Iterator for BinaryValues<'_, '_> {
    type Item = Result<Value, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        let column = self.row.columns.get(self.at)?;
        let null = self.row.nulls.is_null(self.at);
        self.at += 1;
        let value = if null {
            Ok(Value::NULL)
        } else if !binary_readable(column.column_type()) {
            Err("column type outside the binary protocol")
        } else {
            self.buf
                .parse::<ValueDeserializer<BinValue>>((column.column_type(), column.flags()))
                .map(|v| v.0)
                .map_err(|_| "binary value overruns the row")
        };
        if value.is_ok() && self.at == self.row.columns.len() && !self.buf.is_empty() {
            return Some(Err("binary row has bytes after its last value"));
        }
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.row.columns.len().saturating_sub(self.at);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use mysql_common::constants::ColumnFlags;
    use mysql_common::proto::MySerialize;

    use super::*;

    fn col(t: ColumnType) -> Column {
        Column::new(t).with_name(b"c")
    }

    fn wire(c: &Column) -> Vec<u8> {
        let mut out = Vec::new();
        c.serialize(&mut out);
        out
    }

    #[test]
    fn response_heads() {
        assert_eq!(
            response_head(&[0x00, 0, 0, 0x02, 0, 0, 0]),
            Ok(ResponseHead::Done { more: false })
        );
        assert_eq!(
            response_head(&[0x00, 0, 0, 0x0A, 0, 0, 0]),
            Ok(ResponseHead::Done { more: true })
        );
        let mut err = vec![0xFF, 0xB5, 0x04, b'#'];
        err.extend_from_slice(b"HY000Lock wait timeout exceeded");
        match response_head(&err) {
            Ok(ResponseHead::Error(e)) => assert_eq!(e.code, 1205),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            response_head(&[3]),
            Ok(ResponseHead::ResultSet { columns: 3 })
        );
        assert_eq!(
            response_head(&[0xFC, 0x00, 0x01]),
            Ok(ResponseHead::ResultSet { columns: 256 })
        );
        // truncated OK, a count with trailing bytes, a zero or absurd count, infile, empty
        assert!(response_head(&[0x00, 0]).is_err());
        assert!(response_head(&[3, 0]).is_err());
        assert!(response_head(&[0xFC, 0x01]).is_err());
        assert!(response_head(&[0xFD, 0x00, 0x00, 0x01]).is_err());
        assert!(response_head(&[0xFE, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(response_head(&[0xFB, b'f']).is_err());
        assert!(response_head(&[]).is_err());
    }

    #[test]
    fn eof_packets_carry_more_results() {
        assert_eq!(eof_more_results(&[0xFE, 0, 0, 0x02, 0]), Ok(Some(false)));
        assert_eq!(eof_more_results(&[0xFE, 0, 0, 0x0A, 0]), Ok(Some(true)));
        assert_eq!(eof_more_results(&[0x00, 1, 2]), Ok(None));
        // an EOF without its status is malformed, a long 0xFE packet is a row
        assert!(eof_more_results(&[0xFE, 0]).is_err());
        assert_eq!(eof_more_results(&[0xFE; 9]), Ok(None));
    }

    #[test]
    fn prepare_answers_are_length_checked() {
        let ok = [0x00, 7, 0, 0, 0, 3, 0, 2, 0, 0, 0, 0];
        assert_eq!(
            prepare_ok(&ok),
            Ok(PrepareOk {
                stmt: PreparedStmt { id: 7, params: 2 },
                columns: 3,
            })
        );
        // MySQL may append a metadata-follows byte
        let mut longer = ok.to_vec();
        longer.push(1);
        assert!(prepare_ok(&longer).is_ok());
        for cut in 0..ok.len() {
            assert!(prepare_ok(&ok[..cut]).is_err(), "truncated at {cut}");
        }
        let mut bad_status = ok;
        bad_status[0] = 0x01;
        assert!(prepare_ok(&bad_status).is_err());
    }

    #[test]
    fn column_definitions_are_length_checked_and_typed() {
        let c = col(ColumnType::MYSQL_TYPE_LONGLONG).with_flags(ColumnFlags::UNSIGNED_FLAG);
        let bytes = wire(&c);
        let parsed = binary_column(&bytes).unwrap();
        assert_eq!(parsed.name_ref(), b"c");
        assert_eq!(parsed.column_type(), ColumnType::MYSQL_TYPE_LONGLONG);
        for cut in 0..bytes.len() {
            assert!(binary_column(&bytes[..cut]).is_err(), "truncated at {cut}");
        }
        // a name length beyond the packet
        let mut long_name = bytes.clone();
        long_name[4] = 0xFA;
        assert!(binary_column(&long_name).is_err());
        // binlog-only types would make mysql_common panic on the values: refused here
        for t in [
            ColumnType::MYSQL_TYPE_TIMESTAMP2,
            ColumnType::MYSQL_TYPE_DATETIME2,
            ColumnType::MYSQL_TYPE_TIME2,
            ColumnType::MYSQL_TYPE_TYPED_ARRAY,
        ] {
            assert!(binary_column(&wire(&col(t))).is_err(), "{t:?}");
        }
        // an unknown type byte
        let mut unknown = bytes;
        let type_at = unknown.len() - 6;
        unknown[type_at] = 0x30;
        assert!(binary_column(&unknown).is_err());
    }

    #[test]
    fn text_rows_are_bytes_or_null_and_length_checked() {
        let p = [1, 0xFF, 0xFB, 0, 2, b'a', b'b'];
        assert_eq!(
            text_values(&p, 4),
            Ok(vec![
                Value::Bytes(vec![0xFF]),
                Value::NULL,
                Value::Bytes(Vec::new()),
                Value::Bytes(b"ab".to_vec()),
            ])
        );
        for cut in 0..p.len() {
            assert!(text_values(&p[..cut], 4).is_err(), "truncated at {cut}");
        }
        assert!(text_values(&p, 3).is_err(), "bytes after the last value");
        // 0xFF is no length; an 8-byte length beyond the packet (and beyond usize)
        assert!(text_values(&[0xFF], 1).is_err());
        assert!(text_values(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], 1).is_err());
        assert_eq!(text_values(&[], 0), Ok(Vec::new()));
        let def = wire(&col(ColumnType::MYSQL_TYPE_TIME2));
        assert!(
            column_def(&def).is_ok(),
            "text results accept any column type"
        );
        assert!(column_def(&def[..def.len() - 1]).is_err());
    }

    #[test]
    fn binary_rows_decode_values_and_nulls() {
        let cols = [
            col(ColumnType::MYSQL_TYPE_LONGLONG),
            col(ColumnType::MYSQL_TYPE_VAR_STRING),
            col(ColumnType::MYSQL_TYPE_TINY),
            col(ColumnType::MYSQL_TYPE_DATETIME),
        ];
        // header, bitmap (offset 2: column 2 is NULL -> bit 4), values
        let mut p = vec![0x00, 0b0001_0000];
        p.extend_from_slice(&(-5i64).to_le_bytes());
        p.extend_from_slice(&[2, b'h', b'i']);
        p.extend_from_slice(&[4, 0xE8, 0x07, 2, 29]);
        let row = BinaryRow::parse(&p, &cols).unwrap();
        assert_eq!(row.len(), 4);
        assert_eq!(
            row.to_vec().unwrap(),
            vec![
                Value::Int(-5),
                Value::Bytes(b"hi".to_vec()),
                Value::NULL,
                Value::Date(2024, 2, 29, 0, 0, 0, 0),
            ]
        );
        // every truncation is an error, never a panic
        for cut in 0..p.len() {
            let r = BinaryRow::parse(&p[..cut], &cols).and_then(|r| r.to_vec());
            assert!(r.is_err(), "truncated at {cut}");
        }
        // trailing bytes after the last value
        let mut extra = p.clone();
        extra.push(0);
        assert!(BinaryRow::parse(&extra, &cols).unwrap().to_vec().is_err());
        // a string length beyond the packet, a date length beyond the packet
        let mut long = p.clone();
        long[10] = 0xFA;
        assert!(BinaryRow::parse(&long, &cols).unwrap().to_vec().is_err());
        let mut long_date = p.clone();
        long_date[13] = 11;
        assert!(BinaryRow::parse(&long_date, &cols)
            .unwrap()
            .to_vec()
            .is_err());
        // a row packet that is not a row
        assert!(BinaryRow::parse(&[0x01, 0], &cols).is_err());
        // a type mysql_common cannot read, given anyway: an error, not a panic
        let odd = [col(ColumnType::MYSQL_TYPE_TIME2)];
        assert!(BinaryRow::parse(&[0x00, 0x00, 1], &odd)
            .unwrap()
            .to_vec()
            .is_err());
        // an all-NULL row of no columns
        assert_eq!(
            BinaryRow::parse(&[0x00, 0x00], &[]).unwrap().to_vec(),
            Ok(Vec::new())
        );
    }
}
