//! The admin console's sessions signed out, in SQLite: written and read on the key lookups'
//! connection, cached (by the facade) under the keys' stamp (a sign-out writes a new one).

use rusqlite::{TransactionBehavior, params};

use super::{Sqlite, lock};
use crate::clock::now_ms;
use crate::store::StoreError;
use crate::store::sql::{self, Dialect};

const SQLITE: Dialect = Dialect::Sqlite;

impl Sqlite {
    pub(in crate::store) fn sign_out_session(
        &self,
        session: &[u8; 32],
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        {
            let mut conn = lock(&self.reader);
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                sql::DELETE_EXPIRED_SIGN_OUTS.text(SQLITE),
                params![now_ms()],
            )?;
            tx.execute(
                sql::SIGN_OUT_SESSION.text(SQLITE),
                params![&session[..], expires_at_ms],
            )?;
            tx.commit()?;
        }
        self.keys_changed();
        Ok(())
    }

    /// Whether the session was signed out, from the database (the facade asks its cache
    /// first); always an answer, which the cache keeps either way.
    pub(in crate::store) fn read_signed_out(
        &self,
        session: &[u8; 32],
    ) -> Result<Option<bool>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(sql::SESSION_SIGNED_OUT.text(SQLITE))?;
        let count: i64 = stmt.query_row([&session[..]], |row| row.get(0))?;
        Ok(Some(count > 0))
    }
}
