//! Preset templates: what a Namespace's Presets hold (the reference's `template`) and the rules
//! create and update admit them by.
//!
//! A template has typed `variables`, launch fields for a new Agent (`agent`) and a native
//! Configuration with its Secret bindings (`configuration`). Any string in it may name a
//! variable as `{{ vars.NAME }}` (spaces inside the braces allowed; `\{{` is a literal `{{`;
//! any other `{{ … }}` or `${…}` text stays literal). A string that is one reference keeps the
//! variable's type when rendered; a reference inside longer text needs a `string` variable.
//! Object keys may hold references only inside `configuration.values`. A `password` variable has
//! no stored default and is usable only as the whole of `agent.harnessAuth.secret` or (an occ
//! extension) of a Secret binding's `source.id`: a credential never lives in a Preset, only the
//! Secret a person supplies when using it does (the console and the CLI keep the value as a new
//! Secret of the Namespace and put its id there).

mod builtin;
mod render;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::DetailCode;
use crate::id::{NamespaceId, PresetId, SecretId, ServiceAccountId};
use crate::inputs::{parse_initial_workspace_files, walk_secret_bindings};
use crate::validate::{Fields, Problems, child, expect_id, type_name};
use crate::{Name, Timestamp};

pub use builtin::BuiltinPreset;
use render::whole_reference;
pub use render::{MalformedReference, Piece, is_variable_name, pieces, render};

/// A Preset: a named template in a Namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    /// Its id.
    pub id: PresetId,
    /// Its Namespace.
    pub namespace_id: NamespaceId,
    /// Unique in the Namespace.
    pub name: Name,
    /// The admitted template ([`parse_template`]).
    pub template: Value,
    /// For a built-in Preset occ seeded: the digest of what it wrote ([`seed_digest`]).
    pub seed_digest: Option<String>,
    /// When it was made.
    pub created_at: Timestamp,
}

impl Preset {
    /// Whether this is a built-in Preset nobody has changed since occ seeded it.
    pub fn is_unchanged_seed(&self) -> bool {
        self.seed_digest
            .as_deref()
            .is_some_and(|d| d == seed_digest(&self.name, &self.template))
    }
}

/// The digest of a Preset's name and template (SHA-256, hex).
pub fn seed_digest(name: &Name, template: &Value) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(name.as_str().as_bytes());
    h.update([0]);
    h.update(template.to_string().as_bytes());
    hex::encode(h.finalize())
}

/// The largest template, serialized.
pub const TEMPLATE_MAX_BYTES: usize = 1024 * 1024;
/// The deepest nesting of a template.
pub const TEMPLATE_MAX_DEPTH: usize = 64;
/// The most repository entries of `agent.repositoryAccess` or `agent.repositoryBindings`.
const REPOSITORY_ENTRIES_MAX: usize = 16;

/// Where a password variable may stand (as the whole string): the harness credential, or the
/// Secret of one of the Configuration's bindings ([`is_password_place`]).
const PASSWORD_PLACE: &str = "/template/agent/harnessAuth/secret";
/// The bindings whose `source.id` may be a password variable.
const BINDINGS_PLACE: &str = "/template/configuration/secretBindings/";

/// Whether a password variable may stand at `path` (as the whole string).
fn is_password_place(path: &str) -> bool {
    path == PASSWORD_PLACE
        || path
            .strip_prefix(BINDINGS_PLACE)
            .and_then(|rest| rest.strip_suffix("/source/id"))
            .is_some_and(|binding| !binding.is_empty() && !binding.contains('/'))
}
/// Under which object keys may hold variable references.
const KEYED_PLACE: &str = "/template/configuration/values";

/// The type of a template variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariableType {
    /// Text.
    String,
    /// A finite number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A credential supplied at use: never stored with the Preset.
    Password,
}

impl VariableType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => Self::String,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "password" => Self::Password,
            _ => return None,
        })
    }

    fn admits(self, v: &Value) -> bool {
        match self {
            Self::String => v.is_string(),
            Self::Number => v.as_f64().is_some_and(f64::is_finite),
            Self::Boolean => v.is_boolean(),
            Self::Password => false,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Password => "password",
        }
    }
}

/// A declared variable.
#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    /// Its type.
    pub kind: VariableType,
    /// Its default, of its type (never for a password).
    pub default: Option<Value>,
}

