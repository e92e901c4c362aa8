//! The rules of the golden comparison with Debezium (`debezium_golden.rs`): the differences
//! capstan intends ([`INTENDED`], the same list as docs/event-format.md), the record-by-record
//! comparison that allows those and nothing else, and the checks of the fields both sides
//! write by rules of their own (binlog positions, snapshot read points).

#![allow(dead_code)]

use capstan_kafka::topic_reader::ConsumedRecord;
use mysql_async::prelude::*;
use serde_json::Value;

/// What capstan writes differently from Debezium's MySQL connector, on purpose (the same list
/// as docs/event-format.md). Everything not named here must be equal.
pub struct Intended {
    /// `source` fields only Debezium writes (payload and schema).
    pub debezium_only_source_fields: &'static [&'static str],
    /// Top-level envelope fields only Debezium writes (payload and schema).
    pub debezium_only_envelope_fields: &'static [&'static str],
    /// `source` fields both write with different values: capstan's version string.
    pub differing_source_values: &'static [&'static str],
    /// `source` fields both write by another rule, each checked by its own rule in
    /// [`positions_follow_their_rules`]: `pos` (capstan: the transaction's GTID event, where a
    /// restart reads it again; Debezium: the row's rows event) and `row` (capstan: the row's
    /// index in the transaction; Debezium: in its rows event).
    pub positions: &'static [&'static str],
    /// Top-level fields both write with different values: when each built the event.
    pub differing_envelope_values: &'static [&'static str],
    /// Header-name prefixes only one side writes: Debezium's engine context headers, capstan's
    /// replay-identification headers.
    pub one_sided_header_prefixes: &'static [&'static str],
    /// (column, Debezium's value, capstan's value) in row images, as JSON text: the zero YEAR,
    /// which Debezium's binlog client decodes as 1900 and capstan as 0 (what MySQL stores and
    /// shows).
    pub column_values: &'static [(&'static str, &'static str, &'static str)],
    /// BINARY(n) columns, whose values Debezium pads back to their n bytes and capstan carries
    /// as the binlog has them, trailing zero bytes dropped (the snapshot strips them to match;
    /// docs/event-format.md): Debezium's value is compared without its trailing zero bytes,
    /// in whatever `binary.handling.mode` encodes it.
    pub padded_binary: &'static [&'static str],
    /// TIME columns, whose values outside a day (negative, or 24 hours and more) Debezium
    /// writes as null under `time.precision.mode=isostring` (it cannot make them a
    /// `LocalTime`) and capstan as the signed text, `"-838:59:59Z"`: capstan does not drop a
    /// value its schema can carry (docs/event-format.md).
    pub iso_times_outside_a_day: &'static [&'static str],
    /// `source` fields of snapshot reads both write by another rule: `ts_ms` (each side's read
    /// time) and the binlog point, `file`/`pos` (capstan: the chunk's; Debezium: the
    /// snapshot's), checked by [`read_points_follow_their_rules`].
    pub read_positions: &'static [&'static str],
    /// (column, Debezium's value, capstan's value) in snapshot reads only, where Debezium's
    /// snapshot (JDBC) renders a value otherwise than its own binlog stream, whose rendering
    /// capstan's snapshot and stream both give: a JSON document as the server prints it (with
    /// blanks), a TIMESTAMP(6)'s fraction without its trailing zeros, the zero YEAR as 2000.
    pub read_column_values: &'static [(&'static str, &'static str, &'static str)],
}

pub const INTENDED: Intended = Intended {
    debezium_only_source_fields: &["sequence", "ts_us", "ts_ns", "thread", "query"],
    debezium_only_envelope_fields: &["ts_us", "ts_ns"],
    differing_source_values: &["version"],
    positions: &["pos", "row"],
    differing_envelope_values: &["ts_ms"],
    one_sided_header_prefixes: &["__debezium.context.", "capstan."],
    column_values: &[("yr", "1900", "0")],
    padded_binary: &["bn"],
    iso_times_outside_a_day: &["t0", "t3", "t6"],
    read_positions: &["ts_ms", "file", "pos"],
    read_column_values: &[
        (
            "j",
            r#""{\"k\": [1, 2.5, \"s\"], \"n\": null}""#,
            r#""{\"k\":[1,2.5,\"s\"],\"n\":null}""#,
        ),
        (
            "ts6",
            "\"2000-02-29T12:00:00.5Z\"",
            "\"2000-02-29T12:00:00.500000Z\"",
        ),
        ("yr", "2000", "0"),
    ],
};

