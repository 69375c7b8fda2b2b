//! `${VAR}` references in string values of `openclaw.json`. OpenClaw substitutes them from the
//! gateway's environment when it loads the document, before it validates it, so occ cannot judge
//! a value that holds one: such values are left to the runtime.

/// Whether `s` holds a `${VAR}` / `${VAR:-fallback}` reference with an uppercase name, anywhere.
pub(crate) fn contains_env_reference(s: &str) -> bool {
    referenced_names(s).next().is_some()
}

/// The names of the `${VAR}` / `${VAR:-fallback}` references in `s`, in order.
pub(crate) fn referenced_names(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = s;
    std::iter::from_fn(move || {
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            rest = after;
            let name_len = after
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .count();
            let starts_ok = after
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_uppercase() || c == '_');
            if !starts_ok || name_len == 0 {
                continue;
            }
            let (name, tail) = after.split_at(name_len);
            if tail.starts_with('}') {
                return Some(name);
            }
            if let Some(fallback) = tail.strip_prefix(":-")
                && let Some(end) = fallback.find('}')
                && !fallback[..end].contains(['$', '{'])
            {
                return Some(name);
            }
        }
        None
    })
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
        assert_eq!(
            referenced_names("a ${ONE} b ${two} ${THREE:-x} ${FOUR").collect::<Vec<_>>(),
            ["ONE", "THREE"]
        );
    }
}
