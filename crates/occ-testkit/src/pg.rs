//! One throwaway PostgreSQL cluster per test process.

use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// A running cluster.
pub struct PgCluster {
    /// Its directory (data, socket, log).
    pub dir: PathBuf,
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// The PostgreSQL bin directory used.
    pub bin: PathBuf,
    /// The server options it runs with (durability off unless [`PgCluster::make_durable`]).
    options: Mutex<String>,
}

/// Durability off: what every test but the crash tests runs with (a test cluster holds nothing
/// worth an fsync).
const FAST_SETTINGS: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";
/// Durability on, as a production server runs.
const DURABLE_SETTINGS: &str = "-c fsync=on -c synchronous_commit=on -c full_page_writes=on";

impl PgCluster {
    /// URL of a database on this cluster, as the `postgres` superuser.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The postmaster's PID (from its PID file).
    pub fn pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }
}

static CLUSTER: OnceLock<PgCluster> = OnceLock::new();

/// The cluster of this test process, started on first use.
pub fn pg_cluster() -> &'static PgCluster {
    CLUSTER.get_or_init(start_cluster)
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// The PostgreSQL server binaries: `$PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`.
pub fn pg_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("PG_BIN") {
        return b.into();
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries not installed (apt-get install postgresql)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect("no /usr/lib/postgresql/*/bin/initdb")
}

/// Builds a command that runs as the `postgres` OS user when we are root.
fn server_command(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start_cluster() -> PgCluster {
    let bin = pg_bin();
    // Short path: the Unix socket path must stay under 107 bytes.
    let dir = tempfile::Builder::new()
        .prefix("occpg")
        .tempdir_in("/tmp")
        .expect("tempdir")
        .keep();
    if is_root() {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:postgres").arg(&dir);
                c
            },
            "chown cluster dir",
        );
    }
    // The reaper first, so even a failed start is cleaned up.
    spawn_reaper(&[bin.join("pg_ctl")], &dir);
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    let data = dir.join("data");
    let mut initdb = server_command(&bin.join("initdb"));
    initdb.arg("-D").arg(&data).args([
        "-U",
        "postgres",
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]);
    run(initdb, "initdb");
    let options = format!(
        "-p {port} -k {} -h 127.0.0.1 {FAST_SETTINGS} -c max_connections=300 -c shared_buffers=64MB",
        dir.display()
    );
    let mut pg_ctl = server_command(&bin.join("pg_ctl"));
    pg_ctl
        .arg("-D")
        .arg(&data)
        .arg("-l")
        .arg(dir.join("server.log"))
        .args(["-w", "-t", "60", "-o", &options, "start"]);
    run(pg_ctl, "pg_ctl start");
    PgCluster {
        dir,
        port,
        bin,
        options: Mutex::new(options),
    }
}

impl PgCluster {
    /// Stops the server (fast shutdown: every session is cut), waits `downtime`, starts it
    /// again on the same port and data. Only for tests that own their test process's cluster
    /// (their own test binary): every other user of it sees the outage.
    pub fn restart(&self, downtime: std::time::Duration) {
        let data = self.dir.join("data");
        let mut stop = server_command(&self.bin.join("pg_ctl"));
        stop.arg("-D")
            .arg(&data)
            .args(["-m", "fast", "-w", "-t", "60", "stop"]);
        run(stop, "pg_ctl stop");
        std::thread::sleep(downtime);
        self.start();
    }

    fn start(&self) {
        let options = self.options.lock().expect("options").clone();
        let mut start = server_command(&self.bin.join("pg_ctl"));
        start
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &options, "start"]);
        run(start, "pg_ctl start");
    }

    /// Restarts the cluster with durability on (`fsync`, `synchronous_commit`,
    /// `full_page_writes`), as a production server runs: for tests that crash it on purpose
    /// (their own test binary, like [`PgCluster::restart`]).
    pub fn make_durable(&self) {
        {
            let mut options = self.options.lock().expect("options");
            *options = options.replace(FAST_SETTINGS, DURABLE_SETTINGS);
        }
        self.restart(std::time::Duration::ZERO);
    }

    /// Kills the server with SIGKILL — the postmaster and every process it started, so nothing
    /// gets to flush or checkpoint — then starts it again on the same data: PostgreSQL recovers
    /// by replaying its write-ahead log. (The kernel's page cache survives, as in any process
    /// crash; a power loss is not simulated.)
    pub fn crash_and_restart(&self) {
        let postmaster = self.pid().expect("the cluster is running");
        let mut victims = vec![postmaster];
        victims.extend(children_of(postmaster));
        for pid in &victims {
            // Stopped by PID, never by name; a process already gone is fine.
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while victims
            .iter()
            .any(|pid| Path::new(&format!("/proc/{pid}")).exists())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "PostgreSQL processes survived SIGKILL"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.start();
    }
}

/// The processes whose parent is `parent` (from `/proc/<pid>/stat`).
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                // The command may contain spaces and parentheses: fields follow the last ')'.
                .and_then(|stat| {
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Spawns a detached watcher that waits for this process to exit, then (if `pg_ctl` is given)
/// stops the cluster in `dir` through its PID file, and removes `dir`.
pub(crate) fn spawn_reaper(pg_ctl: &[PathBuf], dir: &Path) {
    let me = std::process::id();
    let stop = match pg_ctl.first() {
        Some(pg_ctl) => {
            let prefix = if is_root() {
                "runuser -u postgres -- "
            } else {
                ""
            };
            format!(
                "if [ -f '{d}/data/postmaster.pid' ]; then {prefix}'{p}' -D '{d}/data' -m immediate -w -t 30 stop >/dev/null 2>&1; fi; ",
                d = dir.display(),
                p = pg_ctl.display()
            )
        }
        None => String::new(),
    };
    let script = format!(
        "while kill -0 {me} 2>/dev/null; do sleep 0.3; done; {stop}rm -rf '{}'",
        dir.display()
    );
    // Double fork: the outer shell exits at once (we wait for it), the watcher is re-parented
    // and outlives this process.
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("( {script} ) >/dev/null 2>&1 &"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .status()
        .expect("spawn reaper");
    assert!(status.success(), "reaper shell failed");
}
