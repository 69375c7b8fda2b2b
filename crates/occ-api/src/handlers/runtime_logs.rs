//! `GET …/deployments/{deploymentId}/runtime/logs`: one page of a revision's runtime output,
//! or (`download=true`) the same records as a `text/plain` attachment. The only API route that
//! takes query parameters: each is checked against the reference's pattern here, unknown or
//! repeated ones are refused.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use occ_controller::runtime_logs::{LogLevel, LogRequest, LogSource};
use occ_core::Error;
use occ_core::error::DetailCode;

use crate::envelope::ok;
use crate::error::ApiError;
use crate::extract::{Ctx, Params};
use crate::openapi::{Data, ErrorBody};
use crate::state::AppState;
use crate::views::RuntimeLogPageView;

/// Whether `path` is the logs route (the one API route with a query string).
pub fn takes_query(path: &str) -> bool {
    path.starts_with("/namespaces/") && path.ends_with("/runtime/logs")
}

/// Read a revision's runtime output: classified, redacted, bounded, paged with a signed cursor.
#[utoipa::path(get, path = "/namespaces/{namespaceId}/agents/{agentId}/deployments/{deploymentId}/runtime/logs", operation_id = "getAgentDeploymentRuntimeLogs", tag = "Agent deployments",
    params(("namespaceId" = String, Path), ("agentId" = String, Path), ("deploymentId" = String, Path),
        ("source" = String, Query, description = "gateway | agent | sandbox"),
        ("pod" = Option<String>, Query), ("previous" = Option<String>, Query, description = "true | false"),
        ("tailLines" = Option<String>, Query, description = "1–1000"), ("sinceSeconds" = Option<String>, Query, description = "1–86400"),
        ("minLevel" = Option<String>, Query, description = "error | warn | info | debug"),
        ("cursor" = Option<String>, Query), ("download" = Option<String>, Query, description = "true | false")),
    responses((status = 200, body = Data<RuntimeLogPageView>, content_type = "application/json"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 500, body = ErrorBody), (status = 501, body = ErrorBody),
        (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)))]
pub async fn get_runtime_logs(
    State(s): State<AppState>,
    p: Params,
    ctx: Ctx,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let ask = parse_query(query.as_deref().unwrap_or(""))?;
    let (ns, agent, revision) = (p.ns()?, p.agent()?, p.revision()?);
    let page = s
        .controller
        .runtime_logs(&ctx.req, ns, agent, revision, &ask)
        .await?;
    if !ask.download {
        return Ok(ok(RuntimeLogPageView::from(&page)).into_response());
    }
    let file = format!("{agent}-{revision}-{}.log", page.source.as_str());
    let mut response = page.download_text().into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    Ok(response)
}

fn invalid(name: &str, code: DetailCode, message: &str) -> ApiError {
    ApiError(Error::invalid_field(
        format!("/query/{name}"),
        code,
        message,
    ))
}

/// The query, checked parameter by parameter (values are plain tokens: nothing to decode).
fn parse_query(query: &str) -> Result<LogRequest, ApiError> {
    let mut ask = LogRequest::default();
    let mut seen = std::collections::BTreeSet::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !seen.insert(name.to_owned()) {
            return Err(invalid(
                name,
                DetailCode::InvalidValue,
                "A query parameter is repeated",
            ));
        }
        let bad = || {
            invalid(
                name,
                DetailCode::InvalidFormat,
                "The query parameter's value is invalid",
            )
        };
        match name {
            "source" => {
                ask.source = Some(match value {
                    "gateway" => LogSource::Gateway,
                    "agent" => LogSource::Agent,
                    "sandbox" => LogSource::Sandbox,
                    _ => return Err(bad()),
                });
            }
            "pod" => {
                if !dns_name(value) {
                    return Err(bad());
                }
                ask.pod = Some(value.to_owned());
            }
            "previous" => ask.previous = boolean(value).ok_or_else(bad)?,
            "download" => ask.download = boolean(value).ok_or_else(bad)?,
            "tailLines" => ask.tail_lines = Some(bounded(value, 1000).ok_or_else(bad)? as usize),
            "sinceSeconds" => ask.since_seconds = Some(bounded(value, 86_400).ok_or_else(bad)?),
            "minLevel" => {
                ask.min_level = Some(match value {
                    "error" => LogLevel::Error,
                    "warn" => LogLevel::Warn,
                    "info" => LogLevel::Info,
                    "debug" => LogLevel::Debug,
                    _ => return Err(bad()),
                });
            }
            "cursor" => {
                if !cursor_shape(value) {
                    return Err(bad());
                }
                ask.cursor = Some(value.to_owned());
            }
            _ => {
                return Err(invalid(
                    name,
                    DetailCode::UnknownField,
                    "Unknown query parameter",
                ));
            }
        }
    }
    if ask.source.is_none() {
        return Err(invalid(
            "source",
            DetailCode::Required,
            "source is required",
        ));
    }
    Ok(ask)
}

fn boolean(value: &str) -> Option<bool> {
    match value {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A decimal in `1..=max` without leading zeros.
fn bounded(value: &str, max: u64) -> Option<u64> {
    if value.is_empty() || value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().filter(|n| (1..=max).contains(n))
}

/// `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`, 1–253 characters.
fn dns_name(value: &str) -> bool {
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = value.as_bytes();
    (1..=253).contains(&b.len())
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|&c| edge(c) || c == b'-' || c == b'.')
}

/// `^v1\.[A-Za-z0-9_-]{1,1900}\.[A-Za-z0-9_-]{43}$` (at most 2048 characters).
fn cursor_shape(value: &str) -> bool {
    let b64 = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    };
    let mut parts = value.split('.');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("v1"), Some(payload), Some(signature), None)
            if (1..=1900).contains(&payload.len()) && b64(payload)
                && signature.len() == 43 && b64(signature)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_checked_against_the_reference_patterns() {
        let ask = parse_query(
            "source=gateway&tailLines=1000&sinceSeconds=86400&minLevel=warn&download=true",
        )
        .unwrap();
        assert_eq!(ask.source, Some(LogSource::Gateway));
        assert_eq!(ask.tail_lines, Some(1000));
        assert_eq!(ask.since_seconds, Some(86_400));
        assert_eq!(ask.min_level, Some(LogLevel::Warn));
        assert!(ask.download);
        for bad in [
            "",
            "tailLines=5",
            "source=gateway&tailLines=0",
            "source=gateway&tailLines=1001",
            "source=gateway&tailLines=01",
            "source=gateway&sinceSeconds=86401",
            "source=gateway&minLevel=trace",
            "source=gateway&previous=yes",
            "source=gateway&pod=-bad",
            "source=gateway&cursor=v1.abc.short",
            "source=gateway&source=agent",
            "source=gateway&other=1",
            "source=nope",
        ] {
            assert!(parse_query(bad).is_err(), "{bad} accepted");
        }
        let cursor = format!("v1.abc.{}", "A".repeat(43));
        assert!(parse_query(&format!("source=agent&cursor={cursor}&pod=gw-0.x")).is_ok());
    }
}
