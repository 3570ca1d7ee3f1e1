//! OpenAI's Responses API (`POST /v1/responses`) over every route: the request read into the
//! provider's own format (checked on the body each fake upstream received), answers whole and
//! as typed events, kept responses (`store`) read back, deleted and continued with
//! `previous_response_id` for the key's project only (on any replica), and what the gateway
//! does not do refused with 400 naming it.

use gateway_test_support::{
    AnthropicUpstream, Gateway, GeminiUpstream, OpenAiUpstream, Recording, Reply, Response, Route,
    TestDatabase,
};
use serde_json::{Value, json};

fn request(gw: &Gateway, method: &str, path: &str, key: &str, body: Option<&Value>) -> Response {
    let bearer = format!("Bearer {key}");
    let mut headers = vec![
        ("Authorization", bearer.as_str()),
        ("Provider-API-Key", "sk-test"),
    ];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    let body = body.map(Value::to_string).unwrap_or_default();
    gw.request(method, path, None, &headers, body.as_bytes())
}

fn respond_as(gw: &Gateway, key: &str, body: &Value) -> Response {
    request(gw, "POST", "/v1/responses", key, Some(body))
}

/// The JSON of a 200 answer.
fn ok(response: &Response) -> Value {
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()
}

fn respond(gw: &Gateway, body: &Value) -> Value {
    ok(&respond_as(gw, &gw.key, body))
}

fn kept(gw: &Gateway, key: &str, id: &str) -> Response {
    request(gw, "GET", &format!("/v1/responses/{id}"), key, None)
}

/// The `param` of a 400 answer, which also carries its invocation id.
fn refused_param(response: &Response) -> String {
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(response.header("x-invocation-id").is_some());
    let body = response.json();
    body["error"]["param"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn a_key_of_another_project(gw: &Gateway) -> String {
    let project = gw
        .cli(&["project", "create", "other"])
        .checked("project create")
        .last_line();
    gw.cli(&["key", "create", &project])
        .checked("key create")
        .last_line()
}

fn tool_call_reply(id: &str, name: &str, arguments: &str) -> Reply {
    Reply::json(
        200,
        &json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}),
    )
}

const WEATHER: &str = r#"{"city":"Lisbon"}"#;

fn weather_tool() -> Value {
    json!([{"type": "function", "name": "weather", "description": "The weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])
}

#[test]
fn a_response_is_answered_kept_read_back_and_deleted_for_its_project_only() {
    let upstream = OpenAiUpstream::script(vec![Reply::openai_answer(
        "gpt-4o-mini",
        "Olá!",
        json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4}}),
    )]);
    let gw = Gateway::builder()
        .route(Route::openai("gpt", &upstream.base_url("/v1")))
        .start();
    let answer = respond(
        &gw,
        &json!({"model": "gpt/gpt-4o-mini", "instructions": "Be brief.", "input": "Say hi",
            "max_output_tokens": 64, "temperature": 0.2, "metadata": {"team": "a"},
            "text": {"format": {"type": "json_schema", "name": "hi", "strict": true,
                "schema": {"type": "object"}}}}),
    );
    let id = answer["id"].as_str().expect("an id");
    assert!(id.starts_with("resp_"), "{answer}");
    assert_eq!(answer["object"], "response");
    assert_eq!(answer["status"], "completed");
    assert_eq!(
        answer["output"].as_array().map(Vec::len),
        Some(1),
        "{answer}"
    );
    let message = &answer["output"][0];
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(
        message["content"],
        json!([{"type": "output_text", "text": "Olá!", "annotations": [], "logprobs": []}])
    );
    assert_eq!(
        answer["usage"],
        json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15})
    );
    assert_eq!(answer["instructions"], "Be brief.");
    assert_eq!(answer["metadata"], json!({"team": "a"}));
    assert_eq!(answer["temperature"], 0.2);
    assert_eq!(answer["max_output_tokens"], 64);
    assert_eq!(answer["store"], true);

    let sent = upstream.single_request().json();
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]),
        "{sent}"
    );
    let max = sent.get("max_completion_tokens").or(sent.get("max_tokens"));
    assert_eq!(max, Some(&json!(64)), "{sent}");
    assert_eq!(sent["temperature"], 0.2, "{sent}");
    assert_eq!(
        sent["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "hi", "strict": true,
            "schema": {"type": "object"}}}),
        "{sent}"
    );
    for field in ["input", "instructions", "metadata", "text", "store"] {
        assert!(sent.get(field).is_none(), "{field} went upstream: {sent}");
    }

    assert_eq!(ok(&kept(&gw, &gw.key, id)), answer);
    let other = a_key_of_another_project(&gw);
    assert_eq!(kept(&gw, &other, id).status, 404);
    let path = format!("/v1/responses/{id}");
    assert_eq!(request(&gw, "DELETE", &path, &other, None).status, 404);
    let deleted = ok(&request(&gw, "DELETE", &path, &gw.key, None));
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response", "deleted": true})
    );
    assert_eq!(kept(&gw, &gw.key, id).status, 404);
    assert_eq!(request(&gw, "DELETE", &path, &gw.key, None).status, 404);
    assert_eq!(request(&gw, "PUT", &path, &gw.key, None).status, 405);
}

