//! A throwaway OpenSSH server on 127.0.0.1 for the SSH Compute Driver's tests: its own host key,
//! a client key allowed to log in as root, a `known_hosts` file with the host key, `sshd -D`
//! owned by the test (killed by PID when stopped or dropped). Stopping and starting it again
//! keeps the port and the host key, as a host coming back would.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<tokio::process::Child>,
}

fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .expect("ssh-keygen");
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `[127.0.0.1]:<port> <type> <key>` for the public key at `pub_path`.
fn known_hosts_line(pub_path: &Path, port: u16) -> String {
    let public = std::fs::read_to_string(pub_path).expect("public key");
    let mut fields = public.split_whitespace();
    let kind = fields.next().expect("type");
    let key = fields.next().expect("key");
    format!("[127.0.0.1]:{port} {kind} {key}\n")
}

impl Sshd {
    pub async fn start() -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: apt-get install openssh-server"
        );
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
        let dir = tempfile::tempdir().expect("sshd dir");
        let port = super::free_port();
        let d = dir.path();
        keygen(&d.join("host_ed25519"), "occ-test-host");
        keygen(&d.join("client_ed25519"), "occ-test-client");
        keygen(&d.join("other_ed25519"), "occ-test-other-host");
        std::fs::copy(d.join("client_ed25519.pub"), d.join("authorized_keys"))
            .expect("authorized_keys");
        std::fs::write(
            d.join("known_hosts"),
            known_hosts_line(&d.join("host_ed25519.pub"), port),
        )
        .expect("known_hosts");
        std::fs::write(
            d.join("wrong_known_hosts"),
            known_hosts_line(&d.join("other_ed25519.pub"), port),
        )
        .expect("wrong known_hosts");
        std::fs::write(d.join("empty_known_hosts"), "").expect("empty known_hosts");
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nPidFile {pid}\n\
                 AuthorizedKeysFile {keys}\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\nLogLevel VERBOSE\n",
                host = d.join("host_ed25519").display(),
                pid = d.join("sshd.pid").display(),
                keys = d.join("authorized_keys").display(),
            ),
        )
        .expect("sshd_config");
        let mut sshd = Sshd {
            dir,
            port,
            child: None,
        };
        sshd.resume().await;
        sshd
    }

    /// Starts `sshd -D` (again) on the same port with the same host key.
    pub async fn resume(&mut self) {
        assert!(self.child.is_none(), "sshd already runs");
        let d = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("sshd.log"))
            .expect("sshd.log");
        let mut child = tokio::process::Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn sshd");
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                break;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("sshd exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd never listened: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.child = Some(child);
    }

    /// Stops the listening sshd (by its PID) and waits for it.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
            let _ = child.wait().await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "sshd still listens");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    pub fn identity(&self) -> PathBuf {
        self.dir.path().join("client_ed25519")
    }

    /// The file with the host's real key.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// A file that records another key for this host (a changed host key).
    pub fn wrong_known_hosts(&self) -> PathBuf {
        self.dir.path().join("wrong_known_hosts")
    }

    /// A file that knows no key for this host.
    pub fn empty_known_hosts(&self) -> PathBuf {
        self.dir.path().join("empty_known_hosts")
    }
}
