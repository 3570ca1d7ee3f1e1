//! `gateway plugin new`: the command writes the projects of `gateway-scaffold`'s templates, and
//! what those projects build into serves. `cargo xtask test` rendered every language and kind
//! from the same templates against the SDKs as outside authors install them, ran each
//! project's own tests and built it (`scaffold-LANG-KIND.wasm` among the test plugins); here
//! the gateway loads the nine components: each language's provider serves a chat and a stream
//! of the invented API the templates speak, each guard refuses a blocked word, each tool looks
//! up an item over HTTP.

use gateway_scaffold::{Kind, Lang, Name, Sdk, render};
use gateway_test_support::harness::{gateway_binary, one_at_a_time};
use gateway_test_support::mcp::{call, tool_names};
use gateway_test_support::sse::{event_data, split_events};
use gateway_test_support::upstream::{FakeUpstream, Provider, ReceivedRequest};
use gateway_test_support::{Gateway, Reply, Response, Route, built_plugins_dir, unique};
use serde_json::{Value, json};

const LANGS: [&str; 3] = ["rust", "python", "js"];
const KEY_VAR: &str = "SCAFFOLD_EXAMPLE_KEY";
const KEY: &str = "example-key-0123456789";

/// The API the templates' provider and tool call: `POST /v1/generate` (JSON, or
/// newline-delimited JSON when `stream`), `GET /items/ID`.
struct ExampleApi;

impl Provider for ExampleApi {
    const NAME: &'static str = "fake-example-api";

    fn is_generation(_path: &str) -> bool {
        false
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        let path = request.path_only();
        if let Some(id) = path.strip_prefix("/items/") {
            return Some(match id {
                "42" => Reply::json(200, &json!({"id": "42", "name": "The answer"})),
                _ => Reply::json(404, &json!({"error": "not found"})),
            });
        }
        if path != "/v1/generate" {
            return None;
        }
        let body: Value = serde_json::from_slice(&request.body).ok()?;
        let usage = json!({"input_tokens": 5, "output_tokens": 2});
        if body["stream"] == json!(true) {
            let lines = [
                json!({"text": "Hel"}),
                json!({"text": "lo"}),
                json!({"finish_reason": "stop", "usage": usage}),
            ];
            return Some(Reply::Pieces {
                status: 200,
                content_type: "application/x-ndjson".into(),
                headers: Vec::new(),
                pieces: lines.iter().map(|line| format!("{line}\n")).collect(),
                gap: gateway_test_support::upstream::EVENT_GAP,
                ending: gateway_test_support::upstream::Ending::Finish,
            });
        }
        Some(Reply::json(
            200,
            &json!({"text": "Hello", "finish_reason": "stop", "usage": usage}),
        ))
    }

    fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({"error": message}))
    }
}

fn plugin(lang: &str, kind: &str) -> String {
    let name = format!("scaffold-{lang}-{kind}");
    let file = built_plugins_dir().join(format!("{name}.wasm"));
    assert!(
        file.is_file(),
        "{} is missing: `cargo xtask test` (or `cargo xtask outside`) builds it",
        file.display()
    );
    name
}

