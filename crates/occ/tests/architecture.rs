//! The crate graph as docs/ARCHITECTURE.md draws it, checked from `cargo metadata`: every
//! production dependency between occ's crates points down the layering (so no crate can import
//! one that imports it back), and `sqlx` is a production dependency of `occ-store` alone (SQL
//! only in the store; the test harness's raw connections are the one other user).

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
