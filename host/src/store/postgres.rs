//! The PostgreSQL backend, for several replicas on one database.
//!
//! Connections live on a small runtime of the backend's own: the gateway
//! serves on several threads, each with its own current-thread runtime, and a
//! connection's driver task spawned on one of them would die with it and stall
//! the others' queries while that thread is busy. Every query is therefore
//! spawned onto this runtime and awaited from wherever it was asked for (any
//! runtime), and the invocation writer's blocking call waits on a channel.
//!
//! Key changes reach every replica through `NOTIFY gateway_changes`, sent in
//! the transaction of the change; a listener task on a connection of its own
//! turns each notification into a new [`Changes`] epoch, which empties the key
//! cache.

use std::future::{Future, poll_fn};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_platform_verifier::Verifier;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, Config, Connection, IsolationLevel, NoTls, Row};
use tokio_postgres_rustls::MakeRustlsConnect;
use uuid::Uuid;

use super::key_cache::{Changes, KeyCache, Lookup};
use super::report::{self, Cursor, GroupBy, Page, RecordRange, SqlValue, UsageRow, UsageTally};
use super::{
    Attempt, Invocation, InvocationFilter, InvocationStatus, KeyMatch, KeyRecord, KeyScope,
    KeySpec, LimitUpdate, Migrated, Project, StoreError, StoredLimits, TokenUsage, UsageTotals,
};
use crate::clock::now_ms;
use crate::limits::{LimitSet, Subject};

/// After a key lookup found the database unreachable, lookups of keys known
/// from before answer from memory this long before the database is tried again.
const RETRY_DOWN: Duration = Duration::from_secs(1);
/// Reads of one key before the database counts as unreachable: each failed
/// one takes a connection the server ended out of the pool.
const KEY_READ_ATTEMPTS: usize = 3;

/// Each entry upgrades the schema by one version (the one row of
/// `gateway_schema`). Append only. The first is SQLite's second schema.
const MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at BIGINT NOT NULL
    );
    CREATE TABLE api_keys (
        key_hash BYTEA PRIMARY KEY,
        prefix TEXT NOT NULL,
        project_id TEXT NOT NULL REFERENCES projects(id),
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    );
    -- text_pattern_ops: revocation matches `prefix LIKE 'abc%'`, which a plain
    -- index cannot serve under a non-C collation.
    CREATE INDEX api_keys_prefix ON api_keys(prefix text_pattern_ops);
    CREATE TABLE invocations (
        id TEXT PRIMARY KEY,
        project_id TEXT,
        user_id TEXT,
        route TEXT,
        plugin TEXT,
        model TEXT,
        type TEXT,
        stream BOOLEAN NOT NULL,
        status TEXT NOT NULL,
        http_status INTEGER NOT NULL,
        error TEXT,
        provider_error TEXT,
        prompt_tokens BIGINT,
        completion_tokens BIGINT,
        total_tokens BIGINT,
        cached_prompt_tokens BIGINT,
        cache_creation_tokens BIGINT,
        reasoning_tokens BIGINT,
        cost_usd DOUBLE PRECISION,
        created_at BIGINT NOT NULL,
        duration_ms BIGINT NOT NULL,
        request TEXT,
        response TEXT
    );
    CREATE INDEX invocations_project ON invocations(project_id, created_at);
    CREATE INDEX invocations_user ON invocations(user_id, created_at);
    CREATE INDEX invocations_created ON invocations(created_at);
"#,
    // Limits of projects and keys, keys' scopes, and spend counted per key.
    // Limits: NULL is none. routes, models: NULL when empty. expires_at:
    // Unix ms, NULL is never. Nullable columns without a default are added
    // without rewriting the tables.
    r#"
    ALTER TABLE projects
        ADD COLUMN rpm BIGINT,
        ADD COLUMN tpm BIGINT,
        ADD COLUMN daily_budget_usd DOUBLE PRECISION,
        ADD COLUMN monthly_budget_usd DOUBLE PRECISION;
    ALTER TABLE api_keys
        ADD COLUMN rpm BIGINT,
        ADD COLUMN tpm BIGINT,
        ADD COLUMN daily_budget_usd DOUBLE PRECISION,
        ADD COLUMN monthly_budget_usd DOUBLE PRECISION,
        ADD COLUMN routes TEXT[],
        ADD COLUMN models TEXT[],
        ADD COLUMN expires_at BIGINT;
    ALTER TABLE invocations ADD COLUMN key_prefix TEXT;
    CREATE INDEX invocations_key ON invocations(key_prefix, created_at);
"#,
    // Each upstream attempt of a request that took more than one (retries, fallbacks): a
    // JSON array of `Attempt`s, NULL when empty. JSONB, so that an operator can ask which
    // records tried a route (`attempts @> '[{"route": "x"}]'`).
    r#"
    ALTER TABLE invocations ADD COLUMN attempts JSONB;
"#,
];

const BACKEND: &str = "PostgreSQL";
/// Serializes migrations of replicas starting at once ("gateway" in ASCII).
const MIGRATION_LOCK: i64 = 0x0067_6174_6577_6179;
/// The channel of change notifications; the payload names what changed.
const CHANNEL: &str = "gateway_changes";
const KEYS_CHANGED: &str = "keys";

const POOL_SIZE: usize = 8;
/// Used when the URL sets no `connect_timeout`: a down server must fail in
/// seconds, not after the operating system's minutes.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a query waits for a connection (pool full, or being made).
const POOL_TIMEOUT: Duration = Duration::from_secs(10);
/// Even with the listener connected every cached key is dropped this often:
/// a notification can be lost (a connection half-dead without an error).
const FULL_REFRESH: Duration = Duration::from_secs(30);
/// See [`parse_url`]'s keepalives.
const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);
const LISTEN_RETRY_MIN: Duration = Duration::from_millis(100);
const LISTEN_RETRY_MAX: Duration = Duration::from_secs(3);

/// The backend's own runtime; shut down without waiting when dropped, which
/// may happen inside another runtime's task (where a blocking shutdown panics).
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    fn new() -> Result<OwnRuntime, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Task(format!("cannot start PostgreSQL's runtime: {e}")))?;
        Ok(OwnRuntime(Some(runtime)))
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|runtime| runtime.handle())
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

#[derive(Clone)]
enum Tls {
    Plain,
    Rustls(MakeRustlsConnect),
}

pub(super) struct Postgres {
    pool: Pool,
    keys: KeyCache,
    /// When a key lookup last found the database unreachable.
    down_since: std::sync::Mutex<Option<Instant>>,
    changes: Arc<Changes>,
    // Last: dropped after the pool and cache, whatever they hold.
    runtime: OwnRuntime,
}

