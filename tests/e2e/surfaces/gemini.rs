//! Gemini's own API (`/v1beta/models/{model}:generateContent` and its siblings, `/v1/` too)
//! served by any route: what each provider receives of a Gemini request (the parameters under
//! its own names, Gemini-only fields only to Gemini), the key read from `x-goog-api-key` or
//! `?key=` and kept out of the log, and errors in Google's shape with their invocation id and
//! record. The official `google-genai` SDK runs against the same endpoints in `clients`.

use gateway_test_support::{Gateway, GeminiUpstream, OpenAiUpstream, Reply, Response, Route};
use serde_json::{Value, json};

/// The caller's provider key (`Provider-API-Key`), as the routes have none of their own.
const PROVIDER_KEY: &str = "sk-caller-0123456789";

fn gateway() -> (OpenAiUpstream, GeminiUpstream, Gateway) {
    let usage = json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15});
    let openai = OpenAiUpstream::each_call(Reply::openai_answer("gpt-4o-mini", "Olá!", usage));
    let gemini =
        GeminiUpstream::replay(&gateway_test_support::upstream::gemini::recording("simple"));
    let gw = Gateway::builder()
        .route(Route::openai("oai", &openai.base_url("/v1")))
        .route(Route::new("gem", "gemini").base_url(&gemini.base_url("/v1beta")))
        .start();
    (openai, gemini, gw)
}

