//! The SQL both backends run, written once.
//!
//! Texts are written with PostgreSQL's placeholders (`$1`); SQLite's (`?1`) are made from them
//! once, on first use. Report queries ([`super::report`]) are built with the same two
//! placeholder forms. What the dialects really disagree on stays with its backend, each place
//! saying why: the migrations (types), how a batch of records is inserted (row by row with
//! `INSERT OR IGNORE` against one statement of arrays with `ON CONFLICT`), how old invocation
//! records are found for deletion (SQLite's `rowid`), how a key's scope lists are stored (JSON
//! text against `TEXT[]`) and how rows are locked for an update (SQLite's `IMMEDIATE`
//! transaction against `FOR UPDATE`).

use std::sync::OnceLock;

use super::report::{self, Cursor, Order, Query, RecordRange, SqlValue};
use super::{AuditFilter, InvocationFilter, KeyMatch};

/// Which backend a statement is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The placeholder of parameter `n` (1-based), as [`super::report`]'s builders take it.
    pub(super) fn placeholder(self) -> fn(usize) -> String {
        match self {
            Dialect::Sqlite => |n| format!("?{n}"),
            Dialect::Postgres => |n| format!("${n}"),
        }
    }
}

/// A statement of both backends, written with `$N` placeholders.
pub(super) struct Sql {
    postgres: &'static str,
    sqlite: OnceLock<String>,
}

impl Sql {
    const fn new(postgres: &'static str) -> Sql {
        Sql {
            postgres,
            sqlite: OnceLock::new(),
        }
    }

    /// The text for `dialect`; SQLite's is made at the first call and kept, so that its
    /// statement cache sees one text.
    pub(super) fn text(&'static self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Postgres => self.postgres,
            // SQLite locks the whole database for a write: it has no row locks to take.
            Dialect::Sqlite => self.sqlite.get_or_init(|| {
                question_marks(&self.postgres.replace(" FOR UPDATE SKIP LOCKED", ""))
            }),
        }
    }
}

/// `$N` placeholders as `?N`. None of the texts here has a `$` elsewhere (checked by a test).
fn question_marks(text: &str) -> String {
    let mut converted = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let before_digit = chars.peek().is_some_and(char::is_ascii_digit);
        converted.push(if c == '$' && before_digit { '?' } else { c });
    }
    converted
}

/// Projects as [`super::rows::project`] reads them.
macro_rules! select_project {
    () => {
        "SELECT id, name, created_at, rpm, tpm, daily_budget_usd, monthly_budget_usd, guards,
            tools
         FROM projects"
    };
}

pub(super) static INSERT_PROJECT: Sql =
    Sql::new("INSERT INTO projects (id, name, created_at) VALUES ($1, $2, $3)");
pub(super) static COUNT_PROJECTS: Sql = Sql::new("SELECT count(*) FROM projects");
pub(super) static PROJECTS: Sql = Sql::new(concat!(select_project!(), " ORDER BY created_at, id"));
pub(super) static PROJECT: Sql = Sql::new(concat!(select_project!(), " WHERE id = $1"));
/// A project's limits, to be updated: PostgreSQL adds `FOR UPDATE` (see the module's doc).
pub(super) static PROJECT_LIMITS: Sql =
    Sql::new("SELECT rpm, tpm, daily_budget_usd, monthly_budget_usd FROM projects WHERE id = $1");
/// `$1` names the row; `$2` to `$5` are the four of [`super::rows::StoredLimits`].
pub(super) static UPDATE_PROJECT_LIMITS: Sql = Sql::new(
    "UPDATE projects SET rpm = $2, tpm = $3, daily_budget_usd = $4, monthly_budget_usd = $5
     WHERE id = $1",
);
/// `$1` names the project; `$2` is its guards as the backend stores a list (NULL when none).
pub(super) static UPDATE_PROJECT_GUARDS: Sql =
    Sql::new("UPDATE projects SET guards = $2 WHERE id = $1");
/// `$1` names the project; `$2` is its tools (globs) as the backend stores a list (NULL when
/// it may use them all).
pub(super) static UPDATE_PROJECT_TOOLS: Sql =
    Sql::new("UPDATE projects SET tools = $2 WHERE id = $1");
pub(super) static UPDATE_KEY_LIMITS: Sql = Sql::new(
    "UPDATE api_keys SET rpm = $2, tpm = $3, daily_budget_usd = $4, monthly_budget_usd = $5
     WHERE key_hash = $1",
);
pub(super) static INSERT_KEY: Sql = Sql::new(
    "INSERT INTO api_keys (key_hash, prefix, project_id, created_at, rpm, tpm,
        daily_budget_usd, monthly_budget_usd, routes, models, expires_at, tools)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
);
/// A project's keys, revoked ones too, newest first, as [`super::rows::key_info`] reads them.
pub(super) static PROJECT_KEYS: Sql = Sql::new(
    "SELECT prefix, created_at, revoked_at, rpm, tpm, daily_budget_usd, monthly_budget_usd,
        routes, models, expires_at, tools
     FROM api_keys WHERE project_id = $1 ORDER BY created_at DESC, prefix",
);
/// The live key of a hash, as [`super::rows::key_record`] reads it.
pub(super) static FIND_KEY: Sql = Sql::new(
    "SELECT k.project_id, k.prefix, k.rpm, k.tpm, k.daily_budget_usd, k.monthly_budget_usd,
        p.rpm, p.tpm, p.daily_budget_usd, p.monthly_budget_usd, k.routes, k.models, k.expires_at,
        p.guards, k.tools, p.tools
     FROM api_keys k JOIN projects p ON p.id = k.project_id
     WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
);

