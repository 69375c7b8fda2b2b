//! Request bodies → controller inputs. Every body is a closed object: unknown fields, missing
//! fields and wrong types are reported together with JSON pointers (at most 32).

use occ_controller::agents::{AgentInput, AgentUpdate, Patch};
use occ_controller::auth::{AccountInput, KEY_TTL_RANGE, PASSWORD_CHARS, ServiceKeyInput};
use occ_controller::configurations::ConfigurationInput;
use occ_controller::iam::{BindingInput, RoleInput};
use occ_core::authz::{Action, Permission, ResourceKind};
use occ_core::inputs::{
    check_secret_value, parse_harness_auth, parse_initial_workspace_files, parse_secret_bindings,
};
use occ_core::resource::ExecutionMode;
use occ_core::validate::{
    Fields, Problems, expect_id, expect_int, expect_name, expect_str, type_name,
};
use occ_core::{DetailCode, Error, IamId, Name, NamespaceId};
use serde_json::Value;

fn optional_name(f: &mut Fields<'_>, key: &'static str, p: &mut Problems) -> Option<Option<Name>> {
    match f.optional(key) {
        None => Some(None),
        Some(v) => expect_name(v, &f.path_of(key), p).map(Some),
    }
}

fn iam_id(v: &Value, path: &str, p: &mut Problems) -> Option<IamId> {
    let s = expect_str(v, path, p)?;
    match s.parse() {
        Ok(id) => Some(id),
        Err(_) => {
            let code = if s.chars().count() > 200 {
                DetailCode::TooLong
            } else {
                DetailCode::InvalidFormat
            };
            p.push(
                path,
                code,
                "must have 1 to 200 characters without whitespace",
            );
            None
        }
    }
}

/// `{name, existingNamespace?}`.
pub fn namespace_create(body: &Value) -> Result<(Name, Option<String>), Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let name = f
        .required("name", &mut p)
        .and_then(|v| expect_name(v, "/name", &mut p));
    let existing = match f.optional("existingNamespace") {
        None => Some(None),
        Some(v) => expect_str(v, "/existingNamespace", &mut p).and_then(|s| {
            let ok = (1..=63).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !s.starts_with('-')
                && !s.ends_with('-');
            if !ok {
                p.push(
                    "/existingNamespace",
                    DetailCode::InvalidFormat,
                    "must be a Kubernetes namespace name",
                );
            }
            ok.then(|| Some(s.to_owned()))
        }),
    };
    f.finish(&mut p);
    p.finish(())?;
    Ok((name.expect("checked"), existing.expect("checked")))
}

fn configuration_common(
    f: &mut Fields<'_>,
    ns: &NamespaceId,
    p: &mut Problems,
) -> (
    Option<serde_json::Map<String, Value>>,
    Option<Option<occ_core::resource::SecretBindings>>,
) {
    let values = f
        .required("values", p)
        .and_then(|v| occ_core::native::validate_document(v, "/values", p).cloned());
    let bindings = match f.optional("secretBindings") {
        None => Some(None),
        Some(v) => parse_secret_bindings(v, "/secretBindings", ns, p).map(Some),
    };
    (values, bindings)
}

/// `{kind:"agent", values, secretBindings?}`.
pub fn configuration_create(body: &Value, ns: &NamespaceId) -> Result<ConfigurationInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    if let Some(kind) = f.required_str("kind", &mut p)
        && kind != "agent"
    {
        p.push("/kind", DetailCode::InvalidValue, "must be \"agent\"");
    }
    let (values, bindings) = configuration_common(&mut f, ns, &mut p);
    f.finish(&mut p);
    p.finish(())?;
    Ok(ConfigurationInput {
        values: values.expect("checked"),
        secret_bindings: bindings.expect("checked"),
    })
}

/// `{values, secretBindings?}` (kind, generation and ids are unknown fields).
pub fn configuration_update(body: &Value, ns: &NamespaceId) -> Result<ConfigurationInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let (values, bindings) = configuration_common(&mut f, ns, &mut p);
    f.finish(&mut p);
    p.finish(())?;
    Ok(ConfigurationInput {
        values: values.expect("checked"),
        secret_bindings: bindings.expect("checked"),
    })
}

