//! `capstan verify`: an independent check of a pipeline's topics against its source tables.
//!
//! The source side reads each captured table through the product's own snapshot reader and
//! encodes each row with the product's own record builder, keeping per key the digest of the
//! `after` image a snapshot would publish ([`expected_rows`]). The topic side replays each
//! table's topic to its end as a consumer would ([`topic_replay`]). The comparison is pure
//! ([`table_report::compare`]): missing, extra and differing rows by key, duplicates, each
//! identified by a key digest and a topic offset, never by a value. Memory: two digests per
//! key. The source must be quiet while it runs (`docs/operations.md`). Every `kafka.format` is
//! read back to the same JSON envelope first ([`record_form`]; Avro through the registry).

mod avro_json;
mod checkpoint_wait;
mod expected_rows;
mod record_form;
mod row_digest;
mod source_scan;
mod table_report;
mod topic_replay;
mod topic_scan;
mod verify_command;
mod verify_error;
mod verify_report;
mod verify_target;
#[cfg(test)]
mod verify_tests;

pub use verify_command::{run, VerifyArgs};
