//! The store's tests: each case of [`access`], [`keys`], [`invocations`], [`responses`] and [`schema`]
//! runs on both backends (`tests::sqlite::CASE` and `tests::postgres::CASE`), against
//! [`Store`] and a [`Harness`] that does what a case needs behind the store's back. What only
//! one backend has (SQLite's query plans and loose column types; PostgreSQL's URLs, TLS, pool
//! and LISTEN) is tested with that backend.

mod access;
mod batches;
mod files;
mod invocations;
mod keys;
mod responses;
mod schema;
mod sessions;
pub(super) mod test_db;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::*;
use projects::{MAX_TPM, check_name};
use test_db::TestDb;

pub(super) use invocations::{attempts, guard_outcomes, record};

/// One test per backend for each case. The PostgreSQL ones pass without running when no
/// server is reachable, unless CI is set (see [`TestDb::create`]).
macro_rules! on_both_backends {
    ($($group:ident :: $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    super::$group::$case(&super::Harness::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    if let Some(harness) = super::Harness::postgres().await {
                        super::$group::$case(&harness).await;
                    }
                }
            )*
        }
    };
}

on_both_backends! {
    access::an_admin_token_is_found_by_its_hash_and_revoked_by_its_prefix,
    access::audit_events_read_back_filtered_and_paged_and_refuse_changes,
    access::users_hold_the_roles_an_owner_gave_them,
    keys::keys_are_found_until_revoked_and_prefixes_are_literal,
    keys::project_limits_round_trip_and_partial_updates_keep_the_rest,
    keys::key_limits_round_trip_and_name_exactly_one_live_key,
    keys::errors_about_a_whole_key_name_only_its_prefix,
    keys::key_scopes_and_expiry_round_trip,
    keys::a_limit_change_through_another_handle_is_seen_by_every_handle,
    keys::a_revoke_through_another_handle_is_seen,
    keys::project_guards_round_trip_in_order_and_travel_with_the_keys,
    keys::a_guards_change_through_another_handle_is_seen_by_every_handle,
    keys::project_tools_round_trip_and_travel_with_the_keys,
    keys::a_tools_change_through_another_handle_is_seen_by_every_handle,
    keys::a_projects_keys_are_listed_newest_first_revoked_ones_too,
    invocations::invocations_round_trip_every_field,
    invocations::attempts_that_do_not_read_as_attempts_read_as_none,
    invocations::guard_outcomes_that_do_not_read_as_such_read_as_none,
    invocations::every_cache_status_round_trips_and_an_unknown_one_reads_as_none,
    invocations::a_blocked_record_counts_as_a_request_and_an_error_without_tokens,
    invocations::a_record_stored_twice_is_kept_once,
    invocations::batches_are_idempotent,
    invocations::the_key_prefix_of_a_record_round_trips,
    invocations::spend_and_usage_add_up_the_period_of_one_subject,
    invocations::usage_adds_up_each_group_with_nearest_rank_percentiles,
    invocations::an_export_reads_each_record_once_oldest_first_across_pages_of_equal_times,
    invocations::recent_invocations_are_filtered_and_paged_newest_first,
    sessions::a_sign_out_is_seen_by_every_handle_and_kept_until_the_cookie_expires,
    responses::a_kept_response_is_read_back_by_its_project_only,
    responses::unicode_and_large_bodies_round_trip_exactly,
    responses::putting_an_id_again_replaces_what_it_keeps,
    responses::a_response_is_deleted_once_and_only_by_its_project,
    responses::responses_before_a_cutoff_are_deleted_a_limit_at_a_time,
    responses::a_retention_pass_deletes_old_responses_with_old_records,
    responses::a_conversation_is_read_through_its_parents_and_a_deleted_one_breaks_it,
    files::a_file_is_read_back_chunk_by_chunk_by_its_project_only,
    files::uploads_are_held_to_their_projects_quota_while_they_run,
    files::files_are_listed_in_pages_either_way_and_by_purpose,
    files::expired_files_and_abandoned_uploads_are_swept,
    batches::lines_are_leased_by_one_runner_and_answered_once,
    batches::leases_taken_at_once_never_overlap,
    batches::cancel_and_expiry_close_the_lines_not_in_flight,
    batches::a_refused_batch_keeps_no_lines_and_a_stale_validation_fails,
    batches::each_api_lists_its_own_and_only_an_ended_batch_is_deleted,
    schema::reopening_does_not_rerun_migrations,
    schema::a_v1_database_migrates_to_v2_and_keeps_its_keys_and_records,
    schema::a_v2_database_migrates_to_v3_and_keeps_its_records,
    schema::a_v3_database_migrates_to_v4_and_gains_kept_responses,
    schema::a_v4_database_migrates_to_v5_and_its_records_gain_image_and_audio_tokens,
    schema::a_v5_database_migrates_to_v6_and_projects_and_records_gain_guards,
    schema::a_v6_database_migrates_to_v7_and_its_records_gain_the_cache_columns,
    schema::a_v7_database_migrates_to_v8_and_gains_console_sign_outs,
    schema::a_v8_database_migrates_to_v9_and_kept_responses_gain_their_route_and_model,
    schema::a_v9_database_migrates_to_v10_and_its_kept_conversations_continue_whole,
    schema::a_v11_database_migrates_to_v12_and_projects_gain_tools,
    schema::a_v12_database_migrates_to_v13_and_its_records_gain_search_units,
    schema::a_v13_database_migrates_to_v14_and_its_records_gain_images,
    schema::a_v14_database_migrates_to_v15_and_its_records_gain_audio_seconds,
    schema::a_v15_database_migrates_to_v16_and_its_records_gain_characters,
    schema::a_v16_database_migrates_to_v17_and_gains_admin_tokens_and_the_audit_log,
    schema::a_v17_database_migrates_to_v18_and_gains_users,
    schema::a_v18_database_migrates_to_v19_and_gains_files,
    schema::a_v19_database_migrates_to_v20_and_gains_batches,
}

