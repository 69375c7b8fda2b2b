//! The embedded path of a revision on this host: preparing its snapshot and log, starting
//! (or re-adopting) its gateway under the detached supervisor, restoring a predecessor, stopping
//! and retiring.

use super::observation::rotate_log;
use super::*;

impl Host {
    /// Makes the revision activatable: the Agent's directory (and account), its workspace
    /// seeded or set up, and the revision's immutable snapshot. A revision older than the
    /// installed one is never prepared (`REVISION_SUPERSEDED`, pending).
    pub async fn prepare_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<Readiness, ComputeError> {
        let dedicated = self.dedicated_for(rev)?;
        let runtime = self.runtime()?;
        let account = self.account(&rev.agent).await?;
        let marker = self.layout.ensure_agent(&rev.agent, account).await?;
        let agent_dir = self.agent_dir(&rev.agent);
        match &ctx.workspace_setup {
            // The harness initialises a dedicated Agent's workspace itself.
            _ if dedicated.is_some() => {}
            Some(setup) => {
                let process = match (account, &self.options.accounts, &self.options.sandbox) {
                    (Some(account), Some(accounts), _) => Some(SetupProcess {
                        identity: SetupIdentity::Account(account),
                        program: &accounts.setup_program,
                        path: &self.settings.path,
                    }),
                    (None, _, Some(sandbox)) => {
                        sandbox.occ_program.as_deref().map(|program| SetupProcess {
                            identity: SetupIdentity::Sandbox(sandbox),
                            program,
                            path: &self.settings.path,
                        })
                    }
                    _ => None,
                };
                seed::apply_setup(&runtime, &agent_dir, setup, process).await?;
            }
            None => seed::seed(&runtime, &agent_dir, account).await?,
        }
        // Never prepare over a newer installed revision.
        if let Some(current) = current(&agent_dir)?
            && current != rev.revision_id.as_str()
            && let Some(installed) = read_json::<RevisionMarker>(
                &agent_dir
                    .join("revisions")
                    .join(&current)
                    .join("revision.json"),
            )?
            && installed.revision > rev.revision
        {
            return Ok(Readiness::Pending {
                code: ReasonCode::RevisionSuperseded,
            });
        }
        let mut rendered = self.render(rev, &agent_dir, marker.port)?;
        if dedicated.is_some() {
            let harness_port = self.layout.ensure_harness_port(&rev.agent).await?;
            render_dedicated(
                &mut rendered,
                &DedicatedWiring {
                    app_server_url: &format!("ws://127.0.0.1:{harness_port}"),
                    node: None,
                },
            );
            crate::harness::trust_codex_plugin(&runtime, &agent_dir.join("state"))
                .map_err(|e| unavailable(format!("cannot trust the Codex plugin: {e}")))?;
        }
        let bytes = serde_json::to_vec_pretty(&rendered).map_err(|e| unavailable(e.to_string()))?;
        let hash = hex::encode(sha2::Sha256::digest(&bytes));
        let dir = revision_dir(&agent_dir, &rev.revision_id);
        let expected = RevisionMarker {
            revision_id: rev.revision_id.to_string(),
            revision: rev.revision,
            configuration_hash: hash,
        };
        match read_json::<RevisionMarker>(&dir.join("revision.json"))? {
            Some(existing) if existing == expected => return Ok(Readiness::Ready),
            // Rendered by an older occ (before per-revision capture or proxy keys): rendered again.
            Some(existing)
                if existing.revision_id == expected.revision_id
                    && existing.revision == expected.revision
                    && stored_snapshot(&dir)?
                        .is_some_and(|stored| same_but_driver_rendering(&stored, &rendered)) => {}
            Some(_) => {
                return Err(ComputeError::permanent(
                    ReasonCode::SnapshotMismatch,
                    format!(
                        "{} holds a different snapshot of this revision",
                        dir.display()
                    ),
                ));
            }
            None => {}
        }
        // Build the snapshot beside its final place and rename it in: a revision directory
        // either is complete or does not exist.
        let staging = agent_dir.join("revisions").join(format!(
            ".{}-{}",
            rev.revision_id,
            std::process::id()
        ));
        if staging.exists() {
            std::fs::remove_dir_all(&staging).map_err(|e| io_error("remove", &staging, e))?;
        }
        create_dir(&staging)?;
        write_new(&staging.join("openclaw.json"), &bytes)?;
        write_json(&staging.join("revision.json"), &expected)?;
        if let Some(account) = account {
            // The gateway reads its snapshot; only root writes it.
            share_with_group(&staging, account.gid, 0o750)?;
            share_with_group(&staging.join("openclaw.json"), account.gid, 0o640)?;
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
        }
        std::fs::rename(&staging, &dir).map_err(|e| io_error("install", &dir, e))?;
        fsutil::sync_dir(&agent_dir.join("revisions")).map_err(|e| io_error("sync", &dir, e))?;
        Ok(Readiness::Ready)
    }

