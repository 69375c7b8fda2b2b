//! A dedicated harness's launch input for tests of `occ harness-launch`: the layout the process
//! Driver gives it under one directory, the credential written 0600, the model endpoint the
//! test kit's fake model, free loopback ports for the app-server and the (absent) gateway.

use std::path::Path;

use occ_host::harness::{
    AppServerInput, LaunchInput, LoginInput, LoginMethod, ModelEndpoint, NodeInput,
};

use crate::fake_model::FakeModel;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// The launch input under `dir` for the runtime at `runtime`, logging in with `key` (an API
/// key, written to `dir/revision/credential`), the app-server expecting the token whose
/// SHA-256 is `token_sha256`; the node host waits for a setup code in
/// `dir/revision/setup-code`. The status file's directory exists.
pub fn launch_input(
    dir: &Path,
    runtime: &Path,
    model: &FakeModel,
    key: &str,
    token_sha256: String,
) -> LaunchInput {
    use std::os::unix::fs::PermissionsExt as _;
    let credential = dir.join("revision/credential");
    std::fs::create_dir_all(credential.parent().expect("parent")).expect("mkdir");
    std::fs::write(&credential, format!("{key}\n")).expect("credential");
    std::fs::set_permissions(&credential, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let harness = dir.join("harness");
    // The status file's directory is the Driver's to make (the revision's directory).
    std::fs::create_dir_all(harness.join("run")).expect("run dir");
    LaunchInput {
        runtime_dir: runtime.to_path_buf(),
        workspace: harness.join("workspace"),
        home: harness.join("home"),
        codex_home: harness.join("codex-home"),
        tmp_dir: harness.join("tmp"),
        log_file: harness.join("logs/harness.log"),
        log_stdout: false,
        status_file: harness.join("run/status.json"),
        workspace_setup: None,
        login: LoginInput {
            method: LoginMethod::ApiKey,
            credential_file: credential,
            chatgpt_workspace_id: None,
        },
        model: Some(ModelEndpoint {
            base_url: model.base_url(),
            model: None,
        }),
        app_server: AppServerInput {
            host: "127.0.0.1".parse().expect("ip"),
            port: free_port(),
            token_sha256,
        },
        node: NodeInput {
            gateway_host: "127.0.0.1".into(),
            gateway_port: free_port(),
            state_dir: harness.join("node/rev1"),
            setup_code_file: dir.join("revision/setup-code"),
        },
    }
}
