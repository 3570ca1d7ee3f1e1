//! SQLite's reading of a column. SQLite stores whatever a hand-written `UPDATE` put in a
//! column, whatever its declared type: a limit or a JSON column (attempts, guards) of another
//! type reads as none, as an out-of-range one does.

use rusqlite::Row;
use rusqlite::types::{Type, ValueRef};

use crate::limits::LimitSet;
use crate::store::rows::{StoredLimits, StoredRow};

impl StoredRow for Row<'_> {
    type Error = rusqlite::Error;

    fn text(&self, index: usize) -> rusqlite::Result<String> {
        self.get(index)
    }

    fn optional_text(&self, index: usize) -> rusqlite::Result<Option<String>> {
        self.get(index)
    }

    fn integer(&self, index: usize) -> rusqlite::Result<i64> {
        self.get(index)
    }

    fn optional_integer(&self, index: usize) -> rusqlite::Result<Option<i64>> {
        self.get(index)
    }

    fn real(&self, index: usize) -> rusqlite::Result<f64> {
        self.get(index)
    }

    fn optional_real(&self, index: usize) -> rusqlite::Result<Option<f64>> {
        self.get(index)
    }

    fn flag(&self, index: usize) -> rusqlite::Result<bool> {
        self.get(index)
    }

    fn bytes(&self, index: usize) -> rusqlite::Result<Vec<u8>> {
        self.get(index)
    }

    fn http_status(&self, index: usize) -> rusqlite::Result<u16> {
        self.get(index)
    }

    fn token_count(&self, index: usize) -> rusqlite::Result<Option<u32>> {
        self.get(index)
    }

    fn limits(&self, first: usize) -> rusqlite::Result<LimitSet> {
        let integer = |index: usize| -> rusqlite::Result<Option<i64>> {
            Ok(match self.get_ref(first + index)? {
                ValueRef::Integer(n) => Some(n),
                _ => None,
            })
        };
        let real = |index: usize| -> rusqlite::Result<Option<f64>> {
            Ok(match self.get_ref(first + index)? {
                ValueRef::Real(usd) => Some(usd),
                ValueRef::Integer(usd) => Some(usd as f64),
                _ => None,
            })
        };
        Ok(StoredLimits {
            rpm: integer(0)?,
            tpm: integer(1)?,
            daily_budget_usd: real(2)?,
            monthly_budget_usd: real(3)?,
        }
        .limits())
    }

    /// A JSON array of strings, NULL when empty (SQLite has no arrays): a key's scope, a
    /// project's guards.
    fn list(&self, index: usize) -> rusqlite::Result<Vec<String>> {
        let Some(text) = self.get::<_, Option<String>>(index)? else {
            return Ok(Vec::new());
        };
        serde_json::from_str(&text)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, Type::Text, Box::new(e)))
    }

    fn json_text(&self, index: usize) -> rusqlite::Result<Option<String>> {
        Ok(match self.get_ref(index)? {
            ValueRef::Text(json) => Some(String::from_utf8_lossy(json).into_owned()),
            _ => None,
        })
    }
}

/// A scope list as stored: NULL when empty, else a JSON array.
pub(super) fn json_list(list: &[String]) -> Option<String> {
    if list.is_empty() {
        return None;
    }
    serde_json::to_string(list).ok()
}
