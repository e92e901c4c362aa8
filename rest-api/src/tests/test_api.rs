//! The router driven without a socket: requests in, status, content type and body out.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::fake_plane::FakePlane;
use crate::{router, ApiAccess, ApiToken};

pub(super) const TOKEN: &str = "tok-3f9a7c-secret";
pub(super) const READ_TOKEN: &str = "read-7c1e-secret";

pub(super) struct Api {
    pub(super) plane: Arc<FakePlane>,
    pub(super) token: Option<ApiToken>,
    pub(super) read_token: Option<ApiToken>,
}

pub(super) struct Reply {
    pub(super) status: StatusCode,
    pub(super) content_type: String,
    pub(super) text: String,
}

impl Reply {
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

impl Api {
    pub(super) fn open() -> Self {
        Api {
            plane: Arc::new(FakePlane::default()),
            token: None,
            read_token: None,
        }
    }

    pub(super) fn guarded() -> Self {
        Api {
            plane: Arc::new(FakePlane::default()),
            token: ApiToken::new(TOKEN),
            read_token: None,
        }
    }

    pub(super) fn read_guarded() -> Self {
        Api {
            read_token: ApiToken::new(READ_TOKEN),
            ..Api::guarded()
        }
    }

    pub(super) fn router(&self) -> axum::Router {
        router(
            self.plane.clone(),
            ApiAccess {
                token: self.token.clone(),
                read_token: self.read_token.clone(),
            },
        )
    }

    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&str>,
        bearer: Option<&str>,
    ) -> Reply {
        let app = self.router();
        let mut req = Request::builder().method(method).uri(path);
        if let Some(b) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        let req = req
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        Reply {
            status,
            content_type,
            text: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    pub(super) async fn send(&self, method: Method, path: &str, body: Option<&str>) -> Reply {
        let bearer = self.token.as_ref().map(|_| TOKEN);
        self.call(method, path, body, bearer).await
    }

    pub(super) async fn get(&self, path: &str) -> Reply {
        self.call(Method::GET, path, None, None).await
    }
}

pub(super) fn definition(name: &str) -> String {
    json!({"name": name, "source": {"host": "h", "password": "hunter2-pw"}}).to_string()
}

pub(super) fn assert_error(r: &Reply, status: StatusCode, code: &str) {
    assert_eq!(r.status, status, "{}", r.text);
    let v = r.json();
    assert_eq!(v["error_code"], code, "{}", r.text);
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        r.text
    );
}
