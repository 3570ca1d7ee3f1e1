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

// ---------------------------------------------------------------- deployment's checks

/// `gateway ARGS` with only `vars` of the environment (no config but what ARGS name).
fn gateway_with(args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(gateway_test_support::harness::gateway_binary())
        .args(args)
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("the gateway runs")
}

#[test]
fn check_config_reads_a_file_with_the_gateway_variables_over_it_and_never_repeats_a_value() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("gateway.toml");
    std::fs::write(
        &file,
        "listen = \"0.0.0.0:8080\"\n[providers.demo]\nplugin = \"echo\"\n",
    )
    .expect("the config");
    let file = file.to_str().expect("a UTF-8 path");

    let ok = gateway_with(
        &["check-config", file],
        &[
            ("GATEWAY_DATABASE_URL", "postgres://gw:s3cret@db:5432/gw"),
            ("GATEWAY_REDIS_URL", "redis://:s3cret@redis:6379/0"),
        ],
    );
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        said.contains(": ok: 1 routes")
            && said.contains("PostgreSQL + Redis")
            && said.contains("from the environment: GATEWAY_DATABASE_URL, GATEWAY_REDIS_URL"),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
    // GATEWAY_CONFIG names the file as well as the argument does.
    let ok = gateway_with(&["check-config"], &[("GATEWAY_CONFIG", file)]);
    assert!(ok.status.success());
    assert!(String::from_utf8_lossy(&ok.stdout).contains("SQLite"));

    for (var, value, named) in [
        (
            "GATEWAY_REDIS_URL",
            "http://:s3cret@redis:6379",
            "GATEWAY_REDIS_URL (sets redis_url)",
        ),
        (
            "GATEWAY_LISTEN",
            "s3cret:80",
            "GATEWAY_LISTEN (sets listen)",
        ),
        (
            "GATEWAY_DATABASE_URL",
            "mysql://gw:s3cret@db/gw",
            "database: neither",
        ),
        (
            "GATEWAY_ADMIN_TOKEN",
            "s3cret",
            "admin_token: must be at least 32 bytes",
        ),
    ] {
        let refused = gateway_with(&["check-config", file], &[(var, value)]);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{var}: {said}");
        assert!(said.contains(named), "{var}: {said}");
        assert!(!said.contains("s3cret"), "{var}: {said}");
        // `serve` refuses it alike, before it opens anything.
        if var != "GATEWAY_DATABASE_URL" {
            let serve = gateway_with(&["serve", "--config", file], &[(var, value)]);
            assert_eq!(serve.status.code(), Some(2), "serve with {var}");
        }
    }
    let missing = gateway_with(&["check-config", "/nonexistent/gateway.toml"], &[]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn healthcheck_exits_0_while_the_gateway_answers_and_1_when_nothing_does() {
    let gw = Gateway::demo();
    let url = format!("http://{}/healthz", gw.addr);
    let up = gw.cli(&["healthcheck", "--url", &url]);
    assert!(up.status.success(), "{}", up.stderr);
    assert!(up.stdout.contains("200"), "{}", up.stdout);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let down = gw.cli(&["healthcheck", "--url", &format!("http://{closed}/healthz")]);
    assert_eq!(down.status.code(), Some(1), "{}", down.stdout);
    assert!(down.stderr.starts_with("error: "), "{}", down.stderr);
}
