//! The one-pass writer against the previous path (mysql_common's DOM → serde_json text):
//! generated documents in both storage forms must render identically, and for arbitrary or
//! corrupted bytes the writer either defers (`None`) or agrees with the previous path.

use proptest::prelude::*;
use serde_json::Value as J;

use super::{json_text, via_dom};

fn fast(doc: &[u8]) -> Option<String> {
    json_text(doc)
}

fn push_off(out: &mut Vec<u8>, v: usize, large: bool) {
    if large {
        out.extend_from_slice(&(v as u32).to_le_bytes());
    } else {
        out.extend_from_slice(&(v as u16).to_le_bytes());
    }
}

/// Type byte and body of a scalar, or `None` for containers.
fn scalar(v: &J) -> Option<(u8, Vec<u8>)> {
    Some(match v {
        J::Null => (0x4, vec![0]),
        J::Bool(true) => (0x4, vec![1]),
        J::Bool(false) => (0x4, vec![2]),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                if let Ok(x) = i16::try_from(i) {
                    (0x5, x.to_le_bytes().to_vec())
                } else if let Ok(x) = i32::try_from(i) {
                    (0x7, x.to_le_bytes().to_vec())
                } else {
                    (0x9, i.to_le_bytes().to_vec())
                }
            } else if let Some(u) = n.as_u64() {
                (0xA, u.to_le_bytes().to_vec())
            } else {
                (0xB, n.as_f64().unwrap_or(0.0).to_le_bytes().to_vec())
            }
        }
        J::String(s) => {
            let mut out = Vec::new();
            let mut len = s.len();
            loop {
                let b = (len & 0x7f) as u8;
                len >>= 7;
                if len == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
            out.extend_from_slice(s.as_bytes());
            (0xC, out)
        }
        J::Array(_) | J::Object(_) => return None,
    })
}

/// MySQL binary JSON of `v` (type byte and body); containers small or large per `large`.
pub(super) fn encode(v: &J, large: bool) -> (u8, Vec<u8>) {
    if let Some(s) = scalar(v) {
        return s;
    }
    let os = if large { 4 } else { 2 };
    let (members, object): (Vec<(Option<&str>, &J)>, bool) = match v {
        J::Array(a) => (a.iter().map(|x| (None, x)).collect(), false),
        // reverse the (sorted) map so the writer has to sort
        J::Object(m) => (
            m.iter().rev().map(|(k, x)| (Some(k.as_str()), x)).collect(),
            true,
        ),
        _ => unreachable!(),
    };
    let n = members.len();
    let header = 2 * os + if object { n * (os + 2) } else { 0 } + n * (os + 1);
    let mut keys = Vec::new();
    let mut key_entries = Vec::new();
    let mut pos = header;
    for (k, _) in &members {
        if let Some(k) = k {
            push_off(&mut key_entries, pos, large);
            key_entries.extend_from_slice(&(k.len() as u16).to_le_bytes());
            keys.extend_from_slice(k.as_bytes());
            pos += k.len();
        }
    }
    let mut value_entries = Vec::new();
    let mut values = Vec::new();
    for (_, x) in &members {
        let (ty, body) = encode(x, large);
        let inline = matches!(ty, 0x4..=0x6) || (large && matches!(ty, 0x7 | 0x8));
        value_entries.push(ty);
        if inline {
            let mut field = body.clone();
            field.resize(os, 0);
            value_entries.extend_from_slice(&field);
        } else {
            push_off(&mut value_entries, pos, large);
            values.extend_from_slice(&body);
            pos += body.len();
        }
    }
    let mut out = Vec::new();
    push_off(&mut out, n, large);
    push_off(&mut out, pos, large);
    out.extend(key_entries);
    out.extend(value_entries);
    out.extend(keys);
    out.extend(values);
    let ty = match (object, large) {
        (true, false) => 0x0,
        (true, true) => 0x1,
        (false, false) => 0x2,
        (false, true) => 0x3,
    };
    (ty, out)
}

fn doc(v: &J, large: bool) -> Vec<u8> {
    let (ty, body) = encode(v, large);
    let mut d = vec![ty];
    d.extend(body);
    d
}

