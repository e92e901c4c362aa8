//! The status page at `GET /`: one static HTML file (inline CSS and script, no external
//! resource), embedded in the binary, that polls this node's JSON API once a second and shows
//! the cluster, every pipeline with its state, lag and snapshot progress, and a small
//! lag/throughput chart. It reads only what any `GET` reads; it is open like every read.

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("../assets/status.html");

/// The status page.
#[utoipa::path(get, path = "/", tag = "cluster",
    responses((status = 200, description = "the status page", content_type = "text/html", body = String)))]
pub(crate) async fn status_page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
}
