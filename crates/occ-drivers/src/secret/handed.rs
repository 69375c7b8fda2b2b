//! Records of what a revision's workloads were handed (its bound Secret values and harness
//! credential, as the worker resolved them when it started them), kept by the Secret Driver
//! beside the values themselves. Output a workload wrote stays redactable with exactly these
//! values after the Secrets behind them are rotated or deleted; a record is forgotten with its
//! Agent.

/// Most values one revision's record holds (64 bindings and a credential, several rotations).
pub const HANDED_MAX_VALUES: usize = 512;

/// `known` with `values` it lacks appended (oldest dropped beyond [`HANDED_MAX_VALUES`]); `None`
/// when nothing is new.
pub(super) fn merge(mut known: Vec<String>, values: &[&str]) -> Option<Vec<String>> {
    let before = known.len();
    for value in values {
        if !value.is_empty() && !known.iter().any(|k| k == value) {
            known.push((*value).to_owned());
        }
    }
    if known.len() == before {
        return None;
    }
    let excess = known.len().saturating_sub(HANDED_MAX_VALUES);
    known.drain(..excess);
    Some(known)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_grow_by_what_is_new_and_stay_bounded() {
        assert_eq!(merge(Vec::new(), &[]), None);
        assert_eq!(
            merge(Vec::new(), &["a", "b", "a", ""]),
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        assert_eq!(merge(vec!["a".to_owned()], &["a"]), None);
        let full: Vec<String> = (0..HANDED_MAX_VALUES).map(|i| i.to_string()).collect();
        let merged = merge(full, &["new"]).expect("new");
        assert_eq!(merged.len(), HANDED_MAX_VALUES);
        assert_eq!(merged.last().map(String::as_str), Some("new"));
        assert_eq!(merged.first().map(String::as_str), Some("1"));
    }
}
