//! [`EventReader`]: raw event bytes in, [`Event`] out, without I/O.
//!
//! Framing and integrity are checked here before mysql_common sees a byte: the header's
//! `event_size` must equal the slice length and a checksummed event must be long enough to
//! hold its CRC32 (mysql_common's `Event::read` panics or underflows on such input). The
//! CRC32 itself is verified here too: mysql_common strips it but never compares it.
//!
//! The reader tracks the current FORMAT_DESCRIPTION event (post-header lengths, checksum
//! algorithm) and the server flavour it announces. Events inside a TRANSACTION_PAYLOAD carry
//! no checksum (WL#3549) and are decoded with checksums off.

use std::sync::Arc;

use capstan_core::position::{Flavor, Gtid, Sid, Tag, Uuid};
use mysql_common::binlog::consts::{BinlogChecksumAlg, BinlogVersion, EventFlags, EventType};
use mysql_common::binlog::events::{
    BinlogEventFooter, BinlogEventHeader, Event as McEvent, EventData, FormatDescriptionEvent,
    RowsEventData,
};

use super::decode::AheadSlot;
use super::event::{Event, QueryEvent, RowsEvent, RowsKind};
use super::halt::Halt;
use super::mariadb_events as maria;
use super::payload;
use super::table_schema::TableSchema;
use super::xid::XidKey;

/// Length of the v4 common event header.
pub const HEADER_LEN: usize = 19;
const CHECKSUM_LEN: usize = 4;
const FDE: u8 = EventType::FORMAT_DESCRIPTION_EVENT as u8;
const PAYLOAD: u8 = EventType::TRANSACTION_PAYLOAD_EVENT as u8;
const ROTATE: u8 = EventType::ROTATE_EVENT as u8;
/// A ROTATE's post-header: the position in the next file.
const ROTATE_POSITION_LEN: usize = 8;
const HEARTBEAT_V2: u8 = 41;

/// Decodes binlog events one at a time. See the module documentation.
#[derive(Debug, Clone)]
pub struct EventReader {
    fde: FormatDescriptionEvent<'static>,
    flavor: Flavor,
    verify_checksums: bool,
}

impl Default for EventReader {
    fn default() -> Self {
        Self::new()
    }
}

impl EventReader {
    /// A reader expecting a FORMAT_DESCRIPTION event first (until then: binlog v4 defaults,
    /// no checksums, MySQL flavour).
    pub fn new() -> Self {
        EventReader {
            fde: FormatDescriptionEvent::new(BinlogVersion::Version4),
            flavor: Flavor::Mysql,
            verify_checksums: true,
        }
    }

    /// The flavour announced by the last FORMAT_DESCRIPTION event (`MariaDB` in its server
    /// version), or the one set with [`EventReader::set_flavor`].
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// Sets the flavour (the I/O side knows it from the server handshake).
    pub fn set_flavor(&mut self, flavor: Flavor) {
        self.flavor = flavor;
    }

    /// Turns CRC32 verification off or on (on by default).
    pub fn set_verify_checksums(&mut self, verify: bool) {
        self.verify_checksums = verify;
    }

