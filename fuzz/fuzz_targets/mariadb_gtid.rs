//! Arbitrary text into the MariaDB GTID position parser: never panics, and whatever parses
//! round-trips through its canonical text.
#![no_main]

use capstan_core::position::{MariadbGtid, MariadbGtidPosition};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(pos) = text.parse::<MariadbGtidPosition>() {
        let back: MariadbGtidPosition = pos.to_string().parse().expect("canonical text parses");
        assert_eq!(back, pos);
    }
    let _ = text.parse::<MariadbGtid>();
});
