//! In-process router tests: the real router, controller, store (SQLite unless a test says
//! otherwise) and Drivers in temporary directories; requests through `tower::oneshot`.
//! Namespace readiness, which the worker owns, is set through the store where a test needs it.

mod accounts;
mod auth;
mod authz_matrix;
mod bodies;
mod chat;
mod common;
mod configurations;
mod console;
mod credential_sources;
mod deploy;
mod framing;
mod inventory;
mod kubernetes;
mod models;
mod native_admin;
mod presets;
mod provisioning;
mod redeploy;
mod resources;
mod runtime;
mod runtime_logs;
mod service_accounts;
mod service_principals;
mod snapshots;
mod workspace;
