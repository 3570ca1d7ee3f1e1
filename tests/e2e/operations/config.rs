//! The config file as an operator meets it: unknown keys refused at start and on reload,
//! plugin settings in their own table, updated in place as Kubernetes updates a ConfigMap.

use std::time::{Duration, Instant};

use gateway_test_support::refused::refused_start;
use gateway_test_support::upstream::openai::legacy_text;
use gateway_test_support::{
    Gateway, OpenAiUpstream, Route, assert_ok, post_with_provider_key, text_request,
};
use serde_json::{Value, json};

const ADMIN_TOKEN: &str = "admin-secret-for-the-config-tests-0123456789";
const PROVIDER_KEY: &str = "sk-test-caller-config";
/// How long a refused config may take to end `gateway serve`, or a reload to be seen: a
/// liveness bound on a slow shared machine, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(60);

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
    gw.wait_for_log("config change refused", 1);
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

/// A ConfigMap volume as Kubernetes writes it: each file a link through `..data`, a link to the
/// current version's directory; an update writes a new directory and renames a new `..data`
/// link over the old one, so the config's own name sees no event. The gateway follows it.
#[test]
fn a_config_updated_as_kubernetes_updates_a_configmap_is_reloaded() {
    use std::os::unix::fs::symlink;

    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start();
    let file = gw.config_path().to_owned();
    let dir = file.parent().expect("the config's directory").to_owned();
    let original = std::fs::read_to_string(&file).expect("read the config");
    let version = |n: u32, text: &str| {
        let at = dir.join(format!("..2026_12_01_{n}"));
        std::fs::create_dir(&at).expect("a version's directory");
        std::fs::write(at.join("gateway.toml"), text).expect("a version's config");
        at
    };
    // The mount as the gateway would have found it: the same config, through the links.
    symlink(version(1, &original), dir.join("..data")).expect("..data");
    symlink("..data/gateway.toml", dir.join("gateway.toml.link")).expect("the file's link");
    std::fs::rename(dir.join("gateway.toml.link"), &file).expect("the file as a link");
    wait_for_config(&gw, "the linked config", |c| c["routes"] == json!(["demo"]));

    // The update: a new version, a new ..data renamed over the old.
    let added =
        format!("{original}\n[providers.added]\nplugin = \"echo\"\ndefault_model = \"echo\"\n");
    symlink(version(2, &added), dir.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("the swap");
    assert_eq!(std::fs::read_to_string(&file).expect("the file"), added);
    wait_for_config(&gw, "the ConfigMap's update applied", |c| {
        c["rejected"].is_null() && c["routes"] == json!(["added", "demo"])
    });
    assert_eq!(status_of(&gw, "added"), 200);
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

#[test]
fn json_logs_are_one_object_per_line_carrying_the_requests_invocation_id() {
    let gw = Gateway::builder()
        .route(Route::echo("demo"))
        .config_line("log_format = \"json\"")
        .start();
    let response = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "hello"),
    );
    let id = assert_ok(&response)["invocationId"]
        .as_str()
        .expect("an invocationId")
        .to_owned();
    let deadline = Instant::now() + DEADLINE;
    let answered = loop {
        let logs = gw.logs();
        let lines: Vec<Value> = logs
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"))
            })
            .collect();
        let found = lines.into_iter().find(|line| {
            line["span"]["invocation_id"] == json!(id) && line["message"] == json!("answered")
        });
        if let Some(line) = found {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "no answered line for {id}:\n{logs}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(answered["level"], json!("INFO"), "{answered}");
    assert_eq!(answered["status"], json!(200), "{answered}");
    assert_eq!(
        answered["span"]["path"],
        json!("/completions"),
        "{answered}"
    );
    assert!(answered["timestamp"].is_string(), "{answered}");
}

/// An edit of a key read only at start is applied at the next restart, and the log names each
/// such key that changed, only those.
#[test]
fn a_reload_that_changes_start_only_keys_names_each_in_the_log() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    let mut config: toml::Table = std::fs::read_to_string(gw.config_path())
        .expect("read the config")
        .parse()
        .expect("the config is TOML");
    config.insert("workers".to_owned(), toml::Value::Integer(3));
    config.insert("metrics".to_owned(), toml::Value::Boolean(false));
    config.insert("request_timeout_secs".to_owned(), toml::Value::Integer(7));
    gw.rewrite_config(&toml::to_string(&config).expect("serialize the config"));
    gw.wait_for_log("config reloaded", 1);
    let logs = gw.logs();
    let mut keys: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("takes effect at the next restart"))
        .map(|line| {
            [
                "workers",
                "metrics",
                "request_timeout_secs",
                "listen",
                "database",
            ]
            .into_iter()
            .find(|key| line.contains(&format!("key=\"{key}\"")))
            .unwrap_or_else(|| panic!("a warning naming another key: {line}"))
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["metrics", "workers"], "{logs}");
}
