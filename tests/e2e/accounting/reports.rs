//! `gateway usage` and `gateway invocations export` against a real gateway: a scripted set of
//! calls (two projects with a key each, two models, cached and reasoning tokens, an upstream
//! error, calls with and without a user id) in two batches a moment apart; then the report's
//! totals, grouped and filtered every way, are checked against the invocation records
//! themselves (`invocations show`), and the export's JSON lines and CSV against the same
//! records. On the default store (SQLite) and on PostgreSQL.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use gateway_test_support::{
    Gateway, OpenAiUpstream, Reply, Route, TestDatabase, chat_request, with,
};
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "sk-test-reports-caller-0123456789";
const ROUTE: &str = "priced";
const MODEL_A: &str = "gpt-4o-mini";
const MODEL_B: &str = "o3-mini";

/// The columns of `invocations export --format csv`, in order (the contract; columns added
/// later come last).
const CSV_HEADER: [&str; 30] = [
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

/// One scripted call: who makes it, for which model, as which user, and what the upstream
/// answers (`None`: a 500).
struct Call {
    second_project: bool,
    model: &'static str,
    user: Option<&'static str>,
    /// prompt, completion, cached prompt, reasoning tokens.
    tokens: Option<(u64, u64, u64, u64)>,
}

const fn call(
    second_project: bool,
    model: &'static str,
    user: Option<&'static str>,
    tokens: Option<(u64, u64, u64, u64)>,
) -> Call {
    Call {
        second_project,
        model,
        user,
        tokens,
    }
}

/// Before the boundary.
const FIRST_BATCH: [Call; 3] = [
    call(false, MODEL_A, Some("alice"), Some((10, 5, 4, 0))),
    call(false, MODEL_B, None, Some((20, 30, 0, 12))),
    call(true, MODEL_A, Some("bob"), Some((7, 3, 2, 0))),
];
/// From the boundary on (its first record's `createdAt`).
const SECOND_BATCH: [Call; 4] = [
    call(true, MODEL_B, Some("bob"), Some((11, 13, 5, 8))),
    call(false, MODEL_B, Some("alice"), None),
    call(false, MODEL_A, None, Some((1, 1, 0, 0))),
    call(true, MODEL_A, None, Some((100, 50, 64, 0))),
];

fn reply(call: &Call) -> Reply {
    match call.tokens {
        None => Reply::openai_error(500, "overloaded", "server_error", None),
        Some((prompt, completion, cached, reasoning)) => Reply::openai_answer(
            call.model,
            "hello",
            json!({"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}),
        ),
    }
}

/// A gateway (on `db`, else its default store) with one openai route pricing both models.
fn gateway(upstream: &OpenAiUpstream, db: Option<&TestDatabase>) -> Gateway {
    let route = Route::openai(ROUTE, &upstream.base_url("/v1"))
        .price(MODEL_A, 0.15, 0.6)
        .price(MODEL_B, 1.1, 4.4);
    let builder = Gateway::builder().route(route);
    match db {
        Some(db) => builder.database(db),
        None => builder,
    }
    .start()
}

/// What the scenario left behind: each call's record (`invocations show`), the keys, the
/// projects, and the boundary between the batches.
struct Scenario {
    records: Vec<Value>,
    first_project: String,
    second_project: String,
    keys: [String; 2],
    /// The first record of the second batch's `createdAt` (RFC 3339, ms).
    boundary: String,
}

fn run_calls(gw: &Gateway, second: &gateway_test_support::Project, calls: &[Call]) -> Vec<Value> {
    calls
        .iter()
        .map(|call| {
            let (project, key) = if call.second_project {
                (second.id.as_str(), second.key.as_str())
            } else {
                (gw.project_id.as_str(), gw.key.as_str())
            };
            let mut body = chat_request(
                project,
                ROUTE,
                call.model,
                json!([{"role": "user", "content": "hi"}]),
            );
            if let Some(user) = call.user {
                body = with(body, "userId", json!(user));
            }
            let response = gw.post_with_headers(
                "/completions",
                Some(key),
                &[("Provider-API-Key", PROVIDER_KEY)],
                &body,
            );
            let expected = if call.tokens.is_some() { 200 } else { 502 };
            assert_eq!(response.status, expected, "{}", response.text());
            let id = response
                .header("x-invocation-id")
                .expect("every answer names its record");
            gw.record(id)
        })
        .collect()
}

fn run_scenario(gw: &Gateway) -> Scenario {
    let second = gw.create_project("second");
    let mut records = run_calls(gw, &second, &FIRST_BATCH);
    // Records are stamped to the millisecond: the batches must not share one.
    std::thread::sleep(Duration::from_millis(20));
    let second_batch = run_calls(gw, &second, &SECOND_BATCH);
    let boundary = second_batch[0]["createdAt"]
        .as_str()
        .expect("createdAt")
        .to_owned();
    records.extend(second_batch);
    Scenario {
        records,
        first_project: gw.project_id.clone(),
        second_project: second.id.clone(),
        keys: [gw.key.clone(), second.key.clone()],
        boundary,
    }
}

/// Unix ms of an RFC 3339 time in UTC (a record's `createdAt`).
fn unix_ms(text: &str) -> i64 {
    let time = humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    time.duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

fn created_ms(record: &Value) -> i64 {
    unix_ms(record["createdAt"].as_str().expect("createdAt"))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of Unix ms.
fn rfc3339(ms: i64) -> String {
    let time = std::time::UNIX_EPOCH + Duration::from_millis(ms as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

/// The numbers a usage row must have for `records`, computed from the records alone.
fn expected_numbers(records: &[&Value]) -> Value {
    let tokens = |kind: &str| -> u64 {
        records
            .iter()
            .map(|r| r["usage"][kind].as_u64().unwrap_or(0))
            .sum()
    };
    let mut durations: Vec<i64> = records
        .iter()
        .map(|r| r["durationMs"].as_i64().expect("durationMs"))
        .collect();
    durations.sort_unstable();
    // Nearest rank: the ceil(p * n / 100)th smallest.
    let percentile = |p: usize| -> Value {
        if durations.is_empty() {
            return Value::Null;
        }
        let rank = (p * durations.len()).div_ceil(100);
        json!(durations[rank - 1])
    };
    json!({
        "requests": records.len(),
        "errors": records.iter().filter(|r| r["status"] != "success").count(),
        "prompt_tokens": tokens("prompt_tokens"),
        "completion_tokens": tokens("completion_tokens"),
        "total_tokens": tokens("total_tokens"),
        "cached_prompt_tokens": tokens("cached_prompt_tokens"),
        "cache_creation_tokens": tokens("cache_creation_tokens"),
        "reasoning_tokens": tokens("reasoning_tokens"),
        "cost_usd": records.iter().filter_map(|r| r["usageCost"].as_f64()).sum::<f64>(),
        "p50_duration_ms": percentile(50),
        "p95_duration_ms": percentile(95),
    })
}

/// Asserts a report row's numbers equal `expected` (costs to 1e-9: sums of floats).
fn assert_numbers(row: &Value, expected: &Value, what: &str) {
    for (name, value) in expected.as_object().expect("an object") {
        if name == "cost_usd" {
            let (got, want) = (row[name].as_f64(), value.as_f64().expect("a cost"));
            assert!(
                got.is_some_and(|got| (got - want).abs() < 1e-9),
                "{what}: cost_usd {:?}, records say {want}; row {row}",
                row[name]
            );
        } else {
            assert_eq!(&row[name], value, "{what}: {name}; row {row}");
        }
    }
}

/// `gateway usage ARGS --json`.
fn usage(gw: &Gateway, args: &[&str]) -> Value {
    let mut full = vec!["usage"];
    full.extend_from_slice(args);
    full.push("--json");
    let out = gw.cli_ok(&full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("usage --json: {e}: {out}"))
}

/// Asserts `usage ARGS --json` has one row per group `group_of` puts the selected records in,
/// each with the numbers of its records; returns the rows.
fn assert_report(
    gw: &Gateway,
    args: &[&str],
    records: &[&Value],
    fields: &[&str],
    group_of: impl Fn(&Value) -> Vec<Value>,
) -> Vec<Value> {
    let report = usage(gw, args);
    let rows = report["rows"].as_array().expect("rows").clone();
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for record in records {
        groups
            .entry(Value::from(group_of(record)).to_string())
            .or_default()
            .push(record);
    }
    let what = format!("usage {}", args.join(" "));
    assert_eq!(
        rows.len(),
        groups.len().max(usize::from(fields.is_empty())),
        "{what}: rows {rows:?}"
    );
    for row in &rows {
        let key: Vec<Value> = fields.iter().map(|f| row[*f].clone()).collect();
        for field in fields {
            assert!(
                row.as_object().expect("a row").contains_key(*field),
                "{what}: no {field} in {row}"
            );
        }
        let members = groups
            .get(&Value::from(key.clone()).to_string())
            .cloned()
            .unwrap_or_default();
        assert_numbers(row, &expected_numbers(&members), &format!("{what} {key:?}"));
    }
    rows
}

fn field(name: &'static str) -> impl Fn(&Value) -> Vec<Value> {
    move |record| vec![record[name].clone()]
}

fn day_of(record: &Value) -> Value {
    json!(&record["createdAt"].as_str().expect("createdAt")[..10])
}

/// The whole scenario and every check of `usage` and `export`, on `gw`'s store.
fn usage_and_export_match_the_records(gw: &Gateway) {
    let scenario = run_scenario(gw);
    let all: Vec<&Value> = scenario.records.iter().collect();
    let store = if gw.on_postgres() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    println!("{store}: {} records", all.len());

    // The records hold what was scripted: the report is checked against them below.
    let scripted = |pick: fn(&(u64, u64, u64, u64)) -> u64| -> u64 {
        FIRST_BATCH
            .iter()
            .chain(&SECOND_BATCH)
            .filter_map(|c| c.tokens.as_ref().map(pick))
            .sum()
    };
    let total = assert_report(gw, &[], &all, &[], |_| Vec::new());
    let total = &total[0];
    assert_eq!(total["requests"], 7);
    assert_eq!(total["errors"], 1);
    assert_eq!(total["prompt_tokens"], scripted(|t| t.0));
    assert_eq!(total["completion_tokens"], scripted(|t| t.1));
    assert_eq!(total["cached_prompt_tokens"], scripted(|t| t.2));
    assert_eq!(total["reasoning_tokens"], scripted(|t| t.3));
    assert!(
        total["cost_usd"].as_f64().is_some_and(|c| c > 0.0),
        "{total}"
    );
    assert!(total["p50_duration_ms"].is_i64(), "{total}");
    let report = usage(gw, &[]);
    assert_eq!(
        report["filter"],
        json!({"project_id": null, "since": null, "until": null, "by": []})
    );

    let by_model = assert_report(gw, &["--by", "model"], &all, &["model"], field("model"));
    let models: Vec<&Value> = by_model.iter().map(|r| &r["model"]).collect();
    assert_eq!(models, [MODEL_A, MODEL_B], "ordered by model");
    assert_report(gw, &["--by", "day"], &all, &["day"], |r| vec![day_of(r)]);
    assert_report(gw, &["--by", "route"], &all, &["route"], field("route"));
    let by_user = assert_report(gw, &["--by", "user"], &all, &["user_id"], field("userId"));
    assert_eq!(
        by_user.last().map(|r| &r["user_id"]),
        Some(&Value::Null),
        "records without a user: null, last"
    );
    assert_report(
        gw,
        &["--by", "project"],
        &all,
        &["project_id"],
        field("projectId"),
    );
    assert_report(
        gw,
        &["--by", "day,model", "--by", "model"],
        &all,
        &["day", "model"],
        |r| vec![day_of(r), r["model"].clone()],
    );

    // By key: the stored prefixes of the two keys, never a whole key.
    let by_key = usage(gw, &["--by", "key"]);
    let prefixes: HashSet<String> = by_key["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["key_prefix"].as_str().expect("a prefix").to_owned())
        .collect();
    let expected: HashSet<String> = scenario.keys.iter().map(|k| k[..16].to_owned()).collect();
    assert_eq!(prefixes, expected);
    for row in by_key["rows"].as_array().expect("rows") {
        let prefix = row["key_prefix"].as_str().expect("a prefix");
        let project = if gw.key.starts_with(prefix) {
            &scenario.first_project
        } else {
            &scenario.second_project
        };
        let members: Vec<&Value> = all
            .iter()
            .copied()
            .filter(|r| r["projectId"] == json!(project))
            .collect();
        assert_numbers(row, &expected_numbers(&members), "usage --by key");
    }

    // One project.
    let second: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|r| r["projectId"] == json!(scenario.second_project))
        .collect();
    assert_eq!(second.len(), 3);
    assert_report(
        gw,
        &["--project", &scenario.second_project, "--by", "model"],
        &second,
        &["model"],
        field("model"),
    );
    assert_eq!(
        usage(gw, &["--project", &scenario.second_project])["filter"]["project_id"],
        json!(scenario.second_project)
    );

    // Bounds: --since inclusive, --until exclusive, at the boundary record's millisecond.
    let boundary_ms = unix_ms(&scenario.boundary);
    let (before, after): (Vec<&Value>, Vec<&Value>) =
        all.iter().partition(|r| created_ms(r) < boundary_ms);
    assert_eq!((before.len(), after.len()), (3, 4));
    assert_report(gw, &["--since", &scenario.boundary], &after, &[], |_| {
        Vec::new()
    });
    assert_report(gw, &["--until", &scenario.boundary], &before, &[], |_| {
        Vec::new()
    });
    assert_report(
        gw,
        &[
            "--since",
            &scenario.boundary,
            "--by",
            "model",
            "--project",
            &scenario.first_project,
        ],
        &after
            .iter()
            .copied()
            .filter(|r| r["projectId"] == json!(scenario.first_project))
            .collect::<Vec<_>>(),
        &["model"],
        field("model"),
    );
    // The same instant written with an offset.
    let shifted = shift_to_plus_two(&scenario.boundary);
    let via_offset = usage(gw, &["--since", &shifted]);
    assert_eq!(via_offset["rows"][0]["requests"], 4, "{shifted}");
    assert_eq!(via_offset["filter"]["since"], json!(scenario.boundary));

    // Dates are UTC midnight: nothing is from tomorrow on, everything from the first
    // record's day on.
    let today = day_of(all[0]).as_str().expect("a day").to_owned();
    let tomorrow = rfc3339(unix_ms(&format!("{today}T00:00:00Z")) + 86_400_000)[..10].to_owned();
    let tomorrow = tomorrow.as_str();
    let later = usage(gw, &["--since", tomorrow]);
    assert_eq!(later["rows"][0]["requests"], 0);
    assert_eq!(later["rows"][0]["p50_duration_ms"], Value::Null);
    assert_eq!(
        usage(gw, &["--since", tomorrow, "--by", "model"])["rows"],
        json!([])
    );
    let from_today: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|r| day_of(r).as_str() >= Some(today.as_str()))
        .collect();
    assert_report(gw, &["--since", &today], &from_today, &[], |_| Vec::new());

    // The table: the same numbers as the JSON, `-` for a missing value.
    let table = gw.cli_ok(&["usage", "--by", "user"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        [
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
        ],
        "{table}"
    );
    assert_eq!(lines.len(), by_user.len() + 1, "{table}");
    for (line, row) in lines[1..].iter().zip(&by_user) {
        let user = row["user_id"].as_str().unwrap_or("-");
        assert_eq!(line[0], user, "{table}");
        for (column, name) in [
            (1, "requests"),
            (2, "errors"),
            (3, "prompt_tokens"),
            (4, "completion_tokens"),
            (6, "cached_prompt_tokens"),
            (8, "reasoning_tokens"),
            (10, "p50_duration_ms"),
            (11, "p95_duration_ms"),
        ] {
            assert_eq!(line[column], row[name].to_string(), "{name}: {table}");
        }
        assert_eq!(
            line[9],
            format!("{:.6}", row["cost_usd"].as_f64().expect("a cost"))
        );
    }

    // No whole key in any output.
    for out in [&table, &by_key.to_string()] {
        for key in &scenario.keys {
            assert!(!out.contains(key.as_str()), "a whole key in {out}");
        }
    }

    export_matches_the_records(gw, &scenario, &today);
}

/// `2026-05-01T10:00:00.123Z` as `2026-05-01T12:00:00.123+02:00`: the same instant.
fn shift_to_plus_two(utc: &str) -> String {
    let local = rfc3339(unix_ms(utc) + 2 * 3_600_000);
    format!("{}+02:00", local.trim_end_matches('Z'))
}

/// `gateway invocations export ARGS`: its stdout.
fn export(gw: &Gateway, args: &[&str]) -> String {
    let mut full = vec!["invocations", "export"];
    full.extend_from_slice(args);
    gw.cli_ok(&full)
}

fn export_matches_the_records(gw: &Gateway, scenario: &Scenario, today: &str) {
    let all = &scenario.records;
    let earliest = &rfc3339(all.iter().map(created_ms).min().expect("records"))[..10];

    // JSON lines: the records as `invocations show` shows them, plus the key's prefix.
    let jsonl = export(gw, &["--since", earliest]);
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(lines.len(), all.len(), "{jsonl}");
    assert_eq!(
        export(gw, &["--since", earliest, "--format", "jsonl"]),
        jsonl
    );
    let times: Vec<i64> = lines.iter().map(created_ms).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "oldest first: {times:?}"
    );
    for line in &lines {
        let mut line = line.clone();
        let prefix = line
            .as_object_mut()
            .and_then(|o| o.remove("keyPrefix"))
            .expect("keyPrefix");
        let id = line["id"].as_str().expect("an id");
        let record = all
            .iter()
            .find(|r| r["id"] == json!(id))
            .unwrap_or_else(|| panic!("{id} is no record of the scenario"));
        assert_eq!(&line, record, "the export's record is the one `show` shows");
        let key = if record["projectId"] == json!(scenario.first_project) {
            &scenario.keys[0]
        } else {
            &scenario.keys[1]
        };
        assert_eq!(prefix, json!(&key[..16]));
        assert!(record["request"].is_object(), "bodies are kept: {record}");
    }

    // CSV: the contract's header, one line a record, the same values.
    let csv_text = export(gw, &["--since", earliest, "--format", "csv"]);
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(header, CSV_HEADER);
    let rows: Vec<csv::StringRecord> = reader
        .records()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not CSV: {e}\n{csv_text}"));
    assert_eq!(rows.len(), all.len());
    for row in &rows {
        let value = |name: &str| {
            let index = CSV_HEADER
                .iter()
                .position(|h| *h == name)
                .expect("a column");
            row[index].to_owned()
        };
        let record = all
            .iter()
            .find(|r| r["id"] == json!(value("id")))
            .expect("a record of the scenario");
        assert_eq!(
            value("created_at"),
            record["createdAt"].as_str().expect("createdAt")
        );
        assert_eq!(
            value("project_id"),
            record["projectId"].as_str().expect("a project")
        );
        assert_eq!(value("user_id"), record["userId"].as_str().unwrap_or(""));
        assert_eq!(value("model"), record["model"].as_str().expect("a model"));
        assert_eq!(value("route"), ROUTE);
        assert_eq!(value("plugin"), "openai");
        assert_eq!(value("type"), "chat");
        assert_eq!(value("stream"), "false");
        assert_eq!(
            value("status"),
            record["status"].as_str().expect("a status")
        );
        assert_eq!(value("http_status"), record["httpStatus"].to_string());
        assert_eq!(value("duration_ms"), record["durationMs"].to_string());
        assert_eq!(value("key_prefix").len(), 16);
        for kind in [
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "cached_prompt_tokens",
            "reasoning_tokens",
            "image_prompt_tokens",
            "audio_prompt_tokens",
        ] {
            let expected = record["usage"][kind]
                .as_u64()
                .map(|n| n.to_string())
                .unwrap_or_default();
            assert_eq!(value(kind), expected, "{kind} of {record}");
        }
        match record["usageCost"].as_f64() {
            Some(cost) => assert_eq!(value("cost_usd").parse::<f64>().ok(), Some(cost)),
            None => assert_eq!(value("cost_usd"), ""),
        }
        assert_eq!(value("error"), record["error"].as_str().unwrap_or(""));
        assert_eq!(value("guards"), "", "no guard ran");
        assert_eq!(
            (value("cache"), value("saved_cost_usd")),
            (String::new(), String::new()),
            "the route has no cache"
        );
        assert!(
            record["cache"].is_null() && record["savedCost"].is_null(),
            "{record}"
        );
    }
    assert!(
        rows.iter().any(|r| !r[20].is_empty()),
        "the failed call's error is exported"
    );

    // --since (and --until, --project) filter the export as they do the report.
    let after = export(gw, &["--since", &scenario.boundary, "--format", "csv"]);
    assert_eq!(after.lines().count(), 1 + 4, "{after}");
    let before = export(gw, &["--since", earliest, "--until", &scenario.boundary]);
    assert_eq!(before.lines().count(), 3, "{before}");
    let second = export(
        gw,
        &["--since", earliest, "--project", &scenario.second_project],
    );
    assert_eq!(second.lines().count(), 3, "{second}");
    let tomorrow = &rfc3339(unix_ms(&format!("{today}T00:00:00Z")) + 86_400_000)[..10];
    assert_eq!(export(gw, &["--since", tomorrow]), "");
    assert_eq!(
        export(gw, &["--since", tomorrow, "--format", "csv"]).trim_end(),
        CSV_HEADER.join(",")
    );

    for out in [&jsonl, &csv_text] {
        for key in &scenario.keys {
            assert!(!out.contains(key.as_str()), "a whole key in the export");
        }
        assert!(
            !out.contains(PROVIDER_KEY),
            "the provider key in the export"
        );
    }
}

fn scripted_upstream() -> OpenAiUpstream {
    OpenAiUpstream::script(FIRST_BATCH.iter().chain(&SECOND_BATCH).map(reply).collect())
}

#[test]
fn usage_and_export_match_the_records_on_the_default_store() {
    let upstream = scripted_upstream();
    let gw = gateway(&upstream, None);
    usage_and_export_match_the_records(&gw);
}

#[test]
fn usage_and_export_match_the_records_on_postgres() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let upstream = scripted_upstream();
    let gw = gateway(&upstream, Some(&db));
    assert!(gw.on_postgres());
    usage_and_export_match_the_records(&gw);
}

#[test]
fn bad_dates_empty_ranges_and_unknown_projects_are_refused_naming_the_flag() {
    let gw = Gateway::demo();
    for (args, needle) in [
        (&["usage", "--since", "yesterday"][..], "--since"),
        (&["usage", "--until", "2026-02-30"], "--until"),
        (&["usage", "--since", "2026-05-01T25:00:00Z"], "--since"),
        (&["usage", "--by", "minute"], "--by"),
        (&["invocations", "export", "--since", "soon"], "--since"),
        (
            &[
                "invocations",
                "export",
                "--since",
                "2026-05-01",
                "--format",
                "xml",
            ],
            "--format",
        ),
        (&["invocations", "export"], "--since"),
        (
            &["usage", "--since", "2026-05-02", "--until", "2026-05-01"],
            "--until must be later",
        ),
        (
            &["usage", "--project", "no-such-project"],
            "no project with id no-such-project",
        ),
        (
            &[
                "invocations",
                "export",
                "--since",
                "2026-05-01",
                "--project",
                "nope",
            ],
            "no project with id nope",
        ),
    ] {
        let out = gw.cli(args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", out.stdout);
        assert!(
            out.stderr.contains(needle),
            "{args:?}: stderr should mention {needle:?}: {}",
            out.stderr
        );
    }
    // A fresh gateway: one row of zeros; grouped, no rows.
    let report = usage(&gw, &["--since", "2026-05-01T00:00:00+02:00"]);
    assert_eq!(report["filter"]["since"], "2026-04-30T22:00:00.000Z");
    assert_eq!(report["rows"][0]["requests"], 0);
    assert_eq!(report["rows"][0]["cost_usd"], 0.0);
    assert_eq!(usage(&gw, &["--by", "day"])["rows"], json!([]));
    let help = gw.cli_ok(&["usage", "--help"]);
    for needle in [
        "nearest-rank",
        "rate_limited",
        "--since",
        "--until",
        "--by",
        "--json",
    ] {
        assert!(help.contains(needle), "usage --help lacks {needle}: {help}");
    }
    let help = gw.cli_ok(&["invocations", "export", "--help"]);
    assert!(
        help.contains("cached_prompt_tokens, cache_creation_tokens"),
        "{help}"
    );
}
