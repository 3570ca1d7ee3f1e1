//! The official OpenAI, Anthropic and Google GenAI Python SDKs, unchanged, against the real
//! gateway: this runner starts fake upstreams replaying recorded OpenAI, Anthropic and Gemini
//! traffic, one route per recorded case, and a gateway serving them; then it runs the pytest
//! suite in `tests/clients/` with the interpreter named by `GATEWAY_CLIENTS_PYTHON` (the
//! virtual environment `cargo xtask test` creates) and fails with pytest's output unless every
//! test passed.
//!
//! The suite learns where the gateway is and what each route answers from
//! `GATEWAY_CLIENTS_SCENARIO`, a JSON text this runner writes: the expected answers are read
//! from the same recordings the upstreams replay, so the Python side holds no copy of them.

use gateway_test_support::harness::GatewayBuilder;
use gateway_test_support::upstream::Provider;
use gateway_test_support::upstream::anthropic::{THINKING, THINKING_SIGNATURE, THINKING_TEXT};
use gateway_test_support::{
    AnthropicUpstream, FakeUpstream, Gateway, GeminiUpstream, Interaction, OpenAiUpstream,
    Recording, Reply, Route, fake_embedding,
};
use serde_json::{Value, json};

use crate::venv;

/// Extra pytest arguments (e.g. `-k stream -x`), split at whitespace, for running a part.
const PYTEST_ARGS_VAR: &str = "GATEWAY_CLIENTS_PYTEST_ARGS";
/// The scenario the suite reads.
const SCENARIO_VAR: &str = "GATEWAY_CLIENTS_SCENARIO";

/// The provider key every route sends upstream, from the gateway's environment.
const UPSTREAM_KEY_VAR: &str = "CLIENTS_UPSTREAM_KEY";

/// The recorded cases, each served by its own route (`PROVIDER-CASE`).
const CASES: [&str; 6] = [
    "simple",
    "simple_streaming",
    "tool",
    "tool_streaming",
    "multi_tool",
    "multi_tool_streaming",
];

/// A provider family the routes are made of: its plugin, recordings and model.
struct Family {
    /// The plugin, also the scenario's key and the routes' prefix.
    plugin: &'static str,
    /// Recording names are `{recordings}__{case}`.
    recordings: &'static str,
    /// The route's default model: what the recordings asked for.
    model: &'static str,
    /// The path the plugin's requests start with (the route's `base_url` suffix).
    base_path: &'static str,
    /// The recorded answer in the scenario's terms.
    expected: fn(&Interaction) -> Value,
}

const FAMILIES: [Family; 3] = [
    Family {
        plugin: "openai",
        recordings: "OpenAI__openai-gpt-4o-mini",
        model: "gpt-4o-mini",
        base_path: "/v1",
        expected: openai_expected,
    },
    Family {
        plugin: "anthropic",
        recordings: "Anthropic__claude-sonnet-4",
        model: "claude-sonnet-4-20250514",
        base_path: "/v1",
        expected: anthropic_expected,
    },
    Family {
        plugin: "gemini",
        recordings: "Google__gemini-2.5-flash",
        model: "gemini-2.5-flash",
        base_path: "/v1beta",
        expected: gemini_expected,
    },
];

