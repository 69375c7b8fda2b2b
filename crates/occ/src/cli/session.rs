//! `occ login` / `occ logout`: a password sign-in whose session every command uses when no
//! service key is given (kept by `session_file`). It lives as long as the server's session (8
//! hours by default); signing out, or an administrator disabling the account or ending its
//! sessions, ends it at once.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use clap::Args;
use reqwest::Method;
use serde_json::json;

use super::client::Client;
use super::session_file::{SavedSession, load, save, session_path};

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
