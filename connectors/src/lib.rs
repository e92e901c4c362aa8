//! capstan connectors
