//! Request bodies: the media type, duplicate keys, NUL in stored text, unreadable bodies, the
//! Secret body limit, and the request-body schemas of the served OpenAPI document.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http::{Method, Request, StatusCode};
use occ_store::Backend;
use occ_testkit::app::{Reply, TestApp};
use serde_json::{Value, json};

use crate::common::{document, expect};

fn post_json(app: &TestApp, path: &str, content_types: &[&str], body: &str) -> Request<Body> {
    let mut request = Request::post(path).header("x-api-key", &app.admin_key);
    for content_type in content_types {
        request = request.header("content-type", *content_type);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

/// The detail pointers and codes of a 400.
fn details(reply: &Reply) -> Vec<(String, String)> {
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    reply.body["error"]["details"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|d| {
                    (
                        d["path"].as_str().unwrap().to_owned(),
                        d["code"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn only_utf8_json_is_accepted() {
    let app = TestApp::new().await;
    // `name` has the wrong type, so an accepted media type reaches validation: 400 at /name
    let body = r#"{"name": 5}"#;
    for accepted in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
        "application/json; charset=\"utf-8\"",
    ] {
        let r = app
            .send(post_json(&app, "/namespaces", &[accepted], body))
            .await;
        assert_eq!(
            details(&r),
            [("/name".to_owned(), "INVALID_TYPE".to_owned())],
            "{accepted}"
        );
    }
    for refused in [
        "application/json; charset=latin1",
        "application/json; charset=iso-8859-1",
        "application/json; charset=utf-16",
        "application/json; boundary=x",
        "application/json; charset=utf-8; q=1",
        "application/jsonx",
        "text/json",
    ] {
        let r = app
            .send(post_json(&app, "/namespaces", &[refused], body))
            .await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UNSUPPORTED_MEDIA_TYPE"),
            "{refused}"
        );
    }
    // two Content-Type headers, even equal ones, are ambiguous
    let r = app
        .send(post_json(
            &app,
            "/namespaces",
            &["application/json", "application/json"],
            body,
        ))
        .await;
    assert_eq!(details(&r), []);
    assert_eq!(
        r.body["error"]["message"],
        "The request has more than one Content-Type header"
    );
}

#[tokio::test]
async fn duplicate_keys_are_refused_with_their_pointer() {
    let app = TestApp::new().await;
    let r = app
        .send(post_json(
            &app,
            "/namespaces",
            &["application/json"],
            r#"{"name": "first", "name": "second"}"#,
        ))
        .await;
    assert_eq!(
        details(&r),
        [("/name".to_owned(), "INVALID_FORMAT".to_owned())]
    );
    // nothing was created under either name
    let list = app
        .call(Method::GET, "/namespaces", &app.admin(), None)
        .await;
    assert!(
        !list.body.to_string().contains("first") && !list.body.to_string().contains("second"),
        "{}",
        list.body
    );
    // deep inside a Configuration document, with the key escaped in the pointer
    let r = app
        .send(post_json(
            &app,
            &format!("/namespaces/{}/configurations", app.default_ns),
            &["application/json"],
            r#"{"kind": "agent", "values": {"models": {"a/b": [{"id": 1, "id": 2}]}}}"#,
        ))
        .await;
    assert_eq!(
        details(&r),
        [(
            "/values/models/a~1b/0/id".to_owned(),
            "INVALID_FORMAT".to_owned()
        )]
    );
}

#[tokio::test]
async fn nul_in_stored_text_is_refused_on_both_backends() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        let app = TestApp::on(backend).await;
        let ns = app.default_ns.to_string();
        let mut values = document();
        values["agents"]["defaults"]["model"]["primary"] = json!("openai/gpt\u{0}-5");
        values["gateway"] = json!({"n\u{0}": true});
        let r = app
            .call(
                Method::POST,
                &format!("/namespaces/{ns}/configurations"),
                &app.admin(),
                Some(json!({"kind": "agent", "values": values})),
            )
            .await;
        assert_eq!(
            details(&r),
            [
                (
                    "/values/agents/defaults/model/primary".to_owned(),
                    "INVALID_VALUE".to_owned()
                ),
                (
                    "/values/gateway/n\u{0}".to_owned(),
                    "INVALID_VALUE".to_owned()
                ),
            ],
            "{backend:?}"
        );
        // an update is held to the same rule, and the stored document stays as it was
        let cfg = crate::common::configuration(&app, &ns, &app.admin()).await;
        let r = app
            .call(
                Method::PATCH,
                &format!("/namespaces/{ns}/configurations/{cfg}"),
                &app.admin(),
                Some(json!({"values": {"env": {"vars": {"A": ["ok", "x\u{0}"]}}}})),
            )
            .await;
        assert_eq!(
            details(&r),
            [(
                "/values/env/vars/A/1".to_owned(),
                "INVALID_VALUE".to_owned()
            )],
            "{backend:?}"
        );
        let r = expect(
            app.call(
                Method::GET,
                &format!("/namespaces/{ns}/configurations/{cfg}"),
                &app.admin(),
                None,
            )
            .await,
            StatusCode::OK,
        );
        assert_eq!(r.data()["generation"], 1);
        // the unchanged Configuration still deploys on this backend
        let agent = crate::common::agent(&app, &ns, &cfg, "nul-check", &app.admin()).await;
        expect(
            app.call(
                Method::POST,
                &format!("/namespaces/{ns}/agents/{agent}/deploy"),
                &app.admin(),
                None,
            )
            .await,
            StatusCode::ACCEPTED,
        );
        // a service key's name is stored as text too
        let r = app
            .call(
                Method::POST,
                "/api/auth/service-keys",
                &app.admin(),
                Some(json!({"servicePrincipalId": app.admin_principal, "name": "a\u{0}b"})),
            )
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{backend:?}: {}", r.body);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("/name must not contain NUL characters"),
            "{}",
            r.body
        );
    }
}

/// A body whose transport fails while it is read, as hyper reports malformed chunked framing.
struct BrokenBody;

impl http_body::Body for BrokenBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(Some(Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid chunk size line",
        ))))
    }
}

