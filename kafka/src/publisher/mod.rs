//! Publishing records: the [`Publisher`] trait the pipeline runner calls, and
//! [`KafkaPublisher`], its at-least-once rdkafka implementation.

mod kafka_error_map;
mod kafka_publisher;
#[allow(clippy::module_inception)]
mod publisher;
mod topic_admin_client;

pub(crate) use kafka_error_map::{client_error, transaction_error};
pub(crate) use kafka_publisher::{fatal_code, send_all};
pub use kafka_publisher::{Acknowledgements, Fence, KafkaPublisher};
pub use publisher::Publisher;
pub use topic_admin_client::TopicAdminClient;
