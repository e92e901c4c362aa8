//! Publishing records: the [`Publisher`] trait the pipeline runner calls, and
//! [`KafkaPublisher`], its at-least-once rdkafka implementation.

mod kafka_error_map;
mod kafka_publisher;
#[allow(clippy::module_inception)]
mod publisher;

pub(crate) use kafka_error_map::client_error;
pub use kafka_publisher::KafkaPublisher;
pub use publisher::Publisher;