#[test]
fn previous_response_id_sends_the_kept_conversation_back_with_the_calls_output() {
    let upstream = OpenAiUpstream::script(vec![
        tool_call_reply("call_abc", "weather", WEATHER),
        Reply::openai_answer("gpt-4o-mini", "Sunny.", json!({})),
        Reply::openai_answer("gpt-4o-mini", "Bye.", json!({})),
    ]);
    let gw = Gateway::builder()
        .route(Route::openai("gpt", &upstream.base_url("/v1")))
        .start();
    let first = respond(
        &gw,
        &json!({"model": "gpt/gpt-4o-mini", "instructions": "Use tools.",
            "input": "Weather in Lisbon?", "tools": weather_tool(), "tool_choice": "auto"}),
    );
    let output = first["output"].as_array().expect("output");
    assert_eq!(output.len(), 1, "{first}");
    assert_eq!(output[0]["type"], "function_call");
    assert_eq!(output[0]["call_id"], "call_abc");
    assert_eq!(output[0]["name"], "weather");
    assert_eq!(output[0]["arguments"], WEATHER);
    let first_id = first["id"].as_str().expect("an id");

    let second = respond(
        &gw,
        &json!({"model": "gpt/gpt-4o-mini", "previous_response_id": first_id,
            "input": [{"type": "function_call_output", "call_id": "call_abc", "output": "sunny"}],
            "tools": weather_tool()}),
    );
    assert_eq!(second["previous_response_id"], first_id);
    assert_eq!(second["output"][0]["content"][0]["text"], "Sunny.");
    let sent = upstream.requests()[1].json();
    // Instructions are not carried over, as on OpenAI's API.
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "user", "content": "Weather in Lisbon?"},
            {"role": "assistant", "tool_calls": [{"id": "call_abc",
                "type": "function", "function": {"name": "weather", "arguments": WEATHER}}]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "sunny"},
        ]),
        "{sent}"
    );
    assert_eq!(sent["tools"][0]["function"]["name"], "weather", "{sent}");

    // The second response holds the whole conversation: a third turn continues it.
    let second_id = second["id"].as_str().expect("an id");
    respond(
        &gw,
        &json!({"model": "gpt/gpt-4o-mini", "previous_response_id": second_id,
            "input": "Thanks"}),
    );
    let sent = upstream.requests()[2].json();
    let roles: Vec<&str> = (sent["messages"].as_array().into_iter().flatten())
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "user"],
        "{sent}"
    );
    assert_eq!(sent["messages"][3]["content"], "Sunny.", "{sent}");

    // Another project's key cannot continue it; an unknown id is a 400 naming the field.
    let other = a_key_of_another_project(&gw);
    let body = json!({"model": "gpt/gpt-4o-mini", "previous_response_id": first_id,
        "input": "again"});
    assert_eq!(
        refused_param(&respond_as(&gw, &other, &body)),
        "previous_response_id"
    );
    assert_eq!(upstream.requests().len(), 3);
}

