//! Invocation records in PostgreSQL: the writer's batches, retention's deletes, reads, spend
//! and reports.

use tokio_postgres::IsolationLevel;
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::Postgres;
use super::connect::connection;
use crate::limits::Subject;
use crate::store::report::{
    self, Cursor, GroupBy, Order, Page, RecordRange, SqlValue, UsageRow, UsageTally,
};
use crate::store::rows as read;
use crate::store::sql::{self, Dialect, invocation_columns};
use crate::store::{
    Attempt, CacheStatus, GuardOutcome, Invocation, InvocationFilter, StoreError, TokenUsage,
    UsageTotals,
};

const POSTGRES: Dialect = Dialect::Postgres;

/// Rows of a report's durations fetched at a time (a portal's page), not the whole range's.
pub(super) const DURATIONS_PER_FETCH: i32 = 10_000;

/// Old records by id, a batch at a time: PostgreSQL has no `DELETE ... LIMIT` (nor SQLite's
/// rowid), the subquery walks the created_at index and stops at the limit.
const DELETE_OLD_INVOCATIONS: &str = "DELETE FROM invocations WHERE id IN
    (SELECT id FROM invocations WHERE created_at < $1 LIMIT $2)";

impl Postgres {
    /// Commits `batch` in one statement. Blocking: for the invocation
    /// writer's thread, which may be any thread, a runtime's blocking pool included.
    pub(in crate::store) fn insert_invocations(
        &self,
        batch: &[Invocation],
    ) -> Result<(), StoreError> {
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
    pub(in crate::store) async fn delete_invocations_before(
        &self,
        cutoff_ms: i64,
        limit: u32,
    ) -> Result<usize, StoreError> {
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(DELETE_OLD_INVOCATIONS).await?;
            let deleted = client
                .execute(&statement, &[&cutoff_ms, &i64::from(limit)])
                .await?;
            Ok(deleted as usize)
        })
        .await
    }

    pub(in crate::store) async fn invocation(
        &self,
        id: &Uuid,
    ) -> Result<Option<Invocation>, StoreError> {
        let id = id.to_string();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&sql::invocation(POSTGRES)).await?;
            let row = client.query_opt(&statement, &[&id]).await?;
            Ok(row.as_ref().map(read::invocation).transpose()?)
        })
        .await
    }

    pub(in crate::store) async fn list_invocations(
        &self,
        filter: &InvocationFilter,
    ) -> Result<Vec<Invocation>, StoreError> {
        let query = sql::list_invocations(POSTGRES, filter);
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&query.sql).await?;
            let rows = client.query(&statement, &sql_params(&query.values)).await?;
            Ok(rows
                .iter()
                .map(read::invocation)
                .collect::<Result<_, _>>()?)
        })
        .await
    }

    /// The cost recorded for `subject` since `since_ms`.
    pub(in crate::store) async fn spent_since(
        &self,
        subject: &Subject<'_>,
        since_ms: i64,
    ) -> Result<f64, StoreError> {
        let (sql, id) = match subject {
            Subject::Project(id) => (&sql::SPENT_BY_PROJECT, id.to_string()),
            Subject::Key(prefix) => (&sql::SPENT_BY_KEY, prefix.to_string()),
        };
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(sql.text(POSTGRES)).await?;
            Ok(client
                .query_one(&statement, &[&id, &since_ms])
                .await?
                .try_get(0)?)
        })
        .await
    }

    pub(in crate::store) async fn usage_since(
        &self,
        project_id: &str,
        since_ms: i64,
    ) -> Result<UsageTotals, StoreError> {
        let project_id = project_id.to_owned();
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client
                .prepare_cached(sql::USAGE_SINCE.text(POSTGRES))
                .await?;
            let row = client
                .query_one(&statement, &[&project_id, &since_ms])
                .await?;
            Ok(read::usage_totals(&row)?)
        })
        .await
    }

    pub(in crate::store) async fn usage(
        &self,
        range: &RecordRange,
        by: &[GroupBy],
    ) -> Result<Vec<UsageRow>, StoreError> {
        let totals = report::totals_query(range, by, POSTGRES.placeholder());
        let durations = report::durations_query(range, by, POSTGRES.placeholder());
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
                read::tally_totals(&mut tally, row, &by)?;
            }
            // A portal read in pieces: one duration per record of the range.
            let portal = tx
                .bind(durations.sql.as_str(), &sql_params(&durations.values))
                .await?;
            loop {
                let rows = tx.query_portal(&portal, DURATIONS_PER_FETCH).await?;
                for row in &rows {
                    read::tally_duration(&mut tally, row, &by)?;
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

    pub(in crate::store) async fn invocations_page(
        &self,
        range: &RecordRange,
        after: Option<&Cursor>,
        order: Order,
        bodies: bool,
        limit: u32,
    ) -> Result<Page, StoreError> {
        let query = sql::invocations_page(POSTGRES, range, after, order, bodies, limit);
        self.run(move |pool| async move {
            let client = connection(&pool).await?;
            let statement = client.prepare_cached(&query.sql).await?;
            let rows = client.query(&statement, &sql_params(&query.values)).await?;
            let records = rows
                .iter()
                .map(read::invocation)
                .collect::<Result<Vec<_>, _>>()?;
            let last = rows.last().map(read::cursor).transpose()?;
            Ok(Page::of(records, last, limit))
        })
        .await
    }
}

/// A query's values as the driver takes them.
pub(super) fn sql_params(values: &[SqlValue]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| match value {
            SqlValue::Text(text) => text as &(dyn ToSql + Sync),
            SqlValue::Integer(n) => n as &(dyn ToSql + Sync),
            SqlValue::MaybeText(text) => text as &(dyn ToSql + Sync),
            SqlValue::MaybeInteger(n) => n as &(dyn ToSql + Sync),
            SqlValue::Bytes(bytes) => bytes as &(dyn ToSql + Sync),
        })
        .collect()
}

