//! What `gateway usage` and `gateway invocations export` print: the usage table and its JSON
//! document, and the records as JSON lines or CSV. The numbers come from
//! [`Store::usage`] and [`Store::invocations_page`] (`store::report`).

use std::io::Write;

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::clock::format_time_ms;
use crate::store::report::{GroupBy, RecordRange, UsageRow};
use crate::store::{CacheStatus, GuardOutcome, Invocation, Store, StoreError};

/// Records an export reads at a time: its memory stays that of one page, however long the range.
const EXPORT_PAGE: u32 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the output: {0}")]
    Write(#[from] std::io::Error),
    #[error("cannot write CSV: {0}")]
    Csv(String),
}

impl From<csv::Error> for ReportError {
    fn from(error: csv::Error) -> ReportError {
        // An I/O error stays one: a closed pipe is told apart by its kind.
        if !error.is_io_error() {
            return ReportError::Csv(error.to_string());
        }
        match error.into_kind() {
            csv::ErrorKind::Io(io) => ReportError::Write(io),
            other => ReportError::Csv(format!("{other:?}")),
        }
    }
}

/// The table's headers of a row's numbers, in order.
const NUMBER_HEADERS: [&str; 11] = [
    "REQUESTS",
    "ERRORS",
    "PROMPT",
    "COMPLETION",
    "TOTAL",
    "CACHED_PROMPT",
    "CACHE_CREATION",
    "REASONING",
    "COST_USD",
    "P50_MS",
    "P95_MS",
];

/// `--json`: `{"filter": {...}, "rows": [...]}`, fields in a stable order.
#[derive(Debug, Serialize)]
pub struct UsageDocument<'a> {
    filter: Filter<'a>,
    rows: Vec<JsonRow<'a>>,
}

#[derive(Debug, Serialize)]
struct Filter<'a> {
    project_id: Option<&'a str>,
    since: Option<String>,
    until: Option<String>,
    by: Vec<&'static str>,
}

/// A usage row: its group's fields first, then its numbers (snake_case, as in the table).
#[derive(Debug, Serialize)]
struct JsonRow<'a> {
    #[serde(flatten)]
    group: GroupFields<'a>,
    requests: u64,
    errors: u64,
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    cached_prompt_tokens: u64,
    cache_creation_tokens: u64,
    reasoning_tokens: u64,
    cost_usd: f64,
    p50_duration_ms: Option<i64>,
    p95_duration_ms: Option<i64>,
}

/// A row's group values under their fields' names, in the order `--by` gave them.
#[derive(Debug)]
struct GroupFields<'a> {
    by: &'a [GroupBy],
    values: &'a [Option<String>],
}

impl Serialize for GroupFields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.by.len()))?;
        for (group, value) in self.by.iter().zip(self.values) {
            map.serialize_entry(group.field(), value)?;
        }
        map.end()
    }
}

/// The document `usage --json` prints for `rows`, read from `range` grouped `by`.
pub fn usage_json<'a>(
    range: &'a RecordRange,
    by: &'a [GroupBy],
    rows: &'a [UsageRow],
) -> UsageDocument<'a> {
    UsageDocument {
        filter: Filter {
            project_id: range.project_id.as_deref(),
            since: range.since_ms.map(format_time_ms),
            until: range.until_ms.map(format_time_ms),
            by: by.iter().map(|group| group.field()).collect(),
        },
        rows: rows
            .iter()
            .map(|row| JsonRow {
                group: GroupFields {
                    by,
                    values: &row.group,
                },
                requests: row.requests,
                errors: row.errors,
                prompt_tokens: row.prompt_tokens,
                completion_tokens: row.completion_tokens,
                total_tokens: row.total_tokens,
                cached_prompt_tokens: row.cached_prompt_tokens,
                cache_creation_tokens: row.cache_creation_tokens,
                reasoning_tokens: row.reasoning_tokens,
                cost_usd: row.cost_usd,
                p50_duration_ms: row.p50_duration_ms,
                p95_duration_ms: row.p95_duration_ms,
            })
            .collect(),
    }
}

