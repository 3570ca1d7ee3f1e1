//! The invocation records: every field of a success, `GET /invocations/{id}` and
//! `gateway invocations show`, read by the project's keys only (a scoped key: its scope's), and
//! the list, newest first, with its limit and filters.

use gateway_test_support::{Gateway, Route, assert_error, assert_ok, text_request, with};
use serde_json::json;

use crate::common::hello;

/// 256 bytes is the longest `userId` (one more is refused, see `surfaces::commonbase`'s
/// `INVALID_COMPLETIONS`): kept whole.
#[test]
fn the_longest_user_id_is_recorded_whole() {
    let gw = Gateway::demo();
    let user = "ü".repeat(128);
    let request = with(hello(&gw), "userId", json!(user));
    let body = assert_ok(&gw.post("/completions", &request));
    let id = body["invocationId"].as_str().expect("invocationId");
    assert_eq!(gw.get_invocation(id).json()["userId"], json!(user));
}

#[test]
fn success_record_has_every_field() {
    let gw = Gateway::builder()
        .route(Route::echo("demo").price("echo", 1.0, 2.0))
        .start();
    let request = with(
        with(
            text_request(&gw.project_id, "demo", "echo", "record me please"),
            "userId",
            json!("user-42"),
        ),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    let id = body["invocationId"].as_str().expect("invocationId");
    let response = gw.get_invocation(id);
    assert_eq!(response.status, 200, "{}", response.text());
    let record = response.json();
    assert_eq!(record["id"], json!(id));
    assert_eq!(record["projectId"], json!(gw.project_id));
    assert_eq!(record["userId"], json!("user-42"));
    assert_eq!(record["route"], json!("demo"));
    assert_eq!(record["plugin"], json!("echo"));
    assert_eq!(record["model"], json!("echo"));
    assert_eq!(record["type"], json!("text"));
    assert_eq!(record["stream"], json!(false));
    assert_eq!(record["status"], json!("success"));
    assert_eq!(record["httpStatus"], json!(200));
    assert!(record["error"].is_null(), "{record}");
    assert!(record["providerError"].is_null(), "{record}");
    assert_eq!(
        record["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6})
    );
    let cost = record["usageCost"].as_f64().expect("usageCost");
    assert!((cost - (3.0 / 1e6 + 6.0 / 1e6)).abs() < 1e-12, "{record}");
    assert!(
        record["createdAt"].as_str().is_some_and(|s| !s.is_empty()),
        "{record}"
    );
    assert!(record["durationMs"].is_number(), "{record}");
    assert_eq!(record["request"], request);
    assert_eq!(
        record["response"]["choices"][0]["text"],
        json!("record me please")
    );
}

#[test]
fn cli_show_prints_the_same_record_as_the_api() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    let id = body["invocationId"].as_str().expect("invocationId");
    assert_eq!(gw.record(id), gw.get_invocation(id).json());
}

#[test]
fn cli_show_of_an_unknown_id_fails() {
    let gw = Gateway::demo();
    let out = gw.cli(&[
        "invocations",
        "show",
        "01890000-0000-7000-8000-000000000000",
    ]);
    assert!(!out.status.success(), "{}", out.stdout);
}

#[test]
fn another_projects_invocation_is_404() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    let id = body["invocationId"].as_str().expect("invocationId");
    let response = gw.get(&format!("/invocations/{id}"), Some(&other.key));
    assert_eq!(response.status, 404, "{}", response.text());
    // The owner still sees it.
    assert_eq!(gw.get_invocation(id).status, 200);
}

#[test]
fn a_scoped_key_reads_its_own_records_and_those_of_its_scope_only() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .route(Route::echo("other"))
        .start();
    let on = |route: &str, key: &str| {
        let body = text_request(&gw.project_id, route, "echo", "Hello");
        let answer = assert_ok(&gw.post_as("/completions", Some(key), &body));
        answer["invocationId"]
            .as_str()
            .expect("invocationId")
            .to_owned()
    };
    let demo_only = gw
        .cli(&["key", "create", &gw.project_id, "--routes", "demo"])
        .checked("key create")
        .last_line();
    let (on_demo, on_other) = (on("demo", &gw.key), on("other", &gw.key));
    // Its own request, refused for its scope: its record is the key's to read.
    let refused = gw.post_as(
        "/completions",
        Some(&demo_only),
        &text_request(&gw.project_id, "other", "echo", "Hello"),
    );
    assert_eq!(refused.status, 403, "{}", refused.text());
    let own = refused.json()["invocationId"]
        .as_str()
        .expect("invocationId")
        .to_owned();
    let read = |id: &str, key: &str| gw.get(&format!("/invocations/{id}"), Some(key)).status;
    assert_eq!(read(&on_demo, &demo_only), 200);
    assert_eq!(read(&own, &demo_only), 200);
    // Another route's request and answer, made by another key: as if there were none.
    assert_eq!(read(&on_other, &demo_only), 404);
    for id in [&on_demo, &on_other, &own] {
        assert_eq!(read(id, &gw.key), 200, "{id}");
    }
}

