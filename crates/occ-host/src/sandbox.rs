//! Containment of the workloads a host starts: each runs under bubblewrap (`bwrap`) in its own
//! user, mount, PID, IPC and UTS namespaces, in a new session, with every capability dropped,
//! `no_new_privs`, resource limits, and a filesystem that holds only the system's read-only
//! program directories, the pinned runtime (read-only) and the paths of its own that the
//! workload is given ([`View`]).
//!
//! An Agent is untrusted code: its model obeys any text that reaches it and OpenClaw gives it
//! file and shell tools. Without containment those tools see everything occ's user can read:
//! occ's data directory (the administrator key, the database, the Secret key), other Agents'
//! workspaces and the checkout. Inside the sandbox none of that exists.
//!
//! A seccomp filter ([`seccomp`]) refuses the system calls that widen what a process without
//! capabilities reaches of the kernel, and no further user namespace can be made inside.
//!
//! The chain is `setsid prlimit … bwrap … -- program args`: each execs the next in place, so the
//! pid occ records is the outer `bwrap` (which exits with the workload's status) and it leads a
//! new session without a controlling terminal (no terminal input can be injected) whose process
//! group holds everything the workload starts, as signals to a gateway's group expect. The PID
//! namespace dies with the workload's first process.
//!
//! A workload with a private network ([`network`]) runs as `setsid occ sandbox-relay … --
//! prlimit … bwrap --unshare-net … -- occ sandbox-relay … -- program args`: each relay runs
//! the rest as its child and exits like it, so the recorded pid is then the outer relay.

mod cgroup;
mod network;
pub mod relay;
mod seccomp;

use std::ffi::{OsStr, OsString};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use command_fds::{CommandFdExt, FdMapping};

pub use cgroup::Cgroups;
pub use network::PROXY_VARIABLES;
pub(crate) use network::{PrivateNetwork, named_endpoints};

/// The descriptor the seccomp program reaches bubblewrap on (after stdin, stdout and stderr).
const SECCOMP_FD: i32 = 3;

/// System directories every workload sees read-only (where they exist): the programs and
/// libraries Node, git and the shell tools need.
const SYSTEM_READ_ONLY: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];

/// The files of `/etc` a workload needs (name resolution, TLS roots, time zone, the user
/// database, the loader's cache). The rest of `/etc` (host keys, credentials) stays outside.
const ETC_READ_ONLY: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/gitconfig",
];

/// The uid and gid a workload has inside its user namespace (it maps to the account the
/// workload runs as outside: occ's own user, or the Agent's account).
pub(crate) const SANDBOX_ID: u32 = 1000;

/// Limits of one workload. A value of 0 leaves that limit as occ's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadLimits {
    /// Largest data segment (private writable memory), in MiB (`RLIMIT_DATA`).
    pub memory_mib: u64,
    /// Most processes and threads of the workload's user (`RLIMIT_NPROC`; it counts per user,
    /// so it bounds one Agent only where the Agent has its own account).
    pub processes: u64,
    /// Most open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// Most resident memory of the whole workload, in MiB (its cgroup's
    /// `memory.limit_in_bytes`, where occ can make cgroups; the kernel reclaims, then kills
    /// inside the workload only). `processes` is then also its cgroup's `pids.max`, which
    /// counts this workload alone.
    pub resident_mib: u64,
}

impl Default for WorkloadLimits {
    fn default() -> Self {
        Self {
            // V8's address-space reservations (code ranges, heaps of worker threads) count in
            // the data segment: a gateway idles at ~3.4 GiB of it with ~0.8 GiB resident, and
            // its first turn's worker threads fail at 4 GiB.
            memory_mib: 16384,
            processes: 1024,
            open_files: 8192,
            // A gateway idles at ~0.8 GiB resident; a dedicated Agent's harness (Codex and
            // the node host) adds its own.
            resident_mib: 4096,
        }
    }
}