/// A key of the gateway's project made with `scope` (`--routes ...` / `--models ...`).
fn a_scoped_key(gw: &Gateway, scope: &[&str]) -> String {
    let mut args = vec!["key", "create", gw.project_id.as_str()];
    args.extend_from_slice(scope);
    gw.cli(&args).checked("key create").last_line()
}

#[test]
fn a_scoped_key_reads_deletes_and_continues_only_the_responses_of_its_scope() {
    let usage = json!({"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6});
    let upstream = OpenAiUpstream::each_call(Reply::openai_answer("gpt-4o-mini", "Hi.", usage));
    let gw = Gateway::builder()
        .route(Route::openai("gpt", &upstream.base_url("/v1")))
        .route(Route::openai("other", &upstream.base_url("/v1")))
        .start();
    let make = |model: &str| {
        let answer = respond(&gw, &json!({"model": model, "input": "Say hi"}));
        answer["id"].as_str().expect("an id").to_owned()
    };
    // Made by the project's key of every route.
    let on_gpt = make("gpt/gpt-4o-mini");
    let on_other = make("other/gpt-4o-mini");
    let other_model = make("other/gpt-4o");
    let gpt_only = a_scoped_key(&gw, &["--routes", "gpt"]);
    let one_model = a_scoped_key(&gw, &["--models", "other/gpt-4o-mini"]);
    let path = |id: &str| format!("/v1/responses/{id}");
    let unknown = "resp_0123456789abcdef0123456789abcdef";

    // Outside the scope: answered as an id that does not exist, whatever it is asked.
    let missing = kept(&gw, &gpt_only, unknown);
    assert_eq!(missing.status, 404);
    let shape = |response: &Response| {
        let mut body = response.json();
        body["error"]["message"] = json!("");
        body
    };
    for (key, id) in [
        (&gpt_only, &on_other),
        (&gpt_only, &other_model),
        (&one_model, &on_gpt),
        (&one_model, &other_model),
    ] {
        let read = kept(&gw, key, id);
        assert_eq!(read.status, 404, "{id}: {}", read.text());
        assert_eq!(shape(&read), shape(&missing), "{id}");
        assert_eq!(
            read.json()["error"]["message"],
            format!("response with id {id:?} not found")
        );
        let deleted = request(&gw, "DELETE", &path(id), key, None);
        assert_eq!(deleted.status, 404, "{id}: {}", deleted.text());
        // Continued on a route of its scope: the earlier conversation is not read either.
        let calls = upstream.request_count();
        let body = json!({"model": if key == &gpt_only { "gpt/gpt-4o-mini" }
                else { "other/gpt-4o-mini" },
            "previous_response_id": id, "input": "again"});
        assert_eq!(
            refused_param(&respond_as(&gw, key, &body)),
            "previous_response_id"
        );
        assert_eq!(upstream.request_count(), calls, "nothing went upstream");
    }
    // None of them was deleted.
    for id in [&on_gpt, &on_other, &other_model] {
        assert_eq!(kept(&gw, &gw.key, id).status, 200, "{id}");
    }

    // Within the scope: read, continued and deleted.
    assert_eq!(kept(&gw, &gpt_only, &on_gpt).status, 200);
    assert_eq!(kept(&gw, &one_model, &on_other).status, 200);
    let body = json!({"model": "gpt/gpt-4o-mini", "previous_response_id": on_gpt,
        "input": "again"});
    ok(&respond_as(&gw, &gpt_only, &body));
    ok(&request(&gw, "DELETE", &path(&on_gpt), &gpt_only, None));
    ok(&request(&gw, "DELETE", &path(&on_other), &one_model, None));
    // The key of every route still has the one no scoped key could reach.
    assert_eq!(kept(&gw, &gw.key, &on_gpt).status, 404);
    ok(&request(&gw, "DELETE", &path(&other_model), &gw.key, None));
}

#[test]
fn store_false_keeps_nothing_beyond_the_record() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let answer = respond(
        &gw,
        &json!({"model": "demo/echo", "input": "hello there", "store": false}),
    );
    assert_eq!(answer["store"], false);
    assert_eq!(answer["output"][0]["content"][0]["text"], "hello there");
    let id = answer["id"].as_str().expect("an id");
    assert_eq!(kept(&gw, &gw.key, id).status, 404);
    let body = json!({"model": "demo/echo", "previous_response_id": id, "input": "more"});
    assert_eq!(
        refused_param(&respond_as(&gw, &gw.key, &body)),
        "previous_response_id"
    );
    // The invocation is recorded as any other: the response id carries its id.
    let invocation = format!(
        "{}-{}-{}-{}-{}",
        &id[5..13],
        &id[13..17],
        &id[17..21],
        &id[21..25],
        &id[25..37]
    );
    let record = gw.record(&invocation);
    assert_eq!(record["status"], "success", "{record}");
}

#[test]
fn a_stream_is_the_typed_events_in_order_and_its_response_is_kept() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let body = json!({"model": "demo/echo", "input": "one two three", "stream": true});
    let stream = gw.post_stream_with_headers(
        "/v1/responses",
        Some(&format!("Bearer {}", gw.key)),
        &[],
        &body,
    );
    assert_eq!(stream.status, 200, "{}", stream.raw);
    let frames = &stream.frames;
    let types: Vec<&str> = frames.iter().filter_map(|f| f["type"].as_str()).collect();
    let deltas = types
        .iter()
        .filter(|t| **t == "response.output_text.delta")
        .count();
    assert!(deltas >= 2, "{types:?}");
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(types, expected);
    for (n, frame) in frames.iter().enumerate() {
        assert_eq!(frame["sequence_number"], n, "{frame}");
    }
    // Each event names itself in its SSE `event:` line too.
    assert!(stream.raw.contains("event: response.completed\ndata: "));
    let text: String = (frames.iter())
        .filter(|f| f["type"] == "response.output_text.delta")
        .filter_map(|f| f["delta"].as_str())
        .collect();
    assert_eq!(text, "one two three");
    let created = &frames[0]["response"];
    assert_eq!(created["status"], "in_progress");
    let completed = &frames[frames.len() - 1]["response"];
    assert_eq!(completed["id"], created["id"]);
    assert_eq!(completed["status"], "completed");
    let item = &frames[2]["item"];
    assert_eq!(completed["output"][0]["id"], item["id"]);
    assert_eq!(
        completed["output"][0]["content"][0]["text"],
        "one two three"
    );
    assert!(
        completed["usage"]["output_tokens"].as_u64().is_some(),
        "{completed}"
    );

    let id = completed["id"].as_str().expect("an id");
    assert!(id.starts_with("resp_"), "{id}");
    assert!(
        item["id"].as_str().is_some_and(|id| id.starts_with("msg_")),
        "{item}"
    );
    assert_eq!(&ok(&kept(&gw, &gw.key, id)), completed);
}

