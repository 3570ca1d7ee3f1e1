//! Invocation records: round trips, the writer's batches, spend, reports and exports.

use uuid::Uuid;

use super::Harness;
use crate::limits::Subject;
use crate::store::report::fixture::{self, DAY0, DAY1};
use crate::store::report::{GroupBy, Page, RecordRange, UsageRow};
use crate::store::{
    Attempt, CacheStatus, GuardOutcome, GuardStage, GuardVerdictKind, Invocation, InvocationFilter,
    InvocationStatus, Store, TokenUsage, UsageTotals,
};

/// A record of the size of a real one, the `n`th of a batch.
pub(in crate::store) fn record(n: usize) -> Invocation {
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
            image_prompt_tokens: None,
            audio_prompt_tokens: None,
            search_units: None,
            images: None,
            audio_seconds: None,
            characters: None,
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
        guards: Vec::new(),
        cache: None,
        saved_cost_usd: None,
        batch_id: None,
        custom_id: None,
    }
}

/// One outcome of each kind: a rewrite of the request, an allow, a deny of the answer seen too
/// late to apply (observe), a guard's error.
pub(in crate::store) fn guard_outcomes() -> Vec<GuardOutcome> {
    vec![
        GuardOutcome {
            guard: "pii".into(),
            stage: GuardStage::Request,
            verdict: GuardVerdictKind::Rewrite,
            reason: None,
            changes: [("email".to_owned(), 2), ("phone".to_owned(), u32::MAX)].into(),
            applied: true,
        },
        GuardOutcome {
            guard: "words".into(),
            stage: GuardStage::Request,
            verdict: GuardVerdictKind::Allow,
            reason: None,
            changes: Default::default(),
            applied: true,
        },
        GuardOutcome {
            guard: "words".into(),
            stage: GuardStage::Response,
            verdict: GuardVerdictKind::Deny,
            reason: Some("the answer names \"project x\"\n".into()),
            changes: Default::default(),
            applied: false,
        },
        GuardOutcome {
            guard: "crashy".into(),
            stage: GuardStage::Response,
            verdict: GuardVerdictKind::Error,
            reason: Some("the guard crashed: unreachable".into()),
            changes: Default::default(),
            applied: true,
        },
    ]
}

