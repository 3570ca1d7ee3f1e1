//! PostgreSQL's reading of a column: its types are checked by the server, so only what the
//! driver reads differs from SQLite's (a key's scope lists and a project's guards are `TEXT[]`,
//! a record's attempts and guards JSONB selected as text).

use tokio_postgres::Row;

use crate::limits::LimitSet;
use crate::store::rows::{StoredLimits, StoredRow};

impl StoredRow for Row {
    type Error = tokio_postgres::Error;

    fn text(&self, index: usize) -> Result<String, Self::Error> {
        self.try_get(index)
    }

    fn optional_text(&self, index: usize) -> Result<Option<String>, Self::Error> {
        self.try_get(index)
    }

    fn integer(&self, index: usize) -> Result<i64, Self::Error> {
        self.try_get(index)
    }

    fn optional_integer(&self, index: usize) -> Result<Option<i64>, Self::Error> {
        self.try_get(index)
    }

    fn real(&self, index: usize) -> Result<f64, Self::Error> {
        self.try_get(index)
    }

    fn optional_real(&self, index: usize) -> Result<Option<f64>, Self::Error> {
        self.try_get(index)
    }

    fn flag(&self, index: usize) -> Result<bool, Self::Error> {
        self.try_get(index)
    }

    fn bytes(&self, index: usize) -> Result<Vec<u8>, Self::Error> {
        self.try_get(index)
    }

    /// An INTEGER column; one out of range (by hand) reads as 0.
    fn http_status(&self, index: usize) -> Result<u16, Self::Error> {
        let status: i32 = self.try_get(index)?;
        Ok(u16::try_from(status).unwrap_or(0))
    }

    /// A BIGINT column, clamped to what a count holds.
    fn token_count(&self, index: usize) -> Result<Option<u32>, Self::Error> {
        let value: Option<i64> = self.try_get(index)?;
        Ok(value.map(|v| u32::try_from(v.max(0)).unwrap_or(u32::MAX)))
    }

    fn limits(&self, first: usize) -> Result<LimitSet, Self::Error> {
        Ok(StoredLimits {
            rpm: self.try_get(first)?,
            tpm: self.try_get(first + 1)?,
            daily_budget_usd: self.try_get(first + 2)?,
            monthly_budget_usd: self.try_get(first + 3)?,
        }
        .limits())
    }

    /// A `TEXT[]`, NULL when empty (a key's scope, a project's guards). A NULL element (SQL
    /// by hand) is an error rather than dropped.
    fn list(&self, index: usize) -> Result<Vec<String>, Self::Error> {
        Ok(self
            .try_get::<_, Option<Vec<String>>>(index)?
            .unwrap_or_default())
    }

    /// JSONB, selected as text.
    fn json_text(&self, index: usize) -> Result<Option<String>, Self::Error> {
        self.try_get(index)
    }
}
