//! The Commonbase API (`/completions`, `/embeddings`), end to end with the offline plugins: the
//! echo example (route `demo`) answers text, chats, streams and function calls; `{{variables}}`
//! are substituted; invalid requests are 400 (413 over the size limit, 404 for an unknown route)
//! and recorded.
//!
//! Every test starts its own gateway (temporary directory, SQLite file, port), so tests are
//! independent and run in parallel.

use std::panic::AssertUnwindSafe;

use gateway_test_support::{
    Gateway, Route, assert_error, assert_ok, chat_request, embeddings_request, split_stream,
    streamed_text, text_request, with, with_param,
};
use serde_json::{Value, json};

use crate::common::{assert_error_record, check_error_record, hello};

// ---------------------------------------------------------------- echo: plain

#[test]
fn text_completion_echoes_the_prompt() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    assert_eq!(body["projectId"], json!(gw.project_id));
    assert_eq!(body["type"], json!("text"));
    assert_eq!(body["model"], json!("echo"));
    let choices = body["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 1, "{body}");
    assert_eq!(choices[0]["text"], json!("Hello"));
    assert_eq!(choices[0]["index"], json!(0));
    assert_eq!(choices[0]["finish_reason"], json!("stop"));
}

#[test]
fn chat_completion_answers_the_last_user_message_as_assistant() {
    let gw = Gateway::demo();
    let request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second question"}
        ]),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["type"], json!("chat"));
    assert_eq!(body["choices"][0]["text"], json!("second question"));
    assert_eq!(body["choices"][0]["role"], json!("assistant"));
}

#[test]
fn chat_ignores_prompt_and_text_ignores_messages() {
    let gw = Gateway::demo();
    let chat = with(
        chat_request(
            &gw.project_id,
            "demo",
            "echo",
            json!([{"role": "user", "content": "from messages"}]),
        ),
        "prompt",
        json!("from prompt"),
    );
    let body = assert_ok(&gw.post("/completions", &chat));
    assert_eq!(body["choices"][0]["text"], json!("from messages"));

    let text = with(
        text_request(&gw.project_id, "demo", "echo", "from prompt"),
        "messages",
        json!([{"role": "user", "content": "from messages"}]),
    );
    let body = assert_ok(&gw.post("/completions", &text));
    assert_eq!(body["choices"][0]["text"], json!("from prompt"));
}

#[test]
fn default_model_is_used_when_params_have_no_model() {
    let gw = Gateway::demo();
    let request = json!({
        "projectId": gw.project_id,
        "prompt": "no model given",
        "providerConfig": {"provider": "demo", "params": {"type": "text"}}
    });
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["model"], json!("echo"));
    let record = gw.get_invocation(body["invocationId"].as_str().unwrap_or_default());
    assert_eq!(record.json()["model"], json!("echo"));
}

#[test]
fn unknown_top_level_fields_are_ignored() {
    let gw = Gateway::demo();
    let request = with(hello(&gw), "somethingNew", json!({"nested": [1, 2, 3]}));
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("Hello"));
}

#[test]
fn usage_is_absent_without_show_usage() {
    let gw = Gateway::demo();
    let body = assert_ok(&gw.post("/completions", &hello(&gw)));
    assert!(
        body.get("usage").is_none(),
        "usage without showUsage: {body}"
    );
    assert!(
        body.get("usage_cost").is_none(),
        "usage_cost without showUsage: {body}"
    );
}

#[test]
fn show_usage_reports_tokens_and_cost_from_the_route_price() {
    let (input_price, output_price) = (1.25, 3.5);
    let gw = Gateway::builder()
        .route(Route::echo("demo").price("echo", input_price, output_price))
        .start();
    let request = with(
        text_request(&gw.project_id, "demo", "echo", "one two three"),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}),
        "{body}"
    );
    let cost = body["usage_cost"]
        .as_f64()
        .unwrap_or_else(|| panic!("usage_cost is not a number: {body}"));
    let expected = 3.0 * input_price / 1e6 + 3.0 * output_price / 1e6;
    assert!(
        (cost - expected).abs() < 1e-12,
        "usage_cost {cost} != {expected}"
    );
}