/// Parses a template (at `/template`) for the Preset's Namespace `ns`; the normalized template
/// (Secret references without a `namespaceId` get `ns`) when it is valid.
pub fn parse_template(v: &Value, ns: &NamespaceId, problems: &mut Problems) -> Option<Value> {
    let path = "/template";
    let before = problems.items().len();
    if serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()) > TEMPLATE_MAX_BYTES {
        problems.push(
            path,
            DetailCode::TooLong,
            "is too large (expected at most 1048576 bytes of JSON)",
        );
        return None;
    }
    if depth(v) > TEMPLATE_MAX_DEPTH {
        problems.push(
            path,
            DetailCode::TooDeep,
            "is nested too deeply (expected at most 64 levels)",
        );
        return None;
    }
    let mut normalized = v.clone();
    let mut f = Fields::new(v, path, problems);
    let variables = f
        .optional("variables")
        .map(|v| parse_variables(v, &child(path, "variables"), problems))
        .unwrap_or_default();
    if let Some(agent) = f.optional("agent") {
        let agent_path = child(path, "agent");
        if let Some(auth) = check_agent(agent, &agent_path, ns, &variables, problems)
            && let Some(slot) = normalized.pointer_mut("/agent/harnessAuth")
        {
            *slot = auth;
        }
    }
    if let Some(configuration) = f.optional("configuration") {
        let config_path = child(path, "configuration");
        if let Some(bindings) = check_configuration(configuration, &config_path, ns, problems)
            && let Some(slot) = normalized.pointer_mut("/configuration/secretBindings")
        {
            *slot = bindings;
        }
    }
    f.finish(problems);
    check_references(v, path, &variables, problems);
    if problems.items().len() == before && normalized.pointer("/configuration/values").is_some() {
        // The document as it would be used with every default: what the pinned runtime's
        // schema is checked against (references without a default stay as written).
        let values = render_values(&normalized, &defaults(variables));
        crate::native::validate_document(&values, "/template/configuration/values", problems);
    }
    (problems.items().len() == before && problems.is_empty()).then_some(normalized)
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The declared variables (the valid ones: a bad declaration is reported and left out).
fn parse_variables(v: &Value, path: &str, problems: &mut Problems) -> BTreeMap<String, Variable> {
    let mut out = BTreeMap::new();
    let Value::Object(map) = v else {
        problems.push(
            path,
            DetailCode::InvalidType,
            format!("must be an object, not {}", type_name(v)),
        );
        return out;
    };
    for (name, declaration) in map {
        let p = child(path, name);
        if !is_variable_name(name) {
            problems.push(
                &p,
                DetailCode::InvalidFormat,
                "is not a variable name (expected ^[A-Za-z_][A-Za-z0-9_]*$)",
            );
            continue;
        }
        let mut f = Fields::new(declaration, &p, problems);
        let kind = f.required_str("type", problems).and_then(|t| {
            let kind = VariableType::parse(t);
            if kind.is_none() {
                problems.push(
                    child(&p, "type"),
                    DetailCode::InvalidValue,
                    "must be one of string, number, boolean, password",
                );
            }
            kind
        });
        f.optional_str("description", problems);
        let default = f.optional("default");
        f.finish(problems);
        let Some(kind) = kind else { continue };
        if let Some(default) = default {
            let dp = child(&p, "default");
            if kind == VariableType::Password {
                problems.push(
                    &dp,
                    DetailCode::InvalidValue,
                    "is not allowed: password variables have no stored default",
                );
                continue;
            }
            if !kind.admits(default) {
                problems.push(
                    &dp,
                    DetailCode::InvalidType,
                    format!("must match the variable's type, {}", kind.name()),
                );
                continue;
            }
        }
        out.insert(
            name.clone(),
            Variable {
                kind,
                default: default.cloned(),
            },
        );
    }
    out
}

