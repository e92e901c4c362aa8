//! [`encode`]: a PAD SPACE collation's bare weight as bytes whose plain (memcmp) order is the
//! server's PAD SPACE comparison. Pure.
//!
//! A PAD SPACE collation compares two strings as if the shorter *weight sequence* were
//! extended with the space's weight unit forever. The bare `WEIGHT_STRING(v)` is that weight
//! sequence unpadded, a run of fixed-width units (the width is the length of the space's own
//! weight). Compared bytewise, bare weights get two things wrong: trailing space units count
//! (`'a '` sorts after `'a'`, but the two are equal), and a unit below the space sorts after
//! the end of a shorter string (`'a\t'` against `'a'`: the server compares the tab with a
//! space, and the tab is smaller). Stripping trailing spaces fixes only the first.
//!
//! # The encoding
//!
//! The unit sequence is cut into groups, each a run of `k` space units followed by one
//! non-space unit `u`; trailing space units form no group. Each group becomes a token, and
//! the string ends with a single byte:
//!
//! | group         | token                                       |
//! | ------------- | ------------------------------------------- |
//! | `u` < space   | `0x00`, `k` as u32 big-endian, `u`          |
//! | `u` > space   | `0x02`, `u32::MAX - k` big-endian, `u`      |
//! | end of string | `0x01`                                      |
//!
//! Why memcmp of two encodings is the padded comparison: equal leading groups give equal
//! tokens, so the order is decided at the first group that differs, where the padded
//! sequences agree up to the shorter of the two space runs. Say `A` has `(k1, u1)`:
//!
//! - against `(k2, u2)` with `k1 < k2`: the padded sequences compare `u1` with a space, so
//!   `A` is smaller iff `u1` < space. A token of class `0x00` sorts below one of `0x02`;
//!   within `0x00` the smaller `k` sorts first, within `0x02` the smaller `k` sorts last
//!   (`u32::MAX - k` is larger) — in every combination the class and count bytes give that
//!   answer. With `k1 == k2` the classes and counts are equal or the class already orders
//!   `u1` against `u2` across the space, and otherwise `u1` and `u2` themselves decide.
//! - against the end of `B` (spaces forever): `u1` is compared with a space, and the end
//!   byte `0x01` sits between the two classes.
//!
//! Tokens within a class all have the same length, so the comparison never runs past a
//! token's end into the next before it is decided. Strings equal under padding have equal
//! groups and so equal encodings. The count is a `u32`: a key of up to 65,535 characters
//! has far fewer units than that.

/// The class byte of a group whose unit sorts below the space.
const BELOW: u8 = 0x00;
/// The byte that ends every encoding: the infinite padding, between the two classes.
const END: u8 = 0x01;
/// The class byte of a group whose unit sorts above the space.
const ABOVE: u8 = 0x02;