/// How a host contains its workloads: the programs of the chain and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// `bwrap` (Debian's `bubblewrap`).
    pub bwrap: PathBuf,
    /// `setsid` (util-linux).
    pub setsid: PathBuf,
    /// `prlimit` (util-linux).
    pub prlimit: PathBuf,
    /// The limits of each workload.
    pub limits: WorkloadLimits,
    /// The compiled seccomp filter of every workload.
    pub seccomp: SeccompProgram,
    /// The filter of a workload that makes sandboxes of its own ([`View::nests_sandboxes`]).
    pub seccomp_nesting: SeccompProgram,
    /// The `occ` binary ([`SandboxSettings::with_occ_program`]): its `workspace-setup` applies
    /// an Agent's staged workspace files inside the Agent's sandbox, and its `sandbox-relay`
    /// connects a gateway's private network ([`network`]) to the host. Without it the files
    /// are applied in occ's own process and gateways share the host's network.
    pub occ_program: Option<PathBuf>,
    /// Where each workload gets a cgroup of its own ([`Cgroups::detect`]), or none.
    pub cgroups: Option<Cgroups>,
}

/// A compiled seccomp filter (classic BPF, as bubblewrap reads it).
#[derive(Clone, PartialEq, Eq)]
pub struct SeccompProgram(Arc<[u8]>);

impl SeccompProgram {
    /// The default filter (the calls listed in `sandbox/seccomp.rs` fail with `EPERM`) for this
    /// machine's architecture;
    /// with `nesting`, without the namespace and mount calls a nested sandbox makes.
    pub fn default_filter(nesting: bool) -> Result<Self, SandboxUnavailable> {
        seccomp::program(nesting)
            .map(|bytes| Self(bytes.into()))
            .map_err(SandboxUnavailable)
    }

    /// An anonymous file holding the program, read from its start.
    fn file(&self) -> std::io::Result<std::fs::File> {
        let mut file = tempfile::tempfile()?;
        file.write_all(&self.0)?;
        file.rewind()?;
        Ok(file)
    }
}

impl std::fmt::Debug for SeccompProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SeccompProgram({} instructions)", self.0.len() / 8)
    }
}

/// Why containment cannot run on this machine, naming what to install or enable.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SandboxUnavailable(String);

impl SandboxSettings {
    /// Finds the programs on `search_path` and checks that an unprivileged user namespace can
    /// be made here (the sandbox of every workload needs one), by running an empty sandbox.
    pub fn locate(search_path: &OsStr, limits: WorkloadLimits) -> Result<Self, SandboxUnavailable> {
        let find = |program: &str, package: &str| {
            find_program(search_path, program).ok_or_else(|| {
                SandboxUnavailable(format!(
                    "`{program}` is not installed: install the `{package}` package (Debian: apt-get install {package}), or turn containment off for development with OCC_PROCESS_ISOLATION=none"
                ))
            })
        };
        let settings = Self {
            bwrap: find("bwrap", "bubblewrap")?,
            setsid: find("setsid", "util-linux")?,
            prlimit: find("prlimit", "util-linux")?,
            limits,
            seccomp: SeccompProgram::default_filter(false)?,
            seccomp_nesting: SeccompProgram::default_filter(true)?,
            occ_program: None,
            cgroups: Cgroups::detect(Path::new("/sys/fs/cgroup")),
        };
        settings.check()?;
        Ok(settings)
    }

    /// Runs `true` in an empty sandbox: proves bubblewrap works, user namespaces are allowed
    /// here and the kernel takes the seccomp filter.
    fn check(&self) -> Result<(), SandboxUnavailable> {
        let view = View::default();
        let mut args = self.bwrap_args(&view);
        // Private networks need a network namespace too.
        args.push("--unshare-net".into());
        args.push("--".into());
        args.push("/bin/true".into());
        let cannot_run = |e: &dyn std::fmt::Display| {
            SandboxUnavailable(format!("cannot run {}: {e}", self.bwrap.display()))
        };
        let mut cmd = std::process::Command::new(&self.bwrap);
        cmd.args(&args).env_clear();
        self.pass_seccomp(&mut cmd, &view)
            .map_err(|e| cannot_run(&e))?;
        let output = cmd.output().map_err(|e| cannot_run(&e))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        Err(SandboxUnavailable(format!(
            "bubblewrap cannot make a sandbox here ({}): {}; unprivileged user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0), or turn containment off for development with OCC_PROCESS_ISOLATION=none",
            output.status,
            stderr.trim()
        )))
    }

    /// These settings with `occ` (the binary whose `workspace-setup` runs inside the sandbox
    /// and whose `sandbox-relay` joins a private network to the host).
    pub fn with_occ_program(mut self, occ: PathBuf) -> Self {
        self.occ_program = Some(occ);
        self
    }

