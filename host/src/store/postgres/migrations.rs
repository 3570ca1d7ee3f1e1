//! PostgreSQL's schema and its upgrades. Its own, not SQLite's: the types differ (BYTEA, BOOLEAN,
//! JSONB, `TEXT[]`), the prefix index needs `text_pattern_ops`, and it began at SQLite's second
//! version.

use deadpool_postgres::Pool;

use super::connect::connection;
use crate::store::{Migrated, StoreError};

/// Each entry upgrades the schema by one version (the one row of
/// `gateway_schema`). Append only. The first is SQLite's second schema.
pub(in crate::store) const MIGRATIONS: &[&str] = &[
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
    // The Responses API's answers kept for later requests (`store: true`): the response
    // object as answered and the conversation a `previous_response_id` continues (JSON
    // texts: TEXT, not JSONB, so that `GET /v1/responses/{id}` gives back the very text
    // answered). created_at: Unix ms, indexed for retention.
    r#"
    CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        invocation_id TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        body TEXT NOT NULL,
        context TEXT NOT NULL
    );
    CREATE INDEX responses_created ON responses(created_at);
"#,
    // The prompt's image and audio tokens (both part of prompt_tokens), where the provider
    // tells them; NULL otherwise. Nullable without a default: added without rewriting the table.
    r#"
    ALTER TABLE invocations
        ADD COLUMN image_prompt_tokens BIGINT,
        ADD COLUMN audio_prompt_tokens BIGINT;
"#,
    // Guards. projects.guards: the ids of the guards a project's requests go through, in
    // order (NULL when none). invocations.guards: what each guard decided of the request or
    // its answer (a JSON array of `GuardOutcome`s, NULL when none; JSONB, so that an operator
    // can ask which records a guard denied: `guards @> '[{"verdict": "deny"}]'`). Nullable
    // without a default: added without rewriting the tables.
    r#"
    ALTER TABLE projects ADD COLUMN guards TEXT[];
    ALTER TABLE invocations ADD COLUMN guards JSONB;
"#,
    // The response cache. cache: how it served the request (hit, miss, skip), NULL when the
    // route has none. saved_cost_usd: on a hit, what the answer cost when it was stored (the
    // hit's own cost_usd is 0), NULL otherwise. Nullable without a default: added without
    // rewriting the table.
    r#"
    ALTER TABLE invocations
        ADD COLUMN cache TEXT,
        ADD COLUMN saved_cost_usd DOUBLE PRECISION;
"#,
    // The admin console's sessions signed out before they expired: each cookie's SHA-256, and
    // when the cookie expires (Unix ms), until which the row is kept.
    r#"
    CREATE TABLE console_signouts (
        session_hash BYTEA PRIMARY KEY,
        expires_at BIGINT NOT NULL
    );
"#,
    // The route and model a kept response was made with (its record's), which a key's scope
    // is held to: filled from the records of those kept before; NULL where the record is
    // gone (such a response is then only for keys of every route and model).
    r#"
    ALTER TABLE responses
        ADD COLUMN route TEXT,
        ADD COLUMN model TEXT;
    UPDATE responses
       SET route = (SELECT i.route FROM invocations i WHERE i.id = responses.invocation_id),
           model = (SELECT i.model FROM invocations i WHERE i.id = responses.invocation_id)
     WHERE EXISTS (SELECT 1 FROM invocations i WHERE i.id = responses.invocation_id);
"#,
    // Each kept response keeps its own turn only (its `context`), with the response it
    // continued (`parent`) and the bytes of its whole conversation; one kept before is its
    // conversation's only turn.
    r#"
    ALTER TABLE responses
        ADD COLUMN parent TEXT,
        ADD COLUMN conversation_bytes BIGINT NOT NULL DEFAULT 0;
    UPDATE responses SET conversation_bytes = octet_length(context);
"#,
    // A key's `/mcp` tools (globs of SERVER__TOOL), NULL when it may use them all.
    r#"
    ALTER TABLE api_keys ADD COLUMN tools TEXT[];
