//! [`Weighing`]: how the weight of a character key value is taken, so that weights compared
//! bytewise order exactly as the server orders the values. Pure.
//!
//! - NO PAD collations: the bare `WEIGHT_STRING(v)`, as is.
//! - PAD SPACE collations whose weights are a sequence of same-width units, one unit being
//!   the space's whole weight (the weight of two spaces is that of one, twice): the bare
//!   `WEIGHT_STRING(v)` encoded by [`pad_space::encode`], which compares as if the shorter
//!   sequence were padded with space units forever — the server's PAD SPACE comparison. This
//!   holds for the simple 8-bit collations, `utf8mb4_general_ci`, `_bin`, and the UCA ones
//!   (`utf8mb4_unicode_ci`, `utf8mb4_unicode_520_ci`, the language ones, MariaDB's
//!   `uca1400_ai_ci`), where a character weighs zero units (ignorables), one, or several
//!   (expansions such as `ß`).
//! - Other PAD SPACE collations (multi-level weights: MariaDB's `uca1400_…_as_…`/`…_cs`,
//!   `…_thai_520_w2`, `latin2_czech_cs`, `cp1250_czech_cs`): `WEIGHT_STRING(v AS CHAR(n))`
//!   at the column's length, as before. Whether that orders like the server is left to the
//!   canary, which refuses the collation otherwise.
//!
//! The weights of the old `AS CHAR(n)` method mis-order the UCA collations: MySQL pads by
//! characters, so an ignorable character shortens the weight, and MariaDB pads *and cuts*
//! at `n` weights, so an expansion near the column's length drops the units after it.

use super::key::KeyKind;
use super::pad_space;

/// How a character key column's weights are taken. See the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Weighing {
    /// NO PAD: the bare `WEIGHT_STRING(v)`.
    Bare,
    /// PAD SPACE in units: the bare `WEIGHT_STRING(v)` encoded with `space`, the weight of
    /// one space (one unit).
    SpacePadded {
        /// The space's weight unit.
        space: Vec<u8>,
    },
    /// PAD SPACE otherwise: `WEIGHT_STRING(v AS CHAR(n))`.
    AtLength(u32),
}

impl Weighing {
    /// The weighing of a NO PAD `kind` (`Bare`), or of a PAD SPACE one given the server's
    /// weights of one space and of two spaces under its collation. `None` for a kind that is
    /// not a character kind, or a PAD SPACE one whose space weights were not supplied.
    pub(crate) fn of(kind: &KeyKind, spaces: Option<(&[u8], &[u8])>) -> Option<Weighing> {
        let KeyKind::Text { pad_to, .. } = kind else {
            return None;
        };
        let Some(n) = pad_to else {
            return Some(Weighing::Bare);
        };
        let (one, two) = spaces?;
        let units = !one.is_empty()
            && two.len() == 2 * one.len()
            && two.chunks(one.len()).all(|u| u == one);
        Some(if units {
            Weighing::SpacePadded {
                space: one.to_vec(),
            }
        } else {
            Weighing::AtLength(*n)
        })
    }

    /// True if this weighing needs the space weights of [`Self::of`].
    pub(crate) fn needs_spaces(kind: &KeyKind) -> bool {
        matches!(
            kind,
            KeyKind::Text {
                pad_to: Some(_),
                ..
            }
        )
    }

    /// The SQL weight of `expr` (an expression already in the column's collation).
    pub(crate) fn expr(&self, expr: &str) -> String {
        match self {
            Weighing::Bare | Weighing::SpacePadded { .. } => format!("WEIGHT_STRING({expr})"),
            Weighing::AtLength(n) => format!("WEIGHT_STRING({expr} AS CHAR({n}))"),
        }
    }

    /// The comparable weight from the server's `WEIGHT_STRING`: as is, or encoded for
    /// [`Weighing::SpacePadded`]. `None` if the weight is not a whole number of units.
    pub(crate) fn finish(&self, weight: Vec<u8>) -> Option<Vec<u8>> {
        match self {
            Weighing::Bare | Weighing::AtLength(_) => Some(weight),
            Weighing::SpacePadded { space } => pad_space::encode(&weight, space),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn text(pad_to: Option<u32>) -> KeyKind {
        KeyKind::Text {
            charset: "utf8mb4".into(),
            collation: "utf8mb4_unicode_ci".into(),
            pad_to,
        }
    }

    #[test]
    fn no_pad_is_bare_and_needs_no_spaces() {
        assert!(!Weighing::needs_spaces(&text(None)));
        assert_eq!(Weighing::of(&text(None), None), Some(Weighing::Bare));
        assert_eq!(Weighing::of(&KeyKind::Int, None), None);
        assert_eq!(Weighing::Bare.expr("v"), "WEIGHT_STRING(v)");
        assert_eq!(Weighing::Bare.finish(vec![1, 2, 3]), Some(vec![1, 2, 3]));
    }

    #[test]
    fn single_level_pad_space_is_padded_in_units() {
        let kind = text(Some(12));
        assert!(Weighing::needs_spaces(&kind));
        assert_eq!(Weighing::of(&kind, None), None);
        let w = Weighing::of(&kind, Some((&[2, 9], &[2, 9, 2, 9]))).unwrap();
        assert_eq!(w, Weighing::SpacePadded { space: vec![2, 9] });
        assert_eq!(w.expr("v"), "WEIGHT_STRING(v)");
        // 'a ' and 'a' weigh the same; a misaligned weight is refused
        assert_eq!(w.finish(vec![0x0e, 0x33, 2, 9]), w.finish(vec![0x0e, 0x33]));
        assert_eq!(w.finish(vec![0x0e, 0x33, 2]), None);
        // latin1_swedish_ci: one-byte units
        let l = Weighing::of(&kind, Some((b" ", b"  "))).unwrap();
        assert_eq!(
            l,
            Weighing::SpacePadded {
                space: b" ".to_vec()
            }
        );
    }

    #[test]
    fn multi_level_pad_space_stays_at_length() {
        let kind = text(Some(12));
        // uca1400_as_ci: level 1 then level 2, so two spaces are not one space twice
        let w = Weighing::of(
            &kind,
            Some((&[2, 9, 0, 0x20], &[2, 9, 2, 9, 0, 0x20, 0, 0x20])),
        )
        .unwrap();
        assert_eq!(w, Weighing::AtLength(12));
        assert_eq!(w.expr("v"), "WEIGHT_STRING(v AS CHAR(12))");
        assert_eq!(w.finish(vec![7]), Some(vec![7]));
        // latin2_czech_cs: the weight of two spaces equals that of one
        let same = Weighing::of(&kind, Some((&[1, 1, 1, 0], &[1, 1, 1, 0]))).unwrap();
        assert_eq!(same, Weighing::AtLength(12));
        // an empty space weight has no unit
        assert_eq!(
            Weighing::of(&kind, Some((&[], &[]))).unwrap(),
            Weighing::AtLength(12)
        );
    }
}