#[test]
fn show_usage_in_chat_counts_every_message() {
    let gw = Gateway::builder()
        .route(Route::echo("demo").price("echo", 2.0, 4.0))
        .start();
    let request = with(
        chat_request(
            &gw.project_id,
            "demo",
            "echo",
            json!([
                {"role": "system", "content": "be nice"},
                {"role": "user", "content": "hello there friend"}
            ]),
        ),
        "showUsage",
        json!(true),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}),
        "{body}"
    );
    let cost = body["usage_cost"].as_f64().expect("usage_cost");
    assert!((cost - (5.0 * 2.0 / 1e6 + 3.0 * 4.0 / 1e6)).abs() < 1e-12);
}

// ---------------------------------------------------------------- echo: streaming

#[test]
fn streaming_sends_one_frame_per_word_then_a_final_frame() {
    let gw = Gateway::demo();
    let request = with(
        text_request(&gw.project_id, "demo", "echo", "Hello brave new world"),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &request);
    let (partial, last) = split_stream(&response);
    let deltas: Vec<String> = partial
        .iter()
        .map(|f| {
            f["choices"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(deltas, ["Hello ", "brave ", "new ", "world"]);
    for frame in &partial {
        assert_eq!(frame["projectId"], json!(gw.project_id));
        assert_eq!(frame["type"], json!("text"));
    }
    assert_eq!(last["choices"][0]["text"], json!(""), "{last}");
    assert_eq!(last["choices"][0]["finish_reason"], json!("stop"), "{last}");
    assert!(
        last.get("usage").is_none(),
        "usage without showUsage: {last}"
    );
}

#[test]
fn streamed_chat_text_concatenates_to_the_answer() {
    let gw = Gateway::demo();
    let request = with(
        chat_request(
            &gw.project_id,
            "demo",
            "echo",
            json!([{"role": "user", "content": "stream  me\tplease"}]),
        ),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &request);
    let (partial, last) = split_stream(&response);
    assert_eq!(streamed_text(&partial, 0), "stream  me\tplease");
    assert_eq!(last["type"], json!("chat"));
    assert_eq!(last["choices"][0]["finish_reason"], json!("stop"));
}

#[test]
fn streaming_with_show_usage_puts_usage_and_cost_in_the_last_frame() {
    let gw = Gateway::builder()
        .route(Route::echo("demo").price("echo", 0.5, 1.5))
        .start();
    let request = with(
        with(
            text_request(&gw.project_id, "demo", "echo", "a b c d"),
            "stream",
            json!(true),
        ),
        "showUsage",
        json!(true),
    );
    let response = gw.post_stream("/completions", &request);
    let (_, last) = split_stream(&response);
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}),
        "{last}"
    );
    let cost = last["usage_cost"].as_f64().expect("usage_cost");
    assert!((cost - (4.0 * 0.5 / 1e6 + 4.0 * 1.5 / 1e6)).abs() < 1e-12);
}

#[test]
fn streamed_invocation_is_recorded() {
    let gw = Gateway::demo();
    let request = with(
        text_request(&gw.project_id, "demo", "echo", "record this stream"),
        "stream",
        json!(true),
    );
    let response = gw.post_stream("/completions", &request);
    let (_, last) = split_stream(&response);
    let id = last["invocationId"].as_str().expect("invocationId");
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["stream"], json!(true), "{record}");
    assert_eq!(record["httpStatus"], json!(200), "{record}");
    let usage = &record["usage"];
    assert_eq!(usage["prompt_tokens"], json!(3), "{record}");
    assert_eq!(usage["completion_tokens"], json!(3), "{record}");
}

// ---------------------------------------------------------------- functions

fn lookup_function() -> Value {
    json!({
        "name": "lookup",
        "description": "Looks something up",
        "parameters": {"type": "object", "properties": {"input": {"type": "string"}}}
    })
}