/// Records that the console session `$1` (its cookie's SHA-256) was signed out; `$2` is when
/// the cookie expires, until which the row is kept. Signed out twice: kept once.
pub(super) static SIGN_OUT_SESSION: Sql = Sql::new(
    "INSERT INTO console_signouts (session_hash, expires_at) VALUES ($1, $2)
     ON CONFLICT (session_hash) DO NOTHING",
);
/// Forgets the sign-outs of cookies expired by `$1`: they are refused anyway.
pub(super) static DELETE_EXPIRED_SIGN_OUTS: Sql =
    Sql::new("DELETE FROM console_signouts WHERE expires_at <= $1");
/// 1 when the console session `$1` was signed out, else 0.
pub(super) static SESSION_SIGNED_OUT: Sql =
    Sql::new("SELECT count(*) FROM console_signouts WHERE session_hash = $1");

// The sums are cast so that both backends give one type (BIGINT, DOUBLE PRECISION) and 0, not
// NULL, over no records. Each walks its (subject, created_at) index.
pub(super) static SPENT_BY_PROJECT: Sql = Sql::new(
    "SELECT CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION)
     FROM invocations WHERE project_id = $1 AND created_at >= $2",
);
pub(super) static SPENT_BY_KEY: Sql = Sql::new(
    "SELECT CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION)
     FROM invocations WHERE key_prefix = $1 AND created_at >= $2",
);
/// What [`super::rows::usage_totals`] reads.
pub(super) static USAGE_SINCE: Sql = Sql::new(
    "SELECT count(*), CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT),
        CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT),
        CAST(COALESCE(SUM(total_tokens), 0) AS BIGINT),
        CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION)
     FROM invocations WHERE project_id = $1 AND created_at >= $2",
);

/// Keeps a response, replacing one of the same id (a retried write): `$1` to `$10` are the
/// columns in [`RESPONSE`]'s order. `excluded` (the row that was refused) is both dialects'.
pub(super) static PUT_RESPONSE: Sql = Sql::new(
    "INSERT INTO responses (id, project_id, invocation_id, created_at, body, context, parent,
        conversation_bytes, route, model)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id,
        invocation_id = excluded.invocation_id, created_at = excluded.created_at,
        body = excluded.body, context = excluded.context, parent = excluded.parent,
        conversation_bytes = excluded.conversation_bytes, route = excluded.route,
        model = excluded.model",
);
/// The kept response `$1` of project `$2`, as [`super::rows::stored_response`] reads it.
pub(super) static RESPONSE: Sql = Sql::new(
    "SELECT id, project_id, invocation_id, created_at, body, context, parent,
        conversation_bytes, route, model
     FROM responses WHERE id = $1 AND project_id = $2",
);
/// What the kept response `$1` of project `$2` was made with and how large its conversation
/// is, as [`super::rows::response_head`] reads it.
pub(super) static RESPONSE_HEAD: Sql = Sql::new(
    "SELECT route, model, conversation_bytes FROM responses WHERE id = $1 AND project_id = $2",
);
/// The conversation of the kept response `$1` of project `$2`: its turn and its parents',
/// each row `parent, context`, the first turn first, at most `$3` + 1 of them. When the first
/// row still names a parent, that parent is gone (or the walk reached `$3`).
pub(super) static CONVERSATION: Sql = Sql::new(
    "WITH RECURSIVE chain(parent, context, depth) AS (
        SELECT parent, context, 0 FROM responses WHERE id = $1 AND project_id = $2
        UNION ALL
        SELECT r.parent, r.context, chain.depth + 1
          FROM responses r JOIN chain ON r.id = chain.parent
         WHERE r.project_id = $2 AND chain.depth < $3
     )
     SELECT parent, context FROM chain ORDER BY depth DESC",
);
/// Deletes the kept response `$1` of project `$2`.
pub(super) static DELETE_RESPONSE: Sql =
    Sql::new("DELETE FROM responses WHERE id = $1 AND project_id = $2");
/// At most `$2` kept responses created before `$1`. Unlike invocation records' (see the
/// module's doc), one text for both: the subquery walks the created_at index and the delete
/// finds each row by its primary key, a batch at a time (neither dialect has
/// `DELETE ... LIMIT`).
pub(super) static DELETE_OLD_RESPONSES: Sql = Sql::new(
    "DELETE FROM responses WHERE id IN
        (SELECT id FROM responses WHERE created_at < $1 LIMIT $2)",
);

/// A file's columns, as [`super::rows::stored_file`] reads them.
macro_rules! select_file {
    ($rest:literal) => {
        concat!(
            "SELECT id, project_id, filename, purpose, bytes, created_at, expires_at FROM files ",
            $rest
        )
    };
}

