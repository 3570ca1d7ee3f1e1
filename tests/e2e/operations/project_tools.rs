//! A project's `/mcp` tools through the CLI (`gateway project tools PROJECT_ID [--set GLOB,... |
//! --clear]`, `project list`) and the admin API (`GET /admin/projects/{id}`,
//! `GET`/`PUT /admin/projects/{id}/tools`), end to end against a real gateway (SQLite by
//! default; PostgreSQL with `GATEWAY_TEST_POSTGRES`). Globs are not checked against the
//! config's `[mcp_servers]` (a server's tools are its own to list), only as the store keeps
//! names.
//!
//! What they do to `/mcp` (a tool outside the project's globs is left out of `tools/list` and
//! refused by `tools/call`, as one outside the key's) is tested with `/mcp`
//! (`surfaces::mcp`); what the store keeps, and that a change reaches every handle's cached
//! keys, with the store's own tests.

use gateway_test_support::{Gateway, Response, Route};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-the-project-tools-0123456789";

fn gateway() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
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
    body["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"))
        .to_owned()
}

/// What `gateway project tools ARGS` prints, which must succeed.
fn tools_cli(gw: &Gateway, project_id: &str, args: &[&str]) -> String {
    let mut full = vec!["project", "tools", project_id];
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
fn the_cli_shows_sets_and_clears_a_projects_tools() {
    let gw = gateway();
    let project = gw.project_id.clone();
    let all = format!("tools of project {project}: all");
    assert_eq!(tools_cli(&gw, &project, &[]), all);
    assert!(
        listed(&gw, &project).ends_with("  -  all"),
        "every tool: `all`"
    );

    // Set, in the order given (each glob trimmed); shown again the same; listed.
    let set = format!("tools of project {project}: github__*, calc__add");
    assert_eq!(
        tools_cli(&gw, &project, &["--set", "github__*, calc__add"]),
        set
    );
    assert_eq!(tools_cli(&gw, &project, &[]), set);
    let line = listed(&gw, &project);
    assert!(line.ends_with("  -  github__*,calc__add"), "{line}");
    // The guards are another column, untouched.
    assert_eq!(
        gw.cli_ok(&["project", "guards", &project]).trim_end(),
        format!("guards of project {project}: none")
    );
    // Replaced whole.
    assert_eq!(
        tools_cli(&gw, &project, &["--set", "calc__*"]),
        format!("tools of project {project}: calc__*")
    );

    // Refused, nothing changed: an empty glob (by parsing), one twice (by the store), one with
    // a control character, --set with --clear.
    for args in [
        &["--set", "calc__*,,github__*"][..],
        &["--set", "calc__*,calc__*"],
        &["--set", "calc\u{7}__*"],
        &["--set", "calc__*", "--clear"],
    ] {
        let mut full = vec!["project", "tools", &project];
        full.extend_from_slice(args);
        let refused = gw.cli(&full);
        assert!(!refused.status.success(), "{args:?}: {}", refused.stdout);
        assert!(!refused.stderr.is_empty(), "{args:?}: no error");
    }
    let twice = gw.cli(&["project", "tools", &project, "--set", "calc__*,calc__*"]);
    assert!(twice.stderr.contains("twice"), "{}", twice.stderr);
    assert_eq!(
        tools_cli(&gw, &project, &[]),
        format!("tools of project {project}: calc__*")
    );

    // An unknown project: refused, whatever is asked.
    let asks: [&[&str]; 3] = [&[], &["--set", "calc__*"], &["--clear"]];
    for args in asks {
        let mut full = vec!["project", "tools", "no-such-project"];
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

    // Cleared: every tool again.
    assert_eq!(tools_cli(&gw, &project, &["--clear"]), all);
    assert_eq!(tools_cli(&gw, &project, &[]), all);
    assert!(listed(&gw, &project).ends_with("  -  all"));
}

#[test]
fn the_admin_api_shows_and_replaces_a_projects_tools() {
    let gw = gateway();
    let project = gw.project_id.clone();
    let path = format!("/admin/projects/{project}");
    let tools_path = format!("{path}/tools");

    let shown = expect(&admin(&gw, "GET", &path, ""), 200);
    assert_eq!(shown["id"], json!(project));
    assert_eq!(
        (&shown["tools"], &shown["guards"]),
        (&json!([]), &json!([]))
    );
    assert_eq!(
        expect(&admin(&gw, "GET", &tools_path, ""), 200),
        json!({"projectId": project, "tools": []})
    );

    // Replaced, in the order given.
    let answer = expect(
        &admin(
            &gw,
            "PUT",
            &tools_path,
            r#"{"tools": ["github__*", "calc__add"]}"#,
        ),
        200,
    );
    assert_eq!(
        answer,
        json!({"projectId": project, "tools": ["github__*", "calc__add"]})
    );
    assert_eq!(
        expect(&admin(&gw, "GET", &path, ""), 200)["tools"],
        json!(["github__*", "calc__add"])
    );
    let listed_projects = expect(&admin(&gw, "GET", "/admin/projects", ""), 200);
    let row = listed_projects["projects"]
        .as_array()
        .and_then(|rows| rows.iter().find(|p| p["id"] == json!(project)))
        .unwrap_or_else(|| panic!("{project} not listed: {listed_projects}"))
        .clone();
    assert_eq!(row["tools"], json!(["github__*", "calc__add"]));
    assert_eq!(row["guards"], json!([]));
    // The CLI sees the same.
    assert_eq!(
        tools_cli(&gw, &project, &[]),
        format!("tools of project {project}: github__*, calc__add")
    );

    // Bodies that are no list of globs the store keeps: 400 naming the field where it is one;
    // nothing changes.
    let message = expect_error(
        &admin(&gw, "PUT", &tools_path, r#"{"tools": ["calc__*", "  "]}"#),
        400,
    );
    assert!(message.starts_with("tools: "), "{message}");
    let long = format!(r#"{{"tools": ["calc__{}"]}}"#, "x".repeat(300));
    for body in [
        "",
        "{}",
        r#"{"tools": "calc__*"}"#,
        r#"{"tools": [1]}"#,
        r#"{"tools": ["calc__*"], "extra": 1}"#,
        r#"{"tools": ["calc__*", "calc__*"]}"#,
        r#"{"tools": [""]}"#,
        r#"{"tools": ["calc\n__*"]}"#,
        &long,
        "[]",
    ] {
        let response = admin(&gw, "PUT", &tools_path, body);
        assert_eq!(response.status, 400, "{body:?}: {}", response.text());
    }
    assert_eq!(
        expect(&admin(&gw, "GET", &tools_path, ""), 200)["tools"],
        json!(["github__*", "calc__add"])
    );

    // An unknown project: 404, for each endpoint.
    let message = expect_error(
        &admin(
            &gw,
            "PUT",
            "/admin/projects/nope/tools",
            r#"{"tools": ["calc__*"]}"#,
        ),
        404,
    );
    assert!(message.contains("no project with id nope"), "{message}");
    expect_error(&admin(&gw, "GET", "/admin/projects/nope/tools", ""), 404);

    // The admin token is needed; other methods are not allowed.
    for (method, body) in [("GET", ""), ("PUT", r#"{"tools": []}"#)] {
        let anonymous = gw.request(method, &tools_path, None, &[], body.as_bytes());
        assert_eq!(anonymous.status, 401, "{method}");
        let wrong = gw.request(
            method,
            &tools_path,
            Some("Bearer nope"),
            &[],
            body.as_bytes(),
        );
        assert_eq!(wrong.status, 401, "{method}");
    }
    for method in ["POST", "DELETE"] {
        let response = admin(&gw, method, &tools_path, "{}");
        assert_eq!(response.status, 405, "{method}");
    }

    // Cleared with an empty list: every tool.
    assert_eq!(
        expect(&admin(&gw, "PUT", &tools_path, r#"{"tools": []}"#), 200),
        json!({"projectId": project, "tools": []})
    );
    assert_eq!(
        expect(&admin(&gw, "GET", &path, ""), 200)["tools"],
        json!([])
    );
}
