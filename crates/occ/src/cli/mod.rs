//! The CLI client: resource commands that speak the HTTP API with a service key, or with the
//! session `occ login` saved.
//!
//! Output is a table by default (`-` for unset values), or the resource without its envelope
//! as JSON or YAML. Errors go to stderr with the HTTP status, API code, message and request id,
//! and exit non-zero.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the terminal is the CLI's interface"
)]

mod account;
mod agent;
mod chat;
mod client;
mod configuration;
mod credential_source;
mod diagnose;
mod follow;
mod grants;
mod iam;
mod installation;
mod logs;
mod namespace;
mod preset;
mod provision;
mod render;
mod revisions;
mod secret;
mod service_account;
mod service_principal;
mod session;
mod session_file;

pub use account::{AccountCmd, account};
pub use agent::{AgentCmd, agent};
pub use client::{Client, ClientOptions};
pub use configuration::{ConfigurationCmd, configuration};
pub use credential_source::{CredentialSourceCmd, credential_source};
pub use iam::{IamCmd, iam};
pub use installation::{InstallationCmd, installation};
pub use namespace::{NamespaceCmd, namespace};
pub use preset::{PresetCmd, preset};
pub use secret::{SecretCmd, secret};
pub use service_account::{ServiceAccountCmd, service_account};
pub use service_principal::{ServiceKeyCmd, ServicePrincipalCmd, service_key, service_principal};
pub use session::{LoginArgs, login, logout};
