//! The process and its command line: `/healthz`, projects and keys made by the CLI while the
//! gateway serves, the config found through `GATEWAY_CONFIG`, plain keys never stored, SIGTERM,
//! the demo project made once.

use gateway_test_support::{
    Gateway, Route, assert_ok, assert_uuid_v7, contains_bytes, text_request,
};
use serde_json::{Value, json};

use crate::common::hello;

// ---------------------------------------------------------------- health

#[test]
fn healthz_answers_ok_without_a_key() {
    let gw = Gateway::demo();
    let response = gw.get("/healthz", None);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json(), json!({"status": "ok"}));
}
// ---------------------------------------------------------------- CLI and startup

#[test]
fn project_and_key_created_by_the_cli_work_while_serving() {
    let gw = Gateway::demo();
    let project = gw
        .cli(&["project", "create", "late"])
        .checked("project create")
        .last_line();
    assert!(!project.contains(char::is_whitespace), "{project:?}");
    let key = gw
        .cli(&["key", "create", &project])
        .checked("key create")
        .last_line();
    assert!(!key.contains(char::is_whitespace), "{key:?}");
    let request = text_request(&project, "demo", "echo", "late project");
    assert_ok(&gw.post_as("/completions", Some(&key), &request));
}

#[test]
fn cli_reads_the_config_from_gateway_config() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    let id = body["invocationId"].as_str().expect("id");
    gw.record(id);
    let out = gw
        .cli_env_config(&["invocations", "show", id])
        .checked("invocations show (GATEWAY_CONFIG)");
    let record: Value = serde_json::from_str(&out.stdout).expect("JSON record");
    assert_eq!(record["id"], json!(id));
}

#[test]
fn the_plain_key_is_not_stored() {
    let mut gw = Gateway::demo();
    assert_ok(&gw.post("/completions", &hello(&gw)));
    gw.shutdown();
    let db = gw.db_bytes();
    assert!(
        !contains_bytes(&db, gw.key.as_bytes()),
        "the API key is stored in clear in the database"
    );
}

#[test]
fn sigterm_exits_cleanly() {
    let mut gw = Gateway::demo();
    assert_ok(&gw.post("/completions", &hello(&gw)));
    let status = gw.shutdown();
    assert!(status.success(), "exit status {status}");
}

#[test]
fn demo_project_is_created_on_first_start() {
    // The harness reads the printed demo project id and key into `gw`.
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .demo_project(true)
        .start();
    assert!(!gw.project_id.is_empty() && !gw.key.is_empty());
    let request = text_request(&gw.project_id, "demo", "echo", "Hello demo");
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("Hello demo"));
    assert_uuid_v7(body["invocationId"].as_str().expect("id"));
}

#[test]
fn demo_project_is_created_only_once() {
    let mut gw = Gateway::builder()
        .route(Route::echo("demo"))
        .demo_project(true)
        .start();
    let first_project = gw.project_id.clone();
    gw.shutdown();
    // Same config and database: the store has a project now.
    let listed = gw.list_invocations(&[]);
    assert!(listed.is_empty(), "{listed:?}");
    let restarted = gw.restart();
    assert!(
        !restarted.iter().any(|l| l.starts_with("demo api key: ")),
        "a second demo key was created: {restarted:?}"
    );
    let request = text_request(&first_project, "demo", "echo", "again");
    assert_ok(&gw.post("/completions", &request));
}
