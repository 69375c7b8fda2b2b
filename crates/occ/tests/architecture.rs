//! The crate graph as docs/ARCHITECTURE.md draws it, checked from `cargo metadata`: every
//! production dependency between occ's crates points down the layering (so no crate can import
//! one that imports it back), and `sqlx` is a production dependency of `occ-store` alone (SQL
//! only in the store; the test harness's raw connections are the one other user). Within each
//! crate, read from the sources: no module imports one that imports it back, and no production
//! file is over 800 lines.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// For each crate, the occ crates it may depend on in production (`[dependencies]`).
const ALLOWED: &[(&str, &[&str])] = &[
    ("occ-core", &[]),
    ("occ-gateway", &[]),
    ("occ-store", &["occ-core"]),
    ("occ-host", &["occ-core", "occ-gateway"]),
    ("occ-drivers", &["occ-core", "occ-gateway", "occ-host"]),
    (
        "occ-controller",
        &["occ-core", "occ-store", "occ-drivers", "occ-gateway"],
    ),
    ("occ-api", &["occ-core", "occ-controller"]),
    (
        "occ-testkit",
        &[
            "occ-core",
            "occ-store",
            "occ-drivers",
            "occ-host",
            "occ-controller",
            "occ-api",
            "occ-gateway",
        ],
    ),
    (
        "occ",
        &[
            "occ-core",
            "occ-store",
            "occ-drivers",
            "occ-host",
            "occ-controller",
            "occ-api",
        ],
    ),
];

/// Crates allowed a production dependency on `sqlx`.
const SQLX_USERS: &[&str] = &["occ-store", "occ-testkit"];

/// `package name → production dependencies by name`, for the workspace's packages.
fn production_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                // `kind` is null for normal dependencies, "dev" or "build" otherwise.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("name").to_owned())
                .collect();
            (package["name"].as_str().expect("name").to_owned(), deps)
        })
        .collect()
}

#[test]
fn occ_crates_depend_only_down_the_layering() {
    let packages = production_dependencies();
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    assert_eq!(
        packages.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        allowed.keys().copied().collect::<BTreeSet<_>>(),
        "every workspace crate has a row in ALLOWED (and docs/ARCHITECTURE.md)"
    );
    for (package, deps) in &packages {
        for dep in deps.iter().filter(|d| d.starts_with("occ")) {
            assert!(
                allowed[package.as_str()].contains(&dep.as_str()),
                "{package} depends on {dep}, which the layering does not allow"
            );
        }
    }
}

#[test]
fn sqlx_is_used_by_the_store_alone() {
    for (package, deps) in production_dependencies() {
        if deps.contains("sqlx") {
            assert!(
                SQLX_USERS.contains(&package.as_str()),
                "{package} depends on sqlx: SQL belongs in occ-store"
            );
        }
    }
}

/// The `{ path = … }` rules of a clippy.toml, in order.
fn rules(path: &str) -> Vec<String> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("{ path = "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn crate_lint_files_keep_the_workspace_rules_but_the_environment_ones() {
    let workspace = rules("../../clippy.toml");
    let (environment, rest): (Vec<_>, Vec<_>) = workspace
        .into_iter()
        .partition(|rule| rule.contains("\"std::env::"));
    assert_eq!(environment.len(), 4, "the environment rules");
    for crate_file in ["clippy.toml", "../occ-testkit/clippy.toml"] {
        assert_eq!(rules(crate_file), rest, "{crate_file}");
    }
}

/// A module of a crate: its path from the crate root (`[]` for `lib.rs`/`main.rs`).
type ModulePath = Vec<String>;

/// The `.rs` files of a crate's `src/` by module path.
fn modules_of(src: &std::path::Path) -> BTreeMap<ModulePath, std::path::PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(src)
                    .expect("under src")
                    .with_extension("");
                let mut module: ModulePath = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("lib" | "main" | "mod")
                ) {
                    module.pop();
                }
                out.insert(module, path);
            }
        }
    }
    out
}

