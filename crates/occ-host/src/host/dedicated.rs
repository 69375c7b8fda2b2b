//! Dedicated execution on this host: the Codex harness beside the gateway, its node
//! enrolled into the gateway (detached supervision without per-Agent accounts: the process
//! Driver).

use super::*;
use crate::harness::LoginMethod;
use crate::harness::enroll::login_method;

impl Host {
    /// Activation of a dedicated revision: the harness (launch input and credential written,
    /// `occ harness-launch` started, its app-server up), then the gateway with the runtime copy
    /// of the snapshot, then the node enrollment. An installed revision whose gateway, harness
    /// and node all serve is left alone; anything else of the Agent is stopped and started over.
    pub(super) async fn activate_dedicated(
        &self,
        settings: &DedicatedSettings,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
        marker: &layout::AgentMarker,
    ) -> Result<(), ComputeError> {
        // Every activation (a deploy, each maintenance pass) registers the key it was given, as
        // for an embedded revision's providers: a rotated Secret reaches the running harness.
        let proxied_model = self.register_harness_key(settings, rev, ctx, agent_dir)?;
        if self.serving(&rev.agent, agent_dir, rev).await? {
            return Ok(());
        }
        let harness_port = marker
            .harness_port
            .ok_or_else(|| unavailable("the Agent has no harness port"))?;
        let dirs = HarnessDirs::of(agent_dir);
        remove_file(&enrolled_marker(&dirs, &rev.revision_id))?;
        detached::stop(agent_dir, self.settings.stop_timeout).await?;
        workload::stop(agent_dir, self.settings.stop_timeout).await?;
        switch_current(agent_dir, &rev.revision_id)?;
        let runtime = self.runtime()?;
        let app_server = app_server_token(agent_dir)?;
        let gateway_token = layout::token(agent_dir)?;
        let input = write_launch_files(
            &dirs,
            rev,
            ctx,
            &LaunchFiles {
                runtime_dir: &runtime.root,
                model_base_url: settings.model_base_url.as_deref(),
                proxied_model: proxied_model.as_deref(),
                app_server_port: harness_port,
                app_server_token: &app_server,
                gateway_port: marker.port,
            },
        )?;
        let snapshot = revision_dir(agent_dir, &rev.revision_id).join("openclaw.json");
        let paired = write_runtime_config(&dirs, &snapshot, rev)?;
        let home = dirs.home();
        // In a private network where the gateways have one (the relays are this binary's).
        let network = match &self.options.sandbox {
            Some(sandbox) if sandbox.occ_program.is_some() => {
                Some(dirs.network(&rev.revision_id, harness_port, marker.port, &input)?)
            }
            _ => None,
        };
        let record = workload::start(HarnessLaunch {
            program: &settings.launcher,
            input: &input,
            path: &self.settings.path,
            output: &dirs.log(&rev.revision_id),
            cwd: &home,
            agent_dir,
            rev,
            exits: &self.exits,
            sandbox: self.options.sandbox.as_ref().map(|sandbox| {
                let mut view =
                    dirs.sandbox_view(&rev.revision_id, &settings.launcher, &runtime.root);
                view.network = network;
                (sandbox, view)
            }),
        })?;
        let started = async {
            wait_running(
                &dirs,
                rev,
                ctx,
                gateway_token.expose(),
                harness_port,
                || crate::process::is_same_process(record.pid, record.start_time),
                settings.ready_timeout,
            )
            .await?;
            let config = dirs.runtime_config(&rev.revision_id);
            let mut launch = self.launch(&runtime, rev, ctx, agent_dir, marker.port);
            launch.dedicated = Some(DedicatedGateway {
                config: &config,
                app_server_token: &app_server,
            });
            detached::start(launch, None).await?;
            let endpoint = occ_gateway::Endpoint::loopback(marker.port, gateway_token.expose());
            enroll(&dirs, rev, &snapshot, &endpoint, paired).await
        };
        if let Err(e) = started.await {
            // Nothing half-started stays: the next attempt starts both again.
            detached::stop(agent_dir, self.settings.stop_timeout).await?;
            workload::stop(agent_dir, self.settings.stop_timeout).await?;
            return Err(e);
        }
        write_json(&enrolled_marker(&dirs, &rev.revision_id), &rev.revision_id)
    }
}

impl Host {
    /// Whether dedicated `rev`'s harness key goes through the credential proxy: an OpenAI API
    /// key (`api_key`) where occ runs one. ChatGPT logins (`codex_pat`,
    /// `chatgpt_service_account`) are tokens for ChatGPT's own service, so Codex holds them.
    pub(super) fn harness_key_proxied(&self, rev: &RevisionTarget) -> bool {
        self.options.credential_proxy.is_some()
            && matches!(login_method(rev), Ok(LoginMethod::ApiKey))
    }

    /// Registers dedicated `rev`'s API key with the credential proxy, towards the model endpoint
    /// of occ's settings (OpenAI's API without one); the capability URL Codex is pointed at, or
    /// `None` when the key is not proxied ([`Self::harness_key_proxied`]).
    fn register_harness_key(
        &self,
        settings: &DedicatedSettings,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        agent_dir: &Path,
    ) -> Result<Option<String>, ComputeError> {
        if !self.harness_key_proxied(rev) {
            return Ok(None);
        }
        let (Some(proxy), Some(key)) = (&self.options.credential_proxy, &ctx.harness_credential)
        else {
            // No credential: writing the launch files refuses the revision.
            return Ok(None);
        };
        let token = layout::token(agent_dir)?;
        let upstream = settings
            .model_base_url
            .as_deref()
            .unwrap_or(crate::credential_proxy::OPENAI_BASE_URL);
        Ok(Some(proxy.register_harness(
            rev,
            token.expose(),
            upstream,
            key,
        )))
    }
}

/// `harness/run/<revId>/enrolled`: the revision's node was enrolled and bound (written last by
/// an activation, removed first by the next).
pub(super) fn enrolled_marker(dirs: &HarnessDirs, rev: &RevisionId) -> PathBuf {
    dirs.run(rev).join("enrolled")
}

/// Whether the dedicated revision's harness runs (live launcher, app-server and node running)
/// and its node was enrolled.
pub(super) fn harness_serving(agent_dir: &Path, rev: &RevisionId) -> Result<bool, ComputeError> {
    let dirs = HarnessDirs::of(agent_dir);
    Ok(workload::live_of(agent_dir, rev)?.is_some()
        && reports_running(&dirs, rev)
        && enrolled_marker(&dirs, rev).is_file())
}
