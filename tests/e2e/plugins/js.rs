//! JavaScript plugins (`plugin-sdk-js/`): `examples/js-provider`, built from source by
//! `cargo xtask test` (`cargo xtask plugin js`), is loaded from `plugins_dir` like any plugin and
//! serves a text prompt, a chat and a stream through the fake OpenAI upstream, on the Commonbase
//! and the OpenAI surfaces, with usage, cost and records. A JavaScript plugin that loops forever
//! (`tests/plugins/js-hostile`) is stopped by the route's CPU budget like any other. The
//! JavaScript guard of `examples/js-guard` denies, allows and rewrites on an echo route, and fails
//! closed on a misspelt setting. The provider built outside the repository against the packed SDK
//! (`js-provider-outside`) serves as the repository's build does.

use gateway_test_support::scrape::{scrape, value};
use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::fake_embedding;
use gateway_test_support::{
    Gateway, OpenAiUpstream, Reply, Response, Route, assert_crash_logged_once, assert_error_where,
    assert_ok, assert_plugin_error, assert_stream_finished, assert_usage, built_plugins_dir,
    chat_request, list_cost, split_stream, streamed_record, streamed_text, success_record,
    text_request, unique, with,
};
use serde_json::{Value, json};
use std::sync::Once;
use std::time::{Duration, Instant};

/// The JavaScript provider's route and plugin.
const ROUTE: &str = "js";
const PLUGIN: &str = "js-provider";
/// The looping plugin's route and plugin.
const HOSTILE: &str = "jsloop";
const HOSTILE_PLUGIN: &str = "js-hostile";
/// The guard plugin.
const GUARD_PLUGIN: &str = "js-guard";
/// `examples/js-provider` built by `cargo xtask test` from outside the repository, against the
/// SDK packed with `npm pack` and installed from the tarball, with its `npx gateway-plugin build`.
const OUTSIDE_PLUGIN: &str = "js-provider-outside";
const MODEL: &str = "gpt-4o-mini";
/// The route's prices for [`MODEL`], so that every answer has a cost.
const PRICE: (f64, f64) = (0.15, 0.60);
const PROVIDER_KEY: &str = "sk-js-provider-test-0123456789";

/// Asserts the JavaScript plugins were built (by `cargo xtask test`), and compiles each once
/// into the test gateways' shared compiled-plugin cache before any test's gateway starts: a
/// JavaScript component is 12 MB of code (the engine), whose first compilation takes tens of
/// seconds; every test compiling it at once on a small machine would outlast the harness's wait
/// for a gateway to listen. From the cache, a gateway loads it in a fraction of a second.
fn warm_cache() {
    static WARM: Once = Once::new();
    WARM.call_once(|| {
        for plugin in [PLUGIN, HOSTILE_PLUGIN, GUARD_PLUGIN, OUTSIDE_PLUGIN] {
            let path = built_plugins_dir().join(format!("{plugin}.wasm"));
            assert!(
                path.is_file(),
                "{} is missing: build it with `cargo xtask plugin js` (cargo xtask test does)",
                path.display()
            );
            // One plugin per gateway: one compilation at a time (the echo plugin beside the
            // guard is small and compiled already).
            let builder = Gateway::builder();
            let builder = if plugin == GUARD_PLUGIN {
                (builder.route(Route::echo("warm").key("guards", r#"["warm"]"#)))
                    .guard("warm", plugin, "")
            } else {
                builder
                    .route(
                        Route::new("warm", plugin)
                            .base_url("http://127.0.0.1:9/v1")
                            .api_key_env("JS_PLUGINS_WARM_KEY"),
                    )
                    .env("JS_PLUGINS_WARM_KEY", "unused")
            };
            builder.start();
        }
    });
}

/// A route of `plugin` against `upstream`, keyed by the gateway's environment (`var`).
fn route(id: &str, plugin: &str, upstream: &OpenAiUpstream, var: &str) -> Route {
    Route::new(id, plugin)
        .base_url(&upstream.base_url("/v1"))
        .api_key_env(var)
}

/// A gateway with the JavaScript provider's route against `upstream`, priced, and `extra`.
fn gateway_with(upstream: &OpenAiUpstream, extra: impl FnOnce(&str) -> Option<Route>) -> Gateway {
    warm_cache();
    let var = unique("JS_PLUGINS_KEY_");
    let mut builder = Gateway::builder()
        .route(route(ROUTE, PLUGIN, upstream, &var).price(MODEL, PRICE.0, PRICE.1))
        .env(&var, PROVIDER_KEY);
    if let Some(extra) = extra(&var) {
        builder = builder.route(extra);
    }
    builder.start()
}

/// A gateway with the JavaScript provider's route against `upstream`.
fn gateway(upstream: &OpenAiUpstream) -> Gateway {
    gateway_with(upstream, |_| None)
}

fn usage(prompt: u64, completion: u64) -> Value {
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// A chat completion answer saying `text`, with usage.
fn answer(text: &str, prompt: u64, completion: u64) -> Reply {
    Reply::openai_answer(MODEL, text, usage(prompt, completion))
}

/// A chat completion stream of `pieces`, then the finish reason, the usage and `[DONE]`.
fn stream(pieces: &[&str], prompt: u64, completion: u64) -> Reply {
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let choices = if usage.is_null() {
            json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}])
        } else {
            json!([])
        };
        let chunk = json!({"id": "chatcmpl-js", "object": "chat.completion.chunk", "created": 0,
            "model": MODEL, "choices": choices, "usage": usage});
        format!("data: {chunk}\n\n")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
        Value::Null,
    )];
    for piece in pieces {
        events.push(chunk(json!({"content": piece}), Value::Null, Value::Null));
    }
    events.push(chunk(json!({}), json!("stop"), Value::Null));
    events.push(chunk(Value::Null, Value::Null, usage(prompt, completion)));
    events.push("data: [DONE]\n\n".to_owned());
    Reply::events(events)
}

