//! What `gateway usage` and `gateway invocations export` read from the invocation records.
//!
//! Both backends run the same SQL, built here with their own parameter placeholders: the sums
//! are `GROUP BY` aggregates, the latency percentiles are picked (by [`nearest_rank`]) from each
//! group's durations streamed in order, and an export reads the records a page at a time in
//! `(created_at, id)` order, never all at once.

use std::collections::HashMap;

use super::{Invocation, InvocationStatus};

/// Which invocation records a report covers: those created in `[since, until)` (Unix ms; an
/// absent bound is open), of one project or of all, and of one user, route, model or outcome
/// where one is given (the admin console's filters).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordRange {
    pub project_id: Option<String>,
    /// Only these projects' records (what a project role sees), whatever `project_id` says.
    pub projects: Option<Vec<String>>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub user_id: Option<String>,
    pub route: Option<String>,
    pub model: Option<String>,
    pub status: Option<InvocationStatus>,
}

/// Which records a page starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Exports: `(created_at, id)` ascending.
    #[default]
    OldestFirst,
    /// The admin console's list: descending.
    NewestFirst,
}

/// What usage rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupBy {
    /// The UTC date of `created_at`.
    Day,
    /// The UTC hour of `created_at`, named by its start (RFC 3339).
    Hour,
    Model,
    Route,
    User,
    /// The stored key prefix (never a whole key: only prefixes are recorded).
    Key,
    Project,
}

const MS_PER_DAY: i64 = 86_400_000;
const MS_PER_HOUR: i64 = 3_600_000;

impl GroupBy {
    /// The group's field in a usage row (`--json`) and, upper-cased, its table column: the
    /// name of the column `invocations export` writes it in.
    pub fn field(self) -> &'static str {
        match self {
            GroupBy::Day => "day",
            GroupBy::Hour => "hour",
            GroupBy::Model => "model",
            GroupBy::Route => "route",
            GroupBy::User => "user_id",
            GroupBy::Key => "key_prefix",
            GroupBy::Project => "project_id",
        }
    }

    /// The grouped expression, the same text on both backends. The day is the number of whole
    /// UTC days since 1970 (integer division on both), named as a date by [`day_name`].
    fn expression(self) -> &'static str {
        match self {
            GroupBy::Day => "created_at / 86400000",
            GroupBy::Hour => "created_at / 3600000",
            GroupBy::Model => "model",
            GroupBy::Route => "route",
            GroupBy::User => "user_id",
            GroupBy::Key => "key_prefix",
            GroupBy::Project => "project_id",
        }
    }
}

/// The RFC 3339 start of the UTC hour `hours` after 1970 (what [`GroupBy::Hour`] selects).
pub(super) fn hour_name(hours: i64) -> String {
    crate::clock::format_time_ms(hours.saturating_mul(MS_PER_HOUR))
}

/// `YYYY-MM-DD` of the UTC day `days` after 1970-01-01 (what [`GroupBy::Day`] selects).
pub(super) fn day_name(days: i64) -> String {
    let mut text = crate::clock::format_time_ms(days.saturating_mul(MS_PER_DAY));
    text.truncate("YYYY-MM-DD".len());
    text
}

/// What one group of records adds up to.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// The group's values, one for each [`GroupBy`] asked for, in that order; `None` where the
    /// records have none (no route, model, user, ...).
    pub group: Vec<Option<String>>,
    /// Invocation records, whatever their outcome.
    pub requests: u64,
    /// Records whose status is not `success` (`error`, `rate_limited`, `blocked`, `cancelled`).
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub cache_creation_tokens: u64,
    pub reasoning_tokens: u64,
    /// The sum of the costs recorded (calls of an unpriced model add nothing).
    pub cost_usd: f64,
    /// Nearest-rank percentiles of `duration_ms`; `None` for a group of no records.
    pub p50_duration_ms: Option<i64>,
    pub p95_duration_ms: Option<i64>,
}

/// The 1-based rank, among `n` values sorted ascending, of their `percent`th percentile by the
/// nearest-rank method: the smallest rank whose value at least `percent`% of the values are
/// not above, `ceil(percent * n / 100)` (at least 1). Always one of the values, never an
/// interpolation, so both backends agree exactly. `None` for no values.
pub fn nearest_rank(percent: u64, n: u64) -> Option<u64> {
    (n > 0).then(|| percent.saturating_mul(n).div_ceil(100).clamp(1, n))
}

