//! The native OpenClaw Control UI of an Agent, offered to people through occ
//! (`GET …/agents/{agt}/native-admin`, the Agent-origin proxy's admission and its audit).
//!
//! **Origins.** Each Agent gets its own browser origin, `agent-<opaque>.<domain>` with the
//! public origin's scheme and port, so one Agent's UI cannot script another's or the console.
//! The opaque part is an HMAC of the Agent's Namespace and id under the installation's session
//! secret: stable, not guessable from ids, and nothing to store.
//!
//! **Reaching the origin.** A person's console session never leaves the console's host. The
//! Agent origin, when it has no pass, sends the browser to the console's launch route, which
//! checks the session and the Agent, and answers with a one-time ticket (60 s) bound to that
//! Agent origin; the origin's callback exchanges it for a host-only, HttpOnly pass cookie. Both
//! are HMAC-signed (session id, Agent, host, revision, expiry); the pass is re-checked against
//! the live session (sign-out ends it), Agent `use` with a runtime role assignment, the Agent's
//! availability and its active revision — for each request, except that plain requests reuse an
//! admission for [`ADMISSION_REUSE`]. Tickets are one-time across API processes (their
//! redemptions are recorded in the store).
//!
//! **Open sockets** are re-authorized every [`LEASE_INTERVAL`] (and at once when their session
//! signs out on this process); a failed check closes them with a reason. Each socket's open and
//! close are audited with its connection id.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::Mac;
use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{AuthMethod, ResourceKind, ResourceRef};
use occ_core::native::control_ui;
use occ_core::resource::{Agent, DesiredRuntimeState};
use occ_core::{AgentId, Error, ErrorCode, NamespaceId, RequestId, RevisionId};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::authorization::{audit_in_own_transaction, found};
use crate::{Controller, Request};

mod launch;
mod origins;

pub use launch::{AgentPass, launch_binding, launch_nonce};
pub use origins::NativeAdminSettings;

const READ_ACTION: &str = "openclaw.agents.native_admin.read";
const RUNTIME_ROLES_ACTION: &str = "openclaw.agents.runtime_roles.list";
const PROXY_ACTION: &str = "openclaw.agents.native_admin.proxy.authorize";
const SOCKET_CONNECT_ACTION: &str = "openclaw.agents.native_admin.websocket.connect";
const SOCKET_CLOSE_ACTION: &str = "openclaw.agents.native_admin.websocket.close";
/// How often an open Control UI socket is re-authorized (the reference's 25 s; with the 5 s
/// bound on each check a revoked socket closes within 30 s).
pub const LEASE_INTERVAL: Duration = Duration::from_secs(25);
/// The bound on one re-authorization.
pub const LEASE_TIMEOUT: Duration = Duration::from_secs(5);
/// The path prefix the Agent origin keeps for occ (never proxied).
pub const RESERVED_PREFIX: &str = "/__occ/";
/// The Agent origin's ticket exchange.
pub const CALLBACK_PATH: &str = "/__occ/native-admin/callback";
/// The console's launch route.
pub const LAUNCH_PATH: &str = "/__occ/native-admin/launch";

/// Whether a person can open an Agent's Control UI now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NativeAdminStatus {
    /// The installation does not offer it.
    Disabled,
    /// The Agent is stopped.
    Stopped,
    /// The Agent's revision (or its Compute Driver) cannot serve it through occ.
    Unsupported,
    /// The Agent should run but has no serving revision yet.
    Unavailable,
    /// Open `url`.
    Available,
}

/// The answer of `GET …/native-admin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeAdminView {
    /// The status.
    pub status: NativeAdminStatus,
    /// The Agent's host, origin and active revision, and the URL (available only).
    pub target: Option<NativeAdminTarget>,
}

/// Where an Agent's Control UI is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeAdminTarget {
    /// `agent-<opaque>.<domain>`.
    pub host: String,
    /// Its origin.
    pub origin: String,
    /// The revision it serves.
    pub active_revision_id: RevisionId,
    /// The URL to open (`available` only).
    pub url: Option<String>,
}

/// A runtime role: its id and the native OpenClaw role definition it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeRole {
    /// The role's id.
    pub id: String,
    /// The native role (`sessions`, `agents`, `scopes`).
    pub permissions: serde_json::Value,
}