/// Checks `agent`; the normalized `harnessAuth` when it holds a Secret reference to complete.
fn check_agent(
    v: &Value,
    path: &str,
    ns: &NamespaceId,
    variables: &BTreeMap<String, Variable>,
    problems: &mut Problems,
) -> Option<Value> {
    let mut f = Fields::new(v, path, problems);
    for key in [
        "name",
        "executionMode",
        "backendId",
        "plugins",
        "pluginApprovers",
    ] {
        f.optional(key);
    }
    let access = f.optional("repositoryAccess");
    let bindings = f.optional("repositoryBindings");
    if access.is_some() && bindings.is_some() {
        problems.push(
            child(path, "repositoryBindings"),
            DetailCode::InvalidValue,
            "cannot be combined with repositoryAccess",
        );
    }
    for (key, value) in [
        ("repositoryAccess", access),
        ("repositoryBindings", bindings),
    ] {
        if let Some(Value::Array(items)) = value
            && items.len() > REPOSITORY_ENTRIES_MAX
        {
            problems.push(
                child(path, key),
                DetailCode::InvalidValue,
                "has too many entries (expected at most 16)",
            );
        }
    }
    if let Some(files) = f.optional("initialWorkspaceFiles") {
        parse_initial_workspace_files(files, &child(path, "initialWorkspaceFiles"), problems);
    }
    let auth = f.optional("harnessAuth").and_then(|auth| {
        check_harness_auth(auth, &child(path, "harnessAuth"), ns, variables, problems)
    });
    f.finish(problems);
    auth
}

/// Checks `agent.harnessAuth`: `null`, `{method: runtime}`, `{method: api_key|codex_pat,
/// secret: <a password variable>}`, `{method: api_key|codex_pat, source: <a Secret of this
/// Namespace>}` or `{method: chatgpt_service_account, serviceAccountId}`.
fn check_harness_auth(
    v: &Value,
    path: &str,
    ns: &NamespaceId,
    variables: &BTreeMap<String, Variable>,
    problems: &mut Problems,
) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    let mut f = Fields::new(v, path, problems);
    if !f.is_object() {
        return None;
    }
    let method = f.required_str("method", problems);
    let mut normalized = None;
    match method {
        Some("runtime") => {}
        Some("api_key" | "codex_pat") => {
            let secret = f.optional("secret");
            let source = f.optional("source");
            match (secret, source) {
                (Some(secret), None) => {
                    let sp = child(path, "secret");
                    let is_password = secret
                        .as_str()
                        .and_then(whole_reference)
                        .and_then(|name| variables.get(&name))
                        .is_some_and(|var| var.kind == VariableType::Password);
                    if !is_password {
                        problems.push(
                            sp,
                            DetailCode::InvalidValue,
                            "must be a password variable reference ({{ vars.NAME }}): a Preset never holds a credential",
                        );
                    }
                }
                (None, Some(source)) => {
                    normalized = check_secret_source(source, &child(path, "source"), ns, problems)
                        .map(|source| {
                            let mut auth = v.clone();
                            auth["source"] = source;
                            auth
                        });
                }
                (Some(_), Some(_)) => problems.push(
                    child(path, "source"),
                    DetailCode::InvalidValue,
                    "cannot be combined with secret",
                ),
                (None, None) => problems.push(
                    child(path, "secret"),
                    DetailCode::Required,
                    "is required (or source)",
                ),
            }
        }
        Some("chatgpt_service_account") => {
            let sp = child(path, "serviceAccountId");
            if let Some(id) = f.required("serviceAccountId", problems)
                && id.as_str().is_none_or(|s| whole_reference(s).is_none())
            {
                expect_id::<ServiceAccountId>(id, &sp, "sa", problems);
            }
        }
        Some(_) => problems.push(
            child(path, "method"),
            DetailCode::InvalidValue,
            "must be one of runtime, api_key, codex_pat, chatgpt_service_account",
        ),
        None => {}
    }
    f.finish(problems);
    normalized
}

