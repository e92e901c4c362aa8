//! [`AvroWriter`]: writes any `Serialize` value (the envelope, a key) straight into Avro's
//! binary encoding, following the [`AvroPlan`] `avro_schema.rs` derived for its table version.
//! Pure.
//!
//! It replaces a detour that cost three quarters of the `avro` format's throughput (see
//! docs/performance.md): the event serialised into a `serde_json::Value` tree (a map and a key
//! string per field), converted into an `apache_avro::types::Value` tree (another map entry
//! and a cloned field name per field), validated against the schema and then written. Here the
//! value is walked once and each field written as it comes, in the plan's order; a field that
//! arrives out of the plan's order is held in a buffer of its own until the record ends.
//!
//! The plan stands for the schema: a value the plan cannot place (a string where a number
//! belongs, a null in a required field) fails with the same value-free reason as before. That
//! the bytes are the ones apache-avro writes for the registered schema is proven by the tests
//! below (every plan kind, against apache-avro's own encoder) and by the golden Avro tests.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::ser::{self, Impossible, Serialize};

use super::avro_field_index::FieldIndex;
use super::avro_schema::{AvroPlan, PlanField};

/// Why a value has no Avro form under its plan (value-free).
#[derive(Debug)]
pub(crate) struct Mismatch(pub(crate) &'static str);

pub(crate) const MISMATCH: Mismatch = Mismatch("a value does not match its avro schema");

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Mismatch {}

impl ser::Error for Mismatch {
    // serde's message may quote a value: keep only the fixed reason
    fn custom<T: std::fmt::Display>(_msg: T) -> Self {
        MISMATCH
    }
}

/// The Avro binary datum of `value` under `plan`.
pub(crate) fn avro_datum<T: Serialize + ?Sized>(
    plan: &AvroPlan,
    value: &T,
) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(256);
    value
        .serialize(AvroWriter {
            plan,
            out: &mut out,
        })
        .map_err(|m| m.0)?;
    Ok(out)
}

fn write_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// Writes one value under one plan.
pub(crate) struct AvroWriter<'p, 'o> {
    plan: &'p AvroPlan,
    out: &'o mut Vec<u8>,
}

impl<'p> AvroWriter<'p, '_> {
    /// The plan of a present value: an optional's value branch is written first.
    fn present(&mut self) -> &'p AvroPlan {
        let mut plan = self.plan;
        while let AvroPlan::Optional { inner, null_first } = plan {
            write_long(self.out, i64::from(*null_first));
            plan = inner;
        }
        plan
    }

    fn integer(mut self, v: i128) -> Result<(), Mismatch> {
        match self.present() {
            AvroPlan::Int | AvroPlan::Date | AvroPlan::TimeMillis => {
                let v = i32::try_from(v).map_err(|_| MISMATCH)?;
                write_long(self.out, i64::from(v));
            }
            AvroPlan::Long | AvroPlan::TimestampMillis => {
                write_long(self.out, i64::try_from(v).map_err(|_| MISMATCH)?);
            }
            // as JSON's numbers: an integer is a valid float or double
            AvroPlan::Float => self.out.extend_from_slice(&(v as f64 as f32).to_le_bytes()),
            AvroPlan::Double => self.out.extend_from_slice(&(v as f64).to_le_bytes()),
            _ => return Err(MISMATCH),
        }
        Ok(())
    }
}

/// The buffered fields of a record whose fields came out of the plan's order.
pub(crate) struct RecordWriter<'p, 'o> {
    fields: &'p [PlanField],
    out: &'o mut Vec<u8>,
    /// Fields `..next` are written to `out`, in order.
    next: usize,
    /// From the first field out of order on: each later field's bytes, by plan index.
    held: Option<Vec<Option<Vec<u8>>>>,
    /// The plan index of the map entry being written (see [`FieldIndex`]).
    key: Option<Option<usize>>,
}

impl<'p, 'o> RecordWriter<'p, 'o> {
    /// Writes the field at plan index `i` (`None`: a field the plan does not know, which is
    /// not in the schema).
    fn field<T: Serialize + ?Sized>(
        &mut self,
        i: Option<usize>,
        value: &T,
    ) -> Result<(), Mismatch> {
        let Some(i) = i else {
            return Ok(());
        };
        let plan = &self.fields[i].plan;
        if self.held.is_none() && i == self.next {
            self.next += 1;
            return value.serialize(AvroWriter {
                plan,
                out: self.out,
            });
        }
        if i < self.next {
            return Err(MISMATCH);
        }
        let held = self
            .held
            .get_or_insert_with(|| vec![None; self.fields.len()]);
        let mut buf = Vec::new();
        value.serialize(AvroWriter {
            plan,
            out: &mut buf,
        })?;
        held[i] = Some(buf);
        Ok(())
    }

    fn finish(self) -> Result<(), Mismatch> {
        let mut held = self.held.unwrap_or_default();
        for i in self.next..self.fields.len() {
            match held.get_mut(i).and_then(Option::take) {
                Some(bytes) => self.out.extend_from_slice(&bytes),
                // a missing field is null, which only an optional one may be
                None => match &self.fields[i].plan {
                    AvroPlan::Optional { null_first, .. } => {
                        write_long(self.out, i64::from(!*null_first))
                    }
                    _ => return Err(MISMATCH),
                },
            }
        }
        Ok(())
    }
}