#[test]
fn reasoning_comes_back_as_items_and_goes_back_upstream_with_its_signature() {
    let upstream = AnthropicUpstream::script(vec![
        Reply::anthropic_thinking(),
        Reply::anthropic_thinking_stream(),
        Reply::anthropic_thinking(),
    ]);
    let gw = Gateway::builder()
        .route(Route::new("claude", "anthropic").base_url(&upstream.base_url("/v1")))
        .start();
    let body = json!({"model": "claude/claude-sonnet-4-5", "input": "Weather?",
        "max_output_tokens": 4096, "reasoning": {"effort": "high"}});
    let answer = respond(&gw, &body);
    assert_eq!(
        answer["output"][0],
        json!({"type": "reasoning", "id": answer["output"][0]["id"],
            "summary": [{"type": "summary_text", "text": "Let me think."}],
            "encrypted_content": "sig-abc"})
    );
    assert_eq!(answer["output"][1]["content"][0]["text"], "Olá");
    assert_eq!(answer["reasoning"]["effort"], "high");
    let sent = upstream.requests()[0].json();
    assert_eq!(sent["thinking"]["type"], "enabled", "{sent}");

    // Streamed: the thinking arrives as summary text deltas, its signature with the item.
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let stream = gw.post_stream_with_headers(
        "/v1/responses",
        Some(&format!("Bearer {}", gw.key)),
        &[("Provider-API-Key", "sk-test")],
        &streamed,
    );
    assert_eq!(stream.status, 200, "{}", stream.raw);
    let thought: String = (stream.frames.iter())
        .filter(|f| f["type"] == "response.reasoning_summary_text.delta")
        .filter_map(|f| f["delta"].as_str())
        .collect();
    assert_eq!(thought, "Let me think.");
    let completed = stream.frames.last().expect("frames");
    assert_eq!(completed["type"], "response.completed", "{}", stream.raw);
    let output = &completed["response"]["output"];
    assert_eq!(output[0]["type"], "reasoning", "{output}");
    assert_eq!(output[0]["encrypted_content"], "sig-abc", "{output}");
    // Hidden reasoning is an item of its own, its data marked as such.
    assert_eq!(
        output[1]["encrypted_content"], "redacted:opaque",
        "{output}"
    );
    assert_eq!(output[2]["content"][0]["text"], "Olá", "{output}");

    // The next turn sends the thinking back with its signature.
    let id = answer["id"].as_str().expect("an id");
    respond(
        &gw,
        &json!({"model": "claude/claude-sonnet-4-5", "previous_response_id": id,
            "input": "And tomorrow?", "max_output_tokens": 4096,
            "reasoning": {"effort": "high"}}),
    );
    let sent = upstream.requests()[2].json();
    assert_eq!(
        sent["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"}),
        "{sent}"
    );
    assert_eq!(sent["messages"][2]["role"], "user", "{sent}");
}

