//! capstan rest api
