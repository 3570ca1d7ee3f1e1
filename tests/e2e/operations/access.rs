//! Who may do what on the admin API: the role table walked for every endpoint and every role
//! through personal admin tokens (status and body checked, a project role never seeing another
//! project), tokens scoped, expired and revoked (through the API and the CLI), and the audit
//! log of it all, with before and after and nothing secret in it. On SQLite, and on PostgreSQL
//! with `GATEWAY_TEST_POSTGRES`.

use std::collections::BTreeMap;

use gateway::server::admin::table::RULES;
use gateway_test_support::{Gateway, Response, Route, text_request};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-the-access-tests-0123456789";

/// The roles, as the table's columns below list them.
const ROLES: [&str; 5] = [
    "owner",
    "admin",
    "viewer",
    "project_admin",
    "project_viewer",
];

/// What each role is answered on each endpoint, on its own project (project roles hold on
/// project A, whose ids fill the paths): `2` done (200 or 201), `3` refused (403). Written
/// out here, apart from the gateway's table, so that a change of either shows.
const EXPECTED: &[(&str, &str, [u8; 5])] = &[
    ("GET", "/admin/plugins", [2, 2, 2, 3, 3]),
    ("GET", "/admin/config", [2, 2, 2, 3, 3]),
    ("GET", "/admin/routes", [2, 2, 2, 3, 3]),
    ("GET", "/admin/audit", [2, 2, 2, 3, 3]),
    ("GET", "/admin/projects", [2, 2, 2, 2, 2]),
    ("POST", "/admin/projects", [2, 2, 3, 3, 3]),
    ("GET", "/admin/projects/{id}", [2, 2, 2, 2, 2]),
    ("GET", "/admin/projects/{id}/keys", [2, 2, 2, 2, 2]),
    ("POST", "/admin/projects/{id}/keys", [2, 2, 3, 2, 3]),
    ("PUT", "/admin/projects/{id}/limits", [2, 2, 3, 2, 3]),
    ("GET", "/admin/projects/{id}/guards", [2, 2, 2, 2, 2]),
    ("PUT", "/admin/projects/{id}/guards", [2, 2, 3, 3, 3]),
    ("GET", "/admin/projects/{id}/tools", [2, 2, 2, 2, 2]),
    ("PUT", "/admin/projects/{id}/tools", [2, 2, 3, 3, 3]),
    ("GET", "/admin/projects/{id}/usage", [2, 2, 2, 2, 2]),
    ("GET", "/admin/projects/{id}/batches", [2, 2, 2, 2, 2]),
    ("DELETE", "/admin/keys/{prefix}", [2, 2, 3, 2, 3]),
    ("PUT", "/admin/keys/{prefix}/limits", [2, 2, 3, 2, 3]),
    ("GET", "/admin/invocations", [2, 2, 2, 2, 2]),
    ("GET", "/admin/invocations.csv", [2, 2, 2, 2, 2]),
    ("GET", "/admin/invocations/{invocation}", [2, 2, 2, 2, 2]),
    ("GET", "/admin/usage", [2, 2, 2, 2, 2]),
    ("GET", "/admin/tokens", [2, 2, 2, 2, 2]),
    // A personal token makes no tokens, whatever its role.
    ("POST", "/admin/tokens", [3, 3, 3, 3, 3]),
    // Another's token: only the owner may revoke it; anyone else does not find it.
    ("DELETE", "/admin/tokens/{prefix}", [2, 4, 4, 4, 4]),
    ("GET", "/admin/users", [2, 3, 3, 3, 3]),
    ("POST", "/admin/users", [2, 3, 3, 3, 3]),
    ("DELETE", "/admin/users/{email}", [2, 3, 3, 3, 3]),
];

fn gateway() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start()
}

fn call(gw: &Gateway, method: &str, path: &str, token: &str, body: &str) -> Response {
    let auth = format!("Bearer {token}");
    gw.request(method, path, Some(&auth), &[], body.as_bytes())
}

fn admin(gw: &Gateway, method: &str, path: &str, body: &str) -> Value {
    let response = call(gw, method, path, ADMIN_TOKEN, body);
    assert!(
        response.status == 200 || response.status == 201,
        "{method} {path}: {} {}",
        response.status,
        response.text()
    );
    response.json()
}

