//! The API's error body, `{error_code, message}` (plus `field` for bad input), and its HTTP
//! status.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

/// An error the API returns. Messages are value-free: they name fields and reasons, never a
/// row value or a secret.
#[derive(
    Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, utoipa::ToSchema,
)]
#[error("{error_code}: {message}")]
pub struct ApiError {
    /// A stable snake_case code.
    pub error_code: String,
    /// What went wrong, for people.
    pub message: String,
    /// For bad input: the offending field as a dotted path (`source.port`), or `(root)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The HTTP status (not serialised).
    #[serde(skip, default = "default_status")]
    #[schema(ignore)]
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
            field: None,
            status: status.as_u16(),
        }
    }

    /// The same error, naming the field it is about.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// 400: the request is malformed or a field is invalid.
    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 400 about one field: `field \`name\`: message`.
    pub fn invalid_field(code: &str, field: &str, message: impl std::fmt::Display) -> Self {
        Self::bad_request(code, format!("field `{field}`: {message}")).with_field(field)
    }

    /// 401: a mutating request without the configured bearer token.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this request needs the api bearer token (authorization: bearer <token>)",
        )
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

    /// The HTTP status.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status_code();
        if status == StatusCode::UNAUTHORIZED {
            return (
                status,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(self),
            )
                .into_response();
        }
        (status, axum::Json(self)).into_response()
    }
}
