//! `occ login` / `occ logout` and the signed-in session every command uses when no service key
//! is given: the session cookie kept in the user's config directory (`$OCC_CONFIG_DIR`, else
//! `$XDG_CONFIG_HOME/occ`, else `~/.config/occ`), owner-only, for one API origin. It lives as
//! long as the server's session (8 hours by default); signing out, or an administrator
//! disabling the account or ending its sessions, ends it at once.

use std::fs::OpenOptions;
use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::client::Client;

/// The signed-in session as it is kept on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedSession {
    /// The API origin it belongs to.
    pub url: String,
    /// The session cookie's name and value.
    pub cookie_name: String,
    /// The cookie's value: the session credential.
    pub token: String,
    /// Who signed in.
    pub email: String,
    /// The account.
    pub user_id: String,
}

/// Where the session file lives.
pub fn session_path() -> anyhow::Result<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let dir = var("OCC_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("occ")))
        .or_else(|| var("HOME").map(|d| d.join(".config").join("occ")))
        .ok_or_else(|| anyhow!("no config directory: set OCC_CONFIG_DIR or HOME"))?;
    Ok(dir.join("session.json"))
}

/// The saved session for `url`, if there is one (none where no config directory is known).
pub fn load(url: &str) -> anyhow::Result<Option<SavedSession>> {
    let Ok(path) = session_path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let saved: SavedSession = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a saved session; run occ logout", path.display()))?;
    Ok((saved.url == url).then_some(saved))
}

/// Writes the session owner-only, replacing the previous one in one rename.
fn save(session: &SavedSession) -> anyhow::Result<PathBuf> {
    let path = session_path()?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let temp = dir.join(format!(".session.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .with_context(|| format!("creating {}", temp.display()))?;
    let mut bytes = serde_json::to_vec_pretty(session)?;
    bytes.push(b'\n');
    file.write_all(&bytes)?;
    file.sync_all()?;
    std::fs::rename(&temp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// `occ login`
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The account's email.
    #[arg(long)]
    email: String,
    /// A file holding the password (else the first line of standard input).
    #[arg(long)]
    password_file: Option<PathBuf>,
}

fn read_password(file: Option<&Path>) -> anyhow::Result<String> {
    let line = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--password-file {}", path.display()))?,
        None => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("reading the password from standard input")?;
            line
        }
    };
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        bail!("no password given: pass --password-file or write it on standard input");
    }
    Ok(password)
}

/// `occ login`: signs in with email and password and keeps the session for this API origin.
pub async fn login(c: &Client, args: LoginArgs) -> anyhow::Result<()> {
    let password = read_password(args.password_file.as_deref())?;
    let resp = c
        .send(
            Method::POST,
            "/api/auth/sign-in/email",
            Some(json!({"email": args.email, "password": password})),
            None,
            None,
        )
        .await?;
    let cookie = resp
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .and_then(|kv| kv.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
    Client::success(resp).await?;
    let (cookie_name, token) =
        cookie.ok_or_else(|| anyhow!("the sign-in answer set no session cookie"))?;
    let signed_in = c.with_session(&cookie_name, &token);
    let me = signed_in
        .call(Method::GET, "/api/auth/session", None)
        .await?;
    let user = &me["user"];
    let session = SavedSession {
        url: c.base.clone(),
        cookie_name,
        token,
        email: user["email"].as_str().unwrap_or_default().to_owned(),
        user_id: user["id"].as_str().unwrap_or_default().to_owned(),
    };
    let path = save(&session)?;
    c.print(
        &json!({"url": session.url, "email": session.email, "userId": session.user_id,
                "principalId": user["principalId"], "file": path.display().to_string()}),
        &["email", "userId", "principalId", "file"],
    )
}

/// `occ logout`: ends the saved session on the server (when it still lives) and forgets it.
pub async fn logout(c: &Client) -> anyhow::Result<()> {
    let path = session_path()?;
    let Some(saved) = load(&c.base)? else {
        println!("Not signed in to {}.", c.base);
        return Ok(());
    };
    let signed_in = c.with_session(&saved.cookie_name, &saved.token);
    // A session that already ended (401) is as good as signed out.
    match signed_in
        .call(Method::POST, "/api/auth/sign-out", None)
        .await
    {
        Ok(_) => {}
        Err(e)
            if e.downcast_ref::<super::client::ApiFailure>()
                .is_some_and(|f| f.status == 401) => {}
        Err(e) => return Err(e),
    }
    std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    println!("Signed out of {}.", c.base);
    Ok(())
}