fn secret_value(f: &mut Fields<'_>, p: &mut Problems) -> Option<String> {
    let v = f.required_str("value", p)?;
    check_secret_value(v, "/value", p).then(|| v.to_owned())
}

/// `{name, value}`.
pub fn secret_create(body: &Value) -> Result<(Name, String), Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let name = f
        .required("name", &mut p)
        .and_then(|v| expect_name(v, "/name", &mut p));
    let value = secret_value(&mut f, &mut p);
    f.finish(&mut p);
    p.finish(())?;
    Ok((name.expect("checked"), value.expect("checked")))
}

/// `{value}`.
pub fn secret_update(body: &Value) -> Result<String, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let value = secret_value(&mut f, &mut p);
    f.finish(&mut p);
    p.finish(())?;
    Ok(value.expect("checked"))
}

/// `{name}`.
pub fn service_account_create(body: &Value) -> Result<Name, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let name = f
        .required("name", &mut p)
        .and_then(|v| expect_name(v, "/name", &mut p));
    f.finish(&mut p);
    p.finish(())?;
    Ok(name.expect("checked"))
}

fn execution_mode(v: &Value, path: &str, p: &mut Problems) -> Option<ExecutionMode> {
    let s = expect_str(v, path, p)?;
    let mode = ExecutionMode::parse(s);
    if mode.is_none() {
        p.push(
            path,
            DetailCode::InvalidValue,
            "must be \"embedded\" or \"dedicated\"",
        );
    }
    mode
}

fn backend_id(v: &Value, path: &str, p: &mut Problems) -> Option<Option<String>> {
    if v.is_null() {
        return Some(None);
    }
    expect_name(v, path, p).map(|n| Some(n.to_string()))
}

/// Agent creation.
pub fn agent_create(body: &Value, ns: &NamespaceId) -> Result<AgentInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let name = f
        .required("name", &mut p)
        .and_then(|v| expect_name(v, "/name", &mut p));
    let cfg = f
        .required("configurationId", &mut p)
        .and_then(|v| expect_id(v, "/configurationId", "cfg", &mut p));
    let mode = match f.optional("executionMode") {
        None => Some(ExecutionMode::Embedded),
        Some(v) => execution_mode(v, "/executionMode", &mut p),
    };
    let backend = match f.optional("backendId") {
        None => Some(None),
        Some(v) => backend_id(v, "/backendId", &mut p),
    };
    let auth = match f.optional("harnessAuth") {
        None => Some(None),
        Some(v) => parse_harness_auth(v, "/harnessAuth", ns, &mut p),
    };
    let files = match f.optional("initialWorkspaceFiles") {
        None => Some(None),
        Some(v) => parse_initial_workspace_files(v, "/initialWorkspaceFiles", &mut p),
    };
    let defaults = match f.optional("workspaceDefaultsId") {
        None => Some(None),
        Some(v) => expect_str(v, "/workspaceDefaultsId", &mut p).and_then(|s| {
            let ok = s.len() == 64
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !ok {
                p.push(
                    "/workspaceDefaultsId",
                    DetailCode::InvalidFormat,
                    "must be 64 lowercase hexadecimal characters",
                );
            }
            ok.then(|| Some(s.to_owned()))
        }),
    };
    f.finish(&mut p);
    p.finish(())?;
    Ok(AgentInput {
        name: name.expect("checked"),
        configuration_id: cfg.expect("checked"),
        execution_mode: mode.expect("checked"),
        backend_id: backend.expect("checked"),
        harness_auth: auth.expect("checked"),
        initial_workspace_files: files.expect("checked"),
        workspace_defaults_id: defaults.expect("checked"),
    })
}

