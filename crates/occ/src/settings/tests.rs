use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use occ_host::wire::SupervisorChoice;

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

const SECRET: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn minimal_settings_with_a_data_dir() {
    let env = env_of(&[
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/occ-settings-test"),
        ("OCC_AUTH_SECRET", SECRET),
    ]);
    let s = ServerSettings::load(&env).unwrap();
    assert_eq!(s.port, 3000);
    assert_eq!(s.public_origin, "http://127.0.0.1:3000");
    assert_eq!(
        s.platform.configurations,
        ConfigurationStore::Filesystem {
            root: PathBuf::from("/tmp/occ-settings-test/configurations")
        }
    );
    assert_eq!(s.platform.kubernetes, None);
    assert_eq!(
        s.platform.compute.root,
        PathBuf::from("/tmp/occ-settings-test/compute")
    );
    assert_eq!(
        s.platform.compute.runtime_root,
        PathBuf::from("/tmp/occ-settings-test/runtime")
    );
    assert_eq!(s.platform.compute.port_range, 28000..=28999);
    assert_eq!(
        s.platform.compute.isolation,
        ProcessIsolation::Sandbox(occ_host::sandbox::WorkloadLimits::default()),
        "containment is on unless turned off"
    );
    assert_eq!(s.platform.metrics, None);
    assert!(!s.secure_cookies());
    let w = WorkerProcessSettings::load(&env).unwrap();
    assert_eq!(w.worker.lease, Duration::from_secs(5));
    assert_eq!(w.worker.max_attempts, 5);
}

#[test]
fn the_kubernetes_drivers_settings() {
    let env = env_of(&[
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
        ("OCC_CONFIGURATION_DRIVER", "kubernetes"),
        ("OCC_SECRET_DRIVER", "kubernetes"),
        ("OCC_KUBERNETES_AUTH", "kubeconfig"),
        ("OCC_KUBECONFIG", "/etc/occ/kubeconfig"),
        ("OCC_KUBERNETES_CONTEXT", "prod"),
        ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ-system/occ-api"),
        (
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
            "occ-system/occ-worker",
        ),
    ]);
    let w = WorkerProcessSettings::load(&env).unwrap();
    assert_eq!(w.platform.configurations, ConfigurationStore::Kubernetes);
    assert_eq!(w.platform.secrets, SecretStore::Kubernetes);
    let k = w.platform.kubernetes.expect("kubernetes settings");
    assert_eq!(
        k.auth,
        occ_drivers::kubernetes::KubernetesAuth::Kubeconfig {
            path: PathBuf::from("/etc/occ/kubeconfig"),
            context: "prod".into()
        }
    );
    assert_eq!(k.api_service_account, "occ-system/occ-api".parse().unwrap());
    assert_eq!(
        k.worker_service_account,
        Some("occ-system/occ-worker".parse().unwrap())
    );
    let in_cluster = env_of(&[
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
        ("OCC_SECRET_DRIVER", "kubernetes"),
        ("OCC_KUBERNETES_AUTH", "in-cluster"),
        ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ/api"),
    ]);
    let w = WorkerProcessSettings::load(&in_cluster).unwrap();
    assert!(matches!(
        w.platform.configurations,
        ConfigurationStore::Filesystem { .. }
    ));
    let k = w.platform.kubernetes.expect("kubernetes settings");
    assert_eq!(k.auth, occ_drivers::kubernetes::KubernetesAuth::InCluster);
    assert_eq!(k.worker_service_account, None);
}

