//! [`TableReport`]: one table's comparison of its source rows with its replayed topic, and
//! [`compare`], the pure function that makes it. Value-free: keys appear as digests, topic
//! items with their partition and offset.

use serde::Serialize;

use super::expected_rows::ExpectedRows;
use super::row_digest::Digest;
use super::topic_replay::{ReplayCounts, TopicOffset, TopicReplay};

/// One example of a difference or a duplicate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Example {
    /// The first 16 hex characters of the SHA-256 of the key's canonical JSON; absent for an
    /// unreadable record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The topic record concerned (the one that set the key's image, or the duplicate);
    /// absent for a row missing from the topic.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub at: Option<TopicOffset>,
    /// A duplicate's kind (`stale_epoch`, `repeated_record`, `create_on_present_key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
}

/// A count and its first examples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Category {
    /// How many.
    pub count: u64,
    /// The first ones (missing, extra and differing by key digest; the others in topic
    /// order).
    pub examples: Vec<Example>,
}

/// One table compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableReport {
    /// `schema.table`.
    pub table: String,
    /// Its topic.
    pub topic: String,
    /// Rows the source table holds.
    pub source_rows: u64,
    /// Keys present after the replay.
    pub topic_keys: u64,
    /// Records read from the topic, by kind.
    pub records: ReplayCounts,
    /// In the source, not on the topic.
    pub missing: Category,
    /// On the topic, not in the source.
    pub extra: Category,
    /// On both, with another `after` image.
    pub differing: Category,
    /// Records a consumer could not apply.
    pub unreadable: Category,
    /// Duplicates (not a difference: at-least-once delivery may duplicate).
    pub duplicates: Category,
}

impl TableReport {
    /// Missing, extra, differing and unreadable together.
    pub fn differences(&self) -> u64 {
        self.missing.count + self.extra.count + self.differing.count + self.unreadable.count
    }
}

/// Compares `expected` (the source) with `replay` (the topic), keeping up to `examples` of
/// each kind.
pub fn compare(
    table: &str,
    topic: &str,
    expected: &ExpectedRows,
    replay: &TopicReplay,
    examples: usize,
) -> TableReport {
    let topic_keys = replay.keys();
    let mut missing = Vec::new();
    let mut differing = Vec::new();
    for (key, after) in expected.rows() {
        match topic_keys.get(key) {
            Some(state) => match state.after {
                Some(got) if got == *after => {}
                Some(_) => differing.push((*key, Some(state.at))),
                None => missing.push((*key, None)),
            },
            None => missing.push((*key, None)),
        }
    }
    let mut extra: Vec<(Digest, Option<TopicOffset>)> = topic_keys
        .iter()
        .filter(|(key, state)| state.after.is_some() && !expected.rows().contains_key(key))
        .map(|(key, state)| (*key, Some(state.at)))
        .collect();
    let counts = replay.counts();
    TableReport {
        table: table.to_string(),
        topic: topic.to_string(),
        source_rows: expected.len() as u64,
        topic_keys: replay.present() as u64,
        records: counts,
        missing: by_key(&mut missing, examples),
        extra: by_key(&mut extra, examples),
        differing: by_key(&mut differing, examples),
        unreadable: Category {
            count: counts.unreadable,
            examples: replay
                .unreadable_at()
                .iter()
                .take(examples)
                .map(|at| Example {
                    key: None,
                    at: Some(*at),
                    kind: None,
                })
                .collect(),
        },
        duplicates: Category {
            count: counts.duplicates,
            examples: replay
                .duplicates()
                .iter()
                .take(examples)
                .map(|d| Example {
                    key: Some(d.key.short()),
                    at: Some(d.at),
                    kind: Some(d.kind.as_str()),
                })
                .collect(),
        },
    }
}

/// The count and the first `examples` in key-digest order.
fn by_key(items: &mut [(Digest, Option<TopicOffset>)], examples: usize) -> Category {
    items.sort_unstable_by_key(|(key, _)| *key);
    Category {
        count: items.len() as u64,
        examples: items
            .iter()
            .take(examples)
            .map(|(key, at)| Example {
                key: Some(key.short()),
                at: *at,
                kind: None,
            })
            .collect(),
    }
}
