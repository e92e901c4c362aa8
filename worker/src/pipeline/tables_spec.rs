//! The `tables` block of a pipeline definition: which tables a pipeline captures, by exact
//! `schema.table` names (compared exactly, as before patterns existed) or by anchored
//! patterns (`{"regex": "shop\\.orders_\\d+"}`), for tables and for schemas.

use std::collections::HashSet;
use std::sync::Arc;

use capstan_connectors::mysql::{TableFilter, TablePatterns};
use capstan_core::change::TableId;
use capstan_core::name_pattern::NamePattern;
use serde::{Deserialize, Serialize};

use super::pipeline_spec::PipelineSpecError;

/// One entry of a name list: an exact name, or `{"regex": "…"}`, an expression (the `regex`
/// crate's syntax) that must match the whole name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NameSelector {
    /// An exact name.
    Name(String),
    /// An anchored regular expression.
    Pattern(RegexSelector),
}

/// `{"regex": "…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegexSelector {
    /// The expression.
    pub regex: String,
}

impl NameSelector {
    /// The checked pattern; `exact` checks an exact name (its shape), `field` names the entry.
    pub(super) fn to_pattern(
        &self,
        field: &str,
        exact: impl Fn(&str) -> Result<(), &'static str>,
    ) -> Result<NamePattern, PipelineSpecError> {
        match self {
            NameSelector::Name(name) => {
                exact(name).map_err(|m| PipelineSpecError::new(field, m))?;
                Ok(NamePattern::exact(name.clone()))
            }
            NameSelector::Pattern(p) => NamePattern::regex(&p.regex)
                .map_err(|e| PipelineSpecError::new(field, e.to_string())),
        }
    }
}

/// Checks a list of selectors, naming `field[i]` on error.
pub(super) fn patterns(
    field: &str,
    list: &[NameSelector],
    exact: impl Fn(&str) -> Result<(), &'static str> + Copy,
) -> Result<Vec<NamePattern>, PipelineSpecError> {
    list.iter()
        .enumerate()
        .map(|(i, s)| s.to_pattern(&format!("{field}[{i}]"), exact))
        .collect()
}

/// `schema.table`, both parts non-empty.
pub(super) fn table_name(name: &str) -> Result<(), &'static str> {
    match name.split_once('.') {
        Some((s, t)) if !s.is_empty() && !t.is_empty() => Ok(()),
        _ => Err("must be `schema.table`"),
    }
}

fn schema_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("must not be empty")
    } else {
        Ok(())
    }
}

/// Which tables a pipeline captures: `{"include": [...]}`, `{"exclude": [...]}`, both when
/// `include` has a pattern, and optionally `schemas` (include/exclude by schema). Table
/// entries are `schema.table` or `{"regex": …}` matched against `schema.table`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TablesSpec {
    /// Capture only these tables.
    #[serde(default)]
    pub include: Option<Vec<NameSelector>>,
    /// Never capture these tables (an exclusion wins over an inclusion).
    #[serde(default)]
    pub exclude: Vec<NameSelector>,
    /// Include and exclude by schema name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schemas: Option<SchemasSpec>,
}

/// `tables.schemas`: schema names or patterns.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemasSpec {
    /// Capture only tables of these schemas.
    #[serde(default)]
    pub include: Option<Vec<NameSelector>>,
    /// Never capture tables of these schemas.
    #[serde(default)]
    pub exclude: Vec<NameSelector>,
}

