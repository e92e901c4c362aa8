//! capstan connectors

pub mod mysql;
