//! rdkafka errors → value-free [`SinkError`]s.
//!
//! Only librdkafka's error *code* survives the mapping: its message strings are not ours to
//! vet, and a failed delivery's `OwnedMessage` carries the record, which must never reach a
//! log or an error.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::SinkError;

/// The code's stable name (`MessageTimedOut`, `ProducerFenced`, …).
fn code_name(code: RDKafkaErrorCode) -> String {
    format!("{code:?}")
}

/// The librdkafka code of an error, if it has one.
fn code_of(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::Transaction(t) => Some(t.code()),
        other => other.rdkafka_error_code(),
    }
}

fn is_fenced(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::Fenced
    )
}

/// A failed delivery. `fatal` is librdkafka's verdict on the producer (`fatal_error()`).
pub(crate) fn delivery_error(e: &KafkaError, fatal: Option<RDKafkaErrorCode>) -> SinkError {
    if let Some(code) = fatal.or_else(|| code_of(e)) {
        if is_fenced(code) {
            return SinkError::ProducerFenced;
        }
    }
    SinkError::DeliveryFailed {
        kafka_code: code_of(e).map_or_else(|| "unknown".to_string(), code_name),
        fatal: fatal.is_some(),
    }
}

/// A failed transactional call (`init_transactions`, `begin`, `commit`, `abort`).
pub(crate) fn transaction_error(e: &KafkaError) -> SinkError {
    let code = code_of(e);
    if code.is_some_and(is_fenced) {
        return SinkError::ProducerFenced;
    }
    let retriable = match e {
        KafkaError::Transaction(t) => !t.is_fatal() && (t.is_retriable() || t.txn_requires_abort()),
        _ => false,
    };
    if let KafkaError::Transaction(t) = e {
        if t.is_fatal() && code == Some(RDKafkaErrorCode::Fatal) {
            // librdkafka reports the underlying fatal cause separately; fencing shows up as
            // the generic `Fatal` code on later calls.
            return SinkError::TransactionFailed {
                kafka_code: code_name(RDKafkaErrorCode::Fatal),
                retriable: false,
            };
        }
    }
    SinkError::TransactionFailed {
        kafka_code: code.map_or_else(|| "unknown".to_string(), code_name),
        retriable,
    }
}

/// Any other client failure (creation, metadata, consumption).
pub(crate) fn client_error(e: &KafkaError) -> SinkError {
    SinkError::Client {
        kafka_code: code_of(e).map_or_else(|| kafka_error_kind(e), code_name),
    }
}

/// A code-free error's variant name (`ClientCreation`, `AdminOpCreation`, …): the identifier
/// before the variant's fields, never the message inside them.
fn kafka_error_kind(e: &KafkaError) -> String {
    let debug = format!("{e:?}");
    let name: String = debug
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    if name.is_empty() {
        "unknown".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_is_recognised() {
        let e = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        assert_eq!(
            delivery_error(&e, None),
            SinkError::DeliveryFailed {
                kafka_code: "MessageTimedOut".into(),
                fatal: false
            }
        );
        assert_eq!(
            delivery_error(&e, Some(RDKafkaErrorCode::ProducerFenced)),
            SinkError::ProducerFenced
        );
    }
}
