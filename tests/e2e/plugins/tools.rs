//! Tool plugins (`[mcp_servers.ID] plugin = "NAME"`, `wit/tool.wit`) served at `POST /mcp`: the
//! examples in Rust (weather over the host's HTTP import), Python (a calculator) and
//! JavaScript (text tools); the sandbox against `tests/plugins/test-tool`; and a hot reload
//! under load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gateway_test_support::mcp::{body, call, tool, tool_names};
use gateway_test_support::scrape::{scrape, value};
use gateway_test_support::{Gateway, OpenMeteoUpstream, Reply};
use serde_json::{Value, json};

/// The secret the test tool's server names in its settings (`token_env`).
const TOKEN: &str = "tool-secret-7c1d9e4f2a";

fn first_text(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

fn invocation(response: &gateway_test_support::client::Response) -> String {
    response
        .header("x-invocation-id")
        .expect("an invocation id")
        .to_owned()
}

#[test]
fn tool_plugins_in_rust_python_and_javascript_list_and_call_their_tools() {
    let weather = OpenMeteoUpstream::start();
    let base = weather.base_url("");
    let gw = Gateway::builder()
        .config_line("record_bodies = \"full\"")
        .tool_server(
            "weather",
            "rust-tool",
            &format!("allowed_hosts = [{base:?}]\nsettings = {{ base_url = {base:?} }}"),
        )
        .tool_server("calc", "python-tool", "")
        .tool_server("text", "js-tool", "")
        .start();

    let (response, answer) = call(&gw, &gw.key, "tools/list", json!({}));
    assert_eq!(response.status, 200, "{answer}");
    let names = tool_names(&answer);
    for expected in [
        "weather__current",
        "calc__add",
        "calc__multiply",
        "calc__divide",
        "calc__mean",
        "text__word_count",
        "text__slugify",
        "text__reverse",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let listed = |name: &str| -> Value {
        answer["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not listed"))
    };
    let current = listed("weather__current");
    assert_eq!(
        current["inputSchema"]["required"],
        json!(["latitude", "longitude"])
    );
    assert_eq!(current["annotations"]["readOnlyHint"], true, "{current}");
    assert_eq!(current["outputSchema"]["type"], "object", "{current}");
    assert_eq!(listed("calc__mean")["title"], "Mean");
    assert_eq!(
        listed("calc__add")["description"],
        "Adds two numbers: a + b."
    );

    // Rust: the weather through the host's HTTP import, to the server's allowed host only.
    let (response, answer) = tool(
        &gw,
        "weather__current",
        json!({"latitude": 52.5, "longitude": 13.4}),
    );
    assert_eq!(response.status, 200, "{answer}");
    let now = &answer["result"]["structuredContent"];
    assert_eq!(
        (now["temperature_c"].as_f64(), now["wind_kmh"].as_f64()),
        (Some(5.25), Some(1.34)),
        "{answer}"
    );
    let asked = weather.requests();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0]
            .path
            .starts_with("/v1/forecast?latitude=52.5&longitude=13.4&current="),
        "{}",
        asked[0].path
    );
    let record = gw.record(&invocation(&response));
    assert_eq!(
        (
            record["type"].as_str(),
            record["route"].as_str(),
            record["model"].as_str(),
            record["status"].as_str()
        ),
        (
            Some("tool"),
            Some("weather"),
            Some("current"),
            Some("success")
        ),
        "{record}"
    );
    assert_eq!(
        body(&record["request"]),
        json!({"latitude": 52.5, "longitude": 13.4})
    );
    assert_eq!(
        body(&record["response"])["structuredContent"]["temperature_c"],
        5.25
    );
    // Out of range: a result the model reads (isError), recorded as an error.
    let (response, answer) = tool(
        &gw,
        "weather__current",
        json!({"latitude": 91, "longitude": 0}),
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(gw.record(&invocation(&response))["status"], "error");

    // Python.
    let (_, answer) = tool(&gw, "calc__add", json!({"a": 2, "b": 40}));
    assert_eq!(first_text(&answer), "42");
    let (_, answer) = tool(&gw, "calc__mean", json!({"values": [1, 2, 6]}));
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"mean": 3.0, "count": 3}),
        "{answer}"
    );
    let (_, answer) = tool(&gw, "calc__divide", json!({"a": 1, "b": 0}));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(first_text(&answer).contains("divide by zero"), "{answer}");

    // JavaScript.
    let (_, answer) = tool(&gw, "text__reverse", json!({"text": "abc"}));
    assert_eq!(first_text(&answer), "cba");
    let (_, answer) = tool(&gw, "text__word_count", json!({"text": "one two\nthree"}));
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({"words": 3, "characters": 13, "lines": 2}),
        "{answer}"
    );

    // Arguments the tool refuses are JSON-RPC's invalid params, in every language.
    for (name, arguments) in [
        (
            "weather__current",
            json!({"latitude": "north", "longitude": 1}),
        ),
        ("calc__add", json!({"a": 1})),
        ("text__reverse", json!({})),
    ] {
        let (response, answer) = tool(&gw, name, arguments);
        assert_eq!(error_code(&answer), -32602, "{name}: {answer}");
        assert_eq!(
            gw.record(&invocation(&response))["status"],
            "error",
            "{name}"
        );
    }

    // A key's tool scope holds for plugin tools as for remote ones.
    let project = gw.create_project("scoped");
    let scoped = gw
        .cli(&["key", "create", &project.id, "--tools", "calc__*"])
        .checked("key create --tools")
        .last_line();
    let (_, answer) = call(&gw, &scoped, "tools/list", json!({}));
    let names = tool_names(&answer);
    assert!(
        names.iter().all(|n| n.starts_with("calc__")) && names.contains(&"calc__add"),
        "{names:?}"
    );
    let (_, answer) = call(
        &gw,
        &scoped,
        "tools/call",
        json!({"name": "text__reverse", "arguments": {"text": "x"}}),
    );
    assert_eq!(error_code(&answer), -32000, "{answer}");
}