/// The route-level price of gpt-4o-mini on `openai-simple` (USD per million input and output
/// tokens), so the cost header has one exact expected value.
const SIMPLE_PRICE: (f64, f64) = (1.0, 2.0);
/// What the rate-limited upstreams ask the caller to wait, in seconds.
const RETRY_AFTER: &str = "7";
/// The inputs of the embeddings tests (ASCII: the fake's vector counts bytes).
const EMBED_INPUTS: [&str; 2] = ["hello gateway world", "sdk"];
/// What the weather tool answered, in the tool-result tests.
const TOOL_OUTPUT: &str = "40 C";
/// The rerank tests' query and documents, and the price of the reranker that counts tokens.
const RERANK_QUERY: &str = "capital of France";
const RERANK_DOCUMENTS: [&str; 4] = [
    "Berlin is in Germany",
    "Paris is the capital of France",
    "the capital of Spain is Madrid",
    "France grows wine",
];
const RERANK_PRICE: f64 = 0.05;
/// How long the WAV the audio tests make lasts, in seconds.
const AUDIO_SECONDS: f64 = 1.5;
/// What the image tests ask the fake OpenAI to draw.
const IMAGE_PROMPT: &str = "a lighthouse at dawn";
/// The prompt of the legacy completion test.
const LEGACY_PROMPT: &str = "Say this is a test";
/// What the refusing upstream says, with 400, to every request.
const REFUSED: &str = "max_tokens is too large: limit must be <= 4096";
/// The tests that call the refusing route, one call each (one per SDK).
const REFUSED_CALLS: usize = 3;

/// The fake upstreams, kept running until the suite is done.
#[derive(Default)]
struct Upstreams {
    openai: Vec<OpenAiUpstream>,
    anthropic: Vec<AnthropicUpstream>,
    gemini: Vec<GeminiUpstream>,
}

impl Upstreams {
    /// Starts an upstream of `plugin`'s API answering every generation call with `reply`;
    /// returns its base URL for a route and its index among `plugin`'s upstreams.
    fn each_call(&mut self, plugin: &str, base_path: &str, reply: Reply) -> (String, usize) {
        match plugin {
            "openai" => {
                let upstream = OpenAiUpstream::each_call(reply);
                self.openai.push(upstream);
                (upstream_url(&self.openai, base_path), self.openai.len() - 1)
            }
            "anthropic" => {
                let upstream = AnthropicUpstream::each_call(reply);
                self.anthropic.push(upstream);
                (
                    upstream_url(&self.anthropic, base_path),
                    self.anthropic.len() - 1,
                )
            }
            "gemini" => {
                let upstream = GeminiUpstream::each_call(reply);
                self.gemini.push(upstream);
                (upstream_url(&self.gemini, base_path), self.gemini.len() - 1)
            }
            other => panic!("no fake upstream for plugin {other}"),
        }
    }

    /// The request bodies upstream `index` of `plugin` received, as text.
    fn bodies(&self, plugin: &str, index: usize) -> Vec<String> {
        let requests = match plugin {
            "openai" => self.openai[index].requests(),
            "anthropic" => self.anthropic[index].requests(),
            "gemini" => self.gemini[index].requests(),
            other => panic!("no fake upstream for plugin {other}"),
        };
        requests
            .iter()
            .map(|request| String::from_utf8_lossy(&request.body).into_owned())
            .collect()
    }
}

fn upstream_url<P: Provider>(upstreams: &[FakeUpstream<P>], base_path: &str) -> String {
    upstreams
        .last()
        .expect("the upstream just started")
        .base_url(base_path)
}

/// A route of `plugin` at `base_url`, keyed from the gateway's environment.
fn route(id: &str, plugin: &str, base_url: &str, default_model: &str) -> Route {
    Route::new(id, plugin)
        .base_url(base_url)
        .api_key_env(UPSTREAM_KEY_VAR)
        .default_model(default_model)
}

/// A route id for a recorded case: `openai-tool-streaming`.
fn route_id(plugin: &str, case: &str) -> String {
    format!("{plugin}-{}", case.replace('_', "-"))
}