/// Reserves an upload's row, `$1` id, `$2` project, `$3` the bytes it reserves, `$4` when,
/// if its project's files and uploads (`bytes` is what an upload reserves until it is whole)
/// leave room for `$3` within `$5`. The check and the insert are one statement: SQLite runs
/// it under its write lock; PostgreSQL's caller holds the project's row first (see
/// `postgres::files`). The casts name the types a parameter of a SELECT list cannot infer.
pub(super) static BEGIN_UPLOAD: Sql = Sql::new(
    "INSERT INTO files (id, project_id, filename, purpose, bytes, created_at, expires_at, whole)
     SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), '', '', CAST($3 AS BIGINT),
        CAST($4 AS BIGINT), NULL, 0
     WHERE (SELECT COALESCE(SUM(bytes), 0) FROM files WHERE project_id = $2)
        + CAST($3 AS BIGINT) <= CAST($5 AS BIGINT)",
);
/// Chunk `$2` of the upload `$1`, its bytes `$3`.
pub(super) static PUT_FILE_CHUNK: Sql =
    Sql::new("INSERT INTO file_chunks (file_id, seq, data) VALUES ($1, $2, $3)");
/// Makes the upload `$1` of project `$2` whole: `$3` filename, `$4` purpose, `$5` bytes, `$6`
/// expiry.
pub(super) static FINISH_UPLOAD: Sql = Sql::new(
    "UPDATE files SET filename = $3, purpose = $4, bytes = $5, expires_at = $6, whole = 1
     WHERE id = $1 AND project_id = $2 AND whole = 0",
);
/// Deletes the upload `$1` that was never made whole (its chunks go with it: ON DELETE
/// CASCADE).
pub(super) static ABANDON_UPLOAD: Sql = Sql::new("DELETE FROM files WHERE id = $1 AND whole = 0");
/// The whole file `$1` of project `$2`, unless it expired by `$3`.
pub(super) static FILE: Sql = Sql::new(select_file!(
    "WHERE id = $1 AND project_id = $2 AND whole = 1 AND (expires_at IS NULL OR expires_at > $3)"
));
/// A page of project `$1`'s whole files unexpired at `$2`, newest first: `$3` purpose or
/// NULL, `$4` the id it starts after or NULL, at most `$5`. Ids are UUIDv7s: their order is
/// their creation's.
pub(super) static FILES_NEWEST_FIRST: Sql = Sql::new(select_file!(
    "WHERE project_id = $1 AND whole = 1 AND (expires_at IS NULL OR expires_at > $2)
       AND (CAST($3 AS TEXT) IS NULL OR purpose = $3) AND (CAST($4 AS TEXT) IS NULL OR id < $4)
     ORDER BY id DESC LIMIT $5"
));
/// [`FILES_NEWEST_FIRST`], oldest first.
pub(super) static FILES_OLDEST_FIRST: Sql = Sql::new(select_file!(
    "WHERE project_id = $1 AND whole = 1 AND (expires_at IS NULL OR expires_at > $2)
       AND (CAST($3 AS TEXT) IS NULL OR purpose = $3) AND (CAST($4 AS TEXT) IS NULL OR id > $4)
     ORDER BY id LIMIT $5"
));
/// Chunk `$2` of the file `$1`.
pub(super) static FILE_CHUNK: Sql =
    Sql::new("SELECT data FROM file_chunks WHERE file_id = $1 AND seq = $2");
/// Deletes the whole file `$1` of project `$2` (its chunks go with it).
pub(super) static DELETE_FILE: Sql =
    Sql::new("DELETE FROM files WHERE id = $1 AND project_id = $2 AND whole = 1");
/// At most `$3` files expired by `$1` and uploads begun before `$2` never made whole.
pub(super) static DELETE_EXPIRED_FILES: Sql = Sql::new(
    "DELETE FROM files WHERE id IN
        (SELECT id FROM files
          WHERE (expires_at IS NOT NULL AND expires_at <= $1) OR (whole = 0 AND created_at < $2)
          LIMIT $3)",
);

/// A batch's columns, as [`super::rows::stored_batch`] reads them: its counts are its lines'
/// while it runs, kept in the row once it is finished (its lines deleted).
macro_rules! select_batch {
    ($rest:literal) => {
        concat!(
            "SELECT id, project_id, endpoint, input_file_id, completion_window, metadata, status,
                created_at, in_progress_at, expires_at, finalizing_at, completed_at, failed_at,
                expired_at, cancelling_at, cancelled_at, output_file_id, error_file_id, errors,
                total,
                COALESCE(completed, (SELECT COUNT(*) FROM batch_lines l
                    WHERE l.batch_id = batches.id AND l.state = 1 AND l.ok = 1)),
                COALESCE(failed, (SELECT COUNT(*) FROM batch_lines l
                    WHERE l.batch_id = batches.id AND l.state = 1 AND l.ok = 0)),
                output_expires_secs,
                COALESCE(closed, (SELECT COUNT(*) FROM batch_lines l
                    WHERE l.batch_id = batches.id AND l.state = 1 AND l.error_code IS NOT NULL))
             FROM batches ",
            $rest
        )
    };
}