    /// Gives `cmd` the seccomp program of `view`'s workload on [`SECCOMP_FD`] (the descriptor
    /// `--seccomp` names).
    fn pass_seccomp(&self, cmd: &mut impl CommandFdExt, view: &View) -> std::io::Result<()> {
        let program = if view.nests_sandboxes {
            &self.seccomp_nesting
        } else {
            &self.seccomp
        };
        let file = program.file()?;
        cmd.fd_mappings(vec![FdMapping {
            parent_fd: file.into(),
            child_fd: SECCOMP_FD,
        }])
        .map_err(std::io::Error::other)?;
        Ok(())
    }

    /// `inner` (a program, its arguments, its whole environment and working directory) as a
    /// contained workload that sees `view`. The caller adds stdio; it must not put the process
    /// in a group of its own (the chain makes a session, which leads its group). Fails only
    /// when the seccomp program cannot be handed over (no temporary file).
    pub(crate) fn wrap(
        &self,
        inner: &tokio::process::Command,
        view: &View,
    ) -> std::io::Result<tokio::process::Command> {
        let inner = inner.as_std();
        let network = view.network.as_ref().zip(self.occ_program.as_deref());
        let mut chain: Vec<OsString> = vec![self.setsid.clone().into()];
        if let Some((network, occ)) = network {
            chain.extend(relay_args(occ, network, &network.outside(), &network.named));
        }
        chain.push(self.prlimit.clone().into());
        chain.extend(self.limit_args());
        chain.push("--".into());
        chain.push(self.bwrap.clone().into());
        chain.extend(self.bwrap_args(view));
        if let Some((network, occ)) = network {
            chain.extend(["--unshare-net", "--ro-bind"].map(OsString::from));
            chain.extend([occ.into(), occ.into()]);
            chain.push("--bind".into());
            chain.extend([
                network.socket_dir.clone().into(),
                network.socket_dir.clone().into(),
            ]);
        }
        if let Some(dir) = inner.get_current_dir() {
            chain.extend([OsString::from("--chdir"), dir.into()]);
        }
        chain.push("--".into());
        if let Some((network, occ)) = network {
            chain.extend(relay_args(
                occ,
                network,
                &network.inside(),
                &Default::default(),
            ));
        }
        chain.push(inner.get_program().into());
        chain.extend(inner.get_args().map(OsString::from));
        // In a cgroup of its own first, where occ can make one: the shell moves itself in and
        // execs the chain in place.
        if let Some(cgroups) = &self.cgroups {
            let cgroup =
                cgroups.create(self.limits.resident_mib, self.limits.processes, view.uid)?;
            let mut entered: Vec<OsString> = vec![
                "-c".into(),
                r#"echo $$ > "$1" && echo $$ > "$2" && shift 2 && exec "$@""#.into(),
                "sh".into(),
            ];
            entered.extend(cgroup.procs.map(OsString::from));
            entered.append(&mut chain);
            chain = std::iter::once(OsString::from("/bin/sh"))
                .chain(entered)
                .collect();
        }
        let mut cmd = tokio::process::Command::new(&chain[0]);
        cmd.args(&chain[1..]);
        // The runtime's commands start from an empty environment; so does the chain.
        cmd.env_clear();
        for (name, value) in inner.get_envs() {
            if let Some(value) = value {
                cmd.env(name, value);
            }
        }
        self.pass_seccomp(&mut cmd, view)?;
        Ok(cmd)
    }

    fn limit_args(&self) -> Vec<OsString> {
        let WorkloadLimits {
            memory_mib,
            processes,
            open_files,
            ..
        } = self.limits;
        let mut args: Vec<OsString> = vec!["--core=0".into()];
        if memory_mib > 0 {
            let bytes = memory_mib.saturating_mul(1024 * 1024);
            args.push(format!("--data={bytes}").into());
        }
        if processes > 0 {
            args.push(format!("--nproc={processes}").into());
        }
        if open_files > 0 {
            args.push(format!("--nofile={open_files}").into());
        }
        args
    }

