//! [`canary_values`]: the values of the order-contract canary for one character key column,
//! as bytes in the column's character set (bound as hex, like every key value). Pure.
//!
//! The canary ranks these values with `ORDER BY` under the column's collation and checks that
//! their weights, taken exactly as production takes them, order and tie alike. The values
//! aim at what breaks weights that do not follow the server: case, prefixes, digits, leading
//! and trailing spaces, punctuation, characters below the space (a tab or control character
//! sorts before the padding of a PAD SPACE comparison; some collations ignore controls
//! altogether), ignorable characters (U+0000, U+200B, a soft hyphen), expansions (`ß` weighs
//! as `ss`, `æ` as `ae`), contractions of language collations (`ch`, `ll`, `aa`), other
//! spaces (no-break, ideographic) and multi-unit characters. Values the character set cannot
//! hold are left out, and so are values longer than a PAD SPACE column's length (they cannot
//! be stored in it). For a PAD SPACE column of length `n` two values fill it exactly with
//! `n - 1` expansions and a last letter that differs: weights cut at `n` weights (MariaDB's
//! `AS CHAR(n)`) would tie them.

use super::key::KeyKind;

/// Plain ASCII values, held by every character set.
const ASCII: &[&str] = &[
    "", "a", "A", "b", "B", "ab", "Ab", "AB", "abc", "abd", "abc ", "a b", "a ", "a  ", " a", "0",
    "1", "9", "10", "09", "a1", "a10", "a2", "_", "-", ".", "!", "~", "a-b", "a_b", "a.b", "z",
    "Z", "zz", "aa", "aA", "Aa", "AA", "@", "[", "`", "{", "\t", "a\t", "a\t ", "a\tb", "ab\t",
    "a\u{1}", "a\u{1}b", "\u{1}a", "a\u{1f}", "a\n", "a\r", " ", "\t ", "\u{0}", "a\u{0}",
    "a\u{0}b", "\u{0}a", "a\u{7f}", "a \t", "a  b", "ch", "c", "d", "h", "ll", "l", "m", "n", "o",
    "u", "y", "ss", "st", "sr", "s", "ssa", "sss", "ass", "ast", "ar", "ae", "oe", "ue", "fi", "e",
    "E", "i", "aa ",
];

/// Values beyond ASCII, where the character set holds them.
const WIDE: &[&str] = &[
    "\u{df}",
    "\u{df}a",
    "s\u{df}",
    "a\u{df}",
    "\u{df}\u{df}",
    "\u{e9}",
    "\u{c9}",
    "\u{e4}",
    "\u{e6}",
    "\u{c5}",
    "\u{e5}",
    "\u{f1}",
    "\u{f6}",
    "\u{fc}",
    "a\u{ad}",
    "a\u{ad}b",
    "\u{a0}",
    "a\u{a0}",
    "a\u{a0}b",
    "a\u{301}",
    "e\u{301}",
    "\u{131}",
    "\u{1c6}",
    "d\u{17e}",
    "\u{111}",
    "\u{142}",
    "\u{153}",
    "\u{fb01}",
    "a\u{200b}",
    "\u{200b}a",
    "a\u{200b}b",
    "a\u{3000}",
    "\u{3000}",
    "\u{3a9}",
    "\u{4e2d}",
    "\u{4e2d}\t",
    "\u{4e2d} ",
    "\u{ac00}",
    "\u{1100}\u{1161}",
    "\u{fdfa}",
    "\u{fdfa}\u{fdfa}",
    "\u{fffd}",
    "\u{1f600}",
    "\u{1f600}a",
    "\u{1f601}",
];

/// The canary values for a character key column of `kind`, in its character set; empty for
/// other kinds.
pub(crate) fn canary_values(kind: &KeyKind) -> Vec<Vec<u8>> {
    let KeyKind::Text {
        charset, pad_to, ..
    } = kind
    else {
        return Vec::new();
    };
    let fits = |s: &str| match pad_to {
        Some(n) => usize::try_from(*n).is_ok_and(|n| s.chars().count() <= n),
        None => true,
    };
    let mut filled = Vec::new();
    if let Some(n) = pad_to.and_then(|n| usize::try_from(n).ok()) {
        let expansions = "\u{df}".repeat(n.saturating_sub(1));
        filled.push(format!("{expansions}a"));
        filled.push(format!("{expansions}b"));
    }
    ASCII
        .iter()
        .chain(WIDE)
        .copied()
        .chain(filled.iter().map(String::as_str))
        .filter(|s| fits(s))
        .filter_map(|s| in_charset(charset, s))
        .collect()
}

