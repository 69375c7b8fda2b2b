//! A workspace file as the gateway's `agents.files.*` methods carry it, and the content hash
//! they report and expect.

/// One of the Agent's workspace files as `agents.files.get`/`set` return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceFile {
    /// File name, e.g. `AGENTS.md`.
    pub name: String,
    /// UTF-8 content.
    pub content: String,
    /// Lowercase hex SHA-256 of the content's bytes.
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
}

/// Lowercase hex SHA-256 of `content`'s UTF-8 bytes: the hash the gateway reports and expects
/// in `expectedHash`.
pub fn content_hash(content: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(content.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_is_sha256_hex() {
        assert_eq!(
            content_hash("hi\n"),
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"
        );
    }
}
