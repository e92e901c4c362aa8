//! capstan raft store
