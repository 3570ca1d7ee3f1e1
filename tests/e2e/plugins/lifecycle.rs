//! Plugin lifecycle: hot reload of the plugins directory, the compiled-plugin
//! cache, and the operator's view of plugins (`GET /admin/plugins`,
//! `gateway plugins list`).

use std::path::Path;
use std::time::{Duration, Instant};

use gateway_test_support::{Gateway, Route, text_request};
use serde_json::Value;

const ADMIN_TOKEN: &str = "admin-secret-for-the-lifecycle-tests-0123456789";

/// Asks until `done` holds for the response; the watcher needs a moment.
fn eventually(gw: &Gateway, route: &str, what: &str, done: impl Fn(u16, &Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = gw.post(
            "/completions",
            &text_request(&gw.project_id, route, "any", "hello there"),
        );
        let body = response.json();
        if done(response.status, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {what}; last answer {}: {body}",
            response.status
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn admin_plugins(gw: &Gateway) -> Vec<Value> {
    let response = gw.get("/admin/plugins", Some(ADMIN_TOKEN));
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["plugins"]
        .as_array()
        .expect("plugins is an array")
        .clone()
}

fn plugin_row(gw: &Gateway, plugin: &str) -> Value {
    admin_plugins(gw)
        .into_iter()
        .find(|row| row["plugin"] == plugin)
        .unwrap_or_else(|| panic!("no row for plugin {plugin}"))
}

fn lifecycle_gateway() -> Gateway {
    Gateway::builder()
        .route(Route::echo("demo"))
        // No such plugin at start: the test installs it while the gateway runs.
        .route(Route::new("late", "latecomer"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start()
}

#[test]
fn a_plugin_dropped_in_serves_without_restart_and_is_replaced_then_removed() {
    let gw = lifecycle_gateway();
    let missing = gw.post(
        "/completions",
        &text_request(&gw.project_id, "late", "any", "hello"),
    );
    assert_eq!(missing.status, 503, "{}", missing.text());
    assert!(missing.json()["invocationId"].is_string());

    // New file: served by the echo plugin under the name the route uses.
    gw.install_plugin("echo", "latecomer");
    let body = eventually(&gw, "late", "the new plugin serving", |status, _| {
        status == 200
    });
    assert_eq!(body["choices"][0]["text"], "hello there");
    let row = plugin_row(&gw, "latecomer");
    assert_eq!(row["status"], "serving");
    assert_eq!(row["name"], "echo");
    assert_eq!(row["routes"], serde_json::json!(["late"]));

    // Changed file: another plugin's code replaces it.
    gw.install_plugin("faulty", "latecomer");
    eventually(&gw, "late", "the replacement serving", |status, body| {
        status == 200 && body["choices"][0]["text"] == "fine"
    });
    assert_eq!(plugin_row(&gw, "latecomer")["name"], "faulty");

    // A broken file is refused with its reason; the loaded version keeps serving, and the
    // row says both.
    let plugins = gw.dir().join("plugins");
    std::fs::write(plugins.join(".broken.partial"), b"not wasm at all").expect("write");
    std::fs::rename(
        plugins.join(".broken.partial"),
        plugins.join("latecomer.wasm"),
    )
    .expect("rename");
    let deadline = Instant::now() + Duration::from_secs(30);
    while plugin_row(&gw, "latecomer")["next"]["status"] != "refused" {
        assert!(
            Instant::now() < deadline,
            "the broken file was never refused"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let row = plugin_row(&gw, "latecomer");
    assert!(
        row["next"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("not a valid component"),
        "{row}"
    );
    assert_eq!(row["status"], "serving", "{row}");
    assert!(row["reason"].is_null(), "{row}");
    assert_eq!(
        row["name"], "faulty",
        "the previous version still serves: {row}"
    );
    let still = gw.post(
        "/completions",
        &text_request(&gw.project_id, "late", "any", "hello"),
    );
    assert_eq!(still.status, 200, "{}", still.text());
    gw.wait_for_log("plugin rejected", 1);

    // Removed file: the route answers 503 again, with an invocation id and a record.
    std::fs::remove_file(plugins.join("latecomer.wasm")).expect("remove");
    let body = eventually(&gw, "late", "the route answering 503", |status, _| {
        status == 503
    });
    assert!(
        body["error"].as_str().unwrap_or("").contains("not loaded"),
        "{body}"
    );
    let record = gw.record(body["invocationId"].as_str().expect("invocation id"));
    assert_eq!(record["httpStatus"], 503, "{record}");
    assert_eq!(plugin_row(&gw, "latecomer")["status"], "removed");
    // The other route never noticed.
    let demo = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "still here"),
    );
    assert_eq!(demo.status, 200);
}

#[test]
fn admin_plugins_needs_the_admin_token() {
    let gw = lifecycle_gateway();
    let none = gw.get("/admin/plugins", None);
    assert_eq!(none.status, 401, "{}", none.text());
    let wrong = gw.get("/admin/plugins", Some("not-the-token"));
    assert_eq!(wrong.status, 401);
    // A project key is not an admin token.
    let project_key = gw.get("/admin/plugins", Some(&gw.key));
    assert_eq!(project_key.status, 401);

    let echo = plugin_row(&gw, "echo");
    assert_eq!(echo["status"], "serving");
    assert_eq!(echo["version"], "0.1.0");
    assert_eq!(echo["wit_version"], "0.2.0");
    assert_eq!(echo["hash"].as_str().map(str::len), Some(64), "{echo}");
    assert!(
        echo["loaded_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{echo}"
    );
    assert!(echo["file"].as_str().unwrap_or("").ends_with("echo.wasm"));
    assert_eq!(echo["routes"], serde_json::json!(["demo"]));
}

#[test]
fn admin_plugins_answers_401_when_no_token_is_configured() {
    let gw = Gateway::builder().route(Route::echo("demo")).start();
    assert_eq!(gw.get("/admin/plugins", Some("anything")).status, 401);
}

#[test]
fn plugins_list_shows_the_running_gateways_plugins() {
    let gw = lifecycle_gateway();
    // The CLI reads `listen` from the config; the test config listens on port 0,
    // so it cannot find the server and lists what the directory holds instead.
    let out = gw.cli_ok(&["plugins", "list"]);
    let header = out
        .lines()
        .find(|l| l.starts_with("PLUGIN"))
        .unwrap_or_else(|| panic!("no header: {out}"));
    assert!(
        header.contains("STATUS") && header.contains("ROUTES"),
        "{header}"
    );
    let echo = out
        .lines()
        .find(|l| l.starts_with("echo "))
        .unwrap_or_else(|| panic!("no echo row: {out}"));
    assert!(echo.contains("serving") && echo.contains("demo"), "{echo}");
}

#[test]
fn compiled_plugins_are_cached_and_a_damaged_entry_is_rebuilt() {
    let mut gw = Gateway::builder()
        .route(Route::echo("demo"))
        .own_plugin_cache()
        .start();
    let cache = gw.dir().join("plugins").join(".cache");
    let entries = cwasm_files(&cache);
    assert_eq!(entries.len(), 1, "one compiled entry for echo: {entries:?}");

    // Restart: served from the cache (the entry is reused, not rewritten).
    let before = std::fs::metadata(&entries[0])
        .and_then(|m| m.modified())
        .ok();
    gw.shutdown();
    gw.restart();
    let ok = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "again"),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(
        std::fs::metadata(&entries[0])
            .and_then(|m| m.modified())
            .ok(),
        before
    );

    // A damaged entry is recompiled, not trusted.
    std::fs::write(&entries[0], b"garbage").expect("damage the entry");
    gw.shutdown();
    gw.restart();
    let ok = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "once more"),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    gw.wait_for_log("recompiling", 1);
    assert!(std::fs::read(&entries[0]).expect("entry").len() > 1000);
}

fn cwasm_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn config_edits_apply_without_restart_and_bad_ones_are_refused() {
    let gw = lifecycle_gateway();
    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    let unknown = gw.post(
        "/completions",
        &text_request(&gw.project_id, "added", "echo", "hi"),
    );
    assert_eq!(unknown.status, 404);

    // A new route, priced.
    let with_route = format!(
        "{original}\n[providers.added]\nplugin = \"echo\"\n[providers.added.pricing.echo]\ninput_per_mtok = 500000.0\noutput_per_mtok = 1000000.0\n"
    );
    gw.rewrite_config(&with_route);
    eventually(&gw, "added", "the new route serving", |status, _| {
        status == 200
    });
    let mut request = text_request(&gw.project_id, "added", "echo", "two words");
    request["showUsage"] = Value::Bool(true);
    let body = gw.post("/completions", &request).json();
    // 2 prompt words at $0.50/token, 2 completion words at $1/token.
    assert_eq!(body["usage_cost"], serde_json::json!(3.0), "{body}");
    assert!(gw.admin_config(ADMIN_TOKEN)["rejected"].is_null());

    // A broken edit: refused with its reason, the previous config keeps serving.
    gw.rewrite_config(&format!("{with_route}\nthis is not toml ["));
    let deadline = Instant::now() + Duration::from_secs(30);
    while gw.admin_config(ADMIN_TOKEN)["rejected"].is_null() {
        assert!(
            Instant::now() < deadline,
            "the broken config was never refused"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    gw.wait_for_log("config change refused", 1);
    let still = gw.post(
        "/completions",
        &text_request(&gw.project_id, "added", "echo", "hi"),
    );
    assert_eq!(still.status, 200, "{}", still.text());

    // Back to the original: the added route is gone again.
    gw.rewrite_config(&original);
    eventually(&gw, "added", "the route removed", |status, _| status == 404);
    assert!(gw.admin_config(ADMIN_TOKEN)["rejected"].is_null());
}

/// `legacy.wasm` is built against the frozen `plugin-sdk/wit/frozen/0.1.0` world; the
/// host serves the 0.2 line and keeps the 0.1 bindings. Plugins of an earlier line keep working.
#[test]
fn a_plugin_built_against_the_previous_wit_version_still_serves() {
    let gw = Gateway::builder()
        .route(Route::new("old", "legacy"))
        .route(Route::echo("demo"))
        .config_line(&format!("admin_token = \"{ADMIN_TOKEN}\""))
        .start();
    let answer = gw.post(
        "/completions",
        &text_request(&gw.project_id, "old", "legacy", "hello"),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["choices"][0]["text"], "legacy: hello");

    let mut streamed = text_request(&gw.project_id, "old", "legacy", "streamed");
    streamed["stream"] = Value::Bool(true);
    let stream = gw.post_stream("/completions", &streamed);
    let frames = &stream.frames;
    assert_eq!(
        frames[0]["choices"][0]["text"], "legacy: streamed",
        "{frames:?}"
    );
    assert_eq!(frames.last().expect("a final frame")["completed"], true);

    assert_eq!(plugin_row(&gw, "legacy")["wit_version"], "0.1.0");
    assert_eq!(plugin_row(&gw, "echo")["wit_version"], "0.2.0");
}

/// After a burst, [`PluginRuntime::recycle`] moves the plugins to a fresh pool:
/// the burst's warm slots (and the pages they keep) go with the old one, and
/// the plugins keep serving from the new one without recompiling.
#[tokio::test]
async fn a_recycled_pool_gives_its_slots_back_and_keeps_serving() {
    use gateway::plugins::PluginRuntime;
    use gateway_test_support::runtime::EchoCalls;
    use std::sync::Arc;

    const STREAMS: u64 = 80;
    let runtime = Arc::new(PluginRuntime::new(None).expect("runtime"));
    let echo = EchoCalls::load(runtime.clone(), "one two three four five").await;
    let plugin = echo.plugin();
    let call = |plugin, sink| echo.stream(plugin, sink);

    // Streams nobody reads: each instance waits on its second word, holding its slot.
    let mut readers = Vec::new();
    let mut calls = Vec::new();
    for _ in 0..STREAMS {
        let (sink, reader) = tokio::sync::mpsc::channel(1);
        readers.push(reader);
        calls.push(call(plugin.clone(), sink));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.pool_usage().0 < STREAMS {
        assert!(
            Instant::now() < deadline,
            "only {:?} instances ran at once",
            runtime.pool_usage()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(readers);
    for call in calls {
        // The callers are gone: the plugin is told so and ends.
        let _ = call.await.expect("call task");
    }
    // Each instance ends once the task that ran it yields (`Instance::retire`): a liveness
    // bound, not a timing assertion.
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.pool_usage().0 > 0 {
        assert!(Instant::now() < deadline, "{:?}", runtime.pool_usage());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (running, warm) = runtime.pool_usage();
    assert_eq!(running, 0);
    assert!(
        warm >= STREAMS as u32,
        "{warm} warm slots after {STREAMS} streams"
    );

    runtime.recycle().expect("recycle");
    assert_eq!(runtime.pool_usage(), (0, 0), "the new pool starts empty");

    // What requests get from now on: the same plugin, moved to the new pool.
    let moved = runtime.get("echo").expect("echo still serving");
    assert_eq!(moved.hash, plugin.hash);
    let (sink, mut reader) = tokio::sync::mpsc::channel(16);
    let served = call(moved, sink);
    let mut words = 0;
    while reader.recv().await.is_some() {
        words += 1;
    }
    let completion = served
        .await
        .expect("call task")
        .expect("served after recycling");
    assert_eq!(completion.choices[0].text, "one two three four five");
    assert!(words >= 5, "{words} chunks");
    while runtime.pool_usage().0 > 0 {
        assert!(Instant::now() < deadline, "{:?}", runtime.pool_usage());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(runtime.pool_usage(), (0, 1), "served from the new pool");
}

/// How many of the gateway's log lines say `message`.
fn log_count(gw: &Gateway, message: &str) -> usize {
    gw.logs().lines().filter(|l| l.contains(message)).count()
}

/// Config reloads and plugin loads so far.
fn reloads(gw: &Gateway) -> (usize, usize) {
    (
        log_count(gw, "config reloaded"),
        log_count(gw, "plugin loaded"),
    )
}

#[test]
fn reading_watched_files_reloads_nothing_but_editing_them_does() {
    let gw = lifecycle_gateway();
    // The startup load of echo: the baseline must not miss it.
    gw.wait_for_log("plugin loaded", 1);
    let before = reloads(&gw);

    // What `cat`, `sha256sum` and every CLI call with `--config` do to the watched files.
    let plugins = gw.dir().join("plugins");
    for _ in 0..5 {
        std::fs::read(gw.config_path()).expect("read the config");
        for entry in std::fs::read_dir(&plugins).expect("list the plugins") {
            let path = entry.expect("a plugins directory entry").path();
            if path.extension().is_some_and(|ext| ext == "wasm") {
                std::fs::read(&path).expect("read a plugin");
            }
        }
    }
    gw.cli_ok(&["plugins", "list"]);
    gw.cli_ok(&["invocations", "list"]);
    // Well past the watcher's quiet period: a reload set off by reading would be logged by now.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        reloads(&gw),
        before,
        "reading the watched files reloaded something; logs:\n{}",
        gw.logs()
    );

    // A real edit, written in place (no rename): applied once the writer is done.
    let original = std::fs::read_to_string(gw.config_path()).expect("read the config");
    std::fs::write(
        gw.config_path(),
        format!("{original}\n[providers.added]\nplugin = \"echo\"\n"),
    )
    .expect("edit the config");
    eventually(&gw, "added", "the edited config serving", |status, _| {
        status == 200
    });
    // A plugin replaced: reloaded.
    gw.install_plugin("faulty", "echo");
    eventually(
        &gw,
        "demo",
        "the replaced plugin serving",
        |status, body| status == 200 && body["choices"][0]["text"] == "fine",
    );
    gw.wait_for_log("config reloaded", before.0 + 1);
    gw.wait_for_log("plugin loaded", before.1 + 1);

    // Each reload read the file it reloaded: that must not set off another.
    let after = reloads(&gw);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        reloads(&gw),
        after,
        "a reload set off another; logs:\n{}",
        gw.logs()
    );
}

#[test]
fn a_deleted_and_recreated_plugins_dir_is_watched_again() {
    let gw = lifecycle_gateway();
    let ok = gw.post(
        "/completions",
        &text_request(&gw.project_id, "demo", "echo", "hello"),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());

    let plugins = gw.dir().join("plugins");
    std::fs::remove_dir_all(&plugins).expect("remove the plugins directory");
    // Its files are gone, as if each had been removed: their routes answer 503.
    eventually(&gw, "demo", "the route answering 503", |status, _| {
        status == 503
    });
    let missing = "plugins directory is missing";
    gw.wait_for_log(missing, 1);
    // Several checks for the directory's return go by: warned once, not at each.
    std::thread::sleep(Duration::from_secs(3));

    std::fs::create_dir(&plugins).expect("recreate the plugins directory");
    gw.install_plugin("echo", "echo");
    let body = eventually(&gw, "demo", "the route serving again", |status, _| {
        status == 200
    });
    assert_eq!(body["choices"][0]["text"], "hello there");
    assert_eq!(log_count(&gw, missing), 1, "{}", gw.logs());

    // The new directory is watched, not just looked at once.
    gw.install_plugin("faulty", "echo");
    eventually(
        &gw,
        "demo",
        "the replaced plugin serving",
        |status, body| status == 200 && body["choices"][0]["text"] == "fine",
    );
}
