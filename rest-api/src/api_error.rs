//! The API's error body, `{error_code, message}`, and its HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// An error the API returns. Messages are value-free: they name fields and reasons, never a
/// row value or a secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{error_code}: {message}")]
pub struct ApiError {
    /// A stable snake_case code.
    pub error_code: String,
    /// What went wrong, for people.
    pub message: String,
    /// The HTTP status (not serialised).
    #[serde(skip, default = "default_status")]
    pub status: u16,
}

fn default_status() -> u16 {
    500
}

impl ApiError {
    /// An error with an explicit status.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        ApiError {
            error_code: code.to_string(),
            message: message.into(),
            status: status.as_u16(),
        }
    }

    /// 400: the request is malformed or a field is invalid.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404: no such thing.
    pub fn not_found(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 409: conflicts with the current state.
    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// 503: no quorum or no leader right now; retry later.
    pub fn unavailable(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, code, message)
    }

    /// 500: an internal failure.
    pub fn internal(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}