/// Where a case's database is, and what differs between the backends' databases.
pub(super) struct Harness {
    place: Place,
}

enum Place {
    Sqlite {
        path: PathBuf,
        _dir: tempfile::TempDir,
    },
    Postgres(TestDb),
}

/// A schema before one of the migrations both backends made: the one that added what it names.
#[derive(Debug, Clone, Copy)]
pub(super) enum Before {
    /// Before the limits of projects and keys, keys' scopes and key prefixes of records.
    Limits,
    /// Before the attempts of records.
    Attempts,
    /// Before the Responses API's kept responses.
    Responses,
    /// Before the image and audio prompt tokens of records.
    MediaTokens,
    /// Before projects' guards and records' guard outcomes.
    Guards,
    /// Before records' response cache status and saved cost.
    Cache,
    /// Before the admin console's sign-outs.
    SignOuts,
    /// Before kept responses' route and model.
    ResponseOrigin,
    /// Before kept responses kept their own turn only, with their parent.
    ResponseTurns,
    /// Before projects' `/mcp` tools (keys had theirs).
    ProjectTools,
    /// Before records' search units.
    SearchUnits,
    /// Before records' images.
    Images,
    /// Before records' seconds of audio.
    AudioSeconds,
    /// Before records' characters.
    Characters,
    /// Before admin tokens and the audit log.
    Access,
    /// Before the console's users.
    Users,
    /// Before uploaded files.
    Files,
    /// Before batches, and records' batch and line.
    Batches,
}