fn post_openai(gw: &Gateway, body: &Value) -> Response {
    let auth = format!("Bearer {}", gw.key);
    gw.request(
        "POST",
        "/v1/chat/completions",
        None,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

#[test]
fn each_languages_provider_serves_a_chat_and_a_stream() {
    let upstream = FakeUpstream::<ExampleApi>::start();
    let mut builder = Gateway::builder().env(KEY_VAR, KEY);
    for lang in LANGS {
        builder = builder.route(
            Route::new(lang, &plugin(lang, "provider"))
                .base_url(&upstream.base_url("/v1"))
                .api_key_env(KEY_VAR),
        );
    }
    let gw = one_at_a_time(|| builder.start());
    for lang in LANGS {
        let chat = json!({
            "model": format!("{lang}/example-model"),
            "messages": [{"role": "user", "content": "Say hello"}],
            "max_tokens": 16,
        });
        let response = post_openai(&gw, &chat);
        assert_eq!(response.status, 200, "{lang}: {}", response.text());
        let body = response.json();
        assert_eq!(
            body["choices"][0]["message"]["content"], "Hello",
            "{lang}: {body}"
        );
        assert_eq!(
            body["choices"][0]["finish_reason"], "stop",
            "{lang}: {body}"
        );
        assert_eq!(body["usage"]["prompt_tokens"], 5, "{lang}: {body}");
        assert_eq!(body["usage"]["completion_tokens"], 2, "{lang}: {body}");

        let mut streamed = chat.clone();
        streamed["stream"] = json!(true);
        streamed["stream_options"] = json!({"include_usage": true});
        let auth = format!("Bearer {}", gw.key);
        let mut conn = gw.open_stream_with_headers(
            "/v1/chat/completions",
            None,
            &[("Authorization", &auth)],
            &streamed,
        );
        let raw = String::from_utf8_lossy(&conn.read_to_end()).into_owned();
        assert_eq!(conn.status, 200, "{lang}: {raw}");
        let chunks: Vec<Value> = split_events(&raw)
            .iter()
            .filter_map(|e| event_data(e))
            .filter(|data| data != "[DONE]")
            .map(|data| serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}")))
            .collect();
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, "Hello", "{lang}: {raw}");
        let usage = chunks.iter().rev().find(|c| c["usage"].is_object());
        assert_eq!(
            usage.map(|c| c["usage"]["completion_tokens"].clone()),
            Some(json!(2)),
            "{lang}: {raw}"
        );
    }
    let sent = upstream.requests();
    assert_eq!(sent.len(), 6, "{sent:?}");
    for request in &sent {
        assert_eq!(request.path, "/v1/generate");
        let expected = format!("Bearer {KEY}");
        assert_eq!(request.header("authorization"), Some(expected.as_str()));
        let body: Value = serde_json::from_slice(&request.body).expect("JSON");
        assert_eq!(body["model"], "example-model", "{body}");
        assert_eq!(body["max_tokens"], 16, "{body}");
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "Say hello"}])
        );
    }
}

#[test]
fn each_languages_guard_refuses_a_blocked_word() {
    let mut builder = Gateway::builder();
    for lang in LANGS {
        let id = format!("words-{lang}");
        builder = builder
            .guard(
                &id,
                &plugin(lang, "guard"),
                "settings = { words = [\"project-x\"] }",
            )
            .route(Route::echo(lang).key("guards", &format!("[{id:?}]")));
    }
    let gw = one_at_a_time(|| builder.start());
    for lang in LANGS {
        let ask = |text: &str| {
            post_openai(
                &gw,
                &json!({"model": format!("{lang}/echo"), "messages": [{"role": "user", "content": text}]}),
            )
        };
        let refused = ask("What is Project-X?");
        assert_eq!(refused.status, 400, "{lang}: {}", refused.text());
        let message = refused.json()["error"]["message"].to_string();
        assert!(
            message.contains("words-") && message.contains("mentions \\\"project-x\\\""),
            "{lang}: {message}"
        );
        let allowed = ask("What is the weather?");
        assert_eq!(allowed.status, 200, "{lang}: {}", allowed.text());
    }
}

