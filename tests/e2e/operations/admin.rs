//! The admin API for projects, keys, limits and usage, and the CLI verbs that do the same
//! (`project list|limit|usage`, `key create` with limits and a scope, `key limit`), end to end
//! against a real gateway (SQLite by default; PostgreSQL with `GATEWAY_TEST_POSTGRES`).
//! A project's guards are tested in `project_guards`.
//!
//! Enforcing the limits (429s) is tested elsewhere; here only that they are stored and shown.

use std::time::{Duration, Instant};

use gateway_test_support::{Gateway, Response, Route, assert_ok, text_request};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-the-admin-tests-0123456789";

fn admin_gateway() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start()
}

/// `METHOD PATH` with `Authorization: Bearer TOKEN` (when given) and `body` as it is.
fn call(gw: &Gateway, method: &str, path: &str, token: Option<&str>, body: &str) -> Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    gw.request(method, path, auth.as_deref(), &[], body.as_bytes())
}

/// An admin call with the right token.
fn admin(gw: &Gateway, method: &str, path: &str, body: &str) -> Response {
    call(gw, method, path, Some(ADMIN_TOKEN), body)
}

/// The JSON answer of `response`, which must have `status`.
fn expect(response: &Response, status: u16) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()
}

/// The error answer of `response`, which must have `status`: `{"error", "invocationId"}`.
fn expect_error(response: &Response, status: u16) -> String {
    let body = expect(response, status);
    assert!(body["invocationId"].is_string(), "{body}");
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"))
        .to_owned()
}

fn no_limits() -> Value {
    json!({"rpm": null, "tpm": null, "dailyBudgetUsd": null, "monthlyBudgetUsd": null})
}

fn assert_rfc3339(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a time: {value}"));
    assert!(
        text.len() >= 20 && text.as_bytes()[10] == b'T' && text.ends_with('Z'),
        "not RFC 3339 UTC: {text}"
    );
}

/// Creates a project through the API; returns its JSON.
fn new_project(gw: &Gateway, body: Value) -> Value {
    expect(
        &admin(gw, "POST", "/admin/projects", &body.to_string()),
        201,
    )
}

/// Creates a key through the API; returns its JSON.
fn new_key(gw: &Gateway, project_id: &str, body: &str) -> Value {
    expect(
        &admin(
            gw,
            "POST",
            &format!("/admin/projects/{project_id}/keys"),
            body,
        ),
        201,
    )
}

/// A text completion on the echo route with `key` for `project_id`.
fn complete(gw: &Gateway, project_id: &str, key: &str) -> Response {
    gw.post_as(
        "/completions",
        Some(key),
        &text_request(project_id, "demo", "echo", "Hello"),
    )
}

