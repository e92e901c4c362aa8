//! Router tests over a fake control plane: routing, status codes, error bodies and the bearer
//! token, without sockets or a cluster.

mod fake_plane;
mod router_tests;
mod test_api;
mod validate_tests;
