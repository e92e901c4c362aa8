//! capstan's pure core: positions, changes and pipeline specs. Nothing here touches a socket,
//! a file or an async runtime; everything is unit- and property-tested in isolation.

pub mod change;
pub mod name_pattern;
pub mod position;
pub mod secret_ref;
pub mod snapshot;
