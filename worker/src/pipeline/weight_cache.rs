//! [`WeightCache`]: the server's collation weights of string key values, held under a byte
//! budget.
//!
//! The gate compares string keys by their collation weights, which only the server computes
//! (`WEIGHT_STRING`). The driver asks for the weights of a whole batch at once and then gates
//! the batch from this cache alone, so every value of the batch must still be here when it
//! is gated. Room is therefore made *before* a batch's values are fetched, never after: when
//! the values missing from the cache would take it past its budget, everything cached for
//! earlier batches is dropped first and the whole batch is fetched again. The cache then
//! holds at most its budget plus one batch's values (a batch is bounded by its own budget).
//! Pure: the caller does the fetching.

use std::collections::{HashMap, HashSet};

use capstan_core::change::TableId;

/// The default budget: key values and weights of all snapshot tables of one pipeline.
pub const DEFAULT_BUDGET_BYTES: usize = 64 << 20;

/// What one cached entry costs beside its two byte strings (hash-map slot, two `Vec`s).
const ENTRY_OVERHEAD: usize = 80;

/// A weight is usually longer than its value (UCA collations use 2–8 bytes per character):
/// the estimate before the weights are known.
const WEIGHT_PER_VALUE_BYTE: usize = 3;

/// One key column of one table.
pub type Column = (TableId, usize);

/// See the module documentation.
#[derive(Debug)]
pub struct WeightCache {
    columns: HashMap<Column, HashMap<Vec<u8>, Vec<u8>>>,
    bytes: usize,
    budget: usize,
}

impl Default for WeightCache {
    fn default() -> Self {
        WeightCache::new(DEFAULT_BUDGET_BYTES)
    }
}

impl WeightCache {
    /// An empty cache holding about `budget` bytes before it starts over.
    pub fn new(budget: usize) -> Self {
        WeightCache {
            columns: HashMap::new(),
            bytes: 0,
            budget,
        }
    }

    /// The cached weight of `value` in key column `index` of `table`.
    pub fn get(&self, table: &TableId, index: usize, value: &[u8]) -> Option<&[u8]> {
        self.columns
            .get(&(table.clone(), index))?
            .get(value)
            .map(Vec::as_slice)
    }

    /// The values of `needed` (one batch's string key values, by column) whose weights must
    /// be fetched. When fetching them would take the cache past its budget, the cache is
    /// emptied first and every needed value is returned: the batch's own values are never
    /// the ones dropped.
    pub fn missing(
        &mut self,
        needed: HashMap<Column, HashSet<Vec<u8>>>,
    ) -> HashMap<Column, Vec<Vec<u8>>> {
        let is_cached = |cache: &Self, column: &Column, value: &[u8]| {
            cache
                .columns
                .get(column)
                .is_some_and(|m| m.contains_key(value))
        };
        let incoming: usize = needed
            .iter()
            .flat_map(|(column, values)| values.iter().map(move |v| (column, v)))
            .filter(|(column, v)| !is_cached(self, column, v))
            .map(|(_, v)| estimate(v))
            .sum();
        if incoming > 0 && self.bytes + incoming > self.budget {
            self.columns.clear();
            self.bytes = 0;
        }
        needed
            .into_iter()
            .filter_map(|(column, values)| {
                let values: Vec<Vec<u8>> = values
                    .into_iter()
                    .filter(|v| !is_cached(self, &column, v))
                    .collect();
                (!values.is_empty()).then_some((column, values))
            })
            .collect()
    }

    /// Caches the fetched `weights` of `values` (in the same order) of `column`.
    pub fn insert(&mut self, column: Column, values: Vec<Vec<u8>>, weights: Vec<Vec<u8>>) {
        let cache = self.columns.entry(column).or_default();
        for (value, weight) in values.into_iter().zip(weights) {
            let value_cost = value.len() + ENTRY_OVERHEAD;
            self.bytes += value_cost + weight.len();
            if let Some(old) = cache.insert(value, weight) {
                // the same value fetched twice: its first entry is gone
                self.bytes = self.bytes.saturating_sub(value_cost + old.len());
            }
        }
    }

    /// The bytes the cache holds by its accounting.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

fn estimate(value: &[u8]) -> usize {
    value.len() * (1 + WEIGHT_PER_VALUE_BYTE) + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> TableId {
        TableId::new("db", name)
    }

    fn batch(table: &TableId, values: std::ops::Range<u32>) -> HashMap<Column, HashSet<Vec<u8>>> {
        let mut m: HashMap<Column, HashSet<Vec<u8>>> = HashMap::new();
        m.entry((table.clone(), 0))
            .or_default()
            .extend(values.map(|v| format!("key-{v:06}").into_bytes()));
        m
    }

    /// The server's part: a weight per value.
    fn fetch(cache: &mut WeightCache, missing: HashMap<Column, Vec<Vec<u8>>>) {
        for (column, values) in missing {
            let weights = values.iter().map(|v| v.to_ascii_uppercase()).collect();
            cache.insert(column, values, weights);
        }
    }

    fn all_cached(cache: &WeightCache, table: &TableId, values: std::ops::Range<u32>) -> bool {
        values
            .map(|v| format!("key-{v:06}").into_bytes())
            .all(|v| cache.get(table, 0, &v) == Some(v.to_ascii_uppercase().as_slice()))
    }

    #[test]
    fn a_batch_that_fills_the_cache_keeps_its_own_weights() {
        let t = table("t");
        // room for about 100 entries
        let mut cache = WeightCache::new(100 * estimate(b"key-000000"));
        let first = cache.missing(batch(&t, 0..80));
        assert_eq!(first.values().map(Vec::len).sum::<usize>(), 80);
        fetch(&mut cache, first);
        // the next batch passes the budget: the old entries go, the whole batch is fetched
        // and stays, however large it is
        let second = cache.missing(batch(&t, 70..400));
        assert_eq!(second.values().map(Vec::len).sum::<usize>(), 330);
        fetch(&mut cache, second);
        assert!(all_cached(&cache, &t, 70..400));
        assert!(!all_cached(&cache, &t, 0..70));
    }

    #[test]
    fn cached_values_are_not_fetched_again_while_they_fit() {
        let (t, u) = (table("t"), table("u"));
        let mut cache = WeightCache::default();
        let missing = cache.missing(batch(&t, 0..10));
        fetch(&mut cache, missing);
        let mut next = batch(&t, 5..15);
        next.extend(batch(&u, 0..3));
        let missing = cache.missing(next);
        let mut asked: Vec<(String, usize)> = missing
            .iter()
            .map(|((table, _), values)| (table.to_string(), values.len()))
            .collect();
        asked.sort();
        assert_eq!(asked, vec![("db.t".into(), 5), ("db.u".into(), 3)]);
        fetch(&mut cache, missing);
        assert!(all_cached(&cache, &t, 0..15));
        assert!(all_cached(&cache, &u, 0..3));
    }

    #[test]
    fn the_cache_holds_at_most_its_budget_and_one_batch() {
        let t = table("t");
        let budget = 50 * estimate(b"key-000000");
        let mut cache = WeightCache::new(budget);
        for round in 0..40u32 {
            let values = round * 20..round * 20 + 20;
            let missing = cache.missing(batch(&t, values.clone()));
            fetch(&mut cache, missing);
            assert!(all_cached(&cache, &t, values), "round {round}");
            assert!(cache.bytes() <= budget + 20 * estimate(b"key-000000"));
        }
    }
}