/// A new batch, validating: `$1` id, `$2` project, `$3` key hash, `$4` endpoint, `$5` input
/// file, `$6` completion window, `$7` metadata, `$8` created, `$9` expires, `$10` output
/// files' expiry.
pub(super) static INSERT_BATCH: Sql = Sql::new(
    "INSERT INTO batches (id, project_id, key_hash, endpoint, input_file_id, completion_window,
        metadata, status, created_at, expires_at, output_expires_secs, total)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'validating', $8, $9, $10, 0)",
);
/// Line `$2` of batch `$1`: `$3` custom id, `$4` body; pending.
pub(super) static PUT_BATCH_LINE: Sql = Sql::new(
    "INSERT INTO batch_lines (batch_id, seq, custom_id, body, state, ok)
     VALUES ($1, $2, $3, $4, 0, 0)",
);
/// The validated batch `$1` in progress from `$2`, with `$3` lines.
pub(super) static START_BATCH: Sql = Sql::new(
    "UPDATE batches SET status = 'in_progress', in_progress_at = $2, total = $3
     WHERE id = $1 AND status = 'validating'",
);
/// The batch `$1` refused by its validation at `$2`, `$3` why.
pub(super) static FAIL_BATCH: Sql = Sql::new(
    "UPDATE batches SET status = 'failed', failed_at = $2, errors = $3
     WHERE id = $1 AND status = 'validating'",
);
/// Every line of batch `$1`.
pub(super) static DELETE_BATCH_LINES: Sql = Sql::new("DELETE FROM batch_lines WHERE batch_id = $1");
/// The batch `$1` of project `$2`.
pub(super) static BATCH: Sql = Sql::new(select_batch!("WHERE id = $1 AND project_id = $2"));
/// A page of project `$1`'s batches whose ids are `LIKE $4` (one API's: `batch_%`,
/// `msgbatch_%`), newest first, after the id `$2` (or NULL), at most `$3`.
pub(super) static BATCHES: Sql = Sql::new(select_batch!(
    "WHERE project_id = $1 AND id LIKE $4 AND (CAST($2 AS TEXT) IS NULL OR id < $2)
     ORDER BY id DESC LIMIT $3"
));
/// As [`BATCHES`], the page just newer than the id `$2`, oldest first.
pub(super) static BATCHES_BEFORE: Sql = Sql::new(select_batch!(
    "WHERE project_id = $1 AND id LIKE $4 AND id > $2 ORDER BY id LIMIT $3"
));
/// Project `$1`'s newest `$2` batches of either API, the newest first.
pub(super) static PROJECT_BATCHES: Sql = Sql::new(select_batch!(
    "WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
));
/// The batch `$1` of project `$2`, if it ended.
pub(super) static DELETE_BATCH: Sql = Sql::new(
    "DELETE FROM batches WHERE id = $1 AND project_id = $2
       AND status IN ('failed', 'completed', 'expired', 'cancelled')",
);
/// The batch `$1` of project `$2` cancelling from `$3`, if it was validating or in progress.
pub(super) static CANCEL_BATCH: Sql = Sql::new(
    "UPDATE batches SET status = 'cancelling', cancelling_at = $3
     WHERE id = $1 AND project_id = $2 AND status IN ('validating', 'in_progress')",
);
/// At most `$1` batches with work for a runner, the oldest first.
pub(super) static RUNNING_BATCHES: Sql = Sql::new(
    "SELECT id, project_id, key_hash, endpoint, status, expires_at FROM batches
     WHERE status IN ('validating', 'in_progress', 'cancelling', 'finalizing')
     ORDER BY id LIMIT $1",
);
/// Leases the first pending lines of batch `$1` no runner holds at `$2` to `$3` until `$4`: at
/// most `$5`. `SKIP LOCKED` hands PostgreSQL's runners of several replicas each the lines the
/// others are not leasing at that moment, without waiting for them; SQLite has one writer at a
/// time, and the clause is left out of its text.
pub(super) static LEASE_LINES: Sql = Sql::new(
    "UPDATE batch_lines SET lease_token = $3, lease_until = $4
     WHERE batch_id = $1 AND seq IN (
        SELECT seq FROM batch_lines WHERE batch_id = $1 AND state = 0
          AND (lease_until IS NULL OR lease_until < $2)
        ORDER BY seq LIMIT $5 FOR UPDATE SKIP LOCKED)
     RETURNING seq, custom_id, body",
);
/// Holds the pending lines runner `$1` leased until `$2`.
pub(super) static RENEW_LEASES: Sql =
    Sql::new("UPDATE batch_lines SET lease_until = $2 WHERE lease_token = $1 AND state = 0");