/// The body the plugin sent upstream (request `n`), with its `Authorization` header.
fn sent(upstream: &OpenAiUpstream, n: usize) -> (Value, Option<String>) {
    let request = upstream.requests()[n].clone();
    assert_eq!(request.path, "/v1/chat/completions");
    let authorization = (request.headers.iter())
        .find(|(name, _)| name == "authorization")
        .map(|(_, value)| value.clone());
    let body = serde_json::from_slice(&request.body).expect("a JSON body");
    (body, authorization)
}

/// The record of invocation `id`, once written: a success on the JavaScript route with `usage`.
fn recorded(gw: &Gateway, id: &str, (prompt, completion): (u64, u64)) -> Value {
    let record = gw.wait_for_record(id, |r| r["status"] == json!("success"));
    assert_eq!(record["route"], json!(ROUTE), "{record}");
    assert_eq!(record["plugin"], json!(PLUGIN), "{record}");
    assert_eq!(record["usage"]["prompt_tokens"], json!(prompt), "{record}");
    assert_eq!(
        record["usage"]["completion_tokens"],
        json!(completion),
        "{record}"
    );
    record
}

#[test]
fn serves_a_text_prompt_a_chat_and_a_stream_on_the_commonbase_surface() {
    let upstream = OpenAiUpstream::script(vec![
        answer("Hi there!", 9, 3),
        answer("Paris.", 20, 2),
        stream(&["Hel", "lo ", "world"], 7, 3),
    ]);
    let gw = gateway(&upstream);

    // A text prompt: one user message upstream.
    let mut body = text_request(&gw.project_id, ROUTE, MODEL, "Say hi");
    body["showUsage"] = json!(true);
    let answer = assert_ok(&gw.post("/completions", &body));
    assert_eq!(answer["choices"][0]["text"], json!("Hi there!"), "{answer}");
    assert_usage(&answer, (9, 3, 12), list_cost(9, 3, PRICE));
    let (request, authorization) = sent(&upstream, 0);
    assert_eq!(
        request["messages"],
        json!([{"role": "user", "content": "Say hi"}])
    );
    assert_eq!(request["model"], json!(MODEL));
    assert_eq!(request["stream"], json!(false));
    assert_eq!(authorization, Some(format!("Bearer {PROVIDER_KEY}")));
    success_record(&gw, &answer, ROUTE, PLUGIN);
    recorded(&gw, answer["invocationId"].as_str().expect("id"), (9, 3));

    // A chat, with a caller's param passed through.
    let messages = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"}
    ]);
    let mut body = chat_request(&gw.project_id, ROUTE, MODEL, messages.clone());
    body["providerConfig"]["params"]["temperature"] = json!(0.25);
    body["showUsage"] = json!(true);
    let answer = assert_ok(&gw.post("/completions", &body));
    assert_eq!(answer["choices"][0]["text"], json!("Paris."), "{answer}");
    assert_eq!(answer["choices"][0]["finish_reason"], json!("stop"));
    assert_usage(&answer, (20, 2, 22), list_cost(20, 2, PRICE));
    let (request, _) = sent(&upstream, 1);
    assert_eq!(request["messages"], messages);
    assert_eq!(request["temperature"], json!(0.25));
    recorded(&gw, answer["invocationId"].as_str().expect("id"), (20, 2));

    // A stream: the text as it arrives, the usage in the last frame.
    let mut body = with(
        chat_request(
            &gw.project_id,
            ROUTE,
            MODEL,
            json!([{"role": "user", "content": "Greet the world"}]),
        ),
        "stream",
        json!(true),
    );
    body["showUsage"] = json!(true);
    let response = gw.post_stream("/completions", &body);
    let (partial, last) = split_stream(&response);
    assert!(partial.len() >= 3, "not streamed: {}", response.raw);
    assert_eq!(streamed_text(&partial, 0), "Hello world");
    assert_stream_finished(&last, Some("stop"));
    assert_usage(&last, (7, 3, 10), list_cost(7, 3, PRICE));
    let (request, _) = sent(&upstream, 2);
    assert_eq!(request["stream"], json!(true));
    assert_eq!(request["stream_options"], json!({"include_usage": true}));
    let record = streamed_record(&gw, &last);
    assert_eq!(record["usage"]["completion_tokens"], json!(3), "{record}");

    // Counted like any plugin's calls.
    let samples = scrape(&gw, None);
    let tokens = |kind| {
        value(
            &samples,
            "gateway_tokens_total",
            &[("route", ROUTE), ("model", MODEL), ("kind", kind)],
        )
    };
    assert_eq!(tokens("prompt"), 36.0);
    assert_eq!(tokens("completion"), 8.0);
}

