//! A test kubelet for [`FakeKube`]: it runs the Deployments stored in the fake as real OpenClaw
//! gateway processes from the shared test runtime, so a Kubernetes Compute Driver can be tested
//! end to end (Deployment → Pod → gateway → portforward → native handshake) without a cluster.
//!
//! Every ~100 ms it looks at every `deployments` object of the fake (in process, not through
//! the API) and, like a Deployment controller with `strategy: Recreate` plus a kubelet:
//!
//! - `spec.replicas` 1 (or absent): when no Pod runs for the current `spec.template` (compared
//!   by hash), it stops the old one (kills its process group, deletes its Pod object), waits
//!   for it to be gone, then creates Pod `<deployment>-<5 random>` (`Pending`, the template's
//!   labels and annotations), mounts its volumes, resolves its environment, runs its init
//!   containers and starts its `gateway` container as a local process. When the gateway
//!   answers the native handshake the Pod is `Running` with condition `Ready`, portforward to
//!   the container's `--port` reaches it, and the Deployment's status reports it ready. When
//!   the process exits, the Pod is `Failed`, the Deployment not ready, and the container is
//!   restarted (its `restartCount` in the Pod status grows), as with `restartPolicy: Always`.
//!   Each start is a new container instance (its `containerID` in the status, and in
//!   `lastState.terminated` once it exited): the gateway's stdout and stderr go, line by line,
//!   to the Pod directory's `gateway.log` and to that instance's log in the fake, which
//!   `pods/log` serves.
//! - `spec.replicas` 0, or the Deployment deleted: the gateway is killed and the Pod deleted.
//!
//! The Deployment status it writes (only when it changes, advancing `resourceVersion`, never
//! `generation`): `observedGeneration` (the Deployment's `metadata.generation`), `replicas`,
//! `updatedReplicas` (1 while a Pod exists for the current template), `readyReplicas` and
//! `availableReplicas` (1 once its gateway is ready), `unavailableReplicas`, and conditions
//! `Available` and `Progressing`.
//!
//! # What it expects of a Deployment
//!
//! - Volumes: `configMap` (its `data`/`binaryData` as files, only the listed `items` if any),
//!   `secret` (decoded `data` as files, `items` likewise), `persistentVolumeClaim` (the claim
//!   must exist as a `persistentvolumeclaims` object; one host directory per (namespace,
//!   claimName), kept across Pods, removed when the kubelet is dropped) and `emptyDir` (per
//!   Pod). A missing ConfigMap, Secret or claim keeps the Pod `Pending` until it appears.
//!   `volumeMounts[].subPath` maps to that path inside the volume.
//! - Environment: `envFrom[]` (`secretRef`, `configMapRef`, with `prefix`) then `env[]`
//!   (`value`, `valueFrom.secretKeyRef`, `valueFrom.configMapKeyRef`, `valueFrom.fieldRef` for
//!   `metadata.name`/`metadata.namespace`); no `$(VAR)` expansion.
//! - Init containers: only the workspace setup one is supported, recognized by its
//!   `command`+`args` invoking `occ workspace-setup` (an argument `workspace-setup` right after
//!   one whose file name is `occ`, or a shell string containing `occ workspace-setup`). It runs
//!   in process through [`occ_host::workspace_setup::run`] with the input file named by its
//!   `OCC_WORKSPACE_SETUP_PATH` and the workspace named by its `OCC_WORKSPACE_DIR` (container
//!   paths, mapped to the host) and the shared runtime; a failure marks the Pod `Failed` with
//!   the `WORKSPACE_SETUP_FAILED <kind>: <message>` line as the init container's termination
//!   message, and it is retried every 5 s. Any other init container marks the Pod `Failed` for
//!   good (until the template changes).
//! - A container running `occ harness-launch --input F` (a dedicated Agent's harness) runs the
//!   launcher in process (see `kubelet/harness.rs`): F read through the mounts, its paths mapped,
//!   the app-server on a free port, Ready once that port accepts; at most [`MAX_HARNESSES`].
//!   The init container `occ codex-plugin-trust` runs [`occ_host::harness::trust_codex_plugin`]
//!   on its `OPENCLAW_STATE_DIR`.
//! - Services: kube-proxy (`kubelet/services.rs`): Service host names in a gateway's config or
//!   a launch input become a local listener forwarding to a ready Pod behind the Service.
//!   NetworkPolicies are not enforced.
//! - Secret and ConfigMap volumes mounted as directories (no `items`) follow their source while
//!   the Pod runs (changed files replaced at once, vanished ones removed); `projected`
//!   `serviceAccountToken` sources are files `fake-service-account-token namespace=… …`.
//! - A gateway config path under another Pod's claim mount in the namespace maps to that claim
//!   (a dedicated gateway's `/workspace` is its harness's).
//! - The container named `gateway` (or the only container) runs OpenClaw: its
//!   `command`+`args` must contain `gateway run` (whatever precedes it, e.g. `node
//!   /app/openclaw.mjs`, is replaced by the shared runtime's node and entry); `--port P` is
//!   replaced with a free local port (P stays the port portforward accepts) and `--bind` is
//!   forced to `loopback`.
//! - Paths: every env value and argument equal to or under a `mountPath` is rewritten to the
//!   host directory. The file named by `OPENCLAW_CONFIG_PATH` is read (JSON), every string in it
//!   equal to or under a `mountPath` rewritten, `gateway.port` set to the local port, and the
//!   result written to a private file the gateway is pointed at. Absolute env values of `HOME`,
//!   `TMPDIR` and `OPENCLAW_STATE_DIR` that are not under a mount (and `logging.file` and
//!   `workspace` values in the config) go to a per-Pod directory standing in for the
//!   container's filesystem; `HOME` and `TMPDIR` default to per-Pod directories. `PATH` comes
//!   from the runtime; the process Driver's fixed gateway environment is added.
//!
//! At most [`MAX_GATEWAYS`] gateways run at once in a test process (each takes ~1 GB and ~11 s
//! to start); more wait. Processes are only ever signalled by PID (their own process group).
//! Dropping the kubelet kills every gateway it started and removes its directories; a detached
//! watcher does the same if the test process dies first.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash as _, Hasher as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::kube::{FakeKube, FakeState};

mod harness;
mod services;

pub use harness::MAX_HARNESSES;

/// At most this many gateways run at once in one test process.
pub const MAX_GATEWAYS: usize = 3;
/// How long a gateway may take to answer the handshake before the kubelet kills it (its startup
/// probe): a bound for a hang, since on a saturated 2-core machine a restarted gateway that
/// migrates its state has taken past 180 s.
pub const GATEWAY_READY_TIMEOUT: Duration = Duration::from_secs(300);
const TICK: Duration = Duration::from_millis(100);
const INIT_RETRY: Duration = Duration::from_secs(5);
const MARKER_ENV: &str = "OCC_FAKE_KUBELET_POD";

static GATEWAY_SLOTS: Semaphore = Semaphore::const_new(MAX_GATEWAYS);

/// A gateway the kubelet runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletGateway {
    /// The Deployment's namespace.
    pub namespace: String,
    /// The Deployment.
    pub deployment: String,
    /// The Pod.
    pub pod: String,
    /// The gateway process (leader of its own process group).
    pub pid: u32,
    /// The local loopback port it listens on.
    pub port: u16,
    /// It answered the handshake.
    pub ready: bool,
}

/// Container path → host path, longest container path first.
type Mounts = Vec<(String, PathBuf)>;

/// What a Pod's task shares with the kubelet.
#[derive(Default)]
struct PodShared {
    pid: Option<u32>,
    port: Option<u16>,
    ready: bool,
    /// A harness container's running launcher.
    harness: Option<harness::HarnessRun>,
}