/// Agent update: `configurationId` required; omitted keeps, `null` clears.
pub fn agent_update(body: &Value, ns: &NamespaceId) -> Result<AgentUpdate, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let cfg = f
        .required("configurationId", &mut p)
        .and_then(|v| expect_id(v, "/configurationId", "cfg", &mut p));
    let mode = match f.optional("executionMode") {
        None => Some(None),
        Some(v) => execution_mode(v, "/executionMode", &mut p).map(Some),
    };
    let backend = match f.optional("backendId") {
        None => Some(Patch::Keep),
        Some(v) => backend_id(v, "/backendId", &mut p).map(|b| b.map_or(Patch::Clear, Patch::Set)),
    };
    let auth = match f.optional("harnessAuth") {
        None => Some(Patch::Keep),
        Some(v) => parse_harness_auth(v, "/harnessAuth", ns, &mut p)
            .map(|a| a.map_or(Patch::Clear, Patch::Set)),
    };
    f.finish(&mut p);
    p.finish(())?;
    Ok(AgentUpdate {
        configuration_id: cfg.expect("checked"),
        execution_mode: mode.expect("checked"),
        backend_id: backend.expect("checked"),
        harness_auth: auth.expect("checked"),
    })
}

/// `{name?, permissions:[{action, resourceKind}]}`.
pub fn role_create(body: &Value) -> Result<RoleInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let name = optional_name(&mut f, "name", &mut p);
    let mut permissions = Vec::new();
    if let Some(list) = f.required("permissions", &mut p) {
        match list {
            Value::Array(items) if (1..=64).contains(&items.len()) => {
                for (i, item) in items.iter().enumerate() {
                    let base = format!("/permissions/{i}");
                    let mut pf = Fields::new(item, &base, &mut p);
                    let action = pf.required_str("action", &mut p).and_then(|s| {
                        let a = s.parse::<Action>().ok();
                        if a.is_none() {
                            p.push(
                                format!("{base}/action"),
                                DetailCode::InvalidValue,
                                "is not a known action",
                            );
                        }
                        a
                    });
                    let kind = pf.required_str("resourceKind", &mut p).and_then(|s| {
                        let k = s.parse::<ResourceKind>().ok();
                        if k.is_none() {
                            p.push(
                                format!("{base}/resourceKind"),
                                DetailCode::InvalidValue,
                                "is not a known resource kind",
                            );
                        }
                        k
                    });
                    pf.finish(&mut p);
                    if let (Some(a), Some(k)) = (action, kind) {
                        permissions.push(Permission::new(a, k));
                    }
                }
            }
            Value::Array(_) => p.push(
                "/permissions",
                DetailCode::InvalidValue,
                "must hold 1 to 64 permissions",
            ),
            other => p.push(
                "/permissions",
                DetailCode::InvalidType,
                format!("must be an array, not {}", type_name(other)),
            ),
        }
    }
    f.finish(&mut p);
    p.finish(())?;
    Ok(RoleInput {
        name: name.expect("checked").map(|n| n.to_string()),
        permissions,
    })
}

/// `{subjectKind:"identity", subjectId, roleId, resourceKind, resourceId}`.
pub fn binding_create(body: &Value) -> Result<BindingInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    if let Some(kind) = f.required_str("subjectKind", &mut p)
        && kind != "identity"
    {
        p.push(
            "/subjectKind",
            DetailCode::InvalidValue,
            "must be \"identity\"",
        );
    }
    let subject = f
        .required("subjectId", &mut p)
        .and_then(|v| iam_id(v, "/subjectId", &mut p));
    let role = f
        .required("roleId", &mut p)
        .and_then(|v| iam_id(v, "/roleId", &mut p));
    let kind = f.required_str("resourceKind", &mut p).and_then(|s| {
        let k = s.parse::<ResourceKind>().ok();
        if k.is_none() {
            p.push(
                "/resourceKind",
                DetailCode::InvalidValue,
                "is not a known resource kind",
            );
        }
        k
    });
    let resource = f.required_str("resourceId", &mut p).and_then(|s| {
        let ok = (1..=200).contains(&s.chars().count())
            && !s.chars().any(|c| c.is_whitespace() || c.is_control());
        if !ok {
            p.push(
                "/resourceId",
                DetailCode::InvalidFormat,
                "must have 1 to 200 characters without whitespace",
            );
        }
        ok.then(|| s.to_owned())
    });
    if f.optional("runtimeRole").is_some() {
        p.push(
            "/runtimeRole",
            DetailCode::InvalidValue,
            "is not supported by this installation",
        );
    }
    f.finish(&mut p);
    p.finish(())?;
    Ok(BindingInput {
        subject_id: subject.expect("checked"),
        role_id: role.expect("checked"),
        resource_kind: kind.expect("checked"),
        resource_id: resource.expect("checked"),
    })
}