#[test]
fn unknown_invocation_is_404() {
    let gw = Gateway::demo();
    let response = gw.get_invocation("01890000-0000-7000-8000-000000000000");
    assert_eq!(response.status, 404, "{}", response.text());
    let response = gw.get_invocation("not-a-uuid");
    assert_eq!(response.status, 404, "{}", response.text());
}

#[test]
fn reading_an_invocation_needs_a_key() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    let id = body["invocationId"].as_str().expect("invocationId");
    let response = gw.get(&format!("/invocations/{id}"), None);
    assert_eq!(response.status, 401, "{}", response.text());
    let response = gw.get(&format!("/invocations/{id}"), Some("wrong-key-000000"));
    assert_eq!(response.status, 401, "{}", response.text());
}

#[test]
fn invocations_list_is_newest_first_with_limit_and_filters() {
    let gw = Gateway::demo();
    let other = gw.create_project("other");
    let mut ids = Vec::new();
    for (user, prompt) in [("alice", "one"), ("bob", "two"), ("alice", "three")] {
        let request = with(
            text_request(&gw.project_id, "demo", "echo", prompt),
            "userId",
            json!(user),
        );
        let body = assert_ok(&gw.post("/completions", &request));
        ids.push(body["invocationId"].as_str().expect("id").to_owned());
    }
    let error = gw.post(
        "/completions",
        &text_request(&gw.project_id, "nowhere", "echo", "x"),
    );
    let error_id = assert_error(&error, 404, "");
    let theirs = assert_ok(&gw.post_as(
        "/completions",
        Some(&other.key),
        &text_request(&other.id, "demo", "echo", "theirs"),
    ));
    let their_id = theirs["invocationId"].as_str().expect("id").to_owned();

    // Records land in batches: wait for all of them.
    for id in ids.iter().chain([&error_id, &their_id]) {
        gw.record(id);
    }
    let listed = |args: &[&str]| -> Vec<String> {
        gw.list_invocations(args)
            .iter()
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
            .collect()
    };

    let all = listed(&[]);
    assert_eq!(
        all,
        [
            their_id.as_str(),
            error_id.as_str(),
            ids[2].as_str(),
            ids[1].as_str(),
            ids[0].as_str()
        ],
        "newest first"
    );
    assert_eq!(
        listed(&["--limit", "2"]),
        [their_id.as_str(), error_id.as_str()]
    );
    assert_eq!(
        listed(&["--project", &gw.project_id]),
        [
            error_id.as_str(),
            ids[2].as_str(),
            ids[1].as_str(),
            ids[0].as_str()
        ]
    );
    assert_eq!(
        listed(&["--user", "alice"]),
        [ids[2].as_str(), ids[0].as_str()]
    );
    assert_eq!(listed(&["--project", &other.id]), [their_id.as_str()]);
}

#[test]
fn invocations_list_shows_status_route_model_and_tokens() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "four little words here"),
    ));
    let id = body["invocationId"].as_str().expect("id");
    let error = gw.post(
        "/completions",
        &text_request(&gw.project_id, "nowhere", "echo", "x"),
    );
    let error_id = assert_error(&error, 404, "");
    let line = gw.listed_line(id);
    let columns: Vec<&str> = line.split_whitespace().collect();
    for expected in ["success", "200", "demo", "echo", "8"] {
        assert!(
            columns.contains(&expected),
            "{expected} missing from {line:?}"
        );
    }
    let line = gw.listed_line(&error_id);
    let columns: Vec<&str> = line.split_whitespace().collect();
    for expected in ["error", "404"] {
        assert!(
            columns.contains(&expected),
            "{expected} missing from {line:?}"
        );
    }
}