#[test]
fn the_kubernetes_compute_driver_settings() {
    let base = [
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
        ("OCC_COMPUTE_DRIVER", "kubernetes"),
        ("OCC_KUBERNETES_AUTH", "in-cluster"),
        ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "occ-system/occ-api"),
        (
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
            "occ-system/occ-worker",
        ),
        (
            "OCC_KUBERNETES_GATEWAY_IMAGE",
            "registry.example/occ@sha256:abc",
        ),
    ];
    let w = WorkerProcessSettings::load(&env_of(&base)).unwrap();
    let k = w
        .platform
        .compute
        .driver
        .kubernetes()
        .cloned()
        .expect("kubernetes compute");
    assert_eq!(k.image, "registry.example/occ@sha256:abc");
    assert_eq!(
        (
            k.runtime_dir.as_str(),
            k.occ_binary.as_str(),
            k.state_storage.as_str()
        ),
        ("/opt/occ/runtime", "/usr/local/bin/occ", "10Gi")
    );
    assert_eq!(k.activation_timeout, Duration::from_secs(300));
    assert_eq!(
        (
            k.harness_storage.as_str(),
            k.harness_token_audience.as_str()
        ),
        ("10Gi", "occ")
    );
    assert!(k.model_egress.is_empty());
    assert_eq!(k.runtime_class, None);
    assert!(w.platform.kubernetes.is_some());
    let mut egress = base.to_vec();
    egress.push(("OCC_KUBERNETES_RUNTIME_CLASS", "gvisor"));
    egress.push((
        "OCC_KUBERNETES_MODEL_EGRESS",
        "203.0.113.0/24:443, 10.0.0.5/32:8080",
    ));
    egress.push(("OCC_KUBERNETES_HARNESS_STORAGE", "40Gi"));
    let k = WorkerProcessSettings::load(&env_of(&egress))
        .unwrap()
        .platform
        .compute
        .driver
        .kubernetes()
        .cloned()
        .unwrap();
    assert_eq!(k.harness_storage, "40Gi");
    assert_eq!(k.runtime_class.as_deref(), Some("gvisor"));
    assert_eq!(
        k.model_egress
            .iter()
            .map(|e| format!("{}:{}", e.cidr, e.port))
            .collect::<Vec<_>>(),
        ["203.0.113.0/24:443", "10.0.0.5/32:8080"]
    );
    for (var, bad, why) in [
        ("OCC_KUBERNETES_MODEL_EGRESS", "203.0.113.0/24", "CIDR:PORT"),
        (
            "OCC_KUBERNETES_MODEL_EGRESS",
            "203.0.113.0:443",
            "CIDR block",
        ),
        (
            "OCC_KUBERNETES_MODEL_EGRESS",
            "203.0.113.0/33:443",
            "CIDR block",
        ),
        (
            "OCC_KUBERNETES_MODEL_EGRESS",
            "api.openai.com/32:443",
            "CIDR block",
        ),
        ("OCC_KUBERNETES_MODEL_EGRESS", "10.0.0.0/8:0", "port"),
        ("OCC_KUBERNETES_HARNESS_STORAGE", "40GB", "quantity"),
        ("OCC_KUBERNETES_HARNESS_TOKEN_AUDIENCE", "a b", "audience"),
        ("OCC_KUBERNETES_RUNTIME_CLASS", "gVisor", "RuntimeClass"),
    ] {
        let mut pairs = base.to_vec();
        pairs.push((var, bad));
        let err = WorkerProcessSettings::load(&env_of(&pairs))
            .unwrap_err()
            .to_string();
        assert!(err.contains(var) && err.contains(why), "{bad}: {err}");
    }
    for (drop, name) in [
        (
            "OCC_KUBERNETES_GATEWAY_IMAGE",
            "OCC_KUBERNETES_GATEWAY_IMAGE",
        ),
        (
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
            "OCC_KUBERNETES_WORKER_SERVICE_ACCOUNT",
        ),
        ("OCC_KUBERNETES_AUTH", "OCC_KUBERNETES_AUTH"),
    ] {
        let pairs: Vec<_> = base.iter().copied().filter(|(k, _)| *k != drop).collect();
        let err = WorkerProcessSettings::load(&env_of(&pairs))
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err}");
    }
    let mut bad = base.to_vec();
    bad.push(("OCC_KUBERNETES_STATE_STORAGE", "lots"));
    let err = WorkerProcessSettings::load(&env_of(&bad))
        .unwrap_err()
        .to_string();
    assert!(err.contains("OCC_KUBERNETES_STATE_STORAGE"), "{err}");
    assert_eq!(k.tenant_quota, None);
    let mut quota = base.to_vec();
    quota.push((
        "OCC_KUBERNETES_TENANT_QUOTA",
        "pods=20, requests.cpu=8,requests.memory=32Gi,requests.storage=0.5Ti",
    ));
    let w = WorkerProcessSettings::load(&env_of(&quota)).unwrap();
    let hard = w
        .platform
        .compute
        .driver
        .kubernetes()
        .cloned()
        .unwrap()
        .tenant_quota
        .unwrap();
    assert_eq!(
        hard.hard()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>(),
        [
            "pods=20",
            "requests.cpu=8",
            "requests.memory=32Gi",
            "requests.storage=0.5Ti"
        ]
    );
    for (bad, why) in [
        ("limits.cpu=4", "no CPU limit"),
        ("pods=20,pods=30", "twice"),
        ("nodes=3", "is not one of"),
        ("pods", "resource=quantity"),
        ("requests.memory=32GB", "quantity"),
        ("requests.cpu=.5", "quantity"),
        ("requests.cpu=", "quantity"),
    ] {
        let mut pairs = base.to_vec();
        pairs.push(("OCC_KUBERNETES_TENANT_QUOTA", bad));
        let err = WorkerProcessSettings::load(&env_of(&pairs))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("OCC_KUBERNETES_TENANT_QUOTA") && err.contains(why),
            "{bad}: {err}"
        );
    }
}

