//! SQLite's schema and its upgrades. Its own, not PostgreSQL's: the types differ (BLOB and
//! BYTEA, INTEGER and BOOLEAN, JSON text and JSONB or `TEXT[]`), and so does its history (the
//! created_at index came in a version of its own).

use rusqlite::Connection;

use crate::store::{Migrated, StoreError};

/// Each entry upgrades the schema by one version (`PRAGMA user_version`). Append only.
pub(in crate::store) const MIGRATIONS: &[&str] = &[
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
    // Limits of projects and keys, keys' scopes, and spend counted per key.
    // Limits: NULL is none. routes, models: a JSON array of strings, NULL
    // when empty. expires_at: Unix ms, NULL is never.
    r#"
    ALTER TABLE projects ADD COLUMN rpm INTEGER;
    ALTER TABLE projects ADD COLUMN tpm INTEGER;
    ALTER TABLE projects ADD COLUMN daily_budget_usd REAL;
    ALTER TABLE projects ADD COLUMN monthly_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN rpm INTEGER;
    ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
    ALTER TABLE api_keys ADD COLUMN daily_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN monthly_budget_usd REAL;
    ALTER TABLE api_keys ADD COLUMN routes TEXT;
    ALTER TABLE api_keys ADD COLUMN models TEXT;
    ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
    ALTER TABLE invocations ADD COLUMN key_prefix TEXT;
    CREATE INDEX invocations_key ON invocations(key_prefix, created_at);
"#,
    // Each upstream attempt of a request that took more than one (retries, fallbacks):
    // a JSON array of `Attempt`s, NULL when empty.
    r#"
    ALTER TABLE invocations ADD COLUMN attempts TEXT;
"#,
    // The Responses API's answers kept for later requests (`store: true`): the response
    // object as answered and the conversation a `previous_response_id` continues (JSON
    // texts). created_at: Unix ms, indexed for retention.
    r#"
    CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        body TEXT NOT NULL,
        context TEXT NOT NULL
    );
    CREATE INDEX responses_created ON responses(created_at);
"#,
    // The prompt's image and audio tokens (both part of prompt_tokens), where the provider
    // tells them; NULL otherwise.
    r#"
    ALTER TABLE invocations ADD COLUMN image_prompt_tokens INTEGER;
    ALTER TABLE invocations ADD COLUMN audio_prompt_tokens INTEGER;
"#,
    // Guards. projects.guards: the ids of the guards a project's requests go through, in
    // order (a JSON array of strings, NULL when none). invocations.guards: what each guard
    // decided of the request or its answer (a JSON array of `GuardOutcome`s, NULL when none).
    r#"
    ALTER TABLE projects ADD COLUMN guards TEXT;
    ALTER TABLE invocations ADD COLUMN guards TEXT;
"#,
    // The response cache. cache: how it served the request (hit, miss, skip), NULL when the
    // route has none. saved_cost_usd: on a hit, what the answer cost when it was stored (the
    // hit's own cost_usd is 0), NULL otherwise.
    r#"
    ALTER TABLE invocations ADD COLUMN cache TEXT;
    ALTER TABLE invocations ADD COLUMN saved_cost_usd REAL;
"#,
    // The admin console's sessions signed out before they expired: each cookie's SHA-256, and
    // when the cookie expires (Unix ms), until which the row is kept.
    r#"
    CREATE TABLE console_signouts (
        session_hash BLOB PRIMARY KEY,
        expires_at INTEGER NOT NULL
    );
"#,
    // The route and model a kept response was made with (its record's), which a key's scope
    // is held to: filled from the records of those kept before; NULL where the record is
    // gone (such a response is then only for keys of every route and model).
    r#"
    ALTER TABLE responses ADD COLUMN route TEXT;
    ALTER TABLE responses ADD COLUMN model TEXT;
    UPDATE responses
       SET route = (SELECT i.route FROM invocations i WHERE i.id = responses.invocation_id),
           model = (SELECT i.model FROM invocations i WHERE i.id = responses.invocation_id)
     WHERE EXISTS (SELECT 1 FROM invocations i WHERE i.id = responses.invocation_id);
"#,
    // Each kept response keeps its own turn only (its `context`), with the response it
    // continued (`parent`) and the bytes of its whole conversation; one kept before is its
    // conversation's only turn.
    r#"
    ALTER TABLE responses ADD COLUMN parent TEXT;
    ALTER TABLE responses ADD COLUMN conversation_bytes INTEGER NOT NULL DEFAULT 0;
    UPDATE responses SET conversation_bytes = length(CAST(context AS BLOB));
"#,
    // A key's `/mcp` tools (globs of SERVER__TOOL, a JSON list), NULL when it may use them all.
    r#"
    ALTER TABLE api_keys ADD COLUMN tools TEXT;
"#,
    // A project's `/mcp` tools (globs of SERVER__TOOL, a JSON list), NULL when its keys may
    // use them all (each key's own tools still apply).
    r#"
    ALTER TABLE projects ADD COLUMN tools TEXT;