/// The table: a header line, then a line per row; columns aligned (text left, numbers right),
/// `-` for a missing group value or percentile, costs to 6 decimals.
pub fn usage_table(by: &[GroupBy], rows: &[UsageRow]) -> String {
    let headers: Vec<String> = by
        .iter()
        .map(|group| group.field().to_ascii_uppercase())
        .chain(NUMBER_HEADERS.iter().map(|h| (*h).to_owned()))
        .collect();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let dash = || "-".to_owned();
            let millis = |ms: Option<i64>| ms.map(|ms| ms.to_string()).unwrap_or_else(dash);
            row.group
                .iter()
                .map(|value| value.clone().unwrap_or_else(dash))
                .chain([
                    row.requests.to_string(),
                    row.errors.to_string(),
                    row.prompt_tokens.to_string(),
                    row.completion_tokens.to_string(),
                    row.total_tokens.to_string(),
                    row.cached_prompt_tokens.to_string(),
                    row.cache_creation_tokens.to_string(),
                    row.reasoning_tokens.to_string(),
                    format!("{:.6}", row.cost_usd),
                    millis(row.p50_duration_ms),
                    millis(row.p95_duration_ms),
                ])
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..headers.len())
        .map(|column| {
            cells
                .iter()
                .map(|line| line[column].chars().count())
                .chain([headers[column].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut table = String::new();
    for line in std::iter::once(&headers).chain(&cells) {
        let padded: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, width))| {
                if column < by.len() {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        table.push_str(padded.join("  ").trim_end());
        table.push('\n');
    }
    table
}

/// What `invocations export` writes (its `--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One JSON object a line: [`Invocation::to_json`] (what `GET /invocations/{id}` answers,
    /// bodies, attempts and guard outcomes included) plus `keyPrefix`.
    #[value(
        help = "One JSON object a line, as `invocations show` prints it plus keyPrefix; bodies included"
    )]
    Jsonl,
    /// A header line ([`CSV_HEADER`]), then one flat line a record, without bodies.
    #[value(help = "A header line, then one flat line a record; no bodies")]
    Csv,
}

/// The columns of a CSV export. Columns added later come last, so that readers of the earlier
/// ones by position keep working.
pub const CSV_HEADER: [&str; 30] = [
    "id",
    "created_at",
    "project_id",
    "key_prefix",
    "user_id",
    "route",
    "plugin",
    "model",
    "type",
    "stream",
    "status",
    "http_status",
    "duration_ms",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "cached_prompt_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
    "cost_usd",
    "error",
    "image_prompt_tokens",
    "audio_prompt_tokens",
    "guards",
    "cache",
    "saved_cost_usd",
    "search_units",
    "images",
    "audio_seconds",
    "characters",
];

/// A text cell of a CSV export, safe to open in a spreadsheet: one that starts with `=`, `+`,
/// `-`, `@`, TAB or CR (which Excel, LibreOffice and Google Sheets read as a formula:
/// `=HYPERLINK(...)` in a caller's `user`) gets a `'` before it, as OWASP's guidance on CSV
/// injection says; the CSV writer then quotes it where RFC 4180 requires. Only text goes
/// through it: the numbers the gateway writes stay numbers.
pub fn csv_text(value: &str) -> std::borrow::Cow<'_, str> {
    match value.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') => format!("'{value}").into(),
        _ => value.into(),
    }
}

