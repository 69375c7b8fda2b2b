//! A revision's captured output (`logs/<revId>/gateway.log`): size-capped rotation, bounded reads
//! that resume exactly where the previous read stopped, and the retention of the last few
//! revisions' logs.
//!
//! The gateway holds the log open with `O_APPEND` (its stdout and stderr, and OpenClaw's own
//! `logging.file`), so renaming the file would not cap it: rotation copies the log to
//! `gateway.log.1` and truncates it, and the gateway's next write lands at the new end. The
//! rotation count lives in `gateway.log.generation`, so a reader tells "rotated" from "grew".
//! Rotation and reads hold a lock on the revision's log directory (exclusive and shared), so a reader
//! never sees the copy without the count or the count without the truncation. A line the gateway
//! writes between the copy and the truncation is lost; a reader crossing a rotation therefore
//! reports a [`LogGap::BufferLost`] instead of claiming it saw everything.
//!
//! Every file is opened without following symbolic links and must be a plain file with one
//! name: with per-Agent accounts `logs/<revId>/` belongs to the Agent's user, who must not turn a
//! read or a rotation by root into one of another file (`logs/` itself is root's, so the
//! revision directories cannot be swapped for links).

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use occ_core::compute::{
    ComputeError, LOG_READ_MAX_BYTES, LOG_TAIL_MAX_LINES, LogChunk, LogEntry, LogGap, LogPosition,
    LogQuery,
};
use occ_core::{ReasonCode, RevisionId};

use crate::failure::ownership;
use crate::fsutil;
use crate::layout::{
    RevisionMarker, read_dir, read_json, remove_dir, revision_dir, revision_log_dir,
};

/// The size at which the gateway's log is rotated (a revision keeps at most about twice this).
pub(crate) const LOG_ROTATE_BYTES: u64 = 4 * 1024 * 1024;

/// How many revisions' log directories an Agent keeps (see [`prune_revision_logs`]).
pub(crate) const LOG_REVISIONS_KEPT: usize = 5;

/// How long a rotation or read waits for the other to finish.
const LOCK_WAIT: Duration = Duration::from_secs(3);

/// A workload's log files in a revision's log directory: the gateway's (`gateway.log`) or, for
/// a dedicated revision, its harness launcher's (`harness.log`, same rotation and reads).
#[derive(Debug, Clone)]
pub(crate) struct GatewayLog {
    dir: PathBuf,
    name: &'static str,
}

impl GatewayLog {
    /// The gateway log of revision `rev` in the Agent directory `agent_dir`.
    pub(crate) fn of_revision(agent_dir: &Path, rev: &RevisionId) -> Self {
        Self {
            dir: revision_log_dir(agent_dir, rev),
            name: "gateway",
        }
    }

    /// The harness log of the dedicated revision `rev`.
    pub(crate) fn of_harness(agent_dir: &Path, rev: &RevisionId) -> Self {
        Self {
            dir: revision_log_dir(agent_dir, rev),
            name: "harness",
        }
    }