/// The gateway under test, before it starts: its routes, their upstreams and what the suite
/// is told about them.
struct Setup {
    upstreams: Upstreams,
    builder: GatewayBuilder,
    /// Ids `GET /v1/models` must list.
    listed: Vec<String>,
    /// (plugin, upstream index, the call fed back) of the tool-result routes.
    tool_results: Vec<(&'static str, usize, Value)>,
    /// (plugin, upstream index) of the media routes.
    media: Vec<(&'static str, usize)>,
    /// The upstream index of `anthropic-thinking`.
    thinking: Option<usize>,
}

impl Setup {
    /// A route of `family`'s plugin answering `interaction` to every call; returns the
    /// interaction's expected answer with the route's `model`.
    fn recorded(&mut self, family: &Family, case: &str, interaction: &Interaction) -> Value {
        let id = route_id(family.plugin, case);
        let (url, index) = self.upstreams.each_call(
            family.plugin,
            family.base_path,
            Reply::recorded(interaction),
        );
        let mut route = route(&id, family.plugin, &url, family.model);
        let mut expected = (family.expected)(interaction);
        if family.plugin == "openai" && case == "simple" {
            route = route.price(family.model, SIMPLE_PRICE.0, SIMPLE_PRICE.1);
            expected["cost_usd"] = json!(cost(&expected["usage"], SIMPLE_PRICE));
        }
        self.add(route);
        let model = format!("{id}/{}", family.model);
        expected["model"] = json!(model);
        expected["upstream"] = json!(index);
        self.listed.push(model);
        expected
    }

    /// One route per recorded case of `family`, and one for the `tool` case's second turn
    /// (the caller sends the call back with its result); returns the cases' expectations.
    fn family(&mut self, family: &Family) -> Value {
        let mut cases = serde_json::Map::new();
        for case in CASES {
            let recording = Recording::load(&format!("{}__{case}", family.recordings));
            // Only the answer to the prompt: a second interaction is the next turn.
            let expected = self.recorded(family, case, recording.interaction(0));
            cases.insert(case.to_owned(), expected);
        }
        let recording = Recording::load(&format!("{}__tool", family.recordings));
        let mut expected = self.recorded(family, "tool_result", recording.interaction(1));
        let first_turn = (family.expected)(recording.interaction(0));
        let mut feed = first_turn["calls"][0].clone();
        if feed["id"].is_null() {
            // The provider has no call ids (Gemini): the caller would send back the one the
            // gateway made up; any id does.
            feed["id"] = json!("call_weather_1");
        }
        let index = expected["upstream"].as_u64().expect("an upstream index") as usize;
        self.tool_results.push((family.plugin, index, feed.clone()));
        expected["feed"] = feed;
        expected["feed_text"] = first_turn["text"].clone();
        cases.insert("tool_result".to_owned(), expected);
        Value::Object(cases)
    }

    /// Routes whose upstreams always refuse with 429 and a Retry-After; returns their models
    /// by plugin.
    fn rate_limited(&mut self) -> Value {
        let limited = [
            (
                "openai",
                "gpt-4o-mini",
                Reply::openai_error(
                    429,
                    "Rate limit reached for gpt-4o-mini: requests per min (RPM): Limit 3",
                    "rate_limit_exceeded",
                    Some(RETRY_AFTER),
                ),
            ),
            (
                "anthropic",
                "claude-sonnet-4-20250514",
                Reply::anthropic_error(
                    429,
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                    Some(RETRY_AFTER),
                ),
            ),
        ];
        let mut models = serde_json::Map::new();
        for (plugin, model, reply) in limited {
            let id = format!("{plugin}-limited");
            let (url, _) = self.upstreams.each_call(plugin, "/v1", reply);
            self.add(route(&id, plugin, &url, model));
            self.listed.push(format!("{id}/{model}"));
            models.insert(plugin.to_owned(), json!(format!("{id}/{model}")));
        }
        Value::Object(models)
    }

    /// A route per family (`PLUGIN-media`) answering the simple recorded answer to the
    /// suite's images, audio and documents, and `anthropic-thinking` streaming thinking;
    /// returns what the suite is told of them.
    fn media(&mut self) -> (Value, Value) {
        let mut media = serde_json::Map::new();
        for family in &FAMILIES {
            let recording = Recording::load(&format!("{}__simple", family.recordings));
            let interaction = recording.interaction(0);
            let id = format!("{}-media", family.plugin);
            let reply = Reply::recorded(interaction);
            let (url, index) = self
                .upstreams
                .each_call(family.plugin, family.base_path, reply);
            self.add(route(&id, family.plugin, &url, family.model));
            let model = format!("{id}/{}", family.model);
            self.listed.push(model.clone());
            let text = (family.expected)(interaction)["text"].clone();
            self.media.push((family.plugin, index));
            media.insert(
                family.plugin.to_owned(),
                json!({"model": model, "text": text}),
            );
        }
        let (url, index) =
            self.upstreams
                .each_call("anthropic", "/v1", Reply::anthropic_thinking_stream());
        self.add(route(
            "anthropic-thinking",
            "anthropic",
            &url,
            "claude-sonnet-4-5",
        ));
        self.listed
            .push("anthropic-thinking/claude-sonnet-4-5".to_owned());
        self.thinking = Some(index);
        let thinking = json!({
            "model": "anthropic-thinking/claude-sonnet-4-5",
            "thinking": THINKING,
            "signature": THINKING_SIGNATURE,
            "text": THINKING_TEXT,
        });
        (Value::Object(media), thinking)
    }

    fn add(&mut self, route: Route) {
        self.builder = std::mem::take(&mut self.builder).route(route);
    }
}

#[test]
fn official_sdks_against_the_gateway() {
    let python = venv::python();
    let mut setup = Setup {
        upstreams: Upstreams::default(),
        builder: Gateway::builder().env(UPSTREAM_KEY_VAR, "sk-clients-upstream-0123456789"),
        listed: Vec::new(),
        tool_results: Vec::new(),
        media: Vec::new(),
        thinking: None,
    };
    let mut cases = serde_json::Map::new();
    for family in &FAMILIES {
        cases.insert(family.plugin.to_owned(), setup.family(family));
    }
    let limited = setup.rate_limited();
    // An upstream that refuses every request as the caller's fault.
    let (url, refused_upstream) = setup.upstreams.each_call(
        "openai",
        "/v1",
        Reply::openai_error(400, REFUSED, "invalid_value", None),
    );
    setup.add(route("openai-refused", "openai", &url, "gpt-4o-mini"));
    setup.listed.push("openai-refused/gpt-4o-mini".to_owned());
    let (media, thinking) = setup.media();

    // An OpenAI upstream that computes embeddings and legacy completions from the request.
    let computed = OpenAiUpstream::start();
    setup.add(
        route(
            "openai-computed",
            "openai",
            &computed.base_url("/v1"),
            "gpt-3.5-turbo-instruct",
        )
        .setting("legacy_completions", "true")
        .price("rr-1", RERANK_PRICE, 0.0),
    );
    // The same upstream's Cohere-shaped reranker (`/v2/rerank`).
    setup.add(route(
        "cohere-rerank",
        "openai",
        &computed.base_url("/v2"),
        "rr-1",
    ));
    setup
        .listed
        .push("openai-computed/gpt-3.5-turbo-instruct".to_owned());

    let Setup {
        upstreams,
        builder,
        mut listed,
        tool_results,
        media: media_routes,
        thinking: thinking_route,
    } = setup;
    let builder = builder
        .config_line("[models.fast]\nroute = \"openai-simple\"\nmodel = \"gpt-4o-mini\"")
        .config_line("[models.claude]\nroute = \"anthropic-simple\"");
    listed.extend(["fast".to_owned(), "claude".to_owned()]);

    let gateway = builder.start();
    let scenario = json!({
        "url": gateway.url(),
        "key": gateway.key,
        "cases": cases,
        "limited": limited,
        "refused": {"model": "openai-refused/gpt-4o-mini", "message": REFUSED},
        "media": media,
        "thinking": thinking,
        "retry_after": RETRY_AFTER,
        "tool_output": TOOL_OUTPUT,
        "aliases": {
            "fast": cases_of(&cases, "openai", "simple"),
            "claude": cases_of(&cases, "anthropic", "simple"),
        },
        "listed": listed,
        "embeddings": {
            "model": "openai-computed/text-embedding-3-small",
            "inputs": EMBED_INPUTS,
            "vectors": EMBED_INPUTS
                .iter()
                .enumerate()
                .map(|(i, input)| fake_embedding(i, input))
                .collect::<Vec<_>>(),
            "prompt_tokens": EMBED_INPUTS
                .iter()
                .map(|input| input.split_whitespace().count())
                .sum::<usize>(),
        },
        // One message, "Hello!": Anthropic's and Gemini's fakes count 100 a message; the gateway
        // counts gpt-4o-mini's with o200k_base ("user" 1, "Hello!" 2, 3 framing, 3 priming).
        "count_tokens": {
            "anthropic": {
                "model": "anthropic-simple/claude-sonnet-4-5",
                "tokens": gateway_test_support::upstream::counted_tokens(1, 0),
            },
            "gemini": {
                "model": "gemini-simple/gemini-2.5-flash",
                "tokens": gateway_test_support::upstream::counted_tokens(1, 0),
            },
            "openai": {"model": "openai-simple/gpt-4o-mini", "tokens": 9},
        },
        "rerank": rerank_scenario(),
        "images": images_scenario(),
        "audio": audio_scenario(),
        "speech": speech_scenario(),
        "legacy": {
            "model": "openai-computed/gpt-3.5-turbo-instruct",
            "prompt": LEGACY_PROMPT,
            "text": gateway_test_support::upstream::openai::legacy_text(LEGACY_PROMPT),
        },
    });

    let mut command = venv::command(&python);
    command
        .args([
            "-m",
            "pytest",
            "tests/clients",
            "-q",
            "-p",
            "no:cacheprovider",
        ])
        .args(pytest_args())
        .env(SCENARIO_VAR, scenario.to_string());
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} -m pytest: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the SDK suite failed ({}):\n{stdout}\n{stderr}\n--- gateway log ---\n{}",
        output.status,
        gateway.logs()
    );
    if !pytest_args().is_empty() {
        // A part of the suite was asked for: the rest of the routes were not meant to be used.
        return;
    }
    // Every upstream was reached at least once: a test that never got to its route would
    // otherwise pass unnoticed.
    let reached = |requests: usize, what: &str| assert!(requests > 0, "{what} was never called");
    for upstream in &upstreams.openai {
        reached(upstream.requests().len(), "an OpenAI upstream");
    }
    for upstream in &upstreams.anthropic {
        reached(upstream.requests().len(), "an Anthropic upstream");
    }
    for upstream in &upstreams.gemini {
        reached(upstream.requests().len(), "a Gemini upstream");
    }
    reached(computed.requests().len(), "the computing OpenAI upstream");
    // The SDKs retry a 5xx by default, never a 400: one upstream call per call of a test.
    assert_eq!(
        upstreams.openai[refused_upstream].requests().len(),
        REFUSED_CALLS,
        "the refused request was sent again"
    );
    // Whatever format the call and its result came in, the provider got them back: the
    // result, and the call's id where the provider has ids.
    for (plugin, index, call) in &tool_results {
        let bodies = upstreams.bodies(plugin, *index);
        assert!(
            !bodies.is_empty(),
            "the {plugin} tool-result route was never called"
        );
        for body in bodies {
            assert!(
                body.contains(TOOL_OUTPUT),
                "{plugin}: no tool result in {body}"
            );
            let name = call["name"].as_str().expect("a call name");
            assert!(body.contains(name), "{plugin}: no call of {name} in {body}");
            if *plugin != "gemini" {
                let id = call["id"].as_str().expect("a call id");
                assert!(body.contains(id), "{plugin}: no call id {id} in {body}");
            }
        }
    }
    // The images, audio and PDFs the SDKs sent reached each provider in its own format.
    for (plugin, index) in &media_routes {
        let bodies: Vec<Value> = (upstreams.bodies(plugin, *index).iter())
            .map(|body| serde_json::from_str(body).expect("a JSON body"))
            .collect();
        let sent = |what: &str, found: &dyn Fn(&Value) -> bool| {
            assert!(
                bodies.iter().any(|body| any_object(body, found)),
                "{plugin}: no {what} in {bodies:?}"
            );
        };
        let data_url = |object: &Value, field: &str, prefix: &str| {
            object[field]
                .as_str()
                .is_some_and(|url| url.starts_with(prefix))
        };
        match *plugin {
            "openai" => {
                sent("image_url part", &|o| {
                    o["type"] == "image_url"
                        && data_url(&o["image_url"], "url", "data:image/png;base64,")
                });
                sent("input_audio part", &|o| {
                    o["type"] == "input_audio" && o["input_audio"]["format"] == "wav"
                });
                sent("file part", &|o| {
                    o["type"] == "file"
                        && data_url(&o["file"], "file_data", "data:application/pdf;base64,")
                });
            }
            "anthropic" => {
                for (kind, media_type) in [("image", "image/png"), ("document", "application/pdf")]
                {
                    sent(kind, &|o| {
                        o["type"] == kind
                            && o["source"]["type"] == "base64"
                            && o["source"]["media_type"] == media_type
                    });
                }
            }
            _ => {
                for media_type in ["image/png", "application/pdf", "audio/wav"] {
                    sent(media_type, &|o| o["inlineData"]["mimeType"] == media_type);
                }
            }
        }
    }
    let thinking_bodies = upstreams.bodies("anthropic", thinking_route.expect("the route"));
    assert!(
        !thinking_bodies.is_empty(),
        "anthropic-thinking was never called"
    );
    for body in thinking_bodies {
        let body: Value = serde_json::from_str(&body).expect("a JSON body");
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 1024}),
            "{body}"
        );
    }
}