/// Whether occ's runtime enforces a runtime role of this name (stock OpenClaw cannot tell
/// people apart behind one trusted proxy identity, so only the shared administrator role).
pub fn offered_runtime_role(name: &str) -> bool {
    name == control_ui::RUNTIME_ROLE
}

/// Why a proxied request or socket was refused or closed (the reference's close reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyRefusal {
    /// No pass, a forged or expired one, or its session ended.
    SessionInvalid,
    /// The person lost `use` on the Agent.
    AuthorizationDenied,
    /// The Agent is stopped, gone or not serving.
    AgentUnavailable,
    /// Another revision serves now.
    RevisionChanged,
    /// The installation no longer offers the Control UI, or the revision does not.
    Disabled,
    /// A check could not complete in time.
    DependencyTimeout,
    /// A dependency failed.
    DependencyFailure,
    /// A launch ticket presented by a browser that did not start the launch.
    LaunchNotBound,
}

impl ProxyRefusal {
    /// The wire form (`session_invalid`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionInvalid => "session_invalid",
            Self::AuthorizationDenied => "authorization_denied",
            Self::AgentUnavailable => "agent_unavailable",
            Self::RevisionChanged => "revision_changed",
            Self::Disabled => "disabled",
            Self::DependencyTimeout => "dependency_timeout",
            Self::DependencyFailure => "dependency_failure",
            Self::LaunchNotBound => "launch_not_bound",
        }
    }
}

/// A proxied request or socket occ admitted: where to send it and on whose behalf.
#[derive(Debug, Clone)]
pub struct ProxyAdmission {
    /// The Agent.
    pub namespace_id: NamespaceId,
    /// The Agent.
    pub agent_id: AgentId,
    /// The revision the pass was issued for (and that still serves).
    pub revision_id: RevisionId,
    /// The Agent host.
    pub host: String,
    /// The person's console session.
    pub session_id: String,
    /// The gateway's `ws://127.0.0.1:PORT` address.
    pub gateway_url: String,
    /// The runtime role the person holds on the Agent.
    pub runtime_role: String,
    /// The name of the header the revision's gateway reads the proxied identity from (it
    /// carries the revision's secret proxy key: see `control_ui`).
    pub identity_header: IdentityHeader,
    request: Request,
}

/// The name of a revision's identity header: secret (it holds the proxy key), so its `Debug`
/// shows nothing of it.
#[derive(Clone)]
pub struct IdentityHeader(String);

impl IdentityHeader {
    /// The header name.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for IdentityHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityHeader(…)")
    }
}

/// How long an admission of a proxied HTTP request is reused for further requests with the
/// same pass: a page load's burst of assets is admitted once instead of once per asset.
pub const ADMISSION_REUSE: Duration = Duration::from_secs(2);
/// At most this many passes are remembered (expired ones are dropped first).
const RECENT_ADMISSIONS_MAX: usize = 4096;

/// Admissions of proxied HTTP requests, per pass, for [`ADMISSION_REUSE`]. WebSockets and their
/// leases are always admitted afresh; a sign-out on this process drops its session's entries.
#[derive(Debug, Default)]
pub struct RecentAdmissions {
    entries: Mutex<HashMap<String, (Instant, ProxyAdmission)>>,
}

impl RecentAdmissions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, ProxyAdmission)>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, pass: &str, host: &str) -> Option<ProxyAdmission> {
        let entries = self.lock();
        let (at, admission) = entries.get(pass)?;
        (at.elapsed() < ADMISSION_REUSE && admission.host == host).then(|| admission.clone())
    }

    fn put(&self, pass: &str, admission: &ProxyAdmission) {
        let mut entries = self.lock();
        if entries.len() >= RECENT_ADMISSIONS_MAX {
            entries.retain(|_, (at, _)| at.elapsed() < ADMISSION_REUSE);
            if entries.len() >= RECENT_ADMISSIONS_MAX {
                entries.clear();
            }
        }
        entries.insert(pass.to_owned(), (Instant::now(), admission.clone()));
    }

    /// Forgets every admission of `session_id` (it signed out).
    pub(crate) fn forget_session(&self, session_id: &str) {
        self.lock().retain(|_, (_, a)| a.session_id != session_id);
    }
}

/// Sessions that ended on this process, for the sockets they opened.
#[derive(Debug)]
pub struct SessionEnds {
    sender: broadcast::Sender<String>,
}

impl Default for SessionEnds {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(64).0,
        }
    }
}