    /// Makes the revision the one that serves and waits until its gateway answers the native
    /// handshake. An already serving revision is left alone; a crashed one is restarted.
    pub async fn activate_revision(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        self.prepare_revision(rev, ctx).await?.activatable()?;
        let marker = self
            .layout
            .agent_marker(&rev.agent)?
            .ok_or_else(|| unavailable("the Agent directory vanished"))?;
        let agent_dir = self.agent_dir(&rev.agent);
        self.prepare_revision_log(rev, &agent_dir).await?;
        if let Some(settings) = self.dedicated_for(rev)? {
            return self
                .activate_dedicated(settings, rev, ctx, &agent_dir, &marker)
                .await;
        }
        // Every activation (a deploy, each maintenance pass) registers the values it was given:
        // a rotated Secret reaches the running gateway's provider calls at the next pass.
        if let Some(credential_proxy) = &self.options.credential_proxy {
            let token = layout::token(&agent_dir)?;
            credential_proxy.register(rev, token.expose(), ctx, &self.proxied(rev));
        }
        if let Some(sd) = self.systemd() {
            return self
                .activate_unit(sd, rev, ctx, &agent_dir, marker.port)
                .await;
        }
        if self.serving(&rev.agent, &agent_dir, rev).await? {
            return Ok(());
        }
        if detached::adopt(&agent_dir, &rev.revision_id, self.settings.ready_timeout).await? {
            return Ok(());
        }
        // Whatever runs now (another revision, or this one unhealthy) makes way.
        detached::stop(&agent_dir, self.settings.stop_timeout).await?;
        switch_current(&agent_dir, &rev.revision_id)?;
        let account = self.account(&rev.agent).await?;
        let runtime = self.runtime()?;
        detached::start(
            self.launch(&runtime, rev, ctx, &agent_dir, marker.port),
            account,
        )
        .await
    }

    /// The revision's log directory before its gateway starts: created (the Agent's, with an
    /// account), its log rotated when it reached its cap, and the logs of all but the last few
    /// revisions removed. The installed revision's log stays: a failed activation puts it back.
    pub(super) async fn prepare_revision_log(
        &self,
        rev: &RevisionTarget,
        agent_dir: &Path,
    ) -> Result<(), ComputeError> {
        let account = self.account(&rev.agent).await?;
        ensure_revision_log_dir(agent_dir, &rev.revision_id, account)?;
        rotate_log(agent_dir, &rev.revision_id).await?;
        let installed = current(agent_dir)?.and_then(|id| id.parse::<RevisionId>().ok());
        let mut keep = vec![&rev.revision_id];
        if let Some(installed) = installed.as_ref().filter(|id| **id != rev.revision_id) {
            keep.push(installed);
        }
        prune_revision_logs(agent_dir, &keep)
    }