/// Whether `found` holds for `value` or any object within it.
fn any_object(value: &Value, found: &dyn Fn(&Value) -> bool) -> bool {
    match value {
        Value::Object(object) => found(value) || object.values().any(|v| any_object(v, found)),
        Value::Array(items) => items.iter().any(|v| any_object(v, found)),
        _ => false,
    }
}

fn pytest_args() -> Vec<String> {
    std::env::var(PYTEST_ARGS_VAR)
        .map(|args| args.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn cases_of(cases: &serde_json::Map<String, Value>, plugin: &str, case: &str) -> Value {
    cases[plugin][case].clone()
}

/// The cost of `usage` at `price` (USD per million input and output tokens).
fn cost(usage: &Value, price: (f64, f64)) -> f64 {
    let tokens = |key: &str| usage[key].as_u64().expect("recorded usage") as f64;
    (tokens("prompt") * price.0 + tokens("completion") * price.1) / 1e6
}

/// The scenario's view of one answer: text, canonical (OpenAI) finish reason, tool calls with
/// their arguments as JSON text, and usage.
fn expected(
    text: String,
    finish: &str,
    calls: Vec<Value>,
    usage: Option<(u64, u64, u64)>,
    reasoning: Option<u64>,
) -> Value {
    json!({
        "text": text,
        "finish": finish,
        "calls": calls,
        "usage": usage.map(|(prompt, completion, total)| json!({
            "prompt": prompt, "completion": completion, "total": total, "reasoning": reasoning,
        })),
    })
}

fn call(id: Option<&str>, name: &str, arguments: &str) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

fn openai_expected(interaction: &Interaction) -> Value {
    let answer = interaction.answer();
    let calls = answer
        .tool_calls
        .iter()
        .map(|(id, name, arguments)| call(Some(id), name, arguments))
        .collect();
    let finish = answer.finish_reason.as_deref().expect("a finish reason");
    expected(answer.text, finish, calls, answer.usage, None)
}

/// Anthropic's stop reasons in OpenAI's names, as both surfaces' finish reasons derive from
/// the canonical one.
fn anthropic_finish(stop_reason: &str) -> &'static str {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        other => panic!("unexpected recorded stop_reason {other}"),
    }
}

