//! The `routes` block of a pipeline definition: tables sent to one topic instead of their
//! own (Debezium's `ByLogicalTableRouter`), e.g. shards `shop.orders_\d+` to
//! `{prefix}.shop.orders_all`. A routed record's key gets the physical-table field
//! ([`PHYSICAL_TABLE_KEY_FIELD`](capstan_kafka::record::PHYSICAL_TABLE_KEY_FIELD)).
//!
//! Checked without I/O: every entry, every topic, and — where the captured tables are known
//! (exact names, or `tables.include` entries repeated in a route) — that each captured table
//! has exactly one topic. A template without `{table}` is accepted only when routes cover
//! every captured table that way.

use capstan_connectors::mysql::TableFilter;
use capstan_core::change::TableId;
use capstan_core::name_pattern::NamePattern;
use capstan_kafka::record::{is_legal_topic_char, TopicRoute, TopicRouter, MAX_TOPIC_LEN};
use serde::{Deserialize, Serialize};

use super::pipeline_spec::PipelineSpecError;
use super::tables_spec::{patterns, table_name, NameSelector, TablesSpec};

/// One routing rule.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The tables: `schema.table` names or `{"regex": …}` matched against `schema.table`.
    pub tables: Vec<NameSelector>,
    /// The topic: a legal topic name, where `{prefix}` stands for `kafka.topic_prefix`.
    pub topic: String,
}

fn topic_name(prefix: &str, template: &str) -> Result<String, &'static str> {
    let topic = template.replace("{prefix}", prefix);
    if topic.is_empty() || topic == "." || topic == ".." {
        return Err("must be a topic name");
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err("is longer than 249 characters");
    }
    if !topic.chars().all(is_legal_topic_char) {
        return Err("has characters outside [a-zA-Z0-9._-] (the only placeholder is {prefix})");
    }
    if topic == prefix {
        return Err("is the schema-change topic (the topic prefix)");
    }
    Ok(topic)
}

/// The checked routes. `prefix` is the topic prefix, `has_table` whether the topic template
/// has `{table}`, `tables` the `tables` block as written and `filter` its checked form.
pub(super) fn check_routes(
    routes: &[RouteSpec],
    prefix: &str,
    has_table: bool,
    tables: &TablesSpec,
    filter: &TableFilter,
) -> Result<TopicRouter, PipelineSpecError> {
    let mut checked = Vec::with_capacity(routes.len());
    for (i, route) in routes.iter().enumerate() {
        if route.tables.is_empty() {
            return Err(PipelineSpecError::new(
                format!("routes[{i}].tables"),
                "must name at least one table",
            ));
        }
        let topic = topic_name(prefix, &route.topic)
            .map_err(|m| PipelineSpecError::new(format!("routes[{i}].topic"), m))?;
        let tables = patterns(&format!("routes[{i}].tables"), &route.tables, table_name)?;
        checked.push(TopicRoute { tables, topic });
    }
    let router = TopicRouter::new(checked);
    // an exact table two routes send to different topics
    for (i, route) in router.routes().iter().enumerate() {
        for (j, p) in route.tables.iter().enumerate() {
            if let Some(table) = exact_table(p) {
                if router.route(&table).is_err() {
                    return Err(PipelineSpecError::new(
                        format!("routes[{i}].tables[{j}]"),
                        "is routed to two different topics",
                    ));
                }
            }
        }
    }
    // the captured tables, where known, each to exactly one topic
    if let TableFilter::Only(set) = filter {
        let mut ids: Vec<&TableId> = set.iter().collect();
        ids.sort();
        for id in ids {
            let routed = router.route(id).map_err(|_| {
                PipelineSpecError::new("routes", format!("send {id} to two different topics"))
            })?;
            if routed.is_none() && !has_table {
                return Err(PipelineSpecError::new(
                    "kafka.topic_template",
                    format!("must contain {{table}}: {id} is captured and not routed"),
                ));
            }
        }
    } else if !has_table {
        // patterns or every table: covered only if each include entry is repeated in a route
        let includes = tables.include.as_deref().unwrap_or_default();
        let covered = !includes.is_empty()
            && tables.schemas.is_none()
            && includes.iter().all(|inc| {
                let Ok(p) = inc.to_pattern("", table_name) else {
                    return false;
                };
                router.routes().iter().any(|r| r.tables.contains(&p))
            });
        if !covered {
            return Err(PipelineSpecError::new(
                "kafka.topic_template",
                "must contain {table} unless every `tables.include` entry is also in a route \
                 (a captured table needs a topic)",
            ));
        }
    }
    Ok(router)
}

