//! [`ResumePoint`]: the checkpoint a pipeline resumes from, with the processed position beside
//! it — one type for the pair from the source, through the runner and Raft, to the Kafka
//! offsets record.
//!
//! The two differ only on MariaDB while an XA prepare holds the checkpoint back (ADR-0008): the
//! dump must start before the prepare, yet the transactions after it were already handed out
//! and are skipped on the way. Everywhere else they are equal.
//!
//! The one validity rule: the processed position covers the checkpoint, in the same flavour.

use serde::{Deserialize, Serialize};

use super::position::{Flavor, Position};

/// A checkpoint and the processed position beside it (`processed` ⊇ `checkpoint`).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(try_from = "ResumePointParts", into = "ResumePointParts")]
pub struct ResumePoint {
    checkpoint: Position,
    /// Only when it covers more than the checkpoint.
    processed: Option<Position>,
}

/// A pair that breaks the rule.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidResumePoint {
    /// The processed position is of another flavour than the checkpoint.
    #[error("processed position is {processed}, checkpoint is {checkpoint}")]
    FlavorMismatch {
        /// The checkpoint's flavour.
        checkpoint: Flavor,
        /// The processed position's flavour.
        processed: Flavor,
    },
    /// The processed position leaves out part of the checkpoint.
    #[error("processed position does not cover the checkpoint")]
    ProcessedBehindCheckpoint,
}

impl InvalidResumePoint {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            InvalidResumePoint::FlavorMismatch { .. } => "resume_point_flavor_mismatch",
            InvalidResumePoint::ProcessedBehindCheckpoint => "processed_behind_checkpoint",
        }
    }
}

impl ResumePoint {
    /// A point where nothing was handed out beyond the checkpoint.
    pub fn at(checkpoint: Position) -> Self {
        ResumePoint {
            checkpoint,
            processed: None,
        }
    }

    /// A checkpoint with the processed position beside it (`None`, or equal to the
    /// checkpoint: nothing beyond it), checked against the rule.
    pub fn new(
        checkpoint: Position,
        processed: Option<Position>,
    ) -> Result<Self, InvalidResumePoint> {
        let processed = processed.filter(|p| *p != checkpoint);
        if let Some(p) = &processed {
            if p.flavor() != checkpoint.flavor() {
                return Err(InvalidResumePoint::FlavorMismatch {
                    checkpoint: checkpoint.flavor(),
                    processed: p.flavor(),
                });
            }
            if !checkpoint.is_subset(p) {
                return Err(InvalidResumePoint::ProcessedBehindCheckpoint);
            }
        }
        Ok(ResumePoint {
            checkpoint,
            processed,
        })
    }

    /// Where a restart resumes: every transaction before it is delivered.
    pub fn checkpoint(&self) -> &Position {
        &self.checkpoint
    }

    /// Everything handed out: the processed position, else the checkpoint.
    pub fn processed(&self) -> &Position {
        self.processed.as_ref().unwrap_or(&self.checkpoint)
    }

    /// The processed position when it covers more than the checkpoint (how records and
    /// commands carry it: absent means "the same").
    pub fn processed_beyond(&self) -> Option<&Position> {
        self.processed.as_ref()
    }

    /// The flavour of both positions.
    pub fn flavor(&self) -> Flavor {
        self.checkpoint.flavor()
    }

    /// True when `self` covers everything `other` does: both its checkpoint and its processed
    /// position. Along one pipeline's history each only grows, so the later point covers the
    /// earlier.
    pub fn covers(&self, other: &ResumePoint) -> bool {
        other.checkpoint.is_subset(&self.checkpoint)
            && other.processed().is_subset(self.processed())
    }

    /// The checkpoint and the processed position when beyond it.
    pub fn into_parts(self) -> (Position, Option<Position>) {
        (self.checkpoint, self.processed)
    }
}

