//! [`DevCluster`]: a mock Kafka cluster owned by a dedicated thread.
//!
//! rdkafka's `MockCluster` is not `Send` (it wraps a raw pointer), so a dedicated thread owns
//! it and serves requests over a channel; the handle is `Send + Sync` and can live in any
//! task. Dropping the handle stops the thread and destroys the cluster.

use std::fmt;
use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;

use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

use crate::SinkError;

enum Request {
    CreateTopic {
        topic: String,
        partitions: i32,
        replication: i32,
        reply: mpsc::Sender<Result<(), SinkError>>,
    },
    InjectErrors {
        api: RDKafkaApiKey,
        errors: Vec<RDKafkaRespErr>,
        reply: mpsc::Sender<Result<(), SinkError>>,
    },
    TopicError {
        topic: String,
        error: RDKafkaRespErr,
        reply: mpsc::Sender<Result<(), SinkError>>,
    },
    Stop,
}

/// A running in-process mock cluster.
pub struct DevCluster {
    bootstrap: String,
    requests: Mutex<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for DevCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevCluster")
            .field("bootstrap", &self.bootstrap)
            .finish()
    }
}

fn dev_error(reason: impl Into<String>) -> SinkError {
    SinkError::DevCluster {
        reason: reason.into(),
    }
}

fn serve(
    cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    requests: mpsc::Receiver<Request>,
) {
    while let Ok(request) = requests.recv() {
        match request {
            Request::CreateTopic {
                topic,
                partitions,
                replication,
                reply,
            } => {
                let r = cluster
                    .create_topic(&topic, partitions, replication)
                    .map_err(|e| dev_error(format!("create topic {topic}: {e}")));
                let _ = reply.send(r);
            }
            Request::InjectErrors { api, errors, reply } => {
                cluster.request_errors(api, &errors);
                let _ = reply.send(Ok(()));
            }
            Request::TopicError {
                topic,
                error,
                reply,
            } => {
                let r = cluster
                    .topic_error(&topic, error)
                    .map_err(|e| dev_error(format!("topic error {topic}: {e}")));
                let _ = reply.send(r);
            }
            Request::Stop => break,
        }
    }
}

impl DevCluster {
    /// Starts a mock cluster of `brokers` brokers (1 or more) listening on localhost.
    pub fn start(brokers: i32) -> Result<Self, SinkError> {
        if brokers < 1 {
            return Err(dev_error("at least one broker is needed"));
        }
        let (started_tx, started_rx) = mpsc::channel::<Result<String, SinkError>>();
        let (req_tx, req_rx) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("capstan-dev-kafka".to_string())
            .spawn(move || match MockCluster::new(brokers) {
                Ok(cluster) => {
                    let _ = started_tx.send(Ok(cluster.bootstrap_servers()));
                    serve(cluster, req_rx);
                }
                Err(e) => {
                    let _ = started_tx.send(Err(dev_error(format!("start: {e}"))));
                }
            })
            .map_err(|_| dev_error("could not spawn the cluster thread"))?;
        let bootstrap = started_rx
            .recv()
            .map_err(|_| dev_error("cluster thread exited"))??;
        Ok(DevCluster {
            bootstrap,
            requests: Mutex::new(req_tx),
            thread: Some(thread),
        })
    }

    /// The `bootstrap.servers` list of the cluster.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    fn call(
        &self,
        make: impl FnOnce(mpsc::Sender<Result<(), SinkError>>) -> Request,
    ) -> Result<(), SinkError> {
        let (reply_tx, reply_rx) = mpsc::channel();
        self.requests
            .lock()
            .map_err(|_| dev_error("cluster handle poisoned"))?
            .send(make(reply_tx))
            .map_err(|_| dev_error("cluster thread exited"))?;
        reply_rx
            .recv()
            .map_err(|_| dev_error("cluster thread exited"))?
    }

    /// Creates `topic` (topics are also auto-created on first produce, with the default
    /// partition count).
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
    ) -> Result<(), SinkError> {
        self.call(|reply| Request::CreateTopic {
            topic: topic.to_string(),
            partitions,
            replication,
            reply,
        })
    }

    /// Makes the next requests of kind `api` fail with `errors`, one error per request, in
    /// order.
    pub fn inject_request_errors(
        &self,
        api: RDKafkaApiKey,
        errors: &[RDKafkaRespErr],
    ) -> Result<(), SinkError> {
        self.call(|reply| Request::InjectErrors {
            api,
            errors: errors.to_vec(),
            reply,
        })
    }
}

impl DevCluster {
    /// Makes metadata answers carry `error` for `topic` (a successful Metadata response whose
    /// topic entry has an error code: leader not available, not authorised, …), until set to
    /// `RD_KAFKA_RESP_ERR_NO_ERROR` again.
    pub fn inject_topic_error(&self, topic: &str, error: RDKafkaRespErr) -> Result<(), SinkError> {
        self.call(|reply| Request::TopicError {
            topic: topic.to_string(),
            error,
            reply,
        })
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        if let Ok(tx) = self.requests.lock() {
            let _ = tx.send(Request::Stop);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `capstan dev kafka --brokers N`: starts a mock cluster, writes its bootstrap address as
/// one line to `out`, and keeps it running until Ctrl-C (or the process ends).
pub async fn run_dev_cluster(
    brokers: i32,
    out: &mut (dyn std::io::Write + Send),
) -> Result<(), SinkError> {
    let cluster = DevCluster::start(brokers)?;
    writeln!(out, "{}", cluster.bootstrap_servers())
        .and_then(|()| out.flush())
        .map_err(|_| dev_error("could not write the bootstrap address"))?;
    tracing::info!(bootstrap = %cluster.bootstrap_servers(), brokers, "dev kafka cluster running");
    tokio::signal::ctrl_c()
        .await
        .map_err(|_| dev_error("could not wait for ctrl-c"))?;
    drop(cluster);
    Ok(())
}
