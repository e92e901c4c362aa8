//! [`TopicRouter`]: routing rules that send the changes of several tables to one topic
//! (Debezium's `ByLogicalTableRouter`), e.g. the shards `shop.orders_\d+` to
//! `shop.orders_all`. A routed record keeps its source table in `source.db`/`source.table`,
//! and its key gets one more field, [`PHYSICAL_TABLE_KEY_FIELD`] = `"<db>.<table>"`, so equal
//! primary keys of two shards stay two keys in the routed topic.

use capstan_core::change::TableId;
use capstan_core::name_pattern::NamePattern;

/// The key field naming the physical table of a routed record (Debezium's default
/// `key.field.name` of its logical table router).
pub const PHYSICAL_TABLE_KEY_FIELD: &str = "__dbz__physicalTableIdentifier";

/// One rule: tables (`schema.table` names or patterns) and the topic they go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicRoute {
    /// The tables, matched against `schema.table`.
    pub tables: Vec<NamePattern>,
    /// The topic (a legal topic name, already checked).
    pub topic: String,
}

/// The routing rules of a pipeline, in definition order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicRouter {
    routes: Vec<TopicRoute>,
}

/// A table two rules send to different topics.
pub const AMBIGUOUS_ROUTE: &str = "table matches routes to different topics";

impl TopicRouter {
    /// Rules, in order.
    pub fn new(routes: Vec<TopicRoute>) -> Self {
        TopicRouter { routes }
    }

    /// True without rules.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The rules.
    pub fn routes(&self) -> &[TopicRoute] {
        &self.routes
    }

