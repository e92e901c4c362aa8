//! The sink settings of one pipeline: serde structs with `deny_unknown_fields`, checked by
//! `validate()` without any I/O into the types the publisher and record builder use.

mod event_format;
mod message_key_columns;
mod producer_overrides;
mod producer_settings;
mod schema_registry_config;
mod sink_config;
mod snapshot_marker;
mod topic_settings;

pub use event_format::EventFormat;
pub use message_key_columns::MessageKeyColumns;
pub use producer_overrides::{is_secret_property, ProducerOverrides, REDACTED};
pub use producer_settings::{validate_overrides, ProducerSettings};
pub use schema_registry_config::{SchemaRegistryConfig, SchemaRegistrySettings};
pub use sink_config::{CheckedSinkConfig, DeliveryMode, SinkConfig};
pub use snapshot_marker::{SnapshotMarker, SNAPSHOT_MARKER_TOPIC_SUFFIX};
pub use topic_settings::TopicSettings;
