//! Property tests of the position algebra against a plain set-of-GTIDs model.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

const UUIDS: [&str; 3] = [
    "3e11fa47-71ca-11e1-9e33-c80aa9429562",
    "00000000-0000-0000-0000-000000000001",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
];
const TAGS: [Option<&str>; 3] = [None, Some("alpha"), Some("b_2")];
const UNIVERSE: u64 = 40;

fn sid(i: usize) -> Sid {
    let uuid = Uuid::parse_at(UUIDS[i / TAGS.len()], 0).unwrap();
    let tag = TAGS[i % TAGS.len()].map(|t| Tag::parse_at(t, 0).unwrap());
    Sid { uuid, tag }
}

type Model = BTreeSet<(usize, u64)>;

fn arb_set() -> impl Strategy<Value = (GtidSet, Model)> {
    prop::collection::vec((0..UUIDS.len() * TAGS.len(), 1..UNIVERSE, 0..8u64), 0..8).prop_map(
        |ranges| {
            let mut set = GtidSet::new();
            let mut model = Model::new();
            for (s, start, len) in ranges {
                let end = (start + len).min(UNIVERSE);
                set.insert_interval(sid(s), start, end);
                for n in start..=end {
                    model.insert((s, n));
                }
            }
            (set, model)
        },
    )
}

fn to_model(set: &GtidSet) -> Model {
    let mut m = Model::new();
    for g in set.iter_gtids() {
        let i = (0..UUIDS.len() * TAGS.len())
            .find(|&i| sid(i) == g.sid)
            .unwrap();
        m.insert((i, g.gno));
    }
    m
}

proptest! {
    #[test]
    fn construction_matches_model((s, m) in arb_set()) {
        prop_assert_eq!(to_model(&s), m.clone());
        prop_assert_eq!(s.len(), m.len() as u128);
        for i in 0..UUIDS.len() * TAGS.len() {
            for n in 1..=UNIVERSE {
                prop_assert_eq!(s.contains(&Gtid::new(sid(i), n)), m.contains(&(i, n)));
            }
        }
    }

    #[test]
    fn parse_print_round_trip((s, _) in arb_set()) {
        let text = s.to_string();
        let back: GtidSet = text.parse().unwrap();
        prop_assert_eq!(&back, &s);
        prop_assert_eq!(back.to_string(), text);
    }

    #[test]
    fn parse_accepts_server_spacing_and_case((s, _) in arb_set()) {
        let noisy = s.to_string().to_uppercase().replace(',', ",\n ").replace(':', " : ");
        let back: GtidSet = noisy.parse().unwrap();
        prop_assert_eq!(back, s);
    }

    #[test]
    fn union_laws((a, ma) in arb_set(), (b, mb) in arb_set(), (c, _) in arb_set()) {
        prop_assert_eq!(a.union(&b), b.union(&a));
        prop_assert_eq!(a.union(&b).union(&c), a.union(&b.union(&c)));
        prop_assert_eq!(a.union(&a), a.clone());
        prop_assert_eq!(to_model(&a.union(&b)), ma.union(&mb).copied().collect::<Model>());
        prop_assert!(a.is_subset(&a.union(&b)));
    }

    #[test]
    fn difference_laws((a, ma) in arb_set(), (b, mb) in arb_set()) {
        let d = a.difference(&b);
        prop_assert_eq!(to_model(&d), ma.difference(&mb).copied().collect::<Model>());
        prop_assert!(d.intersection(&b).is_empty());
        prop_assert_eq!(d.union(&a.intersection(&b)), a.clone());
        prop_assert!(d.is_subset(&a));
    }

    #[test]
    fn subset_matches_model((a, ma) in arb_set(), (b, mb) in arb_set()) {
        prop_assert_eq!(a.is_subset(&b), ma.is_subset(&mb));
        prop_assert_eq!(a.is_subset(&b), a.union(&b) == b);
        prop_assert_eq!(a.is_subset(&b), a.difference(&b).is_empty());
    }

    #[test]
    fn insert_then_contains((mut a, _) in arb_set(), s in 0..9usize, n in 1..UNIVERSE) {
        let g = Gtid::new(sid(s), n);
        let was = a.contains(&g);
        prop_assert_eq!(a.insert(&g), !was);
        prop_assert!(a.contains(&g));
    }

    #[test]
    fn gtid_set_parser_never_panics(text in "\\PC{0,80}") {
        let _ = text.parse::<GtidSet>();
        let _ = text.parse::<Gtid>();
    }

    #[test]
    fn gtid_set_parser_never_panics_on_near_misses(
        text in "[0-9a-fA-F:, \\-\\n]{0,60}",
        (s, _) in arb_set(),
        cut in 0usize..200,
    ) {
        let _ = text.parse::<GtidSet>();
        let printed = s.to_string();
        let cut = cut.min(printed.len());
        let _ = printed[..cut].parse::<GtidSet>();
    }

    #[test]
    fn mariadb_round_trip_and_merge(
        a in prop::collection::btree_map(0u32..5, (0u32..4, 1u64..100), 0..5),
        b in prop::collection::btree_map(0u32..5, (0u32..4, 1u64..100), 0..5),
    ) {
        let mk = |m: &std::collections::BTreeMap<u32, (u32, u64)>| {
            let mut p = MariadbGtidPosition::new();
            for (&d, &(s, n)) in m {
                p.advance(MariadbGtid::new(d, s, n));
            }
            p
        };
        let (pa, pb) = (mk(&a), mk(&b));
        let text = pa.to_string();
        prop_assert_eq!(text.parse::<MariadbGtidPosition>().unwrap(), pa.clone());
        let merged = pa.merge(&pb);
        prop_assert!(pa.is_subset(&merged));
        prop_assert!(pb.is_subset(&merged));
        prop_assert_eq!(merged.to_string().is_empty(), merged.is_empty());
        for g in merged.iter() {
            let from_a = a.get(&g.domain).map_or(0, |x| x.1);
            let from_b = b.get(&g.domain).map_or(0, |x| x.1);
            prop_assert_eq!(g.seq, from_a.max(from_b));
        }
    }

    #[test]
    fn mariadb_parser_never_panics(text in "[0-9, \\-]{0,40}|\\PC{0,40}") {
        let _ = text.parse::<MariadbGtidPosition>();
    }
}
