//! Guards through the real gateway: the `test-guard` plugin (tests/plugins/test-guard), whose
//! verdict the text chooses (`deny-me`, `rewrite-me`, `crash-me`, `loop-me`, `reshape-me`;
//! `deny-answer`, `rewrite-answer` in answers), the shipped `pii-guard`, and the Python guard
//! of `examples/python-guard`. The echo plugin answers with the prompt, so a prompt chooses
//! the answer's verdict too.

use gateway_test_support::refused::refused_start;
use gateway_test_support::scrape::{scrape, value};
use gateway_test_support::{
    Gateway, OpenAiUpstream, Reply, Response, Route, assert_error, assert_ok, chat_request,
    split_stream, streamed_text, text_request, with,
};
use serde_json::{Value, json};

const MODEL: &str = "gpt-4o-mini";
const PROVIDER_KEY: &str = "sk-test-guards-caller-0123456789";

fn echo_guarded(id: &str, guards: &str) -> Route {
    Route::echo(id).key("guards", guards)
}

fn openai_guarded(id: &str, upstream: &OpenAiUpstream, guards: &str) -> Route {
    Route::openai(id, &upstream.base_url("/v1")).key("guards", guards)
}

fn answer(text: &str) -> Reply {
    Reply::openai_answer(
        MODEL,
        text,
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    )
}

fn post_keyed(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.post_with_headers(
        path,
        Some(&gw.key),
        &[("Provider-API-Key", PROVIDER_KEY)],
        body,
    )
}

