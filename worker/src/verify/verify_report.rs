//! [`VerifyReport`]: every table's comparison, its verdict, and how it prints (text for a
//! terminal, JSON for a script). Value-free like its parts.

use std::fmt::Write as _;

use serde::Serialize;

use super::table_report::{Category, TableReport};

/// The outcome of `capstan verify`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The pipeline verified.
    pub pipeline: String,
    /// One entry per table, in name order.
    pub tables: Vec<TableReport>,
    /// Sums over the tables.
    pub totals: Totals,
    /// True when no table differs (and, with `--strict`, none has a duplicate).
    pub clean: bool,
    /// Whether duplicates count as differences.
    pub strict: bool,
}

/// Sums over the tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Source rows.
    pub source_rows: u64,
    /// Topic keys.
    pub topic_keys: u64,
    /// Missing rows.
    pub missing: u64,
    /// Extra keys.
    pub extra: u64,
    /// Differing rows.
    pub differing: u64,
    /// Unreadable records.
    pub unreadable: u64,
    /// Duplicate records.
    pub duplicates: u64,
}

impl VerifyReport {
    /// The report of `tables`; with `strict` a duplicate fails it too.
    pub fn new(pipeline: &str, mut tables: Vec<TableReport>, strict: bool) -> Self {
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        let mut totals = Totals::default();
        for t in &tables {
            totals.source_rows += t.source_rows;
            totals.topic_keys += t.topic_keys;
            totals.missing += t.missing.count;
            totals.extra += t.extra.count;
            totals.differing += t.differing.count;
            totals.unreadable += t.unreadable.count;
            totals.duplicates += t.duplicates.count;
        }
        let differences: u64 = tables.iter().map(TableReport::differences).sum();
        let clean = differences == 0 && (!strict || totals.duplicates == 0);
        VerifyReport {
            pipeline: pipeline.to_string(),
            tables,
            totals,
            clean,
            strict,
        }
    }

    /// The process exit code: 0 clean, 1 with differences.
    pub fn exit_code(&self) -> i32 {
        if self.clean {
            0
        } else {
            1
        }
    }

    /// The report for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for t in &self.tables {
            let _ = writeln!(out, "table {} (topic {})", t.table, t.topic);
            let _ = writeln!(
                out,
                "  source rows {}, topic keys {}, records read {}",
                t.source_rows, t.topic_keys, t.records.records
            );
            let _ = writeln!(
                out,
                "  missing {}, extra {}, differing {}, unreadable {}, duplicates {}",
                t.missing.count,
                t.extra.count,
                t.differing.count,
                t.unreadable.count,
                t.duplicates.count
            );
            for (name, category) in [
                ("missing", &t.missing),
                ("extra", &t.extra),
                ("differing", &t.differing),
                ("unreadable", &t.unreadable),
                ("duplicate", &t.duplicates),
            ] {
                examples(&mut out, name, category);
            }
        }
        let totals = &self.totals;
        let verdict = if self.clean { "clean" } else { "DIFFERENT" };
        let _ = writeln!(
            out,
            "pipeline {}: {verdict}: {} table(s), {} source rows, {} topic keys, missing {}, \
             extra {}, differing {}, unreadable {}, duplicates {}{}",
            self.pipeline,
            self.tables.len(),
            totals.source_rows,
            totals.topic_keys,
            totals.missing,
            totals.extra,
            totals.differing,
            totals.unreadable,
            totals.duplicates,
            if self.strict { " (strict)" } else { "" }
        );
        out
    }
}

fn examples(out: &mut String, name: &str, category: &Category) {
    for e in &category.examples {
        let mut line = format!("    {name}");
        if let Some(key) = &e.key {
            let _ = write!(line, " key {key}");
        }
        if let Some(at) = e.at {
            let _ = write!(line, " at partition {} offset {}", at.partition, at.offset);
        }
        if let Some(kind) = e.kind {
            let _ = write!(line, " ({kind})");
        }
        let _ = writeln!(out, "{line}");
    }
    let shown = category.examples.len() as u64;
    if category.count > shown {
        let _ = writeln!(out, "    … and {} more {name}", category.count - shown);
    }
}