    /// True if the current format description declares CRC32 checksums.
    pub fn checksums_enabled(&self) -> bool {
        matches!(
            self.fde.footer().get_checksum_alg(),
            Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))
        )
    }

    /// Decodes one whole event: common header, body and (if enabled) CRC32 trailer.
    pub fn decode(&mut self, bytes: &[u8]) -> Result<Event, Halt> {
        self.decode_one(bytes, false)
    }

    fn decode_one(&mut self, bytes: &[u8], in_payload: bool) -> Result<Event, Halt> {
        if bytes.len() < HEADER_LEN {
            return Err(Halt::parse(0, "event shorter than its header"));
        }
        let event_type = bytes[4];
        let declared = u32::from_le_bytes([bytes[9], bytes[10], bytes[11], bytes[12]]);
        if usize::try_from(declared).ok() != Some(bytes.len()) {
            return Err(Halt::parse(event_type, "event size mismatch"));
        }
        let fde = if in_payload {
            if event_type == FDE || event_type == PAYLOAD {
                return Err(Halt::PayloadCorrupt {
                    reason: "forbidden event inside payload",
                });
            }
            let mut footer = self.fde.footer();
            footer.set_checksum_enabled(false);
            self.fde.clone().with_footer(footer)
        } else {
            self.fde.clone()
        };
        // The FDE carries its own checksum algorithm (mysql_common's footer reader is
        // bounds-safe for it); any other event must be long enough for the current one's.
        if event_type != FDE {
            let has_crc = match fde.footer().get_checksum_alg() {
                Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32)) => true,
                Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_OFF)) | Ok(None) => false,
                Err(_) => return Err(Halt::parse(event_type, "unknown checksum algorithm")),
            };
            if has_crc
                && fde.footer().get_checksum_enabled()
                && bytes.len() < HEADER_LEN + CHECKSUM_LEN
            {
                return Err(Halt::parse(event_type, "event shorter than its checksum"));
            }
        }
        if event_type == ROTATE && !in_payload && !self.checksums_enabled() {
            if let Some(ev) = checksummed_rotate(&fde, bytes) {
                return self.map(&ev, event_type);
            }
        }
        let ev =
            McEvent::read(&fde, bytes).map_err(|_| Halt::parse(event_type, "malformed event"))?;
        if self.verify_checksums && !in_payload {
            verify_checksum(&ev, event_type)?;
        }
        self.map(&ev, event_type)
    }

    fn map(&mut self, ev: &McEvent, event_type: u8) -> Result<Event, Halt> {
        // Event types capstan does not act on are classified by their type code alone and
        // never parsed: less work, and less untrusted input through parsers we don't need
        // (mysql_common 0.37's PREVIOUS_GTIDS parser allocates from an unchecked count).
        match event_type {
            1 | 5 | 7 | 9 | 13 | 14 | 17 | 28 | 29 | 35 | 36 | 37 => {
                return Ok(Event::Ignored { event_type })
            }
            6 | 8 | 10 | 11 | 12 | 18 => {
                return Ok(Event::Unsupported {
                    event_type,
                    halt: Halt::StatementBasedChange,
                })
            }
            20..=22 => {
                return Ok(Event::Unsupported {
                    event_type,
                    halt: Halt::UnsupportedRowsEvent {
                        reason: "pre_ga_rows_event",
                    },
                })
            }
            3 => return Ok(Event::Stop),
            26 => return Ok(Event::Incident),
            27 | HEARTBEAT_V2 => return Ok(Event::Heartbeat),
            0 => return Err(Halt::UnknownEventType { event_type }),
            PAYLOAD => {
                let inflated = payload::inflate(ev.data())?;
                return Ok(Event::TransactionPayload(self.decode_payload(&inflated)?));
            }
            _ => {}
        }
        let header = ev.header();
        let data = match ev.read_data() {
            Ok(Some(d)) => d,
            Ok(None) => return self.map_unknown(ev, event_type),
            Err(_) => return Err(Halt::parse(event_type, "malformed event body")),
        };
        match data {
            EventData::FormatDescriptionEvent(fde) => {
                let server_version = fde.server_version().trim_end_matches('\0').to_string();
                self.fde = fde.into_owned();
                if server_version.contains("MariaDB") {
                    self.flavor = Flavor::Mariadb;
                }
                Ok(Event::FormatDescription {
                    server_version,
                    checksum: self.checksums_enabled(),
                })
            }
            EventData::QueryEvent(q) => Ok(Event::Query(QueryEvent {
                schema: q.schema().into_owned(),
                statement: q.query().into_owned(),
            })),
            EventData::RotateEvent(r) => Ok(Event::Rotate {
                file: r.name().into_owned(),
                position: r.position(),
            }),
            EventData::XidEvent(_) => Ok(Event::Xid),
            EventData::TableMapEvent(tme) => Ok(Event::TableMap(Arc::new(
                TableSchema::from_event(&tme, self.flavor)?,
            ))),
            EventData::RowsEvent(rows) => Ok(map_rows(&rows, event_type)),
            EventData::GtidEvent(g) => {
                let tag = match g.tag() {
                    None => None,
                    Some(t) => Some(
                        Tag::parse_at(t.as_str(), 0)
                            .map_err(|_| Halt::parse(event_type, "invalid gtid tag"))?,
                    ),
                };
                let sid = Sid {
                    uuid: Uuid(g.sid()),
                    tag,
                };
                let committed_at_micros = match g.immediate_commit_timestamp() {
                    0 => u64::from(header.timestamp()) * 1_000_000,
                    ts => ts,
                };
                Ok(Event::Gtid {
                    gtid: Gtid::new(sid, g.gno()),
                    committed_at_micros,
                    server_id: header.server_id(),
                    position: event_start(&header),
                })
            }
            EventData::AnonymousGtidEvent(_) => Ok(Event::AnonymousGtid),
            EventData::XaPrepareLogEvent(raw) => match XidKey::from_xa_prepare_event(&raw) {
                Some((one_phase, xid)) => Ok(Event::XaPrepare { one_phase, xid }),
                None => Err(Halt::parse(event_type, "xa prepare malformed")),
            },
            EventData::IncidentEvent(_) => Ok(Event::Incident),
            EventData::HeartbeatEvent => Ok(Event::Heartbeat),
            EventData::StopEvent => Ok(Event::Stop),
            EventData::UnknownEvent => Err(Halt::UnknownEventType { event_type }),
            // classified by type code above
            _ => Ok(Event::Ignored { event_type }),
        }
    }

    fn map_unknown(&mut self, ev: &McEvent, event_type: u8) -> Result<Event, Halt> {
        let header = ev.header();
        match event_type {
            maria::GTID => {
                let mut g = maria::decode_gtid(ev.data(), header.server_id(), header.timestamp())?;
                g.position = event_start(&header);
                Ok(Event::MariadbGtid(g))
            }
            maria::GTID_LIST => Ok(Event::MariadbGtidList(maria::decode_gtid_list(ev.data())?)),
            maria::ANNOTATE_ROWS | maria::BINLOG_CHECKPOINT => Ok(Event::Ignored { event_type }),
            maria::START_ENCRYPTION => Ok(Event::Unsupported {
                event_type,
                halt: Halt::parse(event_type, "encrypted binlog"),
            }),
            maria::FIRST_COMPRESSED..=maria::LAST_COMPRESSED => Ok(Event::Unsupported {
                event_type,
                halt: Halt::UnsupportedRowsEvent {
                    reason: "mariadb_compressed_event",
                },
            }),
            HEARTBEAT_V2 => Ok(Event::Heartbeat),
            _ if header.flags().contains(EventFlags::LOG_EVENT_IGNORABLE_F) => {
                Ok(Event::Ignored { event_type })
            }
            _ => Err(Halt::UnknownEventType { event_type }),
        }
    }

    /// Splits an inflated payload into events and decodes each (checksums off).
    fn decode_payload(&mut self, mut bytes: &[u8]) -> Result<Vec<Event>, Halt> {
        let mut events = Vec::new();
        while !bytes.is_empty() {
            let len = frame_len(bytes).ok_or(Halt::PayloadCorrupt {
                reason: "malformed inner event header",
            })?;
            let (one, rest) = bytes.split_at(len);
            let event = self.decode_one(one, true).map_err(|h| match h {
                Halt::PayloadCorrupt { .. } | Halt::PayloadTooLarge { .. } => h,
                _ => Halt::PayloadCorrupt {
                    reason: "malformed inner event",
                },
            })?;
            events.push(event);
            bytes = rest;
        }
        Ok(events)
    }
}