"#,
    // The search units a rerank was billed by, where its provider bills them; NULL otherwise.
    r#"
    ALTER TABLE invocations ADD COLUMN search_units INTEGER;
"#,
    // The images a model made; NULL for every other call.
    r#"
    ALTER TABLE invocations ADD COLUMN images INTEGER;
"#,
    // The seconds of audio a transcription was billed by, where its provider bills them.
    r#"
    ALTER TABLE invocations ADD COLUMN audio_seconds INTEGER;
"#,
    // The input's characters a speech was billed by, where its provider bills them.
    r#"
    ALTER TABLE invocations ADD COLUMN characters INTEGER;
"#,
    // Personal admin tokens (only their SHA-256, hex, and their first 16 characters are
    // kept) and the audit log of changes and sign-ins, append-only: an UPDATE of an event is
    // refused by the database itself; retention deletes old ones.
    r#"
    CREATE TABLE admin_tokens (
        token_hash TEXT PRIMARY KEY,
        prefix TEXT NOT NULL,
        name TEXT NOT NULL,
        role TEXT NOT NULL,
        project_id TEXT,
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER,
        last_used_at INTEGER
    );
    CREATE INDEX admin_tokens_prefix ON admin_tokens (prefix);
    CREATE TABLE audit_events (
        id TEXT PRIMARY KEY,
        at INTEGER NOT NULL,
        actor TEXT NOT NULL,
        role TEXT NOT NULL,
        via TEXT NOT NULL,
        address TEXT,
        action TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        target TEXT,
        before_json TEXT,
        after_json TEXT,
        outcome TEXT NOT NULL,
        status INTEGER NOT NULL,
        request_id TEXT
    );
    CREATE INDEX audit_events_at ON audit_events (at, id);
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
    BEGIN
        SELECT RAISE(ABORT, 'audit events are append-only');
    END;
"#,
    // The console's users an owner gave roles (besides those their groups hold by
    // `[oidc.roles]`): one row a role, `project_id` empty for a role held everywhere.
    r#"
    CREATE TABLE users (
        email TEXT NOT NULL,
        role TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        created_by TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (email, role, project_id)
    );
"#,
    // Files uploaded to `/v1/files` (`store::files`): a row each, `whole` 0 while its upload
    // runs (`bytes` is then what it reserves of the project's quota), and its bytes in chunks.
    r#"
    CREATE TABLE files (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        filename TEXT NOT NULL,
        purpose TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        whole INTEGER NOT NULL
    );
    CREATE INDEX files_project ON files (project_id, id);
    CREATE INDEX files_expires_at ON files (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX files_uploading ON files (created_at) WHERE whole = 0;
    CREATE TABLE file_chunks (
        file_id TEXT NOT NULL REFERENCES files (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (file_id, seq)
    );
"#,
    // Batches (`store::batches`): a row each, and their lines, which runners lease; the batch
    // and line a record was made for.
    r#"
    CREATE TABLE batches (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        key_hash BLOB NOT NULL,
        endpoint TEXT NOT NULL,
        input_file_id TEXT NOT NULL,
        completion_window TEXT NOT NULL,
        metadata TEXT,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        in_progress_at INTEGER,
        expires_at INTEGER NOT NULL,
        finalizing_at INTEGER,
        completed_at INTEGER,
        failed_at INTEGER,
        expired_at INTEGER,
        cancelling_at INTEGER,
        cancelled_at INTEGER,
        finishing_at INTEGER,
        output_file_id TEXT,
        error_file_id TEXT,
        errors TEXT,
        output_expires_secs INTEGER,
        total INTEGER NOT NULL,
        completed INTEGER,
        failed INTEGER,
        closed INTEGER
    );
    CREATE INDEX batches_project ON batches (project_id, id);
    CREATE INDEX batches_running ON batches (id)
        WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing');
    CREATE TABLE batch_lines (
        batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        custom_id TEXT NOT NULL,
        body TEXT NOT NULL,
        state INTEGER NOT NULL,
        ok INTEGER NOT NULL,
        lease_token TEXT,
        lease_until INTEGER,
        result TEXT,
        error_code TEXT,
        PRIMARY KEY (batch_id, seq)
    );
    CREATE INDEX batch_lines_pending ON batch_lines (batch_id, seq) WHERE state = 0;
    CREATE INDEX batch_lines_leased ON batch_lines (lease_token) WHERE state = 0;
    ALTER TABLE invocations ADD COLUMN batch_id TEXT;
    ALTER TABLE invocations ADD COLUMN custom_id TEXT;
"#,
];

/// Applies the migrations the database lacks, each in its own transaction
/// (which also holds off another process migrating at the same time: SQLite
/// takes the write lock at the first statement, and the version is read again
/// under it).
pub(super) fn migrate(conn: &mut Connection) -> Result<Migrated, StoreError> {
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