/// What a new Pod waits for before it starts (`Recreate`): its predecessor gone.
enum Predecessor {
    /// A gateway process (leader of its group).
    Process(u32),
    /// A stopping harness launcher.
    Harness(tokio::task::JoinHandle<()>),
}

impl Predecessor {
    async fn gone(self) {
        match self {
            Predecessor::Process(pid) => wait_gone(pid).await,
            Predecessor::Harness(task) => {
                let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
            }
        }
    }
}

struct PodRun {
    pod: String,
    hash: u64,
    dir: PathBuf,
    shared: Arc<Mutex<PodShared>>,
    task: tokio::task::JoinHandle<()>,
}

struct Inner {
    state: Arc<Mutex<FakeState>>,
    root: PathBuf,
    pods: Mutex<BTreeMap<(String, String), PodRun>>,
    /// Every gateway process group ever started, so that dropping the kubelet can wait for
    /// all their members (a gateway's children outlive its leader by a moment) before it
    /// removes the directories they write to.
    groups: Mutex<Vec<u32>>,
    /// kube-proxy's listeners.
    services: services::ServiceProxies,
    /// The claim-backed mounts of each running Pod (for paths one Pod names in another's
    /// volume: a dedicated gateway's workspace is its harness's).
    claim_mounts: Mutex<BTreeMap<(String, String), Mounts>>,
}

/// A running test kubelet; dropping it kills its gateways and removes its directories.
pub struct FakeKubelet {
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
    _root: tempfile::TempDir,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeKubelet {
    /// Starts a kubelet for `kube` (on the current tokio runtime).
    pub fn start(kube: &FakeKube) -> FakeKubelet {
        let root = tempfile::Builder::new()
            .prefix("occ-kubelet")
            .tempdir()
            .expect("kubelet tempdir");
        spawn_detached(&format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; rm -rf '{dir}'",
            me = std::process::id(),
            dir = root.path().display()
        ));
        let inner = Arc::new(Inner {
            state: kube.shared(),
            root: root.path().to_owned(),
            pods: Mutex::new(BTreeMap::new()),
            groups: Mutex::new(Vec::new()),
            services: services::ServiceProxies::default(),
            claim_mounts: Mutex::new(BTreeMap::new()),
        });
        let task = tokio::spawn({
            let inner = inner.clone();
            async move {
                loop {
                    reconcile(&inner);
                    tokio::time::sleep(TICK).await;
                }
            }
        });
        FakeKubelet {
            inner,
            task,
            _root: root,
        }
    }

    /// The gateways running now (started, ready or not).
    pub fn gateways(&self) -> Vec<KubeletGateway> {
        lock(&self.inner.pods)
            .iter()
            .filter_map(|((namespace, deployment), run)| {
                let shared = lock(&run.shared);
                Some(KubeletGateway {
                    namespace: namespace.clone(),
                    deployment: deployment.clone(),
                    pod: run.pod.clone(),
                    pid: shared.pid?,
                    port: shared.port?,
                    ready: shared.ready,
                })
            })
            .collect()
    }

    /// The harness containers running now: `(namespace, deployment, pod, ready)`.
    pub fn harnesses(&self) -> Vec<(String, String, String, bool)> {
        lock(&self.inner.pods)
            .iter()
            .filter_map(|((namespace, deployment), run)| {
                let shared = lock(&run.shared);
                shared.harness.as_ref()?;
                Some((
                    namespace.clone(),
                    deployment.clone(),
                    run.pod.clone(),
                    shared.ready,
                ))
            })
            .collect()
    }

    /// Ends the harness container of a Deployment (its launcher stops its children and
    /// returns), as a container exit would; the kubelet starts it again. False without one.
    pub fn end_harness_container(&self, namespace: &str, deployment: &str) -> bool {
        let pods = lock(&self.inner.pods);
        let Some(run) = pods.get(&(namespace.to_owned(), deployment.to_owned())) else {
            return false;
        };
        let Some(harness) = lock(&run.shared).harness.take() else {
            return false;
        };
        drop(harness.stop());
        true
    }

    /// Kills the gateway of a Deployment (SIGKILL to its process group), as a crash would;
    /// the kubelet restarts it. Returns the PID killed.
    pub fn kill_gateway(&self, namespace: &str, deployment: &str) -> Option<u32> {
        let pods = lock(&self.inner.pods);
        let run = pods.get(&(namespace.to_owned(), deployment.to_owned()))?;
        let pid = lock(&run.shared).pid?;
        kill_group(pid);
        Some(pid)
    }

    /// The host directory standing for claim `claim` in `namespace`.
    pub fn claim_dir(&self, namespace: &str, claim: &str) -> PathBuf {
        self.inner.root.join("pvc").join(namespace).join(claim)
    }

    /// The directory of a Deployment's current Pod (volumes, `gateway.log`, the rewritten
    /// config), for diagnostics.
    pub fn pod_dir(&self, namespace: &str, deployment: &str) -> Option<PathBuf> {
        lock(&self.inner.pods)
            .get(&(namespace.to_owned(), deployment.to_owned()))
            .map(|run| run.dir.clone())
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.task.abort();
        let runs: Vec<PodRun> = std::mem::take(&mut *lock(&self.inner.pods))
            .into_values()
            .collect();
        let mut pids = Vec::new();
        self.inner.services.abort_all();
        for run in runs {
            run.task.abort();
            if let Some(harness) = lock(&run.shared).harness.take() {
                // Its children are killed below, by their environment.
                drop(harness.stop());
            }
            if let Some(pid) = lock(&run.shared).pid {
                kill_group(pid);
                pids.push(pid);
            }
            let mut st = lock(&self.inner.state);
            st.pod_ports.retain(|(_, pod), _| *pod != run.pod);
        }
        let groups = lock(&self.inner.groups).clone();
        for &group in &groups {
            kill_group(group);
        }
        // A harness's children (Codex, the node host) clear their environment but get HOME and
        // state directories under the kubelet's root.
        crate::occ_process::kill_processes_with_env(&self.inner.root.display().to_string());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (pids.iter().any(|pid| alive(*pid)) || groups.iter().any(|g| group_alive(*g)))
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        // A task aborted mid-poll on another worker thread may still create a file while the
        // tree is being removed; a second pass removes it.
        for _ in 0..20 {
            match std::fs::remove_dir_all(&self.inner.root) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => break,
            }
        }
    }
}

/// One pass over the Deployments.
fn reconcile(inner: &Arc<Inner>) {
    let deployments: Vec<(String, String, Value)> = lock(&inner.state)
        .objects
        .iter()
        .filter(|((resource, _, _), _)| resource == "deployments")
        .map(|((_, ns, name), o)| (ns.clone(), name.clone(), o.clone()))
        .collect();
    let mut pods = lock(&inner.pods);
    let wanted: Vec<(String, String)> = deployments
        .iter()
        .map(|(ns, name, _)| (ns.clone(), name.clone()))
        .collect();
    let gone: Vec<(String, String)> = pods
        .keys()
        .filter(|k| !wanted.contains(k))
        .cloned()
        .collect();
    for key in gone {
        if let Some(run) = pods.remove(&key) {
            stop_pod(inner, &key.0, run);
        }
    }
    for (ns, name, deployment) in deployments {
        let key = (ns.clone(), name.clone());
        let replicas = deployment["spec"]["replicas"].as_i64().unwrap_or(1);
        let hash = template_hash(&deployment["spec"]["template"]);
        if replicas >= 1 {
            let mut predecessor = None;
            if pods.get(&key).is_some_and(|run| run.hash != hash) {
                let run = pods.remove(&key).expect("present");
                predecessor = stop_pod(inner, &ns, run);
            }
            if !pods.contains_key(&key) {
                let run = start_pod(inner, &ns, &name, &deployment, hash, predecessor);
                pods.insert(key.clone(), run);
            }
        } else if let Some(run) = pods.remove(&key) {
            stop_pod(inner, &ns, run);
        }
        let (exists, ready) = pods
            .get(&key)
            .map_or((false, false), |run| (true, lock(&run.shared).ready));
        write_deployment_status(inner, &ns, &name, exists, ready);
    }
}