/// Waits (bounded) until a completion with `key` is refused with 401: a revocation reaches
/// the key caches through an invalidation (stamp file or NOTIFY), not always by the next
/// request.
fn wait_refused(gw: &Gateway, project_id: &str, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = complete(gw, project_id, key);
        if response.status == 401 {
            return;
        }
        assert_eq!(response.status, 200, "{}", response.text());
        assert!(
            Instant::now() < deadline,
            "the revoked key still works after 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------- authorization

#[test]
fn every_endpoint_needs_the_admin_token() {
    let gw = admin_gateway();
    let project = &gw.project_id;
    let prefix = &gw.key[..16];
    let endpoints = [
        ("GET", "/admin/projects".to_owned(), ""),
        ("POST", "/admin/projects".to_owned(), r#"{"name":"x"}"#),
        ("POST", format!("/admin/projects/{project}/keys"), ""),
        ("PUT", format!("/admin/projects/{project}/limits"), "{}"),
        ("PUT", format!("/admin/keys/{prefix}/limits"), "{}"),
        ("DELETE", format!("/admin/keys/{prefix}"), ""),
        ("GET", format!("/admin/projects/{project}/usage"), ""),
        ("GET", format!("/admin/projects/{project}"), ""),
        ("GET", format!("/admin/projects/{project}/guards"), ""),
        (
            "PUT",
            format!("/admin/projects/{project}/guards"),
            r#"{"guards":[]}"#,
        ),
    ];
    // No token, a wrong one, a project key. Nine wrong tokens: one fewer than an address may
    // send a minute, so that the right one is still compared below (the throttle's own test is
    // the console's).
    let wrong = [Some("not-the-token"), Some(gw.key.as_str())];
    let tokens = endpoints
        .iter()
        .map(|_| None)
        .chain(wrong.into_iter().cycle().take(9));
    for ((method, path, body), token) in endpoints.iter().cycle().zip(tokens) {
        let response = call(&gw, method, path, token, body);
        let message = expect_error(&response, 401);
        assert!(
            message.contains("admin_token"),
            "{method} {path}: {message}"
        );
    }
    // Nothing was done: the test project's key still works, no project was added.
    assert_ok(&complete(&gw, &gw.project_id, &gw.key));
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(
        listed["projects"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
}

#[test]
fn without_an_admin_token_configured_every_endpoint_answers_401() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let response = call(&gw, "GET", "/admin/projects", Some("anything"), "");
    expect_error(&response, 401);
    let path = format!("/admin/projects/{}/keys", gw.project_id);
    expect_error(&call(&gw, "POST", &path, Some(""), ""), 401);
}

// ---------------------------------------------------------------- projects

#[test]
fn projects_are_created_and_listed() {
    let gw = admin_gateway();
    let plain = new_project(&gw, json!({"name": "plain"}));
    assert_eq!(plain["name"], "plain");
    assert!(
        plain["id"].as_str().is_some_and(|id| !id.is_empty()),
        "{plain}"
    );
    assert_rfc3339(&plain["createdAt"]);
    assert_eq!(plain["limits"], no_limits());

    // camelCase and snake_case both; 0 is no limit.
    let limited = new_project(
        &gw,
        json!({"name": "limited", "limits": {"rpm": 10, "tpm": 0, "daily_budget_usd": 2.5,
            "monthlyBudgetUsd": 40}}),
    );
    assert_eq!(
        limited["limits"],
        json!({"rpm": 10, "tpm": null, "dailyBudgetUsd": 2.5, "monthlyBudgetUsd": 40.0})
    );

    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    let projects = listed["projects"].as_array().expect("a projects array");
    assert_eq!(projects.len(), 3, "{listed}");
    let find = |id: &Value| {
        projects
            .iter()
            .find(|p| p["id"] == *id)
            .unwrap_or_else(|| panic!("{id} not listed: {listed}"))
    };
    assert_eq!(find(&plain["id"]), &plain);
    assert_eq!(find(&limited["id"]), &limited);
    assert_eq!(find(&json!(gw.project_id))["name"], "test-project");

    // The CLI sees the same.
    let table = gw.cli_ok(&["project", "list"]);
    let line = table
        .lines()
        .find(|l| l.starts_with(limited["id"].as_str().unwrap_or("?")))
        .unwrap_or_else(|| panic!("project missing from `project list`:\n{table}"));
    assert!(line.contains("limited"), "{line}");
    assert!(line.contains("rpm=10"), "{line}");
    assert!(line.contains("daily_budget_usd=2.5"), "{line}");
    assert!(table.contains(&gw.project_id), "{table}");
}

#[test]
fn bad_project_bodies_are_refused() {
    let gw = admin_gateway();
    for body in [
        "",
        "{}",
        r#"{"name": ""}"#,
        r#"{"name": "   "}"#,
        r#"{"name": "x", "colour": "red"}"#,
        r#"{"name": "x", "limits": {"rpm": 1, "burst": 2}}"#,
        r#"{"name": "x", "limits": {"rpm": -1}}"#,
        r#"{"name": "x", "limits": {"dailyBudgetUsd": -5}}"#,
        "not json",
    ] {
        let response = admin(&gw, "POST", "/admin/projects", body);
        expect_error(&response, 400);
    }
    let too_big = format!(r#"{{"name": "{}"}}"#, "x".repeat(70 * 1024));
    expect_error(&admin(&gw, "POST", "/admin/projects", &too_big), 413);
    // None of them made a project.
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(
        listed["projects"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
}

#[test]
fn project_limits_are_replaced_by_put() {
    let gw = admin_gateway();
    let path = format!("/admin/projects/{}/limits", gw.project_id);
    let set = expect(
        &admin(
            &gw,
            "PUT",
            &path,
            r#"{"rpm": 5, "tpm": 1000, "dailyBudgetUsd": 1.5, "monthly_budget_usd": 30}"#,
        ),
        200,
    );
    assert_eq!(
        set,
        json!({"projectId": gw.project_id, "limits": {"rpm": 5, "tpm": 1000,
            "dailyBudgetUsd": 1.5, "monthlyBudgetUsd": 30.0}})
    );
    // The whole set: what is absent, null or 0 is no limit any more.
    let replaced = expect(
        &admin(
            &gw,
            "PUT",
            &path,
            r#"{"tpm": 0, "dailyBudgetUsd": null, "rpm": 7}"#,
        ),
        200,
    );
    assert_eq!(
        replaced["limits"],
        json!({"rpm": 7, "tpm": null, "dailyBudgetUsd": null, "monthlyBudgetUsd": null})
    );
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(
        listed["projects"][0]["limits"], replaced["limits"],
        "{listed}"
    );
    let cleared = expect(&admin(&gw, "PUT", &path, "{}"), 200);
    assert_eq!(cleared["limits"], no_limits());

    expect_error(&admin(&gw, "PUT", &path, ""), 400);
    expect_error(&admin(&gw, "PUT", &path, r#"{"rps": 3}"#), 400);
    expect_error(&admin(&gw, "PUT", &path, r#"{"rpm": "ten"}"#), 400);
    let unknown = admin(
        &gw,
        "PUT",
        "/admin/projects/no-such-project/limits",
        r#"{"rpm": 1}"#,
    );
    expect_error(&unknown, 404);
}

// ---------------------------------------------------------------- keys

#[test]
fn a_key_made_by_the_api_works_until_it_is_revoked() {
    let gw = admin_gateway();
    let project = new_project(&gw, json!({"name": "api-made"}));
    let project_id = project["id"].as_str().expect("an id");
    // An empty body: the defaults.
    let made = new_key(&gw, project_id, "");
    let key = made["key"].as_str().expect("the key");
    assert!(key.starts_with("gw_"), "{made}");
    assert_eq!(made["prefix"], json!(&key[..16]));
    assert_eq!(made["projectId"], json!(project_id));
    assert_eq!(made["limits"], no_limits());
    assert_eq!(made["routes"], json!([]));
    assert_eq!(made["models"], json!([]));
    assert_eq!(made["expiresAt"], Value::Null);
    // The key is in that answer only: never in the gateway's logs.
    assert!(!gw.logs().contains(key), "the key was logged");

    let answer = assert_ok(&complete(&gw, project_id, key));
    assert_eq!(answer["projectId"], json!(project_id), "{answer}");

    let prefix = made["prefix"].as_str().expect("a prefix");
    let revoked = expect(
        &admin(&gw, "DELETE", &format!("/admin/keys/{prefix}"), ""),
        200,
    );
    assert_eq!(revoked, json!({"revoked": 1}));
    wait_refused(&gw, project_id, key);
    // Nothing left to revoke under that prefix.
    expect_error(
        &admin(&gw, "DELETE", &format!("/admin/keys/{prefix}"), ""),
        404,
    );
    // Other keys are untouched.
    assert_ok(&complete(&gw, &gw.project_id, &gw.key));
}

#[test]
fn a_whole_key_revokes_just_that_key() {
    let gw = admin_gateway();
    let made = new_key(&gw, &gw.project_id, "{}");
    let key = made["key"].as_str().expect("the key");
    assert_ok(&complete(&gw, &gw.project_id, key));
    let revoked = expect(
        &admin(&gw, "DELETE", &format!("/admin/keys/{key}"), ""),
        200,
    );
    assert_eq!(revoked, json!({"revoked": 1}));
    wait_refused(&gw, &gw.project_id, key);
    assert_ok(&complete(&gw, &gw.project_id, &gw.key));
}

#[test]
fn a_key_with_limits_and_a_scope() {
    let gw = admin_gateway();
    let body = json!({
        "limits": {"rpm": 100, "tpm": 0, "dailyBudgetUsd": 3, "monthly_budget_usd": null},
        "routes": ["demo"],
        "models": ["other/some-model"],
        "expires": "30d",
    });
    let made = new_key(&gw, &gw.project_id, &body.to_string());
    assert_eq!(
        made["limits"],
        json!({"rpm": 100, "tpm": null, "dailyBudgetUsd": 3.0, "monthlyBudgetUsd": null})
    );
    assert_eq!(made["routes"], json!(["demo"]));
    assert_eq!(made["models"], json!(["other/some-model"]));
    assert_rfc3339(&made["expiresAt"]);
    // A real time (this century), not the epoch a zero would show.
    let expires = made["expiresAt"].as_str().unwrap_or_default();
    assert!(expires.starts_with("20"), "{expires}");
    assert_ok(&complete(
        &gw,
        &gw.project_id,
        made["key"].as_str().expect("key"),
    ));

    let dated = new_key(&gw, &gw.project_id, r#"{"expires": "2099-12-31"}"#);
    assert_eq!(dated["expiresAt"], "2100-01-01T00:00:00.000Z");
}

#[test]
fn bad_key_requests_are_refused() {
    let gw = admin_gateway();
    let path = format!("/admin/projects/{}/keys", gw.project_id);
    for body in [
        r#"{"models": ["no-slash"]}"#,
        r#"{"models": ["/model"]}"#,
        r#"{"routes": [""]}"#,
        r#"{"expires": "yesterday-ish"}"#,
        r#"{"expires": "2001-01-01"}"#,
        r#"{"scope": {}}"#,
        r#"{"limits": {"rpm": 1.5}}"#,
        r#"{"limits": {"monthlyBudgetUsd": -1}}"#,
        "[]",
    ] {
        expect_error(&admin(&gw, "POST", &path, body), 400);
    }
    let unknown = admin(&gw, "POST", "/admin/projects/no-such-project/keys", "");
    let message = expect_error(&unknown, 404);
    assert!(message.contains("no-such-project"), "{message}");

    expect_error(&admin(&gw, "DELETE", "/admin/keys/gw_1234", ""), 400);
    expect_error(&admin(&gw, "DELETE", "/admin/keys/gw_00000000000", ""), 404);
    expect_error(&admin(&gw, "PUT", "/admin/keys/gw_1/limits", "{}"), 400);
    // The test project's key is untouched by all that.
    assert_ok(&complete(&gw, &gw.project_id, &gw.key));
}

#[test]
fn key_limits_are_replaced_by_put() {
    let gw = admin_gateway();
    let prefix = &gw.key[..12];
    let path = format!("/admin/keys/{prefix}/limits");
    let set = expect(
        &admin(&gw, "PUT", &path, r#"{"rpm": 3, "daily_budget_usd": 0.25}"#),
        200,
    );
    assert_eq!(
        set,
        json!({"prefix": &gw.key[..16], "limits": {"rpm": 3, "tpm": null,
            "dailyBudgetUsd": 0.25, "monthlyBudgetUsd": null}})
    );
    let replaced = expect(&admin(&gw, "PUT", &path, r#"{"tpm": 500}"#), 200);
    assert_eq!(
        replaced["limits"],
        json!({"rpm": null, "tpm": 500, "dailyBudgetUsd": null, "monthlyBudgetUsd": null})
    );
    // The whole key names it too.
    let whole = expect(
        &admin(&gw, "PUT", &format!("/admin/keys/{}/limits", gw.key), "{}"),
        200,
    );
    assert_eq!(whole["limits"], no_limits());
    let unknown = admin(&gw, "PUT", "/admin/keys/gw_00000000000/limits", "{}");
    expect_error(&unknown, 404);
}

#[test]
fn an_ambiguous_key_prefix_is_a_conflict() {
    let gw = admin_gateway();
    // Keys are random hex after `gw_`: 16^5 possible first 8 characters, so two keys share
    // them after about 1300 keys on average (the birthday bound); 10000 without a shared
    // prefix has a chance of about e^-47.
    let mut seen: std::collections::HashMap<String, String> = Default::default();
    let shared = loop {
        let made = new_key(&gw, &gw.project_id, "");
        let key = made["key"].as_str().expect("the key").to_owned();
        let short = key[..8].to_owned();
        if seen.insert(short.clone(), key).is_some() {
            break short;
        }
        assert!(seen.len() < 10_000, "no two keys shared 8 characters");
    };
    let response = admin(&gw, "PUT", &format!("/admin/keys/{shared}/limits"), "{}");
    let message = expect_error(&response, 409);
    assert!(message.contains("give more of the key"), "{message}");
}

// ---------------------------------------------------------------- usage

#[test]
fn usage_counts_the_projects_requests() {
    let gw = admin_gateway();
    let project = new_project(&gw, json!({"name": "counted"}));
    let project_id = project["id"].as_str().expect("an id");
    let key = new_key(&gw, project_id, "")["key"]
        .as_str()
        .expect("a key")
        .to_owned();
    let path = format!("/admin/projects/{project_id}/usage");
    let before = expect(&admin(&gw, "GET", &path, ""), 200);
    assert_eq!(before["requests"], 0, "{before}");
    assert_eq!(before["spendUsd"], 0.0, "{before}");

    const N: u64 = 3;
    for _ in 0..N {
        assert_ok(&complete(&gw, project_id, &key));
    }
    // Another project's requests are not counted.
    assert_ok(&complete(&gw, &gw.project_id, &gw.key));

    for (query, period) in [
        ("", "day"),
        ("?period=day", "day"),
        ("?period=month", "month"),
    ] {
        let usage = expect(&admin(&gw, "GET", &format!("{path}{query}"), ""), 200);
        assert_eq!(usage["projectId"], json!(project_id), "{usage}");
        assert_eq!(usage["period"], period, "{usage}");
        assert_rfc3339(&usage["since"]);
        let since = usage["since"].as_str().unwrap_or_default();
        assert!(
            since.ends_with("T00:00:00.000Z"),
            "not a UTC day start: {since}"
        );
        if period == "month" {
            assert_eq!(&since[8..10], "01", "not a month's first day: {since}");
        }
        assert_eq!(usage["requests"].as_u64(), Some(N), "{usage}");
        // Echo counts words: "Hello" is one prompt token, one completion token.
        assert_eq!(usage["promptTokens"].as_u64(), Some(N), "{usage}");
        assert_eq!(usage["completionTokens"].as_u64(), Some(N), "{usage}");
        assert_eq!(usage["totalTokens"].as_u64(), Some(2 * N), "{usage}");
        assert!(usage["spendUsd"].is_number(), "{usage}");
    }

    let cli = gw.cli_ok(&["project", "usage", project_id, "--period", "month"]);
    assert!(cli.contains(&format!("requests: {N}")), "{cli}");
    assert!(cli.contains(&format!("total_tokens: {}", 2 * N)), "{cli}");

    expect_error(&admin(&gw, "GET", &format!("{path}?period=week"), ""), 400);
    expect_error(&admin(&gw, "GET", &format!("{path}?since=0"), ""), 400);
    let unknown = admin(&gw, "GET", "/admin/projects/no-such-project/usage", "");
    expect_error(&unknown, 404);
}

// ---------------------------------------------------------------- methods and paths

#[test]
fn wrong_methods_and_unknown_paths() {
    let gw = admin_gateway();
    let project = &gw.project_id;
    let prefix = &gw.key[..16];
    for (method, path, allowed) in [
        ("DELETE", "/admin/projects".to_owned(), "GET, POST"),
        (
            "PUT",
            format!("/admin/projects/{project}/keys"),
            "GET, POST",
        ),
        ("POST", format!("/admin/projects/{project}/limits"), "PUT"),
        ("GET", format!("/admin/keys/{prefix}/limits"), "PUT"),
        ("GET", format!("/admin/keys/{prefix}"), "DELETE"),
        ("POST", format!("/admin/projects/{project}/usage"), "GET"),
        ("DELETE", format!("/admin/projects/{project}"), "GET"),
        (
            "POST",
            format!("/admin/projects/{project}/guards"),
            "GET, PUT",
        ),
    ] {
        // Without the token too: the method is wrong whoever asks.
        for token in [Some(ADMIN_TOKEN), None] {
            let response = call(&gw, method, &path, token, "");
            expect_error(&response, 405);
            assert_eq!(response.header("allow"), Some(allowed), "{method} {path}");
        }
    }
    for path in [
        "/admin/projects/".to_owned(),
        format!("/admin/projects/{project}/keys/x"),
        format!("/admin/projects/{project}/guards/x"),
        "/admin/keys/".to_owned(),
        "/admin/nothing".to_owned(),
    ] {
        expect_error(&admin(&gw, "GET", &path, ""), 404);
    }
}

// ---------------------------------------------------------------- CLI

#[test]
fn cli_project_limit_sets_clears_and_prints() {
    let gw = admin_gateway();
    let out = gw.cli_ok(&[
        "project",
        "limit",
        &gw.project_id,
        "--rpm",
        "10",
        "--daily-budget-usd",
        "2.5",
    ]);
    assert!(out.contains("rpm: 10"), "{out}");
    assert!(out.contains("tpm: none"), "{out}");
    assert!(out.contains("daily_budget_usd: 2.5"), "{out}");
    assert!(out.contains("monthly_budget_usd: none"), "{out}");
    // Unchanged flags stay; 0 clears.
    let out = gw.cli_ok(&[
        "project",
        "limit",
        &gw.project_id,
        "--rpm",
        "0",
        "--tpm",
        "900",
    ]);
    assert!(out.contains("rpm: none"), "{out}");
    assert!(out.contains("tpm: 900"), "{out}");
    assert!(out.contains("daily_budget_usd: 2.5"), "{out}");
    // The API reads what the CLI wrote.
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(
        listed["projects"][0]["limits"],
        json!({"rpm": null, "tpm": 900, "dailyBudgetUsd": 2.5, "monthlyBudgetUsd": null})
    );

    let none = gw.cli(&["project", "limit", &gw.project_id]);
    assert!(!none.status.success());
    assert!(
        none.stderr.contains("at least one limit"),
        "{}",
        none.stderr
    );
    let negative = gw.cli(&["project", "limit", &gw.project_id, "--daily-budget-usd=-1"]);
    assert!(!negative.status.success(), "{}", negative.stdout);
    let nan = gw.cli(&[
        "project",
        "limit",
        &gw.project_id,
        "--monthly-budget-usd",
        "NaN",
    ]);
    assert!(!nan.status.success(), "{}", nan.stdout);
    let unknown = gw.cli(&["project", "limit", "no-such-project", "--rpm", "1"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", unknown.stdout);
    assert!(
        unknown.stderr.contains("no-such-project"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn cli_key_create_with_every_flag() {
    let gw = admin_gateway();
    let out = gw.cli(&[
        "key",
        "create",
        &gw.project_id,
        "--rpm",
        "50",
        "--tpm",
        "5000",
        "--daily-budget-usd",
        "1",
        "--monthly-budget-usd",
        "20",
        "--routes",
        "demo,other",
        "--models",
        "other/a,third/b",
        "--expires",
        "30d",
    ]);
    assert!(out.status.success(), "{}", out.stderr);
    let key = out.last_line();
    assert!(key.starts_with("gw_") && key.len() == 43, "{}", out.stdout);
    assert_ok(&complete(&gw, &gw.project_id, &key));
    // Its limits were stored: `key limit` shows them after a change of one.
    let shown = gw.cli_ok(&["key", "limit", &key[..10], "--tpm", "0"]);
    assert!(shown.contains(&key[..16]), "{shown}");
    assert!(shown.contains("rpm: 50"), "{shown}");
    assert!(shown.contains("tpm: none"), "{shown}");
    assert!(shown.contains("daily_budget_usd: 1"), "{shown}");
    assert!(shown.contains("monthly_budget_usd: 20"), "{shown}");

    for bad in [
        &["--models", "no-slash"][..],
        &["--daily-budget-usd", "-3"],
        &["--expires", "2001-01-01"],
        &["--rpm", "-1"],
    ] {
        let mut args = vec!["key", "create", gw.project_id.as_str()];
        args.extend_from_slice(bad);
        let refused = gw.cli(&args);
        assert!(!refused.status.success(), "{bad:?}: {}", refused.stdout);
        assert!(
            !refused.stdout.contains("gw_"),
            "{bad:?} made a key: {}",
            refused.stdout
        );
    }
}

#[test]
fn cli_key_limit_refuses_unknown_and_short_prefixes() {
    let gw = admin_gateway();
    let unknown = gw.cli(&["key", "limit", "gw_ffffffffffff", "--rpm", "1"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", unknown.stdout);
    assert!(
        unknown.stderr.contains("no live key starts with"),
        "{}",
        unknown.stderr
    );
    let short = gw.cli(&["key", "limit", "gw_1", "--rpm", "1"]);
    assert_eq!(short.status.code(), Some(1));
    assert!(short.stderr.contains("at least 8"), "{}", short.stderr);
    let none = gw.cli(&["key", "limit", &gw.key]);
    assert!(!none.status.success());
    assert!(
        none.stderr.contains("at least one limit"),
        "{}",
        none.stderr
    );
}

// ---------------------------------------------------------------- values the store cannot keep

/// How many projects the API lists.
fn project_count(gw: &Gateway) -> usize {
    let listed = expect(&admin(gw, "GET", "/admin/projects", ""), 200);
    listed["projects"].as_array().map_or(0, Vec::len)
}

/// Runs `gateway ARGS`, which must fail naming `needle` on stderr and print no key.
fn cli_refuses(gw: &Gateway, args: &[&str], needle: &str) {
    let refused = gw.cli(args);
    assert!(!refused.status.success(), "{args:?}: {}", refused.stdout);
    assert!(
        refused.stderr.contains(needle),
        "{args:?} should name {needle:?}: {}",
        refused.stderr
    );
    assert!(
        !refused.stdout.contains("gw_"),
        "{args:?}: {}",
        refused.stdout
    );
}

#[test]
fn a_far_future_expiry_is_refused_and_stores_no_key() {
    let gw = admin_gateway();
    let path = format!("/admin/projects/{}/keys", gw.project_id);
    let before = gw.row_count("api_keys");
    // Beyond the documented maximum (100 years ahead); the first two used to drop the
    // connection after storing a live key.
    for expires in ["9999-12-31", "8000y", "9999-12-31T23:59:59Z", "36501d"] {
        let body = json!({"expires": expires}).to_string();
        let message = expect_error(&admin(&gw, "POST", &path, &body), 400);
        assert!(message.contains("expires"), "{expires}: {message}");
        assert!(message.contains("100 years"), "{expires}: {message}");
    }
    assert_eq!(
        gw.row_count("api_keys"),
        before,
        "a refused create stored a key"
    );
    // The maximum itself is a key like any other.
    let longest = new_key(&gw, &gw.project_id, r#"{"expires": "36500d"}"#);
    assert_rfc3339(&longest["expiresAt"]);
    let key = longest["key"].as_str().expect("the key");
    assert_ok(&complete(&gw, &gw.project_id, key));

    for expires in ["9999-12-31", "8000y"] {
        let args = [
            "key",
            "create",
            gw.project_id.as_str(),
            "--expires",
            expires,
        ];
        cli_refuses(&gw, &args, "100 years");
    }
    assert_eq!(gw.row_count("api_keys"), before + 1);
}

#[test]
fn limits_beyond_the_stored_range_are_refused_naming_the_limit() {
    let gw = admin_gateway();
    let limits_path = format!("/admin/projects/{}/limits", gw.project_id);
    let keys_path = format!("/admin/projects/{}/keys", gw.project_id);
    let key_limits_path = format!("/admin/keys/{}/limits", &gw.key[..16]);
    let beyond = [u64::MAX, i64::MAX as u64 + 1];
    for tpm in beyond {
        let body = json!({"tpm": tpm}).to_string();
        for path in [&limits_path, &key_limits_path] {
            let message = expect_error(&admin(&gw, "PUT", path, &body), 400);
            assert!(message.contains("tpm"), "{path}: {message}");
        }
    }
    let message = expect_error(
        &admin(&gw, "PUT", &limits_path, r#"{"rpm": 5000000000}"#),
        400,
    );
    assert!(message.contains("rpm"), "{message}");
    // The largest stored value is stored as it was sent.
    let body = json!({"tpm": i64::MAX}).to_string();
    let set = expect(&admin(&gw, "PUT", &limits_path, &body), 200);
    assert_eq!(set["limits"]["tpm"], json!(i64::MAX), "{set}");
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(listed["projects"][0]["limits"]["tpm"], json!(i64::MAX));

    // Refused before anything is made: no key, no project.
    let keys_before = gw.row_count("api_keys");
    let projects_before = project_count(&gw);
    let key_body = json!({"limits": {"tpm": u64::MAX}}).to_string();
    let message = expect_error(&admin(&gw, "POST", &keys_path, &key_body), 400);
    assert!(message.contains("tpm"), "{message}");
    let project_body = json!({"name": "big", "limits": {"tpm": u64::MAX}}).to_string();
    let message = expect_error(&admin(&gw, "POST", "/admin/projects", &project_body), 400);
    assert!(message.contains("tpm"), "{message}");

    let too_big = u64::MAX.to_string();
    let project = gw.project_id.as_str();
    cli_refuses(
        &gw,
        &["project", "limit", project, "--tpm", &too_big],
        "tpm",
    );
    cli_refuses(
        &gw,
        &["key", "limit", &gw.key[..16], "--tpm", &too_big],
        "tpm",
    );
    cli_refuses(&gw, &["key", "create", project, "--tpm", &too_big], "tpm");
    assert_eq!(gw.row_count("api_keys"), keys_before);
    assert_eq!(project_count(&gw), projects_before);
    // What the CLI refused changed nothing.
    let listed = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    assert_eq!(listed["projects"][0]["limits"]["tpm"], json!(i64::MAX));
}

#[test]
fn long_names_and_control_characters_are_refused() {
    let gw = admin_gateway();
    let projects_before = project_count(&gw);
    let bad_names = [
        "x".repeat(257),
        "x".repeat(60 * 1024),
        "nul\u{0}inside".to_owned(),
        "carriage\rreturn".to_owned(),
        "line\nfeed".to_owned(),
        "delete\u{7f}".to_owned(),
    ];
    for name in &bad_names {
        let body = json!({"name": name}).to_string();
        let message = expect_error(&admin(&gw, "POST", "/admin/projects", &body), 400);
        assert!(message.contains("name"), "{message}");
        assert!(
            message.len() < 1024,
            "the message repeats the name: {message}"
        );
    }
    // 256 bytes (128 two-byte characters) is a name.
    let longest = "é".repeat(128);
    let made = new_project(&gw, json!({"name": longest}));
    assert_eq!(made["name"], json!(longest));

    // A key's scope names routes and models: the same rule.
    let keys_before = gw.row_count("api_keys");
    let keys_path = format!("/admin/projects/{}/keys", gw.project_id);
    for (body, field) in [
        (json!({"routes": ["demo\n"]}), "routes"),
        (json!({"routes": ["r".repeat(300)]}), "routes"),
        (
            json!({"models": [format!("demo/{}", "m".repeat(300))]}),
            "models",
        ),
        (json!({"models": ["demo/a\u{0}b"]}), "models"),
    ] {
        let message = expect_error(&admin(&gw, "POST", &keys_path, &body.to_string()), 400);
        assert!(message.contains(field), "{body}: {message}");
    }

    let long = "x".repeat(257);
    cli_refuses(&gw, &["project", "create", &long], "name");
    cli_refuses(&gw, &["project", "create", "line\nfeed"], "name");
    cli_refuses(&gw, &["project", "create", "tab\tinside"], "name");
    let project = gw.project_id.as_str();
    cli_refuses(
        &gw,
        &["key", "create", project, "--routes", "a\rb"],
        "routes",
    );
    let model = format!("demo/{}", "m".repeat(300));
    cli_refuses(
        &gw,
        &["key", "create", project, "--models", &model],
        "models",
    );

    assert_eq!(project_count(&gw), projects_before + 1);
    assert_eq!(gw.row_count("api_keys"), keys_before);
}
