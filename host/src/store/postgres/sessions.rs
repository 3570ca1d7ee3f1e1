//! The admin console's sessions signed out, in PostgreSQL: a sign-out tells the other
//! replicas as a key change does (`NOTIFY`, in its transaction), and each replica caches what
//! it read under the same epoch as its keys.

use super::Postgres;
use super::connect::connection;
use super::listen::{SESSIONS_CHANGED, notify};
use crate::clock::now_ms;
use crate::store::StoreError;
use crate::store::sql::{self, Dialect};

const POSTGRES: Dialect = Dialect::Postgres;

impl Postgres {
    pub(in crate::store) async fn sign_out_session(
        &self,
        session: &[u8; 32],
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        let session = *session;
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            tx.execute(sql::DELETE_EXPIRED_SIGN_OUTS.text(POSTGRES), &[&now_ms()])
                .await?;
            tx.execute(
                sql::SIGN_OUT_SESSION.text(POSTGRES),
                &[&&session[..], &expires_at_ms],
            )
            .await?;
            notify(&tx, SESSIONS_CHANGED).await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        self.changes.changed();
        Ok(())
    }

    pub(in crate::store) async fn session_signed_out(
        &self,
        session: &[u8; 32],
    ) -> Result<bool, StoreError> {
        let owned = *session;
        let read = self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::SESSION_SIGNED_OUT.text(POSTGRES))
                .await?;
            let count: i64 = client
                .query_one(&statement, &[&&owned[..]])
                .await?
                .try_get(0)?;
            Ok(Some(count > 0))
        });
        let signed_out = self.sessions.find(session, read).await?;
        Ok(signed_out.unwrap_or(false))
    }
}