/// A gateway with the test tool as server `t` (its table's `rest` added), a server whose
/// plugin is missing, and the servers `also` (id, plugin).
fn test_tool_gateway(upstream: &str, rest: &str, also: &[(&str, &str)]) -> Gateway {
    let mut builder = Gateway::builder();
    for (id, plugin) in also {
        builder = builder.tool_server(id, plugin, "");
    }
    builder
        .config_line("record_bodies = \"full\"")
        .env("TEST_TOOL_TOKEN", TOKEN)
        .tool_server(
            "t",
            "test-tool",
            &format!(
                "allowed_hosts = [{upstream:?}]\ncpu_time_ms = 300\nmemory_limit_mb = 32\n\
                 settings = {{ token_env = \"TEST_TOOL_TOKEN\" }}\n{rest}"
            ),
        )
        .config_line("[mcp_servers.gone]\nplugin = \"no-such-plugin\"\n")
        .start()
}

#[test]
fn a_tool_plugin_runs_in_its_sandbox_and_its_secrets_stay_out() {
    let allowed = OpenMeteoUpstream::start();
    let elsewhere = OpenMeteoUpstream::start();
    let gw = test_tool_gateway(&allowed.base_url(""), "", &[]);

    // The server's allowed host answers; any other is refused inside the plugin.
    let url = format!(
        "{}/v1/forecast?latitude=1&longitude=2",
        allowed.base_url("")
    );
    let (_, answer) = tool(&gw, "t__fetch", json!({"url": url}));
    assert!(first_text(&answer).starts_with("200 "), "{answer}");
    let url = format!(
        "{}/v1/forecast?latitude=1&longitude=2",
        elsewhere.base_url("")
    );
    let (response, answer) = tool(&gw, "t__fetch", json!({"url": url}));
    assert_eq!(error_code(&answer), -32000, "{answer}");
    assert!(elsewhere.requests().is_empty());
    assert_eq!(gw.record(&invocation(&response))["status"], "error");

    // CPU and memory limits end the call, not the gateway; the caller learns no plugin text.
    for runaway in ["t__spin", "t__hog"] {
        let (response, answer) = tool(&gw, runaway, json!({}));
        assert_eq!(error_code(&answer), -32000, "{runaway}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("crashed"),
            "{runaway}: {answer}"
        );
        let record = gw.record(&invocation(&response));
        assert_eq!(record["status"], "error", "{runaway}: {record}");
    }
    let (_, answer) = tool(&gw, "t__reverse", json!({"text": "still here"}));
    assert_eq!(first_text(&answer), "ereh llits");

    // The secret its settings name reaches the plugin, never the caller or the record.
    let (response, answer) = tool(&gw, "t__leak", json!({}));
    assert_eq!(first_text(&answer), "the token is [redacted]", "{answer}");
    let record = gw.record(&invocation(&response));
    assert!(!record.to_string().contains(TOKEN), "{record}");
    assert!(!gw.logs().contains(TOKEN));

    // A `failed` error names the server; an unknown tool is invalid params.
    let (_, answer) = tool(&gw, "t__fail", json!({}));
    assert_eq!(error_code(&answer), -32000);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MCP server t: the test tool fails on purpose (token [redacted])"),
        "{answer}"
    );
    let (_, answer) = tool(&gw, "t__nope", json!({}));
    assert_eq!(error_code(&answer), -32602, "{answer}");

    // Every kind of content block, as MCP writes it.
    let (_, answer) = tool(&gw, "t__picture", json!({}));
    let content = &answer["result"]["content"];
    let kinds: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "audio", "resource_link", "resource"]
    );
    assert_eq!(content[1]["data"], "iVBORw==");
    assert_eq!(content[1]["mimeType"], "image/png");
    assert_eq!(
        content[4]["resource"],
        json!({"uri": "mem://note", "mimeType": "text/plain", "text": "a note"})
    );

    // A server whose plugin is not loaded is left out of the list, and a call to it fails.
    let (_, answer) = call(&gw, &gw.key, "tools/list", json!({}));
    let names = tool_names(&answer);
    assert!(
        names.contains(&"t__reverse") && !names.iter().any(|n| n.starts_with("gone__")),
        "{names:?}"
    );
    let (_, answer) = tool(&gw, "gone__anything", json!({}));
    assert_eq!(error_code(&answer), -32000);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no-such-plugin"),
        "{answer}"
    );

    // The metrics count every call by server, listed tool and outcome; a tool no server
    // lists is `other`, a server no config names `none`.
    let (_, answer) = tool(&gw, "nowhere__x", json!({}));
    assert_eq!(error_code(&answer), -32602);
    let samples = scrape(&gw, None);
    let calls = |server: &str, tool: &str, outcome: &str| {
        value(
            &samples,
            "gateway_mcp_tool_calls_total",
            &[("server", server), ("tool", tool), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("t", "reverse", "success"), 1.0);
    assert_eq!(calls("t", "fetch", "success"), 1.0);
    assert_eq!(calls("t", "fetch", "failed"), 1.0);
    assert_eq!(calls("t", "spin", "failed"), 1.0);
    assert_eq!(calls("t", "fail", "failed"), 1.0);
    assert_eq!(calls("t", "other", "invalid"), 1.0);
    assert_eq!(calls("gone", "other", "failed"), 1.0);
    assert_eq!(calls("none", "none", "invalid"), 1.0);
    assert_eq!(
        value(
            &samples,
            "gateway_mcp_tool_call_duration_seconds_count",
            &[("server", "t"), ("tool", "reverse")]
        ),
        1.0
    );
}

#[test]
fn a_tool_plugin_is_replaced_under_load_and_calls_in_flight_finish_on_the_old_one() {
    // Holds its answer a while: a call to it is in flight across the swap.
    let slow = OpenMeteoUpstream::always(
        Reply::json(200, &json!({"slow": true})).slowly(Duration::from_millis(1500)),
    );
    // `js-tool` served from the start too, so that the version swapped in below is compiled
    // (and in the compiled-plugin cache) already: what is timed is the reload, not Cranelift
    // compiling 12 MB of JavaScript engine on a busy machine.
    let gw = Arc::new(test_tool_gateway(
        &slow.base_url(""),
        "timeout_secs = 30",
        &[("js", "js-tool")],
    ));
    let (_, answer) = tool(&gw, "t__reverse", json!({"text": "abc"}));
    assert_eq!(first_text(&answer), "cba");

    // Callers of the tool both versions have (`reverse`), without a pause.
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, failures) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (gw, stop, calls, failures) =
                (gw.clone(), stop.clone(), calls.clone(), failures.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let (_, answer) = tool(&gw, "t__reverse", json!({"text": "load"}));
                    calls.fetch_add(1, Ordering::Relaxed);
                    if answer["result"]["content"][0]["text"] != "daol" {
                        failures.fetch_add(1, Ordering::Relaxed);
                        eprintln!("a call during the swap: {answer}");
                    }
                }
            })
        })
        .collect();
    let in_flight = {
        let (gw, url) = (gw.clone(), format!("{}/slow", slow.base_url("")));
        std::thread::spawn(move || tool(&gw, "t__fetch", json!({"url": url})).1)
    };
    slow.wait_until("the slow call reaches the upstream", |up| {
        !up.requests().is_empty()
    });

    // The JavaScript example replaces the test tool: it has `reverse`, and no `fetch`.
    gw.install_plugin("js-tool", "test-tool");
    let swapped = Instant::now();
    let deadline = swapped + Duration::from_secs(30);
    loop {
        let (_, answer) = call(&gw, &gw.key, "tools/list", json!({}));
        if tool_names(&answer).contains(&"t__word_count") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new version never served; the gateway's log:\n{}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "the new version served {} ms after the rename",
        swapped.elapsed().as_millis()
    );
    // The call that started on the old version ends on it.
    let answer = in_flight.join().expect("the slow call");
    assert!(
        first_text(&answer).starts_with("200 {\"slow\":true}"),
        "{answer}"
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for thread in load {
        thread.join().expect("a caller");
    }
    assert!(calls.load(Ordering::Relaxed) > 0);
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "of {} calls",
        calls.load(Ordering::Relaxed)
    );
    // The old version's `fetch` is gone with it.
    let (_, answer) = tool(&gw, "t__fetch", json!({"url": "http://127.0.0.1:1/"}));
    assert_eq!(error_code(&answer), -32602, "{answer}");
}
