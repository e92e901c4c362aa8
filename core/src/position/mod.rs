//! Positions: MySQL GTID sets, MariaDB GTID positions, and the [`Position`] that carries
//! either. See `docs/adr/0001-position-model.md`.

mod gtid_set;
mod interval_list;
mod mariadb_gtid;
mod parse_error;
#[allow(clippy::module_inception)]
mod position;
mod resume_point;
mod sid;

pub use gtid_set::{Gtid, GtidSet, MAX_GNO};
pub use interval_list::Interval;
pub use mariadb_gtid::{Advance, MariadbGtid, MariadbGtidPosition};
pub use parse_error::{ParseError, ParseErrorKind};
pub use position::{Flavor, FlavorMismatch, Position};
pub use resume_point::{InvalidResumePoint, ResumePoint};
pub use sid::{Sid, Tag, Uuid};

#[cfg(test)]
mod proptests;
