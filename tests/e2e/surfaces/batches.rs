//! `/v1/batches`, OpenAI's Batch API run by the gateway: an input file checked line by line
//! (the first bad line named, nothing kept of a refused file), every line through the same
//! flow as a caller's request with the batch's key (its record naming the batch and line),
//! the output and error files in OpenAI's JSONL shapes, each `custom_id` once; a budget that
//! runs out fails the lines after it; cancel and expiry close the lines not run; two replicas on
//! one PostgreSQL database share a batch, and one killed mid-batch leaves its lines to the other,
//! each `custom_id` once in the output. The official
//! OpenAI client in `tests/clients/test_batches.py`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gateway_test_support::{
    Gateway, OpenAiUpstream, Reply, Response, Route, TestDatabase, client, scrape,
};
use serde_json::{Value, json};

const BOUNDARY: &str = "e2e-batches-boundary";

/// Uploads `text` as a `batch` file with `key`; its id.
fn upload(gw: &Gateway, key: &str, purpose: &str, text: &str) -> String {
    let body = client::form(
        BOUNDARY,
        &[("purpose", purpose)],
        Some(("in.jsonl", "application/jsonl", text.as_bytes())),
    );
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    let headers = [
        ("Content-Type", content_type.as_str()),
        ("Authorization", key),
    ];
    let response = client::request(gw.addr, "POST", "/v1/files", &headers, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["id"].as_str().unwrap().to_owned()
}

fn create_as(gw: &Gateway, key: &str, body: &Value) -> Response {
    gw.post_as("/v1/batches", Some(key), body)
}

fn get(gw: &Gateway, key: &str, path: &str) -> Response {
    gw.request("GET", path, Some(key), &[], b"")
}

/// A line of an input file.
fn line(custom_id: &str, url: &str, body: Value) -> String {
    json!({"custom_id": custom_id, "method": "POST", "url": url, "body": body}).to_string()
}

fn chat(custom_id: &str, model: &str, text: &str) -> String {
    let body = json!({"model": model, "messages": [{"role": "user", "content": text}]});
    line(custom_id, "/v1/chat/completions", body)
}

/// Creates a chat batch of `lines` with `key`; the batch object.
fn batch_of(gw: &Gateway, key: &str, lines: &[String], window: &str) -> Value {
    let file = upload(gw, key, "batch", &(lines.join("\n") + "\n"));
    let response = create_as(
        gw,
        key,
        &json!({"input_file_id": file, "endpoint": "/v1/chat/completions",
            "completion_window": window, "metadata": {"job": "e2e"}}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

/// `name{labels}` of `gw`'s metrics.
fn metric(gw: &Gateway, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape::value(&scrape::scrape(gw, None), name, labels)
}

/// Waits for `name{labels}` to read `want`: a batch's end is counted just after the batch reads
/// as ended.
fn metric_reaches(gw: &Gateway, name: &str, labels: &[(&str, &str)], want: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = metric(gw, name, labels);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{labels:?} is {got}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls the batch until its status is final; the batch object.
fn wait_for_end(gw: &Gateway, key: &str, id: &str) -> Value {
    polled(gw, key, &format!("/v1/batches/{id}"), |batch| {
        let status = batch["status"].as_str().unwrap_or_default();
        ["completed", "failed", "expired", "cancelled"].contains(&status)
    })
}

/// `GET path` polled until `done` says its answer is; that answer.
fn polled(gw: &Gateway, key: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = get(gw, key, path).json();
        if done(&answer) {
            return answer;
        }
        assert!(Instant::now() < deadline, "not yet: {answer}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The lines of file `id`, parsed.
fn file_lines(gw: &Gateway, key: &str, id: &Value) -> Vec<Value> {
    let Some(id) = id.as_str() else {
        return Vec::new();
    };
    jsonl(gw, key, &format!("/v1/files/{id}/content"))
}

/// The JSON lines `GET path` answers, parsed.
fn jsonl(gw: &Gateway, key: &str, path: &str) -> Vec<Value> {
    let response = get(gw, key, path);
    assert_eq!(response.status, 200, "{}", response.text());
    let text = response.text();
    assert!(text.ends_with('\n'), "{text}");
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_line_runs_through_the_flow_once_into_the_output_and_error_files() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let mut lines: Vec<String> = (0..25)
        .map(|i| chat(&format!("req-{i}"), "demo", &format!("say {i}")))
        .collect();
    // Refused by the flow as a caller's request would be: into the error file.
    lines.insert(7, chat("unknown-model", "nope/x", "hi"));
    let created = batch_of(&gw, &gw.key, &lines, "24h");
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("batch_"), "{created}");
    assert_eq!(created["object"], "batch");
    assert_eq!(created["endpoint"], "/v1/chat/completions");
    assert_eq!(created["completion_window"], "24h");
    assert_eq!(created["metadata"], json!({"job": "e2e"}));
    assert_eq!(created["errors"], Value::Null);
    assert_eq!(created["request_counts"]["total"], 26);
    assert_eq!(
        created["expires_at"].as_i64().unwrap() - created["created_at"].as_i64().unwrap(),
        86_400
    );

    let done = wait_for_end(&gw, &gw.key, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request_counts"],
        json!({"total": 26, "completed": 25, "failed": 1})
    );
    for at in ["in_progress_at", "finalizing_at", "completed_at"] {
        assert!(done[at].as_i64().is_some(), "{at}: {done}");
    }
    let output = file_lines(&gw, &gw.key, &done["output_file_id"]);
    let errors = file_lines(&gw, &gw.key, &done["error_file_id"]);
    assert_eq!((output.len(), errors.len()), (25, 1));
    let ids: BTreeSet<&str> = output
        .iter()
        .map(|line| line["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 25, "each custom_id once");
    for (i, line) in output.iter().enumerate() {
        // In the input's order.
        assert_eq!(line["custom_id"], format!("req-{i}"), "{line}");
        assert!(line["id"].as_str().unwrap().starts_with("batch_req_"));
        assert_eq!(line["error"], Value::Null);
        assert_eq!(line["response"]["status_code"], 200);
        let body = &line["response"]["body"];
        assert_eq!(body["object"], "chat.completion", "{line}");
        assert!(
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .contains(&format!("say {i}")),
            "{line}"
        );
        // The line's record, the flow's like any request's, names its batch and line.
        let record = gw.record(line["response"]["request_id"].as_str().unwrap());
        assert_eq!(record["batchId"], id.as_str());
        assert_eq!(record["customId"], format!("req-{i}"));
        assert_eq!(record["status"], "success");
        assert_eq!(record["projectId"], gw.project_id.as_str());
    }
    let refused = &errors[0];
    assert_eq!(refused["custom_id"], "unknown-model");
    assert_eq!(refused["error"], Value::Null);
    // Counted by API and result once the batch is finished.
    let lines = |result| {
        metric(
            &gw,
            "gateway_batch_lines_total",
            &[("api", "openai"), ("result", result)],
        )
    };
    assert_eq!((lines("succeeded"), lines("failed")), (25.0, 1.0));
    let finished = [("api", "openai"), ("status", "completed")];
    metric_reaches(&gw, "gateway_batches_total", &finished, 1.0);
    let status = refused["response"]["status_code"].as_u64().unwrap();
    assert!((400..500).contains(&status), "{refused}");
    assert!(refused["response"]["body"]["error"]["message"].is_string());

    // The files are the project's, `batch_output`.
    let output_file = get(
        &gw,
        &gw.key,
        &format!("/v1/files/{}", done["output_file_id"].as_str().unwrap()),
    )
    .json();
    assert_eq!(output_file["purpose"], "batch_output");
    assert_eq!(output_file["filename"], format!("{id}_output.jsonl"));
    // Listed; another project's key sees none of it.
    let listed = get(&gw, &gw.key, "/v1/batches?limit=1").json();
    assert_eq!(listed["data"][0]["id"], id.as_str());
    assert_eq!(listed["has_more"], false);
    let other = gw.create_project("other");
    assert_eq!(
        get(&gw, &other.key, &format!("/v1/batches/{id}")).status,
        404
    );
    assert_eq!(
        get(&gw, &other.key, "/v1/batches").json()["data"],
        json!([])
    );
    // The lines are gone from the store once the files are written.
    assert_eq!(gw.row_count("batch_lines"), 0);
}

#[test]
fn a_malformed_input_file_fails_its_batch_naming_the_first_bad_line() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let good = |i: usize| chat(&format!("r{i}"), "demo", "hi");
    let cases: [(usize, String, &str, Value); 4] = [
        (
            7,
            "{\"custom_id\": \"r7\", ".into(),
            "invalid_json_line",
            Value::Null,
        ),
        (3, good(1), "duplicate_custom_id", json!("custom_id")),
        (
            5,
            line("r5", "/v1/embeddings", json!({"model": "demo"})),
            "mismatched_endpoint",
            json!("url"),
        ),
        (
            2,
            chat("r2", "demo", "hi").replace("\"POST\"", "\"GET\""),
            "invalid_value",
            json!("method"),
        ),
    ];
    for (at, bad, code, param) in cases {
        let mut lines: Vec<String> = (1..=9).map(good).collect();
        lines[at - 1] = bad;
        let batch = batch_of(&gw, &gw.key, &lines, "24h");
        assert_eq!(batch["status"], "failed", "{batch}");
        assert!(batch["failed_at"].as_i64().is_some());
        let error = &batch["errors"]["data"][0];
        assert_eq!(batch["errors"]["object"], "list");
        assert_eq!(error["code"], code, "{batch}");
        assert_eq!(error["line"], at, "{batch}");
        assert_eq!(error["param"], param, "{batch}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("line {at}")),
            "{batch}"
        );
        assert_eq!(batch["request_counts"]["total"], 0);
    }
    // Nothing kept of a refused file's lines, nothing run.
    assert_eq!(gw.row_count("batch_lines"), 0);
    assert_eq!(gw.list_invocations(&[]).len(), 0);

    // What the request itself gets wrong: a 400 naming the parameter.
    let file = upload(&gw, &gw.key, "batch", &(good(1) + "\n"));
    let user_file = upload(&gw, &gw.key, "user_data", &(good(1) + "\n"));
    let base = json!({"input_file_id": file, "endpoint": "/v1/chat/completions",
        "completion_window": "24h"});
    let with = |name: &str, value: Value| {
        let mut body = base.clone();
        body[name] = value;
        body
    };
    for (body, param) in [
        (with("endpoint", json!("/v1/images")), "endpoint"),
        (with("completion_window", json!("1d")), "completion_window"),
        (with("input_file_id", json!("file-nope")), "input_file_id"),
        (with("input_file_id", json!(user_file)), "input_file_id"),
        (with("metadata", json!({"a": 1})), "metadata"),
        (with("colour", json!("red")), "colour"),
    ] {
        let response = create_as(&gw, &gw.key, &body);
        assert_eq!(response.status, 400, "{body}: {}", response.text());
        assert_eq!(response.json()["error"]["param"], param, "{body}");
        assert!(response.header("x-invocation-id").is_some());
    }
    assert_eq!(get(&gw, &gw.key, "/v1/batches/batch_nope").status, 404);
    let response = gw.request("DELETE", "/v1/batches", Some(&gw.key), &[], b"");
    assert_eq!(response.status, 405);
}

/// A priced route whose upstream answers each call with 10 tokens for $0.01.
fn priced(upstream: &OpenAiUpstream) -> Route {
    Route::openai("oai", &upstream.base_url("/v1"))
        .api_key_env("E2E_BATCH_KEY")
        .price("gpt-x", 1000.0, 1000.0)
}

/// A gateway of the priced route on `upstream`, running two batch lines at a time.
fn two_lines_at_a_time(upstream: &OpenAiUpstream) -> Gateway {
    Gateway::builder()
        .route(priced(upstream))
        .env("E2E_BATCH_KEY", "sk-test")
        .config_line("batch_concurrency = 2")
        .start()
}

fn answering(gap: Duration) -> OpenAiUpstream {
    let usage = json!({"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10});
    OpenAiUpstream::each_call(Reply::openai_answer("gpt-x", "done", usage).slowly(gap))
}

#[test]
fn a_budget_that_runs_out_fails_the_lines_after_it() {
    let upstream = answering(Duration::ZERO);
    let gw = Gateway::builder()
        .route(priced(&upstream))
        .env("E2E_BATCH_KEY", "sk-test")
        .config_line("batch_concurrency = 1")
        .start();
    // $0.025 a day at $0.01 a line: two or three lines, then the budget refuses the rest.
    let key = gw
        .cli(&[
            "key",
            "create",
            &gw.project_id,
            "--daily-budget-usd",
            "0.025",
        ])
        .checked("key create")
        .last_line();
    let lines: Vec<String> = (0..8)
        .map(|i| chat(&format!("b{i}"), "oai/gpt-x", "abcd efgh ijkl mnopq"))
        .collect();
    let id = batch_of(&gw, &key, &lines, "24h")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = wait_for_end(&gw, &key, &id);
    assert_eq!(done["status"], "completed", "{done}");
    let served = done["request_counts"]["completed"].as_u64().unwrap();
    assert!((2..=3).contains(&served), "{done}");
    assert_eq!(done["request_counts"]["failed"], 8 - served);
    let errors = file_lines(&gw, &key, &done["error_file_id"]);
    assert_eq!(errors.len() as u64, 8 - served);
    for line in &errors {
        assert_eq!(line["response"]["status_code"], 429, "{line}");
        let message = line["response"]["body"]["error"]["message"]
            .as_str()
            .unwrap();
        assert!(message.contains("daily budget"), "{line}");
    }
    assert_eq!(upstream.requests().len() as u64, served);
}

#[test]
fn cancel_and_expiry_close_the_lines_not_run() {
    let upstream = answering(Duration::from_millis(300));
    let gw = two_lines_at_a_time(&upstream);
    let lines: Vec<String> = (0..40)
        .map(|i| chat(&format!("c{i}"), "oai/gpt-x", "hello"))
        .collect();

    let id = batch_of(&gw, &gw.key, &lines, "24h")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    upstream.wait_until("a line in flight", |u| !u.requests().is_empty());
    let cancel = |key: &str| {
        gw.request(
            "POST",
            &format!("/v1/batches/{id}/cancel"),
            Some(key),
            &[],
            b"",
        )
    };
    let cancelling = cancel(&gw.key);
    assert_eq!(cancelling.status, 200, "{}", cancelling.text());
    let status = cancelling.json()["status"].as_str().unwrap().to_owned();
    assert!(["cancelling", "cancelled"].contains(&status.as_str()));
    let done = wait_for_end(&gw, &gw.key, &id);
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done["cancelling_at"].as_i64().is_some() && done["cancelled_at"].as_i64().is_some());
    let (completed, failed) = (
        done["request_counts"]["completed"].as_u64().unwrap(),
        done["request_counts"]["failed"].as_u64().unwrap(),
    );
    assert_eq!(completed + failed, 40, "{done}");
    assert!(failed >= 30, "{done}");
    let output = file_lines(&gw, &gw.key, &done["output_file_id"]);
    let errors = file_lines(&gw, &gw.key, &done["error_file_id"]);
    assert_eq!(output.len() as u64, completed);
    let mut ids: BTreeSet<String> = BTreeSet::new();
    for line in output.iter().chain(&errors) {
        assert!(
            ids.insert(line["custom_id"].as_str().unwrap().to_owned()),
            "{line}"
        );
    }
    assert_eq!(ids.len(), 40, "every custom_id once");
    for line in &errors {
        assert_eq!(line["response"], Value::Null, "{line}");
        assert_eq!(line["error"]["code"], "batch_cancelled", "{line}");
    }
    // Cancelled again: answered as it is; a completed batch cannot be.
    assert_eq!(cancel(&gw.key).json()["status"], "cancelled");

    // A window of two seconds at two lines each 0.3 s: most lines expire.
    let id = batch_of(&gw, &gw.key, &lines, "2s")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = wait_for_end(&gw, &gw.key, &id);
    assert_eq!(done["status"], "expired", "{done}");
    assert!(done["expired_at"].as_i64().is_some());
    let errors = file_lines(&gw, &gw.key, &done["error_file_id"]);
    let expired = errors
        .iter()
        .filter(|line| line["error"]["code"] == "batch_expired")
        .count();
    assert!(expired >= 10, "{done}");
    assert_eq!(
        done["request_counts"]["completed"].as_u64().unwrap()
            + done["request_counts"]["failed"].as_u64().unwrap(),
        40
    );
    let completed_batch = batch_of(&gw, &gw.key, &lines[..1], "24h");
    let id = completed_batch["id"].as_str().unwrap();
    wait_for_end(&gw, &gw.key, id);
    let response = gw.request(
        "POST",
        &format!("/v1/batches/{id}/cancel"),
        Some(&gw.key),
        &[],
        b"",
    );
    assert_eq!(response.status, 409, "{}", response.text());
}

#[test]
fn a_replica_killed_mid_batch_leaves_its_lines_to_the_other_each_answered_once() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    // Each line is in flight for 0.2 s: the killed replica has lines leased when it dies.
    let upstream = answering(Duration::from_millis(200));
    let replica = || {
        Gateway::builder()
            .route(priced(&upstream))
            .env("E2E_BATCH_KEY", "sk-test")
            .database(&db)
            .config_line("batch_concurrency = 4")
            .config_line("batch_lease_secs = 2")
            .start()
    };
    let (mut a, b) = (replica(), replica());
    let key = a
        .cli(&["key", "create", &a.project_id])
        .checked("key create")
        .last_line();
    let lines: Vec<String> = (0..80)
        .map(|i| chat(&format!("k{i}"), "oai/gpt-x", "hello"))
        .collect();
    let id = batch_of(&a, &key, &lines, "24h")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let batch = get(&b, &key, &format!("/v1/batches/{id}")).json();
        if batch["request_counts"]["completed"].as_u64().unwrap_or(0) >= 12 {
            break;
        }
        assert!(Instant::now() < deadline, "{batch}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let at_kill = upstream.requests().len();
    a.kill();
    let done = wait_for_end(&b, &key, &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["request_counts"],
        json!({"total": 80, "completed": 80, "failed": 0})
    );
    let output = file_lines(&b, &key, &done["output_file_id"]);
    let ids: Vec<&str> = output
        .iter()
        .map(|line| line["custom_id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (0..80).map(|i| format!("k{i}")).collect();
    assert_eq!(ids, expected, "each custom_id once, in the input's order");
    assert_eq!(done["error_file_id"], Value::Null);
    // Both replicas ran lines; the lines the killed one held were run again by the other once
    // their leases ran out (a line is answered once, called at least once).
    let calls = upstream.requests().len();
    println!("{calls} upstream calls for 80 lines, {at_kill} of them before the kill");
    assert!(calls >= 80, "{calls} calls");
    // No record lost: the killed replica's journal is replayed when it starts again, and every
    // answer in the output is its line's record, naming the batch and the line.
    a.restart();
    for line in &output {
        let request_id = line["response"]["request_id"].as_str().unwrap();
        let record = b.record(request_id);
        assert_eq!(record["batchId"], id.as_str(), "{record}");
        assert_eq!(record["customId"], line["custom_id"], "{record}");
        assert_eq!(record["status"], "success", "{record}");
    }
}

// ------------------------------------------------------- Anthropic's Message Batches

/// A request of a message batch.
fn message(custom_id: &str, model: &str, text: &str) -> Value {
    json!({"custom_id": custom_id, "params": {"model": model, "max_tokens": 64,
        "messages": [{"role": "user", "content": text}]}})
}

/// `POST /v1/messages/batches` of `requests`, the key in `x-api-key` as Anthropic's clients
/// send it.
fn create_messages(gw: &Gateway, key: &str, requests: &[Value]) -> Response {
    let body = json!({"requests": requests}).to_string();
    let headers = [
        ("x-api-key", key),
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
    ];
    client::request(
        gw.addr,
        "POST",
        "/v1/messages/batches",
        &headers,
        body.as_bytes(),
    )
}

/// Polls the message batch until it ended; the batch.
fn wait_for_ended(gw: &Gateway, key: &str, id: &str) -> Value {
    polled(gw, key, &format!("/v1/messages/batches/{id}"), |batch| {
        batch["processing_status"] == "ended"
    })
}

/// The results of the message batch `id`, parsed.
fn results_of(gw: &Gateway, key: &str, id: &str) -> Vec<Value> {
    jsonl(gw, key, &format!("/v1/messages/batches/{id}/results"))
}

#[test]
fn a_message_batch_runs_each_request_through_the_flow_into_anthropics_results() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let mut requests: Vec<Value> = (0..10)
        .map(|i| message(&format!("m-{i}"), "demo", &format!("say {i}")))
        .collect();
    requests.insert(4, message("unknown-model", "nope/x", "hi"));
    let created = create_messages(&gw, &gw.key, &requests);
    assert_eq!(created.status, 200, "{}", created.text());
    let created = created.json();
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("msgbatch_"), "{created}");
    assert_eq!(created["type"], "message_batch");
    assert_eq!(created["results_url"], Value::Null);
    assert_eq!(created["archived_at"], Value::Null);
    let counts = created["request_counts"].as_object().unwrap();
    let total: u64 = counts.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(total, 11, "{created}");
    for at in ["created_at", "expires_at"] {
        assert!(created[at].as_str().unwrap().ends_with('Z'), "{created}");
    }

    let done = wait_for_ended(&gw, &gw.key, &id);
    assert_eq!(
        done["request_counts"],
        json!({"processing": 0, "succeeded": 10, "errored": 1, "canceled": 0, "expired": 0}),
        "{done}"
    );
    assert!(done["ended_at"].is_string(), "{done}");
    assert_eq!(
        done["results_url"],
        format!("http://{}/v1/messages/batches/{id}/results", gw.addr)
    );
    let results = results_of(&gw, &gw.key, &id);
    let ids: Vec<&str> = results
        .iter()
        .map(|line| line["custom_id"].as_str().unwrap())
        .collect();
    let asked: Vec<&str> = requests
        .iter()
        .map(|request| request["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, asked, "every request once, in order");
    let lines = |result| {
        let labels = [("api", "anthropic"), ("result", result)];
        metric(&gw, "gateway_batch_lines_total", &labels)
    };
    assert_eq!((lines("succeeded"), lines("failed")), (10.0, 1.0));
    let finished = [("api", "anthropic"), ("status", "completed")];
    metric_reaches(&gw, "gateway_batches_total", &finished, 1.0);
    for line in &results {
        if line["custom_id"] == "unknown-model" {
            assert_eq!(line["result"]["type"], "errored", "{line}");
            let error = &line["result"]["error"];
            assert_eq!(error["type"], "error", "{line}");
            assert!(error["error"]["message"].is_string(), "{line}");
            let record = gw.record(error["request_id"].as_str().unwrap());
            assert_eq!(record["batchId"], id.as_str());
            assert_eq!(record["customId"], "unknown-model");
            continue;
        }
        assert_eq!(line["result"]["type"], "succeeded", "{line}");
        let message = &line["result"]["message"];
        assert_eq!(message["type"], "message", "{line}");
        let n = &line["custom_id"].as_str().unwrap()[2..];
        let text = message["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(&format!("say {n}")), "{line}");
    }

    // Each API lists its own batches.
    let listed = get(&gw, &gw.key, "/v1/messages/batches?limit=1").json();
    assert_eq!(listed["data"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(
        (&listed["first_id"], &listed["has_more"]),
        (&json!(id), &json!(false))
    );
    assert_eq!(get(&gw, &gw.key, "/v1/batches").json()["data"], json!([]));
    assert_eq!(get(&gw, &gw.key, &format!("/v1/batches/{id}")).status, 404);
    let other = gw.create_project("other");
    assert_eq!(
        get(&gw, &other.key, &format!("/v1/messages/batches/{id}")).status,
        404
    );
    assert_eq!(
        get(
            &gw,
            &other.key,
            &format!("/v1/messages/batches/{id}/results")
        )
        .status,
        404
    );

    // Deleted with its results.
    let path = format!("/v1/messages/batches/{id}");
    let deleted = gw.request("DELETE", &path, Some(&gw.key), &[], b"");
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(
        deleted.json(),
        json!({"id": id, "type": "message_batch_deleted"})
    );
    assert_eq!(get(&gw, &gw.key, &path).status, 404);
    assert_eq!(get(&gw, &gw.key, "/v1/files").json()["data"], json!([]));
    assert_eq!(gw.row_count("batch_lines"), 0);
}

#[test]
fn a_bad_request_refuses_its_message_batch_and_nothing_is_kept() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("max_body_bytes = 2048")
        .config_line("max_file_bytes = 200000")
        .start();
    let good = |i: usize| message(&format!("r{i}"), "demo", "hi");
    let cases: [(usize, Value, &str); 6] = [
        (3, good(1), "requests.3.custom_id"),
        (
            2,
            message("has space", "demo", "hi"),
            "requests.2.custom_id",
        ),
        (5, json!({"custom_id": "r5"}), "requests.5.params"),
        (
            1,
            json!({"custom_id": "r1", "params": {"model": "demo", "stream": true}}),
            "requests.1.params.stream",
        ),
        (
            4,
            message("r4", "demo", &"long ".repeat(1000)),
            "requests.4.params",
        ),
        (6, json!("r6"), "requests.6"),
    ];
    for (at, bad, said) in cases {
        let mut requests: Vec<Value> = (0..9).map(good).collect();
        requests[at] = bad;
        let refused = create_messages(&gw, &gw.key, &requests);
        assert_eq!(refused.status, 400, "{said}: {}", refused.text());
        let error = refused.json();
        assert_eq!(error["type"], "error", "{error}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(said), "{said}: {error}");
        assert!(refused.header("x-invocation-id").is_some());
    }
    // Not JSON, no requests, and a body over max_file_bytes (refused by its declared length).
    for (body, status) in [
        ("{\"requests\": [".to_owned(), 400),
        ("{\"requests\": []}".to_owned(), 400),
        (
            format!("{{\"requests\": [{}]}}", "1,".repeat(100_000) + "1"),
            413,
        ),
    ] {
        let headers = [("x-api-key", gw.key.as_str())];
        let path = "/v1/messages/batches";
        let response = client::request(gw.addr, "POST", path, &headers, body.as_bytes());
        assert_eq!(response.status, status, "{}", response.text());
    }
    assert_eq!(
        get(&gw, &gw.key, "/v1/messages/batches").json()["data"],
        json!([])
    );
    assert_eq!(gw.row_count("batch_lines"), 0);
    assert_eq!(gw.row_count("batches"), 0);
    assert_eq!(gw.list_invocations(&[]).len(), 0);
    let wrong = gw.request("PUT", "/v1/messages/batches", Some(&gw.key), &[], b"");
    assert_eq!(wrong.status, 405);
    assert_eq!(
        get(&gw, &gw.key, "/v1/messages/batches/msgbatch_nope").status,
        404
    );
}

#[test]
fn a_message_batch_cancelled_mid_run_ends_with_its_requests_canceled() {
    let upstream = answering(Duration::from_millis(300));
    let gw = two_lines_at_a_time(&upstream);
    let requests: Vec<Value> = (0..40)
        .map(|i| message(&format!("c{i}"), "oai/gpt-x", "hello"))
        .collect();
    let created = create_messages(&gw, &gw.key, &requests);
    assert_eq!(created.status, 200, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    upstream.wait_until("a request in flight", |u| !u.requests().is_empty());
    let path = format!("/v1/messages/batches/{id}");
    // Still running: not deleted.
    assert_eq!(
        gw.request("DELETE", &path, Some(&gw.key), &[], b"").status,
        409
    );
    let cancel = format!("{path}/cancel");
    let cancelling = gw.request("POST", &cancel, Some(&gw.key), &[], b"");
    assert_eq!(cancelling.status, 200, "{}", cancelling.text());
    let cancelling = cancelling.json();
    assert!(
        ["canceling", "ended"].contains(&cancelling["processing_status"].as_str().unwrap()),
        "{cancelling}"
    );
    assert!(
        cancelling["cancel_initiated_at"].is_string(),
        "{cancelling}"
    );
    let done = wait_for_ended(&gw, &gw.key, &id);
    let counts = &done["request_counts"];
    let (succeeded, canceled) = (
        counts["succeeded"].as_u64().unwrap(),
        counts["canceled"].as_u64().unwrap(),
    );
    assert_eq!(succeeded + canceled, 40, "{done}");
    assert!(canceled >= 30, "{done}");
    assert_eq!(
        (&counts["errored"], &counts["expired"]),
        (&json!(0), &json!(0))
    );
    let results = results_of(&gw, &gw.key, &id);
    let ids: BTreeSet<&str> = results
        .iter()
        .map(|line| line["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!((ids.len(), results.len()), (40, 40), "every custom_id once");
    let never_run = results
        .iter()
        .filter(|line| line["result"] == json!({"type": "canceled"}))
        .count();
    assert_eq!(never_run as u64, canceled);
    let cancelled = [("api", "anthropic"), ("result", "cancelled")];
    metric_reaches(
        &gw,
        "gateway_batch_lines_total",
        &cancelled,
        canceled as f64,
    );
    let finished = [("api", "anthropic"), ("status", "cancelled")];
    metric_reaches(&gw, "gateway_batches_total", &finished, 1.0);
    // Ended: answered as it is.
    let again = gw.request("POST", &cancel, Some(&gw.key), &[], b"");
    assert_eq!(again.json()["processing_status"], "ended");
    assert_eq!(
        gw.request("DELETE", &path, Some(&gw.key), &[], b"").status,
        200
    );
}
