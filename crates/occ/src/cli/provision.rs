//! `occ agent provision …`: a Configuration and an Agent created and deployed in one step
//! (`provisionAgent`), from one of the Namespace's Presets or from a body file, followed step by
//! step with `--wait`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use occ_core::preset::{Piece, pieces, render};
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::client::Client;
use super::follow::{FollowArgs, follow_deployment};
use super::render::read_json;
use super::secret::{make_secret, remove_made_secrets};

/// `occ agent provision`
#[derive(Debug, Args)]
pub struct ProvisionArgs {
    /// The Preset to start from: its id (`pre_…`) or its name (`occ preset list`).
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    preset: Option<String>,
    /// The Agent's name (fills the Preset's `name` variable).
    #[arg(long)]
    name: Option<String>,
    /// A Preset variable, `NAME=VALUE` (repeatable); `NAME=@PATH` reads the value from a file.
    /// A `password` variable's value is kept as a Secret of the Namespace (`<agent>-<NAME>`)
    /// that the Agent is given; it is never sent anywhere else.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    vars: Vec<String>,
    /// A saved connection (`occ credential-source`, its id or name) for the Preset's model
    /// provider: its key's Secret fills each `password` variable not given with `--var`, and
    /// its base URL a `baseUrl` variable not given (no key is typed or stored again).
    #[arg(long, conflicts_with = "file", value_name = "CONNECTION")]
    connection: Option<String>,
    /// A `provisionAgent` body instead of a Preset (`requestId` may be left out).
    #[arg(long)]
    file: Option<PathBuf>,
    /// The idempotency key (`req_<uuid>`; default: a new one). Sending the same request with
    /// the same key again returns the same job.
    #[arg(long, value_name = "REQUEST_ID")]
    request_id: Option<String>,
    #[command(flatten)]
    follow: FollowArgs,
}

/// `occ agent provision`: admits the job, then prints it or follows it with `--wait`.
pub(super) async fn agent_provision(c: &Client, args: ProvisionArgs) -> anyhow::Result<()> {
    let ns = c.ns()?.to_owned();
    let request_id = args
        .request_id
        .clone()
        .unwrap_or_else(|| occ_core::RequestId::generate().to_string());
    let mut made_secrets = Vec::new();
    let body = match (&args.file, &args.preset) {
        (Some(file), _) => {
            let mut body = read_json(file)?;
            let Some(object) = body.as_object_mut() else {
                bail!("--file {}: a JSON object is required", file.display());
            };
            object
                .entry("requestId")
                .or_insert_with(|| Value::String(request_id.clone()));
            body
        }
        (None, Some(preset)) => {
            let preset = find_preset(c, &ns, preset).await?;
            let connection = match &args.connection {
                Some(wanted) => Some(find_connection(c, &ns, wanted).await?),
                None => None,
            };
            let filled = fill(&preset, &args, connection.as_ref())?;
            from_preset(c, &ns, filled, &request_id, &mut made_secrets).await?
        }
        (None, None) => bail!("give --preset or --file"),
    };
    let admitted = c
        .call(
            Method::POST,
            &format!("/namespaces/{ns}/agents/provision"),
            Some(body),
        )
        .await;
    let admitted = match admitted {
        Ok(v) => v,
        Err(e) => {
            // Nothing was queued: the Secrets made for this attempt go again.
            remove_made_secrets(c, &ns, &made_secrets).await;
            return Err(e);
        }
    };
    let job = &admitted["provisioning"];
    follow_job(c, &ns, job, &args.follow).await
}

/// `occ agent provisioning <workId>` and `occ agent provision-retry <workId>`.
pub(super) async fn agent_provisioning(
    c: &Client,
    work_id: &str,
    retry: bool,
    follow: &FollowArgs,
) -> anyhow::Result<()> {
    let ns = c.ns()?.to_owned();
    let path = format!("/namespaces/{ns}/agents/provision/{work_id}");
    let job = if retry {
        c.call(Method::POST, &format!("{path}/retry"), None).await?
    } else {
        c.call(Method::GET, &path, None).await?
    };
    follow_job(c, &ns, &job, follow).await
}