fn template_hash(template: &Value) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(template)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

fn write_deployment_status(inner: &Inner, ns: &str, name: &str, exists: bool, ready: bool) {
    let mut st = lock(&inner.state);
    let key = ("deployments".to_owned(), ns.to_owned(), name.to_owned());
    let Some(current) = st.objects.get(&key) else {
        return;
    };
    let (n, r) = (i64::from(exists), i64::from(ready));
    let mut status = json!({
        "observedGeneration": current["metadata"]["generation"].as_i64().unwrap_or(1),
        "replicas": n,
        "updatedReplicas": n,
        "readyReplicas": r,
        "availableReplicas": r,
        "conditions": [
            {
                "type": "Available",
                "status": if r == n { "True" } else { "False" },
                "reason": if r == n { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": if r == n { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
            },
        ],
    });
    if n > r {
        status["unavailableReplicas"] = json!(n - r);
    }
    if current["status"] == status {
        return;
    }
    let version = st.next_version();
    let object = st.objects.get_mut(&key).expect("present");
    object["status"] = status;
    object["metadata"]["resourceVersion"] = json!(version);
}

/// Stops a Pod: aborts its task, kills its gateway's process group (or stops its harness),
/// deletes the Pod object and its port registrations. Returns what is still to wait for.
fn stop_pod(inner: &Inner, ns: &str, run: PodRun) -> Option<Predecessor> {
    run.task.abort();
    let pid = lock(&run.shared).pid;
    if let Some(pid) = pid {
        kill_group(pid);
    }
    let harness = lock(&run.shared)
        .harness
        .take()
        .map(harness::HarnessRun::stop);
    lock(&inner.claim_mounts).remove(&(ns.to_owned(), run.pod.clone()));
    let mut st = lock(&inner.state);
    st.objects
        .remove(&("pods".to_owned(), ns.to_owned(), run.pod.clone()));
    st.pod_ports.remove(&(ns.to_owned(), run.pod.clone()));
    drop(st);
    let dir = run.dir;
    let (gone_tx, gone) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        if let Some(pid) = pid {
            wait_gone(pid).await;
        }
        if let Some(harness) = harness {
            let _ = tokio::time::timeout(Duration::from_secs(30), harness).await;
        }
        let _ = gone_tx.send(());
        let _ = tokio::fs::remove_dir_all(&dir).await;
    });
    match pid {
        Some(pid) => Some(Predecessor::Process(pid)),
        None => Some(Predecessor::Harness(tokio::spawn(async move {
            let _ = gone.await;
        }))),
    }
}

fn start_pod(
    inner: &Arc<Inner>,
    ns: &str,
    deployment: &str,
    object: &Value,
    hash: u64,
    predecessor: Option<Predecessor>,
) -> PodRun {
    let suffix: String = uuid::Uuid::new_v4().simple().to_string()[..5].to_owned();
    let pod = format!("{deployment}-{suffix}");
    let dir = inner.root.join("pods").join(format!("{ns}_{pod}"));
    let shared = Arc::new(Mutex::new(PodShared::default()));
    let ctx = PodCtx {
        inner: inner.clone(),
        ns: ns.to_owned(),
        pod: pod.clone(),
        dir: dir.clone(),
        template: object["spec"]["template"].clone(),
        shared: shared.clone(),
        uid: uuid::Uuid::new_v4().to_string(),
    };
    let task = tokio::spawn(async move {
        if let Some(predecessor) = predecessor {
            predecessor.gone().await;
        }
        run_pod(ctx).await;
    });
    PodRun {
        pod,
        hash,
        dir,
        shared,
        task,
    }
}

struct PodCtx {
    inner: Arc<Inner>,
    ns: String,
    pod: String,
    dir: PathBuf,
    template: Value,
    shared: Arc<Mutex<PodShared>>,
    uid: String,
}

impl PodCtx {
    fn key(&self) -> (String, String, String) {
        ("pods".to_owned(), self.ns.clone(), self.pod.clone())
    }

    /// Changes the Pod object's status (if the Pod still exists).
    fn set_status(&self, change: impl FnOnce(&mut Value)) {
        let mut st = lock(&self.inner.state);
        let version = st.next_version();
        if let Some(object) = st.objects.get_mut(&self.key()) {
            change(&mut object["status"]);
            object["metadata"]["resourceVersion"] = json!(version);
        }
    }

    fn create_object(&self) {
        let meta = &self.template["metadata"];
        let mut spec = self.template["spec"].clone();
        if spec.is_object() {
            spec["nodeName"] = json!("fake-kubelet");
        }
        let mut object = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.pod,
                "namespace": self.ns,
                "uid": self.uid,
                "labels": meta.get("labels").cloned().unwrap_or(json!({})),
                "annotations": meta.get("annotations").cloned().unwrap_or(json!({})),
                "creationTimestamp": crate::kube::now_rfc3339(),
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        });
        let mut st = lock(&self.inner.state);
        let version = st.next_version();
        object["metadata"]["resourceVersion"] = json!(version);
        st.objects.insert(self.key(), object);
    }
}