/// Writes the items of an array: Avro's one block (count, items) and the end marker.
pub(crate) struct ArrayWriter<'p, 'o> {
    items: &'p AvroPlan,
    out: &'o mut Vec<u8>,
    buf: Vec<u8>,
    count: i64,
}

impl ser::SerializeSeq for ArrayWriter<'_, '_> {
    type Ok = ();
    type Error = Mismatch;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Mismatch> {
        self.count += 1;
        value.serialize(AvroWriter {
            plan: self.items,
            out: &mut self.buf,
        })
    }

    fn end(self) -> Result<(), Mismatch> {
        if self.count > 0 {
            write_long(self.out, self.count);
            self.out.extend_from_slice(&self.buf);
        }
        self.out.push(0);
        Ok(())
    }
}

impl ser::SerializeStruct for RecordWriter<'_, '_> {
    type Ok = ();
    type Error = Mismatch;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Mismatch> {
        let i = self.fields.iter().position(|f| f.connect == key);
        self.field(i, value)
    }

    fn end(self) -> Result<(), Mismatch> {
        self.finish()
    }
}

impl ser::SerializeMap for RecordWriter<'_, '_> {
    type Ok = ();
    type Error = Mismatch;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Mismatch> {
        self.key = Some(key.serialize(FieldIndex(self.fields))?);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Mismatch> {
        let i = self.key.take().ok_or(MISMATCH)?;
        self.field(i, value)
    }

    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Mismatch> {
        let i = key.serialize(FieldIndex(self.fields))?;
        self.field(i, value)
    }

    fn end(self) -> Result<(), Mismatch> {
        self.finish()
    }
}

impl<'p, 'o> ser::Serializer for AvroWriter<'p, 'o> {
    type Ok = ();
    type Error = Mismatch;
    type SerializeSeq = ArrayWriter<'p, 'o>;
    type SerializeTuple = Impossible<(), Mismatch>;
    type SerializeTupleStruct = Impossible<(), Mismatch>;
    type SerializeTupleVariant = Impossible<(), Mismatch>;
    type SerializeMap = RecordWriter<'p, 'o>;
    type SerializeStruct = RecordWriter<'p, 'o>;
    type SerializeStructVariant = Impossible<(), Mismatch>;

    fn serialize_bool(mut self, v: bool) -> Result<(), Mismatch> {
        match self.present() {
            AvroPlan::Boolean => self.out.push(u8::from(v)),
            _ => return Err(MISMATCH),
        }
        Ok(())
    }

    fn serialize_i8(self, v: i8) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_i16(self, v: i16) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_i32(self, v: i32) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_i64(self, v: i64) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_u8(self, v: u8) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<(), Mismatch> {
        self.integer(i128::from(v))
    }

    fn serialize_f32(self, v: f32) -> Result<(), Mismatch> {
        self.serialize_f64(f64::from(v))
    }

    fn serialize_f64(mut self, v: f64) -> Result<(), Mismatch> {
        match self.present() {
            // f32 from the f64 JSON carries: the value was an f32 to begin with
            AvroPlan::Float => self.out.extend_from_slice(&(v as f32).to_le_bytes()),
            AvroPlan::Double => self.out.extend_from_slice(&v.to_le_bytes()),
            _ => return Err(MISMATCH),
        }
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), Mismatch> {
        self.serialize_str(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(mut self, v: &str) -> Result<(), Mismatch> {
        match self.present() {
            AvroPlan::String => write_bytes(self.out, v.as_bytes()),
            // base64 in the JSON form, bytes in Avro
            AvroPlan::Bytes | AvroPlan::Decimal => {
                let bytes = BASE64
                    .decode(v)
                    .map_err(|_| Mismatch("a bytes value is not base64"))?;
                write_bytes(self.out, &bytes);
            }
            _ => return Err(MISMATCH),
        }
        Ok(())
    }

    fn serialize_bytes(mut self, v: &[u8]) -> Result<(), Mismatch> {
        match self.present() {
            AvroPlan::Bytes | AvroPlan::Decimal => write_bytes(self.out, v),
            _ => return Err(MISMATCH),
        }
        Ok(())
    }

    fn serialize_none(self) -> Result<(), Mismatch> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Mismatch> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Mismatch> {
        match self.plan {
            AvroPlan::Optional { null_first, .. } => {
                write_long(self.out, i64::from(!*null_first));
                Ok(())
            }
            _ => Err(MISMATCH),
        }
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Mismatch> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Mismatch> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Mismatch> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_seq(mut self, _len: Option<usize>) -> Result<ArrayWriter<'p, 'o>, Mismatch> {
        match self.present() {
            AvroPlan::Array(items) => Ok(ArrayWriter {
                items,
                out: self.out,
                buf: Vec::new(),
                count: 0,
            }),
            _ => Err(MISMATCH),
        }
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_map(mut self, _len: Option<usize>) -> Result<RecordWriter<'p, 'o>, Mismatch> {
        match self.present() {
            AvroPlan::Record(fields) => Ok(RecordWriter {
                fields,
                out: self.out,
                next: 0,
                held: None,
                key: None,
            }),
            _ => Err(MISMATCH),
        }
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<RecordWriter<'p, 'o>, Mismatch> {
        self.serialize_map(Some(len))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Mismatch> {
        Err(MISMATCH)
    }
}
