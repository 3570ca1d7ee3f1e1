//! A project's guards through the CLI (`gateway project guards PROJECT_ID [--set A,B |
//! --clear]`, `project list`) and the admin API (`GET /admin/projects/{id}`,
//! `GET`/`PUT /admin/projects/{id}/guards`), end to end against a real gateway (SQLite by
//! default; PostgreSQL with `GATEWAY_TEST_POSTGRES`). Ids are checked against the config's
//! `[guards.ID]`: the CLI's (its `--config`), the admin API's serving one.
//!
//! What the guards do to requests is tested with the flow (`flow::guards`); here only that they
//! are stored, shown, refused when unknown, and reach the running gateway's key cache.

use std::time::{Duration, Instant};

use gateway_test_support::{Gateway, Response, Route, text_request};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-the-project-guards-0123456789";

/// A gateway whose config defines the guards `pii` and `words` (both of the pii-guard plugin:
/// only their ids matter here) and `deny`, which refuses a request with an email address.
fn guarded_gateway() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .guard("pii", "pii-guard", "")
        .guard("words", "pii-guard", "")
        .guard(
            "deny",
            "pii-guard",
            "settings = { mode = \"deny\", kinds = [\"email\"] }",
        )
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start()
}

/// An admin call with the right token.
fn admin(gw: &Gateway, method: &str, path: &str, body: &str) -> Response {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    gw.request(method, path, Some(&auth), &[], body.as_bytes())
}

/// The JSON answer of `response`, which must have `status`.
fn expect(response: &Response, status: u16) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()
}

/// The error message of `response`, which must have `status`.
fn expect_error(response: &Response, status: u16) -> String {
    let body = expect(response, status);
    assert!(body["invocationId"].is_string(), "{body}");
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"))
        .to_owned()
}

/// What `gateway project guards ARGS` prints, which must succeed.
fn guards_cli(gw: &Gateway, project_id: &str, args: &[&str]) -> String {
    let mut full = vec!["project", "guards", project_id];
    full.extend_from_slice(args);
    gw.cli_ok(&full).trim_end().to_owned()
}

/// The `project list` line of `project_id`.
fn listed(gw: &Gateway, project_id: &str) -> String {
    let table = gw.cli_ok(&["project", "list"]);
    assert!(
        table.starts_with("ID  NAME  CREATED_AT  LIMITS  GUARDS  TOOLS\n"),
        "{table}"
    );
    table
        .lines()
        .find(|line| line.starts_with(project_id))
        .unwrap_or_else(|| panic!("{project_id} missing from `project list`:\n{table}"))
        .to_owned()
}

#[test]
fn the_cli_shows_sets_and_clears_a_projects_guards() {
    let gw = guarded_gateway();
    let project = gw.project_id.clone();
    let none = format!("guards of project {project}: none");
    assert_eq!(guards_cli(&gw, &project, &[]), none);
    assert!(
        listed(&gw, &project).ends_with("  -  all"),
        "no guards: `-` (then the tools, all)"
    );

    // Set, in the order given; shown again the same; listed.
    let set = format!("guards of project {project}: words, pii");
    assert_eq!(guards_cli(&gw, &project, &["--set", "words,pii"]), set);
    assert_eq!(guards_cli(&gw, &project, &[]), set);
    assert!(
        listed(&gw, &project).ends_with("  words,pii  all"),
        "{}",
        listed(&gw, &project)
    );
    // Replaced whole.
    assert_eq!(
        guards_cli(&gw, &project, &["--set", "pii"]),
        format!("guards of project {project}: pii")
    );

    // An id the config does not define: refused, naming it and the ones it does; nothing
    // changes.
    let refused = gw.cli(&["project", "guards", &project, "--set", "pii,nope"]);
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(
        refused.stderr.contains("\"nope\"")
            && refused.stderr.contains("[guards.nope]")
            && refused.stderr.contains("deny, pii, words"),
        "{}",
        refused.stderr
    );
    // Twice in the list: refused too.
    let twice = gw.cli(&["project", "guards", &project, "--set", "pii,pii"]);
    assert!(!twice.status.success(), "{}", twice.stdout);
    assert!(twice.stderr.contains("twice"), "{}", twice.stderr);
    // --set and --clear together: a usage error.
    let both = gw.cli(&["project", "guards", &project, "--set", "pii", "--clear"]);
    assert!(!both.status.success(), "{}", both.stdout);
    assert_eq!(
        guards_cli(&gw, &project, &[]),
        format!("guards of project {project}: pii")
    );

    // An unknown project: refused, whatever is asked.
    let asks: [&[&str]; 3] = [&[], &["--set", "pii"], &["--clear"]];
    for args in asks {
        let mut full = vec!["project", "guards", "no-such-project"];
        full.extend_from_slice(args);
        let unknown = gw.cli(&full);
        assert!(!unknown.status.success(), "{args:?}: {}", unknown.stdout);
        assert!(
            unknown
                .stderr
                .contains("no project with id no-such-project"),
            "{args:?}: {}",
            unknown.stderr
        );
    }

    // Cleared.
    assert_eq!(guards_cli(&gw, &project, &["--clear"]), none);
    assert_eq!(guards_cli(&gw, &project, &[]), none);
    assert!(listed(&gw, &project).ends_with("  -  all"));
}