async fn run_pod(ctx: PodCtx) {
    ctx.create_object();
    let _ = std::fs::create_dir_all(&ctx.dir);
    // Volumes and environment: a missing ConfigMap, Secret or claim keeps the Pod Pending.
    let prepared = loop {
        let attempt = {
            let st = lock(&ctx.inner.state);
            prepare(&st, &ctx)
        };
        match attempt {
            Ok(prepared) => break prepared,
            Err(message) => {
                ctx.set_status(|s| {
                    *s = json!({"phase": "Pending", "reason": "ContainerCreating", "message": message});
                });
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let runtime = match tokio::task::spawn_blocking(crate::runtime::shared_runtime).await {
        Ok(runtime) => runtime.clone(),
        Err(_) => {
            ctx.set_status(|s| {
                *s = json!({"phase": "Failed", "reason": "RuntimeUnavailable",
                            "message": "the shared OpenClaw runtime is not installed"});
            });
            return;
        }
    };
    // Init containers.
    for (index, init) in prepared.init.iter().enumerate() {
        let mut restarts = 0;
        loop {
            let result = match init {
                InitContainer::Setup { input, workspace } => {
                    let scratch = ctx.dir.join(format!("setup-{index}"));
                    let _ = std::fs::remove_dir_all(&scratch);
                    let env = occ_host::workspace_setup::SetupEnv::new(
                        runtime.clone(),
                        scratch.join("scratch"),
                        scratch.join("tmp"),
                    );
                    let result = occ_host::workspace_setup::run(input, workspace, &env).await;
                    let _ = std::fs::remove_dir_all(&scratch);
                    result.map(|_| ()).map_err(|e| {
                        format!(
                            "WORKSPACE_SETUP_FAILED {}: {}",
                            e.kind(),
                            e.to_string().replace(['\n', '\r'], " ")
                        )
                    })
                }
                InitContainer::TrustPlugin { state_dir } => {
                    occ_host::harness::trust_codex_plugin(&runtime, state_dir)
                        .map_err(|e| format!("codex-plugin-trust: {e}"))
                }
                InitContainer::Unsupported { name } => {
                    let message = format!("the test kubelet cannot run init container {name}");
                    ctx.set_status(|s| {
                        *s = json!({"phase": "Failed", "reason": "UnsupportedInitContainer", "message": message});
                    });
                    return;
                }
            };
            match result {
                Ok(()) => break,
                Err(message) => {
                    let name = prepared.init_names[index].clone();
                    ctx.set_status(|s| {
                        *s = json!({
                            "phase": "Failed",
                            "reason": "InitContainerFailed",
                            "message": message,
                            "initContainerStatuses": [{
                                "name": name,
                                "ready": false,
                                "restartCount": restarts,
                                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}},
                            }],
                        });
                    });
                    restarts += 1;
                    tokio::time::sleep(INIT_RETRY).await;
                }
            }
        }
    }
    lock(&ctx.inner.claim_mounts).insert(
        (ctx.ns.clone(), ctx.pod.clone()),
        prepared.claim_mounts.clone(),
    );
    tokio::spawn(refresh_volumes(
        ctx.inner.clone(),
        ctx.key(),
        ctx.template.clone(),
        ctx.dir.clone(),
    ));
    if let Some(container) = &prepared.harness {
        harness::run(&ctx, container).await;
        return;
    }
    // The gateway container, restarted whenever it exits.
    let mut restarts: u32 = 0;
    loop {
        let Ok(_slot) = GATEWAY_SLOTS.acquire().await else {
            return;
        };
        let port = free_port();
        let started = start_gateway(&ctx, &prepared, &runtime, port);
        let mut child = match started {
            Ok(child) => child,
            Err(message) => {
                ctx.set_status(|s| {
                    *s = json!({"phase": "Failed", "reason": "StartError", "message": message});
                });
                return;
            }
        };
        let pid = child.id();
        if let Some(pid) = pid {
            lock(&ctx.inner.groups).push(pid);
        }
        let container_id = lock(&ctx.inner.state).new_container_instance();
        feed_output(&ctx, &mut child, &container_id);
        {
            let mut shared = lock(&ctx.shared);
            shared.pid = pid;
            shared.port = Some(port);
            shared.ready = false;
        }
        if let Some(pid) = pid {
            spawn_detached(&format!(
                "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; \
                 if tr '\\0' '\\n' < /proc/{pid}/environ 2>/dev/null | grep -qxF '{MARKER_ENV}={uid}'; then kill -KILL -{pid}; fi",
                me = std::process::id(),
                uid = ctx.uid,
            ));
        }
        let endpoint = occ_gateway::Endpoint::loopback(port, prepared.token.clone());
        let exit = tokio::select! {
            ready = occ_gateway::wait_ready(&endpoint, GATEWAY_READY_TIMEOUT) => {
                match ready {
                    Ok(_) => {
                        lock(&ctx.shared).ready = true;
                        lock(&ctx.inner.state)
                            .pod_ports
                            .entry((ctx.ns.clone(), ctx.pod.clone()))
                            .or_default()
                            .insert(prepared.container_port, port);
                        let (name, now) = (prepared.gateway_name.clone(), crate::kube::now_rfc3339());
                        ctx.set_status(|s| {
                            *s = json!({
                                "phase": "Running",
                                "podIP": "127.0.0.1",
                                "conditions": [
                                    {"type": "Initialized", "status": "True"},
                                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                                    {"type": "ContainersReady", "status": "True"},
                                ],
                                "containerStatuses": [{
                                    "name": name, "ready": true, "started": true,
                                    "restartCount": restarts,
                                    "containerID": container_id,
                                    "state": {"running": {"startedAt": now}},
                                }],
                            });
                        });
                    }
                    Err(_) => {
                        if let Some(pid) = pid {
                            kill_group(pid);
                        }
                    }
                }
                child.wait().await
            }
            exit = child.wait() => exit,
        };
        {
            let mut shared = lock(&ctx.shared);
            shared.pid = None;
            shared.port = None;
            shared.ready = false;
        }
        lock(&ctx.inner.state)
            .pod_ports
            .remove(&(ctx.ns.clone(), ctx.pod.clone()));
        let code = exit.ok().and_then(|s| s.code()).unwrap_or(137);
        let name = prepared.gateway_name.clone();
        ctx.set_status(|s| {
            *s = json!({
                "phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{
                    "name": name, "ready": false, "started": false,
                    "restartCount": restarts + 1,
                    "containerID": container_id,
                    "lastState": {"terminated": {"exitCode": code, "containerID": container_id}},
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                }],
            });
        });
        restarts += 1;
        drop(_slot);
        tokio::time::sleep(TICK).await;
    }
}

enum InitContainer {
    Setup { input: PathBuf, workspace: PathBuf },
    TrustPlugin { state_dir: PathBuf },
    Unsupported { name: String },
}

/// A Pod ready to run: init containers and the gateway's command, environment and config.
struct Prepared {
    init: Vec<InitContainer>,
    init_names: Vec<String>,
    gateway_name: String,
    /// `gateway run …` with container paths mapped (the port is substituted at start).
    args: Vec<String>,
    env: Vec<(String, String)>,
    workdir: PathBuf,
    /// The host path of the gateway's config, if any.
    config: Option<PathBuf>,
    mounts: Vec<(String, PathBuf)>,
    /// The mounts backed by a claim.
    claim_mounts: Vec<(String, PathBuf)>,
    token: String,
    container_port: u16,
    /// A harness container instead of a gateway.
    harness: Option<harness::HarnessContainer>,
}

fn decode(value: &Value) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(value.as_str().unwrap_or_default())
        .map_err(|e| format!("invalid base64: {e}"))
}

fn get<'a>(st: &'a FakeState, resource: &str, ns: &str, name: &str) -> Option<&'a Value> {
    st.objects
        .get(&(resource.to_owned(), ns.to_owned(), name.to_owned()))
}

/// The files of a ConfigMap or Secret (decoded), by key.
fn source_files(
    st: &FakeState,
    ns: &str,
    resource: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let object =
        get(st, resource, ns, name).ok_or_else(|| format!("{resource} \"{name}\" not found"))?;
    let mut files = BTreeMap::new();
    if let Some(data) = object["data"].as_object() {
        for (k, v) in data {
            let bytes = if resource == "secrets" {
                decode(v)?
            } else {
                v.as_str().unwrap_or_default().as_bytes().to_vec()
            };
            files.insert(k.clone(), bytes);
        }
    }
    if let Some(data) = object["binaryData"].as_object() {
        for (k, v) in data {
            files.insert(k.clone(), decode(v)?);
        }
    }
    Ok(files)
}