fn anthropic_expected(interaction: &Interaction) -> Value {
    let mut text = String::new();
    // (id, name, arguments) in block order.
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let (mut prompt, mut completion) = (0, 0);
    let mut stop_reason = String::new();
    let tokens = |usage: &Value, key: &str| usage[key].as_u64();
    if interaction.is_sse() {
        for event in interaction.sse_payloads() {
            match event["type"].as_str() {
                Some("message_start") => {
                    let usage = &event["message"]["usage"];
                    prompt = tokens(usage, "input_tokens").unwrap_or(prompt);
                    completion = tokens(usage, "output_tokens").unwrap_or(completion);
                }
                Some("content_block_start") => {
                    take_block(&event["content_block"], &mut text, &mut calls)
                }
                Some("content_block_delta") => {
                    let delta = &event["delta"];
                    match delta["type"].as_str() {
                        Some("text_delta") => text.push_str(&str_of(&delta["text"])),
                        Some("input_json_delta") => {
                            let last = calls.last_mut().expect("a tool_use block before its delta");
                            last.2.push_str(&str_of(&delta["partial_json"]));
                        }
                        _ => {}
                    }
                }
                Some("message_delta") => {
                    stop_reason = str_of(&event["delta"]["stop_reason"]);
                    let usage = &event["usage"];
                    prompt = tokens(usage, "input_tokens").unwrap_or(prompt);
                    completion = tokens(usage, "output_tokens").unwrap_or(completion);
                }
                _ => {}
            }
        }
    } else {
        let body: Value = serde_json::from_str(&interaction.response.body).expect("JSON answer");
        for block in body["content"].as_array().expect("content blocks") {
            take_block(block, &mut text, &mut calls);
        }
        stop_reason = str_of(&body["stop_reason"]);
        prompt = tokens(&body["usage"], "input_tokens").expect("input_tokens");
        completion = tokens(&body["usage"], "output_tokens").expect("output_tokens");
    }
    let calls = calls
        .iter()
        .map(|(id, name, arguments)| {
            let arguments = if arguments.is_empty() {
                "{}"
            } else {
                arguments
            };
            call(Some(id), name, arguments)
        })
        .collect();
    let usage = Some((prompt, completion, prompt + completion));
    expected(text, anthropic_finish(&stop_reason), calls, usage, None)
}

