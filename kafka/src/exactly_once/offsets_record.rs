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
                (
                    HEADER_PIPELINE.to_string(),
                    self.pipeline.as_bytes().to_vec(),
                ),
                (
                    HEADER_EPOCH.to_string(),
                    self.epoch.to_string().into_bytes(),
                ),
            ],
            timestamp_ms: None,
        })
    }

    /// The last offsets record of `pipeline` among `records` (a whole offsets topic read with
    /// read_committed, in partition/offset order). A tombstone for the pipeline resets it.
    pub fn latest(
        pipeline: &str,
        records: &[ConsumedRecord],
    ) -> Result<Option<OffsetsRecord>, SinkError> {
        let Some(last) = records
            .iter()
            .rev()
            .find(|r| r.key.as_deref() == Some(pipeline.as_bytes()))
        else {
            return Ok(None);
        };
        let Some(value) = &last.value else {
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
            headers: r.headers.clone(),
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
            },
        };
        let a1 = rec("a", "0-1-5");
        let b1 = rec("b", "0-1-9");
        let a2 = rec("a", "0-1-7");
        let log: Vec<ConsumedRecord> = [&a1, &b1, &a2]
            .iter()
            .enumerate()
            .map(|(i, r)| consumed(&r.to_record("capstan.offsets").unwrap(), i as i64))
            .collect();
        assert_eq!(OffsetsRecord::latest("a", &log).unwrap(), Some(a2));
        assert_eq!(OffsetsRecord::latest("b", &log).unwrap(), Some(b1));
        assert_eq!(OffsetsRecord::latest("c", &log).unwrap(), None);
        let mut garbage = log[0].clone();
        garbage.value = Some(b"{".to_vec());
        assert_eq!(
            OffsetsRecord::latest("a", &[garbage]).unwrap_err().code(),
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
        let record = OffsetsRecord::latest("a", &[stored]).unwrap().unwrap();
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
            OffsetsRecord::latest("a", &[consumed(&kafka, 1)]).unwrap(),
            Some(held)
        );
    }
}