    /// The topic `table` is routed to; `None` when no rule matches it; an error when rules
    /// send it to different topics (a table goes to exactly one topic).
    pub fn route(&self, table: &TableId) -> Result<Option<&str>, &'static str> {
        if self.routes.is_empty() {
            return Ok(None);
        }
        let name = format!("{}.{}", table.schema, table.table);
        let mut found: Option<&str> = None;
        for route in &self.routes {
            if route.tables.iter().any(|p| p.matches(&name)) {
                match found {
                    Some(topic) if topic != route.topic => return Err(AMBIGUOUS_ROUTE),
                    _ => found = Some(&route.topic),
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> TopicRouter {
        TopicRouter::new(vec![
            TopicRoute {
                tables: vec![NamePattern::regex(r"shop\.orders_\d+").unwrap()],
                topic: "cdc.shop.orders_all".into(),
            },
            TopicRoute {
                tables: vec![
                    NamePattern::exact("shop.orders_legacy"),
                    NamePattern::exact("shop.orders_7"),
                ],
                topic: "cdc.shop.orders_all".into(),
            },
            TopicRoute {
                tables: vec![NamePattern::regex(r"shop\.orders_(7|8)").unwrap()],
                topic: "cdc.other".into(),
            },
        ])
    }

    #[test]
    fn shards_go_to_their_route_and_others_nowhere() {
        let r = router();
        let t = |name: &str| TableId::new("shop", name);
        assert_eq!(r.route(&t("orders_1")), Ok(Some("cdc.shop.orders_all")));
        assert_eq!(
            r.route(&t("orders_legacy")),
            Ok(Some("cdc.shop.orders_all"))
        );
        assert_eq!(r.route(&t("orders")), Ok(None));
        assert_eq!(r.route(&TableId::new("shop2", "orders_1")), Ok(None));
        // two rules, one topic: fine; two topics: refused
        assert_eq!(r.route(&t("orders_8")), Err(AMBIGUOUS_ROUTE));
        assert_eq!(r.route(&t("orders_7")), Err(AMBIGUOUS_ROUTE));
        assert_eq!(TopicRouter::default().route(&t("x")), Ok(None));
    }
}

#[cfg(test)]
mod record_tests {
    use super::super::golden_tests::{builder, change, coords, ctx, json_of, row, tx};
    use super::super::{
        RecordBuilder, RecordOptions, SchemaFraming, SnapshotChunk, TopicTemplate, ValueEncoding,
    };
    use super::*;
    use capstan_core::change::{ColumnType, Op, SqlType, Value};
    use serde_json::json;

    fn routed(schemas: bool) -> RecordBuilder {
        let router = TopicRouter::new(vec![TopicRoute {
            tables: vec![NamePattern::regex(r"shop\.orders_\d+").unwrap()],
            topic: "cdc.shop.orders_all".into(),
        }]);
        let base = builder(true, false);
        RecordBuilder::new(RecordOptions {
            topics: TopicTemplate::parse_any("cdc", "{prefix}.{db}.{table}")
                .unwrap()
                .with_router(router),
            encoding: if schemas {
                ValueEncoding::Debezium(Default::default())
            } else {
                base.options().encoding
            },
            schemas: if schemas {
                SchemaFraming::ConnectJson
            } else {
                SchemaFraming::None
            },
            ..base.options().clone()
        })
    }

    #[test]
    fn routed_keys_name_the_physical_table_in_stream_and_snapshot() {
        let b = routed(false);
        let shard = TableId::new("shop", "orders_2");
        let img = |id: i64| row(&["id", "note"], vec![Value::Int(id), Value::Null]);
        let recs = b
            .transaction_records(
                &tx(
                    5,
                    vec![
                        change(&shard, Op::Delete, Some(img(7)), None, &[0]),
                        change(
                            &TableId::new("shop", "items"),
                            Op::Insert,
                            None,
                            Some(img(7)),
                            &[0],
                        ),
                    ],
                ),
                &coords(),
                &ctx(),
            )
            .unwrap();
        // the delete, its tombstone (same key), then the unrouted insert
        assert_eq!(recs.len(), 3);
        let routed_key = json!({"id": 7, "__dbz__physicalTableIdentifier": "shop.orders_2"});
        assert_eq!(recs[0].topic, "cdc.shop.orders_all");
        assert_eq!(json_of(&recs[0].key), routed_key);
        assert_eq!(json_of(&recs[0].value)["source"]["table"], "orders_2");
        assert_eq!(
            (recs[1].topic.as_str(), recs[1].value.is_none()),
            ("cdc.shop.orders_all", true)
        );
        assert_eq!(json_of(&recs[1].key), routed_key);
        assert_eq!(recs[2].topic, "cdc.shop.items");
        assert_eq!(json_of(&recs[2].key), json!({"id": 7}));
        let rows = vec![img(3)];
        let snap = b
            .snapshot_records(
                &SnapshotChunk {
                    table: &TableId::new("shop", "orders_10"),
                    key: &[0],
                    rows: &rows,
                    types: None,
                    chunk_id: "c",
                    coordinates: coords(),
                    first_of_table: false,
                    first_of_snapshot: false,
                    last_of_table: false,
                    last_of_snapshot: false,
                    incremental: false,
                },
                &ctx(),
            )
            .unwrap();
        assert_eq!(snap[0].topic, "cdc.shop.orders_all");
        assert_eq!(
            json_of(&snap[0].key),
            json!({"id": 3, "__dbz__physicalTableIdentifier": "shop.orders_10"})
        );
    }

    #[test]
    fn a_routed_key_schema_ends_with_the_physical_table_field() {
        let b = routed(true);
        let int = ColumnType {
            sql: SqlType::Int {
                bytes: 4,
                unsigned: false,
            },
            nullable: false,
        };
        let mut c = change(
            &TableId::new("shop", "orders_1"),
            Op::Insert,
            None,
            Some(row(&["id"], vec![Value::Int(1)])),
            &[0],
        );
        c.types = Some(vec![int].into());
        let recs = b
            .transaction_records(&tx(6, vec![c]), &coords(), &ctx())
            .unwrap();
        let key = json_of(&recs[0].key);
        assert_eq!(
            key["schema"],
            json!({
                "type": "struct", "optional": false, "name": "cdc.shop.orders_all.Key",
                "fields": [
                    {"type": "int32", "optional": false, "field": "id"},
                    {"type": "string", "optional": false, "field": "__dbz__physicalTableIdentifier"}
                ]
            })
        );
        assert_eq!(
            key["payload"],
            json!({"id": 1, "__dbz__physicalTableIdentifier": "shop.orders_1"})
        );
    }
}