pub fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

/// (capstan's `source`, Debezium's `source`) of one change event.
pub type SourcePair = (Value, Value);

/// Every difference between capstan's records (`format`) and Debezium's, beyond [`INTENDED`],
/// and the two `source` blocks of each change event (for [`positions_follow_their_rules`])
/// and of each snapshot read (for [`read_points_follow_their_rules`]).
pub fn compare(
    format: &str,
    capstan: &[ConsumedRecord],
    golden: &[Value],
    schemas: bool,
    binary_mode: &str,
) -> Compared {
    let mut out = Vec::new();
    let (mut positions, mut reads) = (Vec::new(), Vec::new());
    if capstan.len() != golden.len() {
        out.push(format!(
            "{format}: {} records, Debezium {}",
            capstan.len(),
            golden.len()
        ));
    }
    let (kf, vf) = if schemas {
        ("key", "value")
    } else {
        ("key_schemaless", "value_schemaless")
    };
    for (i, (c, g)) in capstan.iter().zip(golden).enumerate() {
        let at = format!("{format} record {i}");
        let parse = |b: &Option<Vec<u8>>| -> Value {
            b.as_ref()
                .map_or(Value::Null, |b| serde_json::from_slice(b).unwrap())
        };
        let text = |v: &Value| -> Value {
            v.as_str()
                .map_or(Value::Null, |s| serde_json::from_str(s).unwrap())
        };
        diff(
            &format!("{at} key"),
            &parse(&c.key),
            &text(&g[kf]),
            &mut out,
        );
        let (mut cv, mut gv) = (parse(&c.value), text(&g[vf]));
        let source = |v: &Value| -> Value {
            let p = if schemas { &v["payload"] } else { v };
            p["source"].clone()
        };
        let payload_of = |v: &Value| -> Value {
            if schemas {
                v["payload"].clone()
            } else {
                v.clone()
            }
        };
        let read = payload_of(&cv)["op"] == "r";
        if !cv.is_null() && !gv.is_null() {
            if read {
                reads.push((source(&cv), source(&gv)));
            } else {
                positions.push((source(&cv), source(&gv)));
            }
        }
        if schemas && !gv.is_null() {
            strip_schema(&mut gv["schema"]);
        }
        for v in [&mut cv, &mut gv] {
            let payload = if schemas && !v.is_null() {
                &mut v["payload"]
            } else {
                v
            };
            strip_payload(payload, read);
        }
        let golden_payload = if schemas {
            gv.get_mut("payload")
        } else {
            Some(&mut gv)
        };
        let ours_payload = if schemas {
            cv.get("payload")
        } else {
            Some(&cv)
        }
        .cloned();
        if let Some(p) = golden_payload {
            let intended = INTENDED
                .column_values
                .iter()
                .chain(INTENDED.read_column_values.iter().filter(|_| read));
            for image in ["before", "after"] {
                if let Some(row) = p.get_mut(image).and_then(Value::as_object_mut) {
                    for (col, theirs, ours) in intended.clone() {
                        let theirs: Value = serde_json::from_str(theirs).unwrap();
                        if row.get(*col) == Some(&theirs) {
                            row.insert((*col).to_string(), serde_json::from_str(ours).unwrap());
                        }
                    }
                    for col in INTENDED.padded_binary {
                        if let Some(v) = row.get_mut(*col) {
                            *v = unpadded(v, binary_mode);
                        }
                    }
                    let ours_row = ours_payload.as_ref().and_then(|o| o.get(image));
                    for col in INTENDED.iso_times_outside_a_day {
                        let ours = ours_row.and_then(|o| o.get(*col));
                        if row.get(*col) == Some(&Value::Null) {
                            if let Some(ours) = ours.filter(|o| iso_time_outside_a_day(o)) {
                                row.insert((*col).to_string(), ours.clone());
                            }
                        }
                    }
                }
            }
        }
        diff(&format!("{at} value"), &cv, &gv, &mut out);
        let headers = |h: Vec<(String, String)>| -> Vec<(String, String)> {
            h.into_iter()
                .filter(|(k, _)| {
                    !INTENDED
                        .one_sided_header_prefixes
                        .iter()
                        .any(|p| k.starts_with(p))
                })
                .collect()
        };
        let ch = headers(
            c.headers
                .iter()
                .map(|(k, v)| (k.clone(), String::from_utf8(v.clone()).unwrap()))
                .collect(),
        );
        let gh = headers(
            g["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap().into(), h[1].as_str().unwrap().into()))
                .collect(),
        );
        if ch != gh {
            out.push(format!("{at} headers: capstan {ch:?}, Debezium {gh:?}"));
        }
    }
    Compared {
        diffs: out,
        positions,
        reads,
    }
}

/// Whether `v` is io.debezium.time.IsoTime text outside a day: negative, or 24 hours and more.
pub fn iso_time_outside_a_day(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.starts_with('-')
            || s.split(':')
                .next()
                .and_then(|h| h.parse::<u32>().ok())
                .is_some_and(|h| h >= 24)
    })
}