/// Adds an Anthropic content block (whole, or the start of a streamed one) to the answer.
fn take_block(block: &Value, text: &mut String, calls: &mut Vec<(String, String, String)>) {
    match block["type"].as_str() {
        Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
        Some("tool_use") => {
            // A streamed block starts with an empty input its deltas then fill in.
            let input = &block["input"];
            let arguments = if input.as_object().is_some_and(|o| !o.is_empty()) {
                input.to_string()
            } else {
                String::new()
            };
            calls.push((str_of(&block["id"]), str_of(&block["name"]), arguments));
        }
        _ => {}
    }
}

fn gemini_expected(interaction: &Interaction) -> Value {
    let responses = if interaction.is_sse() {
        interaction.sse_payloads()
    } else {
        vec![serde_json::from_str(&interaction.response.body).expect("JSON answer")]
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut finish = String::new();
    let mut usage = None;
    let mut reasoning = None;
    for response in &responses {
        let candidate = &response["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(piece) = part["text"].as_str() {
                text.push_str(piece);
            }
            let function = &part["functionCall"];
            if function.is_object() {
                // Gemini calls have no ids (the gateway makes them up).
                calls.push(call(
                    function["id"].as_str(),
                    &str_of(&function["name"]),
                    &function["args"].to_string(),
                ));
            }
        }
        if let Some(reason) = candidate["finishReason"].as_str() {
            finish = reason.to_owned();
        }
        let metadata = &response["usageMetadata"];
        if metadata.is_object() {
            // Thoughts are billed as output: the gateway counts them as completion tokens.
            let count = |key: &str| metadata[key].as_u64().unwrap_or(0);
            let thoughts = count("thoughtsTokenCount");
            usage = Some((
                count("promptTokenCount") + count("toolUsePromptTokenCount"),
                count("candidatesTokenCount") + thoughts,
                count("totalTokenCount"),
            ));
            reasoning = Some(thoughts);
        }
    }
    let finish = match finish.as_str() {
        "STOP" if !calls.is_empty() => "tool_calls",
        "STOP" => "stop",
        "MAX_TOKENS" => "length",
        other => panic!("unexpected recorded finishReason {other}"),
    };
    expected(text, finish, calls, usage, reasoning)
}