/// Ends line `$2` of batch `$1` held by `$3`: `$4` answered with a 2xx (1) or not (0), `$5` its
/// line of the output. Its body is no longer needed.
pub(super) static END_LINE: Sql = Sql::new(
    "UPDATE batch_lines SET state = 1, ok = $4, result = $5, body = '', lease_token = NULL
     WHERE batch_id = $1 AND seq = $2 AND lease_token = $3 AND state = 0",
);
/// Gives line `$2` of batch `$1` held by `$3` back, to be leased from `$4`.
pub(super) static RELEASE_LINE: Sql = Sql::new(
    "UPDATE batch_lines SET lease_token = NULL, lease_until = $4
     WHERE batch_id = $1 AND seq = $2 AND lease_token = $3 AND state = 0",
);
/// Ends the pending lines of batch `$1` no runner holds at `$3` as never run, for `$2`.
pub(super) static CLOSE_LINES: Sql = Sql::new(
    "UPDATE batch_lines SET state = 1, ok = 0, error_code = $2, body = ''
     WHERE batch_id = $1 AND state = 0 AND (lease_token IS NULL OR lease_until < $3)",
);
/// Marks batch `$1` as being finished from `$2` (`finalizing`, unless it is cancelling) if no
/// line of it is pending and no runner marked it after `$3`.
pub(super) static BEGIN_FINISHING: Sql = Sql::new(
    "UPDATE batches SET finishing_at = $2,
        finalizing_at = CASE WHEN status = 'in_progress' THEN $2 ELSE finalizing_at END,
        status = CASE WHEN status = 'in_progress' THEN 'finalizing' ELSE status END
     WHERE id = $1 AND status IN ('in_progress', 'cancelling', 'finalizing')
       AND (finishing_at IS NULL OR finishing_at < $3)
       AND NOT EXISTS (SELECT 1 FROM batch_lines WHERE batch_id = $1 AND state = 0)",
);
/// At most `$3` ended lines of batch `$1` after line `$2`, in order.
pub(super) static LINE_RESULTS: Sql = Sql::new(
    "SELECT seq, custom_id, ok, result, error_code FROM batch_lines
     WHERE batch_id = $1 AND seq > $2 AND state = 1 ORDER BY seq LIMIT $3",
);
/// Ends batch `$1`, marked finishing at `$2`, as `$3` at `$4`: `$5` output file, `$6` error
/// file, `$7` lines completed, `$8` failed, `$9` of them never run.
pub(super) static FINISH_BATCH: Sql = Sql::new(
    "UPDATE batches SET status = $3, finishing_at = NULL,
        completed_at = CASE WHEN $3 = 'completed' THEN $4 ELSE completed_at END,
        expired_at = CASE WHEN $3 = 'expired' THEN $4 ELSE expired_at END,
        cancelled_at = CASE WHEN $3 = 'cancelled' THEN $4 ELSE cancelled_at END,
        output_file_id = $5, error_file_id = $6, completed = $7, failed = $8,
        closed = $9
     WHERE id = $1 AND finishing_at = $2",
);
/// The lines of batch `$1` once it ended (a batch not ended keeps them).
pub(super) static DELETE_ENDED_LINES_OF: Sql = Sql::new(
    "DELETE FROM batch_lines WHERE batch_id = $1 AND batch_id IN
        (SELECT id FROM batches WHERE id = $1
           AND status IN ('failed', 'completed', 'expired', 'cancelled'))",
);
/// Batches whose validation began before `$2` and never ended, failed at `$1` for `$3`.
pub(super) static FAIL_STALE_BATCHES: Sql = Sql::new(
    "UPDATE batches SET status = 'failed', failed_at = $1, errors = $3
     WHERE status = 'validating' AND created_at < $2",
);
/// The lines of batches that ended and kept them (a runner that died between ending a batch
/// and deleting them).
pub(super) static DELETE_ENDED_BATCH_LINES: Sql = Sql::new(
    "DELETE FROM batch_lines WHERE batch_id IN
        (SELECT id FROM batches WHERE status IN ('failed', 'completed', 'expired', 'cancelled'))",
);

/// The invocation columns, in the order both backends insert and [`super::rows::invocation`]
/// reads them, `$bodies` standing for `request, response`, `$attempts` for `attempts` and
/// `$guards` for `guards`. Columns of later migrations come last, so that the earlier ones keep
/// their positions.
macro_rules! invocation_columns {
    ($bodies:literal, $attempts:literal, $guards:literal) => {
        concat!(
            "id, project_id, user_id, route, plugin, model, type, stream, status, http_status,
    error, provider_error, prompt_tokens, completion_tokens, total_tokens, cached_prompt_tokens,
    cache_creation_tokens, reasoning_tokens, cost_usd, created_at, duration_ms, ",
            $bodies,
            ", key_prefix, ",
            $attempts,
            ", image_prompt_tokens, audio_prompt_tokens, ",
            $guards,
            ", cache, saved_cost_usd, search_units, images, audio_seconds, characters, batch_id,
            custom_id"
        )
    };
}
pub(super) use invocation_columns;

/// `SELECT` of every invocation column; `$attempts` and `$guards` are how the backend reads
/// those JSON columns as text.
macro_rules! select_invocation {
    ($bodies:literal, $attempts:literal, $guards:literal) => {
        concat!(
            "SELECT ",
            invocation_columns!($bodies, $attempts, $guards),
            " FROM invocations"
        )
    };
}
/// PostgreSQL keeps attempts and guards as JSONB, which the driver reads only as text; SQLite
/// keeps the text itself (and a cast would make a hand-written blob read as attempts).
const SQLITE_SELECT_INVOCATION: &str =
    select_invocation!("request, response", "attempts", "guards");