impl Harness {
    fn sqlite() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        // In a directory yet to be made: opening makes it.
        let path = dir.path().join("sub/g.db");
        Harness {
            place: Place::Sqlite { path, _dir: dir },
        }
    }

    async fn postgres() -> Option<Harness> {
        Some(Harness {
            place: Place::Postgres(TestDb::create().await?),
        })
    }

    /// A handle on the database (migrating it), as a gateway opens it: another one is another
    /// process or replica, with a cache of its own.
    pub(super) async fn open(&self) -> Store {
        match &self.place {
            Place::Sqlite { path, .. } => Store::open_sqlite(path).unwrap(),
            Place::Postgres(db) => Store::open(&db.url).await.unwrap(),
        }
    }

    fn sqlite_connection(path: &std::path::Path) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        conn
    }

    /// Runs `statements` behind the store's back.
    pub(super) async fn execute(&self, statements: &str) {
        match &self.place {
            Place::Sqlite { path, .. } => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).unwrap();
                }
                Harness::sqlite_connection(path)
                    .execute_batch(statements)
                    .unwrap()
            }
            Place::Postgres(db) => db.sql().await.batch_execute(statements).await.unwrap(),
        }
    }

    /// Runs `statements` behind the store's back; the database's refusal as text.
    pub(super) async fn try_execute(&self, statements: &str) -> Result<(), String> {
        match &self.place {
            Place::Sqlite { path, .. } => Harness::sqlite_connection(path)
                .execute_batch(statements)
                .map_err(|e| e.to_string()),
            Place::Postgres(db) => db
                .sql()
                .await
                .batch_execute(statements)
                .await
                .map_err(|e| format!("{e}: {:?}", e.as_db_error().map(|db| db.message()))),
        }
    }

    /// The one integer `query` selects.
    pub(super) async fn count(&self, query: &str) -> i64 {
        match &self.place {
            Place::Sqlite { path, .. } => Harness::sqlite_connection(path)
                .query_row(query, [], |row| row.get(0))
                .unwrap(),
            Place::Postgres(db) => test_db::count(&db.sql().await, query).await,
        }
    }

    /// The one text (or NULL) `query` selects.
    pub(super) async fn text(&self, query: &str) -> Option<String> {
        match &self.place {
            Place::Sqlite { path, .. } => Harness::sqlite_connection(path)
                .query_row(query, [], |row| row.get(0))
                .unwrap(),
            Place::Postgres(db) => db.sql().await.query_one(query, &[]).await.unwrap().get(0),
        }
    }

    /// `bytes` as a literal of the key_hash column.
    pub(super) fn blob(&self, bytes: &[u8]) -> String {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        match &self.place {
            Place::Sqlite { .. } => format!("x'{hex}'"),
            Place::Postgres(_) => format!("'\\x{hex}'::bytea"),
        }
    }

    /// `items` as a literal of a list column (a key's scope, a project's guards).
    pub(super) fn list(&self, items: &[&str]) -> String {
        match &self.place {
            Place::Sqlite { .. } => format!("'{}'", serde_json::to_string(items).unwrap()),
            Place::Postgres(_) => {
                let quoted: Vec<String> = items.iter().map(|i| format!("'{i}'")).collect();
                format!("ARRAY[{}]::text[]", quoted.join(", "))
            }
        }
    }

    /// The schema version of `schema` (the backends count their versions differently).
    pub(super) fn version_of(&self, schema: Before) -> i64 {
        match (&self.place, schema) {
            (Place::Sqlite { .. }, Before::Limits) => 2,
            (Place::Sqlite { .. }, Before::Attempts) => 3,
            (Place::Sqlite { .. }, Before::Responses) => 4,
            (Place::Sqlite { .. }, Before::MediaTokens) => 5,
            (Place::Sqlite { .. }, Before::Guards) => 6,
            (Place::Sqlite { .. }, Before::Cache) => 7,
            (Place::Sqlite { .. }, Before::SignOuts) => 8,
            (Place::Sqlite { .. }, Before::ResponseOrigin) => 9,
            (Place::Sqlite { .. }, Before::ResponseTurns) => 10,
            (Place::Sqlite { .. }, Before::ProjectTools) => 12,
            (Place::Sqlite { .. }, Before::SearchUnits) => 13,
            (Place::Sqlite { .. }, Before::Images) => 14,
            (Place::Sqlite { .. }, Before::AudioSeconds) => 15,
            (Place::Sqlite { .. }, Before::Characters) => 16,
            (Place::Sqlite { .. }, Before::Access) => 17,
            (Place::Sqlite { .. }, Before::Users) => 18,
            (Place::Sqlite { .. }, Before::Files) => 19,
            (Place::Sqlite { .. }, Before::Batches) => 20,
            (Place::Postgres(_), Before::Limits) => 1,
            (Place::Postgres(_), Before::Attempts) => 2,
            (Place::Postgres(_), Before::Responses) => 3,
            (Place::Postgres(_), Before::MediaTokens) => 4,
            (Place::Postgres(_), Before::Guards) => 5,
            (Place::Postgres(_), Before::Cache) => 6,
            (Place::Postgres(_), Before::SignOuts) => 7,
            (Place::Postgres(_), Before::ResponseOrigin) => 8,
            (Place::Postgres(_), Before::ResponseTurns) => 9,
            (Place::Postgres(_), Before::ProjectTools) => 11,
            (Place::Postgres(_), Before::SearchUnits) => 12,
            (Place::Postgres(_), Before::Images) => 13,
            (Place::Postgres(_), Before::AudioSeconds) => 14,
            (Place::Postgres(_), Before::Characters) => 15,
            (Place::Postgres(_), Before::Access) => 16,
            (Place::Postgres(_), Before::Users) => 17,
            (Place::Postgres(_), Before::Files) => 18,
            (Place::Postgres(_), Before::Batches) => 19,
        }
    }

    /// The newest schema version this gateway knows.
    pub(super) fn known_version(&self) -> i64 {
        match &self.place {
            Place::Sqlite { .. } => crate::store::sqlite::migrations::MIGRATIONS.len() as i64,
            Place::Postgres(_) => crate::store::postgres::migrations::MIGRATIONS.len() as i64,
        }
    }

    /// Makes the database one of `schema`, as a gateway of then left it (empty).
    pub(super) async fn create_old_schema(&self, schema: Before) {
        let version = self.version_of(schema);
        let migrations = match &self.place {
            Place::Sqlite { .. } => crate::store::sqlite::migrations::MIGRATIONS,
            Place::Postgres(_) => crate::store::postgres::migrations::MIGRATIONS,
        };
        for migration in &migrations[..version as usize] {
            self.execute(migration).await;
        }
        let record_version = match &self.place {
            Place::Sqlite { .. } => format!("PRAGMA user_version = {version}"),
            Place::Postgres(_) => format!(
                "CREATE TABLE gateway_schema (version BIGINT NOT NULL);
                 INSERT INTO gateway_schema (version) VALUES ({version});"
            ),
        };
        self.execute(&record_version).await;
    }

    /// The schema version the database records.
    pub(super) async fn schema_version(&self) -> i64 {
        match &self.place {
            Place::Sqlite { .. } => self.count("PRAGMA user_version").await,
            Place::Postgres(_) => self.count("SELECT max(version) FROM gateway_schema").await,
        }
    }

    /// How long a change made through one handle may take to reach another one's cache:
    /// SQLite's handles see it at their next lookup (the stamp file), PostgreSQL's replicas
    /// when the notification arrives.
    pub(super) fn propagation(&self) -> Duration {
        match &self.place {
            Place::Sqlite { .. } => Duration::ZERO,
            Place::Postgres(_) => Duration::from_secs(1),
        }
    }

    /// Values of the attempts column that are no list of attempts, as SQL literals.
    pub(super) fn unreadable_attempts(&self) -> &'static [&'static str] {
        match &self.place {
            // SQLite keeps any type in any column.
            Place::Sqlite { .. } => &[
                "'not json'",
                r#"'[{"route":"r"}]'"#,
                r#"'{"route":"r"}'"#,
                "42",
                "x'5b5d'",
            ],
            Place::Postgres(_) => &[
                r#"'{"route": "r"}'::jsonb"#,
                r#"'[{"route": "r"}]'::jsonb"#,
                r#"'[{"route": 1, "duration_ms": 1}]'::jsonb"#,
                r#"'"text"'::jsonb"#,
                "'null'::jsonb",
                "'42'::jsonb",
            ],
        }
    }

    /// Whether the database orders ids (at equal times) byte by byte, as SQLite does;
    /// PostgreSQL orders them in the database's collation.
    pub(super) fn orders_ids_bytewise(&self) -> bool {
        matches!(self.place, Place::Sqlite { .. })
    }
}

