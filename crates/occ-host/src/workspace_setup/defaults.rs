//! The stock workspace files of the pinned OpenClaw, rendered from the runtime's templates as
//! native setup writes them, and their id.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use occ_core::resource::WorkspaceFileName;
use sha2::Digest as _;

use super::error::SetupError;
use crate::fsutil;
use crate::runtime::{OPENCLAW_VERSION, OpenclawRuntime};

/// The stock defaults id of the pinned OpenClaw ([`OPENCLAW_VERSION`]): lowercase hex SHA-256
/// of `[[name, text], …]`. [`stock_defaults`] refuses a runtime whose templates render to
/// anything else.
pub const STOCK_DEFAULTS_ID: &str =
    "c017a28c6f49a9f34629782addcf4d4fe704ee7cb8e068efc6447016ebe22699";

const TEMPLATE_MAX_BYTES: u64 = 1 << 20;
const TEMPLATES_REL: &str = "docs/reference/templates";

/// The stock workspace files of an OpenClaw runtime, rendered as native setup writes them.
#[derive(Clone, PartialEq, Eq)]
pub struct Defaults {
    /// Lowercase hex SHA-256 of the compact JSON `[[name, text], …]` in the order AGENTS.md,
    /// SOUL.md, IDENTITY.md, USER.md.
    pub id: String,
    /// File name → rendered text.
    pub files: BTreeMap<String, String>,
}

impl fmt::Debug for Defaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Defaults")
            .field("id", &self.id)
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Renders the four templates of `runtime` (`docs/reference/templates/<name>` of the openclaw
/// package) and checks that they give [`STOCK_DEFAULTS_ID`].
pub fn stock_defaults(runtime: &OpenclawRuntime) -> Result<Defaults, SetupError> {
    let package = runtime.entry.parent().unwrap_or(Path::new("/"));
    let dir = package.join(TEMPLATES_REL);
    let mut ordered = Vec::with_capacity(WorkspaceFileName::ALL.len());
    for name in WorkspaceFileName::ALL {
        let path = dir.join(name.as_str());
        let bytes = fsutil::read_bounded(&path, TEMPLATE_MAX_BYTES)
            .map_err(|e| SetupError::Defaults(format!("{}: {e}", path.display())))?
            .ok_or_else(|| SetupError::Defaults(format!("{} is missing", path.display())))?;
        let raw = String::from_utf8(bytes)
            .map_err(|_| SetupError::Defaults(format!("{} is not UTF-8", path.display())))?;
        ordered.push((name.as_str().to_owned(), render_template(&raw)));
    }
    let id = defaults_id(&ordered);
    if id != STOCK_DEFAULTS_ID {
        return Err(SetupError::Defaults(format!(
            "the templates under {} render to {id}, not the pinned defaults {STOCK_DEFAULTS_ID} of OpenClaw {OPENCLAW_VERSION}",
            dir.display()
        )));
    }
    Ok(Defaults {
        id,
        files: ordered.into_iter().collect(),
    })
}

/// Lowercase hex SHA-256 of the compact JSON array `[[name, text], …]`.
pub fn defaults_id(ordered: &[(String, String)]) -> String {
    let json = serde_json::to_string(ordered).unwrap_or_default();
    hex::encode(sha2::Sha256::digest(json.as_bytes()))
}

/// JavaScript's `\s`.
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// JavaScript's `[^\S\n]`.
fn is_inline_space(c: char) -> bool {
    c != '\n' && is_js_space(c)
}

/// `---[^\S\n]*` then a newline (or, with `end_ok`, the end) at the start of `s`; returns the
/// length matched.
fn delimiter_at(s: &str, end_ok: bool) -> Option<usize> {
    let rest = s.strip_prefix("---")?;
    let after = rest.trim_start_matches(is_inline_space);
    let used = s.len() - after.len();
    if after.starts_with('\n') {
        Some(used + 1)
    } else if end_ok && after.is_empty() {
        Some(used)
    } else {
        None
    }
}

/// A template as OpenClaw's `loadTemplate` renders it: on the normalized text (leading BOM
/// dropped, CRLF and CR → LF) the YAML front matter block is removed and leading whitespace
/// stripped; a text without a complete front matter block is returned unchanged.
pub fn render_template(raw: &str) -> String {
    let normalized = raw
        .strip_prefix('\u{feff}')
        .unwrap_or(raw)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let Some(open) = delimiter_at(&normalized, false) else {
        return raw.to_owned();
    };
    let tail = &normalized[open..];
    // (?:^|\n)---[^\S\n]*(?:\n|$), leftmost.
    let mut end = delimiter_at(tail, true);
    if end.is_none() {
        for (i, _) in tail.match_indices('\n') {
            if let Some(len) = delimiter_at(&tail[i + 1..], true) {
                end = Some(i + 1 + len);
                break;
            }
        }
    }
    match end {
        Some(end) => tail[end..].trim_start_matches(is_js_space).to_owned(),
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_front_matter_like_openclaw() {
        assert_eq!(render_template("---\na: 1\n---\n\n# T\nx\n"), "# T\nx\n");
        assert_eq!(
            render_template("\u{feff}---  \r\na: 1\r\n--- \r\n\r\n  # T\r\nx"),
            "# T\nx"
        );
        // empty block, closing at the end
        assert_eq!(render_template("---\n---"), "");
        assert_eq!(render_template("---\n---\nbody"), "body");
        // no front matter, or an unterminated one: unchanged (not even normalized)
        assert_eq!(render_template("# T\r\n"), "# T\r\n");
        assert_eq!(render_template("---\na: 1\n"), "---\na: 1\n");
        assert_eq!(render_template("---x\n---\n"), "---x\n---\n");
        // `---x` does not close; the next delimiter does
        assert_eq!(render_template("---\n---x\n---\nb"), "b");
        // JavaScript's \s includes U+FEFF but not U+0085
        assert_eq!(render_template("---\n---\n\u{feff} b"), "b");
        assert_eq!(render_template("---\n---\n\u{85}b"), "\u{85}b");
    }

    #[test]
    fn defaults_id_is_sha256_of_compact_pairs() {
        let id = defaults_id(&[("A".into(), "x\n\"".into())]);
        let want = hex::encode(sha2::Sha256::digest(br#"[["A","x\n\""]]"#));
        assert_eq!(id, want);
    }
}