    /// The log the workload appends to.
    pub(crate) fn current_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    fn rotated_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log.1", self.name))
    }

    fn generation_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log.generation", self.name))
    }

    /// Rotates the log when it reached `cap` bytes. `false` when there is nothing to rotate.
    pub(crate) fn rotate_if_over(&self, cap: u64) -> Result<bool, ComputeError> {
        let Some(_lock) = self.lock(true)? else {
            return Ok(false);
        };
        let current = self.current_path();
        let Some(mut file) = open_plain(&current, true).map_err(|e| log_error(&current, e))? else {
            return Ok(false);
        };
        let len = file.metadata().map_err(|e| log_error(&current, e))?.len();
        if len < cap {
            return Ok(false);
        }
        let rotated = self.rotated_path();
        let mut copy = Vec::with_capacity(len as usize);
        file.read_to_end(&mut copy)
            .map_err(|e| log_error(&current, e))?;
        fsutil::write_atomic(&rotated, &copy, false).map_err(|e| log_error(&rotated, e))?;
        let generation = self.generation()? + 1;
        let generation_path = self.generation_path();
        fsutil::write_atomic(&generation_path, generation.to_string().as_bytes(), false)
            .map_err(|e| log_error(&generation_path, e))?;
        file.set_len(0).map_err(|e| log_error(&current, e))?;
        Ok(true)
    }

    /// One bounded read (see [`LogQuery`]).
    pub(crate) fn read(&self, query: &LogQuery) -> Result<LogChunk, ComputeError> {
        let Some(_lock) = self.lock(false)? else {
            return Ok(empty_chunk(None));
        };
        let current = self.current_path();
        let Some(file) = open_plain(&current, false).map_err(|e| log_error(&current, e))? else {
            return Ok(empty_chunk(None));
        };
        let meta = file.metadata().map_err(|e| log_error(&current, e))?;
        let stream = meta.ino().to_string();
        let generation = self.generation()?;
        let here = |offset| LogPosition {
            stream: stream.clone(),
            generation,
            offset,
        };
        let Some(after) = &query.after else {
            return self.tail(file, query.tail_lines, here);
        };
        let mut entries = Vec::new();
        let mut budget = LOG_READ_MAX_BYTES;
        let start = if after.stream != stream || after.generation > generation {
            entries.push(LogEntry::Gap(LogGap::StreamReplaced));
            0
        } else if after.generation == generation {
            if after.offset > meta.len() {
                entries.push(LogEntry::Gap(LogGap::StreamReplaced));
                0
            } else {
                after.offset
            }
        } else if after.generation + 1 == generation {
            // The rest of the position's generation is in the copy.
            let rotated = self.rotated_path();
            if let Some(copy) = open_plain(&rotated, false).map_err(|e| log_error(&rotated, e))? {
                let part = read_lines_from(&copy, after.offset, budget, true)
                    .map_err(|e| log_error(&rotated, e))?;
                budget -= part.consumed;
                entries.extend(part.lines.into_iter().map(LogEntry::Line));
                if part.more {
                    return Ok(LogChunk {
                        entries,
                        position: Some(LogPosition {
                            offset: after.offset + part.consumed,
                            ..after.clone()
                        }),
                        truncated: true,
                    });
                }
            }
            entries.push(LogEntry::Gap(LogGap::BufferLost));
            0
        } else {
            entries.push(LogEntry::Gap(LogGap::WindowExceeded));
            0
        };
        let part =
            read_lines_from(&file, start, budget, false).map_err(|e| log_error(&current, e))?;
        entries.extend(part.lines.into_iter().map(LogEntry::Line));
        Ok(LogChunk {
            entries,
            position: Some(here(start + part.consumed)),
            truncated: part.more,
        })
    }

    /// The last `lines` complete lines (of the copy and the current log), bounded by
    /// [`LOG_READ_MAX_BYTES`]; the position is the end of the last complete line.
    fn tail(
        &self,
        file: File,
        lines: usize,
        here: impl Fn(u64) -> LogPosition,
    ) -> Result<LogChunk, ComputeError> {
        let lines = lines.clamp(1, LOG_TAIL_MAX_LINES);
        let current = self.current_path();
        let len = file.metadata().map_err(|e| log_error(&current, e))?.len();
        let from = len.saturating_sub(LOG_READ_MAX_BYTES);
        let mut bytes = read_range(&file, from, len).map_err(|e| log_error(&current, e))?;
        // A line still being written is delivered by the next follow read.
        let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(complete);
        let end = from + complete as u64;
        let mut text = split_lines(&bytes, from > 0);
        let budget_left = LOG_READ_MAX_BYTES - (len - from);
        if text.len() < lines && from == 0 && budget_left > 0 {
            let rotated = self.rotated_path();
            if let Some(copy) = open_plain(&rotated, false).map_err(|e| log_error(&rotated, e))? {
                let copy_len = copy.metadata().map_err(|e| log_error(&rotated, e))?.len();
                let copy_from = copy_len.saturating_sub(budget_left);
                let older =
                    read_range(&copy, copy_from, copy_len).map_err(|e| log_error(&rotated, e))?;
                let mut older = split_lines(&older, copy_from > 0);
                older.append(&mut text);
                text = older;
            }
        }
        let skip = text.len().saturating_sub(lines);
        Ok(LogChunk {
            entries: text.into_iter().skip(skip).map(LogEntry::Line).collect(),
            position: Some(here(end)),
            truncated: false,
        })
    }

    /// The rotation count (0 before the first rotation).
    fn generation(&self) -> Result<u64, ComputeError> {
        let path = self.generation_path();
        let Some(bytes) = fsutil::read_bounded(&path, 32).map_err(|e| log_error(&path, e))? else {
            return Ok(0);
        };
        std::str::from_utf8(&bytes)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| log_error(&path, io::Error::other("not a rotation count")))
    }

    /// Holds a lock (exclusive or shared) on the log directory until dropped; `None` when the
    /// revision has no log directory (it never ran here).
    fn lock(&self, exclusive: bool) -> Result<Option<File>, ComputeError> {
        let dir = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
            .open(&self.dir)
        {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(log_error(&self.dir, e)),
        };
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            let attempt = if exclusive {
                dir.try_lock()
            } else {
                dir.try_lock_shared()
            };
            match attempt {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(log_error(
                        &self.dir,
                        io::Error::other("the log stays locked"),
                    ));
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(log_error(&self.dir, e)),
            }
        }
        Ok(Some(dir))
    }
}