fn write_volume(
    dir: &Path,
    files: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<Value>>,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let chosen: Vec<(String, String)> = match items {
        Some(items) => items
            .iter()
            .map(|i| {
                (
                    i["key"].as_str().unwrap_or_default().to_owned(),
                    i["path"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        None => files.keys().map(|k| (k.clone(), k.clone())).collect(),
    };
    for (key, path) in chosen {
        let bytes = files
            .get(&key)
            .ok_or_else(|| format!("key \"{key}\" not found"))?;
        let target = dir.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&target, bytes).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Container path → host path by the longest matching mount.
fn map_mounted(mounts: &[(String, PathBuf)], value: &str) -> Option<String> {
    mounts.iter().find_map(|(mount, host)| {
        let mount = mount.trim_end_matches('/');
        let rest = value.strip_prefix(mount)?;
        (rest.is_empty() || rest.starts_with('/')).then(|| format!("{}{rest}", host.display()))
    })
}

fn rootfs_path(dir: &Path, value: &str) -> String {
    dir.join("rootfs")
        .join(value.trim_start_matches('/'))
        .display()
        .to_string()
}

fn rewrite_json(value: &mut Value, mounts: &[(String, PathBuf)], dir: &Path, key: &str) {
    match value {
        Value::String(s) => {
            if let Some(mapped) = map_mounted(mounts, s) {
                *s = mapped;
            } else if s.starts_with('/') && matches!(key, "file" | "workspace" | "agentDir") {
                *s = rootfs_path(dir, s);
            }
        }
        Value::Array(items) => {
            for item in items {
                rewrite_json(item, mounts, dir, key);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                rewrite_json(v, mounts, dir, k);
            }
        }
        _ => {}
    }
}

/// Keeps a running Pod's Secret and ConfigMap volumes (those mounted as directories) in step
/// with their sources, as the kubelet's periodic sync does: changed keys rewritten, vanished
/// ones removed. Ends when the Pod object is gone.
async fn refresh_volumes(
    inner: Arc<Inner>,
    key: (String, String, String),
    template: Value,
    dir: PathBuf,
) {
    let spec = &template["spec"];
    // A file mount (`subPath`) is never refreshed.
    let file_mounted: Vec<String> = spec["containers"]
        .as_array()
        .into_iter()
        .chain(spec["initContainers"].as_array())
        .flatten()
        .flat_map(|c| c["volumeMounts"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["subPath"].as_str().is_some_and(|s| !s.is_empty()))
        .filter_map(|m| m["name"].as_str().map(str::to_owned))
        .collect();
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let st = lock(&inner.state);
        if !st.objects.contains_key(&key) {
            return;
        }
        for volume in spec["volumes"].as_array().into_iter().flatten() {
            let name = volume["name"].as_str().unwrap_or_default();
            if file_mounted.iter().any(|m| m == name) {
                continue;
            }
            // Volumes that pick `items` are not refreshed (none of occ's changes in place).
            let (resource, source) = if let Some(cm) = volume.get("configMap")
                && cm.get("items").is_none()
            {
                ("configmaps", cm["name"].as_str())
            } else if let Some(secret) = volume.get("secret")
                && secret.get("items").is_none()
            {
                ("secrets", secret["secretName"].as_str())
            } else {
                continue;
            };
            let files =
                source_files(&st, &key.1, resource, source.unwrap_or_default()).unwrap_or_default();
            let volume_dir = dir.join("volumes").join(name);
            // Changed files only, each replaced at once (a reader never sees half of one).
            for (key, bytes) in &files {
                let path = volume_dir.join(key);
                if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                    let tmp = volume_dir.join(format!("..{key}.tmp"));
                    if std::fs::write(&tmp, bytes).is_ok() {
                        let _ = std::fs::rename(&tmp, &path);
                    }
                }
            }
            if let Ok(entries) = std::fs::read_dir(&volume_dir) {
                for entry in entries.flatten() {
                    let file = entry.file_name().to_string_lossy().into_owned();
                    if !files.contains_key(&file) {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
    }
}

fn resolve_env(
    st: &FakeState,
    ctx: &PodCtx,
    container: &Value,
) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    };
    for from in container["envFrom"].as_array().into_iter().flatten() {
        let prefix = from["prefix"].as_str().unwrap_or("");
        let (resource, source) = if from.get("secretRef").is_some() {
            ("secrets", &from["secretRef"])
        } else {
            ("configmaps", &from["configMapRef"])
        };
        let name = source["name"].as_str().unwrap_or_default();
        match source_files(st, &ctx.ns, resource, name) {
            Ok(files) => {
                for (k, v) in files {
                    set(
                        &mut env,
                        format!("{prefix}{k}"),
                        String::from_utf8_lossy(&v).into_owned(),
                    );
                }
            }
            Err(_) if source["optional"] == json!(true) => {}
            Err(e) => return Err(e),
        }
    }
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_owned();
        let from = &var["valueFrom"];
        let value = if let Some(value) = var["value"].as_str() {
            value.to_owned()
        } else if from.get("secretKeyRef").is_some() || from.get("configMapKeyRef").is_some() {
            let (resource, r) = if from.get("secretKeyRef").is_some() {
                ("secrets", &from["secretKeyRef"])
            } else {
                ("configmaps", &from["configMapKeyRef"])
            };
            let source = r["name"].as_str().unwrap_or_default();
            let key = r["key"].as_str().unwrap_or_default();
            let found = source_files(st, &ctx.ns, resource, source).and_then(|files| {
                files.get(key).cloned().ok_or_else(|| {
                    format!("couldn't find key {key} in {resource} {}/{source}", ctx.ns)
                })
            });
            match found {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(_) if r["optional"] == json!(true) => continue,
                Err(e) => return Err(e),
            }
        } else if let Some(path) = from["fieldRef"]["fieldPath"].as_str() {
            match path {
                "metadata.name" => ctx.pod.clone(),
                "metadata.namespace" => ctx.ns.clone(),
                "metadata.uid" => ctx.uid.clone(),
                other => return Err(format!("unsupported fieldRef {other}")),
            }
        } else {
            String::new()
        };
        set(&mut env, name, value);
    }
    Ok(env)
}

fn argv(container: &Value) -> Vec<String> {
    ["command", "args"]
        .iter()
        .flat_map(|k| container[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Whether a container's argv runs `occ <subcommand>`.
fn is_occ_command(container: &Value, subcommand: &str) -> bool {
    argv(container)
        .windows(2)
        .any(|w| w[1] == subcommand && Path::new(&w[0]).file_name().is_some_and(|n| n == "occ"))
}

/// Whether a container invokes `occ workspace-setup`.
pub fn is_workspace_setup(container: &Value) -> bool {
    let argv = argv(container);
    argv.windows(2).any(|w| {
        w[1] == "workspace-setup" && Path::new(&w[0]).file_name().is_some_and(|n| n == "occ")
    }) || argv.iter().any(|a| a.contains("occ workspace-setup"))
}

fn prepare(st: &FakeState, ctx: &PodCtx) -> Result<Prepared, String> {
    let spec = &ctx.template["spec"];
    // Volumes.
    let mut volumes: HashMap<String, PathBuf> = HashMap::new();
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let name = volume["name"].as_str().unwrap_or_default().to_owned();
        let dir = ctx.dir.join("volumes").join(&name);
        let path = if let Some(cm) = volume.get("configMap") {
            let source = cm["name"].as_str().unwrap_or_default();
            match source_files(st, &ctx.ns, "configmaps", source) {
                Ok(files) => write_volume(&dir, &files, cm["items"].as_array())?,
                Err(_) if cm["optional"] == json!(true) => {
                    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(format!("volume {name}: {e}")),
            }
            dir
        } else if let Some(secret) = volume.get("secret") {
            let source = secret["secretName"].as_str().unwrap_or_default();
            match source_files(st, &ctx.ns, "secrets", source) {
                Ok(files) => write_volume(&dir, &files, secret["items"].as_array())?,
                Err(_) if secret["optional"] == json!(true) => {
                    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                }
                Err(e) => return Err(format!("volume {name}: {e}")),
            }
            dir
        } else if let Some(pvc) = volume.get("persistentVolumeClaim") {
            let claim = pvc["claimName"].as_str().unwrap_or_default();
            if get(st, "persistentvolumeclaims", &ctx.ns, claim).is_none() {
                return Err(format!(
                    "persistentvolumeclaim \"{claim}\" not found (volume {name})"
                ));
            }
            let dir = ctx.inner.root.join("pvc").join(&ctx.ns).join(claim);
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            dir
        } else if volume.get("emptyDir").is_some() {
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            dir
        } else if let Some(projected) = volume.get("projected") {
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            for source in projected["sources"].as_array().into_iter().flatten() {
                let token = &source["serviceAccountToken"];
                let Some(path) = token["path"].as_str() else {
                    return Err(format!("volume {name}: unsupported projected source"));
                };
                // Stands for the token the kubelet would request: who, for whom, how long.
                let text = format!(
                    "fake-service-account-token namespace={} serviceAccount={} audience={} expirationSeconds={}",
                    ctx.ns,
                    spec["serviceAccountName"].as_str().unwrap_or("default"),
                    token["audience"].as_str().unwrap_or_default(),
                    token["expirationSeconds"].as_i64().unwrap_or(3600),
                );
                std::fs::write(dir.join(path), text).map_err(|e| e.to_string())?;
            }
            dir
        } else {
            return Err(format!("volume {name}: unsupported volume source"));
        };
        volumes.insert(name, path);
    }
    let mounts_of = |container: &Value| -> Result<Vec<(String, PathBuf)>, String> {
        let mut mounts = Vec::new();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let name = mount["name"].as_str().unwrap_or_default();
            let base = volumes
                .get(name)
                .ok_or_else(|| format!("volumeMount {name}: no such volume"))?;
            let host = match mount["subPath"].as_str().filter(|s| !s.is_empty()) {
                Some(sub) => {
                    let host = base.join(sub);
                    if !host.exists() {
                        std::fs::create_dir_all(&host).map_err(|e| e.to_string())?;
                    }
                    host
                }
                None => base.clone(),
            };
            mounts.push((
                mount["mountPath"].as_str().unwrap_or_default().to_owned(),
                host,
            ));
        }
        mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        Ok(mounts)
    };
    let map_env = |mounts: &[(String, PathBuf)], k: &str, v: &str| -> String {
        if let Some(mapped) = map_mounted(mounts, v) {
            mapped
        } else if v.starts_with('/')
            && matches!(
                k,
                "HOME"
                    | "TMPDIR"
                    | "OPENCLAW_STATE_DIR"
                    | "OCC_WORKSPACE_DIR"
                    | "OCC_WORKSPACE_SETUP_PATH"
            )
        {
            rootfs_path(&ctx.dir, v)
        } else {
            v.to_owned()
        }
    };
    // Init containers.
    let mut init = Vec::new();
    let mut init_names = Vec::new();
    for container in spec["initContainers"].as_array().into_iter().flatten() {
        let name = container["name"].as_str().unwrap_or_default().to_owned();
        init_names.push(name.clone());
        if is_occ_command(container, "codex-plugin-trust") {
            let mounts = mounts_of(container)?;
            let env = resolve_env(st, ctx, container)?;
            let state_dir = env
                .iter()
                .find(|(n, _)| n == "OPENCLAW_STATE_DIR")
                .map(|(k, v)| PathBuf::from(map_env(&mounts, k, v)))
                .ok_or_else(|| format!("init container {name}: OPENCLAW_STATE_DIR is required"))?;
            init.push(InitContainer::TrustPlugin { state_dir });
            continue;
        }
        if !is_workspace_setup(container) {
            init.push(InitContainer::Unsupported { name });
            continue;
        }
        let mounts = mounts_of(container)?;
        let env = resolve_env(st, ctx, container)?;
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| PathBuf::from(map_env(&mounts, k, v)))
        };
        let (Some(input), Some(workspace)) = (
            lookup("OCC_WORKSPACE_SETUP_PATH"),
            lookup("OCC_WORKSPACE_DIR"),
        ) else {
            return Err(format!(
                "init container {name}: OCC_WORKSPACE_SETUP_PATH and OCC_WORKSPACE_DIR are required"
            ));
        };
        init.push(InitContainer::Setup { input, workspace });
    }
    let containers = spec["containers"].as_array().cloned().unwrap_or_default();
    let claim_mounts = |container: &Value| -> Vec<(String, PathBuf)> {
        let claims: Vec<&str> = spec["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v.get("persistentVolumeClaim").is_some())
            .filter_map(|v| v["name"].as_str())
            .collect();
        let mounted: Vec<&str> = container["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["name"].as_str().is_some_and(|n| claims.contains(&n)))
            .filter_map(|m| m["mountPath"].as_str())
            .collect();
        mounts_of(container)
            .unwrap_or_default()
            .into_iter()
            .filter(|(path, _)| mounted.contains(&path.as_str()))
            .collect()
    };
    // A harness container.
    if let Some(container) = containers.iter().find(|c| harness::is_harness(&argv(c))) {
        let name = container["name"].as_str().unwrap_or("harness").to_owned();
        let mounts = mounts_of(container)?;
        let runtime_root = crate::runtime::runtime_root();
        let harness = harness::prepare(&name, &argv(container), &mounts, &runtime_root, &ctx.dir)?;
        return Ok(Prepared {
            init,
            init_names,
            gateway_name: name,
            args: Vec::new(),
            env: Vec::new(),
            workdir: ctx.dir.clone(),
            config: None,
            claim_mounts: claim_mounts(container),
            mounts,
            token: String::new(),
            container_port: harness.container_port,
            harness: Some(harness),
        });
    }
    // The gateway container.
    let container = containers
        .iter()
        .find(|c| c["name"] == json!("gateway"))
        .or_else(|| (containers.len() == 1).then(|| &containers[0]))
        .ok_or("no container named gateway")?;
    let gateway_name = container["name"].as_str().unwrap_or("gateway").to_owned();
    let mounts = mounts_of(container)?;
    let raw_env = resolve_env(st, ctx, container)?;
    let full = argv(container);
    let start = full
        .windows(2)
        .position(|w| w[0] == "gateway" && w[1] == "run")
        .ok_or_else(|| format!("container {gateway_name} does not run `gateway run`: {full:?}"))?;
    let mut args: Vec<String> = Vec::new();
    let mut container_port = None;
    let mut rest = full[start..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--port" {
            container_port = rest.next().and_then(|p| p.parse::<u16>().ok());
        } else if let Some(p) = arg.strip_prefix("--port=") {
            container_port = p.parse::<u16>().ok();
        } else if arg == "--bind" {
            rest.next();
        } else if arg.starts_with("--bind=") {
        } else {
            args.push(map_mounted(&mounts, arg).unwrap_or_else(|| arg.clone()));
        }
    }
    args.extend(["--bind".to_owned(), "loopback".to_owned()]);
    let container_port = container_port.unwrap_or(18789);
    let mut env = Vec::new();
    let mut config = None;
    let mut token = String::new();
    for (k, v) in &raw_env {
        if k == "PATH" {
            continue;
        }
        let mapped = map_env(&mounts, k, v);
        if matches!(k.as_str(), "HOME" | "TMPDIR" | "OPENCLAW_STATE_DIR") {
            std::fs::create_dir_all(&mapped).map_err(|e| e.to_string())?;
        }
        if k == "OPENCLAW_CONFIG_PATH" {
            config = Some(PathBuf::from(&mapped));
            continue;
        }
        if k == "OPENCLAW_GATEWAY_TOKEN" || k == "OPENCLAW_GATEWAY_PASSWORD" {
            token = v.clone();
        }
        env.push((k.clone(), mapped));
    }
    for (k, dir) in [("HOME", "home"), ("TMPDIR", "tmp")] {
        if !env.iter().any(|(n, _)| n == k) {
            let path = ctx.dir.join(dir);
            std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
            env.push((k.to_owned(), path.display().to_string()));
        }
    }
    let workdir = container["workingDir"]
        .as_str()
        .map(|w| PathBuf::from(map_env(&mounts, "HOME", w)))
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| ctx.dir.clone());
    Ok(Prepared {
        init,
        init_names,
        gateway_name,
        args,
        env,
        workdir,
        config,
        claim_mounts: claim_mounts(container),
        mounts,
        token,
        container_port,
        harness: None,
    })
}

fn start_gateway(
    ctx: &PodCtx,
    prepared: &Prepared,
    runtime: &occ_host::runtime::OpenclawRuntime,
    port: u16,
) -> Result<tokio::process::Child, String> {
    let mut cmd = runtime.command();
    cmd.args(&prepared.args)
        .arg("--port")
        .arg(port.to_string())
        .envs(prepared.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(config) = &prepared.config {
        let text = std::fs::read_to_string(config)
            .map_err(|e| format!("read the gateway config {}: {e}", config.display()))?;
        let mut doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("the gateway config is not JSON: {e}"))?;
        // A path under another Pod's claim mount (same namespace) is that claim's (canonical,
        // as a node host compares it), before the Pod's own mounts: on a cluster a dedicated
        // gateway and its harness both name `/workspace`, which the harness's node serves.
        let mut mounts: Vec<(String, PathBuf)> = lock(&ctx.inner.claim_mounts)
            .iter()
            .filter(|((ns, pod), _)| *ns == ctx.ns && *pod != ctx.pod)
            .flat_map(|(_, mounts)| mounts.clone())
            .map(|(path, host)| (path, std::fs::canonicalize(&host).unwrap_or(host)))
            .collect();
        mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        mounts.extend(prepared.mounts.iter().cloned());
        rewrite_json(&mut doc, &mounts, &ctx.dir, "");
        services::rewrite_urls(&ctx.inner, &ctx.ns, &mut doc);
        if !doc.is_object() {
            return Err("the gateway config is not a JSON object".into());
        }
        if !doc["gateway"].is_object() {
            doc["gateway"] = json!({});
        }
        doc["gateway"]["port"] = json!(port);
        let rendered = ctx.dir.join("openclaw.json");
        std::fs::write(
            &rendered,
            serde_json::to_vec_pretty(&doc).unwrap_or_default(),
        )
        .map_err(|e| e.to_string())?;
        cmd.env("OPENCLAW_CONFIG_PATH", &rendered);
    }
    cmd.envs(occ_host::snapshot::GATEWAY_FIXED_ENV)
        .env(MARKER_ENV, &ctx.uid)
        .current_dir(&prepared.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(false);
    cmd.spawn().map_err(|e| format!("spawn the gateway: {e}"))
}

/// Copies the gateway's stdout and stderr, line by line, to the Pod directory's `gateway.log`
/// and to the fake's log of container instance `container_id`, where `pods/log` serves it as a
/// container runtime would.
fn feed_output(ctx: &PodCtx, child: &mut tokio::process::Child, container_id: &str) {
    use tokio::io::{AsyncBufReadExt as _, AsyncRead};

    fn copy(
        stream: impl AsyncRead + Unpin + Send + 'static,
        file: Option<std::fs::File>,
        state: Arc<Mutex<FakeState>>,
        container_id: String,
    ) {
        tokio::spawn(async move {
            use std::io::Write as _;
            let mut reader = tokio::io::BufReader::new(stream);
            let mut file = file;
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if let Some(f) = file.as_mut() {
                    let _ = f.write_all(&line);
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.strip_suffix('\n').unwrap_or(&text);
                lock(&state).append_instance_log(&container_id, text);
            }
        });
    }
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ctx.dir.join("gateway.log"))
            .ok()
    };
    if let Some(stdout) = child.stdout.take() {
        copy(
            stdout,
            log(),
            ctx.inner.state.clone(),
            container_id.to_owned(),
        );
    }
    if let Some(stderr) = child.stderr.take() {
        copy(
            stderr,
            log(),
            ctx.inner.state.clone(),
            container_id.to_owned(),
        );
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// SIGKILL to the process group led by `pid`.
fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Whether process group `group` still has a live (not zombie) member.
fn group_alive(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // Fields after the command: state, ppid, pgrp.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1);
        pgrp == Some(group.to_string().as_str()) && !matches!(state, Some("Z" | "X"))
    })
}

async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while alive(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs a detached shell script that outlives this process (double fork).
fn spawn_detached(script: &str) {
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("( {script} ) >/dev/null 2>&1 &"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, Patch, PatchParams};

    const NS: &str = "agents";

    #[test]
    fn recognizes_the_setup_init_container() {
        assert!(is_workspace_setup(
            &json!({"command": ["/usr/local/bin/occ"], "args": ["workspace-setup"]})
        ));
        assert!(is_workspace_setup(
            &json!({"command": ["occ", "workspace-setup"]})
        ));
        assert!(is_workspace_setup(
            &json!({"command": ["sh", "-c", "exec occ workspace-setup"]})
        ));
        assert!(!is_workspace_setup(
            &json!({"command": ["busybox", "true"]})
        ));
    }

    #[test]
    fn maps_container_paths_by_the_longest_mount() {
        let mounts = vec![
            ("/data/state".to_owned(), PathBuf::from("/h/state")),
            ("/data".to_owned(), PathBuf::from("/h/pvc")),
        ];
        assert_eq!(
            map_mounted(&mounts, "/data/state/x").as_deref(),
            Some("/h/state/x")
        );
        assert_eq!(map_mounted(&mounts, "/data").as_deref(), Some("/h/pvc"));
        assert_eq!(
            map_mounted(&mounts, "/data/logs").as_deref(),
            Some("/h/pvc/logs")
        );
        assert_eq!(map_mounted(&mounts, "/database"), None);
    }

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    /// What a Kubernetes Compute Driver could create for one Agent.
    fn seed_agent(fake: &FakeKube, token: &str) {
        fake.seed("namespaces", "", json!({"metadata": {"name": NS}}));
        let config = json!({
            "gateway": {
                "mode": "local", "port": 18789, "bind": "loopback",
                "auth": {"mode": "token", "token": "${OPENCLAW_GATEWAY_TOKEN}"},
            },
            "agents": {"defaults": {"workspace": "/data/state/workspace", "heartbeat": {"every": "0m"}}},
            "logging": {"file": "/data/logs/gateway.log"},
            "update": {"checkOnStart": false},
            "models": {"catalogRefresh": {"enabled": false}},
            "cron": {"enabled": false},
        });
        fake.seed(
            "configmaps",
            NS,
            json!({"metadata": {"name": "agent-config"}, "data": {"openclaw.json": config.to_string()}}),
        );
        fake.seed(
            "secrets",
            NS,
            json!({"metadata": {"name": "agent-token"}, "data": {"token": b64(token)}}),
        );
        let input = occ_host::workspace_setup::SetupInput {
            id: "setup-1".into(),
            namespace_id: format!("ns_{}", uuid::Uuid::new_v4()),
            agent_id: format!("agt_{}", uuid::Uuid::new_v4()),
            defaults_id: None,
            files: Some(BTreeMap::from([(
                "AGENTS.md".to_owned(),
                "# Agents\n\nFrom the kubelet test.\n".to_owned(),
            )])),
            completed: false,
        };
        fake.seed(
            "secrets",
            NS,
            json!({"metadata": {"name": "agent-setup"},
                   "data": {"input.json": base64::engine::general_purpose::STANDARD.encode(input.to_json())}}),
        );
        fake.seed(
            "persistentvolumeclaims",
            NS,
            json!({"metadata": {"name": "agent-data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}),
        );
        fake.seed(
            "deployments",
            NS,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "agent"},
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "agent"}, "annotations": {"occ/revision": "r1"}},
                        "spec": {
                            "volumes": [
                                {"name": "config", "configMap": {"name": "agent-config",
                                    "items": [{"key": "openclaw.json", "path": "openclaw.json"}]}},
                                {"name": "setup", "secret": {"secretName": "agent-setup"}},
                                {"name": "data", "persistentVolumeClaim": {"claimName": "agent-data"}},
                            ],
                            "initContainers": [{
                                "name": "workspace-setup",
                                "image": "occ",
                                "command": ["/usr/local/bin/occ", "workspace-setup"],
                                "env": [
                                    {"name": "OCC_WORKSPACE_SETUP_PATH", "value": "/setup/input.json"},
                                    {"name": "OCC_WORKSPACE_DIR", "value": "/data/state/workspace"},
                                ],
                                "volumeMounts": [
                                    {"name": "setup", "mountPath": "/setup", "readOnly": true},
                                    {"name": "data", "mountPath": "/data"},
                                ],
                            }],
                            "containers": [{
                                "name": "gateway",
                                "image": "openclaw",
                                "command": ["node", "/app/openclaw.mjs"],
                                "args": ["gateway", "run", "--port", "18789", "--bind", "loopback"],
                                "env": [
                                    {"name": "HOME", "value": "/data/home"},
                                    {"name": "TMPDIR", "value": "/tmp"},
                                    {"name": "OPENCLAW_STATE_DIR", "value": "/data/state"},
                                    {"name": "OPENCLAW_CONFIG_PATH", "value": "/etc/openclaw/openclaw.json"},
                                    {"name": "OPENCLAW_GATEWAY_TOKEN", "valueFrom":
                                        {"secretKeyRef": {"name": "agent-token", "key": "token"}}},
                                ],
                                "volumeMounts": [
                                    {"name": "config", "mountPath": "/etc/openclaw", "readOnly": true},
                                    {"name": "data", "mountPath": "/data"},
                                ],
                            }],
                        },
                    },
                },
            }),
        );
    }

    async fn eventually<T>(
        what: &str,
        limit: Duration,
        mut probe: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A local listener whose every connection is bridged to the Pod's port through a kube
    /// portforward; returns its port.
    fn bridge_listener(
        api: Api<Pod>,
        pod: String,
        port: u16,
    ) -> (u16, tokio::task::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let local = listener.local_addr().unwrap().port();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let task = tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (api, pod) = (api.clone(), pod.clone());
                tokio::spawn(async move {
                    let Ok(mut forwarder) = api.portforward(&pod, &[port]).await else {
                        return;
                    };
                    let Some(mut stream) = forwarder.take_stream(port) else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tcp, &mut stream).await;
                    forwarder.abort();
                });
            }
        });
        (local, task)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_a_deployment_as_a_real_gateway_reachable_through_portforward() {
        let fake = FakeKube::start().await;
        let token = format!("{}", uuid::Uuid::new_v4().simple());
        seed_agent(&fake, &token);
        let kubelet = FakeKubelet::start(&fake);
        let client =
            kube::Client::try_from(kube::Config::new(fake.url().parse().unwrap())).unwrap();
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(client, NS);

        eventually(
            "the Deployment to be ready",
            Duration::from_secs(240),
            async || {
                let d = deployments.get("agent").await.ok()?;
                let status = d.status?;
                (status.ready_replicas == Some(1)
                    && status.observed_generation == d.metadata.generation)
                    .then_some(())
            },
        )
        .await;
        let listed = pods.list(&Default::default()).await.unwrap();
        assert_eq!(listed.items.len(), 1);
        let pod = listed.items[0].clone();
        let pod_name = pod.metadata.name.clone().unwrap();
        assert!(pod_name.starts_with("agent-"), "{pod_name}");
        assert_eq!(pod.metadata.labels.as_ref().unwrap()["app"], "agent");
        assert_eq!(
            pod.status.as_ref().unwrap().phase.as_deref(),
            Some("Running")
        );
        let gateways = kubelet.gateways();
        assert_eq!(gateways.len(), 1);
        assert!(gateways[0].ready);
        let pid = gateways[0].pid;
        assert!(alive(pid));

        // The init container seeded the workspace on the claim's directory.
        let pvc = kubelet.inner.root.join("pvc").join(NS).join("agent-data");
        let agents = std::fs::read_to_string(pvc.join("state/workspace/AGENTS.md")).unwrap();
        assert!(agents.contains("From the kubelet test."), "{agents}");
        // The config it runs with points at host paths and its local port.
        let dir = kubelet.pod_dir(NS, "agent").unwrap();
        let config: Value =
            serde_json::from_slice(&std::fs::read(dir.join("openclaw.json")).unwrap()).unwrap();
        assert_eq!(config["gateway"]["port"], json!(gateways[0].port));
        assert_eq!(
            config["agents"]["defaults"]["workspace"],
            json!(pvc.join("state/workspace").display().to_string())
        );

        // A native handshake through a kube portforward to the container port.
        let (local, bridge) = bridge_listener(pods.clone(), pod_name.clone(), 18789);
        let hello = occ_gateway::wait_ready(
            &occ_gateway::Endpoint::loopback(local, token.clone()),
            Duration::from_secs(30),
        )
        .await
        .expect("handshake through portforward");
        assert!(!hello.server_version.is_empty());
        bridge.abort();

        // The gateway's output, served by pods/log and kept in the Pod directory.
        let output = pods
            .logs(&pod_name, &Default::default())
            .await
            .expect("pods/log");
        let first = output.lines().next().expect("the gateway wrote output");
        let kept = std::fs::read_to_string(
            kubelet
                .pod_dir(NS, "agent")
                .expect("pod dir")
                .join("gateway.log"),
        )
        .expect("gateway.log");
        assert!(kept.contains(first), "{first:?} not in {kept:?}");

        // A crash: the Deployment is not ready, then the kubelet restarts the gateway.
        let killed = kubelet
            .kill_gateway(NS, "agent")
            .expect("a gateway to kill");
        assert_eq!(killed, pid);
        eventually(
            "the Deployment to notice the crash",
            Duration::from_secs(20),
            async || {
                let status = deployments.get("agent").await.ok()?.status?;
                (status.ready_replicas == Some(0)).then_some(())
            },
        )
        .await;
        eventually(
            "the gateway to be restarted",
            Duration::from_secs(240),
            async || {
                let status = pods.get(&pod_name).await.ok()?.status?;
                let container = status.container_statuses?.into_iter().next()?;
                (container.restart_count == 1
                    && container.ready
                    && status.phase.as_deref() == Some("Running"))
                .then_some(())
            },
        )
        .await;
        eventually(
            "the Deployment to be ready again",
            Duration::from_secs(10),
            async || {
                let status = deployments.get("agent").await.ok()?.status?;
                (status.ready_replicas == Some(1)).then_some(())
            },
        )
        .await;
        assert!(!alive(killed));
        let pid = kubelet.gateways()[0].pid;
        assert_ne!(pid, killed);

        // Scaled to zero: the gateway is killed and the Pod deleted.
        deployments
            .patch(
                "agent",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .unwrap();
        eventually(
            "the Deployment to be scaled down",
            Duration::from_secs(30),
            async || {
                let d = deployments.get("agent").await.ok()?;
                let status = d.status?;
                (status.replicas == Some(0)
                    && status.ready_replicas == Some(0)
                    && status.observed_generation == d.metadata.generation)
                    .then_some(())
            },
        )
        .await;
        assert!(
            pods.list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
        assert!(kubelet.gateways().is_empty());
        eventually("the gateway to exit", Duration::from_secs(15), async || {
            (!alive(pid)).then_some(())
        })
        .await;
        let root = kubelet.inner.root.clone();
        drop(kubelet);
        assert!(!root.exists(), "the kubelet removes its directories");
    }
}
