//! [`KeyRanges`]: consecutive key ranges after a cursor, for reading one table's chunks in
//! parallel (ADR-0005, *Parallel reads*). Pure.
//!
//! A chunk's next cursor is its last row's key, known only once it is read, so the chunks
//! after it cannot start before it ends — unless their ranges are fixed up front. For a key of
//! one integer column they can be: from the key span per row seen in the chunks read so far,
//! the next ranges are `(after, after + s]`, `(after + s, after + 2s]`, …, each expected to
//! hold about a chunk's rows, and the range after the last bound is read open (it finds the
//! table's end). A range that holds more rows than asked is cut at its chunk's last row by
//! the reader's limit, so memory stays bounded whatever the keys' spread; one that holds fewer
//! is a smaller chunk. Other keys (composite, character, binary) are read one chunk after the
//! other.

use super::key::{KeyKind, KeyPart, KeyShape};

/// The share of a chunk's rows a range is aimed at.
const AIM: f64 = 0.875;

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KeyRanges {
    /// Key units per row in the last chunk observed (≥ 1 for distinct integer keys).
    span_per_row: Option<f64>,
}

impl KeyRanges {
    /// Nothing learned yet: no bounds until a chunk of two rows or more is observed.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when tables keyed by `shape` are split: one signed or unsigned integer column.
    pub fn splits(shape: &KeyShape) -> bool {
        matches!(
            shape.columns.as_slice(),
            [c] if matches!(c.kind, KeyKind::Int | KeyKind::UInt)
        )
    }

    /// Learns the key span per row from a chunk's first and last keys and its row count;
    /// a chunk of fewer than two rows, or keys that are not one integer, teach nothing.
    pub fn observe(&mut self, first: &[KeyPart], last: &[KeyPart], rows: usize) {
        let (Some(a), Some(b)) = (as_int(first), as_int(last)) else {
            return;
        };
        if rows < 2 || b <= a {
            return;
        }
        self.span_per_row = Some((b - a) as f64 / (rows - 1) as f64);
    }

    /// The upper bounds of up to `count - 1` consecutive ranges after `after`, each expected
    /// to hold about `rows` rows (the range after the last bound is read open), all below
    /// `last` — the table's greatest key, so the open range holds at least that row and its
    /// chunk carries the table's last row. Fewer where `last` or the key type's range ends;
    /// none when nothing is learned yet or `after` is not one integer.
    pub fn bounds(
        &self,
        after: &[KeyPart],
        rows: u32,
        count: usize,
        last: &[KeyPart],
    ) -> Vec<Vec<KeyPart>> {
        let (Some(span), Some(start), Some(end)) = (self.span_per_row, as_int(after), as_int(last))
        else {
            return Vec::new();
        };
        // aimed at 7/8 of a chunk: a range a little denser than the chunk it was learned
        // from still fits, instead of being cut (and the ranges after it read again)
        let step = (f64::from(rows.max(1)) * span * AIM)
            .ceil()
            .clamp(1.0, 1e30) as i128;
        let (lo, hi) = match after {
            [KeyPart::Int(_)] => (i128::from(i64::MIN), i128::from(i64::MAX)),
            _ => (0, i128::from(u64::MAX)),
        };
        let mut out = Vec::new();
        for i in 1..count {
            let Some(bound) = step
                .checked_mul(i as i128)
                .and_then(|d| start.checked_add(d))
                .filter(|b| (lo..hi).contains(b) && *b < end)
            else {
                break;
            };
            out.push(match after {
                [KeyPart::Int(_)] => vec![KeyPart::Int(bound as i64)],
                _ => vec![KeyPart::UInt(bound as u64)],
            });
        }
        out
    }
}