#[test]
fn named_function_call_is_returned_as_function_call() {
    let gw = Gateway::demo();
    let mut request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([{"role": "user", "content": "find cats"}]),
    );
    request["functions"] = json!([lookup_function()]);
    request["functionCall"] = json!({"name": "lookup"});
    let body = assert_ok(&gw.post("/completions", &request));
    let choice = &body["choices"][0];
    assert_eq!(choice["function_call"]["name"], json!("lookup"), "{body}");
    assert_eq!(
        choice["function_call"]["arguments"],
        json!("{\"input\":\"find cats\"}")
    );
    assert_eq!(choice["finish_reason"], json!("function_call"));
}

#[test]
fn auto_function_call_picks_the_first_function() {
    let gw = Gateway::demo();
    let mut request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([{"role": "user", "content": "call the helpers"}]),
    );
    request["functions"] = json!([lookup_function(), {"name": "second"}]);
    request["functionCall"] = json!("auto");
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(
        body["choices"][0]["function_call"]["name"],
        json!("lookup"),
        "{body}"
    );
}

#[test]
fn function_call_none_answers_text() {
    let gw = Gateway::demo();
    let mut request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([{"role": "user", "content": "call nothing"}]),
    );
    request["functions"] = json!([lookup_function()]);
    request["functionCall"] = json!("none");
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("call nothing"), "{body}");
    assert!(
        body["choices"][0]["function_call"].is_null(),
        "no function call expected: {body}"
    );
}

#[test]
fn openai_tools_and_tool_choice_shape_is_accepted() {
    let gw = Gateway::demo();
    let mut request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([{"role": "user", "content": "find dogs"}]),
    );
    request["tools"] = json!([{"type": "function", "function": lookup_function()}]);
    request["toolChoice"] = json!({"type": "function", "function": {"name": "lookup"}});
    let body = assert_ok(&gw.post("/completions", &request));
    let choice = &body["choices"][0];
    assert_eq!(choice["function_call"]["name"], json!("lookup"), "{body}");
    assert_eq!(
        choice["function_call"]["arguments"],
        json!("{\"input\":\"find dogs\"}")
    );
}

#[test]
fn function_role_messages_are_accepted() {
    let gw = Gateway::demo();
    let request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([
            {"role": "user", "content": "find cats"},
            {"role": "assistant", "content": null,
             "function_call": {"name": "lookup", "arguments": "{\"input\":\"cats\"}"}},
            {"role": "function", "name": "lookup", "content": "3 cats"},
            {"role": "user", "content": "thanks"}
        ]),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("thanks"));
}

#[test]
fn streamed_function_call_is_in_the_last_frame() {
    let gw = Gateway::demo();
    let mut request = chat_request(
        &gw.project_id,
        "demo",
        "echo",
        json!([{"role": "user", "content": "find owls"}]),
    );
    request["functions"] = json!([lookup_function()]);
    request["functionCall"] = json!({"name": "lookup"});
    request["stream"] = json!(true);
    let response = gw.post_stream("/completions", &request);
    let (_, last) = split_stream(&response);
    let choice = &last["choices"][0];
    assert_eq!(choice["function_call"]["name"], json!("lookup"), "{last}");
    assert_eq!(
        choice["function_call"]["arguments"],
        json!("{\"input\":\"find owls\"}")
    );
    assert_eq!(choice["finish_reason"], json!("function_call"));
}

// ---------------------------------------------------------------- variables