#[test]
fn an_image_and_a_pdf_reach_a_gemini_route_in_its_format() {
    let gemini = GeminiUpstream::script(vec![Reply::recorded(
        Recording::load("Google__gemini-2.5-flash__simple").interaction(0),
    )]);
    let gw = Gateway::builder()
        .route(Route::new("ge", "gemini").base_url(&gemini.base_url("/v1beta")))
        .start();
    let answer = respond(
        &gw,
        &json!({"model": "ge/gemini-2.5-flash", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,aGkh"},
            {"type": "input_file", "filename": "a.pdf",
                "file_data": "data:application/pdf;base64,JVBERg=="}]}]}),
    );
    assert_eq!(answer["status"], "completed");
    let sent = gemini.single_request().json();
    let parts = &sent["contents"][0]["parts"];
    assert_eq!(parts[0], json!({"text": "What is this?"}), "{sent}");
    assert_eq!(
        parts[1],
        json!({"inlineData": {"mimeType": "image/png", "data": "aGkh"}}),
        "{sent}"
    );
    assert_eq!(
        parts[2]["inlineData"]["mimeType"], "application/pdf",
        "{sent}"
    );
}

#[test]
fn what_the_gateway_does_not_do_is_refused_naming_it() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let base = json!({"model": "demo/echo", "input": "hi"});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let cases = [
        (
            with("tools", json!([{"type": "web_search_preview"}])),
            "tools[0].type",
            "web_search_preview",
        ),
        (
            with(
                "tools",
                json!([{"type": "file_search", "vector_store_ids": ["vs"]}]),
            ),
            "tools[0].type",
            "file_search",
        ),
        (
            with("tools", json!([{"type": "code_interpreter"}])),
            "tools[0].type",
            "code_interpreter",
        ),
        (
            with("tool_choice", json!({"type": "web_search_preview"})),
            "tool_choice.type",
            "web_search_preview",
        ),
        (with("background", json!(true)), "background", "background"),
        (
            with("conversation", json!("conv_1")),
            "conversation",
            "conversation",
        ),
        (
            with("input", json!([{"type": "item_reference", "id": "msg_1"}])),
            "input[0].type",
            "item_reference",
        ),
        (
            with(
                "input",
                json!([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]),
            ),
            "input[0].content[0].image_url",
            "file_id",
        ),
        (
            with("reasoning", json!({"effort": "huge"})),
            "reasoning.effort",
            "huge",
        ),
        (
            with(
                "text",
                json!({"format": {"type": "json_schema", "schema": {}}}),
            ),
            "text.format.name",
            "name",
        ),
        (
            with("max_output_tokens", json!(0)),
            "max_output_tokens",
            "positive",
        ),
    ];
    for (body, param, needle) in cases {
        let response = respond_as(&gw, &gw.key, &body);
        assert_eq!(refused_param(&response), param, "{body}");
        assert!(
            response.text().contains(needle),
            "{body}: {}",
            response.text()
        );
    }
    let missing = respond_as(&gw, &gw.key, &json!({"model": "demo/echo"}));
    assert_eq!(refused_param(&missing), "input");
    // `background: false` and the fields that need nothing of the gateway are fine.
    respond(&gw, &with("background", json!(false)));
    respond(
        &gw,
        &json!({"model": "demo/echo", "input": "hi", "include": ["reasoning.encrypted_content"],
            "truncation": "auto", "parallel_tool_calls": false}),
    );
}

