//! Offline decode benchmark: walks a binlog file (a copy of a server's binlog; a cut-off
//! last event ends the walk) through `EventReader` and `TransactionAssembler` with every
//! table captured, several times, and prints the best pass. No network, one thread: the CPU
//! cost of framing, checksums, event parsing and row decoding alone.
//!
//! ```text
//! head -c 260000000 <datadir>/binlog.000009 > /tmp/capstan-decode-bench.binlog
//! cargo run --release -p capstan-connectors --example decode_bench -- /tmp/capstan-decode-bench.binlog 5
//! ```
//!
//! A third argument `no-rows` captures no table (every rows event is skipped before
//! decoding): the framing/CRC32/parsing share alone.
//!
//! Prints counts and times only, never row values.

use std::time::Instant;

use capstan_connectors::mysql::{
    AssemblerConfig, AssemblerOutput, BinlogFileEvents, TableFilter, TransactionAssembler,
};

/// The allocator capstan's worker binary uses (see `worker/src/main.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: decode_bench <binlog file> [passes]")?;
    let passes: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3);
    let no_rows = args.next().as_deref() == Some("no-rows");
    let config = AssemblerConfig {
        filter: if no_rows {
            TableFilter::only([("no_such_schema", "no_such_table")])
        } else {
            TableFilter::All
        },
        ..AssemblerConfig::default()
    };
    let bytes = std::fs::read(&path)?;
    let mut best = f64::MAX;
    for pass in 0..passes.max(1) {
        let start = Instant::now();
        let mut assembler = TransactionAssembler::new(config.clone());
        let mut out = Vec::new();
        let (mut rows, mut txns, mut halts, mut events) = (0u64, 0u64, 0u64, 0u64);
        for event in BinlogFileEvents::new(&bytes) {
            let Ok(event) = event else { break };
            events += 1;
            if assembler.push(event, &mut out).is_err() {
                halts += 1;
                assembler.reset();
            }
            for o in out.drain(..) {
                if let AssemblerOutput::Transaction(t) = o {
                    txns += 1;
                    rows += t.changes.len() as u64;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        best = best.min(secs);
        println!(
            "pass {pass}: {events} events, {txns} transactions, {rows} rows, {halts} halts (reset), {secs:.3} s, {:.0} rows/s, {:.1} MB/s",
            rows as f64 / secs,
            bytes.len() as f64 / secs / 1e6
        );
    }
    println!("best {best:.3} s");
    Ok(())
}
