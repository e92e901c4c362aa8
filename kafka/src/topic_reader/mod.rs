//! Reading a whole topic from the beginning to its current end: the exactly-once mode reads
//! the offsets topic this way, and tests use it to check what was published.

mod consumed_record;
#[allow(clippy::module_inception)]
mod topic_reader;

pub use consumed_record::ConsumedRecord;
pub use topic_reader::{Isolation, TopicReader};