const POSTGRES_SELECT_INVOCATION: &str =
    select_invocation!("request, response", "attempts::text", "guards::text");
/// An export without bodies: they are most of a record's bytes.
const SQLITE_WITHOUT_BODIES: &str = select_invocation!(
    "CAST(NULL AS TEXT), CAST(NULL AS TEXT)",
    "attempts",
    "guards"
);
const POSTGRES_WITHOUT_BODIES: &str = select_invocation!(
    "CAST(NULL AS TEXT), CAST(NULL AS TEXT)",
    "attempts::text",
    "guards::text"
);

/// Where the selected invocation columns have `id` and `created_at`: an export page's cursor.
pub(super) const ID_COLUMN: usize = 0;
pub(super) const CREATED_AT_COLUMN: usize = 19;

/// `SELECT columns FROM invocations`, without `request` and `response` unless `bodies`.
pub(super) fn select_invocation(dialect: Dialect, bodies: bool) -> &'static str {
    match (dialect, bodies) {
        (Dialect::Sqlite, true) => SQLITE_SELECT_INVOCATION,
        (Dialect::Sqlite, false) => SQLITE_WITHOUT_BODIES,
        (Dialect::Postgres, true) => POSTGRES_SELECT_INVOCATION,
        (Dialect::Postgres, false) => POSTGRES_WITHOUT_BODIES,
    }
}

/// An export's page of records (see [`report::page_query`]), with their bodies or without.
pub(super) fn invocations_page(
    dialect: Dialect,
    range: &RecordRange,
    after: Option<&Cursor>,
    order: Order,
    bodies: bool,
    limit: u32,
) -> Query {
    let select = select_invocation(dialect, bodies);
    report::page_query(select, range, after, order, limit, dialect.placeholder())
}

/// One invocation by id.
pub(super) fn invocation(dialect: Dialect) -> String {
    format!(
        "{} WHERE id = {}",
        select_invocation(dialect, true),
        dialect.placeholder()(1)
    )
}

/// The newest invocations the filter selects. One statement per combination of filters, so
/// that each uses its index (`$1 IS NULL OR project_id = $1` would not, once planned
/// generically).
pub(super) fn list_invocations(dialect: Dialect, filter: &InvocationFilter) -> Query {
    let placeholder = dialect.placeholder();
    let mut values = Vec::new();
    let mut conditions = Vec::new();
    for (column, value) in [
        ("project_id", &filter.project_id),
        ("user_id", &filter.user_id),
    ] {
        if let Some(value) = value {
            values.push(SqlValue::Text(value.clone()));
            conditions.push(format!("{column} = {}", placeholder(values.len())));
        }
    }
    values.push(SqlValue::Integer(i64::from(filter.limit)));
    let filtered = report::where_clause(&conditions);
    Query {
        sql: format!(
            "{}{filtered} ORDER BY created_at DESC, id DESC LIMIT {}",
            select_invocation(dialect, true),
            placeholder(values.len())
        ),
        values,
    }
}

/// What a key condition compares with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyValue {
    Hash(Vec<u8>),
    Pattern(String),
}

/// The condition selecting the keys `which` names, as parameter `param`, and its value.
fn key_condition(dialect: Dialect, which: &KeyMatch, param: usize) -> (String, KeyValue) {
    let placeholder = dialect.placeholder()(param);
    match which {
        KeyMatch::Hash(hash) => (
            format!("key_hash = {placeholder}"),
            KeyValue::Hash(hash.to_vec()),
        ),
        KeyMatch::Pattern(pattern) => (
            format!("prefix LIKE {placeholder} ESCAPE '\\'"),
            KeyValue::Pattern(pattern.clone()),
        ),
    }
}

/// The live keys `which` names, as [`super::rows::matched_key`] reads them (PostgreSQL adds
/// `FOR UPDATE`); the one parameter's value.
pub(super) fn matching_keys(dialect: Dialect, which: &KeyMatch) -> (String, KeyValue) {
    let (condition, value) = key_condition(dialect, which, 1);
    let sql = format!(
        "SELECT key_hash, prefix, rpm, tpm, daily_budget_usd, monthly_budget_usd
         FROM api_keys WHERE {condition} AND revoked_at IS NULL"
    );
    (sql, value)
}

/// Revokes the live keys `which` names: the first parameter is the time, the second the value
/// returned.
pub(super) fn revoke_keys(dialect: Dialect, which: &KeyMatch) -> (String, KeyValue) {
    let (condition, value) = key_condition(dialect, which, 2);
    let sql = format!(
        "UPDATE api_keys SET revoked_at = {} WHERE {condition} AND revoked_at IS NULL",
        dialect.placeholder()(1)
    );
    (sql, value)
}

