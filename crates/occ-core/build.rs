//! Prepares the pinned runtime schema for compilation once, at build time (see
//! `src/native/schema/prepare.rs`): no process parses the 2.4 MB original to validate, and each
//! top-level section is compiled only when a document first uses it.

use std::fmt::Write as _;

#[path = "src/native/schema/prepare.rs"]
mod prepare;

const PINNED: &str = "../../runtime/gateway/openclaw.schema.json";

fn main() {
    println!("cargo::rerun-if-changed={PINNED}");
    println!("cargo::rerun-if-changed=src/native/schema/prepare.rs");
    let text = std::fs::read_to_string(PINNED).expect("the pinned runtime schema is readable");
    let prepared = prepare::prepare(&text).expect("the pinned runtime schema prepares");
    #[expect(
        clippy::disallowed_methods,
        reason = "cargo hands a build script its output directory in the environment"
    )]
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let dir = std::path::PathBuf::from(out).join("openclaw-schema");
    std::fs::create_dir_all(&dir).expect("OUT_DIR is writable");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).expect("OUT_DIR is writable");
        format!("include_str!(concat!(env!(\"OUT_DIR\"), \"/openclaw-schema/{name}\"))")
    };
    let mut code = format!(
        "/// The top level of the prepared schema.\npub(super) const FRAME: &str = {};\n",
        write("frame.json", &prepared.frame)
    );
    let _ = writeln!(
        code,
        "/// Each top-level section's prepared schema, by name.\npub(super) const SECTIONS: [(&str, &str); {}] = [",
        prepared.sections.len()
    );
    for (i, (name, schema)) in prepared.sections.iter().enumerate() {
        let _ = writeln!(
            code,
            "    ({name:?}, {}),",
            write(&format!("section-{i}.json"), schema)
        );
    }
    code.push_str("];\n");
    std::fs::write(dir.join("sections.rs"), code).expect("OUT_DIR is writable");
}