/// A value bound to a query's placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SqlValue {
    Text(String),
    Integer(i64),
    /// NULL or text: PostgreSQL binds a NULL with its column's type.
    MaybeText(Option<String>),
    MaybeInteger(Option<i64>),
    Bytes(Vec<u8>),
}

/// A statement and its values, `values[i]` bound to placeholder `i + 1`.
#[derive(Debug, Clone)]
pub(super) struct Query {
    pub sql: String,
    pub values: Vec<SqlValue>,
}

/// Builds a statement's values along with their placeholders: `?N` (SQLite) or `$N`
/// (PostgreSQL).
struct Binder {
    placeholder: fn(usize) -> String,
    values: Vec<SqlValue>,
}

impl Binder {
    fn new(placeholder: fn(usize) -> String) -> Binder {
        Binder {
            placeholder,
            values: Vec::new(),
        }
    }

    fn bind(&mut self, value: SqlValue) -> String {
        self.values.push(value);
        (self.placeholder)(self.values.len())
    }

    /// The range's conditions: only those given, so that each combination is a statement of
    /// its own that walks its index (`created_at`, or `project_id, created_at`).
    fn range(&mut self, range: &RecordRange) -> Vec<String> {
        let mut conditions = Vec::new();
        if let Some(project_id) = &range.project_id {
            conditions.push(format!(
                "project_id = {}",
                self.bind(SqlValue::Text(project_id.clone()))
            ));
        }
        if let Some(projects) = &range.projects {
            let bound: Vec<String> = projects
                .iter()
                .map(|project| self.bind(SqlValue::Text(project.clone())))
                .collect();
            conditions.push(if bound.is_empty() {
                "1 = 0".to_owned()
            } else {
                format!("project_id IN ({})", bound.join(", "))
            });
        }
        if let Some(since) = range.since_ms {
            conditions.push(format!(
                "created_at >= {}",
                self.bind(SqlValue::Integer(since))
            ));
        }
        if let Some(until) = range.until_ms {
            conditions.push(format!(
                "created_at < {}",
                self.bind(SqlValue::Integer(until))
            ));
        }
        let texts = [
            ("user_id", &range.user_id),
            ("route", &range.route),
            ("model", &range.model),
        ];
        for (column, value) in texts {
            if let Some(value) = value {
                let bound = self.bind(SqlValue::Text(value.clone()));
                conditions.push(format!("{column} = {bound}"));
            }
        }
        if let Some(status) = range.status {
            let bound = self.bind(SqlValue::Text(status.as_str().to_owned()));
            conditions.push(format!("status = {bound}"));
        }
        conditions
    }

    fn query(self, sql: String) -> Query {
        Query {
            sql,
            values: self.values,
        }
    }
}

/// ` WHERE a AND b`, or nothing for no conditions.
pub(super) fn where_clause(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    }
}

/// The grouped expressions, and `1, 2, ...` naming them in `GROUP BY` / `ORDER BY`.
fn group_columns(by: &[GroupBy]) -> (String, String) {
    let select = by
        .iter()
        .map(|group| format!("{}, ", group.expression()))
        .collect();
    let positions = (1..=by.len())
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    (select, positions)
}

/// One row per group: the `by.len()` group values, then `count`, `errors`, the six token sums
/// (prompt, completion, total, cached prompt, cache creation, reasoning: BIGINT, 0 over no
/// records) and the cost (DOUBLE PRECISION). Without groups: exactly one row.
pub(super) fn totals_query(
    range: &RecordRange,
    by: &[GroupBy],
    placeholder: fn(usize) -> String,
) -> Query {
    let mut binder = Binder::new(placeholder);
    let conditions = binder.range(range);
    let (groups, positions) = group_columns(by);
    let sum = |column: &str| format!("CAST(COALESCE(SUM({column}), 0) AS BIGINT)");
    let sql = format!(
        "SELECT {groups}count(*), \
         {}, {}, {}, {}, {}, {}, {}, \
         CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION) \
         FROM invocations{}{}",
        sum("CASE WHEN status = 'success' THEN 0 ELSE 1 END"),
        sum("prompt_tokens"),
        sum("completion_tokens"),
        sum("total_tokens"),
        sum("cached_prompt_tokens"),
        sum("cache_creation_tokens"),
        sum("reasoning_tokens"),
        where_clause(&conditions),
        if by.is_empty() {
            String::new()
        } else {
            format!(" GROUP BY {positions}")
        },
    );
    binder.query(sql)
}