#[test]
fn the_ssh_compute_driver_settings() {
    let base = [
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
        ("OCC_COMPUTE_DRIVER", "ssh"),
        ("OCC_SSH_ADDRESS", "host.example.com"),
        ("OCC_SSH_IDENTITY_FILE", "/etc/occ/id"),
        ("OCC_SSH_KNOWN_HOSTS_FILE", "/etc/occ/known_hosts"),
    ];
    let w = WorkerProcessSettings::load(&env_of(&base)).unwrap();
    let ComputeDriverSettings::Ssh(ssh) = w.platform.compute.driver else {
        panic!("ssh settings");
    };
    assert_eq!(
        (ssh.port, ssh.user.as_str(), ssh.bind_lan),
        (22, "root", false)
    );
    assert_eq!(ssh.remote_occ, PathBuf::from("/usr/local/bin/occ"));
    assert_eq!(ssh.remote_root, PathBuf::from("/var/lib/occ/compute"));
    assert_eq!(ssh.port_range, 28000..=28999);
    assert_eq!(ssh.connect_timeout, Duration::from_secs(10));
    assert_eq!(ssh.account_prefix, "occ-agent");
    assert_eq!(ssh.supervisor, SupervisorChoice::Auto);
    assert_eq!(ssh.systemd_unit_dir, PathBuf::from("/etc/systemd/system"));
    let mut env = base.to_vec();
    env.push(("OCC_SSH_SUPERVISOR", "detached"));
    env.push(("OCC_SSH_SYSTEMD_UNIT_DIR", "/run/systemd/system"));
    let ComputeDriverSettings::Ssh(ssh) = WorkerProcessSettings::load(&env_of(&env))
        .unwrap()
        .platform
        .compute
        .driver
    else {
        panic!("ssh settings");
    };
    assert_eq!(ssh.supervisor, SupervisorChoice::Detached);
    assert_eq!(ssh.systemd_unit_dir, PathBuf::from("/run/systemd/system"));
    for missing in [
        "OCC_SSH_ADDRESS",
        "OCC_SSH_IDENTITY_FILE",
        "OCC_SSH_KNOWN_HOSTS_FILE",
    ] {
        let env: Vec<_> = base
            .iter()
            .copied()
            .filter(|(k, _)| *k != missing)
            .collect();
        let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
        assert!(err.to_string().contains(missing), "{err}");
    }
    for (name, value) in [
        ("OCC_SSH_PORT", "0"),
        ("OCC_SSH_KNOWN_HOSTS_FILE", "known_hosts"),
        ("OCC_SSH_PORT_RANGE", "80-90"),
        ("OCC_SSH_GATEWAY_BIND", "tailnet"),
        ("OCC_SSH_CONNECT_TIMEOUT_SECONDS", "0"),
        ("OCC_SSH_SUPERVISOR", "runit"),
        ("OCC_SSH_SYSTEMD_UNIT_DIR", "units"),
    ] {
        let mut env = base.to_vec();
        env.push((name, value));
        let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
    let mut env = base.to_vec();
    env[2] = ("OCC_COMPUTE_DRIVER", "nomad");
    let err = WorkerProcessSettings::load(&env_of(&env)).unwrap_err();
    assert!(
        err.to_string().contains("process, ssh, kubernetes"),
        "{err}"
    );
}

#[test]
fn the_worker_needs_no_api_settings_and_checks_its_own() {
    let base = [
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
    ];
    assert!(WorkerProcessSettings::load(&env_of(&base)).is_ok());
    for (name, value) in [
        ("OCC_WORKER_POLL_INTERVAL_MS", "0"),
        ("OCC_WORKER_LEASE_DURATION_MS", "-5"),
        ("OCC_WORKER_MAX_ATTEMPTS", "five"),
        ("OCC_WORKER_CONVERGENCE_TIMEOUT_MS", "1e3"),
        ("OCC_PROCESS_PORT_RANGE", "80-90"),
        ("OCC_METRICS_ENABLED", "yes"),
    ] {
        let mut pairs = base.to_vec();
        pairs.push((name, value));
        let err = WorkerProcessSettings::load(&env_of(&pairs))
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err} should name {name}");
    }
}

