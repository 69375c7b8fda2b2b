//! Namespaces, Secrets, ServiceAccounts, Agents and IAM: success, validation and conflicts.
//!
//! [`resources`] is one table: per resource, its collection, a valid body and what the created
//! resource shows, the creates it refuses, its patches, what holds it in use, how it is deleted
//! and what is refused afterwards. One test per concern runs every row on a fresh app (round
//! trip, refused creates, duplicates, unknown ids); adding a resource is one row. Paths and
//! bodies are templates: `{ns}` (the `default` Namespace), `{cfg}` (a Configuration in it),
//! `{admin}` (the administrator's principal), `{id}` (the created resource), `{held}` (what holds
//! it in use) and whatever the row's setup names. What only one resource has (staged files,
//! tombstones, write-only values, what a binding grants) follows the table.

use std::collections::BTreeMap;

use http::{Method, StatusCode};
use occ_core::resource::NamespaceStatus;
use occ_store::audit::AuditFilter;
use occ_testkit::app::{Credential, Reply, TestApp};
use serde_json::{Value, json};

use crate::common::{agent, configuration, expect};

/// The uuid of ids that name nothing.
const UNKNOWN: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

/// A request of a row, and the status (and error code) it must answer.
struct Req {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    status: StatusCode,
    code: Option<&'static str>,
    /// Remember the created id under this name.
    capture: Option<&'static str>,
}

fn req(method: Method, path: &'static str, body: Option<Value>, status: StatusCode) -> Req {
    Req {
        method,
        path,
        body,
        status,
        code: None,
        capture: None,
    }
}

impl Req {
    fn code(self, code: &'static str) -> Req {
        Req {
            code: Some(code),
            ..self
        }
    }
    /// Creates (201) and remembers the id as `name`.
    fn capture(path: &'static str, body: Value, name: &'static str) -> Req {
        Req {
            capture: Some(name),
            ..req(Method::POST, path, Some(body), StatusCode::CREATED)
        }
    }
}