/// The live keys `which` names with their projects, as [`super::rows::key_info`] reads them
/// and their project's id after.
pub(super) fn live_keys(dialect: Dialect, which: &KeyMatch) -> Query {
    let (condition, value) = key_condition(dialect, which, 1);
    Query {
        sql: format!(
            "SELECT prefix, created_at, revoked_at, rpm, tpm, daily_budget_usd,
                monthly_budget_usd, routes, models, expires_at, tools, project_id
             FROM api_keys WHERE {condition} AND revoked_at IS NULL ORDER BY prefix"
        ),
        values: vec![match value {
            KeyValue::Hash(hash) => SqlValue::Bytes(hash),
            KeyValue::Pattern(pattern) => SqlValue::Text(pattern),
        }],
    }
}

/// A statement's text for `dialect` with its values, as the generic calls run it.
pub(super) fn statement(sql: &'static Sql, dialect: Dialect, values: Vec<SqlValue>) -> Query {
    Query {
        sql: sql.text(dialect).to_owned(),
        values,
    }
}

/// Personal admin tokens as [`super::rows::admin_token`] reads them.
macro_rules! select_admin_token {
    () => {
        "SELECT prefix, name, role, project_id, created_by, created_at, expires_at, revoked_at,
            last_used_at
         FROM admin_tokens"
    };
}

pub(super) static INSERT_ADMIN_TOKEN: Sql = Sql::new(
    "INSERT INTO admin_tokens (token_hash, prefix, name, role, project_id, created_by,
        created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
);
/// The token of a hash (`$1`, hex), live or not: the caller tells which.
pub(super) static FIND_ADMIN_TOKEN: Sql =
    Sql::new(concat!(select_admin_token!(), " WHERE token_hash = $1"));
/// Every token, revoked and expired ones too, newest first.
pub(super) static ADMIN_TOKENS: Sql = Sql::new(concat!(
    select_admin_token!(),
    " ORDER BY created_at DESC, prefix"
));
/// Revokes (at `$2`) the live tokens whose prefix is `$1`.
pub(super) static REVOKE_ADMIN_TOKENS: Sql =
    Sql::new("UPDATE admin_tokens SET revoked_at = $2 WHERE prefix = $1 AND revoked_at IS NULL");
/// Notes that the token `$1` was used at `$2`, unless it was since `$3`: a token used by a
/// script every second writes once a minute, not every second.
pub(super) static TOUCH_ADMIN_TOKEN: Sql = Sql::new(
    "UPDATE admin_tokens SET last_used_at = $2
     WHERE token_hash = $1 AND (last_used_at IS NULL OR last_used_at < $3)",
);

/// Gives user `$1` the role `$2` (on project `$3`, empty for none); given already: kept once.
pub(super) static ADD_USER_GRANT: Sql = Sql::new(
    "INSERT INTO users (email, role, project_id, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (email, role, project_id) DO NOTHING",
);
/// Every role given to users, as [`super::rows::user_grant`] reads them.
pub(super) static USERS: Sql = Sql::new(
    "SELECT email, role, project_id, created_by, created_at FROM users
     ORDER BY email, role, project_id",
);
/// The roles given to user `$1`.
pub(super) static USER_GRANTS: Sql = Sql::new(
    "SELECT email, role, project_id, created_by, created_at FROM users WHERE email = $1
     ORDER BY role, project_id",
);
/// Takes every role of user `$1` back.
pub(super) static REMOVE_USER: Sql = Sql::new("DELETE FROM users WHERE email = $1");
/// Takes role `$2` (on project `$3`) of user `$1` back.
pub(super) static REMOVE_USER_GRANT: Sql =
    Sql::new("DELETE FROM users WHERE email = $1 AND role = $2 AND project_id = $3");

pub(super) static INSERT_AUDIT_EVENT: Sql = Sql::new(
    "INSERT INTO audit_events (id, at, actor, role, via, address, action, endpoint, target,
        before_json, after_json, outcome, status, request_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
);
/// Deletes at most `$2` audit events from before `$1`, oldest first.
pub(super) static DELETE_OLD_AUDIT_EVENTS: Sql = Sql::new(
    "DELETE FROM audit_events WHERE id IN
        (SELECT id FROM audit_events WHERE at < $1 ORDER BY at, id LIMIT $2)",
);