#[test]
fn a_response_kept_by_one_replica_is_continued_on_another() {
    let Some(db) = TestDatabase::create() else {
        return;
    };
    let upstream = OpenAiUpstream::script(vec![
        Reply::openai_answer("gpt-4o-mini", "Olá!", json!({})),
        Reply::openai_answer("gpt-4o-mini", "Tchau!", json!({})),
    ]);
    let replica = || {
        Gateway::builder()
            .route(Route::openai("gpt", &upstream.base_url("/v1")))
            .database(&db)
            .start()
    };
    let (a, b) = (replica(), replica());
    let key = a
        .cli(&["key", "create", &a.project_id])
        .checked("key create")
        .last_line();
    let first = ok(&respond_as(
        &a,
        &key,
        &json!({"model": "gpt/gpt-4o-mini", "input": "Say hi"}),
    ));
    let id = first["id"].as_str().expect("an id");
    assert_eq!(ok(&kept(&b, &key, id)), first);
    ok(&respond_as(
        &b,
        &key,
        &json!({"model": "gpt/gpt-4o-mini", "input": "Say bye", "previous_response_id": id}),
    ));
    let sent = upstream.requests()[1].json();
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "Say hi"},
            {"role": "assistant", "content": "Olá!"},
            {"role": "user", "content": "Say bye"}]),
        "{sent}"
    );
}

