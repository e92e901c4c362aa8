//! Golden tests of the schema-change event (Debezium's schema-change topic). When one of these
//! changes, the "Schema changes" section of `docs/event-format.md` changes with it.

use capstan_core::change::{
    ColumnStructure, SchemaChange, SchemaChangeKind, TableStructure, TransactionGtid,
};
use capstan_core::position::{Flavor, MariadbGtid};
use serde_json::{json, Value as Json};

use super::golden_tests::{builder, coords, ctx, json_of};
use super::*;

const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const SECRET_DDL: &str = "ALTER TABLE shop.orders ADD COLUMN pin INT DEFAULT 4711";

fn gtid(gno: u64) -> TransactionGtid {
    TransactionGtid::Mysql(format!("{UUID}:{gno}").parse().unwrap())
}

fn alter_orders(statement: Option<&str>) -> SchemaChange {
    SchemaChange {
        schema: Some("shop".into()),
        table: Some("orders".into()),
        kind: SchemaChangeKind::AlterTable,
        statement: statement.map(str::to_string),
        structure: None,
    }
}

fn headers(r: &KafkaRecord) -> Vec<(&str, &str)> {
    r.headers
        .iter()
        .map(|(n, v)| (n.as_ref(), std::str::from_utf8(v).unwrap()))
        .collect()
}

