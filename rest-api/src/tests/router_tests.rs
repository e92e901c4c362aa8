use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::test_api::{assert_error, definition, Api, READ_TOKEN, TOKEN};

#[tokio::test]
async fn pipelines_are_created_listed_read_and_deleted() {
    let api = Api::open();
    assert_eq!(api.get("/pipelines").await.json(), json!([]));
    let r = api
        .send(Method::POST, "/pipelines", Some(&definition("orders")))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json()["name"], "orders");
    assert!(!r.text.contains("hunter2-pw"), "{}", r.text);
    assert_eq!(api.get("/pipelines").await.json(), json!(["orders"]));
    let r = api.get("/pipelines/orders/config").await;
    assert_eq!(r.json()["source"]["password"], "<redacted>");
    let r = api.get("/pipelines/orders/status").await;
    assert_eq!(r.json()["desired_state"], "stopped");
    let r = api.send(Method::DELETE, "/pipelines/orders", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_error(
        &api.get("/pipelines/orders").await,
        StatusCode::NOT_FOUND,
        "unknown_pipeline",
    );
}

#[tokio::test]
async fn errors_are_json_with_the_right_status() {
    let api = Api::open();
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    let dup = api
        .send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    assert_error(&dup, StatusCode::CONFLICT, "pipeline_exists");
    let bad = api
        .send(Method::POST, "/pipelines", Some("{\"name\": "))
        .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_json");
    let empty = api.send(Method::POST, "/pipelines", None).await;
    assert_error(&empty, StatusCode::BAD_REQUEST, "invalid_json");
    let missing = api.send(Method::POST, "/pipelines", Some("{}")).await;
    assert_error(&missing, StatusCode::BAD_REQUEST, "invalid_pipeline");
    assert_eq!(missing.json()["field"], "name");
    assert_error(
        &api.get("/nope").await,
        StatusCode::NOT_FOUND,
        "no_such_route",
    );
    let wrong_method = api.send(Method::PATCH, "/pipelines", None).await;
    assert_error(
        &wrong_method,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
    for path in [
        "/pipelines/zz/status",
        "/pipelines/zz/offsets",
        "/pipelines/zz/config",
    ] {
        assert_error(
            &api.get(path).await,
            StatusCode::NOT_FOUND,
            "unknown_pipeline",
        );
    }
    let r = api.send(Method::PUT, "/pipelines/zz/pause", None).await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
    let r = api.send(Method::DELETE, "/cluster/members/abc", None).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(r.json()["field"], "id");
    let r = api
        .send(
            Method::POST,
            "/cluster/members",
            Some(r#"{"id": "x-secret", "raft_addr": "a:1", "api_addr": "b:2"}"#),
        )
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(r.json()["field"], "id");
    assert!(!r.text.contains("x-secret"), "{}", r.text);
    let r = api
        .send(
            Method::POST,
            "/cluster/members",
            Some(r#"{"id": 4, "raft_addr": "a:1", "api_addr": "b:2", "extra": 1}"#),
        )
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(r.json()["message"].as_str().unwrap().contains("extra"));
    let r = api
        .send(
            Method::POST,
            "/cluster/members",
            Some(r#"{"id": 4, "raft_addr": "a:1", "api_addr": "b:2"}"#),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    // a body over the limit is a json 413, not axum's plain text
    let huge = format!(
        r#"{{"name": "big", "pad": "{}"}}"#,
        "x".repeat(crate::json_body::BODY_LIMIT)
    );
    for (method, path) in [
        (Method::POST, "/pipelines"),
        (Method::PUT, "/pipelines/a/config"),
        (Method::POST, "/cluster/members"),
    ] {
        let r = api.send(method, path, Some(&huge)).await;
        assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "request_too_large");
    }
}

#[tokio::test]
async fn writes_without_quorum_are_503() {
    let api = Api::open();
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    api.plane.no_quorum.store(true, Ordering::SeqCst);
    let r = api
        .send(Method::POST, "/pipelines", Some(&definition("b")))
        .await;
    assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "no_leader");
    let r = api.send(Method::PUT, "/pipelines/a/resume", None).await;
    assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "no_leader");
    assert_eq!(
        api.get("/health").await.status,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // reads still answer from the local state
    assert_eq!(api.get("/pipelines").await.json(), json!(["a"]));
}

#[tokio::test]
async fn config_put_checks_the_name_and_replaces_the_definition() {
    let api = Api::open();
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    let r = api
        .send(Method::PUT, "/pipelines/a/config", Some(&definition("b")))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_pipeline");
    assert_eq!(r.json()["field"], "name");
    let body = json!({"source": {"host": "other", "password": "hunter2-pw"}}).to_string();
    let r = api
        .send(Method::PUT, "/pipelines/a/config", Some(&body))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["config"]["name"], "a");
    assert_eq!(r.json()["config"]["source"]["host"], "other");
    assert!(!r.text.contains("hunter2-pw"));
    let r = api
        .send(Method::PUT, "/pipelines/zz/config", Some(&definition("zz")))
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
    let r = api
        .send(Method::PUT, "/pipelines/a/config", Some("[1,"))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_json");
}

#[tokio::test]
async fn restart_and_offsets() {
    let api = Api::open();
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    let r = api.send(Method::POST, "/pipelines/a/restart", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(r.json()["owner"], Value::Null);
    api.send(Method::PUT, "/pipelines/a/resume", None).await;
    let before = api.get("/pipelines/a/status").await.json()["epoch"]
        .as_u64()
        .unwrap();
    let r = api.send(Method::POST, "/pipelines/a/restart", None).await;
    assert_eq!(r.json()["epoch"].as_u64().unwrap(), before + 1);
    let r = api.get("/pipelines/a/offsets").await;
    assert_eq!(r.json()["position"], "uuid:1-5");
    let r = api.send(Method::DELETE, "/pipelines/a/offsets", None).await;
    assert_error(&r, StatusCode::CONFLICT, "pipeline_not_stopped");
    api.send(Method::PUT, "/pipelines/a/stop", None).await;
    let r = api.send(Method::DELETE, "/pipelines/a/offsets", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text);
    assert_eq!(
        api.get("/pipelines/a/offsets").await.json()["position"],
        Value::Null
    );
}

#[tokio::test]
async fn an_ad_hoc_snapshot_is_requested_shown_and_stopped() {
    let api = Api::open();
    let body = r#"{"tables": ["shop.a", "shop.b"]}"#;
    let r = api
        .send(Method::POST, "/pipelines/zz/snapshots", Some(body))
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    api.send(Method::PUT, "/pipelines/a/resume", None).await;
    let epoch = api.get("/pipelines/a/status").await.json()["epoch"]
        .as_u64()
        .unwrap();
    // checked before anything is written, each error naming its field
    for (bad, code, field) in [
        (r#"{"tables": []}"#, "invalid_snapshot_request", "tables"),
        (
            r#"{"tables": ["shop"]}"#,
            "invalid_snapshot_request",
            "tables[0]",
        ),
        (
            r#"{"tables": ["shop.a"], "where": "id > 5"}"#,
            "snapshot_filter_not_supported",
            "where",
        ),
        (
            r#"{"tables": ["shop.a", "hr.pay"]}"#,
            "snapshot_table_not_captured",
            "tables[1]",
        ),
    ] {
        let r = api
            .send(Method::POST, "/pipelines/a/snapshots", Some(bad))
            .await;
        assert_error(&r, StatusCode::BAD_REQUEST, code);
        assert_eq!(r.json()["field"], field, "{bad}");
    }
    let r = api
        .send(
            Method::POST,
            "/pipelines/a/snapshots",
            Some(r#"{"tables": 1}"#),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(
        api.get("/pipelines/a/snapshots").await.json()["tables"],
        json!([])
    );

    let r = api
        .send(Method::POST, "/pipelines/a/snapshots", Some(body))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(r.json()["tables"], json!(["shop.a", "shop.b"]));
    assert_eq!(r.json()["epoch"].as_u64().unwrap(), epoch + 1);
    let shown = api.get("/pipelines/a/snapshots").await.json();
    assert_eq!(shown["tables"][1]["table"], "shop.b");
    assert_eq!(shown["tables"][1]["kind"], "incremental");
    assert_eq!(shown["tables"][1]["status"], "pending");
    let r = api
        .send(
            Method::POST,
            "/pipelines/a/snapshots",
            Some(r#"{"tables": ["shop.b"]}"#),
        )
        .await;
    assert_error(&r, StatusCode::CONFLICT, "snapshot_running");

    let r = api
        .send(Method::DELETE, "/pipelines/a/snapshots", None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["tables"], json!(["shop.a", "shop.b"]));
    let shown = api.get("/pipelines/a/snapshots").await.json();
    assert_eq!(shown["tables"][0]["status"], "stopped");
    let r = api
        .send(Method::DELETE, "/pipelines/a/snapshots", None)
        .await;
    assert_error(&r, StatusCode::CONFLICT, "no_snapshot_running");
    let r = api
        .send(Method::DELETE, "/pipelines/zz/snapshots", None)
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
}

#[tokio::test]
async fn a_move_is_pending_until_done_and_refused_for_unknown_pipelines_and_members() {
    let api = Api::open();
    api.send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    api.send(Method::PUT, "/pipelines/a/resume", None).await;
    let r = api
        .send(Method::POST, "/pipelines/a/move", Some(r#"{"to": 2}"#))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"name": "a", "owner": 1, "move_to": 2, "epoch": 1})
    );
    assert_eq!(api.get("/pipelines/a/status").await.json()["move_to"], 2);
    // to the owner: cancelled, nothing pending
    let r = api
        .send(Method::POST, "/pipelines/a/move", Some(r#"{"to": 1}"#))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["move_to"], Value::Null);
    assert_eq!(
        api.get("/pipelines/a/status").await.json()["move_to"],
        Value::Null
    );
    let r = api
        .send(Method::POST, "/pipelines/nope/move", Some(r#"{"to": 2}"#))
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_pipeline");
    let r = api
        .send(Method::POST, "/pipelines/a/move", Some(r#"{"to": 9}"#))
        .await;
    assert_error(&r, StatusCode::NOT_FOUND, "unknown_member");
    assert_eq!(r.json()["field"], "to");
    let r = api
        .send(Method::POST, "/pipelines/a/move", Some(r#"{"to": 4}"#))
        .await;
    assert_error(&r, StatusCode::CONFLICT, "member_not_live");
    for body in [r#"{"to": "2"}"#, r#"{}"#, r#"{"to": 2, "x": 1}"#, "", "[2]"] {
        let r = api
            .send(Method::POST, "/pipelines/a/move", Some(body))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text);
    }
}

#[tokio::test]
async fn a_rebalance_is_a_dry_run_unless_asked() {
    let api = Api::open();
    for name in ["a", "b"] {
        api.send(Method::POST, "/pipelines", Some(&definition(name)))
            .await;
        api.send(Method::PUT, &format!("/pipelines/{name}/resume"), None)
            .await;
    }
    let plan = json!({
        "moves": [{"pipeline": "a", "from": 1, "to": 2}],
        "workers": [{"node": 1, "before": 2, "after": 1}, {"node": 2, "before": 0, "after": 1}]
    });
    for body in [
        None,
        Some(""),
        Some("null"),
        Some("{}"),
        Some(r#"{"dry_run": true}"#),
    ] {
        let r = api.send(Method::POST, "/cluster/rebalance", body).await;
        assert_eq!(r.status, StatusCode::OK, "{body:?}: {}", r.text);
        assert_eq!(r.json()["dry_run"], true);
        assert_eq!(r.json()["moves"], plan["moves"]);
        assert_eq!(r.json()["workers"], plan["workers"]);
    }
    let r = api
        .send(
            Method::POST,
            "/cluster/rebalance",
            Some(r#"{"dry_run": false}"#),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    assert_eq!(r.json()["dry_run"], false);
    let r = api
        .send(Method::POST, "/cluster/rebalance", Some(r#"{"apply": 1}"#))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    let r = api
        .send(Method::POST, "/cluster/rebalance", Some("[false]"))
        .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "invalid_request");
    api.plane.no_quorum.store(true, Ordering::SeqCst);
    let r = api
        .send(
            Method::POST,
            "/cluster/rebalance",
            Some(r#"{"dry_run": false}"#),
        )
        .await;
    assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "no_leader");
}

#[tokio::test]
async fn a_token_guards_every_mutation_and_leaves_reads_open() {
    let api = Api::guarded();
    let body = definition("a");
    let writes: [(Method, &str, Option<&str>); 13] = [
        (Method::POST, "/pipelines", Some(&body)),
        (Method::PUT, "/pipelines/a/config", Some(&body)),
        (Method::PUT, "/pipelines/a/pause", None),
        (Method::PUT, "/pipelines/a/resume", None),
        (Method::PUT, "/pipelines/a/stop", None),
        (Method::POST, "/pipelines/a/restart", None),
        (Method::DELETE, "/pipelines/a/offsets", None),
        (Method::DELETE, "/pipelines/a", None),
        (Method::POST, "/cluster/members", Some("{}")),
        (Method::DELETE, "/cluster/members/2", None),
        (Method::POST, "/pipelines/a/move", Some(r#"{"to": 2}"#)),
        (Method::POST, "/cluster/rebalance", None),
        (Method::POST, "/nowhere", None),
    ];
    for (method, path, body) in &writes {
        for bearer in [None, Some("wrong"), Some(&TOKEN[..TOKEN.len() - 1])] {
            let r = api.call(method.clone(), path, *body, bearer).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
            assert!(!r.text.contains(TOKEN), "{}", r.text);
        }
    }
    // a lowercase scheme is fine
    let app = api.router();
    let req = Request::builder()
        .method(Method::POST)
        .uri("/pipelines")
        .header(header::AUTHORIZATION, format!("bearer {TOKEN}"))
        .body(Body::from(body.clone()))
        .unwrap();
    assert_eq!(
        app.oneshot(req).await.unwrap().status(),
        StatusCode::CREATED
    );
    let r = api.send(Method::PUT, "/pipelines/a/resume", None).await;
    assert_eq!(r.status, StatusCode::ACCEPTED);
    for path in [
        "/pipelines",
        "/pipelines/a",
        "/pipelines/a/status",
        "/pipelines/a/offsets",
        "/cluster",
        "/health",
        "/metrics",
        "/openapi.json",
    ] {
        assert_eq!(api.get(path).await.status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn a_read_token_guards_reads_but_not_probes_the_page_or_the_description() {
    let api = Api::read_guarded();
    let r = api
        .send(Method::POST, "/pipelines", Some(&definition("a")))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let reads = [
        "/pipelines",
        "/pipelines/a",
        "/pipelines/a/config",
        "/pipelines/a/status",
        "/pipelines/a/offsets",
        "/cluster",
        "/metrics",
    ];
    for path in reads {
        for bearer in [None, Some("wrong")] {
            let r = api.call(Method::GET, path, None, bearer).await;
            assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
        }
        for bearer in [READ_TOKEN, TOKEN] {
            let r = api.call(Method::GET, path, None, Some(bearer)).await;
            assert_eq!(r.status, StatusCode::OK, "{path} with a token");
        }
    }
    for path in ["/health", "/", "/openapi.json"] {
        assert_eq!(api.get(path).await.status, StatusCode::OK, "{path} is open");
    }
    // the read token does not write
    let r = api
        .call(Method::PUT, "/pipelines/a/stop", None, Some(READ_TOKEN))
        .await;
    assert_error(&r, StatusCode::UNAUTHORIZED, "unauthorized");
    // and the description says which reads need it
    let doc = api.get("/openapi.json").await.json();
    let paths = &doc["paths"];
    assert!(paths["/pipelines/{name}/status"]["get"]["security"].is_array());
    assert!(paths["/pipelines/{name}/status"]["get"]["responses"]["401"].is_object());
    assert!(paths["/health"]["get"]["security"].is_null());
    assert!(paths["/openapi.json"]["get"]["responses"]["401"].is_null());
}

#[tokio::test]
async fn the_status_page_is_served_open_and_self_contained() {
    // open even where a token guards the writes: the page asks for the token itself
    let api = Api::guarded();
    let r = api.get("/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.content_type, "text/html; charset=utf-8");
    assert!(r.text.starts_with("<!doctype html") || r.text.starts_with("<!DOCTYPE html"));
    // nothing fetched from elsewhere
    for outside in ["http://", "https://", "//cdn"] {
        assert!(!r.text.contains(&format!("src=\"{outside}")), "{outside}");
        assert!(!r.text.contains(&format!("href=\"{outside}")), "{outside}");
    }
}

#[tokio::test]
async fn metrics_and_openapi() {
    let api = Api::open();
    let r = api.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.content_type.starts_with("application/openmetrics-text"),
        "{}",
        r.content_type
    );
    assert!(r.text.contains("capstan_raft_term 3"));
    let r = api.get("/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    let doc = r.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for p in [
        "/pipelines",
        "/pipelines/{name}",
        "/pipelines/{name}/config",
        "/pipelines/{name}/status",
        "/pipelines/{name}/pause",
        "/pipelines/{name}/resume",
        "/pipelines/{name}/stop",
        "/pipelines/{name}/restart",
        "/pipelines/{name}/offsets",
        "/pipelines/{name}/move",
        "/pipelines/{name}/snapshots",
        "/cluster",
        "/cluster/members",
        "/cluster/rebalance",
        "/cluster/members/{id}",
        "/health",
        "/metrics",
        "/openapi.json",
        "/",
    ] {
        assert!(paths.contains_key(p), "openapi lacks {p}");
    }
    assert!(paths["/pipelines/{name}/config"]["put"].is_object());
    assert!(paths["/pipelines/{name}/offsets"]["delete"].is_object());
    // no token configured: nothing asks for one
    assert!(
        doc["components"]["securitySchemes"]["bearer"].is_null(),
        "{doc}"
    );
    assert!(paths["/pipelines"]["post"]["security"].is_null());
    let guarded = Api::guarded().get("/openapi.json").await.json();
    assert!(guarded["components"]["securitySchemes"]["bearer"].is_object());
    assert!(guarded["paths"]["/pipelines"]["post"]["security"].is_array());
    assert!(doc["components"]["schemas"]["ApiError"].is_object());
}
