//! The private input of one setup: its shape, validation, and the input file.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use occ_core::resource::{WorkspaceFileName, WorkspaceSetup};
use occ_core::validate::Problems;
use occ_core::{AgentId, NamespaceId};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::error::{SetupError, io_step};
use super::files::{Guarded, Unsafe, read_guarded};
use crate::fsutil;

/// Largest input file.
pub const INPUT_MAX_BYTES: u64 = 400_000;
/// Longest setup, Namespace or Agent id in the input, in characters.
pub const ID_MAX_CHARS: usize = 256;
const DUPLICATE_FILE: &str = "files names a file twice";

/// The private input of one setup (the staged record as the Driver delivers it).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetupInput {
    /// Setup identity.
    pub id: String,
    /// The owning Namespace.
    pub namespace_id: String,
    /// The owning Agent.
    pub agent_id: String,
    /// The stock defaults id the files were written against.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_string"
    )]
    pub defaults_id: Option<String>,
    /// File name → text; absent once completed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_files"
    )]
    pub files: Option<BTreeMap<String, String>>,
    /// Whether the setup was applied and activated (then only the marker is verified).
    pub completed: bool,
}

impl fmt::Debug for SetupInput {
    // Never print file contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetupInput")
            .field("id", &self.id)
            .field("namespace_id", &self.namespace_id)
            .field("agent_id", &self.agent_id)
            .field("defaults_id", &self.defaults_id)
            .field(
                "files",
                &self.files.as_ref().map(|f| {
                    f.iter()
                        .map(|(name, text)| (name.as_str(), text.len()))
                        .collect::<Vec<_>>()
                }),
            )
            .field("completed", &self.completed)
            .finish()
    }
}

impl From<&WorkspaceSetup> for SetupInput {
    fn from(setup: &WorkspaceSetup) -> Self {
        SetupInput {
            id: setup.id.clone(),
            namespace_id: setup.namespace_id.to_string(),
            agent_id: setup.agent_id.to_string(),
            defaults_id: setup.defaults_id.clone(),
            files: setup.files.as_ref().map(|files| {
                files
                    .iter()
                    .map(|(name, text)| (name.as_str().to_owned(), text.clone()))
                    .collect()
            }),
            completed: setup.completed,
        }
    }
}

/// `null` is not "absent".
fn present_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// A JSON object of strings that names no key twice (`null` is not "absent").
fn present_files<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Files;
    impl<'de> Visitor<'de> for Files {
        type Value = BTreeMap<String, String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of file texts")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut files = BTreeMap::new();
            while let Some((name, text)) = map.next_entry::<String, String>()? {
                if files.insert(name, text).is_some() {
                    return Err(serde::de::Error::custom(DUPLICATE_FILE));
                }
            }
            Ok(files)
        }
    }
    d.deserialize_map(Files).map(Some)
}

impl SetupInput {
    /// Checks everything step 1 requires of a parsed input.
    pub fn validate(&self) -> Result<(), SetupError> {
        let bad = |m: &str| Err(SetupError::Input(m.to_owned()));
        let id_ok = |s: &str| {
            !s.is_empty() && s.chars().count() <= ID_MAX_CHARS && !s.chars().any(char::is_control)
        };
        if !id_ok(&self.id) {
            return bad("id must be 1 to 256 characters without control characters");
        }
        if self.namespace_id.parse::<NamespaceId>().is_err() {
            return bad("namespaceId is not a Namespace id (ns_<lowercase uuid v4>)");
        }
        if self.agent_id.parse::<AgentId>().is_err() {
            return bad("agentId is not an Agent id (agt_<lowercase uuid v4>)");
        }
        if let Some(d) = &self.defaults_id
            && !is_sha256_hex(d)
        {
            return bad("defaultsId must be 64 lowercase hex digits");
        }
        match (&self.files, self.completed) {
            (Some(_), true) => bad("a completed setup carries no files"),
            (None, false) => bad("a setup that is not completed needs at least one file"),
            (Some(files), false) if files.is_empty() => {
                bad("a setup that is not completed needs at least one file")
            }
            (Some(files), false) => {
                if files.keys().any(|n| WorkspaceFileName::parse(n).is_none()) {
                    return bad("files may only name AGENTS.md, SOUL.md, IDENTITY.md and USER.md");
                }
                let mut problems = Problems::new();
                for (name, text) in files {
                    occ_core::inputs::check_workspace_content(
                        text,
                        &format!("/files/{name}"),
                        &mut problems,
                    );
                }
                match problems.items().first() {
                    Some(p) => Err(SetupError::Input(format!("{} {}", p.path, p.expectation))),
                    None => Ok(()),
                }
            }
            (None, true) => Ok(()),
        }
    }

