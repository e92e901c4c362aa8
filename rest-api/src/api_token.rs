//! The bearer tokens that guard the API: the token for mutating requests (POST, PUT, DELETE),
//! and an optional read token for everything else but the open paths (`/health` for probes,
//! the status page's shell at `/`, and `/openapi.json`). The write token is accepted for reads
//! too.
//!
//! Tokens are read once at start, compared in constant time, and never shown: `Debug` prints
//! `ApiToken(<redacted>)` and no error or log carries one.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

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
        bool::from(self.0.as_bytes().ct_eq(presented))
    }
}

/// Who may call what: the write token guards mutating requests, the read token every other
/// request outside the open paths. No token: open.
#[derive(Clone, Debug, Default)]
pub struct ApiAccess {
    /// Needed for POST, PUT and DELETE (and accepted for reads).
    pub token: Option<ApiToken>,
    /// Needed for reads other than `/health`, `/` and `/openapi.json`.
    pub read_token: Option<ApiToken>,
}

impl From<Option<ApiToken>> for ApiAccess {
    fn from(token: Option<ApiToken>) -> Self {
        ApiAccess {
            token,
            read_token: None,
        }
    }
}

/// Paths every client may read whatever the tokens: liveness probes, the status page's static
/// shell (its data comes from guarded calls) and the API's description.
pub(crate) const OPEN_PATHS: [&str; 3] = ["/health", "/", "/openapi.json"];

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

/// True for methods that change something.
fn is_mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Middleware: a mutating request must carry `Authorization: Bearer <token>` when a token is
/// configured, and a read outside [`OPEN_PATHS`] the read token or the write token when a read
/// token is configured; 401 `unauthorized` otherwise.
pub(crate) async fn require_token(
    State(access): State<ApiAccess>,
    request: Request,
    next: Next,
) -> Response {
    let accepted: Vec<&ApiToken> = if is_mutating(request.method()) {
        access.token.iter().collect()
    } else if access.read_token.is_some() && !OPEN_PATHS.contains(&request.uri().path()) {
        access
            .read_token
            .iter()
            .chain(access.token.iter())
            .collect()
    } else {
        Vec::new()
    };
    if accepted.is_empty() {
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
        Some(p) if accepted.iter().any(|t| t.matches(p.as_bytes())) => next.run(request).await,
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
