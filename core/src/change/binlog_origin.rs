//! Where in the source's binlog a transaction was read.

use std::sync::Arc;

/// The binlog coordinates of a transaction: the originating server id and the file and byte
/// position of its GTID event (where reading the whole transaction again starts). Carried
/// into each change event's `source.server_id`, `source.file` and `source.pos`.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct BinlogOrigin {
    /// The server id in the GTID event's header (the server that originally wrote it).
    pub server_id: u32,
    /// The binlog file the GTID event is in (empty when no ROTATE named it yet).
    pub file: Arc<str>,
    /// The byte position of the GTID event in that file.
    pub pos: u64,
}