    /// The compact JSON the Driver writes into the private input file.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The marker bytes: compact JSON of `{id, namespaceId, agentId, defaultsId?}`.
    pub fn marker(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Marker<'a> {
            id: &'a str,
            namespace_id: &'a str,
            agent_id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            defaults_id: Option<&'a str>,
        }
        serde_json::to_vec(&Marker {
            id: &self.id,
            namespace_id: &self.namespace_id,
            agent_id: &self.agent_id,
            defaults_id: self.defaults_id.as_deref(),
        })
        .unwrap_or_default()
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Parses and validates input bytes (≤ [`INPUT_MAX_BYTES`]). Error messages never quote the
/// input.
pub fn parse_input(bytes: &[u8]) -> Result<SetupInput, SetupError> {
    if bytes.len() as u64 > INPUT_MAX_BYTES {
        return Err(SetupError::Input(format!(
            "larger than {INPUT_MAX_BYTES} bytes"
        )));
    }
    let input: SetupInput = serde_json::from_slice(bytes).map_err(|e| {
        SetupError::Input(format!(
            "{} (line {}, column {})",
            describe_json_error(&e),
            e.line(),
            e.column()
        ))
    })?;
    input.validate()?;
    Ok(input)
}

/// serde_json's data errors may quote values ("invalid type: string \"…\""); only messages
/// known to quote nothing but field names are passed on.
fn describe_json_error(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let shown = e.to_string();
    let message = shown
        .rsplit_once(" at line ")
        .map_or(shown.as_str(), |(m, _)| m);
    match e.classify() {
        Category::Syntax | Category::Eof => format!("not valid JSON: {message}"),
        Category::Io => "unreadable".to_owned(),
        Category::Data => {
            if message.starts_with("missing field")
                || message.starts_with("duplicate field")
                || message == DUPLICATE_FILE
            {
                message.to_owned()
            } else if message.starts_with("unknown field") {
                "has a key other than id, namespaceId, agentId, defaultsId, files, completed"
                    .to_owned()
            } else if message.starts_with("invalid type") {
                "a value has the wrong JSON type (expected an object of strings and a boolean)"
                    .to_owned()
            } else {
                "does not have the shape of a setup input".to_owned()
            }
        }
    }
}

/// Reads and validates the private input file: a regular file (not a symbolic link) with one
/// link and at most [`INPUT_MAX_BYTES`].
pub fn read_input_file(path: &Path) -> Result<SetupInput, SetupError> {
    let bytes = match read_guarded(path, INPUT_MAX_BYTES) {
        Ok(Guarded::Content(bytes)) => bytes,
        Ok(Guarded::Absent) => {
            return Err(SetupError::Input(format!(
                "{} does not exist",
                path.display()
            )));
        }
        Ok(Guarded::TooLarge) => {
            return Err(SetupError::Input(format!(
                "{} is larger than {INPUT_MAX_BYTES} bytes",
                path.display()
            )));
        }
        Err(Unsafe::Refused(reason)) => {
            return Err(SetupError::Input(format!("{}: {reason}", path.display())));
        }
        Err(Unsafe::Io(e)) => return Err(io_step(format!("read {}", path.display()))(e)),
    };
    parse_input(&bytes)
}

/// Writes an input file for [`run`]: compact JSON, mode 0600, atomically (replacing a leftover
/// of an earlier attempt).
pub fn write_input_file(path: &Path, input: &SetupInput) -> Result<(), SetupError> {
    fsutil::write_atomic(path, &input.to_json(), false)
        .map_err(io_step(format!("write {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(files: Option<&[(&str, &str)]>, completed: bool) -> SetupInput {
        SetupInput {
            id: "wss_1".into(),
            namespace_id: NamespaceId::generate().to_string(),
            agent_id: AgentId::generate().to_string(),
            defaults_id: None,
            files: files.map(|f| {
                f.iter()
                    .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                    .collect()
            }),
            completed,
        }
    }

    #[test]
    fn marker_is_compact_in_order() {
        let mut i = input(Some(&[("USER.md", "x")]), false);
        let ns = i.namespace_id.clone();
        let agt = i.agent_id.clone();
        assert_eq!(
            String::from_utf8(i.marker()).unwrap(),
            format!(r#"{{"id":"wss_1","namespaceId":"{ns}","agentId":"{agt}"}}"#)
        );
        i.defaults_id = Some("a".repeat(64));
        assert!(String::from_utf8(i.marker()).unwrap().ends_with(&format!(
            r#""agentId":"{agt}","defaultsId":"{}"}}"#,
            "a".repeat(64)
        )));
    }

    #[test]
    fn input_round_trips_and_debug_hides_contents() {
        let i = input(Some(&[("USER.md", "private words")]), false);
        let parsed = parse_input(&i.to_json()).unwrap();
        assert_eq!(parsed, i);
        assert!(!format!("{parsed:?}").contains("private words"));
        let done = input(None, true);
        assert_eq!(parse_input(&done.to_json()).unwrap(), done);
        assert!(!String::from_utf8(done.to_json()).unwrap().contains("files"));
    }

    #[test]
    fn parse_errors_never_quote_values() {
        let canary = "CANARY-7f3a";
        let ns = NamespaceId::generate();
        let agt = AgentId::generate();
        let cases = [
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":"{canary}"}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":5}},"{canary}":1}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"{canary}":"{canary}"}}}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":"{canary}\u0000"}}}}"#
            ),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":false,"files":{{"USER.md":"a","USER.md":"{canary}"}}}}"#
            ),
            format!(r#"["{canary}"]"#),
            format!(r#"{{"id":"{canary}","#),
            format!(r#"{{"id":"x","namespaceId":"{canary}","agentId":"{agt}","completed":true}}"#),
            format!(
                r#"{{"id":"x","namespaceId":"{ns}","agentId":"{agt}","completed":true,"defaultsId":"{canary}"}}"#
            ),
        ];
        for case in cases {
            let err = parse_input(case.as_bytes()).unwrap_err();
            assert!(matches!(err, SetupError::Input(_)), "{err:?}");
            assert!(!err.to_string().contains(canary), "{err}");
        }
    }
}
