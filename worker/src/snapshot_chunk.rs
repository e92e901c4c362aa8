//! The wire form of one chunk of a Raft snapshot (`POST /raft/snapshot`).
//!
//! openraft's `InstallSnapshotRequest` would serialize its bytes as a JSON array of numbers,
//! about 3.5 bytes on the wire per byte of state; here they travel as one base64 string (4
//! bytes per 3), so a [`SNAPSHOT_CHUNK_BYTES`](crate::raft_service::SNAPSHOT_CHUNK_BYTES)
//! chunk stays well inside the Raft port's body limit.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use capstan_raft_store::{NodeId, NodeInfo, TypeConfig};
use openraft::raft::InstallSnapshotRequest;
use openraft::{SnapshotMeta, Vote};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One snapshot chunk as sent between workers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotChunk {
    vote: Vote<NodeId>,
    meta: SnapshotMeta<NodeId, NodeInfo>,
    offset: u64,
    #[serde(serialize_with = "to_base64", deserialize_with = "from_base64")]
    data: Vec<u8>,
    done: bool,
}

impl From<InstallSnapshotRequest<TypeConfig>> for SnapshotChunk {
    fn from(r: InstallSnapshotRequest<TypeConfig>) -> Self {
        SnapshotChunk {
            vote: r.vote,
            meta: r.meta,
            offset: r.offset,
            data: r.data,
            done: r.done,
        }
    }
}

impl From<SnapshotChunk> for InstallSnapshotRequest<TypeConfig> {
    fn from(c: SnapshotChunk) -> Self {
        InstallSnapshotRequest {
            vote: c.vote,
            meta: c.meta,
            offset: c.offset,
            data: c.data,
            done: c.done,
        }
    }
}

fn to_base64<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&STANDARD.encode(data))
}

fn from_base64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    STANDARD
        .decode(text.as_bytes())
        .map_err(|e| serde::de::Error::custom(format!("snapshot data is not base64: {e}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use openraft::{CommittedLeaderId, LogId, StoredMembership};

    fn request(data: Vec<u8>) -> InstallSnapshotRequest<TypeConfig> {
        InstallSnapshotRequest {
            vote: Vote::new_committed(3, 1),
            meta: SnapshotMeta {
                last_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), 42)),
                last_membership: StoredMembership::default(),
                snapshot_id: "3-1-42-7".into(),
            },
            offset: 4096,
            data,
            done: false,
        }
    }

    #[test]
    fn bytes_travel_as_base64_and_round_trip() {
        let data: Vec<u8> = (0..=255u8).cycle().take(3 * 1024).collect();
        let json = serde_json::to_string(&SnapshotChunk::from(request(data.clone()))).unwrap();
        // 3 KiB of state: 4 KiB of base64 plus the metadata, not an array of numbers
        assert!(json.len() < 4 * 1024 + 400, "{} bytes", json.len());
        assert!(!json.contains("[0,1,2"), "{json}");
        let back: InstallSnapshotRequest<TypeConfig> =
            serde_json::from_str::<SnapshotChunk>(&json).unwrap().into();
        assert_eq!(back, request(data));
    }

    #[test]
    fn data_that_is_not_base64_is_refused() {
        let mut v = serde_json::to_value(SnapshotChunk::from(request(vec![1, 2, 3]))).unwrap();
        v["data"] = serde_json::json!([1, 2, 3]);
        assert!(serde_json::from_value::<SnapshotChunk>(v.clone()).is_err());
        v["data"] = serde_json::json!("***");
        let e = serde_json::from_value::<SnapshotChunk>(v).unwrap_err();
        assert!(e.to_string().contains("not base64"), "{e}");
    }
}