/// POSTs `body` to a model's method with the key in `x-goog-api-key`.
fn call(gw: &Gateway, path: &str, body: &Value) -> Response {
    gw.request(
        "POST",
        path,
        None,
        &[
            ("x-goog-api-key", &gw.key),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        body.to_string().as_bytes(),
    )
}

fn invocation(response: &Response) -> String {
    (response.header("x-invocation-id"))
        .unwrap_or_else(|| panic!("no invocation id: {:?}", response.headers))
        .to_owned()
}

/// A Gemini request with most of what a client sets.
fn full_request() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": "Answer in Portuguese."}]},
        "contents": [{"role": "user", "parts": [{"text": "Say hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "greet", "description": "Greets",
            "parameters": {"type": "OBJECT", "properties": {"name": {"type": "STRING"}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 64,
            "stopSequences": ["END"], "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"}},
    })
}

#[test]
fn an_openai_route_gets_a_gemini_request_in_openai_terms() {
    let (openai, _, gw) = gateway();
    let response = call(
        &gw,
        "/v1beta/models/oai/gpt-4o-mini:generateContent",
        &full_request(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(
        answer["candidates"][0]["content"],
        json!({"role": "model", "parts": [{"text": "Olá!"}]})
    );
    assert_eq!(answer["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        answer["usageMetadata"],
        json!({"promptTokenCount": 12, "candidatesTokenCount": 3, "totalTokenCount": 15})
    );
    assert_eq!(answer["responseId"], json!(invocation(&response)));

    let sent = openai.single_request().json();
    assert_eq!(sent["model"], "gpt-4o-mini");
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Answer in Portuguese."},
            {"role": "user", "content": "Say hi"}])
    );
    assert_eq!(sent["temperature"], 0.3);
    assert_eq!(sent["max_tokens"], 64);
    assert_eq!(sent["stop"], json!(["END"]));
    assert_eq!(sent["tool_choice"], "auto");
    assert_eq!(
        sent["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {"name": {"type": "string"}}})
    );
    assert_eq!(sent["response_format"]["type"], "json_schema");
    // Gemini's own safety settings mean nothing to OpenAI: they are not sent.
    assert!(sent.get("safetySettings").is_none(), "{sent}");

    let record = gw.record(&invocation(&response));
    assert_eq!(record["type"], "chat", "{record}");
    assert_eq!(record["route"], "oai", "{record}");
    assert_eq!(record["status"], "success", "{record}");
}

#[test]
fn a_gemini_route_gets_the_request_with_its_gemini_only_fields() {
    let (_, gemini, gw) = gateway();
    let response = call(
        &gw,
        "/v1/models/gem/gemini-2.5-flash:generateContent",
        &full_request(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    let sent = gemini.single_request();
    assert!(
        sent.path
            .ends_with("/models/gemini-2.5-flash:generateContent"),
        "{}",
        sent.path
    );
    let sent = sent.json();
    assert_eq!(sent["safetySettings"][0]["threshold"], "BLOCK_NONE");
    assert_eq!(sent["generationConfig"]["maxOutputTokens"], 64);
    assert_eq!(sent["generationConfig"]["stopSequences"], json!(["END"]));
    assert_eq!(
        sent["systemInstruction"]["parts"][0]["text"],
        "Answer in Portuguese."
    );
}

#[test]
fn the_key_in_the_query_works_and_stays_out_of_the_log() {
    let (_openai, _gemini, gw) = gateway();
    let body = json!({"contents": [{"parts": [{"text": "hi"}]}]});
    let path = format!(
        "/v1beta/models/oai/gpt-4o-mini:streamGenerateContent?alt=sse&key={}",
        gw.key
    );
    let provider = [("Provider-API-Key", PROVIDER_KEY)];
    let response = gw.request("POST", &path, None, &provider, body.to_string().as_bytes());
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.header("content-type"),
        Some("text/event-stream"),
        "{:?}",
        response.headers
    );
    let text = response.text();
    let chunks: Vec<Value> = (text.split("\r\n\r\n"))
        .filter_map(|event| event.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("a JSON chunk"))
        .collect();
    let said: String = (chunks.iter())
        .filter_map(|chunk| chunk["candidates"][0]["content"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(said, "Olá!");
    let last = chunks.last().expect("chunks");
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["totalTokenCount"], 15);

    let wrong = "/v1beta/models/oai/gpt-4o-mini:generateContent?key=gw_not_a_key";
    let refused = gw.request("POST", wrong, None, &provider, body.to_string().as_bytes());
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert_eq!(refused.json()["error"]["status"], "UNAUTHENTICATED");
    let logs = gw.logs();
    assert!(!logs.contains(&gw.key), "the key is in the log");
    assert!(!logs.contains("gw_not_a_key"), "the key is in the log");
}

#[test]
fn errors_are_in_google_shape_with_their_invocation_and_record() {
    let (openai, _, gw) = gateway();
    let path = "/v1beta/models/oai/gpt-4o-mini:generateContent";
    let refused = [
        (json!({"contents": []}), 400, "contents"),
        (
            json!({"contents": [{"role": "user", "parts": [{"executableCode": {}}]}]}),
            400,
            "contents[0].parts[0]",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "tools": [{"codeExecution": {}}]}),
            400,
            "tools[0].codeExecution",
        ),
    ];
    for (body, status, named) in refused {
        let response = call(&gw, path, &body);
        assert_eq!(response.status, status, "{}", response.text());
        let error = &response.json()["error"];
        assert_eq!(error["code"], status);
        assert_eq!(error["status"], "INVALID_ARGUMENT");
        assert!(
            error["message"].as_str().unwrap().contains(named),
            "{error}"
        );
        let id = invocation(&response);
        assert_eq!(error["details"][0]["requestId"], json!(id));
        let record = gw.record(&id);
        assert_eq!(record["status"], "error", "{record}");
        assert_eq!(record["httpStatus"], status, "{record}");
    }
    let unknown = call(
        &gw,
        "/v1beta/models/nowhere/m:generateContent",
        &json!({"contents": [{"parts": [{"text": "x"}]}]}),
    );
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    assert_eq!(unknown.json()["error"]["status"], "NOT_FOUND");
    let get = gw.request("GET", path, None, &[("x-goog-api-key", &gw.key)], b"");
    assert_eq!(get.status, 405, "{}", get.text());
    assert_eq!(get.json()["error"]["status"], "INVALID_ARGUMENT");
    let method = call(&gw, "/v1beta/models/oai/gpt-4o-mini:predict", &json!({}));
    assert_eq!(method.status, 404, "{}", method.text());
    assert!(
        openai.requests().is_empty(),
        "a refused request went upstream"
    );
}

#[test]
fn a_key_scoped_to_another_route_is_refused() {
    let (openai, _, gw) = gateway();
    let args = ["key", "create", gw.project_id.as_str(), "--routes", "gem"];
    let scoped = gw.cli(&args).checked(&args.join(" ")).last_line();
    let response = gw.request(
        "POST",
        "/v1beta/models/oai/gpt-4o-mini:generateContent",
        None,
        &[
            ("x-goog-api-key", &scoped),
            ("Provider-API-Key", PROVIDER_KEY),
        ],
        json!({"contents": [{"parts": [{"text": "x"}]}]})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(response.status, 403, "{}", response.text());
    assert_eq!(response.json()["error"]["status"], "PERMISSION_DENIED");
    assert!(openai.requests().is_empty());
}

#[test]
fn embeddings_and_counts_on_an_openai_route() {
    let openai = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("oai", &openai.base_url("/v1")))
        .start();
    let model = "oai/text-embedding-3-small";
    let batch = call(
        &gw,
        &format!("/v1beta/models/{model}:batchEmbedContents"),
        &json!({"requests": [
            {"model": format!("models/{model}"), "content": {"parts": [{"text": "one"}]},
                "outputDimensionality": 4},
            {"model": format!("models/{model}"), "content": {"parts": [{"text": "two two"}]},
                "outputDimensionality": 4}]}),
    );
    assert_eq!(batch.status, 200, "{}", batch.text());
    let embeddings = batch.json()["embeddings"].clone();
    assert_eq!(embeddings.as_array().map(Vec::len), Some(2), "{embeddings}");
    let sent = openai.single_request().json();
    assert_eq!(sent["input"], json!(["one", "two two"]));
    assert_eq!(sent["dimensions"], 4);

    let count = call(
        &gw,
        "/v1beta/models/oai/gpt-4o-mini:countTokens",
        &json!({"contents": [{"role": "user", "parts": [{"text": "Hello!"}]}]}),
    );
    assert_eq!(count.status, 200, "{}", count.text());
    // "user" 1 and "Hello!" 2 in o200k_base, 3 framing the message and 3 priming the answer.
    assert_eq!(count.json(), json!({"totalTokens": 9}));
    let record = gw.record(&invocation(&count));
    assert_eq!(record["type"], "count_tokens", "{record}");
}