/// The wire shape: `{"position": …, "processed": …}`, `processed` absent when equal.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumePointParts {
    position: Position,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    processed: Option<Position>,
}

impl TryFrom<ResumePointParts> for ResumePoint {
    type Error = InvalidResumePoint;

    fn try_from(parts: ResumePointParts) -> Result<Self, Self::Error> {
        ResumePoint::new(parts.position, parts.processed)
    }
}

impl From<ResumePoint> for ResumePointParts {
    fn from(point: ResumePoint) -> Self {
        ResumePointParts {
            position: point.checkpoint,
            processed: point.processed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maria(text: &str) -> Position {
        Position::parse(Flavor::Mariadb, text).unwrap()
    }

    #[test]
    fn processed_must_cover_the_checkpoint_in_its_flavour() {
        // held back in one domain, and a domain the checkpoint left out: valid
        let p = ResumePoint::new(maria("0-1-30"), Some(maria("0-1-40,1-2-5"))).unwrap();
        assert_eq!(p.checkpoint(), &maria("0-1-30"));
        assert_eq!(p.processed(), &maria("0-1-40,1-2-5"));
        // behind in a domain, or missing a domain of the checkpoint
        assert_eq!(
            ResumePoint::new(maria("0-1-30"), Some(maria("0-1-29"))),
            Err(InvalidResumePoint::ProcessedBehindCheckpoint)
        );
        assert_eq!(
            ResumePoint::new(maria("0-1-30,1-2-5"), Some(maria("0-1-40"))),
            Err(InvalidResumePoint::ProcessedBehindCheckpoint)
        );
        let mysql = Position::empty(Flavor::Mysql);
        let err = ResumePoint::new(maria("0-1-30"), Some(mysql)).unwrap_err();
        assert_eq!(err.code(), "resume_point_flavor_mismatch");
        assert_eq!(
            err.to_string(),
            "processed position is mysql, checkpoint is mariadb"
        );
    }

    #[test]
    fn an_equal_processed_position_is_not_kept() {
        let p = ResumePoint::new(maria("0-1-30"), Some(maria("0-1-30"))).unwrap();
        assert_eq!(p, ResumePoint::at(maria("0-1-30")));
        assert_eq!(p.processed_beyond(), None);
        assert_eq!(p.processed(), &maria("0-1-30"));
    }

    #[test]
    fn covers_needs_both_positions() {
        let earlier = ResumePoint::new(maria("0-1-30"), Some(maria("0-1-40"))).unwrap();
        let later = ResumePoint::new(maria("0-1-35"), Some(maria("0-1-50"))).unwrap();
        assert!(later.covers(&earlier));
        assert!(!earlier.covers(&later));
        // the checkpoint moved on, the processed position did not reach the earlier one's
        let odd = ResumePoint::at(maria("0-1-35"));
        assert!(!odd.covers(&earlier));
        assert!(earlier.covers(&earlier));
    }

    #[test]
    fn the_wire_shape_is_position_and_processed() {
        let p = ResumePoint::new(maria("0-1-30"), Some(maria("0-1-40"))).unwrap();
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(
            json,
            r#"{"position":{"flavor":"mariadb","gtids":"0-1-30"},"processed":{"flavor":"mariadb","gtids":"0-1-40"}}"#
        );
        assert_eq!(serde_json::from_str::<ResumePoint>(&json).unwrap(), p);
        let plain = serde_json::to_string(&ResumePoint::at(maria("0-1-30"))).unwrap();
        assert_eq!(
            plain,
            r#"{"position":{"flavor":"mariadb","gtids":"0-1-30"}}"#
        );
        // the rule holds on the way in too
        let bad = r#"{"position":{"flavor":"mariadb","gtids":"0-1-30"},"processed":{"flavor":"mariadb","gtids":"0-1-20"}}"#;
        let err = serde_json::from_str::<ResumePoint>(bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("processed position does not cover the checkpoint"),
            "{err}"
        );
    }
}