/// Checks a Secret reference `{kind: "secret", namespaceId?, id}` of a template: the Namespace
/// is the Preset's (filled in when absent), the id a Secret id or a variable reference. The
/// completed reference when it is valid.
fn check_secret_source(
    v: &Value,
    path: &str,
    ns: &NamespaceId,
    problems: &mut Problems,
) -> Option<Value> {
    let before = problems.items().len();
    let mut f = Fields::new(v, path, problems);
    let kind = f.required_str("kind", problems);
    if kind.is_some_and(|k| k != "secret") {
        problems.push(
            child(path, "kind"),
            DetailCode::InvalidValue,
            "must be \"secret\"",
        );
    }
    if let Some(given) = f.optional("namespaceId") {
        let np = child(path, "namespaceId");
        if let Some(given) = expect_id::<NamespaceId>(given, &np, "ns", problems)
            && &given != ns
        {
            problems.push(np, DetailCode::InvalidValue, "must be this Namespace");
        }
    }
    let id = f.required("id", problems);
    if let Some(id) = id
        && id.as_str().is_none_or(|s| whole_reference(s).is_none())
    {
        expect_id::<SecretId>(id, &child(path, "id"), "sec", problems);
    }
    f.finish(problems);
    (problems.items().len() == before).then(|| {
        let mut completed = v.clone();
        completed["namespaceId"] = Value::String(ns.to_string());
        completed
    })
}

/// Checks `configuration`: `values` an object (a native document: the Configuration Driver
/// validates it), `secretBindings` at most 64 bindings named by the binding-name rule. The
/// normalized bindings when they are valid.
fn check_configuration(
    v: &Value,
    path: &str,
    ns: &NamespaceId,
    problems: &mut Problems,
) -> Option<Value> {
    let mut f = Fields::new(v, path, problems);
    if let Some(values) = f.optional("values")
        && !values.is_object()
    {
        problems.push(
            child(path, "values"),
            DetailCode::InvalidType,
            format!("must be an object, not {}", type_name(values)),
        );
    }
    let normalized = f
        .optional("secretBindings")
        .and_then(|b| check_bindings(b, &child(path, "secretBindings"), ns, problems));
    f.finish(problems);
    normalized
}

fn check_bindings(
    v: &Value,
    path: &str,
    ns: &NamespaceId,
    problems: &mut Problems,
) -> Option<Value> {
    let sources = walk_secret_bindings(v, path, problems, |s, sp, problems| {
        check_secret_source(s, sp, ns, problems)
    })?;
    Some(Value::Object(
        sources
            .into_iter()
            .map(|(name, source)| {
                (
                    name,
                    serde_json::json!({"source": source, "delivery": {"type": "env"}}),
                )
            })
            .collect(),
    ))
}

/// Checks every variable reference of the template: well-formed, declared, a non-string
/// variable only as a whole string, a password variable only at [`PASSWORD_PLACE`], and
/// references in object keys only under [`KEYED_PLACE`].
fn check_references(
    v: &Value,
    path: &str,
    variables: &BTreeMap<String, Variable>,
    problems: &mut Problems,
) {
    match v {
        Value::String(s) => check_string(s, path, variables, problems),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_references(item, &crate::validate::index(path, i), variables, problems);
            }
        }
        // Declarations are names, not references.
        Value::Object(_) if path == "/template/variables" => {}
        Value::Object(map) => {
            let keyed = path == KEYED_PLACE || path.starts_with(&format!("{KEYED_PLACE}/"));
            for (key, value) in map {
                let p = child(path, key);
                check_key(key, &p, keyed, variables, problems);
                check_references(value, &p, variables, problems);
            }
        }
        _ => {}
    }
}

/// Checks the references in an object key at `path`: allowed only under [`KEYED_PLACE`]
/// (`keyed`), well-formed, declared, and of `string` variables.
fn check_key(
    key: &str,
    path: &str,
    keyed: bool,
    variables: &BTreeMap<String, Variable>,
    problems: &mut Problems,
) {
    if !key.contains("{{") {
        return;
    }
    let Ok(parts) = pieces(key) else {
        problems.push(
            path,
            DetailCode::InvalidFormat,
            "has a malformed variable reference in its name",
        );
        return;
    };
    let mut names = parts.iter().filter_map(|part| match part {
        Piece::Variable(name) => Some(name),
        Piece::Text(_) => None,
    });
    if !keyed {
        if names.next().is_some() {
            problems.push(
                path,
                DetailCode::InvalidValue,
                "has a variable in its name: only configuration.values may",
            );
        }
        return;
    }
    for name in names {
        match variables.get(name).map(|v| v.kind) {
            Some(VariableType::String) => {}
            Some(_) => problems.push(
                path,
                DetailCode::InvalidValue,
                "names a non-string variable in its name",
            ),
            None => problems.push(
                path,
                DetailCode::InvalidValue,
                "names an undeclared variable",
            ),
        }
    }
}