/// `weight` (a bare `WEIGHT_STRING`) encoded so that memcmp order is the PAD SPACE order,
/// with `space` the weight of one space (one unit; its length is the unit width). `None`
/// if `space` is empty or `weight` is not a whole number of units.
pub(crate) fn encode(weight: &[u8], space: &[u8]) -> Option<Vec<u8>> {
    let width = space.len();
    if width == 0 || !weight.len().is_multiple_of(width) {
        return None;
    }
    let mut out = Vec::with_capacity(weight.len() * 3 + 1);
    let mut spaces: u32 = 0;
    for unit in weight.chunks_exact(width) {
        if unit == space {
            spaces = spaces.checked_add(1)?;
            continue;
        }
        if unit < space {
            out.push(BELOW);
            out.extend_from_slice(&spaces.to_be_bytes());
        } else {
            out.push(ABOVE);
            out.extend_from_slice(&(u32::MAX - spaces).to_be_bytes());
        }
        out.extend_from_slice(unit);
        spaces = 0;
    }
    out.push(END);
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::cmp::Ordering;

    const SP: &[u8] = &[0x02, 0x09];

    fn units(us: &[u16]) -> Vec<u8> {
        us.iter().flat_map(|u| u.to_be_bytes()).collect()
    }

    fn cmp(a: &[u16], b: &[u16]) -> Ordering {
        encode(&units(a), SP)
            .unwrap()
            .cmp(&encode(&units(b), SP).unwrap())
    }

    const S: u16 = 0x0209;
    const TAB: u16 = 0x0201;
    const A: u16 = 0x0e33;
    const B: u16 = 0x0e4a;

    #[test]
    fn trailing_spaces_do_not_count() {
        assert_eq!(cmp(&[A], &[A, S]), Ordering::Equal);
        assert_eq!(cmp(&[A, S, S], &[A, S]), Ordering::Equal);
        assert_eq!(cmp(&[], &[S, S, S]), Ordering::Equal);
        assert_eq!(encode(&units(&[S]), SP).unwrap(), vec![END]);
    }

    #[test]
    fn a_unit_below_the_space_sorts_before_the_end() {
        // 'a\t' < 'a' < 'ab': the end compares as a space
        assert_eq!(cmp(&[A, TAB], &[A]), Ordering::Less);
        assert_eq!(cmp(&[A], &[A, B]), Ordering::Less);
        assert_eq!(cmp(&[A, TAB], &[A, S]), Ordering::Less);
        assert_eq!(cmp(&[], &[TAB]), Ordering::Greater);
        // stripping trailing spaces alone would order [x] before [x, w] for w < space
        assert_eq!(cmp(&[A, S, TAB], &[A]), Ordering::Less);
        assert_eq!(cmp(&[A, S, B], &[A]), Ordering::Greater);
    }

    #[test]
    fn space_runs_order_by_what_follows_them() {
        // 'a  b' against 'a b': the second compares b with a space
        assert_eq!(cmp(&[A, S, S, B], &[A, S, B]), Ordering::Less);
        assert_eq!(cmp(&[A, S, S, TAB], &[A, S, TAB]), Ordering::Greater);
        assert_eq!(cmp(&[A, S, TAB], &[A, S, S, B]), Ordering::Less);
        assert_eq!(cmp(&[A, S, B], &[A, S, S, TAB]), Ordering::Greater);
        assert_eq!(cmp(&[S, A], &[A]), Ordering::Less);
    }

    #[test]
    fn misaligned_or_unitless_weights_are_refused() {
        assert_eq!(encode(&[1, 2, 3], SP), None);
        assert_eq!(encode(&[1, 2], &[]), None);
        assert_eq!(encode(&[], SP), Some(vec![END]));
        // a one-byte unit (latin1_swedish_ci): '\t' < ' ' < 'A'
        assert!(encode(b"A\t", b" ").unwrap() < encode(b"A", b" ").unwrap());
        assert_eq!(encode(b"A  ", b" "), encode(b"A", b" "));
    }

    mod props {
        use super::super::encode;
        use proptest::prelude::*;
        use std::cmp::Ordering;

        /// The server's PAD SPACE comparison: both unit sequences padded with the space unit
        /// to the same length, then compared unit by unit.
        fn padded_cmp(a: &[Vec<u8>], b: &[Vec<u8>], space: &[u8]) -> Ordering {
            let n = a.len().max(b.len());
            let at = |s: &[Vec<u8>], i: usize| s.get(i).map_or(space.to_vec(), Clone::clone);
            (0..n)
                .map(|i| at(a, i).cmp(&at(b, i)))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        }

        /// A unit width, a space unit, and an alphabet of units around it: the space itself,
        /// its neighbours one below and one above, and the extremes.
        fn setup() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>)> {
            (1usize..=3)
                .prop_flat_map(|w| prop::collection::vec(1u8..=254, w))
                .prop_flat_map(|space| {
                    let w = space.len();
                    let near = |delta: i32| {
                        let mut u = space.clone();
                        if let Some(last) = u.last_mut() {
                            *last = u8::try_from(i32::from(*last) + delta).unwrap_or(*last);
                        }
                        u
                    };
                    let mut alphabet = vec![
                        space.clone(),
                        space.clone(),
                        near(-1),
                        near(1),
                        vec![0; w],
                        vec![0xff; w],
                    ];
                    alphabet.sort();
                    (
                        Just(space),
                        prop::collection::vec(prop::collection::vec(any::<u8>(), w), 0..3)
                            .prop_map(move |extra| {
                                let mut a = alphabet.clone();
                                a.extend(extra);
                                a
                            }),
                    )
                })
        }

        fn string(alphabet: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<Vec<u8>>> {
            prop::collection::vec(prop::sample::select(alphabet), 0..8)
        }

        fn case() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>)> {
            setup().prop_flat_map(|(space, alphabet)| {
                (Just(space), string(alphabet.clone()), string(alphabet))
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            #[test]
            fn memcmp_of_encodings_is_the_padded_comparison((space, a, b) in case()) {
                let ea = encode(&a.concat(), &space).unwrap();
                let eb = encode(&b.concat(), &space).unwrap();
                prop_assert_eq!(ea.cmp(&eb), padded_cmp(&a, &b, &space));
                // equal under padding is equal bytes, not just an equal order
                prop_assert_eq!(ea == eb, padded_cmp(&a, &b, &space).is_eq());
            }

            #[test]
            fn trailing_spaces_and_a_prefix_space_run((space, a, b) in case(), n in 0usize..4) {
                let mut padded = a.clone();
                padded.extend(std::iter::repeat_n(space.clone(), n));
                prop_assert_eq!(encode(&padded.concat(), &space), encode(&a.concat(), &space));
                let mut led = vec![space.clone(); n];
                led.extend(b.iter().cloned());
                let ea = encode(&a.concat(), &space).unwrap();
                let el = encode(&led.concat(), &space).unwrap();
                prop_assert_eq!(ea.cmp(&el), padded_cmp(&a, &led, &space));
            }
        }
    }
}