#[test]
fn metrics_settings_must_be_consistent() {
    let base = [
        ("OCC_DATABASE_URL", "sqlite:///tmp/x.db"),
        ("OCC_DATA_DIR", "/tmp/d"),
        ("OCC_AUTH_SECRET", SECRET),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut pairs = base.to_vec();
        pairs.extend_from_slice(extra);
        ServerSettings::load(&env_of(&pairs)).map(|s| s.platform.metrics)
    };
    assert_eq!(
        with(&[
            ("OCC_METRICS_ENABLED", "true"),
            ("OCC_METRICS_HOST", "127.0.0.1"),
            ("OCC_METRICS_PORT", "9464")
        ])
        .unwrap(),
        Some("127.0.0.1:9464".parse().unwrap())
    );
    for (extra, name) in [
        (&[("OCC_METRICS_PORT", "9464")][..], "OCC_METRICS_ENABLED"),
        (&[("OCC_METRICS_ENABLED", "true")][..], "OCC_METRICS_HOST"),
        (
            &[
                ("OCC_METRICS_ENABLED", "true"),
                ("OCC_METRICS_HOST", "127.0.0.1"),
                ("OCC_METRICS_PORT", "3000"),
            ][..],
            "OCC_METRICS_PORT",
        ),
    ] {
        let err = with(extra).unwrap_err().to_string();
        assert!(err.contains(name), "{err} should name {name}");
    }
}

#[test]
fn process_isolation_is_a_sandbox_with_limits_or_explicitly_none() {
    let load = |pairs: &[(&str, &str)]| {
        let mut all = vec![
            ("OCC_DATABASE_URL", "sqlite:///x"),
            ("OCC_DATA_DIR", "/tmp/d"),
            ("OCC_AUTH_SECRET", SECRET),
        ];
        all.extend_from_slice(pairs);
        ServerSettings::load(&env_of(&all)).map(|s| s.platform.compute.isolation)
    };
    assert_eq!(
        load(&[
            ("OCC_PROCESS_MEMORY_LIMIT_MIB", "2048"),
            ("OCC_PROCESS_PIDS_LIMIT", "64"),
            ("OCC_PROCESS_OPEN_FILES_LIMIT", "512"),
            ("OCC_PROCESS_RESIDENT_LIMIT_MIB", "1024"),
        ])
        .unwrap(),
        ProcessIsolation::Sandbox(occ_host::sandbox::WorkloadLimits {
            memory_mib: 2048,
            processes: 64,
            open_files: 512,
            resident_mib: 1024,
        })
    );
    assert_eq!(
        load(&[("OCC_PROCESS_ISOLATION", "none")]).unwrap(),
        ProcessIsolation::None
    );
    for (pairs, named) in [
        (
            [("OCC_PROCESS_ISOLATION", "off")],
            "OCC_PROCESS_ISOLATION: \"off\" must be sandbox or none",
        ),
        (
            [("OCC_PROCESS_MEMORY_LIMIT_MIB", "0")],
            "OCC_PROCESS_MEMORY_LIMIT_MIB",
        ),
        (
            [("OCC_PROCESS_PIDS_LIMIT", "many")],
            "OCC_PROCESS_PIDS_LIMIT",
        ),
    ] {
        let err = load(&pairs).expect_err(named).to_string();
        assert!(err.contains(named), "{err}");
    }
}