/// A record as a line of CSV, in [`CSV_HEADER`]'s order; empty where it has no value. Every
/// text cell goes through [`csv_text`], whoever wrote it: callers choose their `user` and
/// `model`, upstreams their error messages, operators their route and project names.
fn csv_record(record: &Invocation) -> [String; 30] {
    let text = |value: &Option<String>| csv_text(value.as_deref().unwrap_or_default()).into_owned();
    let number = |value: Option<u32>| value.map(|n| n.to_string()).unwrap_or_default();
    let usage = record.usage.as_ref();
    [
        record.id.to_string(),
        format_time_ms(record.created_at_ms),
        text(&record.project_id),
        text(&record.key_prefix),
        text(&record.user_id),
        text(&record.route),
        text(&record.plugin),
        text(&record.model),
        text(&record.kind),
        record.stream.to_string(),
        record.status.as_str().to_owned(),
        record.http_status.to_string(),
        record.duration_ms.to_string(),
        number(usage.map(|u| u.prompt_tokens)),
        number(usage.map(|u| u.completion_tokens)),
        number(usage.map(|u| u.total_tokens)),
        number(usage.and_then(|u| u.cached_prompt_tokens)),
        number(usage.and_then(|u| u.cache_creation_tokens)),
        number(usage.and_then(|u| u.reasoning_tokens)),
        record.cost_usd.map(|c| c.to_string()).unwrap_or_default(),
        text(&record.error),
        number(usage.and_then(|u| u.image_prompt_tokens)),
        number(usage.and_then(|u| u.audio_prompt_tokens)),
        csv_text(&guards_cell(&record.guards)).into_owned(),
        record
            .cache
            .map(CacheStatus::as_str)
            .unwrap_or_default()
            .to_owned(),
        record
            .saved_cost_usd
            .map(|c| c.to_string())
            .unwrap_or_default(),
        number(usage.and_then(|u| u.search_units)),
        number(usage.and_then(|u| u.images)),
        number(usage.and_then(|u| u.audio_seconds)),
        number(usage.and_then(|u| u.characters)),
    ]
}

/// A record's guard outcomes in a CSV cell: the JSON array JSON lines hold (what each guard
/// decided, at which stage, with its reason and counts), empty when no guard ran.
fn guards_cell(guards: &[GuardOutcome]) -> String {
    if guards.is_empty() {
        return String::new();
    }
    let outcomes: Vec<_> = guards.iter().map(GuardOutcome::to_json).collect();
    serde_json::Value::Array(outcomes).to_string()
}

/// Writes the records of `range` to `out` in `format`, oldest first, a page at a time;
/// returns how many.
pub async fn export(
    store: &Store,
    range: &RecordRange,
    format: ExportFormat,
    mut out: impl Write,
) -> Result<u64, ReportError> {
    let count = export_pages(store, range, format, |chunk| {
        std::future::ready(out.write_all(&chunk))
    })
    .await?;
    out.flush()?;
    Ok(count)
}