#[test]
fn each_languages_tool_looks_up_an_item() {
    let api = FakeUpstream::<ExampleApi>::start();
    let base = api.base_url("");
    let mut builder = Gateway::builder();
    for lang in LANGS {
        builder = builder.tool_server(
            &format!("items-{lang}"),
            &plugin(lang, "tool"),
            &format!("allowed_hosts = [{base:?}]\nsettings = {{ base_url = {base:?} }}"),
        );
    }
    let gw = one_at_a_time(|| builder.start());
    let (response, answer) = call(&gw, &gw.key, "tools/list", json!({}));
    assert_eq!(response.status, 200, "{answer}");
    let names = tool_names(&answer);
    for lang in LANGS {
        let tool = format!("items-{lang}__lookup");
        assert!(names.contains(&tool.as_str()), "{tool}: {names:?}");
        let lookup = |id: &str| {
            let (response, answer) = call(
                &gw,
                &gw.key,
                "tools/call",
                json!({"name": tool, "arguments": {"id": id}}),
            );
            assert_eq!(response.status, 200, "{lang}: {answer}");
            answer["result"].clone()
        };
        let found = lookup("42");
        // `isError` is left out of a result that is not one.
        assert_ne!(found["isError"], json!(true), "{lang}: {found}");
        assert_eq!(
            found["structuredContent"],
            json!({"id": "42", "name": "The answer"}),
            "{lang}: {found}"
        );
        let missing = lookup("7");
        assert_eq!(missing["isError"], json!(true), "{lang}: {missing}");
        let bad = lookup("../x");
        assert_eq!(bad["isError"], json!(true), "{lang}: {bad}");
    }
    let paths: Vec<String> = api.requests().into_iter().map(|r| r.path).collect();
    // Three languages, each sending `42` and `7`; the bad id never left the plugin.
    assert_eq!(
        paths.iter().filter(|p| *p == "/items/42").count(),
        3,
        "{paths:?}"
    );
    assert_eq!(
        paths.iter().filter(|p| *p == "/items/7").count(),
        3,
        "{paths:?}"
    );
    assert_eq!(paths.len(), 6, "{paths:?}");
}

/// What `gateway plugin new` writes is `render`'s output, byte for byte, for every language and
/// kind: the files CI built and tested. Bad names and folders in use are refused with nothing
/// written.
#[test]
fn the_command_writes_the_projects_ci_checked() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let sdk = scratch.path().join("sdk");
    std::fs::create_dir(&sdk).expect("the SDK folder");
    let sdk_path = std::fs::canonicalize(&sdk).expect("absolute");
    let gateway = |args: &[&str]| {
        std::process::Command::new(gateway_binary())
            .args(args)
            .current_dir(scratch.path())
            .env_remove("GATEWAY_CONFIG")
            .output()
            .expect("the gateway runs")
    };
    for lang in [Lang::Rust, Lang::Python, Lang::Js] {
        for kind in [Kind::Provider, Kind::Guard, Kind::Tool] {
            let name = unique("p").to_ascii_lowercase();
            let dir = scratch.path().join(&name);
            let out = gateway(&[
                "plugin",
                "new",
                &name,
                "--lang",
                lang.as_str(),
                "--kind",
                kind.as_str(),
                "--dir",
                &dir.display().to_string(),
                "--sdk",
                &sdk.display().to_string(),
            ]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let expected = render(
                lang,
                kind,
                &Name::parse(&name).expect("a name"),
                &Sdk::Path(sdk_path.clone()),
            );
            let mut written = Vec::new();
            collect(&dir, &dir, &mut written);
            written.sort();
            let mut paths: Vec<String> = expected.iter().map(|f| f.path.to_owned()).collect();
            paths.sort();
            assert_eq!(written, paths, "{}/{}", lang.as_str(), kind.as_str());
            for file in &expected {
                let text = std::fs::read_to_string(dir.join(file.path)).expect("written");
                assert_eq!(text, file.text, "{}", file.path);
                assert!(stdout.contains(file.path), "{stdout}");
            }
        }
    }

    // Without --sdk, a gateway built from a checkout uses that checkout's SDK.
    let out = gateway(&["plugin", "new", "acme", "--lang", "rust"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest =
        std::fs::read_to_string(scratch.path().join("acme/Cargo.toml")).expect("Cargo.toml");
    let checkout_sdk = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../plugin-sdk"))
        .expect("the checkout's SDK");
    assert!(
        manifest.contains(&format!(
            "gateway-plugin-sdk = {{ path = \"{}\" }}",
            checkout_sdk.display()
        )),
        "{manifest}"
    );

    // A folder in use is left alone; a bad name is refused before anything is written.
    let again = gateway(&["plugin", "new", "acme", "--lang", "python"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    assert!(!scratch.path().join("acme/plugin.toml").exists());
    let bad = gateway(&["plugin", "new", "Bad_Name", "--lang", "js"]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cannot name a plugin"));
    assert!(!scratch.path().join("Bad_Name").exists());
}

fn collect(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("readable") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            let relative = path.strip_prefix(root).expect("under root");
            out.push(relative.display().to_string());
        }
    }
}