"#,
    // A project's `/mcp` tools (globs of SERVER__TOOL), NULL when its keys may use them all
    // (each key's own tools still apply). Nullable without a default: added without rewriting
    // the table.
    r#"
    ALTER TABLE projects ADD COLUMN tools TEXT[];
"#,
    // The search units a rerank was billed by, where its provider bills them; NULL otherwise.
    // Nullable without a default: added without rewriting the table.
    r#"
    ALTER TABLE invocations ADD COLUMN search_units BIGINT;
"#,
    // The images a model made; NULL for every other call. Nullable without a default, as
    // search units.
    r#"
    ALTER TABLE invocations ADD COLUMN images BIGINT;
"#,
    // The seconds of audio a transcription was billed by, where its provider bills them.
    r#"
    ALTER TABLE invocations ADD COLUMN audio_seconds BIGINT;
"#,
    // The input's characters a speech was billed by, where its provider bills them.
    r#"
    ALTER TABLE invocations ADD COLUMN characters BIGINT;
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
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        revoked_at BIGINT,
        last_used_at BIGINT
    );
    CREATE INDEX admin_tokens_prefix ON admin_tokens (prefix);
    CREATE TABLE audit_events (
        id TEXT PRIMARY KEY,
        at BIGINT NOT NULL,
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
        status BIGINT NOT NULL,
        request_id TEXT
    );
    CREATE INDEX audit_events_at ON audit_events (at, id);
    CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS
        'BEGIN RAISE EXCEPTION ''audit events are append-only''; END';
    CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
"#,
    // The console's users an owner gave roles (besides those their groups hold by
    // `[oidc.roles]`): one row a role, `project_id` empty for a role held everywhere.
    r#"
    CREATE TABLE users (
        email TEXT NOT NULL,
        role TEXT NOT NULL,
        project_id TEXT NOT NULL DEFAULT '',
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
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
        bytes BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        whole INTEGER NOT NULL
    );
    CREATE INDEX files_project ON files (project_id, id);
    CREATE INDEX files_expires_at ON files (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX files_uploading ON files (created_at) WHERE whole = 0;
    CREATE TABLE file_chunks (
        file_id TEXT NOT NULL REFERENCES files (id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (file_id, seq)
    );
"#,
    // Batches (`store::batches`): a row each, and their lines, which runners lease; the batch
    // and line a record was made for.
    r#"
    CREATE TABLE batches (
        id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL,
        key_hash BYTEA NOT NULL,
        endpoint TEXT NOT NULL,
        input_file_id TEXT NOT NULL,
        completion_window TEXT NOT NULL,
        metadata TEXT,
        status TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        in_progress_at BIGINT,
        expires_at BIGINT NOT NULL,
        finalizing_at BIGINT,
        completed_at BIGINT,
        failed_at BIGINT,
        expired_at BIGINT,
        cancelling_at BIGINT,
        cancelled_at BIGINT,
        finishing_at BIGINT,
        output_file_id TEXT,
        error_file_id TEXT,
        errors TEXT,
        output_expires_secs BIGINT,
        total BIGINT NOT NULL,
        completed BIGINT,
        failed BIGINT,
        closed BIGINT
    );
    CREATE INDEX batches_project ON batches (project_id, id);
    CREATE INDEX batches_running ON batches (id)
        WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing');
    CREATE TABLE batch_lines (
        batch_id TEXT NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        custom_id TEXT NOT NULL,
        body TEXT NOT NULL,
        state BIGINT NOT NULL,
        ok BIGINT NOT NULL,
        lease_token TEXT,
        lease_until BIGINT,
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

pub(super) const BACKEND: &str = "PostgreSQL";
/// Serializes migrations of replicas starting at once ("gateway" in ASCII).
const MIGRATION_LOCK: i64 = 0x0067_6174_6577_6179;

/// Applies the migrations the database lacks, each in its own transaction
/// under an advisory lock (replicas starting at once wait for each other, and
/// read the version again once they hold it).
pub(super) async fn migrate(pool: Pool) -> Result<Migrated, StoreError> {
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