pub(in crate::store) fn attempts() -> Vec<Attempt> {
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

/// A successful call of `project` with `key` at `at`, costing `cost` (a refusal when `None`).
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

fn listing(limit: u32) -> InvocationFilter {
    InvocationFilter {
        limit,
        ..InvocationFilter::default()
    }
}

pub(super) async fn invocations_round_trip_every_field(h: &Harness) {
    let store = h.open().await;
    let full = Invocation {
        id: Uuid::now_v7(),
        project_id: Some("p".into()),
        key_prefix: Some("gw_0123456789ab".into()),
        user_id: Some("u".into()),
        route: Some("fallback".into()),
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
            image_prompt_tokens: Some(6),
            audio_prompt_tokens: Some(u32::MAX - 1),
            search_units: Some(3),
            images: Some(4),
            audio_seconds: Some(5),
            characters: Some(6),
        }),
        cost_usd: Some(0.25),
        created_at_ms: 2_000,
        duration_ms: 7,
        request: Some(r#"{"a":1}"#.into()),
        response: Some("not json".into()),
        attempts: attempts(),
        guards: guard_outcomes(),
        cache: Some(CacheStatus::Hit),
        saved_cost_usd: Some(0.0123),
        batch_id: Some("batch_0123".into()),
        custom_id: Some("line-7".into()),
    };
    let bare = Invocation {
        http_status: 400,
        ..Invocation::begun(Uuid::now_v7(), 1_000)
    };
    let later = Invocation {
        id: Uuid::now_v7(),
        created_at_ms: 3_000,
        ..bare.clone()
    };
    store
        .insert_invocations(&[full.clone(), bare.clone(), later.clone()])
        .unwrap();
    assert_eq!(
        store.invocation(&full.id).await.unwrap(),
        Some(full.clone())
    );
    assert_eq!(
        store.invocation(&bare.id).await.unwrap(),
        Some(bare.clone())
    );
    assert_eq!(store.invocation(&Uuid::now_v7()).await.unwrap(), None);

    // Image and audio tokens in columns of their own, NULL where the usage tells none.
    assert_eq!(
        h.count(&format!(
            "SELECT image_prompt_tokens + audio_prompt_tokens FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await,
        6 + i64::from(u32::MAX - 1)
    );
    assert_eq!(
        h.count(&format!(
            "SELECT search_units FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await,
        3
    );
    assert_eq!(
        h.count(&format!(
            "SELECT images FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await,
        4
    );
    assert_eq!(
        h.count(&format!(
            "SELECT audio_seconds FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await,
        5
    );
    assert_eq!(
        h.count(&format!(
            "SELECT characters FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await,
        6
    );
    assert_eq!(
        h.count(
            "SELECT count(*) FROM invocations
             WHERE image_prompt_tokens IS NULL AND audio_prompt_tokens IS NULL"
        )
        .await,
        2
    );

    // No attempts: NULL, not an empty array in every record.
    assert_eq!(
        h.count("SELECT count(*) FROM invocations WHERE attempts IS NULL")
            .await,
        2
    );
    let stored = h
        .text(&format!(
            "SELECT CAST(attempts AS TEXT) FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(json[0]["target"], "a.example:8443");
    assert_eq!(json[2]["duration_ms"], i64::MAX);
    // Guard outcomes likewise: NULL when none ran, else a JSON array.
    assert_eq!(
        h.count("SELECT count(*) FROM invocations WHERE guards IS NULL")
            .await,
        2
    );
    let stored = h
        .text(&format!(
            "SELECT CAST(guards AS TEXT) FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(json[0]["verdict"], "rewrite");
    assert_eq!(json[0]["changes"]["email"], 2);
    assert_eq!(json[2]["stage"], "response");
    assert_eq!(json[2]["applied"], false);
    // The cache's columns: its status as text, NULL for a route without a cache.
    assert_eq!(
        h.text(&format!(
            "SELECT cache FROM invocations WHERE id = '{}'",
            full.id
        ))
        .await
        .as_deref(),
        Some("hit")
    );
    assert_eq!(
        h.count("SELECT count(*) FROM invocations WHERE cache IS NULL AND saved_cost_usd IS NULL")
            .await,
        2
    );

    // Newest first.
    let all = store.list_invocations(&listing(10)).await.unwrap();
    assert_eq!(all, [later.clone(), full.clone(), bare.clone()]);
    let filtered = store
        .list_invocations(&InvocationFilter {
            project_id: Some("p".into()),
            user_id: Some("u".into()),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(filtered, std::slice::from_ref(&full));
    let by_user = store
        .list_invocations(&InvocationFilter {
            user_id: Some("nobody".into()),
            ..listing(10)
        })
        .await
        .unwrap();
    assert!(by_user.is_empty());
    assert_eq!(store.list_invocations(&listing(1)).await.unwrap().len(), 1);

    assert_eq!(store.delete_invocations_before(2_500, 1).await.unwrap(), 1);
    assert_eq!(store.delete_invocations_before(2_500, 10).await.unwrap(), 1);
    assert_eq!(store.delete_invocations_before(2_500, 10).await.unwrap(), 0);
    assert!(store.invocation(&bare.id).await.unwrap().is_none());
    assert!(store.invocation(&later.id).await.unwrap().is_some());

    // A usage without image or audio tokens reads back without them.
    let text_only = record(0);
    store
        .insert_invocations(std::slice::from_ref(&text_only))
        .unwrap();
    assert_eq!(
        store.invocation(&text_only.id).await.unwrap(),
        Some(text_only.clone())
    );
    assert_eq!(
        h.count(&format!(
            "SELECT count(*) FROM invocations WHERE id = '{}'
             AND image_prompt_tokens IS NULL AND audio_prompt_tokens IS NULL",
            text_only.id
        ))
        .await,
        1
    );
}

pub(super) async fn attempts_that_do_not_read_as_attempts_read_as_none(h: &Harness) {
    let store = h.open().await;
    let record = Invocation {
        attempts: attempts(),
        ..Invocation::begun(Uuid::now_v7(), 1)
    };
    store
        .insert_invocations(std::slice::from_ref(&record))
        .unwrap();
    for value in h.unreadable_attempts() {
        h.execute(&format!(
            "UPDATE invocations SET attempts = {value} WHERE id = '{}'",
            record.id
        ))
        .await;
        let read = store.invocation(&record.id).await.unwrap().unwrap();
        assert!(read.attempts.is_empty(), "{value}");
        assert_eq!(read.id, record.id);
    }
}

pub(super) async fn guard_outcomes_that_do_not_read_as_such_read_as_none(h: &Harness) {
    let store = h.open().await;
    let record = Invocation {
        guards: guard_outcomes(),
        attempts: attempts(),
        ..Invocation::begun(Uuid::now_v7(), 1)
    };
    store
        .insert_invocations(std::slice::from_ref(&record))
        .unwrap();
    // The attempts column's unreadable values are no guard outcomes either.
    for value in h.unreadable_attempts() {
        h.execute(&format!(
            "UPDATE invocations SET guards = {value} WHERE id = '{}'",
            record.id
        ))
        .await;
        let read = store.invocation(&record.id).await.unwrap().unwrap();
        assert!(read.guards.is_empty(), "{value}");
        assert_eq!(read.attempts, record.attempts);
    }
}

pub(super) async fn every_cache_status_round_trips_and_an_unknown_one_reads_as_none(h: &Harness) {
    let store = h.open().await;
    let records: Vec<Invocation> = [
        (Some(CacheStatus::Hit), Some(0.0123)),
        (Some(CacheStatus::Miss), None),
        (Some(CacheStatus::Skip), None),
        (None, None),
    ]
    .into_iter()
    .map(|(cache, saved_cost_usd)| Invocation {
        cache,
        saved_cost_usd,
        ..Invocation::begun(Uuid::now_v7(), 1)
    })
    .collect();
    store.insert_invocations(&records).unwrap();
    for record in &records {
        assert_eq!(
            store.invocation(&record.id).await.unwrap().as_ref(),
            Some(record)
        );
    }
    // What a newer gateway or a hand-written UPDATE put there: the record still reads, its
    // saved cost kept.
    let hit = &records[0];
    for value in ["'HIT'", "'stale'", "''"] {
        h.execute(&format!(
            "UPDATE invocations SET cache = {value} WHERE id = '{}'",
            hit.id
        ))
        .await;
        let read = store.invocation(&hit.id).await.unwrap().unwrap();
        assert_eq!(
            (read.cache, read.saved_cost_usd),
            (None, Some(0.0123)),
            "{value}"
        );
    }
}

pub(super) async fn a_blocked_record_counts_as_a_request_and_an_error_without_tokens(h: &Harness) {
    let store = h.open().await;
    // Denied before the provider: no usage, no cost.
    let denied = Invocation {
        project_id: Some("p".into()),
        key_prefix: Some("gw_p1".into()),
        status: InvocationStatus::Blocked,
        http_status: 400,
        error: Some("guard words denied the request: banned word".into()),
        guards: vec![GuardOutcome {
            guard: "words".into(),
            stage: GuardStage::Request,
            verdict: GuardVerdictKind::Deny,
            reason: Some("banned word".into()),
            changes: Default::default(),
            applied: true,
        }],
        duration_ms: 2,
        ..Invocation::begun(Uuid::now_v7(), 1_000)
    };
    // Denied after the provider answered: its tokens and cost were spent.
    let answered = Invocation {
        id: Uuid::now_v7(),
        usage: Some(TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
            ..TokenUsage::default()
        }),
        cost_usd: Some(0.5),
        created_at_ms: 1_001,
        ..denied.clone()
    };
    store
        .insert_invocations(&[denied.clone(), answered.clone()])
        .unwrap();
    let read = store.invocation(&denied.id).await.unwrap().unwrap();
    assert_eq!(read, denied);
    assert_eq!(read.status.as_str(), "blocked");
    assert_eq!(read.to_json()["status"], "blocked");
    assert_eq!(read.to_json()["guards"][0]["verdict"], "deny");

    assert_eq!(
        store.usage_since("p", 0).await.unwrap(),
        UsageTotals {
            requests: 2,
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
            cost_usd: 0.5,
        }
    );
    assert_eq!(
        store.spent_since(&Subject::Key("gw_p1"), 0).await.unwrap(),
        0.5
    );
    let rows = read_usage(&store, &RecordRange::default(), &[]).await;
    assert_eq!((rows[0].requests, rows[0].errors), (2, 2));
    assert_eq!(rows[0].total_tokens, 15);

    // An export's page reads the outcomes, bodies or not.
    let page = store
        .invocations_page(&RecordRange::default(), None, false, 10)
        .await
        .unwrap();
    assert_eq!(page.records[0].guards, denied.guards);
    assert_eq!(page.records[0].status, InvocationStatus::Blocked);
}

pub(super) async fn a_record_stored_twice_is_kept_once(h: &Harness) {
    let store = h.open().await;
    let record = Invocation {
        status: InvocationStatus::Success,
        http_status: 200,
        cost_usd: Some(0.5),
        duration_ms: 1,
        response: Some("first".into()),
        ..Invocation::begun(Uuid::now_v7(), 1)
    };
    store
        .insert_invocations(std::slice::from_ref(&record))
        .unwrap();
    let again = Invocation {
        response: Some("second".into()),
        ..record.clone()
    };
    store.insert_invocations(&[again]).unwrap();
    assert_eq!(store.invocation(&record.id).await.unwrap(), Some(record));
}

pub(super) async fn batches_are_idempotent(h: &Harness) {
    let store = h.open().await;
    let batch: Vec<Invocation> = (0..1000).map(record).collect();
    store.insert_invocations(&batch).unwrap();
    // Replayed (part of it twice within one batch, too), with a changed body
    // that must not replace the stored one.
    let mut replay: Vec<Invocation> = batch[..600].to_vec();
    replay.extend(batch[..10].iter().cloned());
    replay[0].response = Some("second".into());
    store.insert_invocations(&replay).unwrap();
    assert_eq!(h.count("SELECT count(*) FROM invocations").await, 1000);
    assert_eq!(
        store.invocation(&batch[0].id).await.unwrap().unwrap(),
        batch[0]
    );

    // From a runtime's blocking pool, as the writer may be.
    let (writer, more) = (store.clone(), (0..512).map(record).collect::<Vec<_>>());
    tokio::task::spawn_blocking(move || writer.insert_invocations(&more))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(h.count("SELECT count(*) FROM invocations").await, 1512);

    // 512 records, the writer's batch size, as each gets measured.
    let mut times = Vec::new();
    for _ in 0..5 {
        let batch: Vec<Invocation> = (0..512).map(record).collect();
        let start = std::time::Instant::now();
        store.insert_invocations(&batch).unwrap();
        times.push(start.elapsed());
    }
    eprintln!("512-record batches took {times:?}");
}

pub(super) async fn the_key_prefix_of_a_record_round_trips(h: &Harness) {
    let store = h.open().await;
    let record = spend("a", Some("gw_0123456789ab"), Some(0.5), 1);
    let bare = Invocation::begun(Uuid::now_v7(), 2);
    store
        .insert_invocations(&[record.clone(), bare.clone()])
        .unwrap();
    assert_eq!(store.invocation(&record.id).await.unwrap(), Some(record));
    assert_eq!(store.invocation(&bare.id).await.unwrap(), Some(bare));
}

pub(super) async fn spend_and_usage_add_up_the_period_of_one_subject(h: &Harness) {
    let store = h.open().await;
    store
        .insert_invocations(&[
            spend("a", Some("gw_a1"), Some(0.25), 1_000),
            spend("a", Some("gw_a1"), Some(0.5), 2_000),
            spend("a", Some("gw_a2"), Some(0.125), 2_000),
            // Refused by a limit: recorded, no usage, no cost.
            spend("a", Some("gw_a2"), None, 3_000),
            // Before the period.
            spend("a", Some("gw_a1"), Some(8.0), 999),
            spend("b", Some("gw_b1"), Some(4.0), 2_000),
        ])
        .unwrap();
    let spent = |subject: Subject<'static>, since: i64| {
        let store = &store;
        async move { store.spent_since(&subject, since).await.unwrap() }
    };
    assert_eq!(spent(Subject::Project("a"), 1_000).await, 0.875);
    assert_eq!(spent(Subject::Project("a"), 0).await, 8.875);
    assert_eq!(spent(Subject::Project("b"), 1_000).await, 4.0);
    assert_eq!(spent(Subject::Key("gw_a1"), 1_000).await, 0.75);
    assert_eq!(spent(Subject::Key("gw_a2"), 1_000).await, 0.125);
    assert_eq!(spent(Subject::Key("gw_a2"), 2_500).await, 0.0);
    assert_eq!(spent(Subject::Key("nobody"), 0).await, 0.0);
    assert_eq!(
        store.usage_since("a", 1_000).await.unwrap(),
        UsageTotals {
            requests: 4,
            prompt_tokens: 30,
            completion_tokens: 15,
            total_tokens: 45,
            cost_usd: 0.875,
        }
    );
    assert_eq!(
        store.usage_since("a", 2_500).await.unwrap(),
        UsageTotals {
            requests: 1,
            ..UsageTotals::default()
        }
    );
    assert_eq!(
        store.usage_since("nobody", 0).await.unwrap(),
        UsageTotals::default()
    );
}

async fn read_usage(store: &Store, range: &RecordRange, by: &[GroupBy]) -> Vec<UsageRow> {
    store.usage(range, by).await.unwrap()
}

pub(super) async fn usage_adds_up_each_group_with_nearest_rank_percentiles(h: &Harness) {
    let store = h.open().await;
    store.insert_invocations(&fixture::records()).unwrap();

    let all = read_usage(&store, &RecordRange::default(), &[]).await;
    assert_eq!(
        all,
        [UsageRow {
            group: vec![],
            requests: 5,
            errors: 2,
            prompt_tokens: 31,
            completion_tokens: 16,
            total_tokens: 47,
            cached_prompt_tokens: 3,
            cache_creation_tokens: 1,
            reasoning_tokens: 3,
            cost_usd: 0.75,
            // Durations 0, 50, 100, 200, 300: ranks 3 and 5.
            p50_duration_ms: Some(100),
            p95_duration_ms: Some(300),
        }]
    );

    let by_day = read_usage(&store, &RecordRange::default(), &[GroupBy::Day]).await;
    type Summary = (Vec<Option<String>>, u64, u64, Option<i64>, Option<i64>);
    let summary = |rows: &[UsageRow]| -> Vec<Summary> {
        rows.iter()
            .map(|r| {
                let percentiles = (r.p50_duration_ms, r.p95_duration_ms);
                (
                    r.group.clone(),
                    r.requests,
                    r.errors,
                    percentiles.0,
                    percentiles.1,
                )
            })
            .collect()
    };
    let day = |d: &str| vec![Some(d.to_owned())];
    assert_eq!(
        summary(&by_day),
        [
            (day("2026-05-01"), 3, 1, Some(100), Some(300)),
            (day("2026-05-02"), 2, 1, Some(0), Some(200)),
        ]
    );

    let by_model = read_usage(&store, &RecordRange::default(), &[GroupBy::Model]).await;
    assert_eq!(
        summary(&by_model),
        [
            (day("m1"), 3, 1, Some(100), Some(200)),
            (day("m2"), 1, 0, Some(300), Some(300)),
            (vec![None], 1, 1, Some(0), Some(0)),
        ]
    );
    assert_eq!(by_model[0].prompt_tokens, 11);
    assert_eq!(by_model[0].cost_usd, 0.75);
    assert_eq!(by_model[1].cost_usd, 0.0, "no known cost");

    // [since, until): the first day's second record up to the last record, excluded.
    let middle = RecordRange {
        project_id: None,
        since_ms: Some(DAY0 + 2_000),
        until_ms: Some(DAY1 + 5),
        ..RecordRange::default()
    };
    assert_eq!(read_usage(&store, &middle, &[]).await[0].requests, 3);
    let b = RecordRange {
        project_id: Some("b".into()),
        ..RecordRange::default()
    };
    assert_eq!(
        summary(&read_usage(&store, &b, &[GroupBy::Key]).await),
        [(day("gw_b_key000000"), 2, 2, Some(0), Some(50))]
    );
    let none = RecordRange {
        since_ms: Some(DAY1 + 6),
        ..RecordRange::default()
    };
    let empty = read_usage(&store, &none, &[]).await;
    assert_eq!((empty[0].requests, empty[0].p50_duration_ms), (0, None));
    assert!(
        read_usage(&store, &none, &[GroupBy::Model])
            .await
            .is_empty()
    );
}

/// Every page of an export, `limit` records each; and how many pages that took.
async fn export_all(
    store: &Store,
    range: &RecordRange,
    bodies: bool,
    limit: u32,
) -> (Vec<Invocation>, usize) {
    let (mut records, mut pages, mut after) = (Vec::new(), 0, None);
    loop {
        let page = store
            .invocations_page(range, after.as_ref(), bodies, limit)
            .await
            .unwrap();
        pages += 1;
        records.extend(page.records);
        match page.next {
            Some(next) => after = Some(next),
            None => return (records, pages),
        }
    }
}

pub(super) async fn an_export_reads_each_record_once_oldest_first_across_pages_of_equal_times(
    h: &Harness,
) {
    let store = h.open().await;
    // Four records a millisecond (ids not in insertion order within one), stored newest first.
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
    store
        .insert_invocations(&records.iter().rev().cloned().collect::<Vec<_>>())
        .unwrap();
    records.sort_by_key(|r| (r.created_at_ms, r.id.to_string()));
    // Ties go by id in the database's collation, which need not be byte order: where it is
    // not, the records are compared as a set, and their times' order.
    let same = |mut read: Vec<Invocation>, mut expected: Vec<Invocation>| {
        let times: Vec<i64> = read.iter().map(|r| r.created_at_ms).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        if !h.orders_ids_bytewise() {
            read.sort_by_key(|r| r.id);
            expected.sort_by_key(|r| r.id);
        }
        assert_eq!(read, expected);
    };

    let (read, pages) = export_all(&store, &RecordRange::default(), true, 4).await;
    same(read, records.clone());
    assert_eq!(pages, 7, "six full pages and a last one of two");
    let range = RecordRange {
        project_id: Some("b".into()),
        since_ms: Some(1_001),
        until_ms: Some(1_006),
        ..RecordRange::default()
    };
    let (read, _) = export_all(&store, &range, false, 3).await;
    let expected: Vec<_> = records
        .iter()
        .filter(|r| {
            r.project_id.as_deref() == Some("b") && (1_001..1_006).contains(&r.created_at_ms)
        })
        .map(|r| Invocation {
            request: None,
            ..r.clone()
        })
        .collect();
    assert!(
        read.iter().all(|r| r.request.is_none()),
        "without bodies: no request"
    );
    same(read, expected);
    // A full last page is followed by an empty one.
    let (read, pages) = export_all(&store, &RecordRange::default(), false, 13).await;
    assert_eq!((read.len(), pages), (26, 3));
    let page = store
        .invocations_page(
            &RecordRange {
                project_id: Some("a".into()),
                ..RecordRange::default()
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

pub(super) async fn recent_invocations_are_filtered_and_paged_newest_first(h: &Harness) {
    let store = h.open().await;
    let statuses = [InvocationStatus::Success, InvocationStatus::Error];
    let records: Vec<Invocation> = (0..10)
        .map(|n: i64| Invocation {
            project_id: Some(if n % 2 == 0 { "a" } else { "b" }.into()),
            user_id: Some(format!("user-{}", n % 3)),
            route: Some("r".into()),
            model: Some(if n < 5 { "m1" } else { "m2" }.into()),
            status: statuses[(n % 4 == 0) as usize],
            request: Some("body".into()),
            ..Invocation::begun(Uuid::from_u128(n as u128 + 1), 1_000 + n / 2)
        })
        .collect();
    store.insert_invocations(&records).unwrap();
    let ids = |page: &Page| -> Vec<u128> { page.records.iter().map(|r| r.id.as_u128()).collect() };

    let all = RecordRange::default();
    let first = store.recent_invocations(&all, None, 4).await.unwrap();
    assert_eq!(
        ids(&first),
        [10, 9, 8, 7],
        "newest first, ties by id descending"
    );
    assert!(
        first.records.iter().all(|r| r.request.is_none()),
        "no bodies"
    );
    let second = store
        .recent_invocations(&all, first.next.as_ref(), 4)
        .await
        .unwrap();
    assert_eq!(ids(&second), [6, 5, 4, 3]);
    let last = store
        .recent_invocations(&all, second.next.as_ref(), 4)
        .await
        .unwrap();
    assert_eq!(ids(&last), [2, 1]);
    assert!(last.next.is_none());

    let filtered = RecordRange {
        project_id: Some("a".into()),
        model: Some("m2".into()),
        status: Some(InvocationStatus::Success),
        ..RecordRange::default()
    };
    let page = store.recent_invocations(&filtered, None, 10).await.unwrap();
    // n = 6 (project a, model m2, success); n = 8 is an error (8 % 4 == 0).
    assert_eq!(ids(&page), [7]);
    let by_user = RecordRange {
        user_id: Some("user-0".into()),
        route: Some("r".into()),
        since_ms: Some(1_002),
        ..RecordRange::default()
    };
    let page = store.recent_invocations(&by_user, None, 10).await.unwrap();
    // user-0: n = 0, 3, 6, 9; created at 1000, 1001, 1003, 1004.
    assert_eq!(ids(&page), [10, 7]);
    // The same filters add up usage by hour.
    let rows = store.usage(&by_user, &[GroupBy::Hour]).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].group, [Some("1970-01-01T00:00:00.000Z".to_owned())]);
    assert_eq!(rows[0].requests, 2);
}