impl SessionEnds {
    /// Tells open sockets that `session_id` ended.
    pub(crate) fn ended(&self, session_id: &str) {
        let _ = self.sender.send(session_id.to_owned());
    }
}

impl Controller {
    /// Offers Agents' Control UIs at Agent origins (see the module documentation).
    pub fn with_native_admin(mut self, settings: NativeAdminSettings) -> Self {
        self.native_admin = Some(settings);
        self
    }

    /// The Agent-origin settings, when the Control UI is offered.
    pub fn native_admin_settings(&self) -> Option<&NativeAdminSettings> {
        self.native_admin.as_ref()
    }

    /// Ended sessions, for open sockets to watch.
    pub fn session_ends(&self) -> broadcast::Receiver<String> {
        self.session_ends.sender.subscribe()
    }

    /// `agent-<opaque>` host of an Agent.
    fn agent_host(&self, settings: &NativeAdminSettings, ns: &NamespaceId, id: &AgentId) -> String {
        let mut mac = self.mac("host");
        mac.update(ns.as_str().as_bytes());
        mac.update(b"\0");
        mac.update(id.as_str().as_bytes());
        let digest = hex::encode(mac.finalize().into_bytes());
        format!("agent-{}.{}", &digest[..32], settings.domain)
    }

    /// Whether the caller may open the Agent's Control UI, and in which runtime role: a person
    /// (no service keys) with Agent `use` on the exact Agent and one runtime role assigned to
    /// them on it, that role being one the runtime enforces (fail closed otherwise).
    async fn admit_person(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        audit_action: &str,
    ) -> Result<(Agent, String), Error> {
        if req.caller.method != AuthMethod::Session {
            return Err(Error::new(
                ErrorCode::Forbidden,
                "The Control UI needs a signed-in console session; service API keys cannot open it",
            ));
        }
        let target = ResourceRef::exact(ResourceKind::Agent, ns, id);
        let (mut tx, _, role) = self
            .read_authorized_runtime_access(
                req,
                &target,
                audit_action,
                "Opening the Agent's Control UI needs Agent use and a runtime role assigned to you \
                 on this Agent; an Installation administrator assigns one \
                 (an access binding with runtimeRole)",
            )
            .await?;
        let agent = found(tx.agent_get(ns, id).await?)?;
        if !offered_runtime_role(&role) {
            return Err(Error::new(
                ErrorCode::Forbidden,
                format!(
                    "Your runtime role on this Agent is not one its runtime enforces (only {})",
                    control_ui::RUNTIME_ROLE
                ),
            ));
        }
        Ok((agent, role))
    }

