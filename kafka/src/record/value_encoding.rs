//! Which column-value encoding a pipeline's records use: a decision made once, from the
//! sink's `format`, and passed to the record builder.

use capstan_core::change::{ColumnType, Value};
use serde_json::Value as Json;

use super::charset_decoder::decode_text_borrowed;
use super::debezium_value::debezium_value;
use super::envelope::Cell;
use super::json_value::{json_value, ValueFailure, BINARY_COLLATION};
use super::type_mapping::TypeMapping;

/// The column-value encoding of a pipeline's change events and keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum ValueEncoding {
    /// capstan's own JSON forms (`format: capstan_json`): ISO text for temporal values,
    /// decimals as exact text.
    #[default]
    Capstan,
    /// Debezium's MySQL-connector encodings under the given type mapping
    /// (`format: debezium_json`).
    Debezium(TypeMapping),
}

impl ValueEncoding {
    /// The JSON form of one column value, of the declared type `ty` when the source gives it.
    pub(crate) fn encode(
        &self,
        value: &Value,
        ty: Option<&ColumnType>,
    ) -> Result<Json, ValueFailure> {
        match self {
            ValueEncoding::Capstan => json_value(value),
            ValueEncoding::Debezium(mapping) => debezium_value(value, ty, mapping),
        }
    }

    /// [`Self::encode`], with the values both encodings write as the row's own text
    /// (character data, and an enum's, a set's or a JSON document's text; a decimal in
    /// capstan's JSON) borrowed from the row instead of copied.
    pub(crate) fn encode_cell<'r>(
        &self,
        value: &'r Value,
        ty: Option<&ColumnType>,
    ) -> Result<Cell<'r>, ValueFailure> {
        match (self, value) {
            (_, Value::Text { bytes, collation }) if *collation != BINARY_COLLATION => {
                decode_text_borrowed(bytes, *collation)
                    .map(Cell::from)
                    .map_err(ValueFailure::Text)
            }
            (_, Value::Enum(s) | Value::Set(s) | Value::Json(s))
            | (ValueEncoding::Capstan, Value::Decimal(s)) => Ok(Cell::Text(s)),
            _ => self.encode(value, ty).map(Cell::Json),
        }
    }
}