/// A binary value in `binary.handling.mode` `mode` without its trailing zero bytes, in the
/// same mode (`null` stays `null`).
pub fn unpadded(v: &Value, mode: &str) -> Value {
    use base64::Engine as _;
    let Some(text) = v.as_str() else {
        return v.clone();
    };
    let (std, url) = (
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    );
    let mut bytes = match mode {
        "hex" => unhex(text),
        "base64-url-safe" => url.decode(text).unwrap(),
        _ => std.decode(text).unwrap(),
    };
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    Value::String(match mode {
        "hex" => bytes.iter().map(|b| format!("{b:02x}")).collect(),
        "base64-url-safe" => url.encode(&bytes),
        _ => std.encode(&bytes),
    })
}

/// What [`compare`] found.
pub struct Compared {
    /// The differences beyond [`INTENDED`].
    pub diffs: Vec<String>,
    /// The `source` blocks of each change event.
    pub positions: Vec<SourcePair>,
    /// The `source` blocks of each snapshot read.
    pub reads: Vec<SourcePair>,
}

/// A snapshot read's binlog point by each side's rule: capstan's is its chunk's (read with
/// the chunk's position), Debezium's its snapshot's; capstan read first, after the rows were
/// written at `floor`, so `floor` ≤ capstan's ≤ Debezium's, in (file, position) order.
pub fn read_points_follow_their_rules(
    format: &str,
    floor: &(String, u64),
    reads: &[SourcePair],
) -> Vec<String> {
    let point = |s: &Value| -> (String, u64) {
        (
            s["file"].as_str().unwrap_or_default().to_string(),
            s["pos"].as_u64().unwrap_or_default(),
        )
    };
    let mut out = Vec::new();
    if reads.is_empty() {
        out.push(format!("{format}: no snapshot reads"));
    }
    for (i, (c, d)) in reads.iter().enumerate() {
        let (ours, theirs) = (point(c), point(d));
        if !(*floor <= ours && ours <= theirs) {
            out.push(format!(
                "{format} read {i}: capstan's point {ours:?} is not between the rows' {floor:?} \
                 and Debezium's {theirs:?}"
            ));
        }
    }
    out
}

