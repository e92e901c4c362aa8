//! capstan integration test support
