//! What only SQLite has: its query plans, its own schema history, and columns that hold any
//! type. The cases both backends share are in `store::tests`.

use rusqlite::{Connection, params};

use super::invocations::DELETE_OLD_INVOCATIONS;
use super::migrations::MIGRATIONS;
use super::{Sqlite, lock};
use crate::limits::LimitSet;
use crate::store::report::{self, Cursor, RecordRange};
use crate::store::sql::{self, Dialect};
use crate::store::{KeySpec, StoreError};
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

fn open(dir: &tempfile::TempDir) -> Sqlite {
    Sqlite::open(&dir.path().join("g.db")).unwrap().0
}

#[test]
fn stored_values_that_are_no_limit_read_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let project = db.create_project("p").unwrap();
    db.insert_key(
        &project.id,
        "gw_0123456789ab",
        &[9; 32],
        &KeySpec::default(),
    )
    .unwrap();
    lock(&db.reader)
        .execute_batch(
            "UPDATE projects SET rpm = -5, tpm = 'many', daily_budget_usd = 0,
                monthly_budget_usd = -1;
             UPDATE api_keys SET rpm = 5000000000, tpm = 0, daily_budget_usd = 'x',
                monthly_budget_usd = 3;",
        )
        .unwrap();
    let record = db.read_key(&[9; 32]).unwrap().unwrap();
    assert_eq!(record.project_limits, LimitSet::default());
    assert_eq!(
        record.limits,
        LimitSet {
            monthly_budget_usd: Some(3.0),
            ..LimitSet::default()
        }
    );
    assert_eq!(
        db.project(&project.id).unwrap().unwrap().limits,
        LimitSet::default()
    );
}

fn query_plan(db: &Sqlite, sql: &str) -> Vec<String> {
    let conn = lock(&db.reader);
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    stmt.query_map(params!["x", 0], |row| row.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn spend_queries_walk_their_subjects_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    // Budgets read this on a request's path: a SCAN would read every record.
    let plan = query_plan(&db, sql::SPENT_BY_KEY.text(Dialect::Sqlite));
    assert!(
        plan.iter().any(
            |step| step.contains("USING INDEX invocations_key (key_prefix=? AND created_at>?)")
        ),
        "{plan:?}"
    );
    let plan = query_plan(&db, sql::SPENT_BY_PROJECT.text(Dialect::Sqlite));
    assert!(
        plan.iter()
            .any(|step| step
                .contains("USING INDEX invocations_project (project_id=? AND created_at>?)")),
        "{plan:?}"
    );
}

#[test]
fn an_export_page_walks_the_created_at_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let after = Cursor::new(5, "x".into());
    let range = RecordRange {
        since_ms: Some(1),
        ..RecordRange::default()
    };
    let query = report::page_query(
        sql::select_invocation(Dialect::Sqlite, true),
        &range,
        Some(&after),
        report::Order::OldestFirst,
        1000,
        Dialect::Sqlite.placeholder(),
    );
    let conn = lock(&db.reader);
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {}", query.sql))
        .unwrap();
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params_from_iter(&query.values), |row| {
            row.get::<_, String>(3)
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // Sorted only within one created_at (ties), never the whole rest of the table.
    assert!(
        plan.iter()
            .any(|step| step.contains("USING INDEX invocations_created")),
        "{plan:?}"
    );
    assert!(
        !plan
            .iter()
            .any(|step| step == "USE TEMP B-TREE FOR ORDER BY"),
        "{plan:?}"
    );
}

#[test]
fn kept_responses_are_found_by_id_and_deleted_by_age_through_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let plan = |sql: &str, values: &[&dyn rusqlite::ToSql]| -> Vec<String> {
        let conn = lock(&db.reader);
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        stmt.query_map(values, |row| row.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    // Retention: a SCAN would read every kept response (and its bodies) on every pass.
    let delete = plan(
        sql::DELETE_OLD_RESPONSES.text(Dialect::Sqlite),
        &[&0i64, &10i64],
    );
    assert!(
        delete
            .iter()
            .any(|step| step.contains("USING INDEX responses_created (created_at<?)")),
        "{delete:?}"
    );
    assert!(
        !delete.iter().any(|step| step.starts_with("SCAN")),
        "{delete:?}"
    );
    for sql in [&sql::RESPONSE, &sql::DELETE_RESPONSE] {
        let found = plan(sql.text(Dialect::Sqlite), &[&"resp_x", &"p"]);
        assert!(
            found
                .iter()
                .any(|step| step.contains("USING INDEX sqlite_autoindex_responses_1 (id=?)")),
            "{found:?}"
        );
    }
}