/// The whole batch in one statement, one array per column: a batch is one round trip, not one
/// a record as SQLite's. Records already stored are skipped.
const INSERT_INVOCATIONS: &str = concat!(
    "INSERT INTO invocations (",
    invocation_columns!("request, response", "attempts", "guards"),
    ")
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[], $8::boolean[], $9::text[], $10::integer[], $11::text[], $12::text[],
        $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[], $17::bigint[], $18::bigint[],
        $19::double precision[], $20::bigint[], $21::bigint[], $22::text[], $23::text[],
        $24::text[], $25::text[]::jsonb[], $26::bigint[], $27::bigint[], $28::text[]::jsonb[],
        $29::text[], $30::double precision[], $31::bigint[], $32::bigint[],
        $33::bigint[], $34::bigint[], $35::text[], $36::text[])
    ON CONFLICT (id) DO NOTHING"
);

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
    image_prompt_tokens: Counts,
    audio_prompt_tokens: Counts,
    /// JSON text, as `attempts`.
    guards: Texts,
    cache: Vec<Option<&'static str>>,
    saved_cost_usd: Vec<Option<f64>>,
    search_units: Counts,
    images: Counts,
    audio_seconds: Counts,
    characters: Counts,
    batch_id: Texts,
    custom_id: Texts,
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
            image_prompt_tokens: counts(|u| u.image_prompt_tokens),
            audio_prompt_tokens: counts(|u| u.audio_prompt_tokens),
            guards: batch.iter().map(|inv| guards_json(&inv.guards)).collect(),
            cache: batch
                .iter()
                .map(|inv| inv.cache.map(CacheStatus::as_str))
                .collect(),
            saved_cost_usd: batch.iter().map(|inv| inv.saved_cost_usd).collect(),
            search_units: counts(|u| u.search_units),
            images: counts(|u| u.images),
            audio_seconds: counts(|u| u.audio_seconds),
            characters: counts(|u| u.characters),
            batch_id: texts(|inv| &inv.batch_id),
            custom_id: texts(|inv| &inv.custom_id),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 36] {
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
            &self.image_prompt_tokens,
            &self.audio_prompt_tokens,
            &self.guards,
            &self.cache,
            &self.saved_cost_usd,
            &self.search_units,
            &self.images,
            &self.audio_seconds,
            &self.characters,
            &self.batch_id,
            &self.custom_id,
        ]
    }
}

/// A record's attempts as stored (see [`read::attempts_json`]). JSONB refuses `\u0000`, so NULs
/// go as in [`storable`]; else one such attempt would fail its whole batch.
fn attempts_json(attempts: &[Attempt]) -> Option<String> {
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
    read::attempts_json(&cleaned)
}

/// A record's guard outcomes as stored (see [`read::guards_json`]), NULs as in [`storable`]:
/// a deny reason or a guard's error may quote what it was shown.
fn guards_json(guards: &[GuardOutcome]) -> Option<String> {
    let cleaned: Vec<GuardOutcome> = guards
        .iter()
        .map(|g| GuardOutcome {
            guard: storable(&g.guard),
            reason: g.reason.as_deref().map(storable),
            changes: g
                .changes
                .iter()
                .map(|(kind, count)| (storable(kind), *count))
                .collect(),
            stage: g.stage,
            verdict: g.verdict,
            applied: g.applied,
        })
        .collect();
    read::guards_json(&cleaned)
}

/// Whether a name asked for (an id, a filter) holds NUL, which no stored one does (TEXT cannot
/// hold it): the server would refuse the query rather than find nothing, and such names are
/// the caller's to give.
pub(super) fn unstorable(asked: &[&str]) -> bool {
    asked.iter().any(|text| text.contains('\0'))
}

/// PostgreSQL's TEXT cannot hold NUL, which a raw (non-JSON) body may: one
/// such record would fail its whole batch, again on every retry.
pub(super) fn storable(text: &str) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_owned()
    }
}