fn exact_table(p: &NamePattern) -> Option<TableId> {
    if !p.is_exact() {
        return None;
    }
    let (s, t) = p.as_str().split_once('.')?;
    Some(TableId::new(s, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(
        routes: serde_json::Value,
        tables: serde_json::Value,
        has_table: bool,
    ) -> Result<TopicRouter, PipelineSpecError> {
        let routes: Vec<RouteSpec> = serde_json::from_value(routes).unwrap();
        let tables: TablesSpec = serde_json::from_value(tables).unwrap();
        let filter = tables.to_filter().unwrap();
        check_routes(&routes, "cdc", has_table, &tables, &filter)
    }

    #[test]
    fn shards_route_to_one_topic() {
        let r = check(
            json!([{"tables": [{"regex": r"shop\.orders_\d+"}], "topic": "{prefix}.shop.orders_all"}]),
            json!({"include": [{"regex": r"shop\.orders_\d+"}]}),
            false,
        )
        .unwrap();
        assert_eq!(
            r.route(&TableId::new("shop", "orders_12")),
            Ok(Some("cdc.shop.orders_all"))
        );
        // exact tables, each routed: no {table} needed
        check(
            json!([{"tables": ["shop.o1", "shop.o2"], "topic": "all"}]),
            json!({"include": ["shop.o1", "shop.o2"]}),
            false,
        )
        .unwrap();
    }

    #[test]
    fn every_captured_table_needs_exactly_one_topic() {
        let e = check(
            json!([{"tables": ["shop.o1"], "topic": "all"}]),
            json!({"include": ["shop.o1", "shop.o2"]}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.field, "kafka.topic_template");
        assert_eq!(
            e.message,
            "must contain {table}: shop.o2 is captured and not routed"
        );
        let e = check(
            json!([{"tables": ["shop.o1"], "topic": "a"}, {"tables": [{"regex": "shop\\.o.*"}], "topic": "b"}]),
            json!({}),
            true,
        )
        .unwrap_err();
        assert_eq!(e.field, "routes[0].tables[0]");
        let e = check(
            json!([{"tables": [{"regex": "shop\\..*"}], "topic": "a"}]),
            json!({}),
            false,
        )
        .unwrap_err();
        assert_eq!(e.field, "kafka.topic_template");
        let e = check(
            json!([{"tables": [{"regex": "shop\\.o.*"}], "topic": "a"}, {"tables": [{"regex": "shop\\.o1"}], "topic": "b"}]),
            json!({"include": ["shop.o1"]}),
            true,
        )
        .unwrap_err();
        assert_eq!(e.field, "routes");
    }

    #[test]
    fn entries_and_topics_are_checked() {
        let cases = [
            (json!([{"tables": [], "topic": "a"}]), "routes[0].tables"),
            (
                json!([{"tables": ["a.b"], "topic": "a"}, {"tables": ["x.y", {"regex": "("}], "topic": "b"}]),
                "routes[1].tables[1]",
            ),
            (
                json!([{"tables": ["nodot"], "topic": "a"}]),
                "routes[0].tables[0]",
            ),
            (
                json!([{"tables": ["a.b"], "topic": "a/b"}]),
                "routes[0].topic",
            ),
            (
                json!([{"tables": ["a.b"], "topic": "{db}.x"}]),
                "routes[0].topic",
            ),
            (
                json!([{"tables": ["a.b"], "topic": "{prefix}"}]),
                "routes[0].topic",
            ),
        ];
        for (routes, field) in cases {
            assert_eq!(check(routes, json!({}), true).unwrap_err().field, field);
        }
    }
}
