//! Helpers shared by the unit tests: synthetic event framing and hex.

use super::event::Event;
use super::event_reader::{EventReader, HEADER_LEN};

pub(crate) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// go-mysql's `vectors.json` from the shared fixtures (read in place). Absent: skipped with a
/// message, except under CI (`CI=true`), where a missing fixture is a failure.
pub(crate) fn go_mysql_vectors() -> Option<serde_json::Value> {
    // cargo's runtime CARGO_MANIFEST_DIR first: a binary built in another checkout sharing
    // the target directory still reads this checkout's fixtures
    let dir = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    let path = format!("{dir}/../../shared/testdata/external/go-mysql/vectors.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(serde_json::from_str(&text).unwrap()),
        Err(_) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("fixture {path} is missing (CI=true)")
        }
        Err(_) => {
            eprintln!("skipping: fixture {path} is missing");
            None
        }
    }
}

/// A whole event (v4 header, no checksum) around `body`.
pub(crate) fn frame(event_type: u8, body: &[u8]) -> Vec<u8> {
    let size = (HEADER_LEN + body.len()) as u32;
    let mut out = Vec::with_capacity(size as usize);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(event_type);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// Decodes a synthetic event with a fresh reader (binlog v4 defaults, no checksum).
pub(crate) fn decode(reader: &mut EventReader, event_type: u8, body_hex: &str) -> Event {
    reader.decode(&frame(event_type, &hex(body_hex))).unwrap()
}

/// A digested table map of `schema`.`table` with no columns, for tests that only need its
/// identity.
pub(crate) fn table_map_schema(
    schema: &str,
    table: &str,
    table_id: u64,
) -> std::sync::Arc<crate::mysql::table_schema::TableSchema> {
    std::sync::Arc::new(crate::mysql::table_schema::TableSchema {
        table_id,
        table: std::sync::Arc::new(capstan_core::change::TableId::new(schema, table)),
        columns: Vec::new(),
        column_names: Vec::<String>::new().into(),
        key: Vec::<usize>::new().into(),
        types: Vec::new().into(),
        has_column_names: true,
        has_signedness: true,
    })
}