fn password(f: &mut Fields<'_>, p: &mut Problems) -> Option<String> {
    let s = f.required_str("password", p)?;
    let n = s.chars().count();
    if n > PASSWORD_CHARS.1 {
        p.push(
            "/password",
            DetailCode::TooLong,
            "is too long (expected at most 128 characters)",
        );
        None
    } else if n < PASSWORD_CHARS.0 {
        p.push(
            "/password",
            DetailCode::InvalidValue,
            "is too short (expected at least 12 characters)",
        );
        None
    } else {
        Some(s.to_owned())
    }
}

fn email(f: &mut Fields<'_>, p: &mut Problems) -> Option<String> {
    let s = f.required_str("email", p)?;
    if s.chars().count() > 320 {
        p.push(
            "/email",
            DetailCode::TooLong,
            "is too long (expected at most 320 characters)",
        );
        return None;
    }
    let ok =
        s.len() >= 3 && s.contains('@') && !s.chars().any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        p.push(
            "/email",
            DetailCode::InvalidFormat,
            "must be an email address",
        );
    }
    ok.then(|| s.to_owned())
}

/// `{email, password}`.
pub fn sign_in(body: &Value) -> Result<(String, String), Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let e = email(&mut f, &mut p);
    let pw = password(&mut f, &mut p);
    f.finish(&mut p);
    p.finish(())?;
    Ok((e.expect("checked"), pw.expect("checked")))
}

/// `{email, password, name?, roleId?}`.
pub fn account_create(body: &Value) -> Result<AccountInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let e = email(&mut f, &mut p);
    let pw = password(&mut f, &mut p);
    let name = optional_name(&mut f, "name", &mut p);
    let role = match f.optional("roleId") {
        None => Some(None),
        Some(v) => iam_id(v, "/roleId", &mut p).map(Some),
    };
    f.finish(&mut p);
    p.finish(())?;
    Ok(AccountInput {
        email: e.expect("checked"),
        password: pw.expect("checked"),
        name: name.expect("checked").map(|n| n.to_string()),
        role_id: role.expect("checked"),
    })
}

/// `PUT …/workspace/files/{name}`: exactly `{content}` (≤ 16 KiB UTF-8, no NUL).
pub fn workspace_file_put(body: &Value) -> Result<String, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let content = f.required_str("content", &mut p).and_then(|s| {
        occ_core::inputs::check_workspace_content(s, "/content", &mut p).then(|| s.to_owned())
    });
    f.finish(&mut p);
    p.finish(())?;
    Ok(content.expect("checked"))
}

/// `{servicePrincipalId, namespaceId?, name, expiresIn?}`.
pub fn service_key_create(body: &Value) -> Result<ServiceKeyInput, Error> {
    let mut p = Problems::new();
    let mut f = Fields::new(body, "", &mut p);
    let sp = f
        .required("servicePrincipalId", &mut p)
        .and_then(|v| iam_id(v, "/servicePrincipalId", &mut p));
    let ns = match f.optional("namespaceId") {
        None => Some(None),
        Some(v) => expect_id::<NamespaceId>(v, "/namespaceId", "ns", &mut p).map(Some),
    };
    let name = f.required_str("name", &mut p).and_then(|s| {
        let n = s.chars().count();
        if n > 32 {
            p.push(
                "/name",
                DetailCode::TooLong,
                "is too long (expected at most 32 characters)",
            );
            None
        } else if n == 0 || s.trim().is_empty() {
            p.push("/name", DetailCode::InvalidFormat, "must not be blank");
            None
        } else {
            Some(s.to_owned())
        }
    });
    let expires = match f.optional("expiresIn") {
        None => Some(None),
        Some(v) => expect_int(v, "/expiresIn", KEY_TTL_RANGE.0, KEY_TTL_RANGE.1, &mut p).map(Some),
    };
    f.finish(&mut p);
    p.finish(())?;
    Ok(ServiceKeyInput {
        service_principal_id: sp.expect("checked"),
        namespace_id: ns.expect("checked"),
        name: name.expect("checked"),
        expires_in: expires.expect("checked"),
    })
}

#[cfg(test)]
mod fuzz;
