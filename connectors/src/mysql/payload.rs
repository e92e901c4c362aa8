//! TRANSACTION_PAYLOAD (MySQL 8.0.20+, `binlog_transaction_compression=ON`): a whole
//! transaction's events, zstd-compressed, in one event.
//!
//! The envelope is 1 GiB: a payload whose *declared* uncompressed size exceeds it is refused
//! before a byte is allocated, and inflation stops reading one byte past it, so a zip bomb
//! costs at most the envelope. Any zstd error, an unknown compression type or an inflated
//! size different from the declared one halts `payload_corrupt`: nothing is partially
//! decoded, nothing silently vanishes (mysql_common's `danger_decompress` returns an empty
//! buffer on a zstd error, which is why we inflate with the `zstd` crate ourselves).
//!
//! The header is parsed here too: mysql_common 0.37's parser panics on malformed headers
//! (an `unwrap` on an unknown compression type, an unchecked skip past the buffer), which the
//! property tests found. Layout: fields of `type, length, value` (each a length-encoded
//! integer; unknown types are skipped by `length`) up to the end mark 0, then the payload.

use std::io::Read;

use super::halt::Halt;

/// Compression type ZSTD.
pub const COMPRESSION_ZSTD: u64 = 0;
/// Compression type NONE.
pub const COMPRESSION_NONE: u64 = 255;

const END_MARK: u64 = 0;
const PAYLOAD_SIZE: u64 = 1;
const COMPRESSION_TYPE: u64 = 2;
const UNCOMPRESSED_SIZE: u64 = 3;

/// A parsed TRANSACTION_PAYLOAD header and its payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader<'a> {
    /// Raw compression type.
    pub compression: u64,
    /// Declared uncompressed size.
    pub uncompressed_size: u64,
    /// The compressed payload.
    pub payload: &'a [u8],
}

fn corrupt(reason: &'static str) -> Halt {
    Halt::PayloadCorrupt { reason }
}

/// Reads a MySQL length-encoded integer.
fn lenenc(buf: &mut &[u8]) -> Result<u64, Halt> {
    let short = || corrupt("payload header truncated");
    let (&first, rest) = buf.split_first().ok_or_else(short)?;
    let n = match first {
        0..=250 => {
            *buf = rest;
            return Ok(u64::from(first));
        }
        252 => 2,
        253 => 3,
        254 => 8,
        _ => return Err(corrupt("payload header has an invalid integer")),
    };
    let bytes = rest.get(..n).ok_or_else(short)?;
    *buf = &rest[n..];
    Ok(bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
}

/// Parses a TRANSACTION_PAYLOAD event body (checksum already stripped).
pub fn parse_header(mut buf: &[u8]) -> Result<PayloadHeader<'_>, Halt> {
    let (mut size, mut compression, mut uncompressed) = (None, None, 0u64);
    loop {
        let field = lenenc(&mut buf)?;
        if field == END_MARK {
            break;
        }
        let len = usize::try_from(lenenc(&mut buf)?).map_err(|_| corrupt("field length"))?;
        let mut value = buf.get(..len).ok_or(corrupt("payload header truncated"))?;
        buf = &buf[len..];
        match field {
            PAYLOAD_SIZE => size = Some(lenenc(&mut value)?),
            COMPRESSION_TYPE => compression = Some(lenenc(&mut value)?),
            UNCOMPRESSED_SIZE => uncompressed = lenenc(&mut value)?,
            _ => {}
        }
    }
    let size = size.ok_or(corrupt("payload size missing"))?;
    let compression = compression.ok_or(corrupt("compression type missing"))?;
    if size != buf.len() as u64 {
        return Err(corrupt("payload size mismatch"));
    }
    Ok(PayloadHeader {
        compression,
        uncompressed_size: uncompressed,
        payload: buf,
    })
}

/// The largest inflated payload capstan accepts, in bytes (1 GiB).
pub const MAX_INFLATED_BYTES: u64 = 1 << 30;

/// Initial buffer capacity; the buffer grows with the actual inflated bytes, never with a
/// declaration.
const INITIAL_CAPACITY: u64 = 1 << 20;