fn check_string(
    s: &str,
    path: &str,
    variables: &BTreeMap<String, Variable>,
    problems: &mut Problems,
) {
    let Ok(parts) = pieces(s) else {
        problems.push(
            path,
            DetailCode::InvalidFormat,
            "has a malformed variable reference (expected {{ vars.NAME }})",
        );
        return;
    };
    let whole = parts.len() == 1;
    for part in &parts {
        let Piece::Variable(name) = part else {
            continue;
        };
        match variables.get(name).map(|v| v.kind) {
            None => problems.push(
                path,
                DetailCode::InvalidValue,
                "names an undeclared variable",
            ),
            Some(VariableType::Password) if !(whole && is_password_place(path)) => problems.push(
                path,
                DetailCode::InvalidValue,
                "uses a password variable: only agent.harnessAuth.secret or a Secret binding's source.id may",
            ),
            Some(VariableType::Number | VariableType::Boolean) if !whole => problems.push(
                path,
                DetailCode::InvalidValue,
                "embeds a non-string variable in text",
            ),
            Some(_) => {}
        }
    }
}

/// `configuration.values` of a valid template with each variable that has a default filled in
/// (references without one stay as text): what the Configuration Driver validates a Preset by.
pub fn values_with_defaults(template: &Value) -> Value {
    let variables = template
        .get("variables")
        .map(|v| parse_variables(v, "/template/variables", &mut Problems::new()))
        .unwrap_or_default();
    render_values(template, &defaults(variables))
}

/// The variables' defaults by name.
fn defaults(variables: BTreeMap<String, Variable>) -> BTreeMap<String, Value> {
    variables
        .into_iter()
        .filter_map(|(name, var)| var.default.map(|d| (name, d)))
        .collect()
}