/// `s` in `charset`, or `None` if the character set cannot hold it. Character sets not
/// named here are taken as ASCII supersets and get the ASCII values only.
fn in_charset(charset: &str, s: &str) -> Option<Vec<u8>> {
    let bmp = || s.chars().all(|c| u32::from(c) <= 0xffff);
    let utf16 = |le: bool| -> Vec<u8> {
        s.encode_utf16()
            .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
            .collect()
    };
    match charset.to_ascii_lowercase().as_str() {
        "utf8mb4" => Some(s.as_bytes().to_vec()),
        "utf8mb3" | "utf8" => bmp().then(|| s.as_bytes().to_vec()),
        // MySQL's latin1 is cp1252, which agrees with Unicode outside 0x80..0x9f
        "latin1" => s
            .chars()
            .map(|c| match u32::from(c) {
                cp @ (0..=0x7f | 0xa0..=0xff) => u8::try_from(cp).ok(),
                _ => None,
            })
            .collect(),
        "ucs2" => bmp().then(|| utf16(false)),
        "utf16" => Some(utf16(false)),
        "utf16le" => Some(utf16(true)),
        "utf32" => Some(s.chars().flat_map(|c| u32::from(c).to_be_bytes()).collect()),
        _ => s.is_ascii().then(|| s.as_bytes().to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(charset: &str, pad_to: Option<u32>) -> KeyKind {
        KeyKind::Text {
            charset: charset.into(),
            collation: format!("{charset}_general_ci"),
            pad_to,
        }
    }

    #[test]
    fn values_are_in_the_column_character_set() {
        let all = canary_values(&text("utf8mb4", None));
        assert_eq!(all.len(), ASCII.len() + WIDE.len());
        assert!(all.contains(&"\u{1f600}".as_bytes().to_vec()));
        let mb3 = canary_values(&text("utf8mb3", None));
        assert!(!mb3.contains(&"\u{1f600}".as_bytes().to_vec()));
        assert!(mb3.contains(&"\u{df}".as_bytes().to_vec()));
        let latin1 = canary_values(&text("latin1", None));
        assert!(latin1.contains(&vec![0xdf]));
        assert!(latin1.contains(&vec![b'a', 0xa0]));
        assert!(!latin1.iter().any(|v| v.len() == 2 && v[0] == 0xc3));
        let utf16 = canary_values(&text("utf16", None));
        assert!(utf16.contains(&vec![0, b'a', 0, b'b']));
        assert!(utf16.contains(&vec![0xd8, 0x3d, 0xde, 0x00]));
        let utf16le = canary_values(&text("utf16le", None));
        assert!(utf16le.contains(&vec![b'a', 0, b'b', 0]));
        let utf32 = canary_values(&text("utf32", None));
        assert!(utf32.contains(&vec![0, 0, 0, b'a']));
        let ucs2 = canary_values(&text("ucs2", None));
        assert!(!ucs2.contains(&vec![0xd8, 0x3d, 0xde, 0x00]));
        let sjis = canary_values(&text("sjis", None));
        assert_eq!(sjis.len(), ASCII.len());
        assert!(canary_values(&KeyKind::Int).is_empty());
    }

    #[test]
    fn pad_space_values_fit_the_column_and_fill_it() {
        let v = canary_values(&text("utf8mb4", Some(3)));
        assert!(v
            .iter()
            .all(|b| std::str::from_utf8(b).is_ok_and(|s| s.chars().count() <= 3)));
        assert!(v.contains(&"\u{df}\u{df}a".as_bytes().to_vec()));
        assert!(v.contains(&"\u{df}\u{df}b".as_bytes().to_vec()));
        let one = canary_values(&text("latin1", Some(1)));
        assert!(one.iter().all(|b| b.len() <= 1));
        assert!(one.contains(&b"a".to_vec()) && one.contains(&b"b".to_vec()));
    }
}