/// Every record's group values and `duration_ms`, by group and then duration ascending: what
/// [`UsageTally::duration`] is fed, one row at a time.
pub(super) fn durations_query(
    range: &RecordRange,
    by: &[GroupBy],
    placeholder: fn(usize) -> String,
) -> Query {
    let mut binder = Binder::new(placeholder);
    let conditions = binder.range(range);
    let (groups, positions) = group_columns(by);
    let order = if by.is_empty() {
        "1".to_owned()
    } else {
        format!("{positions}, {}", by.len() + 1)
    };
    let sql = format!(
        "SELECT {groups}duration_ms FROM invocations{} ORDER BY {order}",
        where_clause(&conditions)
    );
    binder.query(sql)
}

/// Where an export page ends: the `(created_at, id)` of its last record, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    created_at_ms: i64,
    id: String,
}

impl Cursor {
    pub(super) fn new(created_at_ms: i64, id: String) -> Cursor {
        Cursor { created_at_ms, id }
    }

    /// The cursor as the admin API hands it out: `CREATED_AT_MS.ID`.
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_at_ms, self.id)
    }

    /// A cursor [`Cursor::token`] made; `None` for any other text.
    pub fn parse(token: &str) -> Option<Cursor> {
        let (at, id) = token.split_once('.')?;
        let id = uuid::Uuid::parse_str(id).ok()?;
        Some(Cursor::new(at.parse().ok()?, id.to_string()))
    }
}

/// Records of an export, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub records: Vec<Invocation>,
    /// Where the next page starts; `None` when this one was the last.
    pub next: Option<Cursor>,
}

impl Page {
    /// `records`, read with a limit of `limit`, the last of which is stored as `last`: a full
    /// page may have a next one.
    pub(super) fn of(records: Vec<Invocation>, last: Option<Cursor>, limit: u32) -> Page {
        let full = records.len() >= limit as usize;
        Page {
            records,
            next: last.filter(|_| full),
        }
    }
}

/// At most `limit` records of `range` after `after` (from the start when `None`), in
/// `(created_at, id)` order, ascending or descending. `select` is the backend's
/// `SELECT columns FROM invocations`.
pub(super) fn page_query(
    select: &str,
    range: &RecordRange,
    after: Option<&Cursor>,
    order: Order,
    limit: u32,
    placeholder: fn(usize) -> String,
) -> Query {
    let mut binder = Binder::new(placeholder);
    let mut conditions = binder.range(range);
    let (past, direction) = match order {
        Order::OldestFirst => (">", ""),
        Order::NewestFirst => ("<", " DESC"),
    };
    if let Some(after) = after {
        // Keyset: `created_at >= x` walks the index; the rest skips what was already read.
        let at = binder.bind(SqlValue::Integer(after.created_at_ms));
        let id = binder.bind(SqlValue::Text(after.id.clone()));
        conditions.push(format!(
            "created_at {past}= {at} AND (created_at {past} {at} OR id {past} {id})"
        ));
    }
    let sql = format!(
        "{select}{} ORDER BY created_at{direction}, id{direction} LIMIT {limit}",
        where_clause(&conditions)
    );
    binder.query(sql)
}

/// Puts the usage rows together from [`totals_query`]'s rows and then [`durations_query`]'s,
/// keeping nothing per record: each group's percentiles are picked as its sorted durations go
/// by, at the ranks its count gives.
#[derive(Debug, Default)]
pub(super) struct UsageTally {
    rows: Vec<UsageRow>,
    index: HashMap<Vec<Option<String>>, usize>,
    /// The group the durations are of now: its row, and how many of its durations went by.
    current: Option<(Vec<Option<String>>, Option<usize>, u64)>,
}

impl UsageTally {
    /// A row of [`totals_query`]: `group`, its eight counts (in that query's order) and cost.
    pub(super) fn totals(&mut self, group: Vec<Option<String>>, counts: [i64; 8], cost_usd: f64) {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        let row = UsageRow {
            group: group.clone(),
            requests: count(counts[0]),
            errors: count(counts[1]),
            prompt_tokens: count(counts[2]),
            completion_tokens: count(counts[3]),
            total_tokens: count(counts[4]),
            cached_prompt_tokens: count(counts[5]),
            cache_creation_tokens: count(counts[6]),
            reasoning_tokens: count(counts[7]),
            cost_usd,
            p50_duration_ms: None,
            p95_duration_ms: None,
        };
        self.index.insert(group, self.rows.len());
        self.rows.push(row);
    }