/// `configuration.values` of `template` (`{}` without one) with `values` filled in.
fn render_values(template: &Value, values: &BTreeMap<String, Value>) -> Value {
    match template.pointer("/configuration/values") {
        Some(document) => render(document, values),
        None => Value::Object(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns() -> NamespaceId {
        NamespaceId::generate()
    }

    fn check(template: Value) -> Result<Value, Vec<(String, DetailCode)>> {
        let mut problems = Problems::new();
        match parse_template(&template, &ns(), &mut problems) {
            Some(v) => Ok(v),
            None => Err(problems
                .items()
                .iter()
                .map(|p| (p.path.clone(), p.code))
                .collect()),
        }
    }

    fn paths(r: Result<Value, Vec<(String, DetailCode)>>) -> Vec<String> {
        r.expect_err("refused")
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn references_split_into_pieces() {
        assert_eq!(
            pieces("{{ vars.model }}").unwrap(),
            vec![Piece::Variable("model".into())]
        );
        assert_eq!(
            pieces("openai/{{vars.model}}!").unwrap(),
            vec![
                Piece::Text("openai/".into()),
                Piece::Variable("model".into()),
                Piece::Text("!".into())
            ]
        );
        // Escapes, other braces and shell-style references stay literal.
        assert_eq!(
            pieces("\\{{ vars.x }} {{ env.Y }} ${APP_SERVER_URL}").unwrap(),
            vec![Piece::Text(
                "{{ vars.x }} {{ env.Y }} ${APP_SERVER_URL}".into()
            )]
        );
        assert_eq!(pieces("{{ vars.x"), Err(MalformedReference));
        assert_eq!(pieces("{{ vars.1x }}"), Err(MalformedReference));
        assert_eq!(pieces("{{ vars. }}"), Err(MalformedReference));
        assert_eq!(pieces("ünïcode {{ vars.a }}").unwrap().len(), 2);
    }

    #[test]
    fn a_whole_template_is_admitted_and_normalized() {
        let ns = ns();
        let template = json!({
            "variables": {
                "name": {"type": "string", "description": "The Agent's name"},
                "model": {"type": "string", "default": "gpt-5"},
                "port": {"type": "number", "default": 8080},
                "modelSecret": {"type": "password"}
            },
            "agent": {
                "name": "{{ vars.name }}",
                "executionMode": "embedded",
                "harnessAuth": {"method": "api_key", "secret": "{{ vars.modelSecret }}"},
                "initialWorkspaceFiles": {"AGENTS.md": "Be {{ vars.name }}."}
            },
            "configuration": {
                "values": {
                    "agents": {"defaults": {"model": "openai/{{ vars.model }}"}},
                    "gateway": {"port": "{{ vars.port }}"},
                    "models": {"providers": {"{{ vars.name }}": {"baseUrl": "http://x"}}}
                },
                "secretBindings": {"MODEL_KEY": {"source": {"kind": "secret", "id": "{{ vars.name }}"}}}
            }
        });
        let mut problems = Problems::new();
        let out = parse_template(&template, &ns, &mut problems).expect("admitted");
        assert_eq!(
            out["configuration"]["secretBindings"]["MODEL_KEY"],
            json!({"source": {"kind": "secret", "id": "{{ vars.name }}", "namespaceId": ns.to_string()},
                   "delivery": {"type": "env"}})
        );
        let values = values_with_defaults(&out);
        assert_eq!(values["agents"]["defaults"]["model"], "openai/gpt-5");
        assert_eq!(
            values["gateway"]["port"], 8080,
            "a whole reference keeps its type"
        );
        assert!(
            values["models"]["providers"]
                .get("{{ vars.name }}")
                .is_some(),
            "a reference without a default stays as written: {values}"
        );
    }

    #[test]
    fn variable_declarations_are_checked() {
        let refused = paths(check(json!({"variables": {
            "1bad": {"type": "string"},
            "kind": {"type": "date"},
            "pw": {"type": "password", "default": "hunter2"},
            "n": {"type": "number", "default": "seven"},
            "extra": {"type": "string", "label": "x"},
            "missing": {}
        }})));
        for path in [
            "/template/variables/1bad",
            "/template/variables/kind/type",
            "/template/variables/pw/default",
            "/template/variables/n/default",
            "/template/variables/extra/label",
            "/template/variables/missing/type",
        ] {
            assert!(refused.contains(&path.to_owned()), "{path}: {refused:?}");
        }
    }

    #[test]
    fn references_must_be_declared_well_formed_and_in_their_place() {
        let refused = paths(check(json!({
            "variables": {
                "flag": {"type": "boolean"},
                "pw": {"type": "password"},
                "s": {"type": "string"}
            },
            "agent": {
                "name": "{{ vars.nope }}",
                "executionMode": "mode-{{ vars.flag }}",
                "backendId": "{{ vars.pw }}",
                "plugins": {"{{ vars.s }}": true}
            },
            "configuration": {"values": {"a": "{{ vars.s", "b": {"{{ vars.flag }}": 1}}}
        })));
        for path in [
            "/template/agent/name",
            "/template/agent/executionMode",
            "/template/agent/backendId",
            "/template/agent/plugins/{{ vars.s }}",
            "/template/configuration/values/a",
            "/template/configuration/values/b/{{ vars.flag }}",
        ] {
            assert!(refused.contains(&path.to_owned()), "{path}: {refused:?}");
        }
    }

    #[test]
    fn a_credential_never_lives_in_a_preset() {
        let literal =
            json!({"agent": {"harnessAuth": {"method": "api_key", "secret": "sk-live-123"}}});
        assert_eq!(
            paths(check(literal)),
            vec!["/template/agent/harnessAuth/secret"]
        );
        let string_var = json!({
            "variables": {"k": {"type": "string"}},
            "agent": {"harnessAuth": {"method": "api_key", "secret": "{{ vars.k }}"}}
        });
        assert_eq!(
            paths(check(string_var)),
            vec!["/template/agent/harnessAuth/secret"]
        );
        let other_ns = NamespaceId::generate();
        let foreign = json!({"agent": {"harnessAuth": {"method": "codex_pat",
            "source": {"kind": "secret", "namespaceId": other_ns.to_string(), "id": SecretId::generate().to_string()}}}});
        assert_eq!(
            paths(check(foreign)),
            vec!["/template/agent/harnessAuth/source/namespaceId"]
        );
        assert!(check(json!({"agent": {"harnessAuth": null}})).is_ok());
        assert!(check(json!({"agent": {"harnessAuth": {"method": "runtime"}}})).is_ok());
    }

    #[test]
    fn a_password_may_name_the_secret_of_a_binding_and_nothing_else_there() {
        let vars = json!({"key": {"type": "password"}});
        let bound = json!({"variables": vars, "configuration": {"secretBindings": {
            "MODEL_KEY": {"source": {"kind": "secret", "id": "{{ vars.key }}"}}}}});
        assert!(check(bound).is_ok());
        for (template, path) in [
            (
                json!({"variables": vars, "configuration": {"secretBindings": {
                    "MODEL_KEY": {"source": {"kind": "secret", "id": "sec-{{ vars.key }}"}}}}}),
                "/template/configuration/secretBindings/MODEL_KEY/source/id",
            ),
            (
                json!({"variables": vars, "configuration": {"values": {"k": "{{ vars.key }}"}}}),
                "/template/configuration/values/k",
            ),
            (
                json!({"variables": vars, "configuration": {"secretBindings": {
                    "MODEL_KEY": {"source": {"kind": "{{ vars.key }}", "id": SecretId::generate().to_string()}}}}}),
                "/template/configuration/secretBindings/MODEL_KEY/source/kind",
            ),
        ] {
            assert!(paths(check(template)).contains(&path.to_owned()), "{path}");
        }
    }

    #[test]
    fn shapes_and_bounds_are_checked() {
        assert_eq!(paths(check(json!({"extra": 1}))), vec!["/template/extra"]);
        assert_eq!(
            paths(check(json!({"agent": {"color": "red"}}))),
            vec!["/template/agent/color"]
        );
        assert_eq!(
            paths(check(
                json!({"agent": {"repositoryAccess": [], "repositoryBindings": []}})
            )),
            vec!["/template/agent/repositoryBindings"]
        );
        assert_eq!(
            paths(check(
                json!({"agent": {"initialWorkspaceFiles": {"NOTES.md": "x"}}})
            )),
            vec!["/template/agent/initialWorkspaceFiles/NOTES.md"]
        );
        assert_eq!(
            paths(check(json!({"configuration": {"values": []}}))),
            vec!["/template/configuration/values"]
        );
        assert_eq!(
            paths(check(json!({"configuration": {"secretBindings": {"PATH": {
                "source": {"kind": "secret", "id": SecretId::generate().to_string()}}}}}))),
            vec!["/template/configuration/secretBindings/PATH"]
        );
        let mut deep = json!(1);
        for _ in 0..70 {
            deep = json!([deep]);
        }
        let r = check(json!({"configuration": {"values": {"x": deep}}}));
        assert_eq!(
            r.unwrap_err(),
            vec![("/template".into(), DetailCode::TooDeep)]
        );
        let big = "x".repeat(TEMPLATE_MAX_BYTES);
        let r = check(json!({"configuration": {"values": {"x": big}}}));
        assert_eq!(
            r.unwrap_err(),
            vec![("/template".into(), DetailCode::TooLong)]
        );
        assert_eq!(check(json!({})).unwrap(), json!({}));
    }

    #[test]
    fn the_built_in_presets_are_admitted_as_written() {
        let ns = ns();
        for builtin in BuiltinPreset::ALL {
            let mut problems = Problems::new();
            let template = builtin.template();
            let admitted = parse_template(&template, &ns, &mut problems);
            assert!(problems.is_empty(), "{builtin:?}: {problems:?}");
            let preset = builtin.preset(&ns, Timestamp::now());
            assert!(preset.is_unchanged_seed());
            assert_eq!(
                Some(&preset.template),
                admitted.as_ref(),
                "stored as admitted"
            );
            let renamed = Preset {
                name: "Mine".parse().unwrap(),
                ..preset.clone()
            };
            assert!(!renamed.is_unchanged_seed(), "a renamed copy is the user's");
            let mut changed = template.clone();
            changed["agent"]["name"] = serde_json::json!("x");
            let edited = Preset {
                template: changed,
                ..preset
            };
            assert!(!edited.is_unchanged_seed(), "{builtin:?}");
        }
    }

    #[test]
    fn rendering_is_one_pass() {
        let values: BTreeMap<String, Value> = [
            ("a".to_owned(), json!("{{ vars.b }}")),
            ("b".to_owned(), json!("never")),
        ]
        .into();
        assert_eq!(
            render(&json!("x {{ vars.a }}"), &values),
            json!("x {{ vars.b }}")
        );
    }
}
