//! Publishing records: the [`Publisher`] trait the pipeline runner calls, and
//! [`KafkaPublisher`], its at-least-once rdkafka implementation.

mod acked_producer;
mod acknowledgements;
mod batch_acks;
mod kafka_error_map;
mod kafka_publisher;
#[allow(clippy::module_inception)]
mod publisher;
mod topic_admin_client;

pub(crate) use acked_producer::AckedProducer;
pub use acked_producer::Fence;
pub use acknowledgements::Acknowledgements;
pub(crate) use batch_acks::AckContext;
pub(crate) use kafka_error_map::{client_error, transaction_error};
pub use kafka_publisher::KafkaPublisher;
pub use publisher::Publisher;
pub use topic_admin_client::TopicAdminClient;