/// Waits until `check` holds, for at most `within` (once, for `Duration::ZERO`); returns how
/// long it took.
pub(super) async fn seen_within<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < within,
            "{what}: not seen within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

/// What the cases do with a backend that the store's interface does not offer.
impl Store {
    /// Stores a key of the given prefix and hash (a key of its own choosing, unlike
    /// [`Store::create_key`]).
    pub(super) async fn insert_key(
        &self,
        project_id: &str,
        prefix: &str,
        hash: &[u8; 32],
        spec: &KeySpec,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.insert_key(project_id, prefix, hash, spec),
            Backend::Postgres(db) => db.insert_key(project_id, prefix, hash, spec).await,
        }
    }

    pub(super) async fn revoke(&self, which: &KeyMatch) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.revoke(which),
            Backend::Postgres(db) => db.revoke(which).await,
        }
    }

    /// [`Store::update_key_limits`] of the keys `which` names, its errors as the backend gives
    /// them.
    pub(super) async fn update_limits_of(
        &self,
        which: &KeyMatch,
        update: &LimitUpdate,
    ) -> Result<(String, LimitSet), StoreError> {
        match &self.backend {
            Backend::Sqlite(db) => db.update_key_limits(which, update),
            Backend::Postgres(db) => db.update_key_limits(which, update).await,
        }
    }

    /// Whether changes made elsewhere reach this handle's cache (SQLite's always do).
    pub(super) fn listening(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(_) => true,
            Backend::Postgres(db) => db.listening(),
        }
    }

    /// Waits (10 s at most) until [`Store::listening`].
    pub(super) async fn wait_until_listening(&self) {
        seen_within(
            Duration::from_secs(10),
            "the listener subscribing",
            || async { self.listening() },
        )
        .await;
    }
}