/// Prints the job, or with `--wait` follows it step by step and then its deployment.
async fn follow_job(c: &Client, ns: &str, job: &Value, follow: &FollowArgs) -> anyhow::Result<()> {
    if !follow.wait {
        return c.print(
            job,
            &["workId", "status", "phase", "agentId", "revisionId", "url"],
        );
    }
    let work = job["workId"]
        .as_str()
        .ok_or_else(|| anyhow!("the response has no workId"))?
        .to_owned();
    let url = job["url"].as_str().unwrap_or_default().to_owned();
    eprintln!("Provisioning {work} admitted.");
    let limit = follow.limit();
    let started = Instant::now();
    let mut last = String::new();
    let done = loop {
        let job = c.call(Method::GET, &url, None).await?;
        let line = format!(
            "{} ({})",
            job["status"].as_str().unwrap_or("unknown"),
            job["phase"].as_str().unwrap_or("unknown")
        );
        if line != last {
            eprintln!("[{:>4}s] {line}", started.elapsed().as_secs());
            last = line;
        }
        match job["status"].as_str() {
            Some("succeeded") => break job,
            Some("failed") => {
                c.print(&job, &[])?;
                bail!(
                    "provisioning failed at {}: {} {} (fix the cause, then `occ agent provision-retry {work}`)",
                    job["phase"].as_str().unwrap_or("a step"),
                    job["error"]["code"].as_str().unwrap_or("UNKNOWN"),
                    job["error"]["message"].as_str().unwrap_or("")
                );
            }
            _ => {}
        }
        if started.elapsed() > limit {
            bail!(
                "provisioning did not finish within {} seconds (it continues: `occ agent provisioning {work}`)",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let (Some(agent), Some(revision)) = (done["agentId"].as_str(), done["revisionId"].as_str())
    else {
        bail!("the finished job names no Agent or revision: {done}");
    };
    eprintln!("Agent {agent} created; deployment {revision} admitted.");
    follow_deployment(
        c,
        &format!("/namespaces/{ns}/agents/{agent}/deployments/{revision}"),
        limit.saturating_sub(started.elapsed()),
    )
    .await
}

/// The Preset named by id or by name.
async fn find_preset(c: &Client, ns: &str, wanted: &str) -> anyhow::Result<Value> {
    let list = c
        .call(Method::GET, &format!("/namespaces/{ns}/presets"), None)
        .await?;
    let presets = list.as_array().cloned().unwrap_or_default();
    presets
        .iter()
        .find(|p| p["id"] == wanted)
        .or_else(|| presets.iter().find(|p| p["name"] == wanted))
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = presets.iter().filter_map(|p| p["name"].as_str()).collect();
            anyhow!(
                "no Preset {wanted:?} in this Namespace; it has: {}",
                names.join(", ")
            )
        })
}

/// A Preset's template with its variables' values, passwords apart.
struct Filled {
    template: Value,
    values: BTreeMap<String, Value>,
    passwords: BTreeMap<String, Password>,
}

/// A `password` variable's value.
enum Password {
    /// Typed: kept as a new Secret first.
    Typed(String),
    /// An existing Secret's id (a saved connection's key).
    Secret(String),
}

/// What a saved connection gives a Preset.
struct Connection {
    /// The Secret holding its key.
    key_secret: String,
    /// Its base URL, or its provider's public endpoint.
    base_url: String,
}

/// The credential source named by id or by name.
async fn find_connection(c: &Client, ns: &str, wanted: &str) -> anyhow::Result<Connection> {
    let list = c
        .call(
            Method::GET,
            &format!("/namespaces/{ns}/credential-sources"),
            None,
        )
        .await?;
    let sources = list.as_array().cloned().unwrap_or_default();
    let source = sources
        .iter()
        .find(|s| s["id"] == wanted)
        .or_else(|| sources.iter().find(|s| s["name"] == wanted))
        .ok_or_else(|| {
            let names: Vec<&str> = sources.iter().filter_map(|s| s["name"].as_str()).collect();
            anyhow!(
                "no credential source {wanted:?} in this Namespace; it has: {}",
                names.join(", ")
            )
        })?;
    let key_secret = source["secrets"]["api_key"]["id"]
        .as_str()
        .ok_or_else(|| anyhow!("the credential source {wanted:?} names no api_key Secret"))?
        .to_owned();
    let base_url = match (
        source["config"]["base_url"].as_str(),
        source["type"].as_str(),
    ) {
        (Some(url), _) => url.to_owned(),
        (None, Some("anthropic")) => "https://api.anthropic.com/v1".to_owned(),
        (None, _) => "https://api.openai.com/v1".to_owned(),
    };
    Ok(Connection {
        key_secret,
        base_url,
    })
}

/// Reads `--name` and `--var` against the Preset's variables: each declared, typed as declared,
/// every variable without a default given.
fn fill(
    preset: &Value,
    args: &ProvisionArgs,
    connection: Option<&Connection>,
) -> anyhow::Result<Filled> {
    let template = preset["template"].clone();
    let declared = template["variables"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut given: BTreeMap<String, String> = BTreeMap::new();
    for pair in &args.vars {
        let (name, raw) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("--var {pair}: NAME=VALUE is required"))?;
        let value = match raw.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("--var {name}=@{path}"))?
                .trim_end_matches(['\n', '\r'])
                .to_owned(),
            None => raw.to_owned(),
        };
        if !declared.contains_key(name) {
            let names: Vec<&str> = declared.keys().map(String::as_str).collect();
            bail!(
                "the Preset has no variable {name}; its variables: {}",
                names.join(", ")
            );
        }
        given.insert(name.to_owned(), value);
    }
    if let Some(name) = &args.name
        && declared.contains_key("name")
    {
        given.entry("name".into()).or_insert_with(|| name.clone());
    }
    if let Some(connection) = connection
        && declared.contains_key("baseUrl")
    {
        given
            .entry("baseUrl".into())
            .or_insert_with(|| connection.base_url.clone());
    }
    let (mut values, mut passwords, mut missing) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
    for (name, spec) in &declared {
        let kind = spec["type"].as_str().unwrap_or("string");
        let Some(raw) = given.remove(name) else {
            if let (Some(connection), "password") = (connection, kind) {
                passwords.insert(
                    name.clone(),
                    Password::Secret(connection.key_secret.clone()),
                );
                continue;
            }
            match spec.get("default") {
                Some(default) => {
                    values.insert(name.clone(), default.clone());
                }
                None => missing.push(name.clone()),
            }
            continue;
        };
        let value = match kind {
            "password" => {
                passwords.insert(name.clone(), Password::Typed(raw));
                continue;
            }
            "number" => raw
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| anyhow!("--var {name}: a number is required"))?,
            "boolean" => match raw.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => bail!("--var {name}: true or false is required"),
            },
            _ => Value::String(raw),
        };
        values.insert(name.clone(), value);
    }
    if !missing.is_empty() {
        bail!(
            "the Preset needs a value for: {} (--var NAME=VALUE)",
            missing.join(", ")
        );
    }
    Ok(Filled {
        template,
        values,
        passwords,
    })
}

