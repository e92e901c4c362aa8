//! The bearer token that guards mutating requests (POST, PUT, DELETE). Reads stay open.
//!
//! The token is read once at start, compared in constant time, and never shown: `Debug`
//! prints `ApiToken(<redacted>)` and no error or log carries it.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;

/// The API's bearer token.
#[derive(Clone)]
pub struct ApiToken(Arc<str>);

/// Why the token file could not be used. Names the file, never its contents.
#[derive(Debug, thiserror::Error)]
pub enum ApiTokenError {
    /// The file could not be read.
    #[error("cannot read the api token file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The file holds no token, or one with characters a header cannot carry.
    #[error("the api token file {path} must hold one token of visible ascii characters")]
    Invalid {
        /// The file.
        path: String,
    },
}

impl ApiTokenError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiTokenError::Unreadable { .. } => "api_token_unreadable",
            ApiTokenError::Invalid { .. } => "api_token_invalid",
        }
    }
}

impl ApiToken {
    /// A token from its text (surrounding whitespace removed); `None` when empty or when it
    /// holds characters other than visible ASCII.
    pub fn new(text: &str) -> Option<Self> {
        let token = text.trim();
        let ok = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
        ok.then(|| ApiToken(Arc::from(token)))
    }

    /// Reads the token from `path` (one line; surrounding whitespace ignored).
    pub fn from_file(path: &Path) -> Result<Self, ApiTokenError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ApiTokenError::Unreadable {
            path: shown.clone(),
            reason: e.kind().to_string(),
        })?;
        Self::new(&text).ok_or(ApiTokenError::Invalid { path: shown })
    }

    /// The secret, for a client that must present it (e.g. a forwarded request). Never log it.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }

    /// True when `presented` equals the token. Takes the same time for every presented value
    /// of a given length, whatever the position of the first difference.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.0.as_bytes(), presented)
    }
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// Compares without an early exit. The length is not secret-dependent timing worth hiding
/// (a token's length is no help in guessing it), but the loop still runs over the longer input.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let len = expected.len().max(presented.len());
    let mut diff = u8::from(expected.len() != presented.len());
    for i in 0..len {
        let a = expected.get(i).copied().unwrap_or(0);
        let b = presented.get(i).copied().unwrap_or(0);
        diff |= a ^ b;
    }
    std::hint::black_box(diff) == 0
}

/// True for methods that change something.
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Middleware: a mutating request must carry `Authorization: Bearer <token>` when a token is
/// configured; 401 `unauthorized` otherwise.
pub(crate) async fn require_token(
    State(token): State<Option<ApiToken>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token else {
        return next.run(request).await;
    };
    if !is_mutating(request.method()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
    match presented {
        Some(p) if token.matches(p.as_bytes()) => next.run(request).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly_and_never_show() {
        let t = ApiToken::new(" s3cret-token\n").unwrap();
        assert!(t.matches(b"s3cret-token"));
        assert!(!t.matches(b"s3cret-toke"));
        assert!(!t.matches(b"s3cret-tokenn"));
        assert!(!t.matches(b"S3cret-token"));
        assert!(!t.matches(b""));
        assert_eq!(format!("{t:?}"), "ApiToken(<redacted>)");
        assert!(ApiToken::new("  \n").is_none());
        assert!(ApiToken::new("two words").is_none());
    }

    #[test]
    fn a_missing_file_is_named_without_contents() {
        let e = ApiToken::from_file(Path::new("/nonexistent/capstan-token")).unwrap_err();
        assert_eq!(e.code(), "api_token_unreadable");
        assert!(e.to_string().contains("/nonexistent/capstan-token"));
    }
}