/// The records of `range` in `format`, oldest first, handed to `sink` a page's lines at a time
/// (the CSV header with the first): a sink that sends them on (an HTTP body) holds no more than
/// a page. Returns how many records there were; stops at the sink's first error.
pub async fn export_pages<Sent>(
    store: &Store,
    range: &RecordRange,
    format: ExportFormat,
    mut sink: impl FnMut(Vec<u8>) -> Sent,
) -> Result<u64, ReportError>
where
    Sent: std::future::Future<Output = std::io::Result<()>>,
{
    let bodies = format == ExportFormat::Jsonl;
    let mut count = 0;
    let mut after = None;
    loop {
        let page = store
            .invocations_page(range, after.as_ref(), bodies, EXPORT_PAGE)
            .await?;
        let mut chunk = Vec::new();
        match format {
            ExportFormat::Csv => {
                let mut writer = csv::Writer::from_writer(&mut chunk);
                if after.is_none() {
                    writer.write_record(CSV_HEADER)?;
                }
                for record in &page.records {
                    writer.write_record(csv_record(record))?;
                }
                writer.flush()?;
            }
            ExportFormat::Jsonl => {
                for record in &page.records {
                    let mut json = record.to_json();
                    if let Some(object) = json.as_object_mut() {
                        object.insert("keyPrefix".to_owned(), record.key_prefix.clone().into());
                    }
                    serde_json::to_writer(&mut chunk, &json).map_err(std::io::Error::from)?;
                    chunk.push(b'\n');
                }
            }
        }
        count += page.records.len() as u64;
        sink(chunk).await?;
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(count)
}

/// An audit event as `GET /admin/audit` and `gateway audit export` write it: one JSON object,
/// a line of JSON lines.
pub fn audit_json(event: &crate::store::AuditEvent) -> serde_json::Value {
    serde_json::json!({
        "id": event.id.to_string(),
        "at": format_time_ms(event.at_ms),
        "actor": event.actor,
        "role": event.role,
        "via": event.via,
        "address": event.address,
        "action": event.action,
        "endpoint": event.endpoint,
        "target": event.target,
        "before": event.before,
        "after": event.after,
        "outcome": event.outcome.as_str(),
        "status": event.status,
        "requestId": event.request_id.map(|id| id.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(group: Vec<Option<&str>>) -> UsageRow {
        UsageRow {
            group: group.into_iter().map(|g| g.map(str::to_owned)).collect(),
            requests: 12,
            errors: 1,
            prompt_tokens: 100,
            completion_tokens: 20,
            total_tokens: 120,
            cached_prompt_tokens: 30,
            cache_creation_tokens: 0,
            reasoning_tokens: 5,
            cost_usd: 0.25,
            p50_duration_ms: Some(40),
            p95_duration_ms: None,
        }
    }

    #[test]
    fn the_table_aligns_columns_and_shows_missing_values_as_dashes() {
        let by = [GroupBy::Model, GroupBy::User];
        let table = usage_table(
            &by,
            &[row(vec![Some("gpt-4o"), None]), row(vec![None, Some("u")])],
        );
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        let header: Vec<&str> = lines[0].split_whitespace().collect();
        assert_eq!(
            header,
            [
                "MODEL",
                "USER_ID",
                "REQUESTS",
                "ERRORS",
                "PROMPT",
                "COMPLETION",
                "TOTAL",
                "CACHED_PROMPT",
                "CACHE_CREATION",
                "REASONING",
                "COST_USD",
                "P50_MS",
                "P95_MS"
            ]
        );
        let first: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            first,
            [
                "gpt-4o", "-", "12", "1", "100", "20", "120", "30", "0", "5", "0.250000", "40", "-"
            ]
        );
        assert_eq!(lines[2].split_whitespace().next(), Some("-"));
        // Every line's columns end where the header's do.
        let ends = |line: &str| line.len();
        assert_eq!(ends(lines[1]), ends(lines[0]));
    }

    #[test]
    fn the_json_names_groups_and_numbers_in_order_and_keeps_nulls() {
        let range = RecordRange {
            project_id: Some("p".into()),
            since_ms: Some(1_777_593_600_000),
            until_ms: None,
            ..RecordRange::default()
        };
        let by = [GroupBy::Model, GroupBy::Key];
        let rows = [row(vec![Some("m"), None])];
        let text = serde_json::to_string(&usage_json(&range, &by, &rows)).unwrap();
        assert!(
            text.starts_with(
                r#"{"filter":{"project_id":"p","since":"2026-05-01T00:00:00.000Z","until":null,"by":["model","key_prefix"]},"rows":[{"model":"m","key_prefix":null,"requests":12,"errors":1,"prompt_tokens":100,"#
            ),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let row = &json["rows"][0];
        assert_eq!(row["cached_prompt_tokens"], 30);
        assert_eq!(row["cost_usd"], 0.25);
        assert_eq!(row["p50_duration_ms"], 40);
        assert_eq!(row["p95_duration_ms"], serde_json::Value::Null);
        assert_eq!(row.as_object().unwrap().len(), 13);
    }

    #[test]
    fn a_text_cell_that_a_spreadsheet_would_read_as_a_formula_is_made_text() {
        for (given, written) in [
            (
                "=HYPERLINK(\"https://evil.example\",\"x\")",
                "'=HYPERLINK(\"https://evil.example\",\"x\")",
            ),
            ("+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"),
            ("-2+3", "'-2+3"),
            ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
            ("\t=1", "'\t=1"),
            ("\r=1", "'\r=1"),
            ("'already quoted", "'already quoted"),
            ("user-1 = fine", "user-1 = fine"),
            ("gpt-4o", "gpt-4o"),
            ("", ""),
        ] {
            assert_eq!(csv_text(given), written, "{given:?}");
        }
        // Read back as a CSV reader reads it: one cell, the quote kept before the text.
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer
            .write_record([&*csv_text("=cmd|' /C calc'!A0,\"x\""), "12"])
            .unwrap();
        let bytes = writer.into_inner().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            "\"'=cmd|' /C calc'!A0,\"\"x\"\"\",12\n"
        );
    }

    #[test]
    fn a_csv_line_has_a_value_or_nothing_for_every_column() {
        let mut record = Invocation::begun(uuid::Uuid::now_v7(), 1_777_593_600_000);
        record.error = Some("bad, \"quoted\"\nline".into());
        record.cost_usd = Some(0.000_000_1);
        record.user_id = Some("=HYPERLINK(\"https://evil.example\")".into());
        record.model = Some("@SUM(1)".into());
        let line = csv_record(&record);
        assert_eq!(
            line[4], "'=HYPERLINK(\"https://evil.example\")",
            "a caller's text"
        );
        assert_eq!(line[7], "'@SUM(1)");
        assert_eq!(line.len(), CSV_HEADER.len());
        assert_eq!(line[1], "2026-05-01T00:00:00.000Z");
        assert_eq!(line[9], "false");
        assert_eq!(line[10], "error");
        assert_eq!(line[13], "", "no usage: empty");
        assert_eq!(line[19], "0.0000001", "no exponent");
        assert_eq!(line[21..23], ["", ""], "no usage: no image or audio tokens");
        assert_eq!(line[23], "", "no guard ran: empty");
        assert_eq!(
            line[24..],
            ["", "", "", "", "", ""],
            "no cache, no search units, no images, no audio, no characters: empty"
        );
        record.usage = Some(crate::store::TokenUsage {
            prompt_tokens: 1000,
            audio_prompt_tokens: Some(600),
            search_units: Some(2),
            images: Some(3),
            audio_seconds: Some(61),
            characters: Some(4096),
            ..Default::default()
        });
        let line = csv_record(&record);
        assert_eq!(line[13], "1000");
        assert_eq!(line[26..], ["2", "3", "61", "4096"]);
        // JSON lines carry the same usage, by its field names.
        let json = record.to_json();
        assert_eq!(
            (
                &json["usage"]["audio_seconds"],
                &json["usage"]["characters"]
            ),
            (&serde_json::json!(61), &serde_json::json!(4096))
        );
        assert_eq!(
            (line[21].as_str(), line[22].as_str()),
            ("", "600"),
            "the new columns come last, in CSV_HEADER's order"
        );
        assert_eq!(
            CSV_HEADER[21..],
            [
                "image_prompt_tokens",
                "audio_prompt_tokens",
                "guards",
                "cache",
                "saved_cost_usd",
                "search_units",
                "images",
                "audio_seconds",
                "characters"
            ]
        );
        record.status = crate::store::InvocationStatus::Blocked;
        record.guards = vec![crate::store::GuardOutcome {
            guard: "words".into(),
            stage: crate::store::GuardStage::Request,
            verdict: crate::store::GuardVerdictKind::Deny,
            reason: Some("says \"x\", twice".into()),
            changes: Default::default(),
            applied: true,
        }];
        let line = csv_record(&record);
        assert_eq!(line[10], "blocked");
        let guards: serde_json::Value = serde_json::from_str(&line[23]).unwrap();
        assert_eq!(
            guards,
            serde_json::json!([{"guard": "words", "stage": "request", "verdict": "deny",
                "reason": "says \"x\", twice", "changes": {}, "applied": true}])
        );
        record.cache = Some(crate::store::CacheStatus::Hit);
        record.saved_cost_usd = Some(0.000_012_3);
        let line = csv_record(&record);
        assert_eq!(line[24..26], ["hit", "0.0000123"], "no exponent");
        record.cache = Some(crate::store::CacheStatus::Skip);
        record.saved_cost_usd = None;
        assert_eq!(csv_record(&record)[24..26], ["skip", ""]);
        let mut writer = csv::Writer::from_writer(Vec::new());
        writer.write_record(&line).unwrap();
        let bytes = writer.into_inner().unwrap();
        let read: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(&bytes[..])
            .records()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(&read[0][20], "bad, \"quoted\"\nline");
    }
}