/// `pos` and `row` by each side's rule, read back from the server's own listing of the binlog
/// (`SHOW BINLOG EVENTS`): capstan's `pos` is the transaction's GTID event and its `row` the
/// row's index in the transaction; Debezium's `pos` is a rows event of that transaction and
/// its `row` the index in that event. Returns the violations.
pub async fn positions_follow_their_rules(
    format: &str,
    admin: &mut mysql_async::Conn,
    pairs: &[SourcePair],
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(file) = pairs.first().and_then(|(c, _)| c["file"].as_str()) else {
        return vec![format!("{format}: no change events")];
    };
    let from = pairs
        .iter()
        .map(|(c, _)| c["pos"].as_u64().unwrap())
        .min()
        .unwrap();
    // (pos, event type, info) from the first transaction on
    let events: Vec<(u64, String, String)> = admin
        .query_map(
            format!("SHOW BINLOG EVENTS IN '{file}' FROM {from} LIMIT 2000"),
            |row: mysql_async::Row| {
                (
                    row.get::<u64, _>("Pos").unwrap(),
                    row.get::<String, _>("Event_type").unwrap(),
                    row.get::<Option<String>, _>("Info")
                        .flatten()
                        .unwrap_or_default(),
                )
            },
        )
        .await
        .unwrap();
    let at = |pos: u64| events.iter().position(|e| e.0 == pos);
    // rows already counted in earlier rows events of each transaction: gtid -> (pos -> rows)
    let mut seen: std::collections::BTreeMap<String, std::collections::BTreeMap<u64, u64>> =
        Default::default();
    for (i, (c, d)) in pairs.iter().enumerate() {
        let gtid = c["gtid"].as_str().unwrap().to_string();
        let (cpos, dpos) = (c["pos"].as_u64().unwrap(), d["pos"].as_u64().unwrap());
        let here = format!("{format} change {i}");
        let Some(g) = at(cpos) else {
            out.push(format!("{here}: capstan pos {cpos} is no event start"));
            continue;
        };
        if events[g].1 != "Gtid" || !events[g].2.contains(&gtid) {
            out.push(format!(
                "{here}: capstan pos {cpos} is not the GTID event of {gtid}"
            ));
        }
        let end = events[g + 1..]
            .iter()
            .position(|e| e.1 == "Gtid")
            .map_or(events.len(), |n| g + 1 + n);
        match at(dpos) {
            Some(r) if r > g && r < end && events[r].1.ends_with("_rows") => {}
            _ => out.push(format!(
                "{here}: Debezium pos {dpos} is no rows event of {gtid}"
            )),
        }
        let rows = seen.entry(gtid).or_default();
        let drow = d["row"].as_u64().unwrap();
        let earlier: u64 = rows.range(..dpos).map(|(_, n)| n).sum();
        let n = rows.entry(dpos).or_default();
        *n = (*n).max(drow + 1);
        if c["row"].as_u64() != Some(earlier + drow) {
            out.push(format!(
                "{here}: capstan row {} is not Debezium's row {drow} plus the {earlier} rows of \
                 the transaction's earlier rows events",
                c["row"]
            ));
        }
    }
    out
}

/// Debezium's value schema without the fields only Debezium writes.
pub fn strip_schema(schema: &mut Value) {
    let fields = schema["fields"].as_array_mut().unwrap();
    fields.retain(|f| {
        !INTENDED
            .debezium_only_envelope_fields
            .contains(&f["field"].as_str().unwrap())
    });
    for f in fields.iter_mut().filter(|f| f["field"] == "source") {
        f["fields"].as_array_mut().unwrap().retain(|s| {
            !INTENDED
                .debezium_only_source_fields
                .contains(&s["field"].as_str().unwrap())
        });
    }
}

/// An envelope payload without the fields whose values differ on purpose or that only
/// Debezium writes.
pub fn strip_payload(payload: &mut Value, read: bool) {
    let Some(p) = payload.as_object_mut() else {
        return;
    };
    for f in INTENDED
        .debezium_only_envelope_fields
        .iter()
        .chain(INTENDED.differing_envelope_values)
    {
        p.remove(*f);
    }
    if let Some(s) = p.get_mut("source").and_then(Value::as_object_mut) {
        for f in INTENDED
            .debezium_only_source_fields
            .iter()
            .chain(INTENDED.differing_source_values)
            .chain(if read {
                INTENDED.read_positions
            } else {
                INTENDED.positions
            })
        {
            s.remove(*f);
        }
    }
}

/// Pushes one line per leaf where `ours` and `theirs` differ (arrays by index, objects by key).
pub fn diff(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, av) in a {
                match b.get(k) {
                    Some(bv) => diff(&format!("{path}.{k}"), av, bv, out),
                    None => out.push(format!("{path}.{k}: only capstan has it ({av})")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: only Debezium has it ({})", b[k]));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), av, bv, out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() && a.is_f64() => {}
        _ if ours == theirs => {}
        _ => out.push(format!("{path}: capstan {ours}, Debezium {theirs}")),
    }
}
