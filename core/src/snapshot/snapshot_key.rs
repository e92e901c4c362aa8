//! An order-preserving byte encoding of a (possibly composite) key: comparing two encoded
//! keys of the same table bytewise gives the server's `ORDER BY` order of the keys.

use std::fmt;

/// One component of a key, as the comparison needs it: integers by value, everything else as
/// bytes whose bytewise order is the server's order (binary strings as stored, character
/// strings as their collation weights from the server's `WEIGHT_STRING`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum KeyComponent<'a> {
    /// A signed integer column.
    Int(i64),
    /// An unsigned integer column.
    UInt(u64),
    /// Bytes compared lexicographically, a proper prefix first.
    Bytes(&'a [u8]),
}

impl fmt::Debug for KeyComponent<'_> {
    /// The kind only: a key is row data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyComponent::Int(_) => "Int(..)",
            KeyComponent::UInt(_) => "UInt(..)",
            KeyComponent::Bytes(_) => "Bytes(..)",
        })
    }
}

/// An encoded key. `Ord` is the key order. It is row data: `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SnapshotKey(Vec<u8>);

impl SnapshotKey {
    /// Encodes the components in key order. Integers take eight big-endian bytes (signed ones
    /// with the sign bit flipped); byte strings escape `0x00` as `0x00 0xFF` and end with
    /// `0x00 0x00`, so a prefix sorts first and the next component never bleeds into the order.
    pub fn encode(components: &[KeyComponent<'_>]) -> SnapshotKey {
        let mut out = Vec::with_capacity(components.len() * 9);
        for component in components {
            match component {
                KeyComponent::Int(v) => {
                    out.extend_from_slice(&((*v as u64) ^ (1 << 63)).to_be_bytes());
                }
                KeyComponent::UInt(v) => out.extend_from_slice(&v.to_be_bytes()),
                KeyComponent::Bytes(bytes) => {
                    for &b in *bytes {
                        out.push(b);
                        if b == 0 {
                            out.push(0xFF);
                        }
                    }
                    out.extend_from_slice(&[0, 0]);
                }
            }
        }
        SnapshotKey(out)
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SnapshotKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SnapshotKey(<{} bytes>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one(c: KeyComponent<'_>) -> SnapshotKey {
        SnapshotKey::encode(&[c])
    }

    #[test]
    fn integers_keep_their_order_across_zero_and_two_to_the_63() {
        assert!(one(KeyComponent::Int(-1)) < one(KeyComponent::Int(0)));
        assert!(one(KeyComponent::Int(i64::MIN)) < one(KeyComponent::Int(i64::MAX)));
        assert!(one(KeyComponent::UInt(1 << 63)) > one(KeyComponent::UInt((1 << 63) - 1)));
        assert!(one(KeyComponent::UInt(u64::MAX)) > one(KeyComponent::UInt(1 << 63)));
    }

    #[test]
    fn bytes_prefix_first_and_zero_bytes_ordered() {
        let k = |b: &[u8]| one(KeyComponent::Bytes(b));
        assert!(k(b"a") < k(b"a\0"));
        assert!(k(b"a\0") < k(b"a\x01"));
        assert!(k(b"") < k(b"\0"));
        assert!(k(b"ab") < k(b"b"));
    }

    #[test]
    fn debug_hides_the_key() {
        let s = format!("{:?}", one(KeyComponent::Bytes(b"secret")));
        assert!(!s.contains("secret") && s.contains("bytes"), "{s}");
    }

    proptest! {
        #[test]
        fn composite_order_is_tuple_order(
            a in any::<i64>(), b in proptest::collection::vec(any::<u8>(), 0..6),
            c in any::<i64>(), d in proptest::collection::vec(any::<u8>(), 0..6),
        ) {
            let x = SnapshotKey::encode(&[KeyComponent::Int(a), KeyComponent::Bytes(&b)]);
            let y = SnapshotKey::encode(&[KeyComponent::Int(c), KeyComponent::Bytes(&d)]);
            prop_assert_eq!(x.cmp(&y), (a, &b).cmp(&(c, &d)));
        }

        #[test]
        fn bytes_then_int_order_is_tuple_order(
            a in proptest::collection::vec(0u8..3, 0..4), b in any::<u64>(),
            c in proptest::collection::vec(0u8..3, 0..4), d in any::<u64>(),
        ) {
            let x = SnapshotKey::encode(&[KeyComponent::Bytes(&a), KeyComponent::UInt(b)]);
            let y = SnapshotKey::encode(&[KeyComponent::Bytes(&c), KeyComponent::UInt(d)]);
            prop_assert_eq!(x.cmp(&y), (&a, b).cmp(&(&c, d)));
        }
    }
}