/// POSTs an OpenAI-format body with `Authorization: Bearer KEY`, as OpenAI's SDKs do.
fn post_openai(gw: &Gateway, path: &str, body: &Value) -> Response {
    let bearer = format!("Bearer {}", gw.key);
    gw.request(
        "POST",
        path,
        None,
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn serves_chat_text_a_stream_and_embeddings_on_the_openai_surface() {
    let upstream = OpenAiUpstream::script(vec![
        answer("Paris.", 20, 2),
        answer("Hi!", 4, 1),
        stream(&["One", ", two"], 6, 2),
    ]);
    let gw = gateway(&upstream);
    let target = format!("{ROUTE}/{MODEL}");

    let body =
        json!({"model": target, "messages": [{"role": "user", "content": "Capital of France?"}]});
    let response = post_openai(&gw, "/v1/chat/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["object"], json!("chat.completion"), "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        json!("Paris."),
        "{answer}"
    );
    assert_eq!(answer["usage"]["prompt_tokens"], json!(20), "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], json!(2), "{answer}");
    let id = response
        .header("x-invocation-id")
        .expect("an invocation id");
    recorded(&gw, id, (20, 2));

    // The legacy text completion: the plugin gets a text prompt.
    let body = json!({"model": target, "prompt": "Say hi"});
    let response = post_openai(&gw, "/v1/completions", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    assert_eq!(answer["choices"][0]["text"], json!("Hi!"), "{answer}");
    let (request, _) = sent(&upstream, 1);
    assert_eq!(
        request["messages"],
        json!([{"role": "user", "content": "Say hi"}])
    );
    let id = response
        .header("x-invocation-id")
        .expect("an invocation id");
    recorded(&gw, id, (4, 1));

    // A stream, with the usage chunk the caller asked for.
    let body = json!({"model": target, "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Count"}]});
    let bearer = format!("Bearer {}", gw.key);
    let mut connection = gw.open_stream_with_headers(
        "/v1/chat/completions",
        None,
        &[("Authorization", &bearer)],
        &body,
    );
    assert_eq!(connection.status, 200);
    let id = connection
        .header("x-invocation-id")
        .expect("an invocation id")
        .to_owned();
    let raw = String::from_utf8_lossy(&connection.read_to_end()).into_owned();
    let datas: Vec<String> = (split_events(&raw).iter())
        .filter_map(|event| event_data(event))
        .collect();
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"), "{raw}");
    let chunks: Vec<Value> = (datas.iter().filter(|d| *d != "[DONE]"))
        .map(|d| serde_json::from_str(d).expect("a JSON chunk"))
        .collect();
    let text: String = (chunks.iter())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "One, two", "{raw}");
    let usage = chunks.last().expect("chunks")["usage"].clone();
    assert_eq!(usage["prompt_tokens"], json!(6), "{raw}");
    assert_eq!(usage["completion_tokens"], json!(2), "{raw}");
    recorded(&gw, &id, (6, 2));

    // Embeddings, which the fake computes from the input.
    let body = json!({"model": target, "input": ["a", "bc"]});
    let response = post_openai(&gw, "/v1/embeddings", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let answer = response.json();
    let vectors = answer["data"].as_array().expect("data");
    assert_eq!(vectors.len(), 2, "{answer}");
    let first: Vec<f64> = (vectors[0]["embedding"].as_array().expect("a vector").iter())
        .map(|x| x.as_f64().expect("a number"))
        .collect();
    let expected = fake_embedding(0, "a");
    assert_eq!(first.len(), expected.len());
    for (got, want) in first.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-6, "{got} != {want}");
    }
}

