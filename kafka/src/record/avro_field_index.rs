//! [`FieldIndex`]: a map key (a string, as `OrderedObject` and `serde_json` objects give
//! them) resolved to its record field's index in an [`AvroPlan`](super::avro_schema::AvroPlan)
//! without copying the key. Anything but a string key is a mismatch.

use serde::ser::{Impossible, Serialize, Serializer};

use super::avro_schema::PlanField;
use super::avro_writer::{Mismatch, MISMATCH};

/// Resolves a key to the index of the plan field of that Connect name (`None`: not in the plan).
pub(crate) struct FieldIndex<'p>(pub(crate) &'p [PlanField]);

type Found = Option<usize>;

impl FieldIndex<'_> {
    fn find(&self, name: &str) -> Found {
        self.0.iter().position(|f| f.connect == name)
    }
}

macro_rules! refuse {
    ($($name:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $name(self, $(_: $arg),*) -> Result<Found, Mismatch> {
            Err(MISMATCH)
        })*
    };
}

impl Serializer for FieldIndex<'_> {
    type Ok = Found;
    type Error = Mismatch;
    type SerializeSeq = Impossible<Found, Mismatch>;
    type SerializeTuple = Impossible<Found, Mismatch>;
    type SerializeTupleStruct = Impossible<Found, Mismatch>;
    type SerializeTupleVariant = Impossible<Found, Mismatch>;
    type SerializeMap = Impossible<Found, Mismatch>;
    type SerializeStruct = Impossible<Found, Mismatch>;
    type SerializeStructVariant = Impossible<Found, Mismatch>;

    fn serialize_str(self, v: &str) -> Result<Found, Mismatch> {
        Ok(self.find(v))
    }

    fn serialize_char(self, v: char) -> Result<Found, Mismatch> {
        Ok(self.find(v.encode_utf8(&mut [0; 4])))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Found, Mismatch> {
        Ok(self.find(variant))
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Found, Mismatch> {
        value.serialize(self)
    }

    refuse!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
    );

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<Found, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<Found, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Mismatch> {
        Err(MISMATCH)
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

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Mismatch> {
        Err(MISMATCH)
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Mismatch> {
        Err(MISMATCH)
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