/// Removes the log directories of all but the newest [`LOG_REVISIONS_KEPT`] revisions (by
/// revision number), never those of `keep` (the revision being activated and the one it
/// replaces, which a rollback may bring back). A directory not named by a revision id is not a
/// revision's log and is left alone.
pub(crate) fn prune_revision_logs(
    agent_dir: &Path,
    keep: &[&RevisionId],
) -> Result<(), ComputeError> {
    let mut others = Vec::new();
    for dir in read_dir(&agent_dir.join("logs"))? {
        let Some(rev) = dir
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<RevisionId>().ok())
        else {
            continue;
        };
        if keep.contains(&&rev) {
            continue;
        }
        // A log without its revision's marker sorts oldest.
        let number =
            read_json::<RevisionMarker>(&revision_dir(agent_dir, &rev).join("revision.json"))?
                .map_or(0, |marker| marker.revision);
        others.push((number, dir));
    }
    others.sort_by_key(|(number, _)| std::cmp::Reverse(*number));
    let room = LOG_REVISIONS_KEPT.saturating_sub(keep.len());
    for (_, dir) in others.into_iter().skip(room) {
        remove_dir(&dir)?;
    }
    Ok(())
}

/// Lines read from an offset.
struct LinesRead {
    lines: Vec<String>,
    /// Bytes the lines took (with their newlines): the position advances by this.
    consumed: u64,
    /// Complete output is left after them.
    more: bool,
}

/// Complete lines from `offset`, at most `budget` bytes. A line longer than the whole budget is
/// delivered cut at the budget (so a read always advances); with `final_part` (a rotated copy
/// that never grows) a last line without a newline is delivered too.
fn read_lines_from(
    file: &File,
    offset: u64,
    budget: u64,
    final_part: bool,
) -> io::Result<LinesRead> {
    let len = file.metadata()?.len();
    let end = len.min(offset.saturating_add(budget));
    let mut bytes = read_range(file, offset, end)?;
    let complete = if final_part && end == len {
        bytes.len()
    } else {
        match bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if bytes.len() as u64 == budget => bytes.len(),
            None => 0,
        }
    };
    bytes.truncate(complete);
    let consumed = complete as u64;
    // A partial last line at the end is not more: it is delivered once complete.
    let more = end < len;
    Ok(LinesRead {
        lines: split_lines(&bytes, false),
        consumed,
        more,
    })
}

/// Bytes `from..to` of `file`.
fn read_range(file: &File, from: u64, to: u64) -> io::Result<Vec<u8>> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity(to.saturating_sub(from) as usize);
    reader
        .take(to.saturating_sub(from))
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The lines of `bytes` (without newlines, invalid UTF-8 replaced); with `cut_start` the first
/// one began before `bytes` and is dropped.
fn split_lines(bytes: &[u8], cut_start: bool) -> Vec<String> {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    if body.is_empty() {
        return Vec::new();
    }
    body.split(|&b| b == b'\n')
        .skip(usize::from(cut_start))
        .map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            String::from_utf8_lossy(line).into_owned()
        })
        .collect()
}

/// Opens a plain file with one name without following a link; `None` when it does not exist.
fn open_plain(path: &Path, write: bool) -> io::Result<Option<File>> {
    let file = match OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a plain log file",
        ));
    }
    Ok(Some(file))
}

fn empty_chunk(position: Option<LogPosition>) -> LogChunk {
    LogChunk {
        entries: Vec::new(),
        position,
        truncated: false,
    }
}