fn json_value() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i64>().prop_map(J::from),
        (-40000i64..40000).prop_map(J::from),
        any::<u64>().prop_map(J::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(J::from),
        prop_oneof![
            Just(0.1f64),
            Just(1e21),
            Just(-0.0),
            Just(1.0),
            Just(5e-324)
        ]
        .prop_map(J::from),
        "\\PC{0,12}".prop_map(J::String),
        "[\\x00-\\x20\"\\\\/\\x7f\u{80}-\u{10ffff}a]{0,8}".prop_map(J::String),
    ];
    leaf.prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(J::Array),
            proptest::collection::btree_map(
                "[a-zA-Z0-9_\\x00-\\x1f\u{e9}\u{4e2d}\"\\\\]{0,6}",
                inner,
                0..8
            )
            .prop_map(|m| J::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn generated_documents_render_like_the_dom_path(v in json_value(), large in any::<bool>()) {
        let d = doc(&v, large);
        let want = via_dom(&d);
        prop_assert!(want.is_some());
        prop_assert_eq!(fast(&d), want);
    }

    #[test]
    fn corrupted_documents_defer_or_agree(
        v in json_value(),
        large in any::<bool>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut d = doc(&v, large);
        for (i, b) in flips {
            let at = i.index(d.len());
            d[at] = b;
        }
        if truncate {
            d.truncate(cut.index(d.len() + 1));
        }
        if d.is_empty() {
            return Ok(());
        }
        if let Some(text) = fast(&d) {
            prop_assert_eq!(via_dom(&d), Some(text));
        }
    }

    #[test]
    fn arbitrary_bytes_defer_or_agree(d in proptest::collection::vec(any::<u8>(), 1..80)) {
        if let Some(text) = fast(&d) {
            prop_assert_eq!(via_dom(&d), Some(text));
        }
    }
}

#[test]
fn golden_documents() {
    let cases = [
        (
            r#"{"b":[1,2.5,"x\ny"],"a":{"k":null,"j":true}}"#,
            r#"{"a":{"j":true,"k":null},"b":[1,2.5,"x\ny"]}"#,
        ),
        (r#"[]"#, "[]"),
        (r#"{}"#, "{}"),
        (r#""\u0001\u001f\"\\/é""#, "\"\\u0001\\u001f\\\"\\\\/é\""),
        (
            r#"[1e300,-0.0,0.1,18446744073709551615,-9223372036854775808]"#,
            "[1e+300,-0.0,0.1,18446744073709551615,-9223372036854775808]",
        ),
    ];
    for (input, want) in cases {
        let v: J = serde_json::from_str(input).unwrap();
        for large in [false, true] {
            let d = doc(&v, large);
            assert_eq!(fast(&d).as_deref(), Some(want), "{input} large={large}");
            assert_eq!(via_dom(&d).as_deref(), Some(want), "{input} large={large}");
        }
    }
    // uint16 / uint32 (small: uint32 by offset) and literals inlined in a large array
    let small = [
        0x02, 2, 0, 14, 0, 0x06, 0xff, 0xff, 0x08, 10, 0, 0x00, 0x00, 0x00, 0x80,
    ];
    assert_eq!(fast(&small).as_deref(), Some("[65535,2147483648]"));
    assert_eq!(via_dom(&small).as_deref(), Some("[65535,2147483648]"));
}

#[test]
fn opaque_duplicate_keys_and_non_finite_defer_or_match() {
    // opaque DECIMAL inside an array: the fast path defers
    let mut d = vec![0x02, 1, 0, 0, 0, 0x0f, 7, 0, 246, 3, 4, 2, 0x81];
    d[3] = (d.len() - 1) as u8;
    assert_eq!(fast(&d), None);
    // duplicate keys: defer
    let mut m = vec![0x00, 2, 0, 0, 0];
    m.extend_from_slice(&[18, 0, 1, 0, 19, 0, 1, 0]); // key entries
    m.extend_from_slice(&[0x04, 1, 0, 0x04, 2, 0]); // values: true, false
    m.extend_from_slice(b"kk");
    let size = m.len() - 1;
    m[3] = size as u8;
    assert_eq!(fast(&m), None);
    assert!(via_dom(&m).is_some());
    // NaN double at top level renders as 0 on both paths
    let mut nan = vec![0x0b];
    nan.extend_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(fast(&nan).as_deref(), Some("0"));
    assert_eq!(via_dom(&nan).as_deref(), Some("0"));
}