#[test]
fn variables_are_substituted_in_the_prompt() {
    let gw = Gateway::demo();
    let request = with(
        text_request(
            &gw.project_id,
            "demo",
            "echo",
            "Hello {{name}}, welcome to {{city}}. Bye {{name}}!",
        ),
        "variables",
        json!({"name": "Ada", "city": "Florence", "unused": "x"}),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(
        body["choices"][0]["text"],
        json!("Hello Ada, welcome to Florence. Bye Ada!")
    );
}

#[test]
fn variables_are_substituted_in_message_contents() {
    let gw = Gateway::demo();
    let request = with(
        chat_request(
            &gw.project_id,
            "demo",
            "echo",
            json!([
                {"role": "system", "content": "You speak {{lang}}."},
                {"role": "user", "content": "Weather in {{city}}?"}
            ]),
        ),
        "variables",
        json!({"lang": "Italian", "city": "Rome"}),
    );
    let body = assert_ok(&gw.post("/completions", &request));
    assert_eq!(body["choices"][0]["text"], json!("Weather in Rome?"));
}

// ---------------------------------------------------------------- validation

/// A request the gateway must refuse with a 400 and record: what the case is (named when it
/// fails), its body for a gateway, and what the error message must mention.
type Invalid = (&'static str, fn(&Gateway) -> Value, &'static str);

/// A request without `field`.
fn without(mut body: Value, field: &str) -> Value {
    body.as_object_mut().expect("object").remove(field);
    body
}

/// A chat request with `messages`.
fn chat(gw: &Gateway, messages: Value) -> Value {
    chat_request(&gw.project_id, "demo", "echo", messages)
}

/// An embeddings request for `input`.
fn embed(gw: &Gateway, input: Value) -> Value {
    embeddings_request(&gw.project_id, "demo", "echo", input)
}

#[rustfmt::skip]
const INVALID_COMPLETIONS: &[Invalid] = &[
    // Variables.
    ("placeholder without a variable", |gw| {
        let prompt = "Hello {{name}} from {{city}}";
        let request = text_request(&gw.project_id, "demo", "echo", prompt);
        with(request, "variables", json!({"name": "Ada"}))
    }, "city"),
    ("placeholder without any variables", |gw| {
        let request = chat(gw, json!([{"role": "user", "content": "Hi {{who}}"}]));
        with(request, "variables", json!({}))
    }, "who"),
    ("variables of the wrong type",
        |gw| with(hello(gw), "variables", json!({"name": 5})), "variables"),
    // The request's fields.
    ("missing projectId", |gw| without(hello(gw), "projectId"), "projectId"),
    ("empty projectId", |gw| with(hello(gw), "projectId", json!("")), "projectId"),
    ("projectId of the wrong type", |gw| with(hello(gw), "projectId", json!(42)), "projectId"),
    ("userId of the wrong type", |gw| with(hello(gw), "userId", json!(["u"])), "userId"),
    ("userId over 256 bytes", |gw| with(hello(gw), "userId", json!("u".repeat(257))), "userId"),
    ("prompt of the wrong type", |gw| with(hello(gw), "prompt", json!(7)), "prompt"),
    ("messages of the wrong type", |gw| chat(gw, json!("hello")), "messages"),
    ("message content of the wrong type names the message", |gw| {
        chat(gw, json!([{"role": "user", "content": "ok"}, {"role": "user", "content": 12}]))
    }, "messages[1]"),
    ("stream of the wrong type", |gw| with(hello(gw), "stream", json!("yes")), "stream"),
    ("showUsage of the wrong type", |gw| with(hello(gw), "showUsage", json!(1)), "showUsage"),
    ("functions of the wrong type",
        |gw| with(hello(gw), "functions", json!({"name": "f"})), "functions"),
    ("provider of the wrong type", |gw| {
        let mut request = hello(gw);
        request["providerConfig"]["provider"] = json!(3);
        request
    }, "provider"),
    ("missing prompt for text", |gw| without(hello(gw), "prompt"), "prompt"),
    ("missing messages for chat", |gw| with_param(hello(gw), "type", json!("chat")), "messages"),
    ("unknown role names the message", |gw| {
        chat(gw, json!([
            {"role": "user", "content": "hi"},
            {"role": "wizard", "content": "abracadabra"}
        ]))
    }, "messages[1].role"),
    ("unknown type", |gw| with_param(hello(gw), "type", json!("image")), "type"),
    ("embeddings type", |gw| with_param(hello(gw), "type", json!("embeddings")), "type"),
];

#[rustfmt::skip]
const INVALID_EMBEDDINGS: &[Invalid] = &[
    ("without input", |gw| without(embed(gw, json!("x")), "input"), "input"),
    ("input a number", |gw| embed(gw, json!(5)), "input"),
    ("input an array of numbers", |gw| embed(gw, json!([1, 2])), "input"),
    ("input an object", |gw| embed(gw, json!({"text": "x"})), "input"),
    ("missing projectId", |gw| without(embed(gw, json!("x")), "projectId"), "projectId"),
    ("userId over 256 bytes",
        |gw| with(embed(gw, json!("x")), "userId", json!("u".repeat(257))), "userId"),
];

/// Posts every case of `cases` to `path` on one gateway and checks each answer is a 400 whose
/// error mentions what is wrong, recorded as that error. Every case runs; the failing ones are
/// named at the end.
fn check_invalid(path: &str, cases: &[Invalid]) {
    let gw = Gateway::demo();
    let failed: Vec<&str> = cases
        .iter()
        .filter(|(case, request, mentions)| {
            let checked = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let response = gw.post(path, &request(&gw));
                let id = assert_error(&response, 400, mentions);
                check_error_record(&gw.record(&id), &id, 400);
            }));
            if checked.is_err() {
                eprintln!("case failed: {case} (its panic is above)");
            }
            checked.is_err()
        })
        .map(|(case, ..)| *case)
        .collect();
    assert!(failed.is_empty(), "failing cases of {path}: {failed:?}");
}