#[test]
fn names_and_limits_the_store_would_not_keep_are_refused() {
    assert!(check_name("name", &"é".repeat(128)).is_ok());
    let long = check_name("name", &"x".repeat(257)).unwrap_err();
    assert!(long.to_string().starts_with("name: 257 bytes"), "{long}");
    for name in ["a\0b", "a\rb", "a\nb", "\u{7f}", "\u{85}"] {
        let refused = check_name("routes", name).unwrap_err();
        assert!(matches!(
            refused,
            StoreError::Invalid {
                field: "routes",
                ..
            }
        ));
    }
    let tpm = |tpm| LimitUpdate {
        tpm: Some(tpm),
        ..LimitUpdate::default()
    };
    assert!(tpm(MAX_TPM).check().is_ok());
    let refused = tpm(MAX_TPM + 1).check().unwrap_err();
    assert!(refused.to_string().starts_with("tpm: "), "{refused}");
    let spec = |routes: &[&str], models: &[&str]| KeySpec {
        limits: LimitSet::default(),
        scope: KeyScope {
            routes: routes.iter().map(|r| r.to_string()).collect(),
            models: models.iter().map(|m| m.to_string()).collect(),
            expires_at_ms: None,
            tools: Vec::new(),
        },
    };
    assert!(spec(&["demo"], &["demo/m"]).check().is_ok());
    assert!(spec(&["de\nmo"], &[]).check().is_err());
    assert!(
        spec(&[], &[&format!("demo/{}", "m".repeat(300))])
            .check()
            .is_err()
    );
}

impl Store {
    /// The ids of every stored invocation record, sorted: what the writer's
    /// and retention's tests compare with what they expect.
    pub(crate) async fn stored_ids(&self) -> Vec<Uuid> {
        let filter = InvocationFilter {
            limit: 100_000,
            ..InvocationFilter::default()
        };
        let mut ids: Vec<_> = self
            .list_invocations(&filter)
            .await
            .expect("the invocations can be listed")
            .into_iter()
            .map(|r| r.id)
            .collect();
        ids.sort();
        ids
    }
}

