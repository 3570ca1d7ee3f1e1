//! What a plugin keeps between requests (the `kv` import) and the secrets a route's settings
//! name (`NAME_env`, `NAME_file_env`), through the real gateway with the `stateful` test
//! plugin, whose prompt is a command (`set`, `get`, `delete`, `mint`, `secret`).

use gateway_test_support::{Gateway, Route, assert_ok, text_request, unique};
use serde_json::Value;

/// Runs `command` on `route` and answers the plugin's text.
fn run(gw: &Gateway, route: &str, command: &str) -> String {
    let body = assert_ok(&gw.post(
        "/completions",
        &text_request(&gw.project_id, route, "state", command),
    ));
    match &body["choices"][0]["text"] {
        Value::String(text) => text.clone(),
        other => panic!("no text in {body}: {other}"),
    }
}

fn stateful(id: &str) -> Route {
    Route::new(id, "stateful").default_model("state")
}

#[test]
fn entries_last_between_requests_and_each_route_sees_only_its_own() {
    let gw = Gateway::builder()
        .route(stateful("a"))
        .route(stateful("b"))
        .start();
    assert_eq!(run(&gw, "a", "set token t-1 60000"), "ok");
    assert_eq!(
        run(&gw, "a", "get token"),
        "t-1",
        "a later request reads it"
    );
    assert_eq!(run(&gw, "b", "get token"), "none", "another route does not");
    assert_eq!(run(&gw, "b", "set token t-2 60000"), "ok");
    assert_eq!(run(&gw, "a", "get token"), "t-1");
    assert_eq!(run(&gw, "b", "get token"), "t-2");
    assert_eq!(run(&gw, "a", "delete token"), "ok");
    assert_eq!(run(&gw, "a", "get token"), "none");
    assert_eq!(run(&gw, "b", "get token"), "t-2");
}

#[test]
fn a_value_is_minted_once_until_its_ttl_ends() {
    let gw = Gateway::builder().route(stateful("s")).start();
    assert_eq!(run(&gw, "s", "mint tok 1500"), "minted 1");
    for _ in 0..5 {
        assert_eq!(run(&gw, "s", "mint tok 1500"), "kept 1");
    }
    std::thread::sleep(std::time::Duration::from_millis(1600));
    assert_eq!(
        run(&gw, "s", "mint tok 1500"),
        "minted 2",
        "expired, so minted again"
    );
    assert_eq!(run(&gw, "s", "mint tok 1500"), "kept 2");
}

#[test]
fn over_its_bounds_a_route_loses_its_oldest_entries() {
    let gw = Gateway::builder()
        .route(stateful("small").key("kv_max_entries", "2"))
        .route(stateful("tiny").key("kv_max_bytes", "16"))
        .start();
    for key in ["k1", "k2", "k3"] {
        assert_eq!(run(&gw, "small", &format!("set {key} v 0")), "ok");
    }
    assert_eq!(run(&gw, "small", "get k1"), "none", "the oldest went");
    assert_eq!(run(&gw, "small", "get k2"), "v");
    assert_eq!(run(&gw, "small", "get k3"), "v");

    // 16 bytes: "a" + 10 bytes fits, a second such entry pushes the first out, and an entry
    // larger than the whole space is not kept.
    assert_eq!(run(&gw, "tiny", "set a 0123456789 0"), "ok");
    assert_eq!(run(&gw, "tiny", "set b 0123456789 0"), "ok");
    assert_eq!(run(&gw, "tiny", "get a"), "none");
    assert_eq!(run(&gw, "tiny", "get b"), "0123456789");
    assert_eq!(run(&gw, "tiny", "set c 0123456789abcdefg 0"), "ok");
    assert_eq!(run(&gw, "tiny", "get c"), "none");
    assert_eq!(run(&gw, "tiny", "get b"), "0123456789");
}

#[test]
fn settings_name_secrets_the_plugin_gets_and_the_gateway_never_shows() {
    let dir = std::env::temp_dir().join(unique("secrets"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("service-account.json");
    let file_secret = "file-secret-5b2e9a7c";
    std::fs::write(&file, file_secret).expect("write the key file");
    let env_secret = "env-secret-81f0c3d2";
    let gw = Gateway::builder()
        .env("GW_STATE_TEST_SECRET", env_secret)
        .env("GW_STATE_TEST_FILE", file.to_str().expect("utf-8 path"))
        .route(
            stateful("s")
                .setting("access_key_env", "\"GW_STATE_TEST_SECRET\"")
                .setting("credentials_file_env", "\"GW_STATE_TEST_FILE\"")
                .setting("token_env", "\"GW_STATE_TEST_UNSET\""),
        )
        .start();
    let reversed = |s: &str| s.chars().rev().collect::<String>();
    assert_eq!(run(&gw, "s", "secret access_key"), reversed(env_secret));
    assert_eq!(
        run(&gw, "s", "secret credentials_file"),
        reversed(file_secret)
    );
    assert_eq!(
        run(&gw, "s", "secret token"),
        "none",
        "an unset variable gives none"
    );
    assert_eq!(run(&gw, "s", "secret access_key_env"), "none");

    // The value itself is redacted from what the plugin answers (and so from the record)
    // like a provider key; what a caller sends is its own and recorded as sent.
    assert_eq!(run(&gw, "s", &format!("set k {env_secret} 0")), "ok");
    let body = assert_ok(&gw.post(
        "/completions",
        &text_request(&gw.project_id, "s", "state", "get k"),
    ));
    assert_eq!(body["choices"][0]["text"], "[redacted]", "{body}");
    let id = body["invocationId"].as_str().expect("invocation id");
    let record = gw.record(id).to_string();
    assert!(!record.contains(env_secret), "{record}");
    let logs = gw.logs();
    assert!(
        !logs.contains(env_secret) && !logs.contains(file_secret),
        "{logs}"
    );
    assert!(
        logs.contains("GW_STATE_TEST_UNSET"),
        "the unset variable is named in the log: {logs}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
