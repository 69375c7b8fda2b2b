//! Golden (snapshot) files: a rendered object is compared with the reviewed file; with
//! `OCC_UPDATE_GOLDEN=1` the file is rewritten instead, so a change shows up as a diff to review.

use std::path::Path;

use serde_json::Value;

/// Asserts that `actual`, pretty-printed, equals the file `dir/name`.
pub fn assert_golden(dir: &Path, name: &str, actual: &Value) {
    let path = dir.join(name);
    let rendered = serde_json::to_string_pretty(actual).expect("json") + "\n";
    if std::env::var_os("OCC_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(dir).expect("golden directory");
        std::fs::write(&path, &rendered).expect("write golden");
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with OCC_UPDATE_GOLDEN=1", path.display()));
    assert_eq!(
        rendered, expected,
        "{name} differs from the reviewed golden file"
    );
}