#[test]
fn invalid_completion_requests_are_400_and_recorded() {
    check_invalid("/completions", INVALID_COMPLETIONS);
}

#[test]
fn invalid_embedding_requests_are_400_and_recorded() {
    check_invalid("/embeddings", INVALID_EMBEDDINGS);
}

#[test]
fn invalid_json_is_400_and_recorded_as_text() {
    let gw = Gateway::demo();
    let raw = "{\"projectId\": \"x\", \"prompt\": ";
    let response = gw.request(
        "POST",
        "/completions",
        Some(&gw.key),
        &[("Content-Type", "application/json")],
        raw.as_bytes(),
    );
    let id = assert_error(&response, 400, "");
    let record = gw.record(&id);
    check_error_record(&record, &id, 400);
    assert_eq!(record["request"], json!(raw), "{record}");
}

#[test]
fn non_object_body_is_400() {
    let gw = Gateway::demo();
    let response = gw.request(
        "POST",
        "/completions",
        Some(&gw.key),
        &[("Content-Type", "application/json")],
        b"[1, 2, 3]",
    );
    let id = assert_error(&response, 400, "JSON object");
    check_error_record(&gw.record(&id), &id, 400);
}

#[test]
fn empty_body_is_400() {
    let gw = Gateway::demo();
    let response = gw.request("POST", "/completions", Some(&gw.key), &[], b"");
    let id = assert_error(&response, 400, "empty");
    check_error_record(&gw.record(&id), &id, 400);
}

/// A request whose body cannot be read still came with a valid key: its
/// record belongs to the key's project, so the caller can look it up.
#[test]
fn invalid_body_record_is_readable_with_the_key() {
    let gw = Gateway::demo();
    let response = gw.request(
        "POST",
        "/completions",
        Some(&gw.key),
        &[("Content-Type", "application/json")],
        b"{broken",
    );
    let id = assert_error(&response, 400, "");
    let record = assert_error_record(&gw, &id, 400);
    assert_eq!(record["projectId"], json!(gw.project_id), "{record}");
}

#[test]
fn wrong_field_type_record_is_readable_with_the_key() {
    let gw = Gateway::demo();
    let response = gw.post("/completions", &with(hello(&gw), "prompt", json!(7)));
    let id = assert_error(&response, 400, "prompt");
    let record = assert_error_record(&gw, &id, 400);
    assert_eq!(record["projectId"], json!(gw.project_id), "{record}");
}