impl TablesSpec {
    /// The checked filter. Exact names only (no pattern, no `schemas`): the exact filter of
    /// before, with its rules (`include` and `exclude` not combined). Otherwise a
    /// [`TablePatterns`].
    pub(super) fn to_filter(&self) -> Result<TableFilter, PipelineSpecError> {
        if let Some(inc) = &self.include {
            if inc.is_empty() {
                return Err(PipelineSpecError::new(
                    "tables.include",
                    "must name at least one table (omit it to capture all tables)",
                ));
            }
        }
        let include = patterns(
            "tables.include",
            self.include.as_deref().unwrap_or_default(),
            table_name,
        )?;
        let exclude = patterns("tables.exclude", &self.exclude, table_name)?;
        let all_exact = include.iter().chain(&exclude).all(NamePattern::is_exact);
        if self.schemas.is_none() && all_exact {
            let ids = |list: &[NamePattern]| -> HashSet<TableId> {
                list.iter()
                    .filter_map(|p| p.as_str().split_once('.'))
                    .map(|(s, t)| TableId::new(s, t))
                    .collect()
            };
            return match (self.include.is_some(), exclude.is_empty()) {
                (true, false) => Err(PipelineSpecError::new(
                    "tables.exclude",
                    "cannot be combined with an `include` of exact names (only with a pattern)",
                )),
                (true, true) => Ok(TableFilter::Only(ids(&include))),
                (false, true) => Ok(TableFilter::All),
                (false, false) => Ok(TableFilter::AllExcept(ids(&exclude))),
            };
        }
        let (schemas_include, schemas_exclude) = match &self.schemas {
            None => (Vec::new(), Vec::new()),
            Some(s) => {
                if s.include.as_ref().is_some_and(Vec::is_empty) {
                    return Err(PipelineSpecError::new(
                        "tables.schemas.include",
                        "must name at least one schema (omit it for all schemas)",
                    ));
                }
                (
                    patterns(
                        "tables.schemas.include",
                        s.include.as_deref().unwrap_or_default(),
                        schema_name,
                    )?,
                    patterns("tables.schemas.exclude", &s.exclude, schema_name)?,
                )
            }
        };
        Ok(TableFilter::Matching(Arc::new(TablePatterns {
            schemas_include,
            schemas_exclude,
            tables_include: include,
            tables_exclude: exclude,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: serde_json::Value) -> Result<TableFilter, PipelineSpecError> {
        serde_json::from_value::<TablesSpec>(v).unwrap().to_filter()
    }

    fn picked(f: &TableFilter, names: &[&str]) -> Vec<String> {
        names
            .iter()
            .filter(|n| {
                let (s, t) = n.split_once('.').unwrap();
                f.admits(&TableId::new(s, t))
            })
            .map(|n| n.to_string())
            .collect()
    }

    const NAMES: &[&str] = &[
        "shop.orders",
        "shop.orders_1",
        "shop.orders_2",
        "shop.audit",
        "shopXorders.x",
        "hr.pay",
        "tenant_1.users",
    ];

    #[test]
    fn exact_lists_keep_their_exact_filter() {
        let f = filter(json!({"include": ["shop.orders", "hr.pay"]})).unwrap();
        assert!(matches!(f, TableFilter::Only(_)));
        assert_eq!(picked(&f, NAMES), vec!["shop.orders", "hr.pay"]);
        let f = filter(json!({"exclude": ["shop.audit"]})).unwrap();
        assert!(matches!(f, TableFilter::AllExcept(_)));
        assert!(matches!(filter(json!({})).unwrap(), TableFilter::All));
        let e = filter(json!({"include": ["a.b"], "exclude": ["c.d"]})).unwrap_err();
        assert_eq!(e.field, "tables.exclude");
    }

    #[test]
    fn patterns_pick_exactly_the_matching_tables() {
        let f = filter(json!({
            "include": [{"regex": r"shop\.orders_\d+"}, "shop.audit"],
            "exclude": ["shop.orders_2"]
        }))
        .unwrap();
        assert_eq!(picked(&f, NAMES), vec!["shop.orders_1", "shop.audit"]);
        let f = filter(json!({
            "schemas": {"include": [{"regex": r"tenant_\d+"}, "hr"]},
        }))
        .unwrap();
        assert_eq!(picked(&f, NAMES), vec!["hr.pay", "tenant_1.users"]);
        let f = filter(json!({
            "schemas": {"exclude": ["shop"]},
            "exclude": [{"regex": r"hr\..*"}]
        }))
        .unwrap();
        assert_eq!(picked(&f, NAMES), vec!["shopXorders.x", "tenant_1.users"]);
    }

    #[test]
    fn bad_entries_name_the_field_and_index() {
        let e = filter(json!({"include": ["a.b", "c.d", {"regex": "orders_("}]})).unwrap_err();
        assert_eq!(e.field, "tables.include[2]");
        assert_eq!(
            e.message,
            "invalid pattern (not a valid regular expression)"
        );
        let e = filter(json!({"exclude": [{"regex": ""}]})).unwrap_err();
        assert_eq!(e.field, "tables.exclude[0]");
        let e = filter(json!({"include": [{"regex": "x"}, "noschema"]})).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("tables.include[1]", "must be `schema.table`")
        );
        let e = filter(json!({"schemas": {"exclude": ["ok", {"regex": "("}]}})).unwrap_err();
        assert_eq!(e.field, "tables.schemas.exclude[1]");
        let e = filter(json!({"schemas": {"include": []}})).unwrap_err();
        assert_eq!(e.field, "tables.schemas.include");
        assert!(serde_json::from_value::<TablesSpec>(json!({"include": [{"re": "x"}]})).is_err());
    }
}