/// The length of the event starting at `bytes[0]`, if its header is readable and the whole
/// event is present.
pub fn frame_len(bytes: &[u8]) -> Option<usize> {
    let size = bytes.get(9..13)?;
    let size = usize::try_from(u32::from_le_bytes([size[0], size[1], size[2], size[3]])).ok()?;
    (size >= HEADER_LEN && size <= bytes.len()).then_some(size)
}

/// The server's artificial ROTATE at the start of a dump comes before any FORMAT_DESCRIPTION,
/// so nothing has announced checksums yet, but it carries a CRC32 trailer when the connection
/// asked for checksums: read as if without one, the trailer's 4 bytes end the file name. The
/// event read with a CRC32 footer, when the trailer is its CRC32; `None` otherwise.
fn checksummed_rotate(fde: &FormatDescriptionEvent<'static>, bytes: &[u8]) -> Option<McEvent> {
    // at least the 8-byte position and the trailer after the header: mysql_common slices the
    // trailer off unchecked (a shorter event panicked there: proptest `framed_bodies_never_panic`)
    if bytes.len() < HEADER_LEN + ROTATE_POSITION_LEN + CHECKSUM_LEN {
        return None;
    }
    let crc = BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32;
    let with_crc = fde.clone().with_footer(BinlogEventFooter::new(crc));
    let ev = McEvent::read(&with_crc, bytes).ok()?;
    let stored = ev.checksum()?;
    (u32::from_le_bytes(stored) == ev.calc_checksum(crc)).then_some(ev)
}

