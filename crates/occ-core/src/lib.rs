//! occ domain: identifiers, names, timestamps, resources, IAM records, work items, audit events,
//! the authorization vocabulary and the one public error type.
//!
//! This crate is pure: no I/O, no async, no database or HTTP types. Every other crate depends
//! on it and on nothing it does not need.

pub mod audit;
pub mod authz;
pub mod compute;
pub mod credential_source;
pub mod env_name;
pub mod error;
pub mod iam;
pub mod id;
pub mod inputs;
pub mod name;
pub mod native;
pub mod preset;
pub mod provisioning;
pub mod reason;
pub mod redact;
pub mod resource;
pub mod revision;
pub mod runtime_report;
pub mod time;
pub mod validate;
pub mod work;

pub use error::{DetailCode, Error, ErrorCode, ErrorDetail, Result};
pub use id::{
    AdmissionDecisionId, AgentId, AuditEventId, ConfigurationId, CredentialSourceId, IamId,
    InstallationId, NamespaceId, PresetId, ProvisioningId, RequestId, RevisionId, SecretId,
    ServiceAccountId,
};
pub use name::Name;
pub use reason::ReasonCode;
pub use time::Timestamp;
