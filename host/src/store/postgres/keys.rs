//! Projects and keys in PostgreSQL. Every change tells the other replicas (`NOTIFY`, in its
//! transaction) and this one's cache (at once); a key lookup that finds the database down
//! answers from the keys verified before.

use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::Postgres;
use super::connect::connection;
use super::listen::{KEYS_CHANGED, notify};
use crate::clock::now_ms;
use crate::limits::LimitSet;
use crate::store::key_cache::Lookup;
use crate::store::rows::{self as read, StoredLimits, StoredRow};
use crate::store::sql::{self, Dialect, KeyValue, Sql};
use crate::store::{KeyInfo, KeyMatch, KeyRecord, KeySpec, LimitUpdate, Project, StoreError};

const POSTGRES: Dialect = Dialect::Postgres;

/// After a key lookup found the database unreachable, lookups of keys known
/// from before answer from memory this long before the database is tried again.
const RETRY_DOWN: Duration = Duration::from_secs(1);
/// Reads of one key before the database counts as unreachable: each failed
/// one takes a connection the server ended out of the pool.
const KEY_READ_ATTEMPTS: usize = 3;

impl Postgres {
    pub(in crate::store) async fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        let project = Project {
            id: Uuid::now_v7().to_string(),
            name: name.to_owned(),
            created_at_ms: now_ms(),
            limits: LimitSet::default(),
            guards: Vec::new(),
            tools: Vec::new(),
        };
        let (id, name, created_at) = (
            project.id.clone(),
            project.name.clone(),
            project.created_at_ms,
        );
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            client
                .execute(
                    sql::INSERT_PROJECT.text(POSTGRES),
                    &[&id, &name, &created_at],
                )
                .await?;
            Ok(())
        })
        .await?;
        Ok(project)
    }

    pub(in crate::store) async fn project_count(&self) -> Result<u64, StoreError> {
        self.run(|pool| async move {
            let client = connection(&pool).await?;
            let count: i64 = client
                .query_one(sql::COUNT_PROJECTS.text(POSTGRES), &[])
                .await?
                .try_get(0)?;
            Ok(count.max(0) as u64)
        })
        .await
    }

    /// Every project, oldest first.
    pub(in crate::store) async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.run(|pool| async move {
            let client = connection(&pool).await?;
            let rows = client.query(sql::PROJECTS.text(POSTGRES), &[]).await?;
            Ok(rows.iter().map(read::project).collect::<Result<_, _>>()?)
        })
        .await
    }

    pub(in crate::store) async fn project_keys(
        &self,
        id: &str,
    ) -> Result<Vec<KeyInfo>, StoreError> {
        let id = id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let rows = client
                .query(sql::PROJECT_KEYS.text(POSTGRES), &[&id])
                .await?;
            Ok(rows.iter().map(read::key_info).collect::<Result<_, _>>()?)
        })
        .await
    }

    pub(in crate::store) async fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        let id = id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let row = client
                .query_opt(sql::PROJECT.text(POSTGRES), &[&id])
                .await?;
            Ok(row.as_ref().map(read::project).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn update_project_limits(
        &self,
        project_id: &str,
        update: &LimitUpdate,
    ) -> Result<LimitSet, StoreError> {
        let (project_id, update) = (project_id.to_owned(), *update);
        let limits = self
            .run(move |pool| async move {
                let mut client = connection(&pool).await?;
                let tx = client.transaction().await?;
                // FOR UPDATE: two updates of different limits at once must
                // not each undo the other's.
                let select = format!("{} FOR UPDATE", sql::PROJECT_LIMITS.text(POSTGRES));
                let row = tx.query_opt(&select, &[&project_id]).await?;
                let Some(row) = row else {
                    return Err(StoreError::UnknownProject(project_id));
                };
                let limits = update.apply(row.limits(0)?);
                write_limits(&tx, &sql::UPDATE_PROJECT_LIMITS, &project_id, &limits).await?;
                // Project limits travel inside every cached key of the project.
                notify(&tx, KEYS_CHANGED).await?;
                tx.commit().await?;
                Ok(limits)
            })
            .await?;
        self.changes.changed();
        Ok(limits)
    }

    /// Replaces one of a project's lists: `statement` is [`sql::UPDATE_PROJECT_GUARDS`] or
    /// [`sql::UPDATE_PROJECT_TOOLS`].
    pub(in crate::store) async fn set_project_list(
        &self,
        statement: &'static Sql,
        project_id: &str,
        list: &[String],
    ) -> Result<(), StoreError> {
        let project_id = project_id.to_owned();
        // TEXT[], NULL when empty.
        let list = (!list.is_empty()).then(|| list.to_vec());
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            let updated = tx
                .execute(statement.text(POSTGRES), &[&project_id, &list])
                .await?;
            if updated == 0 {
                return Err(StoreError::UnknownProject(project_id));
            }
            // A project's guards and tools travel inside every cached key of the project.
            notify(&tx, KEYS_CHANGED).await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        self.changes.changed();
        Ok(())
    }

    pub(in crate::store) async fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
        spec: &KeySpec,
    ) -> Result<(), StoreError> {
        let (project_id, prefix, hash) = (project_id.to_owned(), prefix.to_owned(), *hash);
        let stored = StoredLimits::of(&spec.limits);
        // TEXT[], NULL when empty.
        let list = |list: &[String]| (!list.is_empty()).then(|| list.to_vec());
        let (routes, models, expires_at, tools) = (
            list(&spec.scope.routes),
            list(&spec.scope.models),
            spec.scope.expires_at_ms,
            list(&spec.scope.tools),
        );
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            let inserted = tx
                .execute(
                    sql::INSERT_KEY.text(POSTGRES),
                    &[
                        &&hash[..],
                        &prefix,
                        &project_id,
                        &now_ms(),
                        &stored.rpm,
                        &stored.tpm,
                        &stored.daily_budget_usd,
                        &stored.monthly_budget_usd,
                        &routes,
                        &models,
                        &expires_at,
                        &tools,
                    ],
                )
                .await;
            match inserted {
                Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION) => {
                    return Err(StoreError::UnknownProject(project_id));
                }
                other => other?,
            };
            notify(&tx, KEYS_CHANGED).await?;
            tx.commit().await?;
            Ok(())
        })
        .await?;
        // This replica's own cache, now; the others' when the NOTIFY arrives.
        self.changes.changed();
        Ok(())
    }

    /// Changes the limits of the one live key `which` selects; returns its
    /// prefix and its limits as they are now.
    pub(in crate::store) async fn update_key_limits(
        &self,
        which: &KeyMatch,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        let (which, update) = (which.clone(), *update);
        let updated = self
            .run(move |pool| async move {
                let mut client = connection(&pool).await?;
                let tx = client.transaction().await?;
                let (select, value) = sql::matching_keys(POSTGRES, &which);
                let rows = tx
                    .query(&format!("{select} FOR UPDATE"), &[key_value(&value)])
                    .await?;
                let row = match &rows[..] {
                    [] => return Err(StoreError::UnknownKey(which.shown())),
                    [one] => one,
                    more => {
                        return Err(StoreError::AmbiguousKey {
                            prefix: which.shown(),
                            count: more.len(),
                        });
                    }
                };
                let (hash, prefix, current) = read::matched_key(row)?;
                let limits = update.apply(current);
                write_limits(&tx, &sql::UPDATE_KEY_LIMITS, &hash, &limits).await?;
                notify(&tx, KEYS_CHANGED).await?;
                tx.commit().await?;
                Ok((prefix, limits))
            })
            .await?;
        self.changes.changed();
        Ok(updated)
    }

    /// Revokes the live keys `which` selects; returns how many.
    pub(in crate::store) async fn revoke(&self, which: &KeyMatch) -> Result<usize, StoreError> {
        let which = which.clone();
        let revoked = self
            .run(move |pool| async move {
                let mut client = connection(&pool).await?;
                let tx = client.transaction().await?;
                let (update, value) = sql::revoke_keys(POSTGRES, &which);
                let revoked = tx.execute(&update, &[&now_ms(), key_value(&value)]).await?;
                if revoked > 0 {
                    notify(&tx, KEYS_CHANGED).await?;
                }
                tx.commit().await?;
                Ok(revoked as usize)
            })
            .await?;
        if revoked > 0 {
            self.changes.changed();
        }
        Ok(revoked)
    }

    pub(in crate::store) async fn find_key(
        &self,
        hash: &[u8; 32],
    ) -> Result<Option<KeyRecord>, StoreError> {
        let miss = match self.keys.lookup(hash) {
            Lookup::Hit(record) => return Ok(Some(record)),
            Lookup::Miss(miss) => miss,
        };
        // The database was just found unreachable: don't make every request
        // wait for it to fail again.
        if let Some(record) = self
            .recently_down()
            .then(|| self.keys.stale(hash))
            .flatten()
        {
            return Ok(Some(record));
        }
        let owned = *hash;
        let read_key = || {
            self.run(move |pool| async move {
                let client = connection(&pool).await?;
                let statement = client.prepare_cached(sql::FIND_KEY.text(POSTGRES)).await?;
                let row = client.query_opt(&statement, &[&&owned[..]]).await?;
                Ok(row.as_ref().map(read::key_record).transpose()?)
            })
        };
        // A pooled connection the server has just ended fails the one query
        // that finds it (the pool notices at its next checkout); the key is
        // read again on another before the database counts as unreachable.
        let mut read = read_key().await;
        for _ in 1..KEY_READ_ATTEMPTS {
            match &read {
                Err(error) if error.is_unavailable() => read = read_key().await,
                _ => break,
            }
        }
        let found = match read {
            Ok(found) => found,
            Err(error) if error.is_unavailable() => {
                self.went_down();
                match self.keys.stale(hash) {
                    Some(record) => return Ok(Some(record)),
                    None => return Err(error),
                }
            }
            Err(error) => return Err(error),
        };
        if let Some(record) = &found {
            self.keys.keep(hash, record, miss);
        }
        Ok(found)
    }

    /// Whether a key lookup found the database unreachable within the last
    /// [`RETRY_DOWN`].
    fn recently_down(&self) -> bool {
        let down = self.down_since.lock().unwrap_or_else(|p| p.into_inner());
        down.is_some_and(|at| at.elapsed() < RETRY_DOWN)
    }

    fn went_down(&self) {
        let mut down = self.down_since.lock().unwrap_or_else(|p| p.into_inner());
        if down.is_none() {
            tracing::warn!(
                "PostgreSQL is unreachable: serving the keys verified in the last {} min from memory \
                 until it is back",
                crate::store::key_cache::MAX_STALE.as_secs() / 60
            );
        }
        *down = Some(Instant::now());
    }
}

/// Stores `limits` in the row `sql` (one of the two limit updates) updates, `id` naming it.
async fn write_limits(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &'static Sql,
    id: &(dyn ToSql + Sync),
    limits: &LimitSet,
) -> Result<(), StoreError> {
    let stored = StoredLimits::of(limits);
    tx.execute(
        sql.text(POSTGRES),
        &[
            id,
            &stored.rpm,
            &stored.tpm,
            &stored.daily_budget_usd,
            &stored.monthly_budget_usd,
        ],
    )
    .await?;
    Ok(())
}

/// What a key condition compares with, as the driver takes it.
fn key_value(value: &KeyValue) -> &(dyn ToSql + Sync) {
    match value {
        KeyValue::Hash(hash) => hash,
        KeyValue::Pattern(pattern) => pattern,
    }
}