    /// The status of an Agent's Control UI (`GET …/agents/{agt}/native-admin`).
    pub async fn native_admin(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<NativeAdminView, Error> {
        Ok(self.status_of(req, ns, id, READ_ACTION).await?.0)
    }

    async fn status_of(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
        audit_action: &str,
    ) -> Result<(NativeAdminView, Agent, String), Error> {
        let (agent, role) = self.admit_person(req, ns, id, audit_action).await?;
        let view = |status, target| NativeAdminView { status, target };
        let Some(settings) = &self.native_admin else {
            return Ok((view(NativeAdminStatus::Disabled, None), agent, role));
        };
        let Some(revision_id) = agent.active_revision_id.clone() else {
            let status = match agent.desired_runtime_state {
                DesiredRuntimeState::Stopped => NativeAdminStatus::Stopped,
                DesiredRuntimeState::Running => NativeAdminStatus::Unavailable,
            };
            return Ok((view(status, None), agent, role));
        };
        let host = self.agent_host(settings, ns, id);
        let origin = settings.origin_of(&host);
        let mut target = NativeAdminTarget {
            host,
            origin,
            active_revision_id: revision_id.clone(),
            url: None,
        };
        if agent.desired_runtime_state == DesiredRuntimeState::Stopped {
            return Ok((view(NativeAdminStatus::Stopped, Some(target)), agent, role));
        }
        let status = if self.revision_serves_ui(ns, id, &revision_id).await? {
            target.url = Some(format!("{}/", target.origin));
            NativeAdminStatus::Available
        } else {
            NativeAdminStatus::Unsupported
        };
        Ok((view(status, Some(target)), agent, role))
    }

    /// Whether a revision opts into the Control UI (and asks for nothing occ refuses to proxy)
    /// and the Compute Driver gives occ a way to its gateway.
    async fn revision_serves_ui(
        &self,
        ns: &NamespaceId,
        id: &AgentId,
        revision_id: &RevisionId,
    ) -> Result<bool, Error> {
        if self.runtime.is_none() {
            return Ok(false);
        }
        let mut tx = self.store.begin_read().await?;
        let Some(revision) = tx.revision_get(ns, id, revision_id).await? else {
            return Ok(false);
        };
        let doc = &revision.spec.configuration;
        Ok(control_ui::enabled(doc) && control_ui::unsupported_reason(doc).is_none())
    }

    /// [`Controller::native_admin_admit`] for a proxied HTTP request: an admission of the same
    /// pass at the same host from the last [`ADMISSION_REUSE`] is reused.
    pub async fn native_admin_admit_request(
        &self,
        host: &str,
        pass: Option<&str>,
        request_id: RequestId,
    ) -> Result<ProxyAdmission, ProxyRefusal> {
        if let Some(pass) = pass
            && let Some(admission) = self.recent_admissions.get(pass, host)
        {
            return Ok(admission);
        }
        let admission = self.native_admin_admit(host, pass, request_id).await?;
        if let Some(pass) = pass {
            self.recent_admissions.put(pass, &admission);
        }
        Ok(admission)
    }

    /// Admits one proxied request (or socket, or a socket's lease) at `host` with the pass it
    /// carried: the pass, its live session, Agent `use`, the Agent serving the pass's revision
    /// with the Control UI, and the gateway's address. A denial of `use` is audited by the
    /// authorization choke point.
    pub async fn native_admin_admit(
        &self,
        host: &str,
        pass: Option<&str>,
        request_id: RequestId,
    ) -> Result<ProxyAdmission, ProxyRefusal> {
        let settings = self.native_admin.as_ref().ok_or(ProxyRefusal::Disabled)?;
        let grant = pass
            .and_then(|p| self.verify(p, "pass"))
            .filter(|g| g.host == host && self.agent_host(settings, &g.ns, &g.agt) == host)
            .ok_or(ProxyRefusal::SessionInvalid)?;
        let authenticated = self
            .authenticate_session_id(&grant.sid)
            .await
            .map_err(|_| ProxyRefusal::DependencyFailure)?
            .ok_or(ProxyRefusal::SessionInvalid)?;
        let request = authenticated.request(request_id);
        let (view, agent, runtime_role) = match self
            .status_of(&request, &grant.ns, &grant.agt, PROXY_ACTION)
            .await
        {
            Ok(found) => found,
            Err(e) => {
                return Err(match e.code() {
                    ErrorCode::Forbidden => ProxyRefusal::AuthorizationDenied,
                    ErrorCode::NotFound => ProxyRefusal::AgentUnavailable,
                    _ => ProxyRefusal::DependencyFailure,
                });
            }
        };
        match (view.status, view.target) {
            (NativeAdminStatus::Available, Some(target))
                if target.active_revision_id == grant.rev => {}
            (NativeAdminStatus::Available, Some(_)) => return Err(ProxyRefusal::RevisionChanged),
            (NativeAdminStatus::Disabled | NativeAdminStatus::Unsupported, _) => {
                return Err(ProxyRefusal::Disabled);
            }
            _ => return Err(ProxyRefusal::AgentUnavailable),
        }
        let compute = self.runtime.as_ref().ok_or(ProxyRefusal::Disabled)?;
        let target = crate::chat::target_of(&agent);
        let access =
            match tokio::time::timeout(LEASE_TIMEOUT, compute.gateway_access(&target)).await {
                Err(_) => return Err(ProxyRefusal::DependencyTimeout),
                Ok(Err(_)) => return Err(ProxyRefusal::DependencyFailure),
                Ok(Ok(None)) => return Err(ProxyRefusal::AgentUnavailable),
                Ok(Ok(Some(access))) => access,
            };
        let identity_header = IdentityHeader(control_ui::identity_header(&control_ui::proxy_key(
            access.token.expose(),
            &grant.rev,
        )));
        Ok(ProxyAdmission {
            namespace_id: grant.ns,
            agent_id: grant.agt,
            revision_id: grant.rev,
            host: grant.host,
            session_id: grant.sid,
            gateway_url: access.url,
            runtime_role,
            identity_header,
            request,
        })
    }

    /// The runtime roles a person may hold in the Agent's Control UI
    /// (`GET …/agents/{agt}/runtime-roles`; Installation administrators): the roles occ can
    /// enforce on the active revision's gateway. Stock OpenClaw cannot tell people apart behind
    /// one trusted proxy identity, so that is the shared administrator role alone.
    pub async fn runtime_roles(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &AgentId,
    ) -> Result<Vec<RuntimeRole>, Error> {
        let mut tx = self.iam_read(req, ns, RUNTIME_ROLES_ACTION).await?;
        let agent = found(tx.agent_get(ns, id).await?)?;
        if agent.active_revision_id.is_none() {
            return Err(Error::new(
                ErrorCode::DependencyUnavailable,
                "The Agent has no active revision; its runtime roles come from the revision it serves",
            ));
        }
        Ok(vec![RuntimeRole {
            id: control_ui::RUNTIME_ROLE.to_owned(),
            permissions: serde_json::json!({
                "sessions": {"others": "write"},
                "agents": "*",
                "scopes": control_ui::PROXY_SCOPES,
            }),
        }])
    }

    /// Audits an opened Control UI socket.
    pub async fn native_admin_socket_opened(
        &self,
        admission: &ProxyAdmission,
        connection_id: &str,
    ) -> Result<(), Error> {
        self.socket_audit(admission, connection_id, SOCKET_CONNECT_ACTION, None)
            .await
    }

    /// Audits a closed Control UI socket and why it closed.
    pub async fn native_admin_socket_closed(
        &self,
        admission: &ProxyAdmission,
        connection_id: &str,
        reason: &str,
    ) -> Result<(), Error> {
        self.socket_audit(admission, connection_id, SOCKET_CLOSE_ACTION, Some(reason))
            .await
    }

    async fn socket_audit(
        &self,
        admission: &ProxyAdmission,
        connection_id: &str,
        action: &str,
        reason: Option<&str>,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(
            ResourceKind::Agent,
            &admission.namespace_id,
            &admission.agent_id,
        );
        let mut details = serde_json::json!({
            "event": if reason.is_some() { "close" } else { "connect" },
            "connectionId": connection_id,
            "revisionId": admission.revision_id.as_str(),
            "runtimeRole": admission.runtime_role,
            "host": admission.host,
        });
        if let Some(reason) = reason {
            details["closeReason"] = reason.into();
        }
        let event = self
            .event(
                &admission.request,
                AuditKind::Mutation,
                action,
                &target,
                AuditOutcome::Success,
            )
            .detail("nativeAdmin", details);
        audit_in_own_transaction(&self.store, &event)
            .await
            .map_err(|e| Error::unavailable(format!("audit: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_origins_keep_the_public_scheme_and_port() {
        let s = NativeAdminSettings::new("http://127.0.0.1:3000", "localhost").expect("settings");
        assert_eq!(
            s.origin_of("agent-ab.localhost"),
            "http://agent-ab.localhost:3000"
        );
        assert!(!s.secure());
        let s = NativeAdminSettings::new("https://occ.example.com", "Agents.Example.com.")
            .expect("settings");
        assert_eq!(
            s.origin_of("agent-ab.agents.example.com"),
            "https://agent-ab.agents.example.com"
        );
        assert!(s.secure());
        let s = NativeAdminSettings::new("http://[::1]", "localhost").expect("v6 without a port");
        assert_eq!(
            s.origin_of("agent-ab.localhost"),
            "http://agent-ab.localhost"
        );
        for bad in ["", "-bad.example", "a..b", "under_score.example", "a b"] {
            assert!(
                NativeAdminSettings::new("http://127.0.0.1:3000", bad).is_err(),
                "{bad:?}"
            );
        }
        assert!(NativeAdminSettings::new("ftp://x:1", "localhost").is_err());
    }

    #[test]
    fn only_one_label_agent_hosts_under_the_domain_are_agent_origins() {
        let s = NativeAdminSettings::new("http://127.0.0.1:3000", "localhost").expect("settings");
        assert_eq!(
            s.agent_host_of("agent-0a1b.localhost:3000"),
            Some("agent-0a1b.localhost")
        );
        assert_eq!(
            s.agent_host_of("agent-0a1b.localhost"),
            Some("agent-0a1b.localhost")
        );
        for other in [
            "127.0.0.1:3000",
            "localhost:3000",
            "console.localhost:3000",
            "x.agent-0a1b.localhost:3000",
            "agent-0a1b.localhost.evil:3000",
            "agent-0a1blocalhost:3000",
        ] {
            assert_eq!(s.agent_host_of(other), None, "{other}");
        }
    }
}
