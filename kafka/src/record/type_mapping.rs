//! How the Debezium formats map column types to JSON: the options Debezium's MySQL connector
//! users set most, under capstan's snake_case names (each documents the Debezium property and
//! value it stands for). Only the Debezium formats read them.

use capstan_core::change::{ColumnType, SqlType};
use serde::{Deserialize, Serialize};

/// `DECIMAL` / `NUMERIC` columns (Debezium's `decimal.handling.mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecimalHandling {
    /// `precise` (Debezium's default): Kafka Connect's `Decimal`, the unscaled value as
    /// big-endian two's-complement bytes, base64 in JSON; the scale is a schema parameter.
    #[default]
    Precise,
    /// `string`: the exact decimal text (`"-12.340"`).
    String,
    /// `double`: a JSON number (may lose digits).
    Double,
}

/// Temporal columns except `TIMESTAMP` (Debezium's `time.precision.mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimePrecision {
    /// `adaptive_time_microseconds` (Debezium's MySQL default): `DATE` days since the epoch,
    /// `TIME` microseconds, `DATETIME(0-3)` milliseconds and `DATETIME(4-6)` microseconds since
    /// the epoch.
    #[default]
    AdaptiveTimeMicroseconds,
    /// `microseconds`: as adaptive, but every `DATETIME` in microseconds since the epoch.
    Microseconds,
    /// `connect`: Kafka Connect's own types: `DATE` days, `TIME` milliseconds, `DATETIME`
    /// milliseconds since the epoch (sub-millisecond digits are dropped).
    Connect,
    /// `isostring`: ISO 8601 text in UTC: `DATE` `"2024-01-31Z"`, `TIME` `"10:15:30.5Z"`,
    /// `DATETIME` `"2024-01-31T10:15:30.5Z"`.
    Isostring,
}

/// `BINARY`, `VARBINARY` and `BLOB` columns (Debezium's `binary.handling.mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryHandling {
    /// `bytes` (Debezium's default): bytes, which JSON carries as base64.
    #[default]
    Bytes,
    /// `base64`: a base64 string.
    Base64,
    /// `base64-url-safe`: a URL-safe base64 string (`-` and `_`, padded).
    Base64UrlSafe,
    /// `hex`: lowercase hexadecimal text.
    Hex,
}

/// `BIGINT UNSIGNED` columns (Debezium's `bigint.unsigned.handling.mode`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BigintUnsignedHandling {
    /// `long` (Debezium's default): a signed 64-bit number; values above 2^63 - 1 wrap to
    /// negative numbers, as they do in Debezium.
    #[default]
    Long,
    /// `precise`: Kafka Connect's `Decimal` with scale 0 (base64 bytes in JSON).
    Precise,
}

/// The type-mapping options of the Debezium formats; every field defaults to Debezium's own
/// default.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeMapping {
    /// Debezium's `decimal.handling.mode`: `precise` (default), `string` or `double`.
    #[serde(default)]
    pub decimal_handling_mode: DecimalHandling,
    /// Debezium's `time.precision.mode`: `adaptive_time_microseconds` (default),
    /// `microseconds`, `connect` or `isostring`.
    #[serde(default)]
    pub time_precision_mode: TimePrecision,
    /// Debezium's `binary.handling.mode`: `bytes` (default), `base64`, `base64_url_safe`
    /// (Debezium's `base64-url-safe`) or `hex`.
    #[serde(default)]
    pub binary_handling_mode: BinaryHandling,
    /// Debezium's `bigint.unsigned.handling.mode`: `long` (default) or `precise`.
    #[serde(default)]
    pub bigint_unsigned_handling_mode: BigintUnsignedHandling,
}

impl TypeMapping {
    /// True when a column of type `ty` is Connect's `Decimal` of scale 0 rather than a number:
    /// a `BIGINT UNSIGNED` under `bigint_unsigned_handling_mode: precise`. The one rule both
    /// the schema and the value follow.
    pub(crate) fn bigint_as_decimal(&self, ty: &ColumnType) -> bool {
        self.bigint_unsigned_handling_mode == BigintUnsignedHandling::Precise
            && matches!(
                ty.sql,
                SqlType::Int {
                    bytes: 8,
                    unsigned: true
                }
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_snake_case_and_default_to_debeziums_defaults() {
        let m: TypeMapping = serde_json::from_str("{}").unwrap();
        assert_eq!(m, TypeMapping::default());
        let m: TypeMapping = serde_json::from_str(
            r#"{"decimal_handling_mode":"string","time_precision_mode":"isostring",
                "binary_handling_mode":"base64_url_safe","bigint_unsigned_handling_mode":"precise"}"#,
        )
        .unwrap();
        assert_eq!(
            m,
            TypeMapping {
                decimal_handling_mode: DecimalHandling::String,
                time_precision_mode: TimePrecision::Isostring,
                binary_handling_mode: BinaryHandling::Base64UrlSafe,
                bigint_unsigned_handling_mode: BigintUnsignedHandling::Precise,
            }
        );
        assert!(
            serde_json::from_str::<TypeMapping>(r#"{"decimal_handling_mode":"exact"}"#).is_err()
        );
        assert!(
            serde_json::from_str::<TypeMapping>(r#"{"decimal.handling.mode":"string"}"#).is_err()
        );
    }
}
