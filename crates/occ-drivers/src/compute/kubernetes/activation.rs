//! Preparing and activating a revision's gateway: the tenant objects an Agent needs, the
//! revision's snapshot and environment, the Deployment rolled to it, and the wait for its
//! native handshake.

use super::*;

/// Preparation and activation, optionally over a newer failed candidate (a rollback).
impl KubernetesCompute {
    /// `prepare_revision`; `replacing` names a newer installed revision that may be replaced
    /// anyway (the failed candidate of a rollback).
    pub(super) async fn prepare_over(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        replacing: Option<&RevisionId>,
    ) -> Result<Readiness, ComputeError> {
        let dedicated = self.dedicated_for(rev, ctx)?;
        let agent = &rev.agent;
        let names = self.names(agent).await?;
        if let Some(d) = self.deployment_of(agent).await?
            && let Some((id, number)) = installed(&d)
            && id != rev.revision_id.as_str()
            && replacing.is_none_or(|failed| id != failed.as_str())
            && number > rev.revision
        {
            return Ok(Readiness::Pending {
                code: ReasonCode::RevisionSuperseded,
            });
        }
        let accounts: Api<ServiceAccount> = self.api(&names.tenant);
        self.ensure(
            &accounts,
            agent,
            &typed(
                json!({"metadata": meta(&names.gateway, &names.tenant, agent, None),
                          "automountServiceAccountToken": false}),
            ),
            "serviceaccounts",
        )
        .await?;
        let secrets: Api<Secret> = self.api(&names.tenant);
        if self
            .get(&secrets, &names.token, "get secrets")
            .await?
            .is_none()
        {
            let token = hex::encode(rand::random::<[u8; 32]>());
            self.ensure(
                &secrets,
                agent,
                &typed(
                    json!({"metadata": meta(&names.token, &names.tenant, agent, None),
                              "type": "Opaque", "stringData": {"token": token}}),
                ),
                "secrets",
            )
            .await?;
        }
        let token = self.token(agent).await?;
        let claims: Api<PersistentVolumeClaim> = self.api(&names.tenant);
        let mut claim = json!({"metadata": meta(&names.state, &names.tenant, agent, None),
            "spec": {"accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": self.settings.state_storage}}}});
        if let Some(class) = &self.settings.storage_class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        self.ensure(&claims, agent, &typed(claim), "persistentvolumeclaims")
            .await?;
        let policies: Api<NetworkPolicy> = self.api(&names.tenant);
        self.ensure(
            &policies,
            agent,
            &typed(
                json!({"metadata": meta(&names.gateway, &names.tenant, agent, None),
                "spec": {"podSelector": {"matchLabels": {LABEL_AGENT: agent.agent_id.to_string()}},
                         "policyTypes": ["Ingress"], "ingress": []}}),
            ),
            "networkpolicies",
        )
        .await?;
        if let Some(setup) = &ctx.workspace_setup {
            self.ensure_secret(
                &secrets,
                agent,
                typed(
                    json!({"metadata": meta(&names.setup, &names.tenant, agent, None),
                             "type": "Opaque",
                             "stringData": {"setup.json": setup_secret_data(setup)}}),
                ),
            )
            .await?;
        }
        let mut environment: BTreeMap<String, String> = ctx
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect();
        // A dedicated revision's credential reaches only its harness.
        if let Some(credential) = ctx
            .harness_credential
            .as_ref()
            .filter(|_| dedicated.is_none())
        {
            environment.insert(
                harness_key_variable(rev)?.to_owned(),
                credential.expose().to_owned(),
            );
        }
        // A Control UI revision's proxy key (the gateway reads it by name: see objects.rs).
        if let Some(key) = occ_host::snapshot::proxy_key(rev, token.expose()) {
            environment.insert(control_ui::PROXY_KEY_VARIABLE.to_owned(), key);
        }
        if !environment.is_empty() {
            self.ensure_secret(
                &secrets,
                agent,
                typed(json!({"metadata": meta(&names.environment(rev), &names.tenant, agent, Some(rev)),
                             "type": "Opaque", "stringData": environment})),
            )
            .await?;
        }
        let rendered = match dedicated {
            Some(_) => harness::render_gateway(rev, &names, None),
            None => objects::render(rev),
        };
        let snapshot = serde_json::to_string(&Value::Object(rendered))
            .map_err(|e| ComputeError::permanent(ReasonCode::SnapshotInvalid, e.to_string()))?;
        let configmaps: Api<ConfigMap> = self.api(&names.tenant);
        let stored = self
            .ensure(
                &configmaps,
                agent,
                &typed(
                    json!({"metadata": meta(&names.snapshot(rev), &names.tenant, agent, Some(rev)),
                              "immutable": true, "data": {"openclaw.json": snapshot}}),
                ),
                "configmaps",
            )
            .await?;
        if stored.data.as_ref().and_then(|d| d.get("openclaw.json")) != Some(&snapshot) {
            return Err(ComputeError::permanent(
                ReasonCode::SnapshotMismatch,
                format!(
                    "configmap {} holds a different snapshot of this revision",
                    names.snapshot(rev)
                ),
            ));
        }
        if let Some(dedicated) = dedicated {
            self.prepare_harness(rev, ctx, dedicated).await?;
        }
        Ok(Readiness::Ready)
    }

    /// `activate_revision`, with `replacing` as in [`KubernetesCompute::prepare_over`].
    pub(super) async fn activate_over(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
        replacing: Option<&RevisionId>,
    ) -> Result<(), ComputeError> {
        self.prepare_over(rev, ctx, replacing)
            .await?
            .activatable()?;
        if rev.execution_mode() == ExecutionMode::Dedicated {
            return self.activate_dedicated(rev, ctx).await;
        }
        let names = self.names(&rev.agent).await?;
        let with_environment = !ctx.environment.is_empty()
            || ctx.harness_credential.is_some()
            || control_ui::enabled(&rev.spec.configuration);
        let desired = self.deployment(
            &names.tenant,
            rev,
            ctx.workspace_setup.is_some(),
            with_environment,
        );
        self.apply_deployment(&rev.agent, desired).await?;
        self.wait_gateway(rev, ctx).await?;
        self.seal_setup(rev, ctx).await
    }

    /// Creates the Agent's Deployment `desired`, or replaces the current one unless it already
    /// runs the same template with its one replica.
    pub(super) async fn apply_deployment(
        &self,
        agent: &AgentTarget,
        mut desired: Deployment,
    ) -> Result<(), ComputeError> {
        let names = self.names(agent).await?;
        let name = desired.metadata.name.clone().unwrap_or_default();
        let api: Api<Deployment> = self.api(&names.tenant);
        let post = PostParams::default();
        match self.owned_deployment(agent, &name).await? {
            None => {
                self.kube
                    .call("create deployments", || api.create(&post, &desired))
                    .await
                    .map_err(|e| e.into_compute("create deployments"))?;
            }
            Some(current) => {
                let running = current.spec.as_ref().and_then(|s| s.replicas) == Some(1);
                if !(running
                    && annotation(&current.metadata, ANNOTATION_TEMPLATE)
                        == annotation(&desired.metadata, ANNOTATION_TEMPLATE))
                {
                    desired.metadata.resource_version = current.metadata.resource_version.clone();
                    self.kube
                        .call("update deployments", || api.replace(&name, &post, &desired))
                        .await
                        .map_err(|e| e.into_compute("update deployments"))?;
                }
            }
        }
        Ok(())
    }

    /// Waits until the gateway of `rev` rolled out and answers, or says why it cannot.
    pub(super) async fn wait_gateway(
        &self,
        rev: &RevisionTarget,
        ctx: &RevisionContext,
    ) -> Result<(), ComputeError> {
        let deadline = tokio::time::Instant::now() + self.settings.activation_timeout;
        loop {
            let current = self.deployment_of(&rev.agent).await?;
            if let Some(why) = current.as_ref().and_then(pod_refusal) {
                // No Pod can be made (quota, admission): say why instead of waiting it out.
                return Err(ComputeError::transient(
                    ReasonCode::GatewayPodRefused,
                    format!(
                        "the gateway Pod of {} cannot be created: {why}",
                        rev.revision_id
                    ),
                ));
            }
            if let Some(d) = &current
                && self.serving_from(rev, d, Duration::from_secs(10)).await?
            {
                return Ok(());
            }
            if let Some(code) = self.exited_during_startup(rev, Workload::Gateway).await? {
                // Kubernetes restarts it for ever (CrashLoopBackOff): say so now, so the worker
                // can put the previous revision back instead of waiting out the deadline.
                let message = format!(
                    "the gateway of {} exited during startup (exit code {code})",
                    rev.revision_id
                );
                let output = self.startup_output(rev, ctx, Workload::Gateway).await;
                return Err(ComputeError::gateway_startup_exit(
                    Some(code),
                    message,
                    output,
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ComputeError::transient(
                    ReasonCode::GatewayNotReady,
                    format!(
                        "the gateway of {} did not roll out and answer within {:?}",
                        rev.revision_id, self.settings.activation_timeout
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