/// A create the API refuses: the status and, by JSON pointer into the reply, what it says.
struct Refusal {
    body: Value,
    status: StatusCode,
    says: Vec<(&'static str, Value)>,
    /// Text the error message contains.
    message: Option<&'static str>,
}

fn bad(body: Value) -> Refusal {
    refusal(body, StatusCode::BAD_REQUEST)
}

fn refusal(body: Value, status: StatusCode) -> Refusal {
    Refusal {
        body,
        status,
        says: Vec::new(),
        message: None,
    }
}

impl Refusal {
    fn says(mut self, pointer: &'static str, value: Value) -> Refusal {
        self.says.push((pointer, value));
        self
    }
    fn message(self, text: &'static str) -> Refusal {
        Refusal {
            message: Some(text),
            ..self
        }
    }
}

/// Fields of a resource view by JSON pointer; `None`: omitted.
type Fields = Vec<(&'static str, Option<Value>)>;

struct Patch {
    body: Value,
    status: StatusCode,
    fields: Fields,
}

/// What holds a resource in use: while it does, deleting is 409.
struct InUse {
    hold: Vec<Step>,
    /// The refusal's code and text its message contains (a template).
    code: Option<&'static str>,
    names: Option<&'static str>,
    release: Vec<Step>,
}

enum Step {
    Call(Req),
    /// Marks the Namespace named by this variable ready, as the worker would.
    Ready(&'static str),
}

enum Delete {
    /// 204, then 404.
    Gone,
    /// 202 with these fields (repeating is the same no-op 202), and the resource still reads.
    Marked(Fields),
}

struct Resource {
    kind: &'static str,
    /// The id prefix (for an id that names nothing).
    prefix: &'static str,
    /// Created before the row; each request names what it captures.
    setup: Vec<Req>,
    collection: &'static str,
    create: Value,
    created: Fields,
    /// Text of the create body that neither its reply nor any audit record may contain.
    private: Option<&'static str>,
    /// The create's audit action and the resource it names (IAM records name the Namespace).
    audit: (&'static str, &'static str),
    list_len: usize,
    duplicate: Option<(Value, Option<&'static str>)>,
    refused: Vec<Refusal>,
    patches: Vec<Patch>,
    in_use: Option<InUse>,
    delete: Delete,
    after_delete: Vec<Req>,
}

fn resources() -> Vec<Resource> {
    use StatusCode as S;
    let agent_with_auth =
        |auth: Value| json!({"name": "user", "configurationId": "{cfg}", "harnessAuth": auth});
    let binding = |subject: &str, role: &str, kind: &str, resource: &str| {
        json!({"subjectKind": "identity", "subjectId": subject, "roleId": role,
               "resourceKind": kind, "resourceId": resource})
    };
    let unknown = |prefix: &str| format!("{prefix}_{UNKNOWN}");
    vec![
        Resource {
            kind: "Namespace",
            prefix: "ns",
            setup: vec![],
            collection: "/namespaces",
            create: json!({"name": "team-a"}),
            created: vec![
                ("/status", Some(json!("provisioning"))),
                ("/existingNamespace", None),
            ],
            private: None,
            audit: ("openclaw.namespaces.create", "{id}"),
            list_len: 2,
            duplicate: Some((json!({"name": "team-a"}), Some("RESOURCE_CONFLICT"))),
            refused: vec![
                bad(json!({"name": ""})),
                bad(json!({"name": " x"})),
                bad(json!({"name": "x".repeat(201)})),
                bad(json!({})),
                bad(json!({"name": "ok", "existingNamespace": "Bad_Name"})),
                // only the Kubernetes Compute Driver adopts an existing namespace
                refusal(
                    json!({"name": "k8s", "existingNamespace": "tenant-a"}),
                    S::CONFLICT,
                ),
            ],
            patches: vec![],
            in_use: Some(InUse {
                hold: vec![
                    Step::Ready("id"),
                    Step::Call(Req::capture(
                        "/namespaces/{id}/configurations",
                        json!({"kind": "agent", "values": {}}),
                        "held",
                    )),
                ],
                code: Some("NAMESPACE_NOT_EMPTY"),
                names: Some("{held}"),
                release: vec![Step::Call(req(
                    Method::DELETE,
                    "/namespaces/{id}/configurations/{held}",
                    None,
                    S::NO_CONTENT,
                ))],
            }),
            delete: Delete::Marked(vec![("/status", Some(json!("deleting")))]),
            // creating inside a deleting Namespace is refused
            after_delete: vec![
                req(
                    Method::POST,
                    "/namespaces/{id}/configurations",
                    Some(json!({"kind": "agent", "values": {}})),
                    S::CONFLICT,
                )
                .code("RESOURCE_CONFLICT"),
            ],
        },
        Resource {
            kind: "Secret",
            prefix: "sec",
            setup: vec![],
            collection: "/namespaces/{ns}/secrets",
            create: json!({"name": "openai", "value": "sk-live-abcdef123456"}),
            created: vec![(
                "/ref",
                Some(json!({"kind": "secret", "namespaceId": "{ns}", "id": "{id}"})),
            )],
            // the value is never returned, nor audited (before or after a rotation)
            private: Some("sk-"),
            audit: ("openclaw.secrets.create", "{id}"),
            list_len: 1,
            duplicate: Some((json!({"name": "openai", "value": "x"}), None)),
            refused: vec![
                bad(json!({"name": "n", "value": ""})),
                bad(json!({"name": "n", "value": "a\u{0}"})),
                bad(json!({"name": "n"})),
                // A value over 65536 bytes is refused by its own rule (the body limit leaves
                // room for the largest valid value; tests/api/bodies.rs covers the limit).
                bad(json!({"name": "n", "value": "x".repeat(65537)}))
                    .says("/error/details/0/code", json!("TOO_LONG")),
            ],
            patches: vec![Patch {
                body: json!({"value": "sk-rotated-999999"}),
                status: S::OK,
                fields: vec![],
            }],
            in_use: Some(InUse {
                hold: vec![Step::Call(Req::capture(
                    "/namespaces/{ns}/configurations",
                    json!({"kind": "agent", "values": {}, "secretBindings":
                        {"MY_TOKEN": {"source": {"kind": "secret", "namespaceId": "{ns}", "id": "{id}"}}}}),
                    "held",
                ))],
                code: None,
                names: None,
                release: vec![Step::Call(req(
                    Method::PATCH,
                    "/namespaces/{ns}/configurations/{held}",
                    Some(json!({"values": {}, "secretBindings": {}})),
                    S::OK,
                ))],
            }),
            delete: Delete::Gone,
            after_delete: vec![],
        },
        Resource {
            kind: "ServiceAccount",
            prefix: "sa",
            setup: vec![],
            collection: "/namespaces/{ns}/service-accounts",
            create: json!({"name": "chatgpt"}),
            created: vec![("/credential", None)],
            private: None,
            audit: ("openclaw.service_accounts.create", "{id}"),
            list_len: 1,
            duplicate: Some((json!({"name": "chatgpt"}), None)),
            refused: vec![bad(json!({"name": "x", "credential": "k"}))],
            patches: vec![],
            in_use: Some(InUse {
                hold: vec![Step::Call(Req::capture(
                    "/namespaces/{ns}/agents",
                    agent_with_auth(
                        json!({"method": "chatgpt_service_account", "serviceAccountId": "{id}"}),
                    ),
                    "held",
                ))],
                code: None,
                names: None,
                release: vec![Step::Call(req(
                    Method::PATCH,
                    "/namespaces/{ns}/agents/{held}",
                    Some(json!({"configurationId": "{cfg}", "harnessAuth": null})),
                    S::OK,
                ))],
            }),
            delete: Delete::Gone,
            after_delete: vec![],
        },
        Resource {
            kind: "Preset",
            prefix: "pre",
            setup: vec![],
            collection: "/namespaces/{ns}/presets",
            create: json!({"name": "Standard", "template": {
                "variables": {"model": {"type": "string", "default": "gpt-5"}, "key": {"type": "password"}},
                "agent": {"name": "helper", "executionMode": "embedded",
                          "harnessAuth": {"method": "api_key", "secret": "{{ vars.key }}"}},
                "configuration": {"values": {"agents": {"defaults": {"model": {"primary": "openai/{{ vars.model }}"}}}}}
            }}),
            created: vec![
                ("/namespaceId", Some(json!("{ns}"))),
                ("/template/agent/name", Some(json!("helper"))),
            ],
            private: None,
            audit: ("openclaw.presets.create", "{id}"),
            // with the Namespace's built-in Presets
            list_len: 3,
            duplicate: Some((json!({"name": "Standard", "template": {}}), None)),
            refused: vec![
                // a credential never lives in a Preset
                bad(json!({"name": "p", "template": {"agent": {"harnessAuth": {"method": "api_key", "secret": "sk-live-1"}}}}))
                    .says("/error/details/0/path", json!("/template/agent/harnessAuth/secret")),
                bad(json!({"name": "p", "template": {"agent": {"name": "{{ vars.nope }}"}}}))
                    .says("/error/details/0/path", json!("/template/agent/name")),
                bad(json!({"name": "p", "template": {"agent": {"name": "{{ vars.x"}, "variables": {"x": {"type": "string"}}}})),
                bad(json!({"name": "p", "template": {"variables": {"pw": {"type": "password", "default": "x"}}}}))
                    .says("/error/details/0/path", json!("/template/variables/pw/default")),
                bad(json!({"name": "p", "template": {"color": "red"}})),
                // the document is checked against the runtime's schema with each default
                bad(json!({"name": "p", "template": {
                    "variables": {"url": {"type": "string", "default": "ftp://x"}},
                    "configuration": {"values": {"models": {"providers": {"x": {"baseUrl": "{{ vars.url }}"}}}}}}}))
                    .says("/error/details/0/path", json!("/template/configuration/values/models/providers/x/baseUrl")),
                bad(json!({"name": "p", "template": {"configuration": {"values": []}}})),
                bad(json!({"template": {}})),
                bad(json!({"name": "p"})),
            ],
            patches: vec![
                Patch {
                    body: json!({"name": "Renamed"}),
                    status: S::OK,
                    fields: vec![("/name", Some(json!("Renamed")))],
                },
                Patch {
                    body: json!({"template": {"agent": {"name": "other"}}}),
                    status: S::OK,
                    fields: vec![("/template", Some(json!({"agent": {"name": "other"}})))],
                },
                Patch {
                    body: json!({}),
                    status: S::BAD_REQUEST,
                    fields: vec![],
                },
                Patch {
                    body: json!({"template": {"agent": {"name": "{{ vars.nope }}"}}}),
                    status: S::BAD_REQUEST,
                    fields: vec![],
                },
            ],
            in_use: None,
            delete: Delete::Gone,
            after_delete: vec![],
        },
        Resource {
            kind: "Agent",
            prefix: "agt",
            setup: vec![],
            collection: "/namespaces/{ns}/agents",
            create: json!({
                "name": "alpha", "configurationId": "{cfg}", "backendId": "chatgpt-main",
                "initialWorkspaceFiles": {"USER.md": "my private profile", "SOUL.md": ""},
                "workspaceDefaultsId": "a".repeat(64)
            }),
            created: vec![
                ("/desiredRuntimeState", Some(json!("stopped"))),
                ("/status", Some(json!("active"))),
                ("/executionMode", Some(json!("embedded"))),
                // nullable fields are present
                ("/harnessAuth", Some(Value::Null)),
                ("/servicePrincipalId", Some(json!("service-agent-{id}"))),
                ("/activeRevisionId", None),
            ],
            // initial files are never echoed nor audited
            private: Some("profile"),
            audit: ("openclaw.agents.create", "{id}"),
            list_len: 1,
            duplicate: Some((json!({"name": "alpha", "configurationId": "{cfg}"}), None)),
            refused: vec![
                refusal(
                    json!({"name": "b", "configurationId": "{cfg}", "workspaceDefaultsId": "b".repeat(64)}),
                    S::CONFLICT,
                )
                .message("reload"),
                refusal(
                    json!({"name": "b", "configurationId": "{cfg}", "backendId": "nope"}),
                    S::NOT_FOUND,
                ),
                refusal(
                    json!({"name": "b", "configurationId": unknown("cfg")}),
                    S::NOT_FOUND,
                ),
                bad(json!({"name": "b"})),
                bad(json!({"name": "b", "configurationId": "{cfg}", "servicePrincipalId": "x"})),
                bad(json!({"name": "b", "configurationId": "{cfg}", "providerId": "x"})),
                bad(json!({"name": "b", "configurationId": "{cfg}", "executionMode": "sideways"})),
                bad(
                    json!({"name": "b", "configurationId": "{cfg}", "initialWorkspaceFiles": {"NOTES.md": "x"}}),
                ),
                bad(
                    json!({"name": "b", "configurationId": "{cfg}", "initialWorkspaceFiles": {"USER.md": "x".repeat(16385)}}),
                )
                .says(
                    "/error/details/0",
                    json!({"path": "/initialWorkspaceFiles/USER.md", "code": "TOO_LONG"}),
                ),
                bad(json!({"name": "b", "configurationId": "{cfg}", "harnessAuth": {"method": "device_code"}})),
                // reference methods whose flows occ lacks: a clear conflict naming the method
                refusal(
                    json!({"name": "b", "configurationId": "{cfg}", "harnessAuth": {"method": "oauth"}}),
                    S::CONFLICT,
                )
                .message("oauth"),
                refusal(
                    json!({"name": "b", "configurationId": "{cfg}", "harnessAuth": {"method": "credential_source", "sourceId": "cs_1"}}),
                    S::CONFLICT,
                )
                .message("credential_source"),
                // codex_pat is accepted as a method: its Secret must exist in this Namespace
                refusal(
                    json!({"name": "b", "configurationId": "{cfg}", "harnessAuth": {"method": "codex_pat", "source": {"kind": "secret", "namespaceId": "{ns}", "id": unknown("sec")}}}),
                    S::NOT_FOUND,
                ),
            ],
            patches: vec![
                Patch {
                    body: json!({"configurationId": "{cfg}", "harnessAuth": {"method": "runtime"}}),
                    status: S::OK,
                    fields: vec![
                        ("/harnessAuth", Some(json!({"method": "runtime"}))),
                        // omitted keeps
                        ("/backendId", Some(json!("chatgpt-main"))),
                    ],
                },
                Patch {
                    body: json!({"configurationId": "{cfg}", "backendId": null}),
                    status: S::OK,
                    fields: vec![
                        // null clears
                        ("/backendId", Some(Value::Null)),
                        ("/harnessAuth", Some(json!({"method": "runtime"}))),
                    ],
                },
                Patch {
                    body: json!({"harnessAuth": null}),
                    status: S::BAD_REQUEST,
                    fields: vec![],
                },
            ],
            in_use: None,
            delete: Delete::Marked(vec![
                ("/status", Some(json!("deleting"))),
                ("/desiredRuntimeState", Some(json!("stopped"))),
            ]),
            after_delete: vec![
                req(
                    Method::PATCH,
                    "/namespaces/{ns}/agents/{id}",
                    Some(json!({"configurationId": "{cfg}"})),
                    S::CONFLICT,
                )
                .code("AGENT_DELETING"),
                req(Method::POST, "/namespaces/{ns}/agents/{id}/deploy", None, S::CONFLICT)
                    .code("AGENT_DELETING"),
                req(Method::POST, "/namespaces/{ns}/agents/{id}/stop", None, S::ACCEPTED),
                // the referenced Configuration cannot be deleted while the Agent exists
                req(
                    Method::DELETE,
                    "/namespaces/{ns}/configurations/{cfg}",
                    None,
                    S::CONFLICT,
                ),
            ],
        },
        Resource {
            kind: "Role",
            prefix: "role",
            setup: vec![Req::capture(
                "/namespaces/{ns}/agents",
                agent_with_auth(json!({"method": "runtime"})),
                "agent",
            )],
            collection: "/namespaces/{ns}/iam/roles",
            create: json!({"name": "readers", "permissions": [
                {"action": "read", "resourceKind": "agent"},
                {"action": "read", "resourceKind": "agent_revision"}]}),
            created: vec![("/namespaceId", Some(json!("{ns}")))],
            private: None,
            audit: ("openclaw.iam.roles.create", "{ns}"),
            // the Namespace's three built-in Roles and this one
            list_len: 4,
            duplicate: None,
            refused: vec![
                bad(json!({"permissions": []})),
                bad(json!({"permissions": [{"action": "create", "resourceKind": "agent"}]})),
                bad(json!({"permissions": [{"action": "update", "resourceKind": "namespace"}]})),
                bad(json!({"permissions": [{"action": "read", "resourceKind": "installation"}]})),
                bad(
                    json!({"permissions": [{"action": "update", "resourceKind": "agent_revision"}]}),
                ),
                bad(json!({"permissions": [{"action": "read", "resourceKind": "agent"},
                                           {"action": "read", "resourceKind": "agent"}]})),
                bad(json!({"permissions": [{"action": "fly", "resourceKind": "agent"}]})),
            ],
            patches: vec![],
            in_use: Some(InUse {
                hold: vec![Step::Call(Req::capture(
                    "/namespaces/{ns}/iam/access-bindings",
                    binding("{admin}", "{id}", "agent", "{agent}"),
                    "held",
                ))],
                code: None,
                names: None,
                release: vec![Step::Call(req(
                    Method::DELETE,
                    "/namespaces/{ns}/iam/access-bindings/{held}",
                    None,
                    S::NO_CONTENT,
                ))],
            }),
            delete: Delete::Gone,
            after_delete: vec![],
        },
        Resource {
            kind: "AccessBinding",
            prefix: "binding",
            setup: vec![
                Req::capture(
                    "/namespaces/{ns}/iam/roles",
                    json!({"name": "readers", "permissions": [{"action": "read", "resourceKind": "agent"}]}),
                    "role",
                ),
                Req::capture(
                    "/namespaces/{ns}/agents",
                    agent_with_auth(json!({"method": "runtime"})),
                    "agent",
                ),
            ],
            collection: "/namespaces/{ns}/iam/access-bindings",
            create: binding("{admin}", "{role}", "agent", "{agent}"),
            created: vec![("/roleId", Some(json!("{role}")))],
            private: None,
            audit: ("openclaw.iam.access_bindings.create", "{ns}"),
            list_len: 1,
            duplicate: None,
            refused: [
                (binding("prn_nobody", "{role}", "agent", "{agent}"), "/subjectId"),
                (binding("{admin}", "role_nope", "agent", "{agent}"), "/roleId"),
                (binding("{admin}", "{role}", "agent", &unknown("agt")), "/resourceId"),
                // the role grants nothing on a Secret
                (binding("{admin}", "{role}", "secret", &unknown("sec")), "/roleId"),
            ]
            .into_iter()
            .map(|(body, path)| bad(body).says("/error/details/0/path", json!(path)))
            .collect(),
            patches: vec![],
            in_use: None,
            delete: Delete::Gone,
            after_delete: vec![],
        },
    ]
}

/// A fresh app and the variables the row's templates use.
struct World {
    app: TestApp,
    admin: Credential,
    vars: BTreeMap<&'static str, String>,
}

impl World {
    async fn new(row: &Resource) -> World {
        let app = TestApp::new().await;
        let admin = app.admin();
        let ns = app.default_ns.to_string();
        let cfg = configuration(&app, &ns, &admin).await;
        let mut world = World {
            vars: BTreeMap::from([
                ("ns", ns),
                ("cfg", cfg),
                ("admin", app.admin_principal.to_string()),
            ]),
            app,
            admin,
        };
        for step in &row.setup {
            world.call(row, step).await;
        }
        world
    }

    fn fill(&self, template: &str) -> String {
        self.vars
            .iter()
            .fold(template.to_owned(), |text, (name, value)| {
                text.replace(&format!("{{{name}}}"), value)
            })
    }

    fn fill_json(&self, template: &Value) -> Value {
        match template {
            Value::String(text) => Value::String(self.fill(text)),
            Value::Array(items) => items.iter().map(|v| self.fill_json(v)).collect(),
            Value::Object(fields) => fields
                .iter()
                .map(|(k, v)| (k.clone(), self.fill_json(v)))
                .collect(),
            other => other.clone(),
        }
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        let body = body.map(|b| self.fill_json(b));
        self.app
            .call(method, &self.fill(path), &self.admin, body)
            .await
    }

    /// Sends a row's request and checks its answer; remembers what it captures.
    async fn call(&mut self, row: &Resource, r: &Req) -> Reply {
        let reply = self.send(r.method.clone(), r.path, r.body.as_ref()).await;
        let what = format!("{}: {} {}", row.kind, r.method, self.fill(r.path));
        assert_eq!(reply.status, r.status, "{what}: {}", reply.body);
        if let Some(code) = r.code {
            assert_eq!(reply.code(), code, "{what}");
        }
        if let Some(name) = r.capture {
            let id = reply.data()["id"].as_str().expect("id").to_owned();
            self.vars.insert(name, id);
        }
        reply
    }

    async fn step(&mut self, row: &Resource, step: &Step) {
        match step {
            Step::Call(r) => {
                self.call(row, r).await;
            }
            Step::Ready(var) => {
                let ns = self.vars[var].parse().expect("a Namespace id");
                self.app
                    .set_namespace_status(&ns, NamespaceStatus::Ready)
                    .await;
            }
        }
    }

    fn item(&self, row: &Resource) -> String {
        self.fill(&format!("{}/{{id}}", row.collection))
    }

    /// Creates the row's resource (201) and remembers its id as `id`.
    async fn create(&mut self, row: &Resource) -> Reply {
        let reply = self
            .send(Method::POST, row.collection, Some(&row.create))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::CREATED,
            "{}: create: {}",
            row.kind,
            reply.body
        );
        let id = reply.data()["id"].as_str().expect("id").to_owned();
        self.vars.insert("id", id);
        reply
    }

    fn assert_fields(&self, row: &Resource, what: &str, view: &Value, fields: &Fields) {
        for (pointer, expected) in fields {
            let actual = view.pointer(pointer);
            let expected = expected.as_ref().map(|v| self.fill_json(v));
            assert_eq!(
                actual,
                expected.as_ref(),
                "{}: {what}: {pointer} in {view}",
                row.kind
            );
        }
    }
}

/// Every row: create → get → list → patch → (in use: 409) → delete → after.
#[tokio::test]
async fn resources_round_trip() {
    for row in resources() {
        let mut w = World::new(&row).await;
        let kind = row.kind;
        let created = w.create(&row).await;
        w.assert_fields(&row, "create", created.data(), &row.created);
        if let Some(private) = row.private {
            assert!(
                !created.body.to_string().contains(private),
                "{kind}: {private} returned"
            );
        }
        let item = w.item(&row);
        let get = w.send(Method::GET, &item, None).await;
        assert_eq!(get.status, StatusCode::OK, "{kind}: get: {}", get.body);
        let list = w.send(Method::GET, row.collection, None).await;
        assert_eq!(list.status, StatusCode::OK, "{kind}: list: {}", list.body);
        assert_eq!(
            list.data().as_array().map(Vec::len),
            Some(row.list_len),
            "{kind}: list: {}",
            list.body
        );
        for patch in &row.patches {
            let r = w.send(Method::PATCH, &item, Some(&patch.body)).await;
            let what = format!("patch {}", patch.body);
            assert_eq!(r.status, patch.status, "{kind}: {what}: {}", r.body);
            w.assert_fields(&row, &what, r.data(), &patch.fields);
        }
        if let Some(in_use) = &row.in_use {
            for step in &in_use.hold {
                w.step(&row, step).await;
            }
            let r = w.send(Method::DELETE, &item, None).await;
            assert_eq!(
                r.status,
                StatusCode::CONFLICT,
                "{kind}: delete while in use: {}",
                r.body
            );
            if let Some(code) = in_use.code {
                assert_eq!(r.code(), code, "{kind}: delete while in use");
            }
            if let Some(names) = in_use.names {
                let message = r.body["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains(&w.fill(names)), "{kind}: {message}");
            }
            for step in &in_use.release {
                w.step(&row, step).await;
            }
        }
        match &row.delete {
            Delete::Gone => {
                let r = w.send(Method::DELETE, &item, None).await;
                assert_eq!(
                    r.status,
                    StatusCode::NO_CONTENT,
                    "{kind}: delete: {}",
                    r.body
                );
                let r = w.send(Method::GET, &item, None).await;
                assert_eq!(r.status, StatusCode::NOT_FOUND, "{kind}: get after delete");
            }
            Delete::Marked(fields) => {
                let r = w.send(Method::DELETE, &item, None).await;
                assert_eq!(r.status, StatusCode::ACCEPTED, "{kind}: delete: {}", r.body);
                w.assert_fields(&row, "delete", r.data(), fields);
                let again = w.send(Method::DELETE, &item, None).await;
                assert_eq!(again.status, StatusCode::ACCEPTED, "{kind}: delete again");
                w.assert_fields(&row, "delete again", again.data(), fields);
                let r = w.send(Method::GET, &item, None).await;
                assert_eq!(r.status, StatusCode::OK, "{kind}: get while deleting");
            }
        }
        for r in &row.after_delete {
            w.call(&row, r).await;
        }
        // the create was audited once, as the administrator's; nothing private was recorded
        let mut tx = w.app.store.begin_read().await.unwrap();
        let audited = tx
            .audit_list(&AuditFilter {
                action: Some(row.audit.0.into()),
                resource_id: Some(w.fill(row.audit.1)),
            })
            .await
            .unwrap();
        assert_eq!(audited.len(), 1, "{kind}: {audited:?}");
        assert_eq!(
            audited[0].actor_id,
            w.app.admin_principal.as_str(),
            "{kind}"
        );
        if let Some(private) = row.private {
            let all = tx.audit_list(&AuditFilter::default()).await.unwrap();
            let details = all.iter().map(|e| &e.details).collect::<Vec<_>>();
            assert!(
                !serde_json::to_string(&details).unwrap().contains(private),
                "{kind}: {private} audited"
            );
        }
    }
}

/// Every row: each refused create answers its status and says what it should; none creates
/// anything.
#[tokio::test]
async fn refused_creates() {
    for row in resources() {
        let w = World::new(&row).await;
        let kind = row.kind;
        let count = async || {
            let list = w.send(Method::GET, row.collection, None).await;
            list.data().as_array().map(Vec::len)
        };
        let before = count().await;
        for refusal in &row.refused {
            let r = w
                .send(Method::POST, row.collection, Some(&refusal.body))
                .await;
            let what = format!("{kind}: create {}", refusal.body);
            assert_eq!(r.status, refusal.status, "{what}: {}", r.body);
            for (pointer, expected) in &refusal.says {
                assert_eq!(
                    r.body.pointer(pointer),
                    Some(expected),
                    "{what}: {}",
                    r.body
                );
            }
            if let Some(text) = refusal.message {
                let message = r.body["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains(text), "{what}: {message}");
            }
        }
        assert_eq!(
            count().await,
            before,
            "{kind}: a refused create created something"
        );
    }
}

/// Every row with a unique name: creating it twice is 409.
#[tokio::test]
async fn duplicates_conflict() {
    for row in resources() {
        let Some((duplicate, code)) = &row.duplicate else {
            continue;
        };
        let mut w = World::new(&row).await;
        w.create(&row).await;
        let r = w.send(Method::POST, row.collection, Some(duplicate)).await;
        assert_eq!(r.status, StatusCode::CONFLICT, "{}: {}", row.kind, r.body);
        if let Some(code) = code {
            assert_eq!(r.code(), *code, "{}", row.kind);
        }
    }
}

/// Every row: an id that names nothing is 404 to read, patch or delete.
#[tokio::test]
async fn unknown_ids_are_not_found() {
    for row in resources() {
        let w = World::new(&row).await;
        let item = w.fill(&format!("{}/{}_{UNKNOWN}", row.collection, row.prefix));
        if let Some(patch) = row.patches.first() {
            let r = w.send(Method::PATCH, &item, Some(&patch.body)).await;
            assert_eq!(
                r.status,
                StatusCode::NOT_FOUND,
                "{}: PATCH {item}",
                row.kind
            );
        }
        for method in [Method::GET, Method::DELETE] {
            let r = w.send(method.clone(), &item, None).await;
            assert_eq!(
                r.status,
                StatusCode::NOT_FOUND,
                "{}: {method} {item}",
                row.kind
            );
        }
    }
}

/// Admission queues the Namespace's ensure work in the same transaction; after the worker's
/// tombstone the Namespace is gone and its name stays reserved.
#[tokio::test]
async fn namespace_work_and_tombstone() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let create = async || {
        app.call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "team-a"})),
        )
        .await
    };
    let ns = create().await.created_id();
    let nsid: occ_core::NamespaceId = ns.parse().unwrap();
    let mut tx = app.store.begin_read().await.unwrap();
    assert!(
        tx.work_get(&occ_core::work::WorkKey::namespace_ready(&nsid))
            .await
            .unwrap()
            .is_some()
    );
    drop(tx);
    expect(
        app.call(Method::DELETE, &format!("/namespaces/{ns}"), &admin, None)
            .await,
        StatusCode::ACCEPTED,
    );
    let mut tx = occ_testkit::begin_setup(&app.store).await;
    tx.namespace_tombstone(&nsid, occ_core::Timestamp::now())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        app.call(Method::GET, &format!("/namespaces/{ns}"), &admin, None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = create().await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deleted")
    );
}

