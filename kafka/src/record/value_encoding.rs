//! Which column-value encoding a pipeline's records use: a decision made once, from the
//! sink's `format`, and passed to the record builder.

use capstan_core::change::{ColumnType, Value};
use serde_json::Value as Json;

use super::debezium_value::debezium_value;
use super::json_value::{json_value, ValueFailure};
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
}
