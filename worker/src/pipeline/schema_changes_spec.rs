//! The `schema_changes` block of a pipeline definition: what schema-change events carry.

use serde::{Deserialize, Serialize};

/// The `schema_changes` block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaChangesSpec {
    /// Put each DDL statement's text in its schema-change event's `ddl` field (default:
    /// false, `ddl` is null). The text is the server's, unrewritten: it can hold column
    /// defaults, comments, partition bounds, and the names and defaults of excluded columns.
    #[serde(default)]
    pub include_ddl: bool,
}

impl SchemaChangesSpec {
    /// True when nothing is set (the block is then left out when the definition is shown).
    pub fn is_default(&self) -> bool {
        *self == SchemaChangesSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::pipeline::PipelineSpec;

    fn with(schema_changes: Option<serde_json::Value>) -> serde_json::Value {
        let mut v = json!({
            "name": "orders",
            "source": {
                "host": "db.internal", "port": 3306, "user": "capstan", "password": "pw",
                "tls": {"mode": "verify_none"}, "server_id": 1001, "flavor": "mysql"
            },
            "kafka": {"bootstrap_servers": "k1:9092", "topic_prefix": "shop"}
        });
        if let Some(s) = schema_changes {
            v["schema_changes"] = s;
        }
        v
    }

    #[test]
    fn include_ddl_sets_the_sources_keep_ddl_statement_and_defaults_to_off() {
        let keep = |v| {
            PipelineSpec::from_json(v)
                .unwrap()
                .validate()
                .unwrap()
                .source
                .keep_ddl_statement
        };
        assert!(!keep(with(None)));
        assert!(!keep(with(Some(json!({})))));
        assert!(!keep(with(Some(json!({"include_ddl": false})))));
        assert!(keep(with(Some(json!({"include_ddl": true})))));
    }

    #[test]
    fn a_wrong_key_or_type_names_the_field() {
        let e = PipelineSpec::from_json(with(Some(json!({"include_dll": true})))).unwrap_err();
        assert_eq!(e.field, "schema_changes.include_dll");
        assert!(e.message.contains("unknown field"), "{e}");
        let e = PipelineSpec::from_json(with(Some(json!({"include_ddl": "yes"})))).unwrap_err();
        assert_eq!(e.field, "schema_changes.include_ddl");
        assert!(!e.message.contains("yes"), "{e}");
    }

    #[test]
    fn the_block_is_shown_only_when_set() {
        let shown = |v| {
            serde_json::to_value(PipelineSpec::from_json(v).unwrap())
                .unwrap()
                .get("schema_changes")
                .cloned()
        };
        assert_eq!(shown(with(None)), None);
        assert_eq!(
            shown(with(Some(json!({"include_ddl": true})))),
            Some(json!({"include_ddl": true}))
        );
    }
}