    /// The next row of [`durations_query`].
    pub(super) fn duration(&mut self, group: Vec<Option<String>>, duration_ms: i64) {
        let same = matches!(&self.current, Some((current, _, _)) if *current == group);
        if !same {
            let row = self.index.get(&group).copied();
            self.current = Some((group, row, 0));
        }
        let Some((_, Some(row), seen)) = &mut self.current else {
            // Not counted by the totals (cannot happen within one snapshot): no row to fill.
            return;
        };
        *seen += 1;
        let row = &mut self.rows[*row];
        if nearest_rank(50, row.requests) == Some(*seen) {
            row.p50_duration_ms = Some(duration_ms);
        }
        if nearest_rank(95, row.requests) == Some(*seen) {
            row.p95_duration_ms = Some(duration_ms);
        }
    }

    /// The rows, ordered by their group values (byte order, groups without a value last), the
    /// same on both backends whatever their collation.
    pub(super) fn finish(mut self) -> Vec<UsageRow> {
        self.rows.sort_by_cached_key(|row| {
            row.group
                .iter()
                .map(|value| (value.is_none(), value.clone()))
                .collect::<Vec<_>>()
        });
        self.rows
    }
}

/// Records of two projects over two UTC days (2026-05-01 and -02), for the backends' tests of
/// reports: models, routes, users and usage present and absent, every status.
#[cfg(test)]
pub(super) mod fixture {
    use uuid::Uuid;

    use super::{GroupBy, RecordRange};
    use crate::store::{Invocation, InvocationStatus, TokenUsage};

    /// 2026-05-01T00:00:00Z.
    pub(crate) const DAY0: i64 = 1_777_593_600_000;
    pub(crate) const DAY1: i64 = DAY0 + 86_400_000;

