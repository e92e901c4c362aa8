//! Arbitrary text into the MySQL GTID set parser: never panics, and whatever parses
//! round-trips through its canonical text.
#![no_main]

use capstan_core::position::{Gtid, GtidSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(set) = text.parse::<GtidSet>() {
        let printed = set.to_string();
        let back: GtidSet = printed.parse().expect("canonical text parses");
        assert_eq!(back, set);
    }
    let _ = text.parse::<Gtid>();
});