#[test]
fn an_upstream_error_keeps_its_status_and_message() {
    let upstream = OpenAiUpstream::script(vec![Reply::openai_error(
        429,
        "slow down",
        "rate_limit_exceeded",
        Some("7"),
    )]);
    let gw = gateway(&upstream);
    let body = text_request(&gw.project_id, ROUTE, MODEL, "hi");
    let response = gw.post("/completions", &body);
    let id = assert_error_where(&response, 429, "the upstream's status", |_| true);
    assert_eq!(response.json()["providerError"], json!("slow down"));
    assert_eq!(response.header("retry-after"), Some("7"));
    let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
    assert_eq!(record["httpStatus"], json!(429), "{record}");
}

#[test]
fn a_plugin_that_loops_forever_hits_the_cpu_budget_and_the_gateway_keeps_serving() {
    let upstream = OpenAiUpstream::script(vec![answer("still here", 2, 2)]);
    let gw = gateway_with(&upstream, |var| {
        Some(route(HOSTILE, HOSTILE_PLUGIN, &upstream, var).key("cpu_time_ms", "300"))
    });
    for stream in [false, true] {
        let body = with(
            text_request(&gw.project_id, HOSTILE, MODEL, "loop"),
            "stream",
            json!(stream),
        );
        let response = gw.post("/completions", &body);
        let id = assert_error_where(&response, 502, "the CPU budget", |message| {
            message.to_lowercase().contains("cpu")
        });
        let record = gw.wait_for_record(&id, |r| r["status"] == json!("error"));
        assert_eq!(record["httpStatus"], json!(502), "{record}");
    }
    let samples = scrape(&gw, None);
    let traps = value(
        &samples,
        "gateway_plugin_traps_total",
        &[("plugin", HOSTILE_PLUGIN), ("kind", "cpu")],
    );
    assert_eq!(traps, 2.0);
    // The JavaScript provider still answers.
    let body = text_request(&gw.project_id, ROUTE, MODEL, "hi");
    let answer = assert_ok(&gw.post("/completions", &body));
    assert_eq!(answer["choices"][0]["text"], json!("still here"));
    assert_eq!(gw.get("/healthz", None).status, 200);
    assert_eq!(upstream.requests().len(), 1);
}

