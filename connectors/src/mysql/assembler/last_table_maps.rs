//! [`LastTableMaps`]: the newest table map of each captured table, so that a `DROP TABLE`
//! can describe the table it drops (Debezium's `tableChanges`). Any other DDL naming a table
//! forgets it: its structure after the statement is not known until its next table map.

use std::collections::HashMap;
use std::sync::Arc;

use capstan_core::change::{SchemaChangeKind, TableId};

use crate::mysql::table_schema::TableSchema;

/// Tables remembered at most (cleared when full: a drop then has no structure, nothing else).
const MAX_TABLES: usize = 4096;

/// The newest table map by table.
#[derive(Debug, Default)]
pub(super) struct LastTableMaps {
    tables: HashMap<TableId, Arc<TableSchema>>,
}

impl LastTableMaps {
    /// Remembers a captured table's table map.
    pub(super) fn remember(&mut self, schema: &Arc<TableSchema>) {
        if let Some(last) = self.tables.get_mut(&*schema.table) {
            *last = Arc::clone(schema);
            return;
        }
        if self.tables.len() >= MAX_TABLES {
            self.tables.clear();
        }
        self.tables
            .insert(TableId::clone(&schema.table), Arc::clone(schema));
    }

    /// After a DDL statement of `kind` on `schema`.`table`: the dropped table's last table map
    /// for a `DROP TABLE` that names it exactly; `None` otherwise. Forgets every table whose
    /// structure the statement may have changed or moved, erring on the side of forgetting:
    /// the table it names (in any letter case, as a server with `lower_case_table_names` may
    /// match it), and every table after an `ALTER` or `RENAME` (which can move a table to
    /// another name) or a table-level statement whose names were not recognised.
    pub(super) fn after_ddl(
        &mut self,
        kind: SchemaChangeKind,
        schema: Option<&str>,
        table: Option<&str>,
    ) -> Option<Arc<TableSchema>> {
        use SchemaChangeKind::*;
        match (kind, schema, table) {
            (AlterTable | RenameTable, _, _) => {
                self.tables.clear();
                None
            }
            (
                DropTable | CreateTable | TruncateTable | CreateIndex | DropIndex,
                Some(s),
                Some(t),
            ) => {
                let last = self.tables.remove(&TableId::new(s, t));
                self.tables.retain(|id, _| {
                    !(id.schema.eq_ignore_ascii_case(s) && id.table.eq_ignore_ascii_case(t))
                });
                (kind == DropTable).then_some(last).flatten()
            }
            (DropTable | CreateTable | TruncateTable | CreateIndex | DropIndex, _, _) => {
                self.tables.clear();
                None
            }
            (DropDatabase, Some(s), _) => {
                self.tables
                    .retain(|id, _| !id.schema.eq_ignore_ascii_case(s));
                None
            }
            (DropDatabase, None, _) => {
                self.tables.clear();
                None
            }
            (CreateDatabase | AlterDatabase | Other, _, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::test_support::table_map_schema;

    #[test]
    fn a_drop_gets_the_last_map_and_anything_that_may_move_a_table_forgets() {
        let mut maps = LastTableMaps::default();
        let t = table_map_schema("shop", "t", 7);
        maps.remember(&t);
        maps.remember(&table_map_schema("shop", "u", 8));
        maps.remember(&table_map_schema("other", "t", 9));
        // a drop of another table or a truncate in another letter case forgets only that one
        assert!(maps
            .after_ddl(SchemaChangeKind::DropTable, Some("shop"), Some("x"))
            .is_none());
        assert!(maps
            .after_ddl(SchemaChangeKind::TruncateTable, Some("SHOP"), Some("U"))
            .is_none());
        let dropped = maps.after_ddl(SchemaChangeKind::DropTable, Some("shop"), Some("t"));
        assert_eq!(dropped.map(|s| s.table_id), Some(7));
        assert!(maps.tables.contains_key(&TableId::new("other", "t")));
        assert!(!maps.tables.contains_key(&TableId::new("shop", "u")));
        // dropped once: no structure the second time
        assert!(maps
            .after_ddl(SchemaChangeKind::DropTable, Some("shop"), Some("t"))
            .is_none());
        // an ALTER anywhere forgets everything (`ALTER TABLE a RENAME TO b`)
        maps.remember(&t);
        maps.after_ddl(SchemaChangeKind::AlterTable, Some("zzz"), Some("q"));
        assert!(maps.tables.is_empty());
        // a table-level statement with no recognised table forgets everything
        maps.remember(&t);
        maps.after_ddl(SchemaChangeKind::DropTable, Some("shop"), None);
        assert!(maps.tables.is_empty());
        // DROP DATABASE forgets its tables
        maps.remember(&t);
        maps.remember(&table_map_schema("other", "t", 9));
        maps.after_ddl(SchemaChangeKind::DropDatabase, Some("Shop"), None);
        assert_eq!(
            maps.tables.keys().collect::<Vec<_>>(),
            vec![&TableId::new("other", "t")]
        );
        // other statements forget nothing
        maps.after_ddl(SchemaChangeKind::Other, Some("other"), Some("t"));
        assert_eq!(maps.tables.len(), 1);
    }
}
