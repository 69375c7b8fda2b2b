//! What every Configuration Driver stores: one document of one exact generation.

use occ_core::resource::Generation;
use occ_core::{ConfigurationId, NamespaceId, Timestamp};

/// Largest stored document, serialized.
pub const DOCUMENT_MAX_BYTES: usize = 1024 * 1024;

/// The exact document a call is about.
#[derive(Debug, Clone, Copy)]
pub struct DocumentKey<'a> {
    /// Owning Namespace.
    pub namespace_id: &'a NamespaceId,
    /// Configuration.
    pub configuration_id: &'a ConfigurationId,
    /// Generation.
    pub generation: Generation,
    /// When the Configuration was created (stored with the document and checked on reads).
    pub created_at: Timestamp,
}