#[test]
fn alter_table_event_with_the_statement_redacted() {
    let recs = builder(true, true)
        .schema_change_records(&alter_orders(None), &gtid(21), &coords(), &ctx())
        .unwrap();
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(
        r.topic, "cdc",
        "Debezium's schema-change topic is the prefix"
    );
    assert_eq!(
        String::from_utf8(r.key.clone().unwrap()).unwrap(),
        r#"{"databaseName":"shop"}"#
    );
    assert_eq!(
        json_of(&r.value),
        json!({
            "source": {
                "version": SOURCE_VERSION, "connector": "mysql", "name": "cdc",
                "ts_ms": 1_700_000_000_123u64, "snapshot": "false", "db": "shop",
                "table": "orders", "server_id": 1, "gtid": format!("{UUID}:21"),
                "file": "binlog.000003", "pos": 4711, "row": 0
            },
            "ts_ms": 1_700_000_000_123u64,
            "databaseName": "shop",
            "schemaName": null,
            "tableName": "orders",
            "kind": "alter_table",
            "ddl": null,
            "tableChanges": []
        })
    );
    // field order on the wire, as documented
    let raw = String::from_utf8(r.value.clone().unwrap()).unwrap();
    assert!(raw.starts_with(r#"{"source":{"version""#), "{raw}");
    assert!(
        raw.ends_with(
            r#""ts_ms":1700000000123,"databaseName":"shop","schemaName":null,"tableName":"orders","kind":"alter_table","ddl":null,"tableChanges":[]}"#
        ),
        "{raw}"
    );
    assert_eq!(r.timestamp_ms, Some(1_700_000_000_123));
    let position = format!("ddl:{UUID}:21");
    assert_eq!(
        headers(r),
        vec![
            ("capstan.pipeline", "orders-pipe"),
            ("capstan.epoch", "7"),
            ("capstan.position", position.as_str()),
            ("capstan.record", "0"),
        ]
    );
    assert_eq!(r.header(HEADER_ROW), None);
}

#[test]
fn statement_text_only_when_the_pipeline_opted_in() {
    let recs = builder(true, false)
        .schema_change_records(
            &alter_orders(Some(SECRET_DDL)),
            &gtid(22),
            &coords(),
            &ctx(),
        )
        .unwrap();
    assert_eq!(json_of(&recs[0].value)["ddl"], SECRET_DDL);
    // the record's Debug (what a log line could show) never carries the text
    assert!(!format!("{recs:?}").contains("4711"), "{recs:?}");
}

#[test]
fn database_level_statement_has_no_table() {
    let change = SchemaChange {
        schema: Some("shop".into()),
        table: None,
        kind: SchemaChangeKind::CreateDatabase,
        statement: None,
        structure: None,
    };
    let recs = builder(true, false)
        .schema_change_records(&change, &gtid(23), &coords(), &ctx())
        .unwrap();
    let v = json_of(&recs[0].value);
    assert_eq!(v["kind"], "create_database");
    assert_eq!(v["databaseName"], "shop");
    assert_eq!(v["tableName"], Json::Null);
    assert_eq!(v["source"]["db"], "shop");
    assert_eq!(v["source"]["table"], Json::Null);
}

#[test]
fn statement_without_a_database_is_keyed_by_the_empty_name() {
    let change = SchemaChange {
        schema: None,
        table: None,
        kind: SchemaChangeKind::Other,
        statement: None,
        structure: None,
    };
    let recs = builder(true, false)
        .schema_change_records(&change, &gtid(24), &coords(), &ctx())
        .unwrap();
    assert_eq!(json_of(&recs[0].key), json!({"databaseName": ""}));
    let v = json_of(&recs[0].value);
    assert_eq!(v["databaseName"], "");
    assert_eq!(v["source"]["db"], "");
    assert_eq!(v["kind"], "other");
}

#[test]
fn every_kind_has_its_name() {
    let kinds = [
        (SchemaChangeKind::CreateTable, "create_table"),
        (SchemaChangeKind::AlterTable, "alter_table"),
        (SchemaChangeKind::DropTable, "drop_table"),
        (SchemaChangeKind::RenameTable, "rename_table"),
        (SchemaChangeKind::TruncateTable, "truncate_table"),
        (SchemaChangeKind::CreateIndex, "create_index"),
        (SchemaChangeKind::DropIndex, "drop_index"),
        (SchemaChangeKind::CreateDatabase, "create_database"),
        (SchemaChangeKind::AlterDatabase, "alter_database"),
        (SchemaChangeKind::DropDatabase, "drop_database"),
        (SchemaChangeKind::Other, "other"),
    ];
    let b = builder(true, false);
    for (kind, name) in kinds {
        let change = SchemaChange {
            kind,
            ..alter_orders(None)
        };
        let recs = b
            .schema_change_records(&change, &gtid(25), &coords(), &ctx())
            .unwrap();
        assert_eq!(json_of(&recs[0].value)["kind"], name);
    }
}

#[test]
fn mariadb_schema_change() {
    let b = RecordBuilder::new(RecordOptions {
        flavor: Flavor::Mariadb,
        ..builder(true, false).options().clone()
    });
    let g = TransactionGtid::Mariadb(MariadbGtid::new(0, 1, 42));
    let recs = b
        .schema_change_records(&alter_orders(None), &g, &coords(), &ctx())
        .unwrap();
    let v = json_of(&recs[0].value);
    assert_eq!(v["source"]["connector"], "mariadb");
    assert_eq!(v["source"]["gtid"], "0-1-42");
    assert_eq!(recs[0].header_str(HEADER_POSITION), Some("ddl:0-1-42"));
}

#[test]
fn topic_follows_the_prefix_not_the_template() {
    let b = RecordBuilder::new(RecordOptions {
        topics: TopicTemplate::parse("prod-cdc", "all-{table}").unwrap(),
        ..builder(true, false).options().clone()
    });
    assert_eq!(b.schema_change_topic(), "prod-cdc");
    let recs = b
        .schema_change_records(&alter_orders(None), &gtid(26), &coords(), &ctx())
        .unwrap();
    assert_eq!(recs[0].topic, "prod-cdc");
    assert_eq!(json_of(&recs[0].value)["source"]["name"], "prod-cdc");
}

fn column(
    name: &str,
    type_name: &str,
    length: Option<u32>,
    scale: Option<u32>,
    charset: Option<&str>,
    nullable: bool,
) -> ColumnStructure {
    ColumnStructure {
        name: name.into(),
        type_name: type_name.into(),
        length,
        scale,
        charset: charset.map(str::to_string),
        nullable,
    }
}

#[test]
fn a_drop_with_a_known_structure_has_debeziums_table_change() {
    let change = SchemaChange {
        kind: SchemaChangeKind::DropTable,
        structure: Some(TableStructure {
            // position 3 is an excluded column
            columns: vec![
                (1, column("id", "BIGINT UNSIGNED", None, None, None, false)),
                (2, column("price", "DECIMAL", Some(10), Some(2), None, true)),
                (
                    4,
                    column("note", "VARCHAR", Some(64), None, Some("utf8mb4"), true),
                ),
                (5, column("at", "DATETIME", Some(6), None, None, false)),
                (
                    6,
                    column("state", "ENUM", None, None, Some("latin1"), false),
                ),
            ],
            primary_key: vec!["id".into()],
        }),
        ..alter_orders(None)
    };
    let recs = builder(true, false)
        .schema_change_records(&change, &gtid(27), &coords(), &ctx())
        .unwrap();
    let v = json_of(&recs[0].value);
    assert_eq!(v["kind"], "drop_table");
    assert_eq!(
        v["tableChanges"],
        json!([{
            "type": "DROP",
            "id": "\"shop\".\"orders\"",
            "table": {
                "defaultCharsetName": null,
                "primaryKeyColumnNames": ["id"],
                "columns": [
                    {"name": "id", "jdbcType": -5, "typeName": "BIGINT UNSIGNED",
                     "typeExpression": "BIGINT UNSIGNED", "charsetName": null, "position": 1,
                     "optional": false},
                    {"name": "price", "jdbcType": 3, "typeName": "DECIMAL",
                     "typeExpression": "DECIMAL", "charsetName": null, "length": 10, "scale": 2,
                     "position": 2, "optional": true},
                    {"name": "note", "jdbcType": 12, "typeName": "VARCHAR",
                     "typeExpression": "VARCHAR", "charsetName": "utf8mb4", "length": 64,
                     "position": 4, "optional": true},
                    {"name": "at", "jdbcType": 93, "typeName": "DATETIME",
                     "typeExpression": "DATETIME", "charsetName": null, "length": 6,
                     "position": 5, "optional": false},
                    {"name": "state", "jdbcType": 1, "typeName": "ENUM",
                     "typeExpression": "ENUM", "charsetName": "latin1", "position": 6,
                     "optional": false}
                ]
            }
        }])
    );
    // in Debezium's field order, after `ddl`
    let raw = String::from_utf8(recs[0].value.clone().unwrap()).unwrap();
    assert!(
        raw.contains(r#""ddl":null,"tableChanges":[{"type":"DROP","id":"\"shop\".\"orders\"","table":{"defaultCharsetName":null,"primaryKeyColumnNames":["id"],"columns":[{"name":"id","jdbcType":-5,"#),
        "{raw}"
    );
}

#[test]
fn statements_without_a_known_structure_have_no_table_change() {
    // an ALTER's structure after the statement is not known without parsing it
    for kind in [SchemaChangeKind::AlterTable, SchemaChangeKind::CreateTable] {
        let change = SchemaChange {
            kind,
            ..alter_orders(None)
        };
        let recs = builder(true, false)
            .schema_change_records(&change, &gtid(28), &coords(), &ctx())
            .unwrap();
        assert_eq!(json_of(&recs[0].value)["tableChanges"], json!([]));
    }
}
