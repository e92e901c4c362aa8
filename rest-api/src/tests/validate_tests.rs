//! `POST /pipelines/validate`: the errors of a create, nothing written; and the pipeline
//! named `validate`, whose path it shares.

use axum::http::{Method, StatusCode};
use serde_json::json;

use super::test_api::{assert_error, definition, Api, READ_TOKEN, TOKEN};

#[tokio::test]
async fn a_valid_definition_is_answered_and_nothing_is_written() {
    let api = Api::open();
    let r = api
        .send(
            Method::POST,
            "/pipelines/validate",
            Some(&definition("orders")),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json(), json!({"valid": true, "name": "orders"}));
    assert!(!r.text.contains("hunter2-pw"), "{}", r.text);
    assert_eq!(api.get("/pipelines").await.json(), json!([]));
}

#[tokio::test]
async fn an_invalid_definition_gets_the_error_a_create_would() {
    let api = Api::open();
    for (body, status, code, field) in [
        (
            json!({"source": {"password": "hunter2-pw"}}).to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_pipeline",
            "name",
        ),
        (
            json!({"name": "x", "bogus": "hunter2-pw"}).to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_pipeline",
            "bogus",
        ),
        (
            "{\"name\": ".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "(root)",
        ),
        (
            "  ".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "(root)",
        ),
    ] {
        let dry = api
            .send(Method::POST, "/pipelines/validate", Some(&body))
            .await;
        let create = api.send(Method::POST, "/pipelines", Some(&body)).await;
        assert_error(&dry, status, code);
        assert_eq!(dry.json()["field"], field, "{}", dry.text);
        assert_eq!(dry.status, create.status, "{body}");
        assert_eq!(dry.json(), create.json(), "{body}");
        assert!(!dry.text.contains("hunter2-pw"), "{}", dry.text);
    }
    assert_eq!(api.get("/pipelines").await.json(), json!([]));
}

#[tokio::test]
async fn validation_needs_the_token_like_every_post() {
    let api = Api::guarded();
    let r = api
        .call(
            Method::POST,
            "/pipelines/validate",
            Some(&definition("orders")),
            None,
        )
        .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
    let r = api
        .send(
            Method::POST,
            "/pipelines/validate",
            Some(&definition("orders")),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // the read token writes nothing, and a dry run is a write like any POST
    let api = Api::read_guarded();
    let body = definition("orders");
    let r = api
        .call(
            Method::POST,
            "/pipelines/validate",
            Some(&body),
            Some(READ_TOKEN),
        )
        .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
    let r = api
        .call(
            Method::POST,
            "/pipelines/validate",
            Some(&body),
            Some(TOKEN),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // and the pipeline named `validate` is read with the read token
    let r = api
        .call(Method::GET, "/pipelines/validate", None, Some(READ_TOKEN))
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
    let r = api.get("/pipelines/validate").await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn a_pipeline_named_validate_is_still_reachable() {
    let api = Api::open();
    let r = api
        .send(Method::POST, "/pipelines", Some(&definition("validate")))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let r = api.get("/pipelines/validate").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["name"], "validate");
    assert_eq!(r.json()["config"]["source"]["password"], "<redacted>");
    for path in [
        "/pipelines/validate/config",
        "/pipelines/validate/status",
        "/pipelines/validate/offsets",
    ] {
        let r = api.get(path).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
    }
    let r = api
        .send(Method::PUT, "/pipelines/validate/resume", None)
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let r = api.send(Method::PATCH, "/pipelines/validate", None).await;
    assert_error(&r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    let r = api.send(Method::DELETE, "/pipelines/validate", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    let r = api.get("/pipelines/validate").await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
}

#[tokio::test]
async fn the_openapi_document_lists_every_answer() {
    let doc = Api::guarded().get("/openapi.json").await.json();
    let item = &doc["paths"]["/pipelines/validate"];
    let post = &item["post"];
    for status in ["200", "400", "401", "413"] {
        assert!(post["responses"][status].is_object(), "{status}: {post}");
    }
    assert!(post["security"].is_array(), "{post}");
    assert!(item["get"]["responses"]["404"].is_object(), "{item}");
    assert!(item["delete"]["responses"]["204"].is_object(), "{item}");
    assert!(doc["components"]["schemas"]["PipelineValidation"].is_object());
}
