//! The embedded SQLite backend.
//!
//! WAL mode lets the request path read (key lookups) while the invocation
//! writer commits batches on its own connection.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Row, params};
use uuid::Uuid;

use super::key_cache::KeyCache;
use super::{
    Invocation, InvocationFilter, InvocationStatus, KeyRecord, Migrated, Project, StoreError,
    TokenUsage, now_ms,
};

/// Each entry upgrades the schema by one version (`PRAGMA user_version`). Append only.
const MIGRATIONS: &[&str] = &[
    r#"
    CREATE TABLE projects (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE api_keys (
        key_hash BLOB PRIMARY KEY,
        prefix TEXT NOT NULL,
        project_id TEXT NOT NULL REFERENCES projects(id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
    );
    CREATE INDEX api_keys_prefix ON api_keys(prefix);
    CREATE TABLE invocations (
        id TEXT PRIMARY KEY,
        project_id TEXT,
        user_id TEXT,
        route TEXT,
        plugin TEXT,
        model TEXT,
        type TEXT,
        stream INTEGER NOT NULL,
        status TEXT NOT NULL,
        http_status INTEGER NOT NULL,
        error TEXT,
        provider_error TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        total_tokens INTEGER,
        cached_prompt_tokens INTEGER,
        cache_creation_tokens INTEGER,
        reasoning_tokens INTEGER,
        cost_usd REAL,
        created_at INTEGER NOT NULL,
        duration_ms INTEGER NOT NULL,
        request TEXT,
        response TEXT
    );
    CREATE INDEX invocations_project ON invocations(project_id, created_at);
    CREATE INDEX invocations_user ON invocations(user_id, created_at);
"#,
    // Record retention finds the oldest records by age alone.
    r#"
    CREATE INDEX IF NOT EXISTS invocations_created ON invocations(created_at);
"#,
];

pub(super) struct Sqlite {
    /// Key lookups, project/key administration and invocation reads.
    reader: Mutex<Connection>,
    /// Invocation batches only, so a large batch never delays a key lookup's lock.
    writer: Mutex<Connection>,
    /// Record retention's deletes, opened on first use: a batch of deletes holds
    /// neither the request path's nor the invocation writer's lock.
    pruner: Mutex<Option<Connection>>,
    path: PathBuf,
    keys: KeyCache,
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // With WAL, NORMAL loses at most the last commits on power loss, never consistency.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock cannot leave SQLite inconsistent (transactions roll back).
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sqlite {
    pub(super) fn open(path: &Path) -> Result<(Sqlite, Migrated), StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Directory(dir.display().to_string(), e))?;
        }
        let mut conn = open_connection(path)?;
        let migrated = migrate(&mut conn)?;
        let db = Sqlite {
            reader: Mutex::new(conn),
            writer: Mutex::new(open_connection(path)?),
            pruner: Mutex::new(None),
            path: path.to_owned(),
            keys: KeyCache::open(path),
        };
        Ok((db, migrated))
    }

    pub(super) fn create_project(&self, name: &str) -> Result<Project, StoreError> {
        let id = Uuid::now_v7().to_string();
        lock(&self.reader).execute(
            "INSERT INTO projects (id, name, created_at) VALUES (?1, ?2, ?3)",
            params![id, name, now_ms()],
        )?;
        Ok(Project {
            id,
            name: name.to_owned(),
        })
    }

    pub(super) fn project_count(&self) -> Result<u64, StoreError> {
        let count: i64 =
            lock(&self.reader).query_row("SELECT count(*) FROM projects", [], |row| row.get(0))?;
        Ok(count.max(0) as u64)
    }

    pub(super) fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
    ) -> Result<(), StoreError> {
        let conn = lock(&self.reader);
        let exists: bool = conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM projects WHERE id = ?1)",
            [project_id],
            |row| row.get(0),
        )?;
        if !exists {
            return Err(StoreError::UnknownProject(project_id.to_owned()));
        }
        conn.execute(
            "INSERT INTO api_keys (key_hash, prefix, project_id, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![&hash[..], prefix, project_id, now_ms()],
        )?;
        drop(conn);
        self.keys_changed();
        Ok(())
    }

    /// After a key change commits: running gateways must not keep serving from their caches.
    fn keys_changed(&self) {
        if let Err(e) = self.keys.keys_changed() {
            tracing::error!(
                "the key change is stored, but running gateways were not told \
                 ({e}); they see it within {}s",
                super::key_cache::MAX_AGE.as_secs()
            );
        }
    }

    pub(super) fn revoke_by_prefix(&self, prefix: &str) -> Result<usize, StoreError> {
        let escaped = prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let pattern = format!("{escaped}%");
        let revoked = lock(&self.reader).execute(
            "UPDATE api_keys SET revoked_at = ?1 WHERE prefix LIKE ?2 ESCAPE '\\' AND revoked_at IS NULL",
            params![now_ms(), pattern],
        )?;
        if revoked > 0 {
            self.keys_changed();
        }
        Ok(revoked)
    }

    pub(super) fn revoke_by_hash(&self, hash: &[u8; 32]) -> Result<usize, StoreError> {
        let revoked = lock(&self.reader).execute(
            "UPDATE api_keys SET revoked_at = ?1 WHERE key_hash = ?2 AND revoked_at IS NULL",
            params![now_ms(), &hash[..]],
        )?;
        if revoked > 0 {
            self.keys_changed();
        }
        Ok(revoked)
    }

    pub(super) fn find_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        self.keys.find(hash, || {
            let conn = lock(&self.reader);
            let mut stmt = conn.prepare_cached(
                "SELECT project_id FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL",
            )?;
            Ok(stmt
                .query_row([&hash[..]], |row| {
                    Ok(KeyRecord {
                        project_id: row.get(0)?,
                    })
                })
                .optional()?)
        })
    }

    pub(super) fn insert_invocations(&self, batch: &[Invocation]) -> Result<(), StoreError> {
        let mut conn = lock(&self.writer);
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT OR IGNORE INTO invocations (id, project_id, user_id, route, plugin, model, type, stream,
                    status, http_status, error, provider_error, prompt_tokens, completion_tokens,
                    total_tokens, cached_prompt_tokens, cache_creation_tokens, reasoning_tokens,
                    cost_usd, created_at, duration_ms, request, response)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19, ?20, ?21, ?22, ?23)",
            )?;
            for inv in batch {
                let usage = inv.usage.as_ref();
                stmt.execute(params![
                    inv.id.to_string(),
                    inv.project_id,
                    inv.user_id,
                    inv.route,
                    inv.plugin,
                    inv.model,
                    inv.kind,
                    inv.stream,
                    inv.status.as_str(),
                    inv.http_status,
                    inv.error,
                    inv.provider_error,
                    usage.map(|u| u.prompt_tokens),
                    usage.map(|u| u.completion_tokens),
                    usage.map(|u| u.total_tokens),
                    usage.and_then(|u| u.cached_prompt_tokens),
                    usage.and_then(|u| u.cache_creation_tokens),
                    usage.and_then(|u| u.reasoning_tokens),
                    inv.cost_usd,
                    inv.created_at_ms,
                    inv.duration_ms,
                    inv.request,
                    inv.response,
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes at most `limit` invocation records created before `cutoff_ms`;
    /// returns how many it deleted.
    pub(super) fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        let mut pruner = self.pruner.lock().unwrap_or_else(|p| p.into_inner());
        let conn = match &mut *pruner {
            Some(conn) => conn,
            empty => empty.insert(open_connection(&self.path)?),
        };
        // The bundled SQLite has no DELETE ... LIMIT; the subquery walks the
        // created_at index and stops at `limit`.
        let mut stmt = conn.prepare_cached(DELETE_OLD_INVOCATIONS)?;
        Ok(stmt.execute(params![cutoff_ms, limit])?)
    }

    pub(super) fn invocation(&self, id: &Uuid) -> Result<Option<Invocation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!("{SELECT_INVOCATION} WHERE id = ?1"))?;
        Ok(stmt
            .query_row([id.to_string()], invocation_from_row)
            .optional()?)
    }

    pub(super) fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        let conn = lock(&self.reader);
        let mut stmt = conn.prepare_cached(&format!(
            "{SELECT_INVOCATION} WHERE (?1 IS NULL OR project_id = ?1) AND (?2 IS NULL OR user_id = ?2)
             ORDER BY created_at DESC, id DESC LIMIT ?3"
        ))?;
        let rows = stmt.query_map(
            params![filter.project_id, filter.user_id, filter.limit],
            invocation_from_row,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

const DELETE_OLD_INVOCATIONS: &str = "DELETE FROM invocations WHERE rowid IN
    (SELECT rowid FROM invocations WHERE created_at < ?1 LIMIT ?2)";

const SELECT_INVOCATION: &str =
    "SELECT id, project_id, user_id, route, plugin, model, type, stream,
    status, http_status, error, provider_error, prompt_tokens, completion_tokens, total_tokens,
    cached_prompt_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, created_at,
    duration_ms, request, response FROM invocations";

fn invocation_from_row(row: &Row<'_>) -> rusqlite::Result<Invocation> {
    let id: String = row.get(0)?;
    let status: String = row.get(8)?;
    let prompt_tokens: Option<u32> = row.get(12)?;
    let usage = match prompt_tokens {
        None => None,
        Some(prompt_tokens) => Some(TokenUsage {
            prompt_tokens,
            completion_tokens: row.get::<_, Option<u32>>(13)?.unwrap_or(0),
            total_tokens: row.get::<_, Option<u32>>(14)?.unwrap_or(0),
            cached_prompt_tokens: row.get(15)?,
            cache_creation_tokens: row.get(16)?,
            reasoning_tokens: row.get(17)?,
        }),
    };
    Ok(Invocation {
        id: Uuid::parse_str(&id).unwrap_or_default(),
        project_id: row.get(1)?,
        user_id: row.get(2)?,
        route: row.get(3)?,
        plugin: row.get(4)?,
        model: row.get(5)?,
        kind: row.get(6)?,
        stream: row.get(7)?,
        status: InvocationStatus::parse(&status),
        http_status: row.get(9)?,
        error: row.get(10)?,
        provider_error: row.get(11)?,
        usage,
        cost_usd: row.get(18)?,
        created_at_ms: row.get(19)?,
        duration_ms: row.get(20)?,
        request: row.get(21)?,
        response: row.get(22)?,
    })
}

/// Applies the migrations the database lacks, each in its own transaction
/// (which also holds off another process migrating at the same time: SQLite
/// takes the write lock at the first statement, and the version is read again
/// under it).
fn migrate(conn: &mut Connection) -> Result<Migrated, StoreError> {
    let known = MIGRATIONS.len() as i64;
    let user_version = |conn: &Connection| -> Result<i64, StoreError> {
        Ok(conn.query_row("PRAGMA user_version", [], |row| row.get(0))?)
    };
    let from = user_version(conn)?;
    let too_new = |found| StoreError::SchemaTooNew {
        backend: "SQLite",
        found,
        known,
    };
    if from > known {
        return Err(too_new(from));
    }
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version = user_version(&tx)?;
        if version > known {
            return Err(too_new(version));
        }
        let Some(migration) = MIGRATIONS.get(version.max(0) as usize) else {
            break;
        };
        tx.execute_batch(migration)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
    Ok(Migrated { from, to: known })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_by_hash_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("sub/g.db")).unwrap();
        let project = db.create_project("p").unwrap();
        let hash = [7u8; 32];
        db.insert_key(&project.id, "gw_abcdef123456", &hash)
            .unwrap();
        assert_eq!(db.find_key(&hash).unwrap().unwrap().project_id, project.id);
        assert_eq!(db.revoke_by_prefix("gw_abcdef").unwrap(), 1);
        assert!(db.find_key(&hash).unwrap().is_none());
        assert!(matches!(
            db.insert_key("nope", "gw_x", &[1; 32]),
            Err(StoreError::UnknownProject(_))
        ));
    }

    #[test]
    fn reopening_does_not_rerun_migrations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(migrated.from, 0);
        db.create_project("p").unwrap();
        let (db, migrated) = Sqlite::open(&path).unwrap();
        assert_eq!(migrated.from, migrated.to);
        assert_eq!(db.project_count().unwrap(), 1);
    }

    #[test]
    fn a_database_of_the_first_schema_gains_the_created_at_index_and_keeps_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO invocations (id, stream, status, http_status, created_at, duration_ms)
                 VALUES ('old', 0, 'success', 200, 5, 1)",
                [],
            )
            .unwrap();
        }
        let (db, _) = Sqlite::open(&path).unwrap();
        let conn = lock(&db.reader);
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .unwrap();
        assert_eq!(version, MIGRATIONS.len() as i64);
        let indexed: bool = conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM sqlite_master
                 WHERE type = 'index' AND name = 'invocations_created')",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert!(indexed);
        let count: i64 = conn
            .query_row("SELECT count(*) FROM invocations", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 1);
    }

    #[test]
    fn deleting_old_records_walks_the_created_at_index() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("g.db")).unwrap();
        let conn = lock(&db.reader);
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {DELETE_OLD_INVOCATIONS}"))
            .unwrap();
        let plan: Vec<String> = stmt
            .query_map(params![0, 10], |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Without the index this is a SCAN of the whole table on every pass,
        // however few records are old.
        assert!(
            plan.iter()
                .any(|step| step.contains("USING COVERING INDEX invocations_created")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN")),
            "{plan:?}"
        );
    }

    #[test]
    fn a_schema_newer_than_the_binary_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db");
        drop(Sqlite::open(&path).unwrap());
        let newer = MIGRATIONS.len() as i64 + 1;
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", newer)
            .unwrap();
        let error = Sqlite::open(&path)
            .err()
            .expect("a newer schema is refused");
        assert!(
            matches!(error, StoreError::SchemaTooNew { found, .. } if found == newer),
            "{error}"
        );
        assert!(error.to_string().contains("newer than this gateway knows"));
    }

    #[test]
    fn a_record_stored_twice_is_kept_once() {
        let dir = tempfile::tempdir().unwrap();
        let (db, _) = Sqlite::open(&dir.path().join("g.db")).unwrap();
        let record = Invocation {
            status: InvocationStatus::Success,
            http_status: 200,
            cost_usd: Some(0.5),
            duration_ms: 1,
            response: Some("first".into()),
            ..Invocation::begun(Uuid::now_v7(), 1)
        };
        db.insert_invocations(std::slice::from_ref(&record))
            .unwrap();
        let again = Invocation {
            response: Some("second".into()),
            ..record.clone()
        };
        db.insert_invocations(&[again]).unwrap();
        assert_eq!(db.invocation(&record.id).unwrap(), Some(record));
    }
}
