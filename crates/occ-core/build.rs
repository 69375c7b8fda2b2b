//! Prepares the pinned runtime schema for compilation once, at build time (see
//! `src/native/schema/prepare.rs`), so no process parses the 2.4 MB original to validate.

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
    let out = std::path::PathBuf::from(out);
    std::fs::write(out.join("openclaw.schema.prepared.json"), prepared)
        .expect("OUT_DIR is writable");
}