    /// What the revision's gateway is started with.
    pub(super) fn launch<'a>(
        &'a self,
        runtime: &'a OpenclawRuntime,
        rev: &'a RevisionTarget,
        ctx: &'a RevisionContext,
        agent_dir: &'a Path,
        port: u16,
    ) -> Launch<'a> {
        Launch {
            runtime,
            rev,
            ctx,
            agent_dir,
            port,
            bind: self.options.bind,
            ready_timeout: self.settings.ready_timeout,
            stop_timeout: self.settings.stop_timeout,
            exits: &self.exits,
            dedicated: None,
            sandbox: self.options.sandbox.as_ref(),
            placeholders: proxy::placeholder_variables(&rev.spec.configuration, &self.proxied(rev)),
        }
    }

    /// Serves `previous` again after `failed` (newer) could not be activated: the failed
    /// candidate's gateway stops first (two gateways never share the workspace), then the
    /// previous revision is activated. Any third installed revision is left alone and refused.
    pub async fn restore_revision(
        &self,
        previous: &RevisionTarget,
        ctx: &RevisionContext,
        failed: &RevisionTarget,
    ) -> Result<(), ComputeError> {
        let agent_dir = self.agent_dir(&previous.agent);
        if let Some(installed) = current(&agent_dir)?
            && installed != previous.revision_id.as_str()
        {
            if installed != failed.revision_id.as_str() {
                return Err(ComputeError::permanent(
                    ReasonCode::ActiveRevisionChanged,
                    format!(
                        "revision {installed} is installed: neither the failed {} nor {}",
                        failed.revision_id, previous.revision_id
                    ),
                ));
            }
            // With nothing installed, the previous revision is no longer "older than the
            // installed one".
            self.stop_revision(failed).await?;
        }
        self.activate_revision(previous, ctx).await
    }

    /// Stops the revision's gateway if it is the installed one; keeps workspace, state and
    /// snapshots.
    pub async fn stop_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        if let Some(credential_proxy) = &self.options.credential_proxy {
            credential_proxy.withdraw_revision(&rev.revision_id);
        }
        let Some(_) = self.layout.agent_marker(&rev.agent)? else {
            return Ok(());
        };
        let agent_dir = self.agent_dir(&rev.agent);
        if !is_current(&agent_dir, &rev.revision_id)? {
            // Not installed: a gateway of another revision is not ours to stop, but a gateway
            // recorded for this revision (an interrupted switch) is.
            if detached::runs(&agent_dir, &rev.revision_id)? {
                detached::stop(&agent_dir, self.settings.stop_timeout).await?;
            }
            if workload::live_of(&agent_dir, &rev.revision_id)?.is_some() {
                workload::stop(&agent_dir, self.settings.stop_timeout).await?;
            }
            return Ok(());
        }
        if let Some(sd) = self.systemd() {
            sd.stop(rev.agent.namespace_id.as_str(), rev.agent.agent_id.as_str())
                .await?;
        }
        detached::stop(&agent_dir, self.settings.stop_timeout).await?;
        // The harness after its gateway: the gateway never runs without its app-server.
        workload::stop(&agent_dir, self.settings.stop_timeout).await?;
        remove_file(&agent_dir.join("current"))
    }

    /// Stops the revision if installed; its snapshot stays as the record of what ran until the
    /// Agent is deleted.
    pub async fn retire_revision(&self, rev: &RevisionTarget) -> Result<(), ComputeError> {
        // A retired revision never runs again: its harness's credential and setup code go.
        self.stop_revision(rev).await?;
        if self.layout.agent_marker(&rev.agent)?.is_some() {
            HarnessDirs::of(&self.agent_dir(&rev.agent)).retire(&rev.revision_id)?;
        }
        Ok(())
    }
}

/// The snapshot in the revision directory `dir`, if it holds one (written by occ: root's, in a
/// directory only root writes).
pub(super) fn stored_snapshot(
    dir: &Path,
) -> Result<Option<serde_json::Map<String, Value>>, ComputeError> {
    let path = dir.join("openclaw.json");
    let Some(bytes) =
        fsutil::read_bounded(&path, SNAPSHOT_LIMIT).map_err(|e| io_error("read", &path, e))?
    else {
        return Ok(None);
    };
    Ok(serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|doc| doc.as_object().cloned()))
}

/// Largest snapshot read back (far above any admitted document).
pub(super) const SNAPSHOT_LIMIT: u64 = 16 * 1024 * 1024;
