//! The config file as an operator meets it: unknown keys refused at start and on reload,
//! plugin settings in their own table.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gateway_test_support::upstream::openai::legacy_text;
use gateway_test_support::{
    Gateway, OpenAiUpstream, Route, assert_ok, post_with_provider_key, text_request,
};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-config-tests";
const PROVIDER_KEY: &str = "sk-test-caller-config";
/// How long a refused config may take to end `gateway serve`, or a reload to be seen: a
/// liveness bound on a slow shared machine, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `gateway serve --config FILE` until it exits; returns its status and stderr. A gateway
/// still running at the deadline is killed and the test fails: it should have refused to start.
fn serve_until_exit(config: &Path) -> (ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["serve", "--config"])
        .arg(config)
        .current_dir(config.parent().expect("the config is in a directory"))
        .env_remove("GATEWAY_CONFIG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn `gateway serve`");
    let mut stderr = child.stderr.take().expect("piped stderr");
    // Read while it runs, so a chatty gateway never blocks on a full pipe.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        match child.try_wait().expect("wait for `gateway serve`") {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = reader.join().unwrap_or_default();
                panic!("`gateway serve` was still running after {DEADLINE:?}; stderr:\n{stderr}");
            }
        }
    };
    (status, reader.join().expect("stderr reader"))
}

/// Runs `gateway serve` on a config of its own directory with `routes` (TOML, as an operator
/// writes it) after the usual top-level keys; asserts it refuses to start and returns its stderr.
fn refused_start(routes: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix("gateway-config-test-")
        .tempdir()
        .expect("create a temporary directory");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("create the plugins directory");
    let config = dir.path().join("gateway.toml");
    let quoted = |path: &Path| serde_json::to_string(&path.to_string_lossy()).expect("a string");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndatabase = {}\nplugins_dir = {}\ndemo_project = false\n\n{routes}",
            quoted(&dir.path().join("gateway.db")),
            quoted(&plugins),
        ),
    )
    .expect("write the config");

    let (status, stderr) = serve_until_exit(&config);
    assert!(!status.success(), "exited with {status}; stderr:\n{stderr}");
    assert!(
        !stderr.contains("gateway listening"),
        "it listened anyway:\n{stderr}"
    );
    stderr
}

#[test]
fn a_gateway_whose_route_has_an_unknown_key_does_not_start() {
    let stderr = refused_start(
        "[providers.demo]\nplugin = \"echo\"\ndefault_model = \"echo\"\nmemory_limt_mb = 128\n",
    );
    assert!(
        stderr.contains("providers.demo.memory_limt_mb"),
        "the key and its route are not named:\n{stderr}"
    );
    assert!(
        stderr.contains("`memory_limit_mb`"),
        "the known keys are not listed:\n{stderr}"
    );
}

#[test]
fn a_gateway_with_a_zero_limit_does_not_start() {
    let stderr = refused_start("[providers.demo]\nplugin = \"echo\"\ncpu_time_ms = 0\n");
    assert!(
        stderr.contains("providers.demo.cpu_time_ms") && stderr.contains("must be positive"),
        "the key and its problem are not named:\n{stderr}"
    );
}

/// The status of a text request to `route`.
fn status_of(gw: &Gateway, route: &str) -> u16 {
    gw.post(
        "/completions",
        &text_request(&gw.project_id, route, "echo", "hello"),
    )
    .status
}

/// Polls `GET /admin/config` until `done` holds for it.
fn wait_for_config(gw: &Gateway, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let config = gw.admin_config(ADMIN_TOKEN);
        if done(&config) {
            return config;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {what}; last /admin/config: {config}\nlogs:\n{}",
            gw.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_reload_with_an_unknown_route_key_is_refused_and_the_previous_routes_keep_serving() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start();
    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    assert_eq!(status_of(&gw, "demo"), 200);

    let added = |limit_key: &str| {
        format!(
            "{original}\n[providers.added]\nplugin = \"echo\"\ndefault_model = \"echo\"\n\
             {limit_key} = 128\n"
        )
    };
    gw.rewrite_config(&added("memory_limt_mb"));
    let refused = wait_for_config(&gw, "the edit refused", |c| c["rejected"].is_string());
    let reason = refused["rejected"].as_str().unwrap_or_default();
    assert!(
        reason.contains("providers.added.memory_limt_mb") && reason.contains("`memory_limit_mb`"),
        "{reason}"
    );
    assert_eq!(refused["routes"], json!(["demo"]));
    let logs = gw.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("config change refused"))
        .unwrap_or_else(|| panic!("no refusal in the log:\n{logs}"));
    assert!(line.contains("providers.added.memory_limt_mb"), "{line}");
    assert_eq!(status_of(&gw, "demo"), 200);
    assert_eq!(status_of(&gw, "added"), 404);

    // Spelt right, the same edit applies.
    gw.rewrite_config(&added("memory_limit_mb"));
    let applied = wait_for_config(&gw, "the corrected edit applied", |c| {
        c["rejected"].is_null() && c["routes"] == json!(["added", "demo"])
    });
    assert!(applied["rejected"].is_null(), "{applied}");
    assert_eq!(status_of(&gw, "added"), 200);
    assert_eq!(status_of(&gw, "demo"), 200);
}

#[test]
fn a_setting_in_the_settings_table_reaches_the_plugin() {
    let upstream = OpenAiUpstream::start();
    let base_url = upstream.base_url("/v1");
    let gw = Gateway::builder()
        .route(Route::openai("legacy", &base_url).setting("legacy_completions", "true"))
        // The same plugin without the setting: text goes to chat completions.
        .route(Route::openai("chat", &base_url))
        .start();
    let config = std::fs::read_to_string(gw.config_path()).expect("read the config");
    assert!(
        config.contains("[providers.legacy.settings]\nlegacy_completions = true\n"),
        "{config}"
    );

    let request = text_request(
        &gw.project_id,
        "legacy",
        "gpt-3.5-turbo-instruct",
        "Once upon a time",
    );
    let body = assert_ok(&post_with_provider_key(
        &gw,
        "/completions",
        PROVIDER_KEY,
        &request,
    ));
    assert_eq!(
        body["choices"][0]["text"],
        json!(legacy_text("Once upon a time"))
    );
    assert_eq!(upstream.single_request().path, "/v1/completions");

    let request = text_request(&gw.project_id, "chat", "gpt-4o-mini", "Once upon a time");
    // The fake upstream has no chat answer scripted; where the request went is the point.
    let _ = post_with_provider_key(&gw, "/completions", PROVIDER_KEY, &request);
    let paths: Vec<String> = upstream.requests().into_iter().map(|r| r.path).collect();
    assert!(
        paths.len() > 1 && paths[1..].iter().all(|p| p == "/v1/chat/completions"),
        "{paths:?}"
    );
}
