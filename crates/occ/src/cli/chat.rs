//! `occ agent chat`: one turn, or a conversation read line by line.

use std::time::Duration;

use reqwest::Method;

use super::client::{Client, Output};

/// How long the CLI waits for a chat turn (the API's own deadline is 120 s).
pub(super) const CHAT_WAIT: Duration = Duration::from_secs(150);

/// `occ agent chat`: one turn, or a conversation read line by line from stdin.
pub(super) async fn agent_chat(
    c: &Client,
    path: &str,
    message: Option<String>,
    session: Option<String>,
) -> anyhow::Result<()> {
    if let Some(message) = message {
        return chat_turn(c, path, &message, session.as_deref()).await;
    }
    let session = session.unwrap_or_else(|| "occ-chat".into());
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    loop {
        if interactive {
            use std::io::Write as _;
            print!("> ");
            std::io::stdout().flush()?;
        }
        let Some(line) = lines.next_line().await? else {
            return Ok(());
        };
        if line.trim().is_empty() {
            continue;
        }
        chat_turn(c, path, &line, Some(&session)).await?;
    }
}

/// One turn: streamed to stdout for people, the whole answer for `-o json|yaml`.
pub(super) async fn chat_turn(
    c: &Client,
    path: &str,
    message: &str,
    session: Option<&str>,
) -> anyhow::Result<()> {
    let mut body = serde_json::json!({"message": message});
    if let Some(session) = session {
        body["sessionKey"] = session.into();
    }
    if !matches!(c.output, Output::Table) {
        let answer = c
            .call_with(Method::POST, path, Some(body), CHAT_WAIT)
            .await?;
        return c.print(&answer, &[]);
    }
    let mut streamed = String::new();
    let answer = c
        .stream_events(path, body, CHAT_WAIT, |event, data| {
            if event == "delta"
                && let Some(text) = data["text"].as_str()
            {
                use std::io::Write as _;
                print!("{text}");
                let _ = std::io::stdout().flush();
                streamed.push_str(text);
            }
        })
        .await?;
    let reply = answer["reply"].as_str().unwrap_or_default();
    if streamed.is_empty() {
        print!("{reply}");
    }
    println!();
    eprintln!(
        "({}, {} ms, session {})",
        answer["model"].as_str().unwrap_or("model unknown"),
        answer["durationMs"],
        answer["sessionKey"].as_str().unwrap_or("-")
    );
    Ok(())
}