#[test]
fn a_conversation_over_max_conversation_bytes_is_refused_and_a_kept_one_counts_in_flight() {
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_answer("gpt-4o-mini", "Noted.", json!({})));
    // A conversation of ~1.5 MB is kept, then continued with a turn of 0.6 MB: a cap of 1 MiB
    // refuses that; a gateway with room for 2 MB of bodies in flight refuses it for now (503:
    // the kept conversation counts, which it did not before); one with the default room serves
    // it.
    let start = |lines: &[&str]| {
        let mut builder = Gateway::builder().route(Route::openai("gpt", &upstream.base_url("/v1")));
        for line in lines {
            builder = builder.config_line(line);
        }
        builder.start()
    };
    let long = "x".repeat(1_500_000);
    for (lines, expected) in [
        (vec!["max_conversation_bytes = 1048576"], 400),
        (vec!["max_inflight_body_bytes = 2000000"], 503),
        (vec![], 200),
    ] {
        let gw = start(&lines);
        let first = respond(&gw, &json!({"model": "gpt/gpt-4o-mini", "input": long}));
        let next = json!({"model": "gpt/gpt-4o-mini", "previous_response_id": first["id"],
            "input": "y".repeat(600_000)});
        let response = respond_as(&gw, &gw.key, &next);
        assert_eq!(response.status, expected, "{lines:?}: {}", response.text());
        if expected == 400 {
            assert_eq!(refused_param(&response), "previous_response_id");
            let message = response.json()["error"]["message"].to_string();
            assert!(message.contains("max_conversation_bytes"), "{message}");
        }
    }
}

#[test]
fn each_turn_keeps_its_own_items_once_and_a_deleted_turn_is_named_when_continued() {
    let upstream =
        OpenAiUpstream::each_call(Reply::openai_answer("gpt-4o-mini", "Noted.", json!({})));
    let gw = Gateway::builder()
        .route(Route::openai("gpt", &upstream.base_url("/v1")))
        .start();
    // A 200 KB first turn, continued ten times with a few bytes each: kept whole at each
    // turn (as before), the database would hold 2.2 MB of conversations; each turn apart,
    // the first one's 200 KB once.
    let long = "x".repeat(200_000);
    let mut ids = vec![
        respond(&gw, &json!({"model": "gpt/gpt-4o-mini", "input": long}))["id"]
            .as_str()
            .expect("an id")
            .to_owned(),
    ];
    for turn in 1..=10 {
        let next = respond(
            &gw,
            &json!({"model": "gpt/gpt-4o-mini", "previous_response_id": ids.last(),
                "input": format!("turn {turn}")}),
        );
        assert_eq!(next["previous_response_id"], json!(ids.last()));
        ids.push(next["id"].as_str().expect("an id").to_owned());
    }
    let kept_bytes = gw.number("SELECT CAST(sum(length(context)) AS BIGINT) FROM responses");
    assert!(
        (200_000..300_000).contains(&kept_bytes),
        "the kept turns hold {kept_bytes} bytes"
    );
    // The last call had the whole conversation: 11 user turns, 10 answers between them.
    let sent = upstream.requests().last().expect("calls").json();
    let messages = sent["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 21, "{:?}", &messages[1..]);
    assert_eq!(messages[0]["content"], long.as_str());
    assert_eq!(messages[19]["content"], "Noted.");
    assert_eq!(messages[20]["content"], "turn 10");

    // A turn deleted: those after it are still read back, but their conversation cannot be
    // continued (a 400 naming the deleted one); those before it continue as ever.
    let deleted = &ids[5];
    let response = request(
        &gw,
        "DELETE",
        &format!("/v1/responses/{deleted}"),
        &gw.key,
        None,
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let later = ok(&kept(&gw, &gw.key, &ids[8]));
    assert_eq!(later["id"], ids[8].as_str());
    let refused = respond_as(
        &gw,
        &gw.key,
        &json!({"model": "gpt/gpt-4o-mini", "previous_response_id": ids[8], "input": "more"}),
    );
    assert_eq!(refused_param(&refused), "previous_response_id");
    let message = refused.json()["error"]["message"].to_string();
    assert!(
        message.contains(deleted.as_str()) && message.contains("deleted"),
        "{message}"
    );
    let calls = upstream.requests().len();
    respond(
        &gw,
        &json!({"model": "gpt/gpt-4o-mini", "previous_response_id": ids[4], "input": "more"}),
    );
    assert_eq!(upstream.requests().len(), calls + 1);
    let sent = upstream.requests().last().expect("calls").json();
    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(11));
}