/// A link or a file with another name where the Agent's log belongs is what its account may
/// have planted (as `layout::open_log` refuses it); anything else is a failed read.
fn log_error(path: &Path, e: io::Error) -> ComputeError {
    if e.raw_os_error() == Some(libc::ELOOP) || e.kind() == io::ErrorKind::InvalidData {
        return ownership(format!(
            "{} is not a plain log file of the Agent: {e}",
            path.display()
        ));
    }
    ComputeError::transient(
        ReasonCode::RuntimeLogsUnavailable,
        format!("cannot read the Agent's log {}: {e}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn append(path: &Path, text: &str) {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    fn setup() -> (tempfile::TempDir, GatewayLog) {
        let dir = tempfile::tempdir().unwrap();
        let rev = RevisionId::generate();
        std::fs::create_dir_all(revision_log_dir(dir.path(), &rev)).unwrap();
        let log = GatewayLog::of_revision(dir.path(), &rev);
        (dir, log)
    }

    /// A prepared revision `number` of the Agent in `agent_dir` whose gateway wrote `line`.
    fn ran(agent_dir: &Path, number: u64, line: &str) -> RevisionId {
        let rev = RevisionId::generate();
        let snapshot = revision_dir(agent_dir, &rev);
        std::fs::create_dir_all(&snapshot).unwrap();
        crate::layout::write_json(
            &snapshot.join("revision.json"),
            &RevisionMarker {
                revision_id: rev.to_string(),
                revision: number,
                configuration_hash: "0".repeat(64),
            },
        )
        .unwrap();
        std::fs::create_dir_all(revision_log_dir(agent_dir, &rev)).unwrap();
        append(
            &GatewayLog::of_revision(agent_dir, &rev).current_path(),
            &format!("{line}\n"),
        );
        rev
    }

    fn follow(log: &GatewayLog, after: Option<LogPosition>) -> LogChunk {
        log.read(&LogQuery {
            workload: Default::default(),
            after,
            tail_lines: 1000,
            previous: false,
        })
        .unwrap()
    }

    fn lines(chunk: &LogChunk) -> Vec<String> {
        chunk
            .entries
            .iter()
            .map(|e| match e {
                LogEntry::Line(l) => l.clone(),
                LogEntry::Gap(g) => format!("<{g:?}>"),
            })
            .collect()
    }

    #[test]
    fn a_missing_log_reads_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let log = GatewayLog::of_revision(dir.path(), &RevisionId::generate());
        assert_eq!(follow(&log, None), empty_chunk(None));
        let (_dir, log) = setup();
        assert_eq!(follow(&log, None), empty_chunk(None));
        assert!(!log.rotate_if_over(1).unwrap());
    }

    #[test]
    fn each_revision_reads_its_own_log_and_one_that_never_ran_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let first = ran(dir.path(), 1, "from revision 1");
        let second = ran(dir.path(), 2, "from revision 2");
        assert_eq!(
            GatewayLog::of_revision(dir.path(), &first).current_path(),
            dir.path()
                .join("logs")
                .join(first.as_str())
                .join("gateway.log")
        );
        assert_eq!(
            lines(&follow(&GatewayLog::of_revision(dir.path(), &first), None)),
            ["from revision 1"]
        );
        assert_eq!(
            lines(&follow(&GatewayLog::of_revision(dir.path(), &second), None)),
            ["from revision 2"]
        );
        // An Agent-level log of an older occ is not any revision's.
        append(&dir.path().join("logs/gateway.log"), "agent-level\n");
        let never_ran = GatewayLog::of_revision(dir.path(), &RevisionId::generate());
        assert_eq!(follow(&never_ran, None), empty_chunk(None));
        // Rotating one revision's log leaves the other's alone.
        let first_log = GatewayLog::of_revision(dir.path(), &first);
        assert!(first_log.rotate_if_over(1).unwrap());
        assert!(first_log.rotated_path().exists());
        assert!(
            !GatewayLog::of_revision(dir.path(), &second)
                .rotated_path()
                .exists()
        );
    }

    #[test]
    fn pruning_keeps_the_newest_revisions_and_the_ones_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let agent_dir = dir.path();
        let revs: Vec<RevisionId> = (1..=8)
            .map(|n| ran(agent_dir, n, &format!("from revision {n}")))
            .collect();
        // Something that is not a revision's log directory is left alone.
        std::fs::create_dir_all(agent_dir.join("logs/not-a-revision")).unwrap();
        // Rolling back to revision 2 while revision 8 is installed.
        prune_revision_logs(agent_dir, &[&revs[1], &revs[7]]).unwrap();
        let kept: Vec<bool> = revs
            .iter()
            .map(|rev| revision_log_dir(agent_dir, rev).exists())
            .collect();
        assert_eq!(
            kept,
            [false, true, false, false, true, true, true, true],
            "revisions 2 and 8 and the newest three others"
        );
        assert_eq!(LOG_REVISIONS_KEPT, kept.iter().filter(|k| **k).count());
        assert!(agent_dir.join("logs/not-a-revision").exists());
        // The snapshots are not the logs' to remove.
        assert!(revs.iter().all(|rev| revision_dir(agent_dir, rev).exists()));
        // Idempotent.
        prune_revision_logs(agent_dir, &[&revs[1], &revs[7]]).unwrap();
        assert!(revision_log_dir(agent_dir, &revs[4]).exists());
        // A directory with no logs at all is nothing to prune.
        prune_revision_logs(&agent_dir.join("elsewhere"), &[&revs[0]]).unwrap();
    }

    #[test]
    fn tail_returns_the_last_complete_lines_and_follow_resumes_after_them() {
        let (_dir, log) = setup();
        append(&log.current_path(), "one\ntwo\r\nthree\npart");
        let chunk = log
            .read(&LogQuery {
                workload: Default::default(),
                after: None,
                tail_lines: 2,
                previous: false,
            })
            .unwrap();
        assert_eq!(lines(&chunk), ["two", "three"]);
        let next = follow(&log, chunk.position.clone());
        assert!(next.entries.is_empty(), "a partial line waits: {next:?}");
        append(&log.current_path(), "ial\nfour\n");
        let next = follow(&log, next.position);
        assert_eq!(lines(&next), ["partial", "four"]);
        assert!(!next.truncated);
    }

    #[test]
    fn following_across_rotations_delivers_every_line_once_or_a_gap() {
        let (_dir, log) = setup();
        let path = log.current_path();
        append(&path, "a1\na2\n");
        let first = follow(&log, None);
        assert_eq!(lines(&first), ["a1", "a2"]);
        append(&path, "a3\n");
        assert!(log.rotate_if_over(1).unwrap());
        append(&path, "b1\n");
        let second = follow(&log, first.position.clone());
        assert_eq!(lines(&second), ["a3", "<BufferLost>", "b1"]);
        append(&path, "b2\n");
        let third = follow(&log, second.position.clone());
        assert_eq!(lines(&third), ["b2"]);
        // Two rotations since the position: the first one's copy is gone.
        assert!(log.rotate_if_over(1).unwrap());
        append(&path, "c1\n");
        assert!(log.rotate_if_over(1).unwrap());
        append(&path, "d1\n");
        let fourth = follow(&log, third.position.clone());
        assert_eq!(lines(&fourth), ["<WindowExceeded>", "d1"]);
        // A fresh tail reaches into the copy.
        assert_eq!(lines(&follow(&log, None)), ["c1", "d1"]);
    }

    #[test]
    fn a_recreated_log_is_a_replaced_stream() {
        let (_dir, log) = setup();
        let path = log.current_path();
        append(&path, "old\n");
        let first = follow(&log, None);
        let moved = log.dir.join("elsewhere");
        std::fs::rename(&path, &moved).unwrap();
        append(&path, "new\n");
        std::fs::remove_file(moved).unwrap();
        assert_eq!(
            lines(&follow(&log, first.position)),
            ["<StreamReplaced>", "new"]
        );
    }

    #[test]
    fn a_read_is_bounded_and_resumes() {
        let (_dir, log) = setup();
        let path = log.current_path();
        let line = "x".repeat(1023);
        let count = (LOG_READ_MAX_BYTES / 1024) as usize + 10;
        append(&path, &format!("{line}\n").repeat(count));
        let start = LogPosition {
            stream: std::fs::metadata(&path).unwrap().ino().to_string(),
            generation: 0,
            offset: 0,
        };
        let first = follow(&log, Some(start));
        assert!(first.truncated);
        assert_eq!(first.entries.len(), (LOG_READ_MAX_BYTES / 1024) as usize);
        let second = follow(&log, first.position);
        assert!(!second.truncated);
        assert_eq!(second.entries.len(), 10);
        // One line longer than a whole read still advances.
        append(&path, &"y".repeat(LOG_READ_MAX_BYTES as usize + 5));
        let third = follow(&log, second.position);
        assert_eq!(third.entries.len(), 1);
        assert_eq!(
            third.position.unwrap().offset,
            std::fs::metadata(&path).unwrap().len() - 5
        );
    }

    #[test]
    fn links_are_refused() {
        let (dir, log) = setup();
        let target = dir.path().join("secret");
        std::fs::write(&target, "root only\n").unwrap();
        std::os::unix::fs::symlink(&target, log.current_path()).unwrap();
        let read = log.read(&LogQuery {
            workload: Default::default(),
            after: None,
            tail_lines: 10,
            previous: false,
        });
        assert_eq!(
            read.expect_err("a link is refused").code,
            ReasonCode::OwnershipConflict
        );
        std::fs::remove_file(log.current_path()).unwrap();
        std::fs::hard_link(&target, log.current_path()).unwrap();
        assert_eq!(
            log.rotate_if_over(1)
                .expect_err("a second name is refused")
                .code,
            ReasonCode::OwnershipConflict
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "root only\n");
    }
}
