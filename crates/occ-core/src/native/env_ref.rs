//! `${VAR}` references in string values of `openclaw.json`. OpenClaw substitutes them from the
//! gateway's environment when it loads the document, before it validates it, so occ cannot judge
//! a value that holds one: such values are left to the runtime.

/// Whether `s` holds a `${VAR}` / `${VAR:-fallback}` reference with an uppercase name, anywhere.
pub(crate) fn contains_env_reference(s: &str) -> bool {
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let name_len = after
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .count();
        let starts_ok = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase() || c == '_');
        if starts_ok && name_len > 0 {
            let tail = &after[name_len..];
            if tail.starts_with('}') {
                return true;
            }
            if let Some(fallback) = tail.strip_prefix(":-")
                && let Some(end) = fallback.find('}')
                && !fallback[..end].contains(['$', '{'])
            {
                return true;
            }
        }
        rest = after;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_references() {
        assert!(contains_env_reference("https://${HOST}/v1"));
        assert!(contains_env_reference("${HOST:-localhost}"));
        assert!(!contains_env_reference("${host}"));
        assert!(!contains_env_reference("$HOST"));
        assert!(!contains_env_reference("${}"));
    }
}
