//! The singleton Installation.

use occ_core::resource::Installation;

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

fn from_row(r: &Row) -> Result<Installation, StoreError> {
    Ok(Installation {
        id: r.parse("id")?,
        name: r.parse("name")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// The Installation, if bootstrapped.
    pub async fn installation_get(&mut self) -> Result<Option<Installation>, StoreError> {
        let row = self
            .q(sql!("SELECT id, name, created_at FROM installation"))
            .fetch_optional()
            .await?;
        row.as_ref().map(from_row).transpose()
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts the Installation; a second one is a [`StoreError::Conflict`].
    pub async fn installation_insert(
        &mut self,
        installation: &Installation,
    ) -> Result<(), StoreError> {
        self.require_bootstrap()?;
        self.q(sql!(
            "INSERT INTO installation (id, name, created_at) VALUES ($1, $2, $3)"
        ))
        .bind(installation.id.as_str())
        .bind(installation.name.as_str())
        .bind(installation.created_at)
        .execute()
        .await?;
        Ok(())
    }
}