#[test]
fn is_hot_loaded_into_a_running_gateway_like_any_plugin() {
    warm_cache();
    let upstream = OpenAiUpstream::each_call(answer("loaded", 1, 1));
    let var = unique("JS_PLUGINS_KEY_");
    // No such plugin at start: the test drops it in while the gateway runs.
    let gw = Gateway::builder()
        .route(route("late", "js-late", &upstream, &var))
        .env(&var, PROVIDER_KEY)
        .start();
    let body = text_request(&gw.project_id, "late", MODEL, "hi");
    assert_eq!(gw.post("/completions", &body).status, 503);

    // A temporary name, then a rename, as an operator installs a plugin.
    let plugins = gw.dir().join("plugins");
    let temporary = plugins.join(".js-late.wasm.partial");
    std::fs::copy(
        built_plugins_dir().join(format!("{PLUGIN}.wasm")),
        &temporary,
    )
    .expect("copy the plugin");
    std::fs::rename(&temporary, plugins.join("js-late.wasm")).expect("rename");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = gw.post("/completions", &body);
        if response.status == 200 {
            assert_eq!(response.json()["choices"][0]["text"], json!("loaded"));
            break;
        }
        assert_eq!(response.status, 503, "{}", response.text());
        assert!(
            Instant::now() < deadline,
            "the dropped-in plugin never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A JavaScript exception the plugin did not catch (a bug: a `TypeError` naming the prompt)
/// reaches the caller as the gateway's stable `plugin_error` with the invocation id, on the
/// Commonbase and the OpenAI surfaces, never as the exception's text; the log has its type,
/// message and the plugin's own frame once (issue 46 item 15). A deliberate refusal
/// (`ProviderError.invalidRequest`) is no crash: a 400 with its message.
#[test]
fn an_exception_is_a_stable_plugin_error_logged_once() {
    let upstream = OpenAiUpstream::script(vec![answer("still here", 2, 2)]);
    let gw = gateway_with(&upstream, |var| {
        Some(route(HOSTILE, HOSTILE_PLUGIN, &upstream, var))
    });
    for stream in [false, true] {
        let prompt = unique("throw-");
        let body = with(
            text_request(&gw.project_id, HOSTILE, MODEL, &prompt),
            "stream",
            json!(stream),
        );
        let response = gw.post("/completions", &body);
        let id = assert_plugin_error(&gw, &response, &[&prompt, "TypeError"]);
        assert_crash_logged_once(
            &gw,
            &id,
            &format!("plugin raised TypeError: can't access property \"{prompt}\""),
            Some("settingOf@"),
            &["exportProvider", "callPlugin"],
        );
    }

    let prompt = unique("throw-");
    let body = json!({"model": format!("{HOSTILE}/{MODEL}"), "prompt": prompt});
    let response = post_openai(&gw, "/v1/completions", &body);
    assert_eq!(response.status, 502, "{}", response.text());
    let error = &response.json()["error"];
    assert_eq!(error["code"], json!("plugin_error"), "{error}");
    let id = response.header("x-invocation-id").expect("x-invocation-id");
    assert!(
        error["message"].as_str().is_some_and(|m| m.contains(id)),
        "{error}"
    );
    assert!(!response.text().contains(&prompt), "{error}");
    assert_crash_logged_once(&gw, id, &prompt, Some("settingOf@"), &[]);

    let refused = gw.post(
        "/completions",
        &text_request(&gw.project_id, HOSTILE, MODEL, "refuse"),
    );
    assert_error_where(&refused, 400, "the plugin's reason", |m| {
        m == "js-hostile refuses this temperature"
    });
    assert!(refused.json().get("code").is_none(), "{}", refused.text());
    let samples = scrape(&gw, None);
    let traps = value(
        &samples,
        "gateway_plugin_traps_total",
        &[("plugin", HOSTILE_PLUGIN), ("kind", "trap")],
    );
    assert_eq!(traps, 3.0, "each exception ended its instance");
}

/// The JavaScript guard (`examples/js-guard`) on an echo route, which answers with the prompt: a
/// prompt holding a denied word is refused with a 400 whose reason names the rule, not the word,
/// and not the guard again (the gateway names it); another prompt goes through, its e-mail address
/// redacted from the answer; a misspelt setting fails the guard, which refuses the request.
#[test]
fn a_js_guard_denies_a_listed_word_allows_the_rest_and_rewrites_answers() {
    warm_cache();
    let gw = Gateway::builder()
        .route(Route::echo("e").key("guards", r#"["words"]"#))
        .route(Route::echo("typo").key("guards", r#"["typo"]"#))
        .guard(
            "words",
            GUARD_PLUGIN,
            r#"settings = { words = ["bluebird", "top secret"] }"#,
        )
        .guard("typo", GUARD_PLUGIN, r#"settings = { wrods = ["x"] }"#)
        .start();
    let post = |route: &str, prompt: &str| {
        gw.post(
            "/completions",
            &text_request(&gw.project_id, route, "echo", prompt),
        )
    };
    let record_of = |response: &Response| {
        let id = (response.header("x-invocation-id"))
            .unwrap_or_else(|| panic!("no invocation id: {}", response.text()));
        gw.record(id)
    };

    for (prompt, rule) in [
        ("tell me about Bluebird", "words #1"),
        ("this is Top Secret, really", "words #2"),
    ] {
        let denied = post("e", prompt);
        let reason = format!("the request matches the deny list ({rule})");
        assert_error_where(&denied, 400, "the guard and its reason", |message| {
            message == format!("the request was blocked by guard \"words\": {reason}")
        });
        assert_eq!(denied.json()["guard"], json!("words"), "{}", denied.text());
        let record = record_of(&denied);
        assert_eq!(record["status"], json!("blocked"), "{record}");
        let outcome = &record["guards"][0];
        assert_eq!(outcome["stage"], json!("request"), "{record}");
        assert_eq!(outcome["verdict"], json!("deny"), "{record}");
        assert_eq!(outcome["reason"], json!(reason), "{record}");
    }

    let fine = post("e", "blue birds are fine");
    assert_eq!(
        assert_ok(&fine)["choices"][0]["text"],
        json!("blue birds are fine")
    );

    let rewritten = post("e", "write to jane.doe@example.com or ops@mail.example.org");
    assert_eq!(
        assert_ok(&rewritten)["choices"][0]["text"],
        json!("write to [EMAIL] or [EMAIL]")
    );
    let record = record_of(&rewritten);
    let guards = &record["guards"];
    assert_eq!(guards[0]["verdict"], json!("allow"), "{record}");
    assert_eq!(guards[1]["stage"], json!("response"), "{record}");
    assert_eq!(guards[1]["verdict"], json!("rewrite"), "{record}");
    assert_eq!(guards[1]["changes"], json!({"email": 2}), "{record}");

    let failed = post("typo", "hello");
    assert_error_where(&failed, 502, "the failed guard", |message| {
        message.contains("guard \"typo\" failed") && message.contains("refused unchecked")
    });
    let record = record_of(&failed);
    assert_eq!(record["guards"][0]["verdict"], json!("error"), "{record}");
    let logged = "guard raised ProviderError: guard `typo`: unknown setting `wrods`";
    gw.wait_for_log(logged, 1);
    assert_eq!(gw.logs().matches(logged).count(), 1, "{}", gw.logs());
}

/// The example provider as an outside author builds it (`js-provider-outside`: the SDK installed
/// from its packed tarball, the component made by the package's own `gateway-plugin build`)
/// serves a completion as the repository's build does.
#[test]
fn the_provider_built_from_the_installed_sdk_serves_a_completion() {
    warm_cache();
    let upstream = OpenAiUpstream::script(vec![answer("Hello from outside", 4, 3)]);
    let var = unique("JS_OUTSIDE_KEY_");
    let gw = Gateway::builder()
        .route(route("jsout", OUTSIDE_PLUGIN, &upstream, &var).price(MODEL, PRICE.0, PRICE.1))
        .env(&var, PROVIDER_KEY)
        .start();
    let body = with(
        text_request(&gw.project_id, "jsout", MODEL, "Say hello"),
        "showUsage",
        json!(true),
    );
    let reply = assert_ok(&gw.post("/completions", &body));
    assert_eq!(
        reply["choices"][0]["text"],
        json!("Hello from outside"),
        "{reply}"
    );
    assert_eq!(reply["usage"], usage(4, 3), "{reply}");
    let record = success_record(&gw, &reply, "jsout", OUTSIDE_PLUGIN);
    assert_eq!(record["httpStatus"], json!(200), "{record}");
    let (sent, authorization) = sent(&upstream, 0);
    assert_eq!(sent["messages"][0]["content"], json!("Say hello"));
    assert_eq!(authorization, Some(format!("Bearer {PROVIDER_KEY}")));
}