#[test]
fn errors_name_the_setting() {
    let cases: [(&[(&str, &str)], &str); 14] = [
        (&[], "OCC_DATABASE_URL"),
        (&[("OCC_DATABASE_URL", "mysql://x")], "OCC_DATABASE_URL"),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_PORT", "70000"),
            ],
            "OCC_PORT",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_HOST", "localhost!"),
            ],
            "OCC_HOST",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_AUTH_SECRET", "short"),
            ],
            "OCC_AUTH_SECRET",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_AUTH_SECRET", SECRET),
                ("OCC_AUTH_BASE_URL", "ftp://x"),
            ],
            "OCC_AUTH_BASE_URL",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_CONFIGURATION_DRIVER", "etcd"),
            ],
            "OCC_CONFIGURATION_DRIVER",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "vault"),
            ],
            "OCC_SECRET_DRIVER",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_CONFIGURATION_DRIVER", "kubernetes"),
            ],
            "OCC_KUBERNETES_AUTH",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "kubernetes"),
                ("OCC_KUBERNETES_AUTH", "ambient"),
            ],
            "OCC_KUBERNETES_AUTH",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "kubernetes"),
                ("OCC_KUBERNETES_AUTH", "kubeconfig"),
                ("OCC_KUBECONFIG", "relative/config"),
            ],
            "OCC_KUBECONFIG",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "kubernetes"),
                ("OCC_KUBERNETES_AUTH", "kubeconfig"),
                ("OCC_KUBECONFIG", "/etc/occ/kubeconfig"),
            ],
            "OCC_KUBERNETES_CONTEXT",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "kubernetes"),
                ("OCC_KUBERNETES_AUTH", "in-cluster"),
            ],
            "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
        ),
        (
            &[
                ("OCC_DATABASE_URL", "sqlite:///x"),
                ("OCC_DATA_DIR", "/tmp/d"),
                ("OCC_SECRET_DRIVER", "kubernetes"),
                ("OCC_KUBERNETES_AUTH", "in-cluster"),
                ("OCC_KUBERNETES_API_SERVICE_ACCOUNT", "api"),
            ],
            "OCC_KUBERNETES_API_SERVICE_ACCOUNT",
        ),
    ];
    for (pairs, name) in cases {
        let err = ServerSettings::load(&env_of(pairs))
            .unwrap_err()
            .to_string();
        assert!(err.contains(name), "{err} should name {name}");
    }
}

#[test]
fn yaml_file_is_closed_and_env_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("occ.yaml");
    std::fs::write(&path, format!("database_url: sqlite:///tmp/f.db\nport: 4000\ndata_dir: /tmp/d\nauth_secret: {SECRET}\nworker_max_attempts: 7\n")).unwrap();
    let p = path.to_str().unwrap().to_owned();
    let s =
        ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p), ("OCC_PORT", "4001")])).unwrap();
    assert_eq!(s.port, 4001);
    let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
    assert_eq!(w.worker.max_attempts, 7);
    std::fs::write(&path, "database_url: sqlite:///tmp/f.db\nprot: 4000\n").unwrap();
    let err = ServerSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prot"), "{err}");
}