/// The event's own byte position in its binlog file: the header's next-event position less
/// the event's size (0 for events without a position, such as a payload's inner events).
fn event_start(header: &BinlogEventHeader) -> u64 {
    u64::from(header.log_pos().saturating_sub(header.event_size()))
}

fn verify_checksum(ev: &McEvent, event_type: u8) -> Result<(), Halt> {
    let alg = ev.footer().get_checksum_alg();
    if !matches!(alg, Ok(Some(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32))) {
        return Ok(());
    }
    let Some(stored) = ev.checksum() else {
        return Ok(());
    };
    let computed = ev.calc_checksum(BinlogChecksumAlg::BINLOG_CHECKSUM_ALG_CRC32);
    if u32::from_le_bytes(stored) != computed {
        return Err(Halt::ChecksumMismatch { event_type });
    }
    Ok(())
}

fn map_rows(rows: &RowsEventData<'_>, event_type: u8) -> Event {
    let kind = match rows {
        RowsEventData::WriteRowsEventV1(_) | RowsEventData::WriteRowsEvent(_) => RowsKind::Write,
        RowsEventData::UpdateRowsEventV1(_) | RowsEventData::UpdateRowsEvent(_) => RowsKind::Update,
        RowsEventData::DeleteRowsEventV1(_) | RowsEventData::DeleteRowsEvent(_) => RowsKind::Delete,
        RowsEventData::PartialUpdateRowsEvent(_) => {
            return Event::Unsupported {
                event_type,
                halt: Halt::UnsupportedRowsEvent {
                    reason: "partial_json_update",
                },
            }
        }
    };
    let n = usize::try_from(rows.num_columns()).unwrap_or(usize::MAX);
    Event::Rows(RowsEvent {
        event_type,
        table_id: rows.table_id(),
        kind,
        num_columns: n,
        before_columns: rows
            .columns_before_image()
            .map(|s| s.iter().by_vals().take(n).collect()),
        after_columns: rows
            .columns_after_image()
            .map(|s| s.iter().by_vals().take(n).collect()),
        rows: rows.rows_data().to_vec(),
        ahead: AheadSlot::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CRC-32 (IEEE), bit by bit: the test's own, independent of mysql_common's.
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// An artificial ROTATE to `name` (log_pos 0, LOG_EVENT_ARTIFICIAL_F), with a CRC32
    /// trailer or without.
    fn rotate(name: &str, checksum: bool) -> Vec<u8> {
        let size = HEADER_LEN + 8 + name.len() + if checksum { CHECKSUM_LEN } else { 0 };
        let mut e = Vec::new();
        e.extend_from_slice(&0u32.to_le_bytes()); // timestamp
        e.push(ROTATE);
        e.extend_from_slice(&1u32.to_le_bytes()); // server id
        e.extend_from_slice(&(size as u32).to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes()); // log_pos
        e.extend_from_slice(&0x20u16.to_le_bytes()); // LOG_EVENT_ARTIFICIAL_F
        e.extend_from_slice(&4u64.to_le_bytes());
        e.extend_from_slice(name.as_bytes());
        if checksum {
            let crc = crc32(&e);
            e.extend_from_slice(&crc.to_le_bytes());
        }
        e
    }

    #[test]
    fn the_artificial_rotate_before_the_format_description_names_its_file_without_the_crc() {
        for checksum in [true, false] {
            let ev = EventReader::new()
                .decode(&rotate("binlog.000009", checksum))
                .unwrap();
            let Event::Rotate { file, position } = ev else {
                panic!("{ev:?}")
            };
            assert_eq!(
                (file.as_str(), position),
                ("binlog.000009", 4),
                "crc {checksum}"
            );
        }
    }
}