/// Parses a payload event's body and inflates it into the concatenated inner events.
pub fn inflate(body: &[u8]) -> Result<Vec<u8>, Halt> {
    let h = parse_header(body)?;
    inflate_raw(
        h.compression,
        h.uncompressed_size,
        h.payload,
        MAX_INFLATED_BYTES,
    )
}

/// Inflates `payload` compressed with `algorithm`, expecting exactly `declared` bytes, at
/// most `limit` bytes.
pub fn inflate_raw(
    algorithm: u64,
    declared: u64,
    payload: &[u8],
    limit: u64,
) -> Result<Vec<u8>, Halt> {
    if declared > limit {
        return Err(Halt::PayloadTooLarge {
            size: declared,
            limit,
        });
    }
    let out = match algorithm {
        COMPRESSION_NONE => {
            let len = payload.len() as u64;
            if len > limit {
                return Err(Halt::PayloadTooLarge { size: len, limit });
            }
            payload.to_vec()
        }
        COMPRESSION_ZSTD => {
            let decoder = zstd::stream::read::Decoder::with_buffer(payload).map_err(|_| {
                Halt::PayloadCorrupt {
                    reason: "zstd decoder init failed",
                }
            })?;
            let capacity = usize::try_from(declared.min(INITIAL_CAPACITY)).unwrap_or(0);
            let mut out = Vec::with_capacity(capacity);
            decoder
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|_| Halt::PayloadCorrupt {
                    reason: "zstd stream corrupt",
                })?;
            let len = out.len() as u64;
            if len > limit {
                return Err(Halt::PayloadTooLarge { size: len, limit });
            }
            out
        }
        _ => return Err(corrupt("unsupported compression type")),
    };
    if out.len() as u64 != declared {
        return Err(Halt::PayloadCorrupt {
            reason: "uncompressed size mismatch",
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZSTD: u64 = COMPRESSION_ZSTD;

    #[test]
    fn header_fields_and_refusals() {
        let z = zstd::encode_all(&[5u8; 40][..], 1).unwrap();
        let mut body = vec![2, 1, 0, 3, 1, 40, 1, 1, z.len() as u8, 0];
        body.extend_from_slice(&z);
        let h = parse_header(&body).unwrap();
        assert_eq!((h.compression, h.uncompressed_size), (0, 40));
        assert_eq!(inflate(&body).unwrap(), vec![5u8; 40]);
        body[2] = 7; // unknown compression type
        assert_eq!(inflate(&body).unwrap_err().code(), "payload_corrupt");
        assert_eq!(
            parse_header(&body[..5]).unwrap_err().code(),
            "payload_corrupt"
        );
        // unknown field skipped by its length, past the end: refused, not panicking
        assert!(parse_header(&[9, 200, 1]).is_err());
    }

    #[test]
    fn roundtrip_and_size_checks() {
        let data = vec![7u8; 10_000];
        let z = zstd::encode_all(&data[..], 3).unwrap();
        assert_eq!(inflate_raw(ZSTD, 10_000, &z, 1 << 20).unwrap(), data);
        assert_eq!(
            inflate_raw(ZSTD, 9_999, &z, 1 << 20).unwrap_err().code(),
            "payload_corrupt"
        );
        // declared too large: refused before inflating
        assert_eq!(
            inflate_raw(ZSTD, 2 << 30, &z, 1 << 30).unwrap_err().code(),
            "payload_too_large"
        );
        // inflates past the limit despite a small declaration
        assert_eq!(
            inflate_raw(ZSTD, 100, &z, 5_000).unwrap_err().code(),
            "payload_too_large"
        );
    }

    #[test]
    fn corruption_halts_instead_of_vanishing() {
        let data = vec![1u8; 1000];
        let mut z = zstd::encode_all(&data[..], 3).unwrap();
        let n = z.len();
        z.truncate(n - 3);
        assert_eq!(
            inflate_raw(ZSTD, 1000, &z, 1 << 20).unwrap_err().code(),
            "payload_corrupt"
        );
        assert_eq!(
            inflate_raw(ZSTD, 1000, b"not zstd at all", 1 << 20)
                .unwrap_err()
                .code(),
            "payload_corrupt"
        );
    }
}