/// The Commonbase error's message, once `assert_error` checked the status and a part of it.
fn refusal(response: &Response, status: u16, needle: &str) -> String {
    assert_error(response, status, needle);
    response.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn text_of(response: &Response) -> String {
    let body = assert_ok(response);
    body["choices"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {body}"))
        .to_owned()
}

fn record_of(gw: &Gateway, response: &Response) -> Value {
    let id = response
        .header("x-invocation-id")
        .map(str::to_owned)
        .or_else(|| response.json()["invocationId"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no invocation id: {}", response.text()));
    gw.record(&id)
}

/// The text the upstream was sent in its last user message.
fn sent_text(upstream: &OpenAiUpstream) -> String {
    let request = upstream.single_request().json();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    match &last["content"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

// ------------------------------------------------------------------ requests

#[test]
fn a_denied_request_never_reaches_the_provider_and_is_recorded_blocked() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["t"]"#))
        .guard("t", "test-guard", "")
        .start();

    let body = text_request(&gw.project_id, "o", MODEL, "please deny-me now");
    let response = post_keyed(&gw, "/completions", &body);
    let message = refusal(&response, 400, "blocked by guard \"t\"");
    assert!(message.contains("asked to be denied"), "{message}");
    assert_eq!(response.json()["guard"], json!("t"));
    assert_eq!(upstream.request_count(), 0, "the provider was never called");
    let record = record_of(&gw, &response);
    assert_eq!(record["status"], json!("blocked"), "{record}");
    assert_eq!(record["httpStatus"], json!(400), "{record}");
    let guards = &record["guards"];
    assert_eq!(guards[0]["guard"], json!("t"), "{record}");
    assert_eq!(guards[0]["stage"], json!("request"), "{record}");
    assert_eq!(guards[0]["verdict"], json!("deny"), "{record}");
    assert_eq!(guards[0]["reason"], json!("asked to be denied"), "{record}");

    // The OpenAI and Anthropic surfaces answer the same refusal in their own shapes.
    let openai = post_keyed(
        &gw,
        "/v1/chat/completions",
        &json!({"model": "o/gpt-4o-mini", "messages": [{"role": "user", "content": "deny-me"}]}),
    );
    assert_eq!(openai.status, 400, "{}", openai.text());
    let error = &openai.json()["error"];
    assert_eq!(error["code"], json!("guard_blocked"), "{error}");
    assert_eq!(error["type"], json!("invalid_request_error"), "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .contains("guard \"t\""),
        "{error}"
    );
    let anthropic = post_keyed(
        &gw,
        "/v1/messages",
        &json!({"model": "o/gpt-4o-mini", "max_tokens": 16,
                "messages": [{"role": "user", "content": "deny-me"}]}),
    );
    assert_eq!(anthropic.status, 400, "{}", anthropic.text());
    assert_eq!(
        anthropic.json()["error"]["type"],
        json!("invalid_request_error")
    );
    assert_eq!(upstream.request_count(), 0);

    let samples = scrape(&gw, None);
    let denied = value(
        &samples,
        "gateway_guard_verdicts_total",
        &[("guard", "t"), ("stage", "request"), ("verdict", "deny")],
    );
    assert_eq!(denied, 3.0);
}

#[test]
fn a_rewrite_changes_what_the_provider_is_sent_and_is_recorded_by_counts() {
    let upstream = OpenAiUpstream::script(vec![answer("fine")]);
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["t"]"#))
        .guard("t", "test-guard", "")
        .start();
    let body = chat_request(
        &gw.project_id,
        "o",
        MODEL,
        json!([{"role": "user", "content": "rewrite-me and rewrite-me again"}]),
    );
    let response = post_keyed(&gw, "/completions", &body);
    assert_eq!(text_of(&response), "fine");
    assert_eq!(sent_text(&upstream), "[REWRITTEN] and [REWRITTEN] again");
    let record = record_of(&gw, &response);
    assert_eq!(record["status"], json!("success"), "{record}");
    let outcome = &record["guards"][0];
    assert_eq!(outcome["verdict"], json!("rewrite"), "{record}");
    assert_eq!(outcome["changes"], json!({"marker": 2}), "{record}");
    assert_eq!(outcome["applied"], json!(true), "{record}");
}

#[test]
fn embeddings_inputs_go_through_the_guards_too() {
    let gw = Gateway::builder()
        .route(echo_guarded("e", r#"["t"]"#))
        .guard("t", "test-guard", "")
        .start();
    let response = gw.post(
        "/v1/embeddings",
        &json!({"model": "e/echo", "input": ["fine", "deny-me"]}),
    );
    assert_eq!(response.status, 400, "{}", response.text());
    let response = gw.post(
        "/v1/embeddings",
        &json!({"model": "e/echo", "input": ["fine", "reshape-me"]}),
    );
    assert_eq!(
        response.status,
        502,
        "a rewrite of another shape fails the guard: {}",
        response.text()
    );
    let response = gw.post(
        "/v1/embeddings",
        &json!({"model": "e/echo", "input": ["fine", "also fine"]}),
    );
    assert_eq!(response.status, 200, "{}", response.text());
}

// ------------------------------------------------------------------ answers

#[test]
fn answers_are_denied_or_rewritten_before_the_caller_sees_them() {
    let gw = Gateway::builder()
        .route(echo_guarded("e", r#"["t"]"#))
        .guard("t", "test-guard", "")
        .start();
    let rewritten = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "say rewrite-answer"),
    );
    assert_eq!(text_of(&rewritten), "say [ANSWER REWRITTEN]");
    let record = record_of(&gw, &rewritten);
    assert_eq!(record["guards"][0]["stage"], json!("request"), "{record}");
    assert_eq!(record["guards"][0]["verdict"], json!("allow"), "{record}");
    assert_eq!(record["guards"][1]["stage"], json!("response"), "{record}");
    assert_eq!(record["guards"][1]["verdict"], json!("rewrite"), "{record}");

    let denied = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "say deny-answer"),
    );
    let message = refusal(&denied, 400, "the answer was blocked by guard \"t\"");
    assert!(
        message.contains("the answer asked to be denied"),
        "{message}"
    );
    let record = record_of(&gw, &denied);
    assert_eq!(record["status"], json!("blocked"), "{record}");
    assert!(
        record["usage"]["total_tokens"].as_u64().unwrap_or(0) > 0
            || record["usage"]["totalTokens"].as_u64().unwrap_or(0) > 0,
        "the provider's answer was paid for: its usage is recorded: {record}"
    );
}

/// The answers of `requests` requests through `test-guard`'s `count-checks`, on a gateway
/// with `config_lines`: each says how many checks the instance that checked it had made.
fn checks_counted(config_lines: &[&str], requests: usize) -> Vec<String> {
    let gw = config_lines
        .iter()
        .fold(Gateway::builder(), |builder, line| {
            builder.config_line(line)
        })
        .route(echo_guarded("e", r#"["t"]"#))
        .guard("t", "test-guard", "")
        .start();
    (0..requests)
        .map(|_| {
            let body = text_request(&gw.project_id, "e", "echo", "count-checks");
            text_of(&gw.post("/completions", &body))
        })
        .collect()
}

#[test]
fn one_fresh_instance_checks_a_request_and_then_its_answer() {
    // The instance that checked the request checks its answer (its second check), and the
    // next request has an instance of its own (its count starts again).
    assert_eq!(checks_counted(&[], 3), ["[CHECKS 2]"; 3]);
}

#[test]
fn a_guard_short_of_instances_checks_the_answer_in_a_fresh_one() {
    // One slot: a guard's instance kept through the call would leave the provider none.
    let answers = checks_counted(&["max_plugin_instances = 1"], 2);
    assert_eq!(answers, ["[CHECKS 1]"; 2]);
}

#[test]
fn a_buffering_guard_holds_a_stream_and_an_observing_one_only_records() {
    let gw = Gateway::builder()
        .route(echo_guarded("held", r#"["buffer"]"#))
        .route(echo_guarded("seen", r#"["observe"]"#))
        .guard("buffer", "test-guard", "")
        .guard("observe", "test-guard", r#"guard_stream = "observe""#)
        .start();
    let stream = |route: &str, prompt: &str| {
        gw.post_stream(
            "/completions",
            &with(
                text_request(&gw.project_id, route, "echo", prompt),
                "stream",
                json!(true),
            ),
        )
    };

    let held = stream("held", "one two rewrite-answer");
    let (frames, last) = split_stream(&held);
    assert_eq!(streamed_text(&frames, 0), "one two [ANSWER REWRITTEN]");
    let record = gw.record(last["invocationId"].as_str().unwrap_or_default());
    assert_eq!(record["guards"][1]["verdict"], json!("rewrite"), "{record}");
    assert_eq!(record["guards"][1]["applied"], json!(true), "{record}");

    let refused = stream("held", "one deny-answer");
    assert_eq!(
        refused.status, 400,
        "refused before streaming: {}",
        refused.raw
    );

    let seen = stream("seen", "one two rewrite-answer");
    let (frames, last) = split_stream(&seen);
    assert_eq!(
        streamed_text(&frames, 0).trim(),
        "one two rewrite-answer",
        "an observing guard changes nothing"
    );
    let id = last["invocationId"].as_str().unwrap_or_default().to_owned();
    let record = gw.wait_for_record(&id, |record| {
        record["guards"].as_array().is_some_and(|g| g.len() == 2)
    });
    assert_eq!(record["status"], json!("success"), "{record}");
    assert_eq!(record["guards"][1]["verdict"], json!("rewrite"), "{record}");
    assert_eq!(record["guards"][1]["applied"], json!(false), "{record}");
    let samples = scrape(&gw, None);
    let observed = value(
        &samples,
        "gateway_guard_verdicts_total",
        &[
            ("guard", "observe"),
            ("stage", "response"),
            ("verdict", "rewrite"),
        ],
    );
    assert_eq!(observed, 1.0);
}

// ------------------------------------------------------------------ order and failures

#[test]
fn global_then_route_then_project_guards_run_in_that_order() {
    let gw = Gateway::builder()
        .route(echo_guarded("e", r#"["route", "global"]"#))
        .config_line(r#"global_guards = ["global"]"#)
        .guard("global", "test-guard", r#"settings = { tag = "global" }"#)
        .guard("route", "test-guard", r#"settings = { tag = "route" }"#)
        .guard("project", "test-guard", r#"settings = { tag = "project" }"#)
        .start();
    gw.cli_ok(&[
        "project",
        "guards",
        &gw.project_id,
        "--set",
        "project,route",
    ]);

    let denied = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "deny-me"),
    );
    let message = refusal(&denied, 400, "guard \"global\"");
    assert!(
        message.contains("(global)"),
        "the first guard refused: {message}"
    );

    let rewritten = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "rewrite-me"),
    );
    assert_eq!(text_of(&rewritten), "[REWRITTEN]");
    let record = record_of(&gw, &rewritten);
    let order: Vec<(String, String)> = record["guards"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            (
                g["guard"].as_str().unwrap_or_default().to_owned(),
                g["verdict"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("global", "rewrite"),
        ("route", "allow"),
        ("project", "allow"),
        ("global", "allow"),
        ("route", "allow"),
        ("project", "allow"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(g, v)| ((*g).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(
        order, expected,
        "each guard once, in order, per stage: {record}"
    );
}

#[test]
fn a_failing_guard_refuses_the_request_rather_than_pass_it_unchecked() {
    let upstream = OpenAiUpstream::always(answer("fine"));
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["t"]"#))
        .route(Route::echo("gone").key("guards", r#"["absent"]"#))
        .guard("t", "test-guard", "cpu_time_ms = 300")
        .guard("absent", "no-such-guard-plugin", "")
        .start();
    // A crash and a loop past the CPU budget are a plugin's crash, as a provider's is: the
    // stable `plugin_error` code; a guard that answers something unusable is not.
    for (prompt, code) in [
        ("crash-me", json!("plugin_error")),
        ("loop-me", json!("plugin_error")),
        ("reshape-me", Value::Null),
    ] {
        let response = post_keyed(
            &gw,
            "/completions",
            &text_request(&gw.project_id, "o", MODEL, prompt),
        );
        let message = refusal(&response, 502, "guard \"t\" failed");
        assert!(message.contains("refused unchecked"), "{message}");
        assert_eq!(
            response.json()["code"],
            code,
            "{prompt}: {}",
            response.text()
        );
        let record = record_of(&gw, &response);
        assert_eq!(record["guards"][0]["verdict"], json!("error"), "{record}");
    }
    assert_eq!(
        upstream.request_count(),
        0,
        "nothing went through unchecked"
    );
    let fine = post_keyed(
        &gw,
        "/completions",
        &text_request(&gw.project_id, "o", MODEL, "hello"),
    );
    assert_eq!(text_of(&fine), "fine", "the gateway keeps serving");

    let missing = gw.post(
        "/completions",
        &text_request(&gw.project_id, "gone", "echo", "hello"),
    );
    assert_error(&missing, 503, "guard \"absent\" is unavailable");
}

#[test]
fn an_unknown_guard_id_is_refused_at_load() {
    let refusal = refused_start("[providers.e]\nplugin = \"echo\"\nguards = [\"nope\"]\n");
    assert!(
        refusal.contains("providers.e.guards[0]") && refusal.contains("\"nope\""),
        "{refusal}"
    );
    let refusal = refused_start("global_guards = [\"nope\"]\n[providers.e]\nplugin = \"echo\"\n");
    assert!(refusal.contains("global_guards[0]"), "{refusal}");
}

#[test]
fn a_0_1_provider_still_serves_beside_guards() {
    let gw = Gateway::builder()
        .route(
            Route::new("old", "legacy")
                .default_model("m")
                .key("guards", r#"["t"]"#),
        )
        .guard("t", "test-guard", "")
        .start();
    let response = gw.post(
        "/completions",
        &text_request(&gw.project_id, "old", "m", "rewrite-me"),
    );
    assert_eq!(text_of(&response), "legacy: [REWRITTEN]");
}

// ------------------------------------------------------------------ the shipped guards

/// One of each kind `pii-guard` finds, with its placeholder.
const PII: [(&str, &str); 6] = [
    (
        "write to jane.doe@example.com today",
        "write to [EMAIL] today",
    ),
    ("call +44 20 7946 0958 now", "call [PHONE] now"),
    ("card 4111 1111 1111 1111 please", "card [CARD] please"),
    ("iban GB82 WEST 1234 5698 7654 32 ok", "iban [IBAN] ok"),
    ("host 192.168.10.20 down", "host [IP] down"),
    ("key AKIAIOSFODNN7EXAMPLE leaked", "key [SECRET] leaked"),
];

#[test]
fn the_pii_guard_redacts_each_kind_before_the_provider_and_in_answers() {
    for (text, redacted) in PII {
        let upstream = OpenAiUpstream::script(vec![answer(&format!("you said: {text}"))]);
        let gw = Gateway::builder()
            .route(openai_guarded("o", &upstream, r#"["pii"]"#))
            .guard("pii", "pii-guard", "")
            .start();
        let body = chat_request(
            &gw.project_id,
            "o",
            MODEL,
            json!([{"role": "user", "content": text}]),
        );
        let response = post_keyed(&gw, "/completions", &body);
        assert_eq!(sent_text(&upstream), redacted, "the provider never sees it");
        assert_eq!(
            text_of(&response),
            format!("you said: {redacted}"),
            "nor the caller in the answer"
        );
        let record = record_of(&gw, &response);
        for outcome in record["guards"].as_array().into_iter().flatten() {
            assert_eq!(outcome["verdict"], json!("rewrite"), "{record}");
            assert!(!outcome.to_string().contains(text), "{record}");
        }
    }
}

#[test]
fn the_pii_guard_in_deny_mode_refuses_with_the_kind_never_the_value() {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["pii"]"#))
        .guard("pii", "pii-guard", r#"settings = { mode = "deny" }"#)
        .start();
    let body = text_request(
        &gw.project_id,
        "o",
        MODEL,
        "mail jane.doe@example.com the card 4111111111111111",
    );
    let response = post_keyed(&gw, "/completions", &body);
    let message = refusal(&response, 400, "guard \"pii\"");
    assert!(message.contains("email address"), "{message}");
    assert!(message.contains("payment card"), "{message}");
    assert!(!message.contains("jane.doe"), "{message}");
    assert_eq!(upstream.request_count(), 0);
}

/// The refusal of `messages` by the pii guard in deny mode (a 400 naming the guard), which
/// never reached the upstream.
fn refused_in_deny_mode(messages: Value) -> String {
    let upstream = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["pii"]"#))
        .guard("pii", "pii-guard", r#"settings = { mode = "deny" }"#)
        .start();
    let body = chat_request(&gw.project_id, "o", MODEL, messages);
    let message = refusal(
        &post_keyed(&gw, "/completions", &body),
        400,
        "guard \"pii\"",
    );
    assert_eq!(upstream.request_count(), 0);
    message
}

/// What the upstream was sent: each message's `content` and `name`.
fn sent_messages(upstream: &OpenAiUpstream) -> Vec<(Value, Value)> {
    let request = upstream.single_request().json();
    (request["messages"].as_array().into_iter().flatten())
        .map(|m| (m["content"].clone(), m["name"].clone()))
        .collect()
}

#[test]
fn the_pii_guard_finds_an_address_or_card_split_across_messages() {
    let messages = json!([
        {"role": "user", "content": "my email is jane.doe@exa"},
        {"role": "user", "content": "mple.com, and my card 4111 1111"},
        {"role": "user", "content": "1111 1111 thanks"},
    ]);
    let upstream = OpenAiUpstream::script(vec![answer("noted")]);
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["pii"]"#))
        .guard("pii", "pii-guard", "")
        .start();
    let body = chat_request(&gw.project_id, "o", MODEL, messages.clone());
    let response = post_keyed(&gw, "/completions", &body);
    assert_eq!(text_of(&response), "noted");
    let contents: Vec<Value> = (sent_messages(&upstream).into_iter())
        .map(|(content, _)| content)
        .collect();
    assert_eq!(
        contents,
        [
            json!("my email is [EMAIL]"),
            json!("[EMAIL], and my card [CARD]"),
            json!("[CARD] thanks")
        ],
        "each piece is replaced where it was"
    );
    let record = record_of(&gw, &response);
    let outcome = &record["guards"][0];
    assert_eq!(outcome["verdict"], json!("rewrite"), "{record}");
    assert_eq!(
        outcome["changes"],
        json!({"email": 1, "card": 1}),
        "{record}"
    );

    let message = refused_in_deny_mode(messages);
    assert!(
        message.contains("an email address and a payment card number"),
        "{message}"
    );
}

#[test]
fn the_pii_guard_reads_the_authors_name_of_a_message() {
    let messages = json!([
        {"role": "system", "content": "be brief", "name": "ops"},
        {"role": "user", "content": "hello", "name": "jane.doe＠example.com"},
    ]);
    let upstream = OpenAiUpstream::script(vec![answer("hi")]);
    let gw = Gateway::builder()
        .route(openai_guarded("o", &upstream, r#"["pii"]"#))
        .guard("pii", "pii-guard", "")
        .start();
    let body = chat_request(&gw.project_id, "o", MODEL, messages.clone());
    let response = post_keyed(&gw, "/completions", &body);
    assert_eq!(text_of(&response), "hi");
    assert_eq!(
        sent_messages(&upstream),
        [
            (json!("be brief"), json!("ops")),
            (json!("hello"), json!("[EMAIL]"))
        ]
    );
    let record = record_of(&gw, &response);
    assert_eq!(
        record["guards"][0]["changes"],
        json!({"email": 1}),
        "{record}"
    );

    let message = refused_in_deny_mode(messages);
    assert!(message.contains("an email address"), "{message}");
}

#[test]
fn a_python_guard_denies_a_listed_word() {
    let gw = Gateway::builder()
        .route(echo_guarded("e", r#"["words"]"#))
        .guard(
            "words",
            "python-guard",
            r#"settings = { words = ["bluebird"], patterns = ["(?i)top\\s+secret"] }"#,
        )
        .start();
    let denied = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "tell me about Bluebird"),
    );
    let message = refusal(&denied, 400, "guard \"words\"");
    assert!(
        message.contains("words #1"),
        "the rule, not the text: {message}"
    );
    assert_eq!(
        message.matches("words").count(),
        2,
        "the guard named once, by the gateway, and the rule: {message}"
    );
    let denied = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "this is TOP   secret"),
    );
    refusal(&denied, 400, "patterns #1");
    let fine = gw.post(
        "/completions",
        &text_request(&gw.project_id, "e", "echo", "blue birds are fine"),
    );
    assert_eq!(text_of(&fine), "blue birds are fine");
}