#[test]
fn the_admin_api_shows_and_replaces_a_projects_guards() {
    let gw = guarded_gateway();
    let project = gw.project_id.clone();
    let path = format!("/admin/projects/{project}");
    let guards_path = format!("{path}/guards");

    let shown = expect(&admin(&gw, "GET", &path, ""), 200);
    assert_eq!(shown["id"], json!(project));
    assert_eq!(shown["name"], "test-project");
    assert_eq!(shown["guards"], json!([]));
    assert!(shown["limits"].is_object(), "{shown}");
    assert_eq!(
        expect(&admin(&gw, "GET", &guards_path, ""), 200),
        json!({"projectId": project, "guards": []})
    );

    // Replaced, in the order given.
    let answer = expect(
        &admin(&gw, "PUT", &guards_path, r#"{"guards": ["words", "pii"]}"#),
        200,
    );
    assert_eq!(
        answer,
        json!({"projectId": project, "guards": ["words", "pii"]})
    );
    assert_eq!(
        expect(&admin(&gw, "GET", &path, ""), 200)["guards"],
        json!(["words", "pii"])
    );
    let listed_projects = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    let row = listed_projects["projects"]
        .as_array()
        .and_then(|rows| rows.iter().find(|p| p["id"] == json!(project)))
        .unwrap_or_else(|| panic!("{project} not listed: {listed_projects}"))
        .clone();
    assert_eq!(row["guards"], json!(["words", "pii"]));
    // The CLI sees the same.
    assert_eq!(
        guards_cli(&gw, &project, &[]),
        format!("guards of project {project}: words, pii")
    );

    // An unknown id: 400 naming it; nothing changes.
    let message = expect_error(
        &admin(&gw, "PUT", &guards_path, r#"{"guards": ["pii", "nope"]}"#),
        400,
    );
    assert!(
        message.contains("\"nope\"") && message.contains("deny, pii, words"),
        "{message}"
    );
    // Bodies that are no list of ids.
    for body in [
        "",
        "{}",
        r#"{"guards": "pii"}"#,
        r#"{"guards": [1]}"#,
        r#"{"guards": ["pii"], "extra": 1}"#,
        r#"{"guards": ["pii", "pii"]}"#,
        "[]",
    ] {
        let response = admin(&gw, "PUT", &guards_path, body);
        assert_eq!(response.status, 400, "{body:?}: {}", response.text());
    }
    assert_eq!(
        expect(&admin(&gw, "GET", &guards_path, ""), 200)["guards"],
        json!(["words", "pii"])
    );

    // An unknown project: 404, for each endpoint.
    let message = expect_error(
        &admin(
            &gw,
            "PUT",
            "/admin/projects/nope/guards",
            r#"{"guards": ["pii"]}"#,
        ),
        404,
    );
    assert!(message.contains("no project with id nope"), "{message}");
    expect_error(&admin(&gw, "GET", "/admin/projects/nope", ""), 404);
    expect_error(&admin(&gw, "GET", "/admin/projects/nope/guards", ""), 404);

    // The admin token is needed; other methods are not allowed.
    for (method, target, body) in [
        ("GET", &path, ""),
        ("GET", &guards_path, ""),
        ("PUT", &guards_path, r#"{"guards": []}"#),
    ] {
        let anonymous = gw.request(method, target, None, &[], body.as_bytes());
        assert_eq!(anonymous.status, 401, "{method} {target}");
        let wrong = gw.request(method, target, Some("Bearer nope"), &[], body.as_bytes());
        assert_eq!(wrong.status, 401, "{method} {target}");
    }
    for (method, target) in [("POST", &guards_path), ("DELETE", &path), ("PUT", &path)] {
        let response = admin(&gw, method, target, "{}");
        assert_eq!(response.status, 405, "{method} {target}");
    }

    // Cleared with an empty list.
    assert_eq!(
        expect(&admin(&gw, "PUT", &guards_path, r#"{"guards": []}"#), 200),
        json!({"projectId": project, "guards": []})
    );
    assert_eq!(
        expect(&admin(&gw, "GET", &path, ""), 200)["guards"],
        json!([])
    );
}

#[test]
fn without_guards_in_the_config_every_id_is_refused() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start();
    let project = gw.project_id.clone();
    let refused = gw.cli(&["project", "guards", &project, "--set", "pii"]);
    assert!(!refused.status.success(), "{}", refused.stdout);
    assert!(
        refused.stderr.contains("\"pii\"") && refused.stderr.contains("defines none"),
        "{}",
        refused.stderr
    );
    let message = expect_error(
        &admin(
            &gw,
            "PUT",
            &format!("/admin/projects/{project}/guards"),
            r#"{"guards": ["pii"]}"#,
        ),
        400,
    );
    assert!(message.contains("defines none"), "{message}");
    // Clearing needs no guard.
    assert_eq!(
        guards_cli(&gw, &project, &["--clear"]),
        format!("guards of project {project}: none")
    );
}

/// A completion on the echo route with the project's key whose prompt has an email address.
fn with_email(gw: &Gateway) -> Response {
    gw.post_as(
        "/completions",
        Some(&gw.key),
        &text_request(
            &gw.project_id,
            "demo",
            "echo",
            "write to me at a.b@example.com",
        ),
    )
}

/// Waits (bounded) until a request with an email address gets `status`: a change of the
/// project's guards reaches the running gateway's key cache through an invalidation (the
/// stamp file, NOTIFY), not always by the very next request.
fn wait_for_status(gw: &Gateway, status: u16, what: &str) -> Response {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = with_email(gw);
        if response.status == status {
            return response;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still {} after 30 s: {}",
            response.status,
            response.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_guards_change_reaches_the_running_gateways_cached_key() {
    let gw = guarded_gateway();
    let project = gw.project_id.clone();
    // No guard: answered, and the key is now cached with its project's (empty) guards.
    let answered = with_email(&gw);
    assert_eq!(answered.status, 200, "{}", answered.text());

    // Set by another process (the CLI): the next requests go through the guard.
    guards_cli(&gw, &project, &["--set", "deny"]);
    let refused = wait_for_status(&gw, 400, "the guard set by the CLI");
    assert!(refused.text().contains("deny"), "{}", refused.text());

    // Cleared through the admin API (this process): answered again.
    expect(
        &admin(
            &gw,
            "PUT",
            &format!("/admin/projects/{project}/guards"),
            r#"{"guards": []}"#,
        ),
        200,
    );
    wait_for_status(&gw, 200, "the guards cleared by the admin API");

    // Set through the admin API, cleared by the CLI.
    expect(
        &admin(
            &gw,
            "PUT",
            &format!("/admin/projects/{project}/guards"),
            r#"{"guards": ["deny"]}"#,
        ),
        200,
    );
    wait_for_status(&gw, 400, "the guard set by the admin API");
    guards_cli(&gw, &project, &["--clear"]);
    wait_for_status(&gw, 200, "the guards cleared by the CLI");
}