    fn tokens(
        prompt: u32,
        completion: u32,
        cached: Option<u32>,
        creation: Option<u32>,
        reasoning: Option<u32>,
    ) -> Option<TokenUsage> {
        Some(TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_prompt_tokens: cached,
            cache_creation_tokens: creation,
            reasoning_tokens: reasoning,
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
            search_units: None,
            images: None,
            audio_seconds: None,
            characters: None,
        })
    }

    /// A record of `project` (and its one key) at `at` taking `duration_ms`; `model` also
    /// gives it a route.
    fn record(
        project: &str,
        (user, model): (Option<&str>, Option<&str>),
        status: InvocationStatus,
        (usage, cost): (Option<TokenUsage>, Option<f64>),
        at: i64,
        duration_ms: i64,
    ) -> Invocation {
        Invocation {
            project_id: Some(project.into()),
            key_prefix: Some(format!("gw_{project}_key000000")),
            user_id: user.map(str::to_owned),
            route: model.map(|_| "r".to_owned()),
            plugin: model.map(|_| "openai".to_owned()),
            model: model.map(str::to_owned),
            kind: Some("chat".into()),
            status,
            http_status: 200,
            usage,
            cost_usd: cost,
            duration_ms,
            request: Some(r#"{"big":"body"}"#.into()),
            response: Some("answer".into()),
            ..Invocation::begun(Uuid::now_v7(), at)
        }
    }

    pub(crate) fn records() -> Vec<Invocation> {
        use InvocationStatus::*;
        vec![
            record(
                "a",
                (Some("u1"), Some("m1")),
                Success,
                (tokens(10, 5, Some(2), Some(1), Some(3)), Some(0.5)),
                DAY0 + 1_000,
                100,
            ),
            record(
                "a",
                (None, Some("m2")),
                Success,
                (tokens(20, 10, None, None, None), None),
                DAY0 + 2_000,
                300,
            ),
            // The last millisecond of the first day.
            record(
                "b",
                (Some("u1"), Some("m1")),
                Error,
                (None, None),
                DAY1 - 1,
                50,
            ),
            record("b", (Some("u2"), None), RateLimited, (None, None), DAY1, 0),
            record(
                "a",
                (Some("u2"), Some("m1")),
                Success,
                (tokens(1, 1, Some(1), None, None), Some(0.25)),
                DAY1 + 5,
                200,
            ),
        ]
    }

    /// Ranges and groupings both backends must answer alike.
    pub(crate) fn cases() -> Vec<(RecordRange, Vec<GroupBy>)> {
        let all = RecordRange::default();
        let middle = RecordRange {
            project_id: None,
            since_ms: Some(DAY0 + 2_000),
            until_ms: Some(DAY1 + 5),
            ..RecordRange::default()
        };
        let b = RecordRange {
            project_id: Some("b".into()),
            ..RecordRange::default()
        };
        let none = RecordRange {
            since_ms: Some(DAY1 + 6),
            ..RecordRange::default()
        };
        vec![
            (all.clone(), vec![]),
            (all.clone(), vec![GroupBy::Day]),
            (all.clone(), vec![GroupBy::Model]),
            (all.clone(), vec![GroupBy::Route]),
            (all.clone(), vec![GroupBy::User]),
            (all.clone(), vec![GroupBy::Key]),
            (all.clone(), vec![GroupBy::Project]),
            (all, vec![GroupBy::Day, GroupBy::Model, GroupBy::User]),
            (middle.clone(), vec![]),
            (middle, vec![GroupBy::Model]),
            (b.clone(), vec![]),
            (b, vec![GroupBy::Day]),
            (none.clone(), vec![]),
            (none, vec![GroupBy::Model]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_the_smallest_rank_covering_the_percentage() {
        assert_eq!(nearest_rank(50, 0), None);
        assert_eq!(nearest_rank(50, 1), Some(1));
        assert_eq!(nearest_rank(95, 1), Some(1));
        // Of 1..=4: p50 is 2 (half the values are <= 2), not the interpolated 2.5.
        assert_eq!(nearest_rank(50, 4), Some(2));
        assert_eq!(nearest_rank(50, 5), Some(3));
        assert_eq!(nearest_rank(95, 20), Some(19));
        assert_eq!(nearest_rank(95, 21), Some(20));
        assert_eq!(nearest_rank(95, 100), Some(95));
        assert_eq!(nearest_rank(95, 101), Some(96));
        assert_eq!(nearest_rank(100, 7), Some(7));
        assert_eq!(nearest_rank(1, 7), Some(1));
    }

    /// The percentiles by sorting, for comparison with the streamed ones.
    fn sorted_percentile(values: &[i64], percent: u64) -> Option<i64> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let rank = nearest_rank(percent, sorted.len() as u64)?;
        Some(sorted[rank as usize - 1])
    }

    #[test]
    fn the_tally_picks_each_groups_percentiles_from_its_sorted_durations() {
        let groups: [(Option<&str>, &[i64]); 3] = [
            (Some("b"), &[40, 10, 30, 20]),
            (None, &[7]),
            (Some("a"), &(1..=20).rev().collect::<Vec<_>>()),
        ];
        let mut tally = UsageTally::default();
        for (group, durations) in &groups {
            let mut counts = [0; 8];
            counts[0] = durations.len() as i64;
            tally.totals(vec![group.map(str::to_owned)], counts, 0.5);
        }
        // As the query delivers them: by group, then duration ascending.
        for (group, durations) in &groups {
            let mut sorted = durations.to_vec();
            sorted.sort_unstable();
            for duration in sorted {
                tally.duration(vec![group.map(str::to_owned)], duration);
            }
        }
        // A group the totals did not count is ignored.
        tally.duration(vec![Some("zzz".into())], 1);
        let rows = tally.finish();
        let named: Vec<_> = rows.iter().map(|r| r.group[0].as_deref()).collect();
        assert_eq!(named, [Some("a"), Some("b"), None], "None sorts last");
        for (group, durations) in &groups {
            let row = rows
                .iter()
                .find(|r| r.group[0].as_deref() == *group)
                .unwrap();
            assert_eq!(row.p50_duration_ms, sorted_percentile(durations, 50));
            assert_eq!(row.p95_duration_ms, sorted_percentile(durations, 95));
        }
        let b = &rows[1];
        assert_eq!((b.p50_duration_ms, b.p95_duration_ms), (Some(20), Some(40)));
        let a = &rows[0];
        assert_eq!((a.p50_duration_ms, a.p95_duration_ms), (Some(10), Some(19)));
    }

    #[test]
    fn a_total_over_no_records_has_no_percentiles() {
        let mut tally = UsageTally::default();
        tally.totals(Vec::new(), [0; 8], 0.0);
        let rows = tally.finish();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].requests, 0);
        assert_eq!(rows[0].p50_duration_ms, None);
    }

    #[test]
    fn days_are_named_as_utc_dates() {
        assert_eq!(day_name(0), "1970-01-01");
        // 2026-05-01T23:59:59.999Z is still that day.
        let ms: i64 = 1_777_679_999_999;
        assert_eq!(day_name(ms / MS_PER_DAY), "2026-05-01");
        assert_eq!(day_name((ms + 1) / MS_PER_DAY), "2026-05-02");
    }

    fn question(n: usize) -> String {
        format!("?{n}")
    }

    #[test]
    fn queries_bind_only_the_bounds_given() {
        let all = totals_query(&RecordRange::default(), &[], question);
        assert!(!all.sql.contains("WHERE"), "{}", all.sql);
        assert!(!all.sql.contains("GROUP BY"), "{}", all.sql);
        assert!(all.values.is_empty());

        let range = RecordRange {
            project_id: Some("p".into()),
            since_ms: Some(10),
            until_ms: Some(20),
            ..RecordRange::default()
        };
        let grouped = totals_query(&range, &[GroupBy::Day, GroupBy::Model], question);
        assert!(
            grouped.sql.contains(
                "WHERE project_id = ?1 AND created_at >= ?2 AND created_at < ?3 GROUP BY 1, 2"
            ),
            "{}",
            grouped.sql
        );
        assert_eq!(
            grouped.values,
            [
                SqlValue::Text("p".into()),
                SqlValue::Integer(10),
                SqlValue::Integer(20)
            ]
        );
        let durations = durations_query(&range, &[GroupBy::Model], |n| format!("${n}"));
        assert!(
            durations.sql.ends_with("created_at < $3 ORDER BY 1, 2"),
            "{}",
            durations.sql
        );

        let after = Cursor::new(15, "id-x".into());
        let page = page_query(
            "SELECT x FROM invocations",
            &range,
            Some(&after),
            Order::OldestFirst,
            7,
            question,
        );
        assert!(
            page.sql.ends_with(
                "created_at >= ?4 AND (created_at > ?4 OR id > ?5) \
                 ORDER BY created_at, id LIMIT 7"
            ),
            "{}",
            page.sql
        );
        assert_eq!(page.values.len(), 5);

        let newest = page_query(
            "SELECT x FROM invocations",
            &range,
            Some(&after),
            Order::NewestFirst,
            7,
            question,
        );
        assert!(
            newest.sql.ends_with(
                "created_at <= ?4 AND (created_at < ?4 OR id < ?5) \
                 ORDER BY created_at DESC, id DESC LIMIT 7"
            ),
            "{}",
            newest.sql
        );
    }

    #[test]
    fn filters_bind_each_column_given() {
        let range = RecordRange {
            user_id: Some("u".into()),
            model: Some("m".into()),
            status: Some(InvocationStatus::RateLimited),
            ..RecordRange::default()
        };
        let query = totals_query(&range, &[GroupBy::Hour], question);
        assert!(
            query
                .sql
                .contains("WHERE user_id = ?1 AND model = ?2 AND status = ?3 GROUP BY 1"),
            "{}",
            query.sql
        );
        assert!(query.sql.starts_with("SELECT created_at / 3600000, "));
        assert_eq!(query.values[2], SqlValue::Text("rate_limited".into()));
    }

    #[test]
    fn hours_are_named_by_their_start() {
        assert_eq!(hour_name(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            hour_name(1_777_679_999_999 / MS_PER_HOUR),
            "2026-05-01T23:00:00.000Z"
        );
    }

    #[test]
    fn a_cursor_reads_back_its_token_and_nothing_else() {
        let id = uuid::Uuid::now_v7().to_string();
        let cursor = Cursor::new(1_234, id.clone());
        assert_eq!(Cursor::parse(&cursor.token()), Some(cursor));
        for bad in ["", "1234", "x.y", &format!("x.{id}"), "12.not-a-uuid"] {
            assert_eq!(Cursor::parse(bad), None, "{bad:?}");
        }
    }
}
