//! Property tests: arbitrary bytes into every decoder of untrusted input never panic; they
//! decode or halt.

use proptest::prelude::*;

use std::sync::Arc;

use super::decode::{decode_full_rows, decode_rows, AheadSlot, DecodeOptions, RowImage};
use super::event::{Event, RowsEvent, RowsKind};
use super::event_reader::EventReader;
use super::halt::Halt;
use super::payload::inflate_raw;
use super::test_support::{frame, hex};
use super::BinlogFileEvents;

/// go-mysql's 42-column all-types TABLE_MAP from MySQL 8.0 (binlog_row_metadata=FULL).
const ALL_TYPES_TABLE_MAP: &str = "6a00000000000100047465737400065f7479706573002a10010102090308f604050102090308f604050d0a131312121111fe0ffe0ffcfcfcfcfcfcfcfcfefefff5260008411e0408411e0408000600060006cefcfc03fe4040000102030401020304f701f80104040000fcc3ff030103007f80030ce0e03f3f3f3f3f3fe0e0e0e007010004fc940105625f626974096e5f626f6f6c65616e096e5f74696e79696e740a6e5f736d616c6c696e740b6e5f6d656469756d696e74056e5f696e74086e5f626967696e74096e5f646563696d616c076e5f666c6f6174086e5f646f75626c650a6e755f74696e79696e740b6e755f736d616c6c696e740c6e755f6d656469756d696e74066e755f696e74096e755f626967696e740a6e755f646563696d616c086e755f666c6f6174096e755f646f75626c6506745f7965617206745f6461746506745f74696d6507745f6674696d650a745f6461746574696d650b745f666461746574696d650b745f74696d657374616d700c745f6674696d657374616d7006635f6368617209635f7661726368617208635f62696e6172790b635f76617262696e6172790a635f74696e79626c6f6206635f626c6f620c635f6d656469756d626c6f620a635f6c6f6e67626c6f620a635f74696e797465787406635f746578740c635f6d656469756d746578740a635f6c6f6e677465787406655f656e756d05735f7365740a675f67656f6d65747279066a5f6a736f6e0a01e00505020131013206050201610162";