#[test]
fn missing_project_id_record_is_readable_with_the_key() {
    let gw = Gateway::demo();
    let mut request = hello(&gw);
    request.as_object_mut().expect("object").remove("projectId");
    let id = assert_error(&gw.post("/completions", &request), 400, "projectId");
    let record = assert_error_record(&gw, &id, 400);
    assert_eq!(record["projectId"], json!(gw.project_id), "{record}");
}

#[test]
fn body_over_the_limit_is_413_and_recorded() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .max_body_bytes(1024)
        .start();
    let request = text_request(&gw.project_id, "demo", "echo", &"x".repeat(2000));
    let response = gw.post("/completions", &request);
    let id = assert_error(&response, 413, "");
    check_error_record(&gw.record(&id), &id, 413);

    // Just under the limit still works.
    let small = text_request(&gw.project_id, "demo", "echo", &"y".repeat(500));
    assert_ok(&gw.post("/completions", &small));
}

#[test]
fn body_size_is_checked_before_auth() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .max_body_bytes(1024)
        .start();
    let request = text_request(&gw.project_id, "demo", "echo", &"x".repeat(2000));
    let response = gw.post_as("/completions", None, &request);
    assert_error(&response, 413, "");
}

#[test]
fn unknown_route_is_404_and_recorded() {
    let gw = Gateway::demo();
    let request = text_request(&gw.project_id, "no-such-route", "echo", "Hello");
    let response = gw.post("/completions", &request);
    let id = assert_error(&response, 404, "no-such-route");
    assert_error_record(&gw, &id, 404);
}

// ---------------------------------------------------------------- embeddings

fn embedding_of(item: &Value) -> Vec<f64> {
    item["embedding"]
        .as_array()
        .unwrap_or_else(|| panic!("no embedding: {item}"))
        .iter()
        .map(|v| v.as_f64().expect("number"))
        .collect()
}

#[test]
fn echo_embeddings_of_a_string() {
    let gw = Gateway::demo();
    let request = embeddings_request(&gw.project_id, "demo", "echo", json!("hello world"));
    let body = assert_ok(&gw.post("/embeddings", &request));
    assert_eq!(body["type"], json!("embeddings"));
    assert_eq!(body["projectId"], json!(gw.project_id));
    let data = body["data"].as_array().expect("data");
    assert_eq!(data.len(), 1, "{body}");
    assert_eq!(data[0]["object"], json!("embedding"));
    assert_eq!(data[0]["index"], json!(0));
    let vector = embedding_of(&data[0]);
    assert_eq!(vector.len(), 8);
    let norm: f64 = vector.iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "not a unit vector: {vector:?}");
}

#[test]
fn echo_embeddings_of_an_array_are_in_input_order() {
    let gw = Gateway::demo();
    let inputs = ["alpha", "beta", "gamma"];
    let request = embeddings_request(&gw.project_id, "demo", "echo", json!(inputs));
    let body = assert_ok(&gw.post("/embeddings", &request));
    let data = body["data"].as_array().expect("data");
    assert_eq!(data.len(), 3, "{body}");
    for (i, item) in data.iter().enumerate() {
        assert_eq!(item["index"], json!(i));
    }
    // Deterministic per input: each one alone gives the same vector.
    for (i, input) in inputs.iter().enumerate() {
        let single = embeddings_request(&gw.project_id, "demo", "echo", json!(input));
        let alone = assert_ok(&gw.post("/embeddings", &single));
        assert_eq!(embedding_of(&alone["data"][0]), embedding_of(&data[i]));
    }
    assert_ne!(embedding_of(&data[0]), embedding_of(&data[1]));
    let id = body["invocationId"].as_str().expect("id");
    let record = gw.get_invocation(id).json();
    assert_eq!(record["type"], json!("embeddings"), "{record}");
    assert_eq!(record["status"], json!("success"), "{record}");
}