fn str_of(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

/// The audio tests' case: the models of the route that computes transcripts, and what it hears
/// in the WAV the tests make (`speech.wav`, [`AUDIO_SECONDS`] long).
fn audio_scenario() -> Value {
    use gateway_test_support::upstream::openai::fake_transcript;
    json!({
        "whisper": "openai-computed/whisper-1",
        "gpt": "openai-computed/gpt-4o-transcribe",
        "file_name": "speech.wav",
        "seconds": AUDIO_SECONDS,
        "text": fake_transcript("speech.wav", AUDIO_SECONDS, false),
        "translated": fake_transcript("speech.wav", AUDIO_SECONDS, true),
        "billed_seconds": AUDIO_SECONDS.ceil(),
    })
}

/// The speech tests' case: the models of the route that computes speech, the text, and the
/// audio the fake speaks for it (in `alloy`, as MP3 and as WAV).
fn speech_scenario() -> Value {
    use gateway_test_support::upstream::openai::{fake_speech, fake_speech_tokens};
    const INPUT: &str = "The quick brown fox jumps over the lazy dog";
    let (read, spoken) = fake_speech_tokens(INPUT);
    json!({
        "tts": "openai-computed/tts-1",
        "gpt": "openai-computed/gpt-4o-mini-tts",
        "input": INPUT,
        "characters": INPUT.chars().count(),
        "mp3": fake_speech(INPUT, "alloy", "mp3").concat(),
        "wav": fake_speech(INPUT, "alloy", "wav").concat(),
        "tokens": [read, spoken],
    })
}

/// The image tests' case: the prompt, the PNGs the fake OpenAI makes of it (base64, one an
/// index), and the models of the route that computes its answers.
fn images_scenario() -> Value {
    use base64::Engine as _;
    use gateway_test_support::upstream::{FAKE_IMAGE_TOKENS, fake_png};
    let pngs: Vec<String> = (0..2)
        .map(|i| fake_png(&format!("{IMAGE_PROMPT}#{i}")))
        .map(|png| base64::engine::general_purpose::STANDARD.encode(png))
        .collect();
    json!({
        "prompt": IMAGE_PROMPT,
        "pngs": pngs,
        "revised_prompt": format!("{IMAGE_PROMPT}, in fine detail"),
        "dall_e_3": "openai-computed/dall-e-3",
        "dall_e_2": "openai-computed/dall-e-2",
        "gpt_image": "openai-computed/gpt-image-1",
        "image_tokens": FAKE_IMAGE_TOKENS,
    })
}

/// The rerank tests' case: the documents' order and scores as the fake computes them, and the
/// tokens the Jina-shaped server counts, priced.
fn rerank_scenario() -> Value {
    use gateway_test_support::upstream::{fake_relevance, rerank_tokens};
    let documents: Vec<String> = RERANK_DOCUMENTS.map(str::to_owned).to_vec();
    let mut order: Vec<usize> = (0..documents.len()).collect();
    let score = |i: usize| fake_relevance(RERANK_QUERY, &documents[i]);
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
    let tokens = rerank_tokens(RERANK_QUERY, &documents);
    json!({
        "query": RERANK_QUERY,
        "documents": documents,
        "order": order,
        "scores": order.iter().map(|&i| score(i)).collect::<Vec<_>>(),
        "tokens": tokens,
        "cost_usd": tokens as f64 * RERANK_PRICE / 1e6,
        "jina": {"model": "openai-computed/rr-1"},
        "cohere": {"model": "cohere-rerank/rr-1"},
    })
}