    /// bubblewrap's arguments for `view` (without the command).
    fn bwrap_args(&self, view: &View) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "agent",
            "--cap-drop",
            "ALL",
        ]
        .map(OsString::from)
        .into();
        if !view.nests_sandboxes {
            args.push("--disable-userns".into());
        }
        args.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
        args.extend(["--uid", "--gid"].iter().flat_map(|flag| {
            [
                OsString::from(*flag),
                OsString::from(SANDBOX_ID.to_string()),
            ]
        }));
        for dir in SYSTEM_READ_ONLY.iter().map(Path::new) {
            match std::fs::read_link(dir) {
                // `/bin -> usr/bin` on merged-/usr systems: the same link inside.
                Ok(target) => {
                    args.extend([OsString::from("--symlink"), target.into(), dir.into()]);
                }
                Err(_) if dir.is_dir() => {
                    args.extend([OsString::from("--ro-bind"), dir.into(), dir.into()]);
                }
                Err(_) => {}
            }
        }
        for file in ETC_READ_ONLY {
            args.extend(["--ro-bind-try", file, file].map(OsString::from));
        }
        args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(OsString::from));
        for path in &view.read_only {
            args.extend([OsString::from("--ro-bind"), path.into(), path.into()]);
        }
        for path in &view.read_write {
            args.extend([OsString::from("--bind"), path.into(), path.into()]);
        }
        args
    }
}

/// What one workload sees of the host's filesystem beyond the system directories: each path at
/// its own place, so the paths in its configuration stay true inside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// Read-only (the runtime, the revision's snapshot).
    pub read_only: Vec<PathBuf>,
    /// Read-write (its state, home, temporary files and logs).
    pub read_write: Vec<PathBuf>,
    /// Whether the workload makes sandboxes of its own (Codex's exec sandbox is a nested
    /// bubblewrap): it may then make user namespaces and mount inside them.
    pub nests_sandboxes: bool,
    /// The user it runs as outside when that is not occ's own (an Agent's account): its cgroup
    /// is handed to that user to enter.
    pub uid: Option<u32>,
    /// Its private network, where it has one (with [`SandboxSettings::occ_program`] set);
    /// otherwise it shares the host's.
    pub network: Option<PrivateNetwork>,
}

/// `occ sandbox-relay` with `forwards` in `network`'s socket directory (its egress proxy
/// allowing the `named` endpoints), up to the `--` before the program it runs.
fn relay_args(
    occ: &Path,
    network: &PrivateNetwork,
    forwards: &[relay::Forward],
    named: &relay::egress::Named,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        occ.into(),
        "sandbox-relay".into(),
        "--socket-dir".into(),
        network.socket_dir.clone().into(),
    ];
    for forward in forwards {
        args.extend([OsString::from("--forward"), forward.arg().into()]);
    }
    for (host, port) in named {
        let end = relay::RelayEnd::Tcp(host.clone(), *port).arg();
        let address = end.strip_prefix("tcp:").unwrap_or(&end);
        args.extend([OsString::from("--allow"), address.into()]);
    }
    args.push("--".into());
    args
}

