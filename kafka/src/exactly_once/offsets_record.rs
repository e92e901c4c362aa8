//! The offsets record: a pipeline's checkpoint, committed in the same Kafka transaction as the
//! rows it covers, to a compacted topic keyed by pipeline name.

use serde::{Deserialize, Serialize};

use super::checkpoint::Checkpoint;
use crate::record::{KafkaRecord, HEADER_EPOCH, HEADER_PIPELINE};
use crate::topic_reader::ConsumedRecord;
use crate::SinkError;

/// The current offsets record format.
pub const OFFSETS_RECORD_VERSION: u32 = 1;

/// The value of an offsets record (JSON).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffsetsRecord {
    /// Format version ([`OFFSETS_RECORD_VERSION`]).
    pub version: u32,
    /// The pipeline.
    pub pipeline: String,
    /// The owner epoch that committed it.
    pub epoch: u64,
    /// The checkpoint covering every row committed with (and before) this record.
    pub checkpoint: Checkpoint,
    /// The life of the pipeline that wrote it (Raft's incarnation id, new at every creation
    /// and offsets reset); absent in records of pipelines created before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
}

impl OffsetsRecord {
    /// The Kafka record for `topic`: key = pipeline name, value = JSON.
    pub fn to_record(&self, topic: &str) -> Result<KafkaRecord, SinkError> {
        let value = serde_json::to_vec(self).map_err(|_| SinkError::OffsetsRecordInvalid {
            pipeline: self.pipeline.clone(),
        })?;
        Ok(KafkaRecord {
            topic: topic.to_string(),
            key: Some(self.pipeline.as_bytes().to_vec()),
            value: Some(value),
            headers: vec![
                (HEADER_PIPELINE.into(), self.pipeline.as_bytes().to_vec()),
                (HEADER_EPOCH.into(), self.epoch.to_string().into_bytes()),
            ],
            timestamp_ms: None,
            registry: None,
        })
    }

    /// The offsets record of `pipeline` in `last`, the newest committed record with its key
    /// (see `TransactionalLog::latest_committed`). A tombstone, or none, is no record.
    pub fn parse_latest(
        pipeline: &str,
        last: Option<&ConsumedRecord>,
    ) -> Result<Option<OffsetsRecord>, SinkError> {
        let Some(value) = last.and_then(|r| r.value.as_ref()) else {
            return Ok(None);
        };
        let invalid = || SinkError::OffsetsRecordInvalid {
            pipeline: pipeline.to_string(),
        };
        let record: OffsetsRecord = serde_json::from_slice(value).map_err(|_| invalid())?;
        if record.version != OFFSETS_RECORD_VERSION || record.pipeline != pipeline {
            return Err(invalid());
        }
        Ok(Some(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exactly_once::SnapshotProgress;
    use capstan_core::position::{Flavor, Position};

    fn consumed(r: &KafkaRecord, offset: i64) -> ConsumedRecord {
        ConsumedRecord {
            topic: r.topic.clone(),
            partition: 0,
            offset,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r.headers_owned(),
        }
    }

    #[test]
    fn latest_per_pipeline_round_trips() {
        let rec = |pipeline: &str, text: &str| OffsetsRecord {
            version: OFFSETS_RECORD_VERSION,
            pipeline: pipeline.into(),
            epoch: 3,
            checkpoint: Checkpoint {
                position: Position::parse(Flavor::Mariadb, text).unwrap(),
                processed: None,
                snapshot: SnapshotProgress::default(),
                within: None,
            },
            incarnation: Some("i1".into()),
        };
        let a1 = rec("a", "0-1-5");
        let b1 = rec("b", "0-1-9");
        let a2 = rec("a", "0-1-7");
        let as_consumed = |r: &OffsetsRecord| consumed(&r.to_record("capstan.offsets").unwrap(), 0);
        let parse = OffsetsRecord::parse_latest;
        assert_eq!(
            parse("a", Some(&as_consumed(&a2))).unwrap(),
            Some(a2.clone())
        );
        assert_eq!(
            parse("b", Some(&as_consumed(&b1))).unwrap(),
            Some(b1.clone())
        );
        assert_eq!(parse("c", None).unwrap(), None);
        // another pipeline's record under this key is corrupt, not someone else's history
        assert_eq!(
            parse("a", Some(&as_consumed(&b1))).unwrap_err().code(),
            "offsets_record_invalid"
        );
        let mut tombstone = as_consumed(&a1);
        tombstone.value = None;
        assert_eq!(parse("a", Some(&tombstone)).unwrap(), None);
        let mut garbage = as_consumed(&a1);
        garbage.value = Some(b"{".to_vec());
        assert_eq!(
            parse("a", Some(&garbage)).unwrap_err().code(),
            "offsets_record_invalid"
        );
    }

    #[test]
    fn a_record_without_processed_reads_as_before_and_one_with_it_round_trips() {
        // a record as written before the processed position existed
        let old = br#"{"version":1,"pipeline":"a","epoch":3,"checkpoint":{"position":{"flavor":"mariadb","gtids":"0-1-5"},"snapshot":{"chunks_committed":0,"tables":{}}}}"#;
        let stored = ConsumedRecord {
            topic: "capstan.offsets".into(),
            partition: 0,
            offset: 0,
            key: Some(b"a".to_vec()),
            value: Some(old.to_vec()),
            headers: Vec::new(),
        };
        let record = OffsetsRecord::parse_latest("a", Some(&stored))
            .unwrap()
            .unwrap();
        let five = Position::parse(Flavor::Mariadb, "0-1-5").unwrap();
        assert_eq!(record.checkpoint.processed, None);
        assert_eq!(record.checkpoint.processed(), &five);
        // written again without a processed position: the same bytes as before
        let again = record.to_record("capstan.offsets").unwrap();
        assert_eq!(again.value.as_deref(), Some(&old[..]));
        // with one: named in the record, and read back
        let mut held = record;
        held.checkpoint.processed = Some(Position::parse(Flavor::Mariadb, "0-1-9").unwrap());
        let kafka = held.to_record("capstan.offsets").unwrap();
        let text = String::from_utf8(kafka.value.clone().unwrap()).unwrap();
        assert!(
            text.contains(r#""processed":{"flavor":"mariadb","gtids":"0-1-9"}"#),
            "{text}"
        );
        assert_eq!(
            OffsetsRecord::parse_latest("a", Some(&consumed(&kafka, 1))).unwrap(),
            Some(held)
        );
    }
}
