//! Per-workload control groups, where this machine lets occ make them: each contained workload
//! starts in a cgroup of its own under occ's, with a resident-memory ceiling (the `memory`
//! controller) and a process ceiling (`pids`) that count that workload alone, whichever user
//! it runs as. Only cgroup v1 hierarchies occ can write are used (v2 needs delegation from the
//! service manager); elsewhere the rlimits of [`super::WorkloadLimits`] are all there is.
//!
//! The chain enters its cgroup before anything else runs: `sh -c 'echo $$ > …/cgroup.procs …;
//! exec "$@"'` moves itself and execs the rest in place, so every process the workload starts
//! is inside. A workload's cgroup stays (empty) after it exits; the next workload started
//! removes every empty one left (`rmdir` refuses a cgroup that still holds a process) that is
//! older than [`SWEEP_AFTER`], never one made for a workload still starting.

use std::io;
use std::path::{Path, PathBuf};

/// The prefix of the cgroups occ makes (and sweeps).
const PREFIX: &str = "occ-workload-";

/// How old an empty workload cgroup must be to be swept: a workload enters its own within
/// moments of its creation.
pub const SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The parents, in each usable controller's hierarchy, of the workloads' cgroups: occ's own
/// cgroup there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    memory: PathBuf,
    pids: PathBuf,
}

/// One workload's cgroup: the `cgroup.procs` files its first process writes itself into.
pub(crate) struct WorkloadCgroup {
    pub procs: [PathBuf; 2],
}

impl Cgroups {
    /// occ's cgroups in the v1 `memory` and `pids` hierarchies under `root` (normally
    /// `/sys/fs/cgroup`), as `/proc/self/cgroup` names them, if occ can make a child in both.
    pub fn detect(root: &Path) -> Option<Self> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path_of = |controller: &str| {
            own.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers
                    .split(',')
                    .any(|c| c == controller)
                    .then(|| root.join(controller).join(path.trim_start_matches('/')))
            })
        };
        let cgroups = Self {
            memory: path_of("memory")?,
            pids: path_of("pids")?,
        };
        let probe = format!("{PREFIX}probe-{}", std::process::id());
        for parent in [&cgroups.memory, &cgroups.pids] {
            let dir = parent.join(&probe);
            std::fs::create_dir(&dir).ok()?;
            let _ = std::fs::remove_dir(&dir);
        }
        Some(cgroups)
    }

    /// A new cgroup for one workload with `resident_mib` of memory (0: no ceiling) and at most
    /// `processes` processes and threads (0: none), after removing every empty one left. A
    /// workload that runs as another user (`uid`) is given its `cgroup.procs` to enter.
    pub(crate) fn create(
        &self,
        resident_mib: u64,
        processes: u64,
        uid: Option<u32>,
    ) -> io::Result<WorkloadCgroup> {
        self.sweep(SWEEP_AFTER);
        let name = format!("{PREFIX}{:032x}", rand::random::<u128>());
        let memory = self.memory.join(&name);
        let pids = self.pids.join(&name);
        std::fs::create_dir(&memory)?;
        std::fs::create_dir(&pids)?;
        if resident_mib > 0 {
            let bytes = resident_mib.saturating_mul(1024 * 1024);
            std::fs::write(memory.join("memory.limit_in_bytes"), bytes.to_string())?;
        }
        if processes > 0 {
            std::fs::write(pids.join("pids.max"), processes.to_string())?;
        }
        let procs = [memory.join("cgroup.procs"), pids.join("cgroup.procs")];
        if let Some(uid) = uid {
            for file in &procs {
                std::os::unix::fs::chown(file, Some(uid), None)?;
            }
        }
        Ok(WorkloadCgroup { procs })
    }

    /// Removes every empty workload cgroup at least `min_age` old (a live workload's `rmdir`
    /// fails and it stays).
    pub fn sweep(&self, min_age: std::time::Duration) {
        for parent in [&self.memory, &self.pids] {
            let Ok(entries) = std::fs::read_dir(parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let old_enough = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|at| at.elapsed().is_ok_and(|age| age >= min_age));
                if old_enough && entry.file_name().to_string_lossy().starts_with(PREFIX) {
                    let _ = std::fs::remove_dir(entry.path());
                }
            }
        }
    }
}