#[tokio::test]
async fn a_namespace_that_is_not_ready_takes_no_secrets() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let fresh = app
        .call(
            Method::POST,
            "/namespaces",
            &admin,
            Some(json!({"name": "fresh"})),
        )
        .await
        .created_id();
    let r = app
        .call(
            Method::POST,
            &format!("/namespaces/{fresh}/secrets"),
            &admin,
            Some(json!({"name": "a", "value": "b"})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "NAMESPACE_NOT_READY")
    );
}

/// Initial files are staged privately, with no revision and no work; deleting the Agent removes
/// the staged setup and queues its deletion.
#[tokio::test]
async fn agent_files_are_staged_until_deletion() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let cfg = configuration(&app, &ns, &admin).await;
    let id = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents"),
            &admin,
            Some(json!({"name": "alpha", "configurationId": cfg,
                        "initialWorkspaceFiles": {"USER.md": "my private profile", "SOUL.md": ""}})),
        )
        .await
        .created_id();
    let agent_id: occ_core::AgentId = id.parse().unwrap();
    let mut tx = app.store.begin_read().await.unwrap();
    let setup = tx
        .workspace_setup_get(&app.default_ns, &agent_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(setup.files.unwrap().len(), 2);
    assert!(
        tx.revision_list(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        tx.work_list_for_agent(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_empty()
    );
    drop(tx);
    expect(
        app.call(
            Method::DELETE,
            &format!("/namespaces/{ns}/agents/{id}"),
            &admin,
            None,
        )
        .await,
        StatusCode::ACCEPTED,
    );
    let mut tx = app.store.begin_read().await.unwrap();
    assert!(
        tx.workspace_setup_get(&app.default_ns, &agent_id)
            .await
            .unwrap()
            .is_none(),
        "deleting removes the staged setup"
    );
    assert!(
        tx.work_get(&occ_core::work::WorkKey::agent_deleted(&agent_id))
            .await
            .unwrap()
            .is_some()
    );
}

/// A binding grants exactly what it says: its role's actions on its resource, nothing more.
#[tokio::test]
async fn a_binding_grants_exactly_what_it_says() {
    let app = TestApp::new().await;
    let admin = app.admin();
    let ns = app.default_ns.to_string();
    let role = app
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/iam/roles"),
            &admin,
            Some(json!({"name": "readers", "permissions": [{"action": "read", "resourceKind": "agent"}, {"action": "read", "resourceKind": "agent_revision"}]})),
        )
        .await
        .created_id();
    let cfg = configuration(&app, &ns, &admin).await;
    let agt = agent(&app, &ns, &cfg, "a1", &admin).await;
    let (reader, reader_key) = app.principal_with(&[], None, None, None).await;
    app.call(
        Method::POST,
        &format!("/namespaces/{ns}/iam/access-bindings"),
        &admin,
        Some(json!({"subjectKind": "identity", "subjectId": reader, "roleId": role, "resourceKind": "agent", "resourceId": agt})),
    )
    .await
    .created_id();
    let who = Credential::Key(reader_key);
    expect(
        app.call(
            Method::GET,
            &format!("/namespaces/{ns}/agents/{agt}"),
            &who,
            None,
        )
        .await,
        StatusCode::OK,
    );
    assert_eq!(
        app.call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/{agt}/stop"),
            &who,
            None
        )
        .await
        .status,
        StatusCode::FORBIDDEN
    );
    let list = expect(
        app.call(Method::GET, &format!("/namespaces/{ns}/agents"), &who, None)
            .await,
        StatusCode::FORBIDDEN,
    );
    assert_eq!(list.code(), "FORBIDDEN", "listing needs namespace:read");
}