/// Event types worth aiming at: everything mysql_common parses plus the MariaDB ones.
const TYPES: &[u8] = &[
    2, 4, 5, 13, 14, 15, 16, 17, 18, 19, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 38,
    39, 40, 41, 42, 160, 161, 162, 163, 164, 165, 200,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn raw_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = EventReader::new().decode(&bytes);
    }

    #[test]
    fn framed_bodies_never_panic(
        ty in proptest::sample::select(TYPES),
        body in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let _ = EventReader::new().decode(&frame(ty, &body));
    }

    /// MariaDB GTID bodies with an XA flag and XA_PREPARE bodies, around arbitrary XID
    /// lengths and bytes: decoded or refused, and a decoded XID is the one the bytes spell.
    #[test]
    fn xa_bodies_never_panic(
        flags in any::<u8>(),
        format_id in any::<[u8; 4]>(),
        gtrid_length in 0u8..70,
        bqual_length in 0u8..70,
        bytes in proptest::collection::vec(any::<u8>(), 141),
        off_by in -1i64..=1,
    ) {
        // the data is as long as the lengths say, or one byte shorter or longer
        let want = usize::from(gtrid_length) + usize::from(bqual_length);
        let data = &bytes[..want.saturating_add_signed(off_by as isize)];
        let mut gtid = vec![7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, flags | 0x40];
        gtid.extend_from_slice(&format_id);
        gtid.extend_from_slice(&[gtrid_length, bqual_length]);
        gtid.extend_from_slice(data);
        let _ = EventReader::new().decode(&frame(162, &gtid));
        let mut prepare = vec![flags & 1];
        prepare.extend_from_slice(&format_id);
        prepare.extend_from_slice(&u32::from(gtrid_length).to_le_bytes());
        prepare.extend_from_slice(&u32::from(bqual_length).to_le_bytes());
        prepare.extend_from_slice(data);
        let exact = data.len() == usize::from(gtrid_length) + usize::from(bqual_length)
            && gtrid_length <= 64
            && bqual_length <= 64;
        match EventReader::new().decode(&frame(38, &prepare)) {
            Ok(Event::XaPrepare { one_phase, xid }) => {
                prop_assert!(exact);
                prop_assert_eq!(one_phase, flags & 1 == 1);
                let (gtrid, bqual) = data.split_at(usize::from(gtrid_length));
                let format_id = i64::from(i32::from_le_bytes(format_id));
                prop_assert_eq!(xid, super::xid::XidKey::new(format_id, gtrid, bqual));
            }
            Ok(other) => prop_assert!(false, "{:?}", other),
            Err(h) => {
                prop_assert!(!exact);
                prop_assert_eq!(h.code(), "event_parse_failed");
            }
        }
    }

    #[test]
    fn payload_bytes_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        declared in 0u64..5000,
        zstd in any::<bool>(),
    ) {
        let alg = if zstd { super::payload::COMPRESSION_ZSTD } else { super::payload::COMPRESSION_NONE };
        let _ = inflate_raw(alg, declared, &payload, 1 << 20);
        // a well-formed zstd frame around arbitrary inner bytes: inner event decode
        let z = zstd::encode_all(&payload[..], 1).unwrap();
        let mut body = Vec::new();
        // payload event body: field type/len/value triples, end mark
        body.extend_from_slice(&[1, 9, 254]);
        body.extend_from_slice(&(z.len() as u64).to_le_bytes());
        body.extend_from_slice(&[2, 1, 0]);
        body.extend_from_slice(&[3, 9, 254]);
        body.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        body.push(0);
        body.extend_from_slice(&z);
        let _ = super::payload::inflate(&body[..]);
        let _ = EventReader::new().decode(&frame(40, &body));
    }

    #[test]
    fn row_images_never_panic(
        rows in proptest::collection::vec(any::<u8>(), 0..600),
        kind in 0u8..3,
        lax in any::<bool>(),
        absent in proptest::option::of(0usize..42),
        fail_at in proptest::option::of(0usize..4),
    ) {
        let mut r = EventReader::new();
        let Ok(Event::TableMap(schema)) = r.decode(&frame(19, &hex(ALL_TYPES_TABLE_MAP))) else {
            panic!("fixture table map must decode");
        };
        let n = schema.columns.len();
        let mut present = vec![true; n];
        if let Some(i) = absent {
            present[i] = false;
        }
        let all = Some(present);
        let (kind, before, after) = match kind {
            0 => (RowsKind::Write, None, all),
            1 => (RowsKind::Delete, all, None),
            _ => (RowsKind::Update, all.clone(), all),
        };
        let ev = RowsEvent {
            event_type: 30,
            table_id: schema.table_id,
            kind,
            num_columns: n,
            before_columns: before,
            after_columns: after,
            rows,
            ahead: Default::default(),
        };
        let opts = DecodeOptions { legacy_temporal: lax, enum_set_index_fallback: lax };
        // the assembler's path agrees with decode_rows + into_full: same rows or same halt
        let reference = decode_rows(&schema, &ev, &opts).and_then(|rows| {
            rows.into_iter()
                .map(|r| {
                    let full = |i: Option<RowImage>| i.map(|i| i.into_full().ok_or(Halt::PartialRowImage)).transpose();
                    Ok((full(r.before)?, full(r.after)?))
                })
                .collect::<Result<Vec<_>, Halt>>()
        });
        let mut got = Vec::new();
        let fast = decode_full_rows(&schema, &ev, &opts, |b, a| {
            got.push((b, a));
            Ok(())
        })
        .map(|()| got);
        prop_assert_eq!(fast, reference);

        // decoded ahead (the reader task's path) and replayed: the same rows handed over and
        // the same halt as decoding in place, also when the consumer fails at some row
        let sentinel = Halt::RowDecodeFailed { column: 9999, reason: "consumer failed" };
        // every call is recorded, the failing one and any (wrong) call after it included
        let consume = |seen: &mut Vec<_>, b, a| {
            seen.push((b, a));
            if Some(seen.len() - 1) == fail_at {
                return Err(sentinel.clone());
            }
            Ok(())
        };
        let mut in_place = Vec::new();
        let r1 = decode_full_rows(&schema, &ev, &opts, |b, a| consume(&mut in_place, b, a));
        let mut slot = AheadSlot::fill(&ev, Arc::clone(&schema), opts);
        let mut ahead = Vec::new();
        let r2 = slot
            .take_for(&schema, &opts)
            .expect("decoded against this table map")
            .replay(|b, a| consume(&mut ahead, b, a));
        prop_assert_eq!(r1, r2);
        prop_assert_eq!(in_place, ahead);
        // only for that very table map and those options
        let other_map = Arc::new((*schema).clone());
        prop_assert!(AheadSlot::fill(&ev, Arc::clone(&schema), opts).take_for(&other_map, &opts).is_none());
        let other_opts = DecodeOptions { legacy_temporal: !lax, ..opts };
        prop_assert!(AheadSlot::fill(&ev, Arc::clone(&schema), opts).take_for(&schema, &other_opts).is_none());
    }

    #[test]
    fn file_walk_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut file = vec![0xfe, b'b', b'i', b'n'];
        file.extend_from_slice(&bytes);
        for _ in BinlogFileEvents::new(&file).take(100) {}
    }
}

#[test]
fn all_types_table_map_digests() {
    let mut r = EventReader::new();
    let Ok(Event::TableMap(schema)) = r.decode(&frame(19, &hex(ALL_TYPES_TABLE_MAP))) else {
        panic!("fixture table map must decode");
    };
    assert_eq!(schema.columns.len(), 42);
    assert!(schema.has_column_names && schema.has_signedness);
    assert_eq!(schema.column_names[0], "b_bit");
    // nu_* columns (10..=17) are unsigned, n_* are not
    assert!(schema.columns[10].unsigned && schema.columns[17].unsigned);
    assert!(!schema.columns[2].unsigned);
    let e = schema
        .columns
        .iter()
        .find(|c| c.enum_values.is_some())
        .unwrap();
    assert_eq!(e.enum_values.as_deref().unwrap(), ["a", "b"]);
}