#[tokio::test]
async fn an_unreadable_body_is_a_bad_request_not_too_large() {
    let app = TestApp::new().await;
    let request = Request::post("/namespaces")
        .header("x-api-key", &app.admin_key)
        .header("content-type", "application/json")
        .body(Body::new(BrokenBody))
        .unwrap();
    let r = app.send(request).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::BAD_REQUEST, "INVALID_REQUEST"),
        "{}",
        r.body
    );
    assert_eq!(
        r.body["error"]["message"],
        "The request body could not be read"
    );
}

#[tokio::test]
async fn a_secret_of_the_documented_maximum_fits() {
    let app = TestApp::new().await;
    let path = format!("/namespaces/{}/secrets", app.default_ns);
    // 65 536 bytes that JSON escapes six-fold (`\u0001`): 384 KiB of body
    let largest = "\u{1}".repeat(occ_core::inputs::SECRET_VALUE_MAX_BYTES);
    let body = json!({"name": "largest", "value": largest});
    assert!(serde_json::to_vec(&body).unwrap().len() > 6 * 65_536);
    let r = expect(
        app.call(Method::POST, &path, &app.admin(), Some(body))
            .await,
        StatusCode::CREATED,
    );
    let id = r.data()["id"].as_str().unwrap().to_owned();
    expect(
        app.call(
            Method::PATCH,
            &format!("{path}/{id}"),
            &app.admin(),
            Some(json!({"value": largest})),
        )
        .await,
        StatusCode::OK,
    );
    // one byte more is a validation error, not a size refusal
    let r = app
        .call(
            Method::POST,
            &path,
            &app.admin(),
            Some(json!({"name": "over", "value": format!("{largest}x")})),
        )
        .await;
    assert_eq!(details(&r), [("/value".to_owned(), "TOO_LONG".to_owned())]);
    // a body beyond any valid Secret is still refused unread
    let r = app
        .call(
            Method::POST,
            &path,
            &app.admin(),
            Some(json!({"name": "huge", "value": "\u{1}".repeat(80_000)})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE")
    );
}

/// The JSON types a schema admits (through `anyOf`/`oneOf`); empty when it admits any value.
fn types(schema: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    match &schema["type"] {
        Value::String(t) => {
            out.insert(t.clone());
        }
        Value::Array(ts) => out.extend(ts.iter().filter_map(|t| t.as_str().map(str::to_owned))),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for item in schema[key].as_array().into_iter().flatten() {
            out.extend(types(item));
        }
    }
    out
}

fn request_schema<'a>(doc: &'a Value, operation: &'a Value) -> &'a Value {
    let schema = &operation["requestBody"]["content"]["application/json"]["schema"];
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap();
            &doc["components"]["schemas"][name]
        }
        None => schema,
    }
}

/// Agent fields the reference accepts and occ refuses as unknown (docs/ARCHITECTURE.md,
/// "Deliberate differences").
const NOT_IMPLEMENTED: [&str; 4] = [
    "plugins",
    "pluginApprovers",
    "repositoryBindings",
    "repositoryAccess",
];

#[tokio::test]
async fn served_request_bodies_keep_the_reference_shapes() {
    let app = TestApp::new().await;
    let ours = expect(
        app.call(Method::GET, "/openapi.json", &app.admin(), None)
            .await,
        StatusCode::OK,
    )
    .body;
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../spec/reference-openapi.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let mut compared = 0;
    for (path, item) in reference["paths"].as_object().unwrap() {
        for (method, theirs) in item.as_object().unwrap() {
            if theirs.get("requestBody").is_none() {
                continue;
            }
            let op = theirs["operationId"].as_str().unwrap();
            let served = &ours["paths"][path][method];
            assert!(served.is_object(), "{op} is not served");
            assert_eq!(served["requestBody"]["required"], true, "{op}");
            let (mine, theirs) = (
                request_schema(&ours, served),
                request_schema(&reference, theirs),
            );
            assert_eq!(mine["additionalProperties"], false, "{op}: closed object");
            assert_eq!(
                mine["required"], theirs["required"],
                "{op}: required fields"
            );
            // A body without fields (`{}`) is served without `properties`.
            let none = serde_json::Map::new();
            let mine_props = mine["properties"].as_object().unwrap_or(&none);
            let their_props = theirs["properties"].as_object().unwrap();
            for (name, schema) in mine_props {
                let theirs = &their_props[name];
                assert!(theirs.is_object(), "{op}: /{name} is not in the reference");
                let mine_types = types(schema);
                assert!(
                    mine_types.is_empty() || mine_types == types(theirs),
                    "{op}: /{name} admits {mine_types:?}, the reference {:?}",
                    types(theirs)
                );
                assert!(
                    schema["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{op}: /{name} has no description"
                );
            }
            for name in their_props.keys() {
                assert!(
                    mine_props.contains_key(name) || NOT_IMPLEMENTED.contains(&name.as_str()),
                    "{op}: the reference's /{name} is missing"
                );
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 24, "every reference request body was compared");
    // OpenAPI 3.1 requires a description on every response
    for (path, item) in ours["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                assert!(
                    response["description"]
                        .as_str()
                        .is_some_and(|d| !d.is_empty()),
                    "{method} {path} {status} has no description"
                );
            }
        }
    }
}