/// The text without `#[cfg(test)]` items (test modules may import anything) and comments.
fn production_text(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (brace, semi) = (after.find('{'), after.find(';'));
        let end = match (brace, semi) {
            (Some(b), Some(s)) if s < b => s + 1,
            (None, Some(s)) => s + 1,
            (Some(b), _) => {
                let mut depth = 0;
                let mut end = after.len();
                for (i, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, None) => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a `use` tree names (`a::{b, c::{d as e}}` → `a::b`, `a::c::d`).
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let mut depth = 0;
        let mut start = 0;
        let mut parts = Vec::new();
        for (i, c) in tree.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&tree[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&tree[start..]);
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            if let Some(open) = part.find('{') {
                let head = part[..open].trim_end_matches("::");
                let mut next = prefix.to_vec();
                next.extend(
                    head.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                expand(&next, &part[open + 1..part.len() - 1], out);
            } else {
                let name = part.split("as").next().unwrap_or(part);
                let mut path = prefix.to_vec();
                path.extend(
                    name.split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    expand(&[], &tree, &mut out);
    out
}

/// Every `crate::…`, `super::…` and `self::…` path a module's production code names.
fn referenced_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find("use ") {
        let start = from + at;
        from = start + 4;
        if start > 0 && !bytes[start - 1].is_ascii_whitespace() {
            continue;
        }
        if let Some(end) = text[from..].find(';') {
            paths.extend(use_paths(&text[from..from + end]));
        }
    }
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let end = text[start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| start + e);
            paths.push(
                text[start..end]
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            );
        }
    }
    paths
}

/// Which modules of the crate each module imports from (ancestors and descendants excepted: a
/// module root declares and re-exports its children).
fn module_imports(src: &std::path::Path) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let modules = modules_of(src);
    let mut imports = BTreeMap::new();
    for (module, file) in &modules {
        let text = production_text(&std::fs::read_to_string(file).expect("read module"));
        let mut targets = BTreeSet::new();
        for path in referenced_paths(&text) {
            let (mut base, rest): (ModulePath, &[String]) = match path.first().map(String::as_str) {
                Some("crate") => (Vec::new(), &path[1..]),
                Some("self") => (module.clone(), &path[1..]),
                Some("super") => (module.clone(), &path[..]),
                _ => continue,
            };
            let mut rest = rest;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
            let mut full = base;
            full.extend(rest.iter().cloned());
            let target = (0..=full.len())
                .rev()
                .map(|n| full[..n].to_vec())
                .find(|prefix| modules.contains_key(prefix));
            let Some(target) = target else { continue };
            let related = target.starts_with(module) || module.starts_with(&target);
            if !related {
                targets.insert(target);
            }
        }
        imports.insert(module.clone(), targets);
    }
    imports
}

/// docs/ARCHITECTURE.md: within each crate no module imports one that imports it back, directly
/// or through others (what its children share lives in a child of its own).
#[test]
fn modules_within_each_crate_import_without_cycles() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cycles = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates") {
        let src = entry.expect("crate").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let imports = module_imports(&src);
        for (module, targets) in &imports {
            // A module that reaches itself through what it imports is on a cycle.
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&ModulePath> = targets.iter().collect();
            while let Some(next) = stack.pop() {
                if next == module {
                    cycles.push(format!("{}: {}", src.display(), module.join("::")));
                    break;
                }
                if seen.insert(next.clone()) {
                    stack.extend(imports.get(next).into_iter().flatten());
                }
            }
        }
    }
    assert!(cycles.is_empty(), "modules on an import cycle: {cycles:#?}");
}

/// docs/ARCHITECTURE.md: no production file is over 800 lines (its unit tests not counted; the
/// test harness and test-only modules aside), so each reads as one job.
#[test]
fn production_files_stay_under_800_lines() {
    const MAX: usize = 800;
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut long = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates") {
        let dir = entry.expect("crate").path();
        if dir.ends_with("occ-testkit") || !dir.join("src").is_dir() {
            continue;
        }
        let modules = modules_of(&dir.join("src"));
        for (module, file) in &modules {
            // A module its parent declares under `#[cfg(test)]` is test code.
            let test_only = module.split_last().is_some_and(|(name, parent)| {
                modules.get(parent).is_some_and(|p| {
                    let text = std::fs::read_to_string(p).unwrap_or_default();
                    text.contains(&format!("#[cfg(test)]\nmod {name};"))
                        || text.contains(&format!("#[cfg(test)]\npub mod {name};"))
                })
            });
            let text = std::fs::read_to_string(file).expect("read");
            let lines = text
                .lines()
                .take_while(|l| !l.trim_start().starts_with("#[cfg(test)]"))
                .count();
            if !test_only && lines > MAX {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "production files over {MAX} lines: {long:#?}"
    );
}
