//! The seccomp filter every contained workload runs under: the system calls a gateway, the
//! Codex harness or a shell tool never needs, and that widen what a process with no
//! capabilities can reach of the kernel, fail with `EPERM`. Everything else is allowed.
//!
//! It is a deny list, as Docker's default profile is in effect for these calls: an allow list
//! would have to follow every Node, libuv and Codex release. The list holds kernel module and
//! boot control, mounts and namespaces (bubblewrap has set them up before the filter applies),
//! tracing and reading other processes' memory, the kernel keyring, BPF and perf, clock and
//! swap control, and handle-based opens that step around the mount view.
//!
//! A workload that makes sandboxes of its own (the Codex harness: its exec sandbox is a nested
//! bubblewrap) keeps the namespace and mount calls; they act only inside the user namespace it
//! makes, which holds nothing the outer sandbox does not.

use std::collections::BTreeMap;

use seccompiler::{SeccompAction, SeccompFilter, SeccompRule, TargetArch};

/// Which workloads a system call is denied to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Denied {
    /// Every workload.
    Always,
    /// Every workload but one that makes sandboxes of its own.
    UnlessNesting,
}
use Denied::{Always, UnlessNesting};

/// The system calls a contained workload may not make (named for the reader), and whether a
/// workload that makes sandboxes of its own keeps them.
const DENIED: &[(&str, i64, Denied)] = &[
    ("acct", libc::SYS_acct, Always),
    ("add_key", libc::SYS_add_key, Always),
    ("bpf", libc::SYS_bpf, Always),
    ("clock_adjtime", libc::SYS_clock_adjtime, Always),
    ("clock_settime", libc::SYS_clock_settime, Always),
    ("delete_module", libc::SYS_delete_module, Always),
    ("finit_module", libc::SYS_finit_module, Always),
    ("fsconfig", libc::SYS_fsconfig, UnlessNesting),
    ("fsmount", libc::SYS_fsmount, UnlessNesting),
    ("fsopen", libc::SYS_fsopen, UnlessNesting),
    ("fspick", libc::SYS_fspick, UnlessNesting),
    ("init_module", libc::SYS_init_module, Always),
    ("kcmp", libc::SYS_kcmp, Always),
    ("kexec_file_load", libc::SYS_kexec_file_load, Always),
    ("kexec_load", libc::SYS_kexec_load, Always),
    ("keyctl", libc::SYS_keyctl, Always),
    ("lookup_dcookie", libc::SYS_lookup_dcookie, Always),
    ("mount", libc::SYS_mount, UnlessNesting),
    ("mount_setattr", libc::SYS_mount_setattr, UnlessNesting),
    ("move_mount", libc::SYS_move_mount, UnlessNesting),
    ("name_to_handle_at", libc::SYS_name_to_handle_at, Always),
    ("open_by_handle_at", libc::SYS_open_by_handle_at, Always),
    ("open_tree", libc::SYS_open_tree, UnlessNesting),
    ("perf_event_open", libc::SYS_perf_event_open, Always),
    ("pivot_root", libc::SYS_pivot_root, UnlessNesting),
    ("process_vm_readv", libc::SYS_process_vm_readv, Always),
    ("process_vm_writev", libc::SYS_process_vm_writev, Always),
    ("ptrace", libc::SYS_ptrace, Always),
    ("quotactl", libc::SYS_quotactl, Always),
    ("reboot", libc::SYS_reboot, Always),
    ("request_key", libc::SYS_request_key, Always),
    ("setns", libc::SYS_setns, UnlessNesting),
    ("settimeofday", libc::SYS_settimeofday, Always),
    ("swapoff", libc::SYS_swapoff, Always),
    ("swapon", libc::SYS_swapon, Always),
    ("syslog", libc::SYS_syslog, Always),
    ("umount2", libc::SYS_umount2, UnlessNesting),
    ("unshare", libc::SYS_unshare, UnlessNesting),
    ("userfaultfd", libc::SYS_userfaultfd, Always),
    ("vhangup", libc::SYS_vhangup, Always),
    #[cfg(target_arch = "x86_64")]
    ("ioperm", libc::SYS_ioperm, Always),
    #[cfg(target_arch = "x86_64")]
    ("iopl", libc::SYS_iopl, Always),
];

/// The filter as the classic BPF program bubblewrap's `--seccomp` reads: `struct sock_filter`
/// entries in this machine's byte order. `nesting` keeps the calls a nested sandbox makes.
pub(crate) fn program(nesting: bool) -> Result<Vec<u8>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for this architecture: {e}"))?;
    let rules: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .filter(|(_, _, denied)| !nesting || *denied == Always)
        .map(|(_, number, _)| (*number, Vec::new()))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e| format!("cannot compile the seccomp filter: {e}"))?;
    Ok(program
        .iter()
        .flat_map(|insn| {
            let mut bytes = Vec::with_capacity(8);
            bytes.extend_from_slice(&insn.code.to_ne_bytes());
            bytes.push(insn.jt);
            bytes.push(insn.jf);
            bytes.extend_from_slice(&insn.k.to_ne_bytes());
            bytes
        })
        .collect())
}