/// The audit events `filter` selects, in its order, as [`super::rows::audit_event`] reads
/// them: only the conditions given, each combination a statement of its own.
pub(super) fn audit_events(dialect: Dialect, filter: &AuditFilter) -> Query {
    let placeholder = dialect.placeholder();
    let mut values = Vec::new();
    let mut conditions = Vec::new();
    let bind = |values: &mut Vec<SqlValue>, value: SqlValue| {
        values.push(value);
        placeholder(values.len())
    };
    if let Some(since) = filter.since_ms {
        conditions.push(format!(
            "at >= {}",
            bind(&mut values, SqlValue::Integer(since))
        ));
    }
    if let Some(until) = filter.until_ms {
        conditions.push(format!(
            "at < {}",
            bind(&mut values, SqlValue::Integer(until))
        ));
    }
    let texts = [
        ("actor", filter.actor.clone()),
        ("action", filter.action.clone()),
        ("outcome", filter.outcome.map(|o| o.as_str().to_owned())),
    ];
    for (column, value) in texts {
        if let Some(value) = value {
            conditions.push(format!(
                "{column} = {}",
                bind(&mut values, SqlValue::Text(value))
            ));
        }
    }
    let (compare, order) = if filter.newest_first {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    if let Some(after) = filter.after {
        // Ids are UUIDv7s, made in time order (the text sorts as the bytes do): a page goes
        // on after its last whatever their times.
        let id = bind(&mut values, SqlValue::Text(after.to_string()));
        conditions.push(format!("id {compare} {id}"));
    }
    let limit = bind(&mut values, SqlValue::Integer(i64::from(filter.limit)));
    let filtered = report::where_clause(&conditions);
    Query {
        sql: format!(
            "SELECT id, at, actor, role, via, address, action, endpoint, target, before_json,
                after_json, outcome, status, request_id
             FROM audit_events{filtered} ORDER BY id {order} LIMIT {limit}"
        ),
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_texts_have_question_marks_where_postgres_has_dollars() {
        let all = [
            &INSERT_PROJECT,
            &COUNT_PROJECTS,
            &PROJECTS,
            &PROJECT,
            &PROJECT_LIMITS,
            &UPDATE_PROJECT_LIMITS,
            &UPDATE_PROJECT_GUARDS,
            &UPDATE_KEY_LIMITS,
            &INSERT_KEY,
            &FIND_KEY,
            &PROJECT_KEYS,
            &SPENT_BY_PROJECT,
            &SPENT_BY_KEY,
            &USAGE_SINCE,
            &PUT_RESPONSE,
            &RESPONSE,
            &DELETE_RESPONSE,
            &DELETE_OLD_RESPONSES,
            &BEGIN_UPLOAD,
            &PUT_FILE_CHUNK,
            &FINISH_UPLOAD,
            &ABANDON_UPLOAD,
            &FILE,
            &FILES_NEWEST_FIRST,
            &FILES_OLDEST_FIRST,
            &FILE_CHUNK,
            &DELETE_FILE,
            &DELETE_EXPIRED_FILES,
            &INSERT_BATCH,
            &PUT_BATCH_LINE,
            &START_BATCH,
            &FAIL_BATCH,
            &DELETE_BATCH_LINES,
            &DELETE_ENDED_LINES_OF,
            &LEASE_LINES,
            &BATCH,
            &BATCHES,
            &BATCHES_BEFORE,
            &PROJECT_BATCHES,
            &DELETE_BATCH,
            &CANCEL_BATCH,
            &RUNNING_BATCHES,
            &RENEW_LEASES,
            &END_LINE,
            &RELEASE_LINE,
            &CLOSE_LINES,
            &BEGIN_FINISHING,
            &LINE_RESULTS,
            &FINISH_BATCH,
            &FAIL_STALE_BATCHES,
            &DELETE_ENDED_BATCH_LINES,
            &INSERT_ADMIN_TOKEN,
            &FIND_ADMIN_TOKEN,
            &ADMIN_TOKENS,
            &REVOKE_ADMIN_TOKENS,
            &TOUCH_ADMIN_TOKEN,
            &INSERT_AUDIT_EVENT,
            &DELETE_OLD_AUDIT_EVENTS,
            &ADD_USER_GRANT,
            &USERS,
            &USER_GRANTS,
            &REMOVE_USER,
            &REMOVE_USER_GRANT,
        ];
        for sql in all {
            let sqlite = sql.text(Dialect::Sqlite);
            assert!(!sqlite.contains('$'), "{sqlite}");
            assert_eq!(
                sqlite.matches('?').count(),
                sql.text(Dialect::Postgres).matches('$').count()
            );
        }
        assert_eq!(
            UPDATE_KEY_LIMITS.text(Dialect::Sqlite),
            "UPDATE api_keys SET rpm = ?2, tpm = ?3, daily_budget_usd = ?4, monthly_budget_usd = ?5
     WHERE key_hash = ?1"
        );
        let (sql, value) = revoke_keys(Dialect::Sqlite, &KeyMatch::of("gw_a%"));
        assert!(
            sql.contains("revoked_at = ?1 WHERE prefix LIKE ?2 ESCAPE"),
            "{sql}"
        );
        assert_eq!(value, KeyValue::Pattern("gw\\_a\\%%".into()));
    }

    #[test]
    fn a_listing_binds_only_the_filters_given() {
        let all = list_invocations(
            Dialect::Postgres,
            &InvocationFilter {
                limit: 5,
                ..InvocationFilter::default()
            },
        );
        assert!(
            all.sql
                .ends_with("FROM invocations ORDER BY created_at DESC, id DESC LIMIT $1"),
            "{}",
            all.sql
        );
        assert_eq!(all.values, [SqlValue::Integer(5)]);
        let by_user = list_invocations(
            Dialect::Sqlite,
            &InvocationFilter {
                user_id: Some("u".into()),
                limit: 5,
                ..InvocationFilter::default()
            },
        );
        assert!(
            by_user.sql.contains("WHERE user_id = ?1 ORDER BY") && by_user.sql.ends_with("?2"),
            "{}",
            by_user.sql
        );
    }
}
