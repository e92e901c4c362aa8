//! Character data → UTF-8, strictly.
//!
//! The collation id names the character set (through `mysql_common`'s collation table); the
//! bytes are decoded with `encoding_rs` (or by hand for UTF-32) without replacement characters:
//! an invalid sequence is an error, never a silent `U+FFFD`. A collation id the table does not
//! know (including 0, "no charset metadata") is an error, never a guess.

use std::borrow::Cow;

use encoding_rs::Encoding;
use mysql_common::collations::{Collation, CollationId};

/// Why text could not be decoded. Carries the charset name only, never the bytes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) enum DecodeFailure {
    /// No decoder for this charset (or the collation id is unknown: charset `unknown`).
    Unsupported(String),
    /// The bytes are not valid in the charset.
    Invalid(String),
}

/// How one MySQL character set is decoded.
enum Decoder {
    /// Strict UTF-8 (`utf8mb4`, `utf8mb3`).
    Utf8,
    /// 7-bit ASCII only.
    Ascii,
    /// Big-endian UTF-32 (`utf32`), decoded by hand: encoding_rs has no UTF-32.
    Utf32Be,
    /// An encoding_rs (WHATWG) encoding.
    Whatwg(&'static Encoding),
}

/// The decoder for a MySQL character set name, `None` when we have none.
fn decoder_for(charset: &str) -> Option<Decoder> {
    use encoding_rs as e;
    Some(match charset {
        "utf8mb4" | "utf8mb3" | "utf8" => Decoder::Utf8,
        "ascii" => Decoder::Ascii,
        "utf32" => Decoder::Utf32Be,
        // MySQL's latin1 is Windows-1252 (its five unassigned bytes map to C1 controls, as in
        // the WHATWG table).
        "latin1" => Decoder::Whatwg(e::WINDOWS_1252),
        "latin2" => Decoder::Whatwg(e::ISO_8859_2),
        "latin5" => Decoder::Whatwg(e::WINDOWS_1254),
        "latin7" => Decoder::Whatwg(e::ISO_8859_13),
        "greek" => Decoder::Whatwg(e::ISO_8859_7),
        "hebrew" => Decoder::Whatwg(e::ISO_8859_8),
        "cp1250" => Decoder::Whatwg(e::WINDOWS_1250),
        "cp1251" => Decoder::Whatwg(e::WINDOWS_1251),
        "cp1256" => Decoder::Whatwg(e::WINDOWS_1256),
        "cp1257" => Decoder::Whatwg(e::WINDOWS_1257),
        "cp866" => Decoder::Whatwg(e::IBM866),
        "koi8r" => Decoder::Whatwg(e::KOI8_R),
        "koi8u" => Decoder::Whatwg(e::KOI8_U),
        "macroman" => Decoder::Whatwg(e::MACINTOSH),
        "tis620" => Decoder::Whatwg(e::WINDOWS_874),
        "sjis" | "cp932" => Decoder::Whatwg(e::SHIFT_JIS),
        "ujis" | "eucjpms" => Decoder::Whatwg(e::EUC_JP),
        "euckr" => Decoder::Whatwg(e::EUC_KR),
        "gb2312" | "gbk" => Decoder::Whatwg(e::GBK),
        "gb18030" => Decoder::Whatwg(e::GB18030),
        "big5" => Decoder::Whatwg(e::BIG5),
        "ucs2" | "utf16" => Decoder::Whatwg(e::UTF_16BE),
        "utf16le" => Decoder::Whatwg(e::UTF_16LE),
        _ => return None,
    })
}

/// The character set name of a collation id (`unknown` when the id is not in the table).
fn charset_name(collation: u16) -> &'static str {
    Collation::resolve(CollationId::from(collation)).charset
}

/// Decodes `bytes` stored under `collation` into a `String`.
pub(crate) fn decode_text(bytes: &[u8], collation: u16) -> Result<String, DecodeFailure> {
    decode_text_borrowed(bytes, collation).map(Cow::into_owned)
}

/// Decodes `bytes` stored under `collation`: UTF-8 and ASCII text borrowed, validated in
/// place (the common case, no copy); other charsets decoded into a new string.
pub(crate) fn decode_text_borrowed(
    bytes: &[u8],
    collation: u16,
) -> Result<Cow<'_, str>, DecodeFailure> {
    let charset = charset_name(collation);
    let Some(decoder) = decoder_for(charset) else {
        return Err(DecodeFailure::Unsupported(charset.to_string()));
    };
    let invalid = || DecodeFailure::Invalid(charset.to_string());
    match decoder {
        Decoder::Utf8 => std::str::from_utf8(bytes)
            .map(Cow::Borrowed)
            .map_err(|_| invalid()),
        Decoder::Ascii => {
            if bytes.is_ascii() {
                std::str::from_utf8(bytes)
                    .map(Cow::Borrowed)
                    .map_err(|_| invalid())
            } else {
                Err(invalid())
            }
        }
        Decoder::Utf32Be => {
            if !bytes.len().is_multiple_of(4) {
                return Err(invalid());
            }
            bytes
                .chunks_exact(4)
                .map(|c| {
                    char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])).ok_or_else(invalid)
                })
                .collect::<Result<String, _>>()
                .map(Cow::Owned)
        }
        Decoder::Whatwg(encoding) => encoding
            .decode_without_bom_handling_and_without_replacement(bytes)
            .ok_or_else(invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8mb4_strict() {
        assert_eq!(decode_text("héllo 😀".as_bytes(), 255).unwrap(), "héllo 😀");
        assert_eq!(
            decode_text(b"\xff", 255),
            Err(DecodeFailure::Invalid("utf8mb4".into()))
        );
    }

    #[test]
    fn latin1_is_cp1252() {
        // 0x80 is the euro sign in cp1252; 0xe9 is é.
        assert_eq!(decode_text(b"\x80 caf\xe9", 8).unwrap(), "€ café");
    }

    #[test]
    fn multibyte_and_utf16_and_utf32() {
        // sjis_japanese_ci = 13: "日本" in Shift_JIS.
        assert_eq!(decode_text(b"\x93\xfa\x96\x7b", 13).unwrap(), "日本");
        // utf16_general_ci = 54, big-endian.
        assert_eq!(decode_text(b"\x00h\x00i", 54).unwrap(), "hi");
        // utf32_general_ci = 60.
        assert_eq!(
            decode_text(b"\x00\x00\x00h\x00\x01\xf6\x00", 60).unwrap(),
            "h😀"
        );
        assert!(decode_text(b"\x00\x11\x00\x00", 60).is_err());
        // koi8r_general_ci = 7.
        assert_eq!(decode_text(b"\xf0\xd2\xc9", 7).unwrap(), "При");
    }

    #[test]
    fn ascii_rejects_high_bytes() {
        assert_eq!(decode_text(b"ok", 11).unwrap(), "ok");
        assert_eq!(
            decode_text(b"\xe9", 11),
            Err(DecodeFailure::Invalid("ascii".into()))
        );
    }

    #[test]
    fn unknown_and_unsupported_charsets_are_errors() {
        assert_eq!(
            decode_text(b"x", 0),
            Err(DecodeFailure::Unsupported("unknown".into()))
        );
        assert_eq!(
            decode_text(b"x", 3),
            Err(DecodeFailure::Unsupported("dec8".into()))
        );
    }
}