/// A journal line (a record's serde form) keeps a record's guard outcomes and status; a line
/// written before guards existed reads as a record without any.
#[test]
fn journal_lines_keep_guard_outcomes_and_older_lines_have_none() {
    let record = Invocation {
        status: InvocationStatus::Blocked,
        guards: guard_outcomes(),
        ..Invocation::begun(Uuid::now_v7(), 1)
    };
    let line = serde_json::to_string(&record).unwrap();
    assert!(line.contains(r#""status":"blocked""#), "{line}");
    assert!(
        line.contains(r#""stage":"request","verdict":"rewrite""#),
        "{line}"
    );
    assert_eq!(serde_json::from_str::<Invocation>(&line).unwrap(), record);
    let bare = Invocation::begun(Uuid::now_v7(), 1);
    let old_line = serde_json::to_string(&bare).unwrap();
    assert!(!old_line.contains("guards"), "{old_line}");
    assert_eq!(serde_json::from_str::<Invocation>(&old_line).unwrap(), bare);
    // As `GET /invocations/{id}` shows them.
    let shown = record.to_json();
    assert_eq!(shown["status"], "blocked");
    assert_eq!(
        shown["guards"][0],
        serde_json::json!({
            "guard": "pii", "stage": "request", "verdict": "rewrite", "reason": null,
            "changes": {"email": 2, "phone": u32::MAX}, "applied": true,
        })
    );
    assert_eq!(shown["guards"][2]["applied"], false);
    assert_eq!(bare.to_json()["guards"], serde_json::json!([]));
}

/// A journal line keeps how the response cache served the record; a line written before the
/// cache existed reads as a record served without one.
#[test]
fn journal_lines_keep_the_cache_status_and_older_lines_have_none() {
    let record = Invocation {
        status: InvocationStatus::Success,
        cost_usd: Some(0.0),
        cache: Some(CacheStatus::Hit),
        saved_cost_usd: Some(0.0123),
        ..Invocation::begun(Uuid::now_v7(), 1)
    };
    let line = serde_json::to_string(&record).unwrap();
    assert!(
        line.contains(r#""cache":"hit","saved_cost_usd":0.0123"#),
        "{line}"
    );
    assert_eq!(serde_json::from_str::<Invocation>(&line).unwrap(), record);
    for status in [CacheStatus::Miss, CacheStatus::Skip] {
        let record = Invocation {
            cache: Some(status),
            ..record.clone()
        };
        let line = serde_json::to_string(&record).unwrap();
        assert!(
            line.contains(&format!(r#""cache":"{}""#, status.as_str())),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Invocation>(&line).unwrap(), record);
    }
    // A line as a gateway without the cache wrote it.
    let old_line = format!(
        r#"{{"id":"{}","project_id":"p","key_prefix":null,"user_id":null,"route":"r","plugin":null,"model":null,"kind":"chat","stream":false,"status":"success","http_status":200,"error":null,"provider_error":null,"usage":null,"cost_usd":0.5,"created_at_ms":1,"duration_ms":2,"request":null,"response":null}}"#,
        record.id
    );
    let old = serde_json::from_str::<Invocation>(&old_line).unwrap();
    assert_eq!((old.cache, old.saved_cost_usd), (None, None));
    assert_eq!(old.cost_usd, Some(0.5));
    // Nor does a record without them write them.
    let bare = serde_json::to_string(&Invocation::begun(Uuid::now_v7(), 1)).unwrap();
    assert!(!bare.contains("cache"), "{bare}");
    // As `GET /invocations/{id}` shows them: null when the route has no cache.
    let shown = record.to_json();
    assert_eq!(
        (&shown["cache"], &shown["savedCost"], &shown["usageCost"]),
        (
            &serde_json::json!("hit"),
            &serde_json::json!(0.0123),
            &serde_json::json!(0.0)
        )
    );
    let bare = Invocation::begun(Uuid::now_v7(), 1).to_json();
    assert!(
        bare["cache"].is_null() && bare["savedCost"].is_null(),
        "{bare}"
    );
}

#[test]
fn a_cache_status_parses_what_it_writes_and_nothing_else() {
    for status in [CacheStatus::Hit, CacheStatus::Miss, CacheStatus::Skip] {
        assert_eq!(CacheStatus::parse(status.as_str()), Some(status));
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::json!(status.as_str())
        );
    }
    for text in ["", "HIT", "hit ", "stale"] {
        assert_eq!(CacheStatus::parse(text), None, "{text:?}");
    }
}