/// The `provisionAgent` body a filled Preset describes; each password variable becomes a Secret
/// of the Namespace first, whose id stands where the template names the password (a binding's
/// `source.id`; `agent.harnessAuth.secret` becomes the harness's `source`).
async fn from_preset(
    c: &Client,
    ns: &str,
    filled: Filled,
    request_id: &str,
    made_secrets: &mut Vec<String>,
) -> anyhow::Result<Value> {
    let named = render(&filled.template, &filled.values);
    let name = named["agent"]["name"]
        .as_str()
        .filter(|n| !n.contains("{{"))
        .ok_or_else(|| anyhow!("the Preset names no Agent: give --name"))?
        .to_owned();
    let mut values = filled.values.clone();
    for (var, password) in &filled.passwords {
        let value = match password {
            Password::Secret(id) => {
                values.insert(var.clone(), Value::String(id.clone()));
                continue;
            }
            Password::Typed(value) => value,
        };
        let id = make_secret(c, ns, &format!("{name}-{var}"), value).await?;
        made_secrets.push(id.clone());
        values.insert(var.clone(), Value::String(id));
    }
    let rendered = render(&filled.template, &values);
    let agent = rendered["agent"].as_object().cloned().unwrap_or_default();
    let mut body = Map::new();
    body.insert("requestId".into(), json!(request_id));
    body.insert("name".into(), json!(name));
    let configuration = &rendered["configuration"];
    let mut cfg = json!({"kind": "agent", "values": configuration.get("values").cloned().unwrap_or(json!({}))});
    if let Some(bindings) = configuration
        .get("secretBindings")
        .filter(|b| b.as_object().is_some_and(|o| !o.is_empty()))
    {
        cfg["secretBindings"] = bindings.clone();
    }
    body.insert("configuration".into(), cfg);
    for key in ["executionMode", "backendId", "initialWorkspaceFiles"] {
        if let Some(v) = agent.get(key) {
            body.insert(key.into(), v.clone());
        }
    }
    if let Some(auth) = agent.get("harnessAuth") {
        let secret_var = filled.template["agent"]["harnessAuth"]["secret"]
            .as_str()
            .and_then(|s| match pieces(s).ok()?.as_slice() {
                [Piece::Variable(v)] => Some(v.clone()),
                _ => None,
            });
        let auth = match secret_var {
            Some(var) => {
                let id = values
                    .get(&var)
                    .filter(|_| filled.passwords.contains_key(&var))
                    .ok_or_else(|| anyhow!("the Preset needs --var {var}=VALUE (a password)"))?;
                json!({"method": auth["method"], "source": {"kind": "secret", "namespaceId": ns, "id": id}})
            }
            None => auth.clone(),
        };
        body.insert("harnessAuth".into(), auth);
    }
    Ok(Value::Object(body))
}