/// A personal token of `role` (on `project` for a project role) made with the admin token.
fn token(gw: &Gateway, role: &str, project: Option<&str>) -> Value {
    let body = json!({"name": format!("{role} for the walk"), "role": role, "projectId": project});
    let made = admin(gw, "POST", "/admin/tokens", &body.to_string());
    assert!(
        made["token"]
            .as_str()
            .is_some_and(|t| t.starts_with("gwa_")),
        "{made}"
    );
    made
}

/// A new key of `project`, whole.
fn key(gw: &Gateway, project: &str) -> String {
    let made = admin(gw, "POST", &format!("/admin/projects/{project}/keys"), "");
    made["key"].as_str().unwrap_or_default().to_owned()
}

/// A completion with `key` on `project`: a record of it.
fn complete(gw: &Gateway, project: &str, key: &str) -> String {
    let response = gw.post_as(
        "/completions",
        Some(key),
        &text_request(project, "demo", "echo", "Hello"),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["invocationId"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A body each change accepts.
fn body_of(method: &str, path: &str) -> &'static str {
    match (method, path) {
        ("POST", "/admin/projects") => r#"{"name": "made in the walk"}"#,
        ("POST", "/admin/projects/{id}/keys") => "{}",
        ("PUT", "/admin/projects/{id}/limits") => r#"{"rpm": 1000}"#,
        ("PUT", "/admin/projects/{id}/guards") => r#"{"guards": []}"#,
        ("PUT", "/admin/projects/{id}/tools") => r#"{"tools": []}"#,
        ("PUT", "/admin/keys/{prefix}/limits") => r#"{"rpm": 500}"#,
        ("POST", "/admin/tokens") => {
            r#"{"name": "from a token", "role": "project_viewer", "projectId": "PROJECT"}"#
        }
        ("POST", "/admin/users") => r#"{"email": "walk@example.com", "role": "viewer"}"#,
        _ => "",
    }
}

/// The audit log as the owner reads it: every event, oldest first.
fn audit(gw: &Gateway) -> Vec<Value> {
    let response = call(
        gw,
        "GET",
        "/admin/audit?order=asc&limit=1000",
        ADMIN_TOKEN,
        "",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert!(
        response
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/x-ndjson")),
        "{:?}",
        response.headers
    );
    response
        .text()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn the_role_table_is_walked_for_every_endpoint_and_role() {
    // The walk's expectations name every endpoint of the gateway's table, and no other.
    let table: Vec<(&str, &str)> = RULES.iter().map(|r| (r.method, r.path)).collect();
    let expected: Vec<(&str, &str)> = EXPECTED.iter().map(|(m, p, _)| (*m, *p)).collect();
    assert_eq!(
        table, expected,
        "the gateway's role table and this walk differ"
    );

    let gw = gateway();
    let a = gw.project_id.clone();
    let b_project = admin(
        &gw,
        "POST",
        "/admin/projects",
        r#"{"name": "Secret Bravo"}"#,
    );
    let b = b_project["id"].as_str().unwrap_or_default().to_owned();
    let record_a = complete(&gw, &a, &gw.key);
    let key_b = key(&gw, &b);
    let record_b = complete(&gw, &b, &key_b);

    let mut tokens = BTreeMap::new();
    for role in ROLES {
        let project = role.starts_with("project_").then_some(a.as_str());
        tokens.insert(role, token(&gw, role, project));
    }
    let secret = |role: &str| {
        tokens[role]["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    for (i, (method, pattern, statuses)) in EXPECTED.iter().enumerate() {
        for (role, expected) in ROLES.iter().zip(statuses) {
            // What the path names, made fresh where a change uses it up.
            let path = match *pattern {
                "/admin/keys/{prefix}" | "/admin/keys/{prefix}/limits" => {
                    pattern.replace("{prefix}", &key(&gw, &a)[..16])
                }
                "/admin/users/{email}" => {
                    let user = r#"{"email": "gone@example.com", "role": "viewer"}"#;
                    admin(&gw, "POST", "/admin/users", user);
                    pattern.replace("{email}", "gone@example.com")
                }
                "/admin/tokens/{prefix}" => {
                    let other = token(&gw, "viewer", None);
                    pattern.replace("{prefix}", other["prefix"].as_str().unwrap_or_default())
                }
                _ => pattern
                    .replace("{id}", &a)
                    .replace("{invocation}", &record_a),
            };
            let body = body_of(method, pattern).replace("PROJECT", &a);
            let response = call(&gw, method, &path, &secret(role), &body);
            let context = format!("#{i} {role}: {method} {path}: {}", response.text());
            match expected {
                2 => assert!(
                    response.status == 200 || response.status == 201,
                    "{context}"
                ),
                3 => {
                    assert_eq!(response.status, 403, "{context}");
                    let error = response.json();
                    assert!(error["invocationId"].is_string(), "{context}");
                }
                _ => assert_eq!(response.status, 404, "{context}"),
            }
            // A project role never sees project B, by name or id, in anything it is shown.
            if role.starts_with("project_") && response.status == 200 {
                let text = response.text();
                assert!(
                    !text.contains("Secret Bravo")
                        && !text.contains(&b)
                        && !text.contains(&record_b),
                    "{context}"
                );
            }
        }
    }

    // Project B's own endpoints: not found for a project role, as if there were no B.
    for role in ["project_admin", "project_viewer"] {
        for (method, pattern, _) in EXPECTED.iter().filter(|(_, p, _)| p.contains("{id}")) {
            let path = pattern.replace("{id}", &b);
            let body = body_of(method, pattern);
            let response = call(&gw, method, &path, &secret(role), body);
            assert_eq!(
                response.status,
                404,
                "{role}: {method} {path}: {}",
                response.text()
            );
            assert!(
                response.text().contains("no project"),
                "{}",
                response.text()
            );
        }
        // B's record is not there; a filter on B finds nothing.
        let record = call(
            &gw,
            "GET",
            &format!("/admin/invocations/{record_b}"),
            &secret(role),
            "",
        );
        assert_eq!(record.status, 404, "{}", record.text());
        let listed = call(
            &gw,
            "GET",
            &format!("/admin/invocations?projectId={b}"),
            &secret(role),
            "",
        );
        assert_eq!(listed.json()["invocations"], json!([]), "{}", listed.text());
        // B's key: a project admin does not find it, a viewer may not touch keys.
        let path = format!("/admin/keys/{}/limits", &key_b[..16]);
        let refused = call(&gw, "PUT", &path, &secret(role), r#"{"rpm": 1}"#);
        let status = if role == "project_admin" { 404 } else { 403 };
        assert_eq!(refused.status, status, "{role}: {}", refused.text());
    }
    // What the project viewer lists is its project alone.
    let listed = call(&gw, "GET", "/admin/projects", &secret("project_viewer"), "").json();
    let ids: Vec<&Value> = listed["projects"]
        .as_array()
        .map(|p| p.iter().map(|p| &p["id"]).collect())
        .unwrap_or_default();
    assert_eq!(ids, [&json!(a)], "{listed}");
    let usage = call(
        &gw,
        "GET",
        "/admin/usage?by=project",
        &secret("project_viewer"),
        "",
    )
    .json();
    let groups: Vec<&Value> = usage["rows"]
        .as_array()
        .map(|rows| rows.iter().map(|r| &r["group"]).collect())
        .unwrap_or_default();
    assert_eq!(groups, [&json!(a)], "{usage}");
    // The admin sees them all: A, B, and those the owner and the admin made in the walk.
    let all = call(&gw, "GET", "/admin/projects", &secret("admin"), "").json();
    assert_eq!(all["projects"].as_array().map(Vec::len), Some(4), "{all}");

    // Every change of the walk is an audit event: who, which role, how it ended; the done ones
    // with what they did. Nothing secret in any of it.
    let events = audit(&gw);
    for (method, pattern, statuses) in EXPECTED.iter().filter(|(m, _, _)| *m != "GET") {
        for (role, expected) in ROLES.iter().zip(statuses) {
            let actor = format!(
                "token:{}",
                tokens[role]["prefix"].as_str().unwrap_or_default()
            );
            let endpoint = format!("{method} {pattern}");
            let event = events
                .iter()
                .find(|e| e["actor"] == actor && e["endpoint"] == endpoint)
                .unwrap_or_else(|| panic!("no audit event of {actor} on {endpoint}"));
            let outcome = match expected {
                2 => "ok",
                3 => "refused",
                _ => "failed",
            };
            assert_eq!(event["outcome"], outcome, "{event}");
            assert_eq!(event["via"], "api", "{event}");
            assert_eq!(event["address"], "127.0.0.1", "{event}");
            assert!(
                event["requestId"].is_string() && event["action"].is_string(),
                "{event}"
            );
            let role_held = if role.starts_with("project_") {
                format!("{role}:{a}")
            } else {
                role.to_string()
            };
            assert_eq!(event["role"], role_held, "{event}");
            // What it was done to: named by the path, or by what was made.
            if pattern.contains('{') || outcome == "ok" {
                assert!(event["target"].is_string(), "{event}");
            }
            if outcome == "ok" {
                assert!(!event["after"].is_null(), "{event}");
            }
        }
    }
    let limits = events
        .iter()
        .find(|e| e["action"] == "project.limits.set" && e["outcome"] == "ok")
        .expect("a limits change");
    assert_eq!(limits["after"]["limits"]["rpm"], 1000, "{limits}");
    assert!(limits["before"]["limits"].is_object(), "{limits}");
    let dump = serde_json::to_string(&events).unwrap_or_default();
    assert!(
        !dump.contains(ADMIN_TOKEN),
        "the admin token is in the audit log"
    );
    for token in tokens.values() {
        let whole = token["token"].as_str().unwrap_or("?");
        assert!(
            !dump.contains(whole),
            "a whole admin token is in the audit log"
        );
    }
    for (_, key) in [(0, gw.key.clone()), (1, key_b)] {
        assert!(!dump.contains(&key), "a whole key is in the audit log");
    }
    assert!(!dump.contains("\"gw_") || !dump.contains(&gw.key), "{dump}");
}

#[test]
fn personal_tokens_are_scoped_expire_and_are_revoked() {
    let gw = gateway();
    let viewer = token(&gw, "viewer", None);
    let secret = viewer["token"].as_str().unwrap_or_default();
    let prefix = viewer["prefix"].as_str().unwrap_or_default();
    assert_eq!(viewer["role"], "viewer");
    assert!(
        viewer["expiresAt"].is_string(),
        "90 days when not said: {viewer}"
    );
    // Reads, does not change.
    assert_eq!(call(&gw, "GET", "/admin/projects", secret, "").status, 200);
    let refused = call(&gw, "POST", "/admin/projects", secret, r#"{"name": "no"}"#);
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert!(
        refused.text().contains("may not POST /admin/projects"),
        "{}",
        refused.text()
    );
    // Listed, never whole, with its last use; the owner sees it, its maker's list is the owner's.
    let listed = call(&gw, "GET", "/admin/tokens", ADMIN_TOKEN, "").json();
    let row = &listed["tokens"][0];
    assert_eq!(row["prefix"], prefix, "{listed}");
    assert!(row["lastUsedAt"].is_string(), "{listed}");
    assert!(
        row.get("token").is_none() && !listed.to_string().contains(secret),
        "{listed}"
    );
    // The viewer's own list is itself: it made none, and sees no one else's.
    token(&gw, "admin", None);
    let own = call(&gw, "GET", "/admin/tokens", secret, "").json();
    let prefixes: Vec<&Value> = own["tokens"]
        .as_array()
        .map(|t| t.iter().map(|t| &t["prefix"]).collect())
        .unwrap_or_default();
    assert_eq!(prefixes, [&json!(prefix)], "{own}");

    // A role a token may not have; a project role without its project; an unknown project.
    for (body, status) in [
        (json!({"name": "x", "role": "root"}), 400),
        (json!({"name": "x", "role": "project_admin"}), 400),
        (
            json!({"name": "x", "role": "admin", "projectId": gw.project_id}),
            400,
        ),
        (
            json!({"name": "x", "role": "project_viewer", "projectId": "nope"}),
            404,
        ),
        (json!({"name": "", "role": "viewer"}), 400),
        (
            json!({"name": "x", "role": "viewer", "expires": "yesterday"}),
            400,
        ),
    ] {
        let response = call(&gw, "POST", "/admin/tokens", ADMIN_TOKEN, &body.to_string());
        assert_eq!(response.status, status, "{body}: {}", response.text());
    }

    // Expired: refused, saying when.
    let short = admin(
        &gw,
        "POST",
        "/admin/tokens",
        &json!({"name": "short", "role": "admin", "expires": "1s"}).to_string(),
    );
    let short_secret = short["token"].as_str().unwrap_or_default();
    assert_eq!(
        call(&gw, "GET", "/admin/routes", short_secret, "").status,
        200
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let expired = call(&gw, "GET", "/admin/routes", short_secret, "");
    assert_eq!(expired.status, 401, "{}", expired.text());
    assert!(expired.text().contains("expired at"), "{}", expired.text());

    // Revoked (by itself: a token may revoke itself): refused from then on.
    let path = format!("/admin/tokens/{prefix}");
    assert_eq!(call(&gw, "DELETE", &path, secret, "").json()["revoked"], 1);
    let revoked = call(&gw, "GET", "/admin/projects", secret, "");
    assert_eq!(revoked.status, 401, "{}", revoked.text());
    assert!(
        revoked.text().contains("was revoked at"),
        "{}",
        revoked.text()
    );
    assert_eq!(call(&gw, "DELETE", &path, ADMIN_TOKEN, "").status, 404);
    // A made-up one is a wrong token.
    let made_up = "gwa_0000000000000000000000000000000000000000";
    assert_eq!(call(&gw, "GET", "/admin/projects", made_up, "").status, 401);

    // The CLI: made, listed, used, revoked.
    let out = gw.cli_ok(&[
        "admin-token",
        "create",
        "--role",
        "project_viewer",
        "--project",
        &gw.project_id,
        "--expires",
        "90d",
        "--name",
        "dashboards",
    ]);
    let cli_token = out.lines().last().unwrap_or_default().trim().to_owned();
    assert!(cli_token.starts_with("gwa_"), "{out}");
    let projects = call(&gw, "GET", "/admin/projects", &cli_token, "").json();
    assert_eq!(
        projects["projects"].as_array().map(Vec::len),
        Some(1),
        "{projects}"
    );
    let table = gw.cli_ok(&["admin-token", "list"]);
    let line = table
        .lines()
        .find(|l| l.starts_with(&cli_token[..16]))
        .unwrap_or_else(|| panic!("not listed:\n{table}"));
    assert!(
        line.contains("dashboards") && line.contains("live"),
        "{line}"
    );
    assert!(
        line.contains(&format!("project_viewer:{}", gw.project_id)),
        "{line}"
    );
    assert!(!table.contains(&cli_token), "{table}");
    assert!(
        table.contains(&format!("{prefix}  ")) && table.contains("revoked"),
        "{table}"
    );
    gw.cli_ok(&["admin-token", "revoke", &cli_token[..16]]);
    assert_eq!(
        call(&gw, "GET", "/admin/projects", &cli_token, "").status,
        401
    );
    let bad = gw.cli(&["admin-token", "create", "--role", "admin", "--project", "x"]);
    assert!(!bad.status.success(), "{}", bad.stdout);
}

#[test]
fn the_audit_log_records_the_cli_the_console_and_failed_sign_ins_and_exports_them() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start();
    // A change through the CLI, one through the API, a wrong token, a console sign-in and a
    // failed one.
    let made = gw.cli_ok(&["project", "create", "from the cli"]);
    let cli_project = made.lines().last().unwrap_or_default().trim().to_owned();
    gw.cli_ok(&["key", "create", &cli_project, "--rpm", "5"]);
    admin(
        &gw,
        "PUT",
        &format!("/admin/projects/{cli_project}/limits"),
        r#"{"rpm": 7}"#,
    );
    assert_eq!(
        call(&gw, "GET", "/admin/projects", "wrong-token", "").status,
        401
    );
    let login = |token: &str| {
        let body = json!({ "token": token }).to_string();
        gw.request("POST", "/ui/login", None, &[], body.as_bytes())
    };
    assert_eq!(login("not it").status, 401);
    assert_eq!(login(ADMIN_TOKEN).status, 200);

    let events = audit(&gw);
    let find = |action: &str| {
        events
            .iter()
            .find(|e| e["action"] == action)
            .unwrap_or_else(|| panic!("no {action} event in {events:?}"))
    };
    let created = events
        .iter()
        .find(|e| e["action"] == "project.create" && e["after"]["name"] == "from the cli")
        .unwrap_or_else(|| panic!("no project.create of the CLI's in {events:?}"));
    assert!(
        created["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("cli:")),
        "{created}"
    );
    assert_eq!(created["via"], "cli");
    assert_eq!(created["endpoint"], "gateway project create");
    assert_eq!(created["target"], format!("project:{cli_project}"));
    assert_eq!(created["after"]["name"], "from the cli");
    let key = events
        .iter()
        .find(|e| e["action"] == "key.create" && e["after"]["projectId"] == cli_project.as_str())
        .unwrap_or_else(|| panic!("no key.create of the CLI's in {events:?}"));
    assert_eq!(key["after"]["limits"]["rpm"], 5, "{key}");
    assert!(
        key["after"]["prefix"]
            .as_str()
            .is_some_and(|p| p.len() == 16),
        "{key}"
    );
    let limits = find("project.limits.set");
    assert_eq!(limits["actor"], "admin_token");
    assert_eq!(limits["before"]["limits"]["rpm"], json!(null), "{limits}");
    assert_eq!(limits["after"]["limits"]["rpm"], 7, "{limits}");
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["action"] == "sign_in.failed")
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .any(|e| e["via"] == "api" && e["endpoint"] == "GET /admin/projects")
    );
    assert!(
        failed
            .iter()
            .any(|e| e["via"] == "console" && e["status"] == 401)
    );
    assert!(
        failed
            .iter()
            .all(|e| e["outcome"] == "refused" && e["actor"] == "unknown")
    );
    assert_eq!(find("sign_in")["via"], "console");

    // Filtered, paged and as one document.
    let page = call(
        &gw,
        "GET",
        "/admin/audit?format=json&limit=2&order=asc",
        ADMIN_TOKEN,
        "",
    )
    .json();
    assert_eq!(page["events"].as_array().map(Vec::len), Some(2), "{page}");
    let next = page["next"].as_str().unwrap_or_default();
    let rest = call(
        &gw,
        "GET",
        &format!("/admin/audit?format=json&order=asc&after={next}"),
        ADMIN_TOKEN,
        "",
    )
    .json();
    assert_eq!(rest["events"][0], events[2], "{rest}");
    let only = call(
        &gw,
        "GET",
        "/admin/audit?action=sign_in.failed&outcome=refused",
        ADMIN_TOKEN,
        "",
    );
    assert_eq!(only.text().lines().count(), 2, "{}", only.text());
    for bad in [
        "outcome=maybe",
        "order=up",
        "limit=0",
        "after=x",
        "since=soon",
        "colour=red",
    ] {
        let response = call(&gw, "GET", &format!("/admin/audit?{bad}"), ADMIN_TOKEN, "");
        assert_eq!(response.status, 400, "{bad}: {}", response.text());
    }
    // No API edits or deletes an event.
    for method in ["PUT", "DELETE", "POST", "PATCH"] {
        assert_eq!(
            call(&gw, method, "/admin/audit", ADMIN_TOKEN, "").status,
            405,
            "{method}"
        );
    }

    // The CLI's export: the same events, oldest first.
    let exported = gw.cli_ok(&["audit", "export"]);
    let lines: Vec<Value> = exported
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines, events);
    let sign_ins = gw.cli_ok(&["audit", "export", "--action", "sign_in"]);
    assert_eq!(sign_ins.lines().count(), 1, "{sign_ins}");

    // Counted in metrics (this process's: the CLI's are in the log only).
    let metrics = gw.get("/metrics", None).text();
    for series in [
        r#"gateway_audit_events_total{action="project.limits.set",outcome="ok"} 1"#,
        r#"gateway_audit_events_total{action="sign_in.failed",outcome="refused"} 2"#,
        "gateway_audit_write_failures_total 0",
    ] {
        assert!(metrics.contains(series), "{series} not in:\n{metrics}");
    }
}
