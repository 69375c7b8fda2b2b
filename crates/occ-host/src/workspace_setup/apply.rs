//! Applying a setup (steps 2–7 of the module docs): marker check, defaults, the never-overwrite
//! rule, native setup around the replacements, verification, the marker.

use std::fs;
use std::io;
use std::path::Path;

use super::defaults::stock_defaults;
use super::error::{MARKER_FILE, SetupError, io_step};
use super::files::{
    Guarded, prepare_workspace, read_marker, read_workspace_file, remove_leftover_temp,
    replace_file,
};
use super::input::{SetupInput, read_input_file};
use super::native::{SetupEnv, check_scratch, native_setup, seed_workspace};

/// What a setup run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupOutcome {
    /// The files were applied and the marker written now.
    Applied,
    /// The marker was already present and equal (a lost acknowledgement replayed, or a
    /// completed record verified); nothing was touched.
    AlreadyApplied,
}

/// Runs the setup described by the private `input_file` against `workspace` (steps 1–7 of the
/// module docs). On success of a setup that is not completed yet, the input file is deleted
/// (a file that cannot be deleted because of permissions or a read-only mount is left).
pub async fn run(
    input_file: &Path,
    workspace: &Path,
    env: &SetupEnv,
) -> Result<SetupOutcome, SetupError> {
    let input = read_input_file(input_file)?;
    let outcome = apply(&input, workspace, env).await?;
    if !input.completed {
        remove_input_file(input_file)?;
    }
    Ok(outcome)
}

/// Step 7: deletes the input file after a successful application; a file that is already gone,
/// or cannot be deleted because of permissions, a read-only mount or a file mount (a Pod's
/// `subPath`), is fine.
pub fn remove_input_file(input_file: &Path) -> Result<(), SetupError> {
    match fs::remove_file(input_file) {
        Ok(()) => Ok(()),
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || matches!(
                    e.raw_os_error(),
                    Some(libc::EROFS | libc::EACCES | libc::EPERM | libc::EBUSY)
                ) =>
        {
            Ok(())
        }
        Err(e) => Err(io_step(format!("delete {}", input_file.display()))(e)),
    }
}

/// Steps 2–6 for an input already read (e.g. from stdin); [`run`] adds reading and deleting the
/// input file.
pub async fn apply(
    input: &SetupInput,
    workspace: &Path,
    env: &SetupEnv,
) -> Result<SetupOutcome, SetupError> {
    input.validate()?;
    let workspace = prepare_workspace(workspace)?;
    check_scratch(&workspace, env)?;
    let identity = input.marker();
    match read_marker(&workspace)? {
        Some(existing) if existing == identity => return Ok(SetupOutcome::AlreadyApplied),
        Some(_) => return Err(SetupError::MarkerMismatch),
        None if input.completed => return Err(SetupError::MarkerMissing),
        None => {}
    }
    let files = input.files.as_ref().ok_or_else(|| {
        SetupError::Input("a setup that is not completed needs at least one file".into())
    })?;
    let defaults = stock_defaults(&env.runtime)?;
    if let Some(given) = &input.defaults_id
        && *given != defaults.id
    {
        return Err(SetupError::StaleDefaults {
            given: given.clone(),
            current: defaults.id,
        });
    }
    let stock = |name: &str| defaults.files.get(name).map(String::as_bytes);

    // 5. Never overwrite user content.
    for (name, value) in files {
        check_replaceable(&workspace, name, value, stock(name))?;
    }
    remove_leftover_temp(&workspace)?;

    // 6. (An empty workspace is seeded from the runtime's copy of native setup's output.)
    seed_workspace(&workspace, env).await?;
    for (name, value) in files {
        if check_replaceable(&workspace, name, value, stock(name))? {
            replace_file(&workspace, name, value.as_bytes())?;
        }
    }
    native_setup(&workspace, env).await?;
    for (name, value) in files {
        match read_workspace_file(&workspace, name)? {
            Guarded::Content(bytes) if bytes == value.as_bytes() => {}
            _ => return Err(SetupError::Verify { name: name.clone() }),
        }
    }
    replace_file(&workspace, MARKER_FILE, &identity)?;
    Ok(SetupOutcome::Applied)
}

/// Whether `name` must be replaced: `Ok(false)` when it already holds `value`, `Ok(true)` when
/// it is absent or the stock text, otherwise [`SetupError::Divergent`].
fn check_replaceable(
    workspace: &Path,
    name: &str,
    value: &str,
    stock: Option<&[u8]>,
) -> Result<bool, SetupError> {
    match read_workspace_file(workspace, name)? {
        Guarded::Absent => Ok(true),
        Guarded::Content(bytes) if bytes == value.as_bytes() => Ok(false),
        Guarded::Content(bytes) if Some(bytes.as_slice()) == stock => Ok(true),
        Guarded::Content(_) | Guarded::TooLarge => Err(SetupError::Divergent {
            name: name.to_owned(),
        }),
    }
}