impl Postgres {
    /// Connects to the database of `url` and applies the migrations it lacks.
    pub(super) async fn open(url: &str) -> Result<(Postgres, Migrated), StoreError> {
        let (config, trust) = parse_url(url)?;
        let tls = tls_for(&config, &trust)?;
        let runtime = OwnRuntime::new()?;
        let handle = runtime
            .handle()
            .ok_or_else(|| StoreError::Task("PostgreSQL's runtime is gone".into()))?
            .clone();
        let manager = match &tls {
            Tls::Plain => Manager::from_config(config.clone(), NoTls, manager_config()),
            Tls::Rustls(tls) => Manager::from_config(config.clone(), tls.clone(), manager_config()),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Pool(e.to_string()))?;
        let migrated = handle
            .spawn(migrate(pool.clone()))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))??;
        let changes = Arc::new(Changes::new());
        handle.spawn(listen(config, tls, changes.clone()));
        let db = Postgres {
            pool,
            keys: KeyCache::notified(changes.clone()),
            down_since: std::sync::Mutex::new(None),
            changes,
            runtime,
        };
        Ok((db, migrated))
    }

    /// Runs `work` on the backend's runtime and waits for it from any runtime.
    async fn run<T, F>(&self, work: impl FnOnce(Pool) -> F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let handle = self
            .runtime
            .handle()
            .ok_or_else(|| StoreError::Task("PostgreSQL's runtime is gone".into()))?;
        handle
            .spawn(work(self.pool.clone()))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    pub(super) async fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        let project = Project {
            id: Uuid::now_v7().to_string(),
            name: name.to_owned(),
            created_at_ms: now_ms(),
            limits: LimitSet::default(),
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
                    "INSERT INTO projects (id, name, created_at) VALUES ($1, $2, $3)",
                    &[&id, &name, &created_at],
                )
                .await?;
            Ok(())
        })
        .await?;
        Ok(project)
    }

    pub(super) async fn project_count(&self) -> Result<u64, StoreError> {
        self.run(|pool| async move {
            let client = connection(&pool).await?;
            let count: i64 = client
                .query_one("SELECT count(*) FROM projects", &[])
                .await?
                .try_get(0)?;
            Ok(count.max(0) as u64)
        })
        .await
    }

    /// Every project, oldest first.
    pub(super) async fn projects(&self) -> Result<Vec<Project>, StoreError> {
        self.run(|pool| async move {
            let client = connection(&pool).await?;
            let rows = client
                .query(&format!("{SELECT_PROJECT} ORDER BY created_at, id"), &[])
                .await?;
            rows.iter().map(project_from_row).collect()
        })
        .await
    }

    pub(super) async fn project(&self, id: &str) -> Result<Option<Project>, StoreError> {
        let id = id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let row = client
                .query_opt(&format!("{SELECT_PROJECT} WHERE id = $1"), &[&id])
                .await?;
            row.as_ref().map(project_from_row).transpose()
        })
        .await
    }

    pub(super) async fn update_project_limits(
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
                let row = tx
                    .query_opt(
                        "SELECT rpm, tpm, daily_budget_usd, monthly_budget_usd
                         FROM projects WHERE id = $1 FOR UPDATE",
                        &[&project_id],
                    )
                    .await?;
                let Some(row) = row else {
                    return Err(StoreError::UnknownProject(project_id));
                };
                let limits = update.apply(limits_at(&row, 0)?);
                write_limits(&tx, UPDATE_PROJECT_LIMITS, &project_id, &limits).await?;
                // Project limits travel inside every cached key of the project.
                notify(&tx, KEYS_CHANGED).await?;
                tx.commit().await?;
                Ok(limits)
            })
            .await?;
        self.changes.changed();
        Ok(limits)
    }

    pub(super) async fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
        spec: &KeySpec,
    ) -> Result<(), StoreError> {
        let (project_id, prefix, hash) = (project_id.to_owned(), prefix.to_owned(), *hash);
        let stored = StoredLimits::of(&spec.limits);
        let list = |list: &[String]| (!list.is_empty()).then(|| list.to_vec());
        let (routes, models, expires_at) = (
            list(&spec.scope.routes),
            list(&spec.scope.models),
            spec.scope.expires_at_ms,
        );
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            let tx = client.transaction().await?;
            let inserted = tx
                .execute(
                    "INSERT INTO api_keys (key_hash, prefix, project_id, created_at, rpm, tpm,
                        daily_budget_usd, monthly_budget_usd, routes, models, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
    pub(super) async fn update_key_limits(
        &self,
        which: &KeyMatch,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        let (which, update) = (which.clone(), *update);
        let updated = self
            .run(move |pool| async move {
                let mut client = connection(&pool).await?;
                let tx = client.transaction().await?;
                let (condition, value) = key_condition(&which, 1);
                let rows = tx
                    .query(
                        &format!(
                            "SELECT key_hash, prefix, rpm, tpm, daily_budget_usd, monthly_budget_usd
                             FROM api_keys WHERE {condition} AND revoked_at IS NULL FOR UPDATE"
                        ),
                        &[value.as_ref() as &(dyn ToSql + Sync)],
                    )
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
                let hash: Vec<u8> = row.try_get(0)?;
                let prefix: String = row.try_get(1)?;
                let limits = update.apply(limits_at(row, 2)?);
                write_limits(&tx, UPDATE_KEY_LIMITS, &hash, &limits).await?;
                notify(&tx, KEYS_CHANGED).await?;
                tx.commit().await?;
                Ok((prefix, limits))
            })
            .await?;
        self.changes.changed();
        Ok(updated)
    }

    /// Revokes the live keys `which` selects; returns how many.
    pub(super) async fn revoke(&self, which: &KeyMatch) -> Result<usize, StoreError> {
        let which = which.clone();
        let revoked = self
            .run(move |pool| async move {
                let mut client = connection(&pool).await?;
                let tx = client.transaction().await?;
                let (condition, value) = key_condition(&which, 2);
                let revoked = tx
                    .execute(
                        &format!(
                            "UPDATE api_keys SET revoked_at = $1
                             WHERE {condition} AND revoked_at IS NULL"
                        ),
                        &[&now_ms(), value.as_ref() as &(dyn ToSql + Sync)],
                    )
                    .await?;
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

    /// The cost recorded for `subject` since `since_ms`.
    pub(super) async fn spent_since(
        &self,
        subject: &Subject<'_>,
        since_ms: i64,
    ) -> Result<f64, StoreError> {
        let (sql, id) = match subject {
            Subject::Project(id) => (SPENT_BY_PROJECT, id.to_string()),
            Subject::Key(prefix) => (SPENT_BY_KEY, prefix.to_string()),
        };
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(sql).await?;
            Ok(client
                .query_one(&statement, &[&id, &since_ms])
                .await?
                .try_get(0)?)
        })
        .await
    }

    pub(super) async fn usage_since(
        &self,
        project_id: &str,
        since_ms: i64,
    ) -> Result<UsageTotals, StoreError> {
        let project_id = project_id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(
                    "SELECT count(*), COALESCE(SUM(prompt_tokens), 0)::BIGINT,
                        COALESCE(SUM(completion_tokens), 0)::BIGINT,
                        COALESCE(SUM(total_tokens), 0)::BIGINT,
                        COALESCE(SUM(cost_usd), 0)::DOUBLE PRECISION
                     FROM invocations WHERE project_id = $1 AND created_at >= $2",
                )
                .await?;
            let row = client
                .query_one(&statement, &[&project_id, &since_ms])
                .await?;
            let count = |index: usize| -> Result<u64, StoreError> {
                Ok(row.try_get::<_, i64>(index)?.max(0) as u64)
            };
            Ok(UsageTotals {
                requests: count(0)?,
                prompt_tokens: count(1)?,
                completion_tokens: count(2)?,
                total_tokens: count(3)?,
                cost_usd: row.try_get(4)?,
            })
        })
        .await
    }

    pub(super) async fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
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
                let statement = client
                    .prepare_cached(
                        "SELECT k.project_id, k.prefix, k.rpm, k.tpm, k.daily_budget_usd,
                            k.monthly_budget_usd, p.rpm, p.tpm, p.daily_budget_usd,
                            p.monthly_budget_usd, k.routes, k.models, k.expires_at
                         FROM api_keys k JOIN projects p ON p.id = k.project_id
                         WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
                    )
                    .await?;
                let row = client.query_opt(&statement, &[&&owned[..]]).await?;
                row.as_ref().map(key_from_row).transpose()
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
                super::key_cache::MAX_STALE.as_secs() / 60
            );
        }
        *down = Some(Instant::now());
    }

    /// Commits `batch` in one statement. Blocking: for the invocation
    /// writer's thread, which may be any thread, a runtime's blocking pool included.
    pub(super) fn insert_invocations(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let columns = Columns::of(batch);
        let handle = self
            .runtime
            .handle()
            .ok_or_else(|| StoreError::Task("PostgreSQL's runtime is gone".into()))?;
        let (done, result) = std::sync::mpsc::sync_channel(1);
        let pool = self.pool.clone();
        handle.spawn(async move {
            let inserted = async {
                let client = connection(&pool).await?;
                let statement = client.prepare_cached(INSERT_INVOCATIONS).await?;
                client.execute(&statement, &columns.params()).await?;
                Ok(())
            };
            // The receiver is gone only if the writer gave up waiting.
            let _ = done.send(inserted.await);
        });
        result
            .recv()
            .map_err(|_| StoreError::Task("the PostgreSQL insert was dropped".into()))?
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`;
    /// returns how many it deleted.
    pub(super) async fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(
                    "DELETE FROM invocations WHERE id IN
                     (SELECT id FROM invocations WHERE created_at < $1 LIMIT $2)",
                )
                .await?;
            let deleted = client
                .execute(&statement, &[&cutoff_ms, &i64::from(limit)])
                .await?;
            Ok(deleted as usize)
        })
        .await
    }

    pub(super) async fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        let id = id.to_string();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(&format!("{SELECT_INVOCATION} WHERE id = $1"))
                .await?;
            match client.query_opt(&statement, &[&id]).await? {
                Some(row) => Ok(Some(invocation_from_row(&row)?)),
                None => Ok(None),
            }
        })
        .await
    }

    pub(super) async fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        let filter = filter.clone();
        self.run(move |pool| async move {
            // One statement per combination of filters, so each uses its index
            // (`$1 IS NULL OR project_id = $1` would not, once planned generically).
            let mut conditions = Vec::new();
            let mut params: Vec<&(dyn ToSql + Sync)> = Vec::new();
            if let Some(project_id) = &filter.project_id {
                params.push(project_id);
                conditions.push(format!("project_id = ${}", params.len()));
            }
            if let Some(user_id) = &filter.user_id {
                params.push(user_id);
                conditions.push(format!("user_id = ${}", params.len()));
            }
            let limit = i64::from(filter.limit);
            params.push(&limit);
            let filtered = if conditions.is_empty() {
                String::new()
            } else {
                format!(" WHERE {}", conditions.join(" AND "))
            };
            let sql = format!(
                "{SELECT_INVOCATION}{filtered} ORDER BY created_at DESC, id DESC LIMIT ${}",
                params.len()
            );
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&sql).await?;
            let rows = client.query(&statement, &params).await?;
            rows.iter().map(invocation_from_row).collect()
        })
        .await
    }

    pub(super) async fn usage(
        &self,
        range: &RecordRange,
        by: &[GroupBy],
    ) -> Result<Vec<UsageRow>, StoreError> {
        let totals = report::totals_query(range, by, placeholder);
        let durations = report::durations_query(range, by, placeholder);
        let by = by.to_vec();
        self.run(move |pool| async move {
            let mut client = connection(&pool).await?;
            // One snapshot for both queries.
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let mut tally = UsageTally::default();
            let rows = tx
                .query(totals.sql.as_str(), &sql_params(&totals.values))
                .await?;
            for row in &rows {
                let first = by.len();
                let mut counts = [0i64; 8];
                for (offset, count) in counts.iter_mut().enumerate() {
                    *count = row.try_get(first + offset)?;
                }
                tally.totals(group_at(row, &by)?, counts, row.try_get(first + 8)?);
            }
            // A portal read in pieces: one duration per record of the range.
            let portal = tx
                .bind(durations.sql.as_str(), &sql_params(&durations.values))
                .await?;
            loop {
                let rows = tx.query_portal(&portal, DURATIONS_PER_FETCH).await?;
                for row in &rows {
                    tally.duration(group_at(row, &by)?, row.try_get(by.len())?);
                }
                if rows.len() < DURATIONS_PER_FETCH as usize {
                    break;
                }
            }
            tx.commit().await?;
            Ok(tally.finish())
        })
        .await
    }

    pub(super) async fn invocations_page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        let select = if bodies {
            SELECT_INVOCATION
        } else {
            SELECT_INVOCATION_WITHOUT_BODIES
        };
        let query = report::page_query(select, range, after, limit, placeholder);
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&query.sql).await?;
            let rows = client.query(&statement, &sql_params(&query.values)).await?;
            let records = rows
                .iter()
                .map(invocation_from_row)
                .collect::<Result<Vec<_>, _>>()?;
            let last = match rows.last() {
                Some(row) => Some(Cursor::new(
                    row.try_get(CREATED_AT_COLUMN)?,
                    row.try_get(ID_COLUMN)?,
                )),
                None => None,
            };
            Ok(Page::of(records, last, limit))
        })
        .await
    }

    #[cfg(test)]
    fn listening(&self) -> bool {
        self.changes.epoch().is_some()
    }
}

/// The condition selecting the keys `which` names, as parameter `$param`,
/// and that parameter's value.
fn key_condition(which: &KeyMatch, param: usize) -> (String, Box<dyn ToSql + Sync + Send>) {
    match which {
        KeyMatch::Hash(hash) => (format!("key_hash = ${param}"), Box::new(hash.to_vec())),
        KeyMatch::Pattern(pattern) => (
            format!("prefix LIKE ${param} ESCAPE '\\'"),
            Box::new(pattern.clone()),
        ),
    }
}

// Each walks its (subject, created_at) index.
const SPENT_BY_PROJECT: &str = "SELECT COALESCE(SUM(cost_usd), 0)::DOUBLE PRECISION
    FROM invocations WHERE project_id = $1 AND created_at >= $2";
const SPENT_BY_KEY: &str = "SELECT COALESCE(SUM(cost_usd), 0)::DOUBLE PRECISION
    FROM invocations WHERE key_prefix = $1 AND created_at >= $2";

const SELECT_PROJECT: &str = "SELECT id, name, created_at, rpm, tpm, daily_budget_usd,
    monthly_budget_usd FROM projects";

fn project_from_row(row: &Row) -> Result<Project, StoreError> {
    Ok(Project {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        created_at_ms: row.try_get(2)?,
        limits: limits_at(row, 3)?,
    })
}

/// What `find_key` selects, as a record.
fn key_from_row(row: &Row) -> Result<KeyRecord, StoreError> {
    // A NULL element (SQL by hand) is an error rather than dropped: a list
    // left empty would let the key use every route.
    let list = |index: usize| -> Result<Vec<String>, StoreError> {
        Ok(row
            .try_get::<_, Option<Vec<String>>>(index)?
            .unwrap_or_default())
    };
    Ok(KeyRecord {
        project_id: row.try_get(0)?,
        prefix: row.try_get(1)?,
        limits: limits_at(row, 2)?,
        project_limits: limits_at(row, 6)?,
        scope: KeyScope {
            routes: list(10)?,
            models: list(11)?,
            expires_at_ms: row.try_get(12)?,
        },
    })
}

/// The four limit columns starting at `first` (rpm, tpm, daily, monthly).
fn limits_at(row: &Row, first: usize) -> Result<LimitSet, StoreError> {
    Ok(StoredLimits {
        rpm: row.try_get(first)?,
        tpm: row.try_get(first + 1)?,
        daily_budget_usd: row.try_get(first + 2)?,
        monthly_budget_usd: row.try_get(first + 3)?,
    }
    .limits())
}

/// How much of the server's certificate is checked when TLS is used, after
/// libpq's `sslmode`: `prefer` and `require` encrypt without checking it (a
/// stock Debian server offers a self-signed `localhost` certificate),
/// `verify-ca` checks it chains to a trusted root, `verify-full` also that it
/// names the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    Full,
}

/// The roots a certificate is checked against, after libpq's `sslrootcert`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// The platform's trust store (no `sslrootcert`, or `sslrootcert=system`).
    Platform,
    /// The PEM certificates of this file (a private CA, a cloud provider's bundle).
    File(std::path::PathBuf),
}

/// What TLS checks of the server, and against what.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Trust {
    verify: Verify,
    roots: Roots,
}

/// Parses a libpq-style URL. tokio-postgres knows `sslmode` up to `require`
/// and no `sslrootcert`: `verify-ca` and `verify-full` are taken out here and
/// given to it as `require`, the checking being done by [`tls_for`]'s
/// verifier, against `sslrootcert`'s roots when the URL names a file. As with
/// libpq, `require` with a root file checks the chain (as `verify-ca`).
fn parse_url(url: &str) -> Result<(Config, Trust), StoreError> {
    let mut verify = Verify::Nothing;
    let mut roots = Roots::Platform;
    let url = match url.split_once('?') {
        None => url.to_owned(),
        Some((base, query)) => {
            let mut kept = Vec::new();
            for pair in query.split('&') {
                match pair {
                    "sslmode=verify-ca" => {
                        verify = Verify::Chain;
                        kept.push("sslmode=require");
                    }
                    "sslmode=verify-full" => {
                        verify = Verify::Full;
                        kept.push("sslmode=require");
                    }
                    _ => match pair.strip_prefix("sslrootcert=") {
                        Some("system") => roots = Roots::Platform,
                        Some(path) => {
                            let path = percent_encoding::percent_decode_str(path)
                                .decode_utf8()
                                .map_err(|_| {
                                    StoreError::Pool("sslrootcert: not a UTF-8 path".into())
                                })?;
                            roots = Roots::File(path.into_owned().into());
                        }
                        None => kept.push(pair),
                    },
                }
            }
            if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            }
        }
    };
    // The error names the option at fault, never the URL (which may hold a password).
    let mut config = Config::from_str(&url)?;
    if config.get_ssl_mode() != SslMode::Require {
        verify = Verify::Nothing;
    } else if verify == Verify::Nothing && matches!(roots, Roots::File(_)) {
        verify = Verify::Chain;
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("gateway");
    }
    // A peer gone without a word (a partition, a dead host) fails queries and
    // drops idle connections within ~30 s, rather than the system's hours: the
    // invocation writer would wait on it, and the listener would miss changes.
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(DEAD_PEER_TIMEOUT);
    }
    let default_keepalives = config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60)
        && config.get_keepalives_interval().is_none()
        && config.get_keepalives_retries().is_none();
    if config.get_keepalives() && default_keepalives {
        config
            .keepalives_idle(Duration::from_secs(10))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(4);
    }
    Ok((config, Trust { verify, roots }))
}

fn tls_for(config: &Config, trust: &Trust) -> Result<Tls, StoreError> {
    if config.get_ssl_mode() == SslMode::Disable {
        return Ok(Tls::Plain);
    }
    // Roots the operator named for a check must be there: not a reason to go plain.
    let roots = match &trust.roots {
        Roots::File(path) if trust.verify != Verify::Nothing => Some(root_store(path)?),
        _ => None,
    };
    match rustls_config(trust.verify, roots) {
        Ok(tls) => Ok(Tls::Rustls(MakeRustlsConnect::new(tls))),
        Err(e) if config.get_ssl_mode() == SslMode::Require => Err(StoreError::Pool(format!(
            "TLS is required, but cannot be set up: {e}"
        ))),
        Err(e) => {
            tracing::warn!("PostgreSQL: TLS cannot be set up ({e}); connecting without it");
            Ok(Tls::Plain)
        }
    }
}

/// The certificates of `sslrootcert`'s PEM file.
fn root_store(path: &std::path::Path) -> Result<rustls::RootCertStore, StoreError> {
    use rustls::pki_types::pem::PemObject;
    let bad = |why: String| StoreError::Pool(format!("sslrootcert {}: {why}", path.display()));
    let mut store = rustls::RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|e| bad(e.to_string()))?;
        store.add(certificate).map_err(|e| bad(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(store)
}

fn rustls_config(
    verify: Verify,
    roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Built only when something is checked: `prefer` and `require` need no trust store.
    let checked = |provider: Arc<rustls::crypto::CryptoProvider>| {
        Ok::<Arc<dyn ServerCertVerifier>, rustls::Error>(match roots {
            None => Arc::new(Verifier::new(provider)?),
            Some(roots) => rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?,
        })
    };
    let verifier: Arc<dyn ServerCertVerifier> = match verify {
        Verify::Nothing => Arc::new(Unverified(provider.clone())),
        Verify::Chain => Arc::new(ChainOnly(checked(provider.clone())?)),
        Verify::Full => checked(provider.clone())?,
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `sslmode=prefer` and `require`: any certificate, as libpq takes it (the
/// handshake's signatures are still checked against it).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the full check's verdict, except on the host name
/// (which it checks after the chain, so a name error means the chain held).
#[derive(Debug)]
struct ChainOnly(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verdict {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn manager_config() -> ManagerConfig {
    ManagerConfig {
        // A closed connection is noticed before reuse; a half-dead one fails
        // its query once, and the caller (or the writer's retry) tries again.
        recycling_method: RecyclingMethod::Fast,
    }
}

async fn connection(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(|e| match e {
        PoolError::Timeout(_) => StoreError::Pool(format!(
            "no connection within {}s (is the server up and reachable?)",
            POOL_TIMEOUT.as_secs()
        )),
        PoolError::Backend(e) => StoreError::Pool(error_chain(&e)),
        other => StoreError::Pool(other.to_string()),
    })
}

/// An error and its causes ("error connecting to server: Connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Delivered to every listener when the transaction commits.
const UPDATE_PROJECT_LIMITS: &str = "UPDATE projects SET rpm = $2, tpm = $3,
    daily_budget_usd = $4, monthly_budget_usd = $5 WHERE id = $1";
const UPDATE_KEY_LIMITS: &str = "UPDATE api_keys SET rpm = $2, tpm = $3,
    daily_budget_usd = $4, monthly_budget_usd = $5 WHERE key_hash = $1";

/// Stores `limits` in the row `sql` (one of the two above) updates, `id` naming it.
async fn write_limits(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    id: &(dyn ToSql + Sync),
    limits: &LimitSet,
) -> Result<(), StoreError> {
    let stored = StoredLimits::of(limits);
    tx.execute(
        sql,
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

async fn notify(tx: &deadpool_postgres::Transaction<'_>, what: &str) -> Result<(), StoreError> {
    tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &what])
        .await?;
    Ok(())
}

/// Applies the migrations the database lacks, each in its own transaction
/// under an advisory lock (replicas starting at once wait for each other, and
/// read the version again once they hold it).
async fn migrate(pool: Pool) -> Result<Migrated, StoreError> {
    let known = MIGRATIONS.len() as i64;
    let mut client = connection(&pool).await?;
    let mut from = None;
    loop {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let exists: bool = tx
            .query_one("SELECT to_regclass('gateway_schema') IS NOT NULL", &[])
            .await?
            .try_get(0)?;
        if !exists {
            tx.batch_execute(
                "CREATE TABLE gateway_schema (version BIGINT NOT NULL);
                 INSERT INTO gateway_schema (version) VALUES (0);",
            )
            .await?;
        }
        let version: i64 = match tx
            .query_opt("SELECT max(version) FROM gateway_schema", &[])
            .await?
        {
            Some(row) => row.try_get::<_, Option<i64>>(0)?.unwrap_or(0),
            None => 0,
        };
        let from = *from.get_or_insert(version);
        if version > known {
            return Err(StoreError::SchemaTooNew {
                backend: BACKEND,
                found: version,
                known,
            });
        }
        let Some(migration) = MIGRATIONS.get(version.max(0) as usize) else {
            tx.commit().await?;
            return Ok(Migrated { from, to: known });
        };
        tx.batch_execute(migration).await?;
        // One row, whatever was there (an emptied table included).
        tx.execute("DELETE FROM gateway_schema", &[]).await?;
        tx.execute(
            "INSERT INTO gateway_schema (version) VALUES ($1)",
            &[&(version + 1)],
        )
        .await?;
        tx.commit().await?;
    }
}

/// Keeps a connection subscribed to change notifications, for as long as the
/// backend's runtime runs.
async fn listen(mut config: Config, tls: Tls, changes: Arc<Changes>) {
    let name = config
        .get_application_name()
        .unwrap_or("gateway")
        .to_owned();
    // Named so that operators (and tests) can tell it from the pool's connections.
    config.application_name(format!("{name} (changes)"));
    let mut retry = LISTEN_RETRY_MIN;
    let mut outage_logged = false;
    loop {
        let mut subscribed = false;
        let ended = match &tls {
            Tls::Plain => match config.connect(NoTls).await {
                Ok((client, connection)) => {
                    listen_on(client, connection, &changes, &mut subscribed).await
                }
                Err(e) => Err(e),
            },
            Tls::Rustls(tls) => match config.connect(tls.clone()).await {
                Ok((client, connection)) => {
                    listen_on(client, connection, &changes, &mut subscribed).await
                }
                Err(e) => Err(e),
            },
        };
        changes.set_connected(false);
        if subscribed {
            retry = LISTEN_RETRY_MIN;
            outage_logged = false;
        }
        if !outage_logged {
            let why = match &ended {
                Ok(()) => "the connection was closed".to_owned(),
                Err(e) => error_chain(e),
            };
            tracing::warn!(
                "PostgreSQL change notifications are not received ({why}); until they are, \
                 every key lookup reads the database"
            );
            outage_logged = true;
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LISTEN_RETRY_MAX);
    }
}

/// Subscribes on one connection and turns its notifications into new epochs
/// until it fails.
async fn listen_on<S, T>(
    client: Client,
    mut connection: Connection<S, T>,
    changes: &Changes,
    subscribed: &mut bool,
) -> Result<(), tokio_postgres::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let listen = format!("LISTEN {CHANNEL}");
    let subscribe = client.batch_execute(&listen);
    tokio::pin!(subscribe);
    // The connection does the LISTEN's I/O only while it is polled.
    loop {
        tokio::select! {
            done = &mut subscribe => {
                done?;
                break;
            }
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    changes.set_connected(true);
    *subscribed = true;
    tracing::info!("PostgreSQL change notifications are received");
    let mut refresh =
        tokio::time::interval_at(tokio::time::Instant::now() + FULL_REFRESH, FULL_REFRESH);
    loop {
        tokio::select! {
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    tracing::debug!("PostgreSQL: {} changed", notification.payload());
                    changes.changed();
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            _ = refresh.tick() => changes.changed(),
        }
    }
}

const INSERT_INVOCATIONS: &str = "INSERT INTO invocations (id, project_id, user_id, route, plugin,
        model, type, stream, status, http_status, error, provider_error, prompt_tokens,
        completion_tokens, total_tokens, cached_prompt_tokens, cache_creation_tokens,
        reasoning_tokens, cost_usd, created_at, duration_ms, request, response, key_prefix,
        attempts)
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::boolean[], $9::text[], $10::integer[], $11::text[], $12::text[],
        $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[],
        $19::double precision[], $20::bigint[], $21::bigint[], $22::text[], $23::text[],
        $24::text[], $25::text[]::jsonb[])
    ON CONFLICT (id) DO NOTHING";

type Texts = Vec<Option<String>>;
type Counts = Vec<Option<i64>>;

/// A batch as one array per column, for [`INSERT_INVOCATIONS`].
struct Columns {
    id: Vec<String>,
    project_id: Texts,
    user_id: Texts,
    route: Texts,
    plugin: Texts,
    model: Texts,
    kind: Texts,
    stream: Vec<bool>,
    status: Vec<&'static str>,
    http_status: Vec<i32>,
    error: Texts,
    provider_error: Texts,
    prompt_tokens: Counts,
    completion_tokens: Counts,
    total_tokens: Counts,
    cached_prompt_tokens: Counts,
    cache_creation_tokens: Counts,
    reasoning_tokens: Counts,
    cost_usd: Vec<Option<f64>>,
    created_at: Vec<i64>,
    duration_ms: Vec<i64>,
    request: Texts,
    response: Texts,
    key_prefix: Texts,
    /// JSON text, which the insert casts to JSONB: text needs no JSON support in the driver.
    attempts: Texts,
}

impl Columns {
    fn of(batch: &[Invocation]) -> Columns {
        let texts = |field: fn(&Invocation) -> &Option<String>| -> Texts {
            batch
                .iter()
                .map(|inv| field(inv).as_deref().map(storable))
                .collect()
        };
        let counts = |field: fn(&TokenUsage) -> Option<u32>| -> Counts {
            batch
                .iter()
                .map(|inv| inv.usage.as_ref().and_then(field).map(i64::from))
                .collect()
        };
        Columns {
            id: batch.iter().map(|inv| inv.id.to_string()).collect(),
            project_id: texts(|inv| &inv.project_id),
            user_id: texts(|inv| &inv.user_id),
            route: texts(|inv| &inv.route),
            plugin: texts(|inv| &inv.plugin),
            model: texts(|inv| &inv.model),
            kind: texts(|inv| &inv.kind),
            stream: batch.iter().map(|inv| inv.stream).collect(),
            status: batch.iter().map(|inv| inv.status.as_str()).collect(),
            http_status: batch.iter().map(|inv| i32::from(inv.http_status)).collect(),
            error: texts(|inv| &inv.error),
            provider_error: texts(|inv| &inv.provider_error),
            prompt_tokens: counts(|u| Some(u.prompt_tokens)),
            completion_tokens: counts(|u| Some(u.completion_tokens)),
            total_tokens: counts(|u| Some(u.total_tokens)),
            cached_prompt_tokens: counts(|u| u.cached_prompt_tokens),
            cache_creation_tokens: counts(|u| u.cache_creation_tokens),
            reasoning_tokens: counts(|u| u.reasoning_tokens),
            cost_usd: batch.iter().map(|inv| inv.cost_usd).collect(),
            created_at: batch.iter().map(|inv| inv.created_at_ms).collect(),
            duration_ms: batch.iter().map(|inv| inv.duration_ms).collect(),
            request: texts(|inv| &inv.request),
            response: texts(|inv| &inv.response),
            key_prefix: texts(|inv| &inv.key_prefix),
            attempts: batch
                .iter()
                .map(|inv| attempts_json(&inv.attempts))
                .collect(),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 25] {
        [
            &self.id,
            &self.project_id,
            &self.user_id,
            &self.route,
            &self.plugin,
            &self.model,
            &self.kind,
            &self.stream,
            &self.status,
            &self.http_status,
            &self.error,
            &self.provider_error,
            &self.prompt_tokens,
            &self.completion_tokens,
            &self.total_tokens,
            &self.cached_prompt_tokens,
            &self.cache_creation_tokens,
            &self.reasoning_tokens,
            &self.cost_usd,
            &self.created_at,
            &self.duration_ms,
            &self.request,
            &self.response,
            &self.key_prefix,
            &self.attempts,
        ]
    }
}

/// A record's attempts as stored: NULL when there are none, else a JSON array. JSONB refuses
/// `\u0000`, so NULs go as in [`storable`]; else one such attempt would fail its whole batch.
fn attempts_json(attempts: &[Attempt]) -> Option<String> {
    if attempts.is_empty() {
        return None;
    }
    let clean = |text: &Option<String>| text.as_deref().map(storable);
    let cleaned: Vec<Attempt> = attempts
        .iter()
        .map(|a| Attempt {
            route: storable(&a.route),
            target: clean(&a.target),
            status: a.status,
            error: clean(&a.error),
            duration_ms: a.duration_ms,
        })
        .collect();
    serde_json::to_string(&cleaned).ok()
}

/// The attempts column, read as text. What does not read as a list of attempts (a
/// hand-edited value) reads as none: the record is still worth showing, and nothing is
/// decided from its attempts.
fn attempts_from(json: Option<&str>) -> Vec<Attempt> {
    json.and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// PostgreSQL's TEXT cannot hold NUL, which a raw (non-JSON) body may: one
/// such record would fail its whole batch, again on every retry.
fn storable(text: &str) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_owned()
    }
}

/// `SELECT` of every column [`invocation_from_row`] reads, `$bodies` standing for the
/// request and response columns.
macro_rules! select_invocation {
    ($bodies:literal) => {
        concat!(
            "SELECT id, project_id, user_id, route, plugin, model, type, stream,
    status, http_status, error, provider_error, prompt_tokens, completion_tokens, total_tokens,
    cached_prompt_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, created_at,
    duration_ms, ",
            $bodies,
            ", key_prefix, attempts::text FROM invocations"
        )
    };
}
const SELECT_INVOCATION: &str = select_invocation!("request, response");
/// An export without bodies: they are most of a record's bytes.
const SELECT_INVOCATION_WITHOUT_BODIES: &str = select_invocation!("NULL::text, NULL::text");
/// Where [`SELECT_INVOCATION`] has `id` and `created_at`: an export page's cursor.
const ID_COLUMN: usize = 0;
const CREATED_AT_COLUMN: usize = 19;
/// Rows of a report's durations fetched at a time (a portal's page), not the whole range's.
const DURATIONS_PER_FETCH: i32 = 10_000;

fn placeholder(n: usize) -> String {
    format!("${n}")
}

/// A query's values as the driver takes them.
fn sql_params(values: &[SqlValue]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| match value {
            SqlValue::Text(text) => text as &(dyn ToSql + Sync),
            SqlValue::Integer(n) => n as &(dyn ToSql + Sync),
        })
        .collect()
}

/// A report row's group values, its first `by.len()` columns.
fn group_at(row: &Row, by: &[GroupBy]) -> Result<Vec<Option<String>>, StoreError> {
    by.iter()
        .enumerate()
        .map(|(index, group)| {
            Ok(match group {
                GroupBy::Day => row.try_get::<_, Option<i64>>(index)?.map(report::day_name),
                _ => row.try_get(index)?,
            })
        })
        .collect()
}

fn invocation_from_row(row: &Row) -> Result<Invocation, StoreError> {
    let count = |index: usize| -> Result<Option<u32>, StoreError> {
        let value: Option<i64> = row.try_get(index)?;
        Ok(value.map(|v| u32::try_from(v.max(0)).unwrap_or(u32::MAX)))
    };
    let usage = match count(12)? {
        None => None,
        Some(prompt_tokens) => Some(TokenUsage {
            prompt_tokens,
            completion_tokens: count(13)?.unwrap_or(0),
            total_tokens: count(14)?.unwrap_or(0),
            cached_prompt_tokens: count(15)?,
            cache_creation_tokens: count(16)?,
            reasoning_tokens: count(17)?,
        }),
    };
    let id: String = row.try_get(0)?;
    let status: String = row.try_get(8)?;
    let http_status: i32 = row.try_get(9)?;
    Ok(Invocation {
        id: Uuid::parse_str(&id).unwrap_or_default(),
        project_id: row.try_get(1)?,
        user_id: row.try_get(2)?,
        route: row.try_get(3)?,
        plugin: row.try_get(4)?,
        model: row.try_get(5)?,
        kind: row.try_get(6)?,
        stream: row.try_get(7)?,
        status: InvocationStatus::parse(&status),
        http_status: u16::try_from(http_status).unwrap_or(0),
        error: row.try_get(10)?,
        provider_error: row.try_get(11)?,
        usage,
        cost_usd: row.try_get(18)?,
        created_at_ms: row.try_get(19)?,
        duration_ms: row.try_get(20)?,
        request: row.try_get(21)?,
        response: row.try_get(22)?,
        key_prefix: row.try_get(23)?,
        attempts: attempts_from(row.try_get::<_, Option<&str>>(24)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

    /// A database of its own on the local server, dropped with it (also when
    /// the test fails).
    struct TestDb {
        admin_url: String,
        name: String,
        url: String,
    }

    impl TestDb {
        /// None (after a loud message) when no server is reachable, unless CI is set.
        async fn create() -> Option<TestDb> {
            let admin_url = std::env::var("GATEWAY_TEST_POSTGRES")
                .ok()
                .filter(|url| !url.is_empty())
                .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_owned());
            let admin = match admin(&admin_url).await {
                Ok(admin) => admin,
                Err(e) if std::env::var_os("CI").is_some() => {
                    panic!("no PostgreSQL at {admin_url} (CI requires it): {e}")
                }
                Err(e) => {
                    eprintln!(
                        "\n*** SKIPPED: no PostgreSQL at {admin_url} ({}) ***\n",
                        error_chain(&e)
                    );
                    return None;
                }
            };
            let random = Uuid::now_v7().simple().to_string();
            let name = format!("gw_unit_{}_{}", std::process::id(), &random[20..]);
            // Concurrent CREATE DATABASE may find the template busy for a moment.
            let mut attempts = 0;
            while let Err(e) = admin
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
            {
                attempts += 1;
                assert!(attempts < 20, "CREATE DATABASE {name}: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let (base, _) = admin_url.rsplit_once('/').unwrap();
            let url = format!("{base}/{name}");
            Some(TestDb {
                admin_url,
                name,
                url,
            })
        }

        /// A plain connection to the test database, for SQL behind the store's back.
        async fn sql(&self) -> Client {
            let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await.unwrap();
            tokio::spawn(connection);
            client
        }
    }

    async fn admin(url: &str) -> Result<Client, tokio_postgres::Error> {
        let mut config = Config::from_str(url)?;
        config.connect_timeout(Duration::from_secs(5));
        let (client, connection) = config.connect(NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    impl Drop for TestDb {
        fn drop(&mut self) {
            // Inside the test's runtime, which cannot be blocked on: a thread of its own.
            let (url, sql) = (
                self.admin_url.clone(),
                format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            );
            let dropped = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async { admin(&url).await?.batch_execute(&sql).await })
            })
            .join();
            if !matches!(dropped, Ok(Ok(()))) {
                eprintln!("could not drop the test database {}", self.name);
            }
        }
    }

    async fn open(db: &TestDb) -> Postgres {
        let (pg, _) = Postgres::open(&db.url).await.unwrap();
        pg
    }

    async fn wait_until_listening(pg: &Postgres) {
        let start = std::time::Instant::now();
        while !pg.listening() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the listener did not subscribe"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn record(n: usize) -> Invocation {
        Invocation {
            id: Uuid::now_v7(),
            project_id: Some("project".into()),
            key_prefix: Some(format!("gw_key{}", n % 3)),
            user_id: Some(format!("user-{}", n % 7)),
            route: Some("openai".into()),
            plugin: Some("openai".into()),
            model: Some("gpt-4o-mini".into()),
            kind: Some("chat".into()),
            stream: n.is_multiple_of(2),
            status: InvocationStatus::Success,
            http_status: 200,
            error: None,
            provider_error: None,
            usage: Some(TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 30,
                total_tokens: 42,
                cached_prompt_tokens: None,
                cache_creation_tokens: None,
                reasoning_tokens: None,
            }),
            cost_usd: Some(0.000_123),
            created_at_ms: 1_700_000_000_000 + n as i64,
            duration_ms: 350,
            request: Some(format!(
                r#"{{"model":"gpt-4o-mini","messages":[{{"role":"user","content":"{}"}}]}}"#,
                "hello ".repeat(60)
            )),
            response: Some(format!(
                r#"{{"choices":[{{"message":{{"role":"assistant","content":"{}"}}}}]}}"#,
                "world ".repeat(100)
            )),
            attempts: Vec::new(),
        }
    }

    async fn count(sql: &Client, query: &str) -> i64 {
        sql.query_one(query, &[]).await.unwrap().get(0)
    }

    #[tokio::test]
    async fn migrations_run_once_and_a_newer_schema_is_refused() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let known = MIGRATIONS.len() as i64;
        let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
        assert_eq!(migrated, Migrated { from: 0, to: known });
        pg.create_project("p").await.unwrap();
        drop(pg);

        let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
        assert_eq!(
            migrated,
            Migrated {
                from: known,
                to: known
            }
        );
        assert_eq!(pg.project_count().await.unwrap(), 1);
        drop(pg);

        let sql = db.sql().await;
        assert_eq!(count(&sql, "SELECT count(*) FROM gateway_schema").await, 1);
        sql.execute("UPDATE gateway_schema SET version = $1", &[&(known + 1)])
            .await
            .unwrap();
        let error = Postgres::open(&db.url)
            .await
            .err()
            .expect("a newer schema is refused");
        assert!(
            matches!(
                error,
                StoreError::SchemaTooNew { backend: "PostgreSQL", found, known: k }
                    if found == known + 1 && k == known
            ),
            "{error}"
        );
        assert_eq!(
            count(&sql, "SELECT max(version) FROM gateway_schema").await,
            known + 1
        );
        drop(sql);
    }

    #[tokio::test]
    async fn replicas_starting_at_once_migrate_once() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let opened = futures_join(Postgres::open(&db.url), Postgres::open(&db.url)).await;
        let (a, b) = (opened.0.unwrap(), opened.1.unwrap());
        let known = MIGRATIONS.len() as i64;
        let mut froms = [a.1.from, b.1.from];
        froms.sort();
        // Each migration is a transaction of its own: the second replica may
        // take over between two (finding 1..=known), never redo one (its
        // ALTER TABLEs would fail, and so would its open).
        assert_eq!(froms[0], 0, "{froms:?}");
        assert!((1..=known).contains(&froms[1]), "{froms:?}");
        assert_eq!(a.1.to, known);
        assert_eq!(b.1.to, known);
        let sql = db.sql().await;
        assert_eq!(
            count(&sql, "SELECT max(version) FROM gateway_schema").await,
            known
        );
        drop((a, b, sql));
    }

    async fn futures_join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
        tokio::join!(a, b)
    }

    #[tokio::test]
    async fn keys_are_found_until_revoked_and_prefixes_are_literal() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let project = pg.create_project("p").await.unwrap();
        pg.insert_key(&project.id, "gw_ab%cd_ef", &[1; 32], &KeySpec::default())
            .await
            .unwrap();
        pg.insert_key(&project.id, "gw_abXcdYef", &[2; 32], &KeySpec::default())
            .await
            .unwrap();
        assert_eq!(
            pg.find_key(&[1; 32]).await.unwrap().unwrap().project_id,
            project.id
        );
        assert!(pg.find_key(&[3; 32]).await.unwrap().is_none());
        assert!(matches!(
            pg.insert_key("nope", "gw_x", &[4; 32], &KeySpec::default()).await,
            Err(StoreError::UnknownProject(id)) if id == "nope"
        ));

        // `%` and `_` match themselves only: the other key stays.
        assert_eq!(pg.revoke(&KeyMatch::of("gw_ab%cd_")).await.unwrap(), 1);
        assert!(pg.find_key(&[1; 32]).await.unwrap().is_none());
        assert!(pg.find_key(&[2; 32]).await.unwrap().is_some());
        assert_eq!(pg.revoke(&KeyMatch::of("gw_ab%cd_")).await.unwrap(), 0);

        assert_eq!(pg.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 1);
        assert!(pg.find_key(&[2; 32]).await.unwrap().is_none());
        assert_eq!(pg.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 0);
        drop(pg);
    }

    /// Polls `find_key` until the key is refused; panics after `within`.
    async fn refused_within(pg: &Postgres, hash: &[u8; 32], within: Duration) -> Duration {
        let start = std::time::Instant::now();
        while pg.find_key(hash).await.unwrap().is_some() {
            assert!(
                start.elapsed() < within,
                "the revoked key was still accepted after {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        start.elapsed()
    }

    #[tokio::test]
    async fn a_revoke_through_another_replica_is_seen_within_a_second() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let (first, second) = (open(&db).await, open(&db).await);
        wait_until_listening(&first).await;
        let project = first.create_project("p").await.unwrap();
        // Behind the store's back, so that no notification of it can empty
        // the cache in the middle of what follows.
        let sql = db.sql().await;
        sql.execute(
            "INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
             VALUES ($1, 'gw_0123456789ab', $2, 0)",
            &[&&[9u8; 32][..], &project.id],
        )
        .await
        .unwrap();
        assert!(first.find_key(&[9; 32]).await.unwrap().is_some());

        // Cached: a change behind the store's back (no NOTIFY) goes unseen.
        sql.execute("UPDATE api_keys SET revoked_at = 1", &[])
            .await
            .unwrap();
        assert!(first.find_key(&[9; 32]).await.unwrap().is_some());
        sql.execute("UPDATE api_keys SET revoked_at = NULL", &[])
            .await
            .unwrap();

        assert_eq!(second.revoke(&KeyMatch::of("gw_0123")).await.unwrap(), 1);
        let took = refused_within(&first, &[9; 32], Duration::from_secs(1)).await;
        eprintln!("the other replica refused the key after {took:?}");
        drop((first, second, sql));
    }

    #[tokio::test]
    async fn the_listener_resubscribes_after_its_connection_is_killed() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let (first, second) = (open(&db).await, open(&db).await);
        wait_until_listening(&first).await;
        wait_until_listening(&second).await;
        let project = first.create_project("p").await.unwrap();
        first
            .insert_key(
                &project.id,
                "gw_0123456789ab",
                &[9; 32],
                &KeySpec::default(),
            )
            .await
            .unwrap();
        assert!(first.find_key(&[9; 32]).await.unwrap().is_some());

        let sql = db.sql().await;
        let killed = count(
            &sql,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name LIKE '%(changes)'",
        )
        .await;
        assert_eq!(killed, 2);
        // It notices (and reads through meanwhile), then waits at least
        // LISTEN_RETRY_MIN before subscribing again.
        let start = std::time::Instant::now();
        while first.listening() {
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "the kill went unnoticed"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        wait_until_listening(&first).await;
        wait_until_listening(&second).await;
        assert!(first.find_key(&[9; 32]).await.unwrap().is_some());
        assert_eq!(second.revoke(&KeyMatch::Hash([9; 32])).await.unwrap(), 1);
        refused_within(&first, &[9; 32], Duration::from_secs(1)).await;
        drop((first, second, sql));
    }

    #[tokio::test]
    async fn while_not_listening_every_lookup_reads_the_database() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let project = pg.create_project("p").await.unwrap();
        pg.insert_key(
            &project.id,
            "gw_0123456789ab",
            &[9; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
        // Stand in for a listener that is down.
        pg.changes.set_connected(false);
        assert!(pg.find_key(&[9; 32]).await.unwrap().is_some());
        let sql = db.sql().await;
        sql.execute("UPDATE api_keys SET revoked_at = 1", &[])
            .await
            .unwrap();
        assert!(pg.find_key(&[9; 32]).await.unwrap().is_none());
        drop((pg, sql));
    }

    #[tokio::test]
    async fn invocations_round_trip_every_field() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let full = Invocation {
            id: Uuid::now_v7(),
            project_id: Some("p".into()),
            key_prefix: Some("gw_0123456789ab".into()),
            user_id: Some("u".into()),
            route: Some("r".into()),
            plugin: Some("pl".into()),
            model: Some("m".into()),
            kind: Some("chat".into()),
            stream: true,
            status: InvocationStatus::Cancelled,
            http_status: 499,
            error: Some("e".into()),
            provider_error: Some("pe".into()),
            usage: Some(TokenUsage {
                prompt_tokens: 1,
                completion_tokens: 2,
                total_tokens: 3,
                cached_prompt_tokens: Some(4),
                cache_creation_tokens: Some(5),
                reasoning_tokens: Some(u32::MAX),
            }),
            cost_usd: Some(0.25),
            created_at_ms: 2_000,
            duration_ms: 7,
            request: Some(r#"{"a":1}"#.into()),
            response: Some("not json".into()),
            attempts: attempts(),
        };
        let bare = Invocation {
            http_status: 400,
            ..Invocation::begun(Uuid::now_v7(), 1_000)
        };
        let with_nul = Invocation {
            id: Uuid::now_v7(),
            created_at_ms: 3_000,
            request: Some("raw\0body".into()),
            attempts: vec![Attempt {
                route: "r\0".into(),
                target: Some("\0".into()),
                status: None,
                error: Some("cut\0off".into()),
                duration_ms: 1,
            }],
            ..bare.clone()
        };
        pg.insert_invocations(&[full.clone(), bare.clone(), with_nul.clone()])
            .unwrap();
        assert_eq!(pg.invocation(&full.id).await.unwrap(), Some(full.clone()));
        assert_eq!(pg.invocation(&bare.id).await.unwrap(), Some(bare.clone()));
        let read_with_nul = pg.invocation(&with_nul.id).await.unwrap().unwrap();
        assert_eq!(read_with_nul.request, Some("raw\u{FFFD}body".into()));
        assert_eq!(
            read_with_nul.attempts,
            [Attempt {
                route: "r\u{FFFD}".into(),
                target: Some("\u{FFFD}".into()),
                status: None,
                error: Some("cut\u{FFFD}off".into()),
                duration_ms: 1,
            }]
        );
        {
            let sql = db.sql().await;
            // Stored as JSONB, queryable; no attempts is NULL, not an empty array.
            assert_eq!(
                count(
                    &sql,
                    r#"SELECT count(*) FROM invocations WHERE attempts @> '[{"route": "fallback"}]'"#
                )
                .await,
                1
            );
            assert_eq!(
                count(
                    &sql,
                    "SELECT count(*) FROM invocations WHERE attempts IS NULL"
                )
                .await,
                1
            );
        }
        assert_eq!(pg.invocation(&Uuid::now_v7()).await.unwrap(), None);

        let all = pg
            .list_invocations(&InvocationFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        let ids: Vec<Uuid> = all.iter().map(|inv| inv.id).collect();
        assert_eq!(ids, [with_nul.id, full.id, bare.id]);
        let filtered = pg
            .list_invocations(&InvocationFilter {
                project_id: Some("p".into()),
                user_id: Some("u".into()),
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(filtered, std::slice::from_ref(&full));
        let by_user = pg
            .list_invocations(&InvocationFilter {
                user_id: Some("nobody".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(by_user.is_empty());
        let limited = pg
            .list_invocations(&InvocationFilter {
                limit: 1,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(limited.len(), 1);

        assert_eq!(pg.delete_invocations_before(2_500, 1).await.unwrap(), 1);
        assert_eq!(pg.delete_invocations_before(2_500, 10).await.unwrap(), 1);
        assert_eq!(pg.delete_invocations_before(2_500, 10).await.unwrap(), 0);
        assert!(pg.invocation(&bare.id).await.unwrap().is_none());
        assert!(pg.invocation(&with_nul.id).await.unwrap().is_some());
        drop(pg);
    }

    #[tokio::test]
    async fn batches_are_idempotent_and_one_statement_each() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = Arc::new(open(&db).await);
        let batch: Vec<Invocation> = (0..1000).map(record).collect();
        pg.insert_invocations(&batch).unwrap();
        // Replayed (part of it twice within one batch, too), with a changed body
        // that must not replace the stored one.
        let mut replay: Vec<Invocation> = batch[..600].to_vec();
        replay.extend(batch[..10].iter().cloned());
        replay[0].response = Some("second".into());
        pg.insert_invocations(&replay).unwrap();
        let sql = db.sql().await;
        assert_eq!(count(&sql, "SELECT count(*) FROM invocations").await, 1000);
        assert_eq!(
            pg.invocation(&batch[0].id).await.unwrap().unwrap(),
            batch[0]
        );

        // From a runtime's blocking pool, as the writer may be.
        let (pg2, more) = (pg.clone(), (0..512).map(record).collect::<Vec<_>>());
        tokio::task::spawn_blocking(move || pg2.insert_invocations(&more))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(count(&sql, "SELECT count(*) FROM invocations").await, 1512);

        // 512 records, the writer's batch size, as each gets measured.
        let mut times = Vec::new();
        for _ in 0..5 {
            let batch: Vec<Invocation> = (0..512).map(record).collect();
            let start = std::time::Instant::now();
            pg.insert_invocations(&batch).unwrap();
            times.push(start.elapsed());
        }
        eprintln!("512-record batches took {times:?}");
        drop((pg, sql));
    }

    #[tokio::test]
    async fn killed_pool_connections_are_replaced() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        pg.insert_invocations(&[record(0)]).unwrap();
        let sql = db.sql().await;
        let killed = count(
            &sql,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'gateway'",
        )
        .await;
        assert!(killed >= 1);
        // pg_terminate_backend only signals: wait for the backends to be gone.
        let start = std::time::Instant::now();
        while count(
            &sql,
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND application_name = 'gateway'",
        )
        .await
            > 0
        {
            assert!(start.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A connection the server closed is not handed out again.
        pg.insert_invocations(&[record(1)]).unwrap();
        assert_eq!(count(&sql, "SELECT count(*) FROM invocations").await, 2);
        drop((pg, sql));
    }

    #[tokio::test]
    async fn a_down_server_fails_in_seconds_and_shows_no_password() {
        let start = std::time::Instant::now();
        // Nothing listens on port 1.
        let error = Postgres::open("postgres://u:secret-password@127.0.0.1:1/db")
            .await
            .err()
            .expect("no server");
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "{:?}",
            start.elapsed()
        );
        let text = error.to_string();
        assert!(!text.contains("secret-password"), "{text}");
        assert!(text.contains("connect"), "{text}");

        let error = Postgres::open("postgres://u:secret-password@127.0.0.1:1/db?sslmode=bogus")
            .await
            .err()
            .expect("a bad option");
        assert!(!error.to_string().contains("secret-password"), "{error}");
    }

    #[test]
    fn urls_accept_libpq_options() {
        let (config, trust) =
            parse_url("postgresql://u:p@db.example:6543/gw?sslmode=verify-full&connect_timeout=3")
                .unwrap();
        assert_eq!(config.get_ssl_mode(), SslMode::Require);
        assert_eq!(trust.verify, Verify::Full);
        assert_eq!(trust.roots, Roots::Platform);
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(config.get_dbname(), Some("gw"));
        assert_eq!(config.get_ports(), [6543]);
        assert_eq!(config.get_password(), Some(&b"p"[..]));
        let (_, trust) = parse_url("postgres://u@h/db?sslmode=verify-ca").unwrap();
        assert_eq!(trust.verify, Verify::Chain);
        let (config, trust) = parse_url("postgres://u@h/db").unwrap();
        assert_eq!(config.get_ssl_mode(), SslMode::Prefer);
        assert_eq!(trust.verify, Verify::Nothing);
        // sslrootcert: a file (percent-decoded), or `system`; `require` with a file checks
        // the chain, as libpq does.
        let (config, trust) =
            parse_url("postgres://u@h/db?sslrootcert=/etc/my%20ca.pem&sslmode=require").unwrap();
        assert_eq!(config.get_ssl_mode(), SslMode::Require);
        assert_eq!(
            trust,
            Trust {
                verify: Verify::Chain,
                roots: Roots::File("/etc/my ca.pem".into())
            }
        );
        let (_, trust) =
            parse_url("postgres://u@h/db?sslmode=verify-full&sslrootcert=system").unwrap();
        assert_eq!(trust.roots, Roots::Platform);
        assert_eq!(trust.verify, Verify::Full);
        let (_, trust) = parse_url("postgres://u@h/db?sslrootcert=/ca.pem").unwrap();
        assert_eq!(trust.verify, Verify::Nothing, "prefer checks nothing");
        assert_eq!(config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        let (config, _) = parse_url("postgres://u:hidden@h/db").unwrap();
        assert!(!format!("{config:?}").contains("hidden"));
    }

    #[test]
    fn tls_is_set_up_unless_disabled() {
        let tls = |url: &str| {
            let (config, trust) = parse_url(url).unwrap();
            tls_for(&config, &trust).unwrap()
        };
        assert!(matches!(
            tls("postgres://u@h/db?sslmode=disable"),
            Tls::Plain
        ));
        for mode in ["prefer", "require", "verify-ca", "verify-full"] {
            let url = format!("postgres://u@h/db?sslmode={mode}");
            assert!(matches!(tls(&url), Tls::Rustls(_)), "{mode}");
        }
    }

    /// Against this machine's server when it offers TLS (Debian's self-signed
    /// `localhost` certificate): `require` encrypts, `verify-full` refuses a
    /// certificate that does not name the host.
    #[tokio::test]
    async fn tls_modes_against_the_local_server() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let sql = db.sql().await;
        let offered: String = sql.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        if offered != "on" {
            eprintln!("the local server offers no TLS: only the plain connection is tested");
            drop(sql);
            return;
        }
        let (pg, _) = Postgres::open(&format!("{}?sslmode=require", db.url))
            .await
            .unwrap();
        let encrypted = pg
            .run(|pool| async move {
                let client = connection(&pool).await?;
                let row = client
                    .query_one(
                        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                        &[],
                    )
                    .await?;
                Ok(row.try_get::<_, bool>(0)?)
            })
            .await
            .unwrap();
        assert!(encrypted);
        drop(pg);
        let refused = Postgres::open(&format!(
            "{}?sslmode=verify-full",
            db.url.replace("localhost", "127.0.0.1")
        ))
        .await
        .err()
        .expect("a certificate for localhost is refused for 127.0.0.1");
        assert!(refused.to_string().contains("certificate"), "{refused}");

        // sslrootcert: the server's own (self-signed) certificate as the root.
        let cert_file: String = sql
            .query_one("SHOW ssl_cert_file", &[])
            .await
            .unwrap()
            .get(0);
        if std::fs::read(&cert_file).is_err() {
            eprintln!("cannot read the server's certificate {cert_file}: sslrootcert untested");
            drop(sql);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("server root.pem");
        std::fs::copy(&cert_file, &root).unwrap();
        let with_root = |url: &str, mode: &str, root: &std::path::Path| {
            let root = root.display().to_string().replace(' ', "%20");
            format!("{url}?sslmode={mode}&sslrootcert={root}")
        };
        let by_ip = db.url.replace("localhost", "127.0.0.1");
        let by_name = by_ip.replace("127.0.0.1", "localhost");
        for (url, mode) in [
            (&by_name, "verify-full"),
            (&by_ip, "verify-ca"),
            (&by_ip, "require"),
        ] {
            let opened = Postgres::open(&with_root(url, mode, &root)).await;
            assert!(opened.is_ok(), "{mode}: {:?}", opened.err());
        }
        let refused = Postgres::open(&with_root(&by_ip, "verify-full", &root))
            .await
            .err()
            .expect("the root holds, the name does not");
        assert!(refused.to_string().contains("certificate"), "{refused}");
        // A root that signed nothing of the server's: refused even with `require`.
        let other = dir.path().join("other.pem");
        std::fs::write(&other, OTHER_ROOT).unwrap();
        for mode in ["require", "verify-ca", "verify-full"] {
            let refused = Postgres::open(&with_root(&by_name, mode, &other))
                .await
                .err()
                .unwrap_or_else(|| panic!("{mode}: a root that signed nothing"));
            assert!(
                refused.to_string().contains("certificate"),
                "{mode}: {refused}"
            );
        }
        let missing = Postgres::open(&with_root(
            &by_name,
            "verify-full",
            &dir.path().join("none"),
        ))
        .await
        .err()
        .expect("a missing root file");
        assert!(missing.to_string().contains("sslrootcert"), "{missing}");
        drop(sql);
    }

    /// A CA certificate whose key was thrown away: it signed nothing.
    const OTHER_ROOT: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBvjCCAWWgAwIBAgIUNE9rFZ8F0tOzPAmzqlrxFSXe7WEwCgYIKoZIzj0EAwIw\n\
NDEyMDAGA1UEAwwpZ2F0ZXdheSB0ZXN0czogYSByb290IHRoYXQgc2lnbmVkIG5v\n\
dGhpbmcwIBcNMjYxMTI0MjMyOTU2WhgPMjEyNjEwMzEyMzI5NTZaMDQxMjAwBgNV\n\
BAMMKWdhdGV3YXkgdGVzdHM6IGEgcm9vdCB0aGF0IHNpZ25lZCBub3RoaW5nMFkw\n\
EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAESSVquUfcVRHcYAsrbiklJYdt+2QqXdMv\n\
XZFoIYknTKFD9zQQoFYHmPxkA70RvS2HxKW9w5jN9UuUBar7kWSWP6NTMFEwHQYD\n\
VR0OBBYEFFqLPJpO/uiFGumJGRdFIpaiJ3HSMB8GA1UdIwQYMBaAFFqLPJpO/uiF\n\
GumJGRdFIpaiJ3HSMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIg\n\
TQkY0UT19xhGkOrej0G+mNZpcg3+bm0UgGVKtUtP+dwCIHQRwB0Jg/kQRAO7/HOj\n\
nKr0vGGrjVCqMvuuJBV/j+aG\n\
-----END CERTIFICATE-----\n";

    fn limits(rpm: u32, tpm: u64, daily: f64, monthly: f64) -> LimitSet {
        LimitSet {
            rpm: Some(rpm),
            tpm: Some(tpm),
            daily_budget_usd: Some(daily),
            monthly_budget_usd: Some(monthly),
        }
    }

    #[tokio::test]
    async fn a_v1_database_migrates_to_v2_and_keeps_its_keys_and_records() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let sql = db.sql().await;
        sql.batch_execute(MIGRATIONS[0]).await.unwrap();
        sql.batch_execute(
            "CREATE TABLE gateway_schema (version BIGINT NOT NULL);
             INSERT INTO gateway_schema (version) VALUES (1);
             INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
             INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
                created_at, duration_ms)
                VALUES ('0190b3a2-0000-7000-8000-000000000001', 'p1', false, 'success', 200,
                        0.5, 10, 1);",
        )
        .await
        .unwrap();
        sql.execute(
            "INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
             VALUES ($1, 'gw_0123456789ab', 'p1', 6)",
            &[&&[7u8; 32][..]],
        )
        .await
        .unwrap();

        let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
        assert_eq!(
            migrated,
            Migrated {
                from: 1,
                to: MIGRATIONS.len() as i64
            }
        );
        assert_eq!(
            pg.find_key(&[7; 32]).await.unwrap(),
            Some(KeyRecord {
                project_id: "p1".into(),
                prefix: "gw_0123456789ab".into(),
                limits: LimitSet::default(),
                project_limits: LimitSet::default(),
                scope: KeyScope::default(),
            })
        );
        assert_eq!(
            pg.projects().await.unwrap(),
            [Project {
                id: "p1".into(),
                name: "old".into(),
                created_at_ms: 5,
                limits: LimitSet::default(),
            }]
        );
        let id = Uuid::parse_str("0190b3a2-0000-7000-8000-000000000001").unwrap();
        let old = pg.invocation(&id).await.unwrap().unwrap();
        assert_eq!((old.key_prefix, old.cost_usd), (None, Some(0.5)));
        assert!(old.attempts.is_empty());
        assert_eq!(
            pg.spent_since(&Subject::Project("p1"), 0).await.unwrap(),
            0.5
        );
        assert_eq!(
            pg.spent_since(&Subject::Key("gw_0123456789ab"), 0)
                .await
                .unwrap(),
            0.0
        );
        drop((pg, sql));
    }

    #[tokio::test]
    async fn project_limits_round_trip_and_partial_updates_keep_the_rest() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let first = pg.create_project("first").await.unwrap();
        let second = pg.create_project("second").await.unwrap();
        assert_eq!(pg.project(&first.id).await.unwrap(), Some(first.clone()));
        assert_eq!(pg.project("nope").await.unwrap(), None);
        assert_eq!(
            pg.projects().await.unwrap(),
            [first.clone(), second.clone()]
        );

        let set = pg
            .update_project_limits(
                &first.id,
                &LimitUpdate::replace(limits(60, 1000, 1.5, 20.0)),
            )
            .await
            .unwrap();
        assert_eq!(set, limits(60, 1000, 1.5, 20.0));
        assert_eq!(pg.project(&first.id).await.unwrap().unwrap().limits, set);
        assert_eq!(
            pg.project(&second.id).await.unwrap().unwrap().limits,
            LimitSet::default()
        );
        let partial = LimitUpdate {
            tpm: Some(5000),
            ..LimitUpdate::default()
        };
        assert_eq!(
            pg.update_project_limits(&first.id, &partial).await.unwrap(),
            limits(60, 5000, 1.5, 20.0)
        );
        let clear = LimitUpdate {
            rpm: Some(0),
            daily_budget_usd: Some(0.0),
            ..LimitUpdate::default()
        };
        let expected = LimitSet {
            rpm: None,
            daily_budget_usd: None,
            ..limits(60, 5000, 1.5, 20.0)
        };
        assert_eq!(
            pg.update_project_limits(&first.id, &clear).await.unwrap(),
            expected
        );
        assert_eq!(
            pg.project(&first.id).await.unwrap().unwrap().limits,
            expected
        );
        let sql = db.sql().await;
        assert_eq!(
            count(&sql, "SELECT count(*) FROM projects WHERE rpm IS NULL").await,
            2,
            "a cleared limit is NULL, not 0"
        );
        assert!(matches!(
            pg.update_project_limits("nope", &partial).await,
            Err(StoreError::UnknownProject(id)) if id == "nope"
        ));

        // Values no valid limit (SQL by hand) read as no limit.
        sql.execute(
            "UPDATE projects SET rpm = -5, tpm = 0, daily_budget_usd = 'NaN',
                monthly_budget_usd = -1 WHERE id = $1",
            &[&first.id],
        )
        .await
        .unwrap();
        assert_eq!(
            pg.project(&first.id).await.unwrap().unwrap().limits,
            LimitSet::default()
        );
        drop((pg, sql));
    }

    #[tokio::test]
    async fn key_limits_round_trip_and_name_exactly_one_live_key() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let project = pg.create_project("p").await.unwrap();
        let spec = KeySpec {
            limits: LimitSet {
                rpm: Some(0),
                ..limits(10, 100, 1.0, 2.0)
            },
            scope: KeyScope::default(),
        };
        pg.insert_key(&project.id, "gw_shared0000001", &[1; 32], &spec)
            .await
            .unwrap();
        pg.insert_key(
            &project.id,
            "gw_shared0000002",
            &[2; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
        let expected = LimitSet {
            rpm: None,
            ..limits(10, 100, 1.0, 2.0)
        };
        assert_eq!(
            pg.find_key(&[1; 32]).await.unwrap().unwrap().limits,
            expected
        );
        let update = LimitUpdate {
            rpm: Some(30),
            monthly_budget_usd: Some(0.0),
            ..LimitUpdate::default()
        };
        let (prefix, now) = pg
            .update_key_limits(&KeyMatch::of("gw_shared0000001"), &update)
            .await
            .unwrap();
        assert_eq!(prefix, "gw_shared0000001");
        let expected = LimitSet {
            rpm: Some(30),
            monthly_budget_usd: None,
            ..expected
        };
        assert_eq!(now, expected);
        assert_eq!(
            pg.find_key(&[1; 32]).await.unwrap().unwrap().limits,
            expected
        );
        assert_eq!(
            pg.find_key(&[2; 32]).await.unwrap().unwrap().limits,
            LimitSet::default()
        );
        let (prefix, now) = pg
            .update_key_limits(&KeyMatch::Hash([2; 32]), &update)
            .await
            .unwrap();
        assert_eq!((prefix.as_str(), now.rpm), ("gw_shared0000002", Some(30)));

        let error = pg
            .update_key_limits(&KeyMatch::of("gw_shared"), &update)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::AmbiguousKey { prefix, count: 2 } if prefix == "gw_shared"),
            "{error}"
        );
        let error = pg
            .update_key_limits(&KeyMatch::of("gw%shared"), &update)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::UnknownKey(shown) if shown == "gw%shared"),
            "{error}"
        );
        assert_eq!(pg.revoke(&KeyMatch::Hash([2; 32])).await.unwrap(), 1);
        let (prefix, _) = pg
            .update_key_limits(&KeyMatch::of("gw_shared"), &update)
            .await
            .unwrap();
        assert_eq!(prefix, "gw_shared0000001");
        assert!(matches!(
            pg.update_key_limits(&KeyMatch::Hash([2; 32]), &update)
                .await,
            Err(StoreError::UnknownKey(_))
        ));
        drop(pg);
    }

    /// The rpm limit of key `[9; 32]`'s project, as `pg` serves it.
    async fn rpm(pg: &Postgres) -> Option<u32> {
        let record = pg.find_key(&[9; 32]).await.unwrap().unwrap();
        record.project_limits.rpm
    }

    #[tokio::test]
    async fn a_limit_change_through_another_replica_is_seen_within_a_second() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let (first, second) = (open(&db).await, open(&db).await);
        wait_until_listening(&first).await;
        let project = first.create_project("p").await.unwrap();
        let sql = db.sql().await;
        // Behind the store's back, so that no notification of it can empty
        // the cache in the middle of what follows.
        sql.execute(
            "INSERT INTO api_keys (key_hash, prefix, project_id, created_at)
             VALUES ($1, 'gw_0123456789ab', $2, 0)",
            &[&&[9u8; 32][..], &project.id],
        )
        .await
        .unwrap();
        assert_eq!(rpm(&first).await, None);
        // Cached: a change behind the store's back (no NOTIFY) goes unseen.
        sql.execute("UPDATE projects SET rpm = 1", &[])
            .await
            .unwrap();
        assert_eq!(rpm(&first).await, None);

        let set = LimitUpdate {
            rpm: Some(7),
            ..LimitUpdate::default()
        };
        second
            .update_project_limits(&project.id, &set)
            .await
            .unwrap();
        // At once on the replica that made it.
        assert_eq!(rpm(&second).await, Some(7));
        let start = std::time::Instant::now();
        while rpm(&first).await != Some(7) {
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "the other replica still used the old limit after 1s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        eprintln!(
            "the other replica saw the limit after {:?}",
            start.elapsed()
        );
        drop((first, second, sql));
    }

    #[tokio::test]
    async fn key_scopes_and_expiry_round_trip() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let project = pg.create_project("p").await.unwrap();
        let scope = KeyScope {
            routes: vec!["openai".into(), "odd \"route\"".into()],
            models: vec!["anthropic/claude-3-5-haiku".into()],
            expires_at_ms: Some(1_900_000_000_000),
        };
        let spec = KeySpec {
            limits: LimitSet::default(),
            scope: scope.clone(),
        };
        pg.insert_key(&project.id, "gw_scoped0000001", &[1; 32], &spec)
            .await
            .unwrap();
        pg.insert_key(
            &project.id,
            "gw_open000000001",
            &[2; 32],
            &KeySpec::default(),
        )
        .await
        .unwrap();
        assert_eq!(pg.find_key(&[1; 32]).await.unwrap().unwrap().scope, scope);
        assert_eq!(
            pg.find_key(&[2; 32]).await.unwrap().unwrap().scope,
            KeyScope::default()
        );
        let sql = db.sql().await;
        assert_eq!(
            count(
                &sql,
                "SELECT count(*) FROM api_keys WHERE routes IS NULL AND models IS NULL
                 AND expires_at IS NULL"
            )
            .await,
            1
        );
        drop((pg, sql));
    }

    fn spend(project: &str, key: Option<&str>, cost: Option<f64>, at: i64) -> Invocation {
        Invocation {
            project_id: Some(project.into()),
            key_prefix: key.map(str::to_owned),
            status: InvocationStatus::Success,
            http_status: 200,
            usage: cost.map(|_| TokenUsage {
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                ..TokenUsage::default()
            }),
            cost_usd: cost,
            ..Invocation::begun(Uuid::now_v7(), at)
        }
    }

    #[tokio::test]
    async fn spend_and_usage_add_up_the_period_of_one_subject() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        pg.insert_invocations(&[
            spend("a", Some("gw_a1"), Some(0.25), 1_000),
            spend("a", Some("gw_a1"), Some(0.5), 2_000),
            spend("a", Some("gw_a2"), Some(0.125), 2_000),
            spend("a", Some("gw_a2"), None, 3_000),
            spend("a", Some("gw_a1"), Some(8.0), 999),
            spend("b", Some("gw_b1"), Some(4.0), 2_000),
        ])
        .unwrap();
        let spent = |subject: Subject<'static>, since: i64| {
            let pg = &pg;
            async move { pg.spent_since(&subject, since).await.unwrap() }
        };
        assert_eq!(spent(Subject::Project("a"), 1_000).await, 0.875);
        assert_eq!(spent(Subject::Project("a"), 0).await, 8.875);
        assert_eq!(spent(Subject::Project("b"), 1_000).await, 4.0);
        assert_eq!(spent(Subject::Key("gw_a1"), 1_000).await, 0.75);
        assert_eq!(spent(Subject::Key("gw_a2"), 1_000).await, 0.125);
        assert_eq!(spent(Subject::Key("gw_a2"), 2_500).await, 0.0);
        assert_eq!(spent(Subject::Key("nobody"), 0).await, 0.0);
        assert_eq!(
            pg.usage_since("a", 1_000).await.unwrap(),
            UsageTotals {
                requests: 4,
                prompt_tokens: 30,
                completion_tokens: 15,
                total_tokens: 45,
                cost_usd: 0.875,
            }
        );
        assert_eq!(
            pg.usage_since("a", 2_500).await.unwrap(),
            UsageTotals {
                requests: 1,
                ..UsageTotals::default()
            }
        );
        assert_eq!(
            pg.usage_since("nobody", 0).await.unwrap(),
            UsageTotals::default()
        );
        drop(pg);
    }

    fn attempts() -> Vec<Attempt> {
        vec![
            Attempt {
                route: "primary".into(),
                target: Some("a.example:8443".into()),
                status: Some(503),
                error: Some("upstream".into()),
                duration_ms: 12,
            },
            Attempt {
                route: "primary".into(),
                target: None,
                status: None,
                error: Some("connection \"refused\"\n".into()),
                duration_ms: 0,
            },
            Attempt {
                route: "fallback".into(),
                target: Some("b.example".into()),
                status: Some(200),
                error: None,
                duration_ms: i64::MAX,
            },
        ]
    }

    #[tokio::test]
    async fn attempts_that_do_not_read_as_attempts_read_as_none() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let record = Invocation {
            attempts: attempts(),
            ..Invocation::begun(Uuid::now_v7(), 1)
        };
        pg.insert_invocations(std::slice::from_ref(&record))
            .unwrap();
        let sql = db.sql().await;
        for value in [
            r#"{"route": "r"}"#,
            r#"[{"route": "r"}]"#,
            r#"[{"route": 1, "duration_ms": 1}]"#,
            r#""text""#,
            "null",
            "42",
        ] {
            sql.execute(
                "UPDATE invocations SET attempts = $1::text::jsonb WHERE id = $2",
                &[&value, &record.id.to_string()],
            )
            .await
            .unwrap();
            let read = pg.invocation(&record.id).await.unwrap().unwrap();
            assert!(read.attempts.is_empty(), "{value}");
            assert_eq!(read.id, record.id);
        }
        drop((pg, sql));
    }

    #[tokio::test]
    async fn a_v2_database_migrates_to_v3_and_keeps_its_records() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let sql = db.sql().await;
        // Schema v2 (before attempts): the first two migrations.
        sql.batch_execute(MIGRATIONS[0]).await.unwrap();
        sql.batch_execute(MIGRATIONS[1]).await.unwrap();
        sql.batch_execute(
            "CREATE TABLE gateway_schema (version BIGINT NOT NULL);
             INSERT INTO gateway_schema (version) VALUES (2);
             INSERT INTO projects (id, name, created_at) VALUES ('p1', 'old', 5);
             INSERT INTO invocations (id, project_id, stream, status, http_status, cost_usd,
                created_at, duration_ms, response, key_prefix)
                VALUES ('0190b3a2-0000-7000-8000-000000000001', 'p1', false, 'success', 200,
                        0.5, 10, 1, 'kept', 'gw_0123456789ab');",
        )
        .await
        .unwrap();

        let (pg, migrated) = Postgres::open(&db.url).await.unwrap();
        assert_eq!(migrated, Migrated { from: 2, to: 3 });
        assert_eq!(MIGRATIONS.len(), 3);
        let id = Uuid::parse_str("0190b3a2-0000-7000-8000-000000000001").unwrap();
        let old = pg.invocation(&id).await.unwrap().unwrap();
        assert_eq!(
            (
                old.project_id.as_deref(),
                old.key_prefix.as_deref(),
                old.response.as_deref(),
                old.cost_usd
            ),
            (Some("p1"), Some("gw_0123456789ab"), Some("kept"), Some(0.5))
        );
        assert!(old.attempts.is_empty());
        let new = Invocation {
            attempts: attempts(),
            ..Invocation::begun(Uuid::now_v7(), 20)
        };
        pg.insert_invocations(std::slice::from_ref(&new)).unwrap();
        assert_eq!(pg.invocation(&new.id).await.unwrap(), Some(new));
        assert_eq!(
            pg.spent_since(&Subject::Project("p1"), 0).await.unwrap(),
            0.5
        );
        assert_eq!(
            count(&sql, "SELECT max(version) FROM gateway_schema").await,
            3
        );
        drop((pg, sql));
    }

    #[tokio::test]
    async fn usage_reads_exactly_what_sqlite_reads_for_the_same_records() {
        use super::report::fixture;
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let dir = tempfile::tempdir().unwrap();
        let (sqlite, _) = crate::store::sqlite::Sqlite::open(&dir.path().join("g.db")).unwrap();
        let records = fixture::records();
        pg.insert_invocations(&records).unwrap();
        sqlite.insert_invocations(&records).unwrap();
        for (range, by) in fixture::cases() {
            let from_pg = pg.usage(&range, &by).await.unwrap();
            assert_eq!(
                from_pg,
                sqlite.usage(&range, &by).unwrap(),
                "{range:?} by {by:?}"
            );
        }
        // A range of more durations than one fetch of the portal.
        let many: Vec<Invocation> = (0..(DURATIONS_PER_FETCH as i64 + 7))
            .map(|n| Invocation {
                model: Some(if n % 2 == 0 { "even" } else { "odd" }.into()),
                duration_ms: n,
                ..Invocation::begun(Uuid::now_v7(), 1)
            })
            .collect();
        pg.insert_invocations(&many).unwrap();
        let range = RecordRange {
            until_ms: Some(2),
            ..RecordRange::default()
        };
        let rows = pg.usage(&range, &[GroupBy::Model]).await.unwrap();
        let n = many.len() as i64;
        let picked: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.group[0].clone(),
                    r.requests,
                    r.p50_duration_ms,
                    r.p95_duration_ms,
                )
            })
            .collect();
        // Evens 0, 2, ..., 10006 (5004 of them), odds 1, 3, ..., 10005 (5003).
        let (evens, odds) = ((n + 1) / 2, n / 2);
        let rank =
            |percent: u64, count: i64| report::nearest_rank(percent, count as u64).unwrap() as i64;
        assert_eq!(
            picked,
            [
                (
                    Some("even".to_owned()),
                    evens as u64,
                    Some(2 * (rank(50, evens) - 1)),
                    Some(2 * (rank(95, evens) - 1))
                ),
                (
                    Some("odd".to_owned()),
                    odds as u64,
                    Some(2 * rank(50, odds) - 1),
                    Some(2 * rank(95, odds) - 1)
                ),
            ]
        );
    }

    #[tokio::test]
    async fn an_export_reads_each_record_once_oldest_first_across_pages_of_equal_times() {
        let Some(db) = TestDb::create().await else {
            return;
        };
        let pg = open(&db).await;
        let mut records: Vec<Invocation> = (0..26)
            .map(|n: i64| Invocation {
                project_id: Some(if n % 3 == 0 { "a" } else { "b" }.into()),
                request: Some("body".into()),
                ..Invocation::begun(
                    Uuid::from_u128(
                        (n as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C834),
                    ),
                    1_000 + n / 4,
                )
            })
            .collect();
        pg.insert_invocations(&records.iter().rev().cloned().collect::<Vec<_>>())
            .unwrap();
        let (mut read, mut after) = (Vec::new(), None);
        let range = RecordRange::default();
        loop {
            let page = pg
                .invocations_page(&range, after.as_ref(), true, 4)
                .await
                .unwrap();
            read.extend(page.records);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // Ties go by id in the database's collation, not necessarily byte order: the records
        // are compared as a set, and their times' order.
        assert_eq!(read.len(), records.len());
        let times: Vec<i64> = read.iter().map(|r| r.created_at_ms).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        records.sort_by_key(|r| r.id);
        read.sort_by_key(|r| r.id);
        assert_eq!(read, records);
        let page = pg
            .invocations_page(
                &RecordRange {
                    project_id: Some("a".into()),
                    ..range
                },
                None,
                false,
                100,
            )
            .await
            .unwrap();
        assert_eq!(page.records.len(), 9);
        assert!(page.next.is_none());
        assert!(page.records.iter().all(|r| r.request.is_none()));
    }
}