/// A key of one integer part, widened.
fn as_int(key: &[KeyPart]) -> Option<i128> {
    match key {
        [KeyPart::Int(v)] => Some(i128::from(*v)),
        [KeyPart::UInt(v)] => Some(i128::from(*v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::snapshot::key::KeyColumn;

    #[test]
    fn ranges_follow_the_span_per_row() {
        let mut r = KeyRanges::new();
        let end = [KeyPart::Int(i64::MAX)];
        assert!(r.bounds(&[KeyPart::Int(10)], 100, 4, &end).is_empty());
        // 101 rows over keys 1..=201: two key units a row
        r.observe(&[KeyPart::Int(1)], &[KeyPart::Int(201)], 101);
        assert_eq!(
            r.bounds(&[KeyPart::Int(201)], 100, 4, &end),
            vec![
                vec![KeyPart::Int(376)],
                vec![KeyPart::Int(551)],
                vec![KeyPart::Int(726)]
            ]
        );
        assert!(r.bounds(&[KeyPart::Int(201)], 100, 1, &end).is_empty());
        // the last key ends them: the open range after them holds it
        assert_eq!(
            r.bounds(&[KeyPart::Int(201)], 100, 4, &[KeyPart::Int(551)]),
            vec![vec![KeyPart::Int(376)]]
        );
        assert!(r
            .bounds(&[KeyPart::Int(201)], 100, 4, &[KeyPart::Int(376)])
            .is_empty());
        // a sparse key: the step is at least one key
        r.observe(&[KeyPart::Int(1)], &[KeyPart::Int(2)], 2);
        assert_eq!(
            r.bounds(&[KeyPart::Int(2)], 1, 2, &end),
            vec![vec![KeyPart::Int(3)]]
        );
    }

    #[test]
    fn the_key_space_end_stops_the_ranges_and_nothing_wraps() {
        let mut r = KeyRanges::new();
        r.observe(&[KeyPart::Int(0)], &[KeyPart::Int(1000)], 11);
        let near = i64::MAX - 250;
        assert_eq!(
            r.bounds(&[KeyPart::Int(near)], 1, 5, &[KeyPart::Int(i64::MAX)]),
            vec![
                vec![KeyPart::Int(near + 88)],
                vec![KeyPart::Int(near + 176)]
            ]
        );
        let mut u = KeyRanges::new();
        u.observe(&[KeyPart::UInt(0)], &[KeyPart::UInt(10)], 11);
        let uend = [KeyPart::UInt(u64::MAX)];
        assert!(u
            .bounds(&[KeyPart::UInt(u64::MAX)], 10, 3, &uend)
            .is_empty());
        assert_eq!(
            u.bounds(&[KeyPart::UInt(u64::MAX - 15)], 10, 3, &uend),
            vec![vec![KeyPart::UInt(u64::MAX - 6)]]
        );
        // negative keys split like any others
        assert_eq!(
            r.bounds(&[KeyPart::Int(-1000)], 2, 2, &[KeyPart::Int(0)]),
            vec![vec![KeyPart::Int(-825)]]
        );
    }

    #[test]
    fn only_single_integer_keys_split() {
        let col = |kind| KeyColumn {
            name: "id".into(),
            position: 0,
            kind,
        };
        let shape = |columns| KeyShape {
            columns,
            from_unique_key: false,
        };
        assert!(KeyRanges::splits(&shape(vec![col(KeyKind::Int)])));
        assert!(KeyRanges::splits(&shape(vec![col(KeyKind::UInt)])));
        assert!(!KeyRanges::splits(&shape(vec![col(KeyKind::VarBinary)])));
        assert!(!KeyRanges::splits(&shape(vec![
            col(KeyKind::Int),
            col(KeyKind::Int)
        ])));
        let mut r = KeyRanges::new();
        r.observe(&[KeyPart::Bytes(vec![1])], &[KeyPart::Bytes(vec![9])], 9);
        r.observe(&[KeyPart::Int(5)], &[KeyPart::Int(5)], 1);
        let end = [KeyPart::Int(i64::MAX)];
        assert!(r.bounds(&[KeyPart::Int(5)], 10, 3, &end).is_empty());
        assert!(r.bounds(&[KeyPart::Text(vec![1])], 10, 3, &end).is_empty());
    }
}