#[test]
fn a_chatgpt_backend_makes_the_service_account_driver() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("occ.yaml");
    let p = path.to_str().unwrap().to_owned();
    let ws = "7d0a9c1e-3b5f-4e21-9a8c-2f6b4d1e0c3a";
    let write = |backends: &str| {
        std::fs::write(
            &path,
            format!("database_url: sqlite:///tmp/f.db\ndata_dir: /tmp/d\nbackends:\n{backends}"),
        )
        .unwrap();
    };
    write(&format!(
        "  - id: chatgpt\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: /etc/occ/chatgpt-admin-key\n    credentialTtlSeconds: 86400\n"
    ));
    let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
    let b = &w.platform.backends[0];
    assert!(b.manages_accounts());
    assert_eq!(b.workspace_id.as_deref(), Some(ws));
    assert_eq!(b.credential_ttl_seconds, Some(86400));
    // A bare chatgpt Backend (selected by Agents, no accounts made) is still fine.
    write("  - id: plain\n    type: chatgpt\n");
    let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
    assert!(!w.platform.backends[0].manages_accounts());
    for (bad, named) in [
        (
            format!("  - id: a\n    type: chatgpt\n    workspaceId: {ws}\n"),
            "go together",
        ),
        (
            "  - id: a\n    type: chatgpt\n    workspaceId: nope\n    adminKeyFile: /k\n"
                .to_owned(),
            "workspaceId",
        ),
        (
            format!(
                "  - id: a\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: rel/k\n"
            ),
            "adminKeyFile",
        ),
        (
            format!(
                "  - id: a\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: /k\n    credentialTtlSeconds: 0\n"
            ),
            "credentialTtlSeconds",
        ),
        (
            format!(
                "  - id: a\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: /k\n    apiBaseUrl: ftp://x\n"
            ),
            "apiBaseUrl",
        ),
        (
            format!("  - id: a\n    type: other\n    workspaceId: {ws}\n"),
            "type chatgpt",
        ),
        (
            format!(
                "  - id: a\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: /k\n  - id: b\n    type: chatgpt\n    workspaceId: {ws}\n    adminKeyFile: /k\n"
            ),
            "at most one",
        ),
        (
            "  - id: a\n    type: chatgpt\n    adminKey: inline\n".to_owned(),
            "adminKey",
        ),
    ] {
        write(&bad);
        let err = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{named}: {err}");
    }
}

#[test]
fn ssh_hosts_of_particular_namespaces_come_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("occ.yaml");
    let ns = "ns_0f8fad5b-d9cb-469f-a165-70867728950e";
    std::fs::write(
        &path,
        format!(
            "database_url: sqlite:///tmp/f.db\ndata_dir: /tmp/d\ncompute_driver: ssh\n\
             ssh_address: a.example.com\nssh_identity_file: /etc/occ/id\n\
             ssh_known_hosts_file: /etc/occ/known_hosts\nssh_namespace_hosts:\n  {ns}:\n    \
             address: b.example.com\n    port: 2222\n    port_range: 30000-30099\n    \
             supervisor: systemd\n    systemd_unit_dir: /etc/systemd/occ\n"
        ),
    )
    .unwrap();
    let p = path.to_str().unwrap().to_owned();
    let w = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)])).unwrap();
    let ssh = match w.platform.compute.driver {
        ComputeDriverSettings::Ssh(ssh) => ssh,
        other => panic!("ssh: {other:?}"),
    };
    assert_eq!(ssh.address, "a.example.com");
    let b = &ssh.namespace_hosts[ns];
    assert_eq!((b.address.as_str(), b.port), ("b.example.com", 2222));
    assert_eq!(b.port_range, 30000..=30099);
    assert_eq!(b.identity_file, PathBuf::from("/etc/occ/id"), "inherited");
    assert!(b.namespace_hosts.is_empty());
    assert_eq!(b.supervisor, SupervisorChoice::Systemd);
    assert_eq!(b.systemd_unit_dir, PathBuf::from("/etc/systemd/occ"));
    assert_eq!(ssh.supervisor, SupervisorChoice::Auto, "the default host's");
    for (bad, named) in [
        ("  not-an-id:\n    address: b\n", "not-an-id"),
        (&format!("  {ns}:\n    port: 22\n"), "address"),
        (
            &format!("  {ns}:\n    address: b\n    remote_root: rel\n"),
            "remote_root",
        ),
        (
            &format!("  {ns}:\n    address: b\n    supervisor: upstart\n"),
            "supervisor",
        ),
    ] {
        std::fs::write(
            &path,
            format!(
                "database_url: sqlite:///tmp/f.db\ndata_dir: /tmp/d\ncompute_driver: ssh\n\
                 ssh_address: a\nssh_identity_file: /id\nssh_known_hosts_file: /kh\n\
                 ssh_namespace_hosts:\n{bad}"
            ),
        )
        .unwrap();
        let err = WorkerProcessSettings::load(&env_of(&[("OCC_CONFIG_PATH", &p)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{named}: {err}");
    }
}

#[test]
fn origins() {
    assert_eq!(
        origin_of("https://occ.example.com").unwrap(),
        ("https://occ.example.com".into(), true)
    );
    assert_eq!(
        origin_of("http://127.0.0.1:3000/").unwrap().0,
        "http://127.0.0.1:3000"
    );
    assert!(origin_of("http://x/console").is_err());
    assert!(origin_of("http://u:p@x").is_err());
}
