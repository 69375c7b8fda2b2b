//! The dedicated (Codex harness) execution of the process Driver.

pub mod render;
