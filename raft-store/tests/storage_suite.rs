//! openraft's storage test suite against the RocksDB stores.

use capstan_raft_store::type_config::StorageError;
use capstan_raft_store::{LogStore, StateMachineStore, Store, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageIOError;
use tempfile::TempDir;

/// Opens a fresh store in a temporary directory that lives as long as the test.
struct TempStoreBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for TempStoreBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = TempDir::new().map_err(|e| StorageIOError::write(&e))?;
        let (log_store, state_machine) =
            Store::open(dir.path()).map_err(|e| StorageIOError::write(&e))?;
        Ok((dir, log_store, state_machine))
    }
}

#[test]
fn rocksdb_stores_pass_the_openraft_suite() {
    Suite::test_all(TempStoreBuilder).unwrap();
}