/// `program` in one of the directories of `search_path`, if it is there.
fn find_program(search_path: &OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(search_path)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SandboxSettings {
        SandboxSettings {
            bwrap: "/usr/bin/bwrap".into(),
            setsid: "/usr/bin/setsid".into(),
            prlimit: "/usr/bin/prlimit".into(),
            limits: WorkloadLimits {
                memory_mib: 2048,
                processes: 64,
                open_files: 1024,
                resident_mib: 512,
            },
            seccomp: SeccompProgram::default_filter(false).expect("a filter for this machine"),
            seccomp_nesting: SeccompProgram::default_filter(true).expect("a filter"),
            occ_program: None,
            cgroups: None,
        }
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// The chain execs in place from `setsid` to the program, with the inner environment only,
    /// the limits and every namespace; the view's paths are bound at their own places.
    #[test]
    fn a_wrapped_command_is_the_chain_with_the_view_and_the_limits() {
        let mut inner = tokio::process::Command::new("/rt/node/bin/node");
        inner
            .arg("/rt/openclaw.mjs")
            .arg("gateway")
            .env_clear()
            .env("PATH", "/rt/node/bin:/usr/bin")
            .env("HOME", "/agents/a/home")
            .current_dir("/agents/a/state");
        let view = View {
            read_only: vec!["/rt".into(), "/agents/a/revisions/r".into()],
            read_write: vec!["/agents/a/state".into(), "/agents/a/home".into()],
            nests_sandboxes: false,
            uid: None,
            network: None,
        };
        let cmd = settings().wrap(&inner, &view).expect("wrapped");
        let std = cmd.as_std();
        assert_eq!(std.get_program(), "/usr/bin/setsid");
        let args: Vec<String> = std
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        assert!(
            joined.starts_with(
                "/usr/bin/prlimit --core=0 --data=2147483648 --nproc=64 --nofile=1024 -- /usr/bin/bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts"
            ),
            "{joined}"
        );
        for expected in [
            "--cap-drop ALL --disable-userns --seccomp 3",
            "--proc /proc --dev /dev --tmpfs /tmp",
            "--ro-bind /rt /rt",
            "--ro-bind /agents/a/revisions/r /agents/a/revisions/r",
            "--bind /agents/a/state /agents/a/state",
            "--bind /agents/a/home /agents/a/home",
            "--ro-bind-try /etc/resolv.conf /etc/resolv.conf",
            "--chdir /agents/a/state -- /rt/node/bin/node /rt/openclaw.mjs gateway",
        ] {
            assert!(joined.contains(expected), "{expected} missing: {joined}");
        }
        assert!(
            joined.ends_with("-- /rt/node/bin/node /rt/openclaw.mjs gateway"),
            "{joined}"
        );
        // Only the inner environment, and nothing of occ's own.
        let envs: Vec<(String, Option<String>)> = std
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert_eq!(
            envs,
            vec![
                ("HOME".to_owned(), Some("/agents/a/home".to_owned())),
                ("PATH".to_owned(), Some("/rt/node/bin:/usr/bin".to_owned())),
            ]
        );
    }

    /// With a private network (and the occ binary known), the chain starts with the outer
    /// relay, unshares the network, shows the relay's binary and socket directory, and runs the
    /// program under the inner relay; without the binary the network is the host's.
    #[test]
    fn a_private_network_puts_a_relay_either_side_of_the_sandbox() {
        let mut inner = tokio::process::Command::new("/rt/node");
        inner.arg("gateway").current_dir("/agents/a/state");
        let network = PrivateNetwork::for_config(
            "/agents/a/net/r".into(),
            29100,
            &serde_json::json!({"p": "http://127.0.0.1:29199/cap/v1", "q": "https://models.example/v1"}),
        );
        let view = View {
            network: Some(network),
            ..View::default()
        };
        let mut with_occ = settings();
        with_occ.occ_program = Some("/bin/occ".into());
        let cmd = with_occ.wrap(&inner, &view).expect("wrapped");
        let joined = strings(
            &cmd.as_std()
                .get_args()
                .map(OsString::from)
                .collect::<Vec<_>>(),
        )
        .join(" ");
        assert!(
            joined.starts_with(
                "/bin/occ sandbox-relay --socket-dir /agents/a/net/r --forward tcp:127.0.0.1:29100=unix:in.sock --forward unix:out-0.sock=tcp:127.0.0.1:29199 --forward unix:egress.sock=egress-proxy --allow models.example:443 -- /usr/bin/prlimit"
            ),
            "{joined}"
        );
        assert!(
            joined.contains("--unshare-net --ro-bind /bin/occ /bin/occ --bind /agents/a/net/r /agents/a/net/r --chdir /agents/a/state -- /bin/occ sandbox-relay --socket-dir /agents/a/net/r --forward unix:in.sock=tcp:127.0.0.1:29100 --forward tcp:127.0.0.1:29199=unix:out-0.sock --forward tcp:127.0.0.1:3128=unix:egress.sock -- /rt/node gateway"),
            "{joined}"
        );
        let without = settings().wrap(&inner, &view).expect("wrapped");
        let joined = strings(
            &without
                .as_std()
                .get_args()
                .map(OsString::from)
                .collect::<Vec<_>>(),
        )
        .join(" ");
        assert!(
            !joined.contains("sandbox-relay") && !joined.contains("--unshare-net"),
            "{joined}"
        );
    }

    #[test]
    fn nothing_of_etc_but_the_listed_files_and_no_limit_of_zero() {
        let mut s = settings();
        s.limits = WorkloadLimits {
            memory_mib: 0,
            processes: 0,
            open_files: 0,
            resident_mib: 0,
        };
        assert_eq!(strings(&s.limit_args()), vec!["--core=0"]);
        let args = strings(&s.bwrap_args(&View::default()));
        assert!(!args.iter().any(|a| a == "/etc"), "{args:?}");
        assert!(!args.iter().any(|a| a.starts_with("/etc/ssh")), "{args:?}");
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let err = SandboxSettings::locate(OsStr::new("/nonexistent"), WorkloadLimits::default())
            .expect_err("no bwrap in /nonexistent");
        let message = err.to_string();
        assert!(message.contains("bubblewrap"), "{message}");
        assert!(message.contains("OCC_PROCESS_ISOLATION=none"), "{message}");
    }

    /// A contained workload runs under the seccomp filter and cannot make a user namespace:
    /// `unshare` fails with the filter's EPERM (bubblewrap's own refusal would be ENOSPC), while
    /// ordinary work goes on. Runs the real chain.
    #[tokio::test]
    async fn a_workload_runs_under_the_seccomp_filter() {
        let path = OsStr::new(crate::runtime::DEFAULT_PATH);
        let sandbox = SandboxSettings::locate(path, WorkloadLimits::default()).expect("bubblewrap");
        let mut inner = tokio::process::Command::new("/bin/sh");
        inner.arg("-c").arg(
            "grep '^Seccomp:' /proc/self/status; unshare --user true; echo unshare=$?; echo done",
        );
        inner.env_clear().env("PATH", "/usr/bin:/bin");
        let out = sandbox
            .wrap(&inner, &View::default())
            .expect("wrapped")
            .output()
            .await
            .expect("run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("Seccomp:\t2"), "{stdout}");
        assert!(stdout.contains("unshare=1"), "{stdout}");
        assert!(stderr.contains("Operation not permitted"), "{stderr}");
        assert!(stdout.ends_with("done\n"), "{stdout}");

        // A workload that nests sandboxes (the Codex harness) may make its own user namespace,
        // still under a filter.
        let view = View {
            nests_sandboxes: true,
            ..View::default()
        };
        let out = sandbox
            .wrap(&inner, &view)
            .expect("wrapped")
            .output()
            .await
            .expect("run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = format!("{}: {stdout}{stderr}", out.status);
        assert!(stdout.contains("Seccomp:\t2"), "{said}");
        assert!(stdout.contains("unshare=0"), "{said}");
    }

    /// Where occ can make cgroups (root with writable v1 hierarchies, as on this machine), a
    /// workload runs in one of its own with the resident and process ceilings, and its cgroup
    /// goes with the next sweep once it exited. Elsewhere the chain starts without the step.
    #[tokio::test]
    async fn a_workload_runs_in_a_cgroup_of_its_own_where_occ_can_make_one() {
        let path = OsStr::new(crate::runtime::DEFAULT_PATH);
        let mut sandbox =
            SandboxSettings::locate(path, WorkloadLimits::default()).expect("bubblewrap");
        sandbox.limits.resident_mib = 300;
        sandbox.limits.processes = 50;
        let mut inner = tokio::process::Command::new("/bin/sh");
        inner.arg("-c").arg(
            "grep -E ':(memory|pids):' /proc/self/cgroup; for i in $(seq 1 60); do sleep 2 & done 2>&1 | head -1; wait",
        );
        inner.env_clear().env("PATH", "/usr/bin:/bin");
        let cmd = sandbox.wrap(&inner, &View::default()).expect("wrapped");
        let Some(cgroups) = sandbox.cgroups.clone() else {
            assert_eq!(cmd.as_std().get_program(), "/usr/bin/setsid");
            return;
        };
        assert_eq!(cmd.as_std().get_program(), "/bin/sh");
        let args: Vec<String> = cmd
            .as_std()
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let memory = std::path::PathBuf::from(&args[3]);
        let dir = memory.parent().expect("the cgroup").to_path_buf();
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.limit_in_bytes"))
                .expect("limit")
                .trim(),
            (300u64 * 1024 * 1024).to_string()
        );
        let mut cmd = cmd;
        let out = cmd.output().await.expect("run");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Its cgroup namespace's root is its own cgroup, which did hold its memory.
        assert!(stdout.contains(":memory:/\n"), "{stdout}");
        let used: u64 = std::fs::read_to_string(dir.join("memory.max_usage_in_bytes"))
            .expect("usage")
            .trim()
            .parse()
            .expect("a number");
        assert!(used > 0, "the workload's memory was counted in its cgroup");
        assert!(
            stdout.contains("Resource temporarily unavailable") || stdout.contains("fork"),
            "the 51st process is refused: {stdout}"
        );
        // Once the last of its processes is gone (the kernel may still be reaping them). At
        // least a second old: a sibling test's workload cgroup made a moment ago, which its shell
        // has not entered yet, must not go with it (that failed the seccomp test at random).
        for _ in 0..50 {
            cgroups.sweep(std::time::Duration::from_secs(1));
            if !dir.exists() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(!dir.exists(), "an exited workload's cgroup is swept");
    }
}
