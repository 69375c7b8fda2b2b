//! Reaching an Agent origin: the console's launch (a one-time ticket, bound to the browser that
//! started it), the origin's exchange of the ticket for its pass, and how tickets and passes are
//! signed and verified.

use std::time::Duration;

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use occ_core::{AgentId, Error, ErrorCode, NamespaceId, RevisionId, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{CALLBACK_PATH, NativeAdminSettings, NativeAdminStatus, ProxyRefusal};
use crate::{Controller, Request};

/// A fresh launch nonce: the Agent origin sets it as a cookie on the browser it sends to the
/// console, so only that browser can redeem the ticket it comes back with.
pub fn launch_nonce() -> String {
    crate::auth::random_token()
}

/// What a launch ticket carries of its browser's nonce: base64url(SHA-256(nonce)), 43
/// characters.
pub fn launch_binding(nonce: &str) -> String {
    use sha2::Digest as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(nonce.as_bytes()))
}

/// Whether `binding` has the shape [`launch_binding`] gives.
pub(super) fn well_formed_binding(binding: &str) -> bool {
    binding.len() == 43
        && binding
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The signed contents of a ticket or a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Grant {
    /// `ticket` or `pass`.
    pub(super) k: String,
    /// The console session it derives from.
    pub(super) sid: String,
    pub(super) ns: NamespaceId,
    pub(super) agt: AgentId,
    pub(super) host: String,
    pub(super) rev: RevisionId,
    /// Expiry, Unix milliseconds.
    pub(super) exp: i64,
    /// Nonce (tickets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) n: String,
    /// The starting browser's [`launch_binding`] (tickets).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(super) b: String,
}

/// A pass cookie for an Agent origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPass {
    /// The cookie value.
    pub value: String,
    /// Seconds until it expires (with its session).
    pub max_age: u64,
}

/// How long a launch ticket may wait to be exchanged.
pub(super) const TICKET_TTL: Duration = Duration::from_secs(60);

impl Controller {
    pub(super) fn mac(&self, purpose: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.settings.auth_secret)
            .expect("HMAC takes any key length");
        mac.update(b"occ-native-admin\0");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac
    }

    pub(super) fn sign(&self, grant: &Grant) -> String {
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(grant).unwrap_or_default());
        let mut mac = self.mac("grant");
        mac.update(body.as_bytes());
        let tag =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    /// The grant a signed value carries, if the signature holds, it is of `kind` and unexpired.
    pub(super) fn verify(&self, value: &str, kind: &str) -> Option<Grant> {
        if value.len() > 2048 {
            return None;
        }
        let (body, tag) = value.split_once('.')?;
        let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(tag)
            .ok()?;
        let mut mac = self.mac("grant");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag).ok()?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .ok()?;
        let grant: Grant = serde_json::from_slice(&bytes).ok()?;
        (grant.k == kind && grant.exp > Timestamp::now().unix_millis()).then_some(grant)
    }

    /// The console's launch: checks the session and the Agent behind `host`, and answers the
    /// Agent origin's callback URL with a one-time ticket bound to the browser that holds the
    /// nonce behind `binding` (the Agent origin set it before sending the browser here).
    pub async fn native_admin_launch(
        &self,
        req: &Request,
        host: &str,
        binding: &str,
    ) -> Result<String, Error> {
        let settings = self
            .native_admin
            .as_ref()
            .ok_or_else(|| Error::new(ErrorCode::NotFound, "The Control UI is not offered"))?;
        if !well_formed_binding(binding) {
            return Err(Error::invalid_request(
                "The launch link is not bound to a browser; open the Control UI from the Agent's page",
            ));
        }
        let session_id = req.caller.session_id.clone().ok_or_else(|| {
            Error::new(
                ErrorCode::Forbidden,
                "The Control UI needs a signed-in console session; service API keys cannot open it",
            )
        })?;
        let (ns, id) = self.agent_behind(settings, host).await?;
        let view = self.native_admin(req, &ns, &id).await?;
        let target = match (view.status, view.target) {
            (NativeAdminStatus::Available, Some(target)) => target,
            (status, _) => {
                return Err(Error::new(
                    ErrorCode::DependencyUnavailable,
                    format!(
                        "The Agent's Control UI is {}; open it again from the Agent's page",
                        serde_json::to_value(status)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    ),
                ));
            }
        };
        let ticket = self.sign(&Grant {
            k: "ticket".into(),
            sid: session_id,
            ns,
            agt: id,
            host: target.host.clone(),
            rev: target.active_revision_id,
            exp: Timestamp::now().plus(TICKET_TTL).unix_millis(),
            n: crate::auth::random_token(),
            b: binding.to_owned(),
        });
        Ok(format!("{}{CALLBACK_PATH}?ticket={ticket}", target.origin))
    }

    /// The Agent behind an `agent-…` host, found by re-deriving hosts (nothing maps hosts to
    /// Agents; unknown hosts are 404).
    pub(super) async fn agent_behind(
        &self,
        settings: &NativeAdminSettings,
        host: &str,
    ) -> Result<(NamespaceId, AgentId), Error> {
        let mut tx = self.store.begin_read().await?;
        for namespace in tx.namespace_list().await? {
            for agent in tx.agent_list(&namespace.id).await? {
                if self.agent_host(settings, &agent.namespace_id, &agent.id) == host {
                    return Ok((agent.namespace_id, agent.id));
                }
            }
        }
        Err(Error::new(
            ErrorCode::NotFound,
            "No Agent is served at this host",
        ))
    }

    /// Exchanges a launch ticket presented at `host` for the origin's pass (once), only in the
    /// browser that started the launch: the one holding the `nonce` the ticket is bound to.
    pub async fn native_admin_redeem(
        &self,
        host: &str,
        ticket: &str,
        nonce: Option<&str>,
    ) -> Result<AgentPass, ProxyRefusal> {
        let grant = self
            .verify(ticket, "ticket")
            .filter(|g| g.host == host)
            .ok_or(ProxyRefusal::SessionInvalid)?;
        let bound = nonce.is_some_and(|nonce| {
            bool::from(launch_binding(nonce).as_bytes().ct_eq(grant.b.as_bytes()))
        });
        if !bound {
            return Err(ProxyRefusal::LaunchNotBound);
        }
        let expires_at =
            Timestamp::from_unix_millis(grant.exp).ok_or(ProxyRefusal::SessionInvalid)?;
        let first = self
            .ticket_redeemed_once(&grant.n, expires_at)
            .await
            .map_err(|_| ProxyRefusal::DependencyFailure)?;
        if !first {
            return Err(ProxyRefusal::SessionInvalid);
        }
        let mut tx = self
            .store
            .begin_read()
            .await
            .map_err(|_| ProxyRefusal::DependencyFailure)?;
        let (session, _) = tx
            .session_by_id(&grant.sid, Timestamp::now())
            .await
            .map_err(|_| ProxyRefusal::DependencyFailure)?
            .ok_or(ProxyRefusal::SessionInvalid)?;
        drop(tx);
        let now = Timestamp::now().unix_millis();
        let exp = session.expires_at.unix_millis();
        let pass = self.sign(&Grant {
            k: "pass".into(),
            n: String::new(),
            b: String::new(),
            exp,
            ..grant
        });
        Ok(AgentPass {
            value: pass,
            max_age: u64::try_from((exp - now) / 1000).unwrap_or(0),
        })
    }
}
