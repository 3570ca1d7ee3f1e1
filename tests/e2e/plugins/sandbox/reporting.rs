//! What the operator sees of plugins: their stdout and stderr in the log with the invocation id,
//! and their instances, crashes and reloads counted in the metrics.

use super::*;

// ---------------------------------------------------------------- stdio

#[test]
fn plugin_stdout_and_stderr_go_to_the_log_with_the_invocation_id() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let marker = unique("stdio");
    let body = text_request(&gw.project_id, HOSTILE, "stdout", &marker);
    let answer = assert_ok(&gw.post("/completions", &body));
    assert_eq!(answer["choices"][0]["text"], json!("ok"), "{answer}");
    let id = answer["invocationId"]
        .as_str()
        .expect("invocationId")
        .to_owned();
    for stream in ["stdout", "stderr"] {
        let printed = format!("hostile {stream}: {marker}");
        log_line(
            &gw,
            &format!("with {printed:?} and the invocation id"),
            |line| line.contains(&printed) && line.contains(&id),
        );
    }
    // Routed into the log, not inherited: nothing reaches the gateway's own
    // stdout.
    assert!(
        !gw.stdout().iter().any(|line| line.contains(&marker)),
        "the plugin's output reached the gateway's stdout: {:?}",
        gw.stdout()
    );
    assert_healthy(&gw);
}

// ---------------------------------------------------------------- metrics

#[test]
fn plugin_instances_crashes_and_reloads_are_counted() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let plugin = [("plugin", HOSTILE)];
    let kind = |kind| [("plugin", HOSTILE), ("kind", kind)];
    let result = |plugin, result| [("plugin", plugin), ("result", result)];
    metric_reaches(
        &gw,
        "gateway_plugin_reloads_total",
        &result(HOSTILE, "success"),
        1.0,
    );
    assert_eq!(metric(&gw, "gateway_plugin_traps_total", &kind("cpu")), 0.0);

    // An instance serving a stalled upstream is active until its request ends.
    std::thread::scope(|scope| {
        let stalled = scope.spawn(|| gw.post("/completions", &ask(&gw, HOSTILE, "endless")));
        metric_reaches(&gw, "gateway_plugin_instances_active", &plugin, 1.0);
        assert_eq!(join(stalled).status, 504);
    });
    metric_reaches(&gw, "gateway_plugin_instances_active", &plugin, 0.0);

    for (model, status) in [
        ("loop", 502),
        ("memory", 502),
        ("panic", 502),
        ("trap", 502),
    ] {
        let response = gw.post("/completions", &ask(&gw, HOSTILE, model));
        assert_eq!(response.status, status, "{model}: {}", response.text());
    }
    // The caller may read its 502 before the instance that answered it is dropped (an
    // instance ends after its answer is sent): wait for the figures rather than read them once.
    metric_reaches(&gw, "gateway_plugin_traps_total", &kind("cpu"), 1.0);
    metric_reaches(&gw, "gateway_plugin_traps_total", &kind("memory"), 1.0);
    metric_reaches(&gw, "gateway_plugin_traps_total", &kind("trap"), 2.0);
    metric_reaches(&gw, "gateway_plugin_instances_active", &plugin, 0.0);

    // A file that is no plugin is refused, and counted under its name.
    let plugins = gw.dir().join("plugins");
    std::fs::write(plugins.join(".broken.partial"), b"not wasm").expect("write");
    std::fs::rename(plugins.join(".broken.partial"), plugins.join("broken.wasm")).expect("rename");
    metric_reaches(
        &gw,
        "gateway_plugin_reloads_total",
        &result("broken", "error"),
        1.0,
    );
    assert_eq!(
        metric(
            &gw,
            "gateway_plugin_reloads_total",
            &result("broken", "success")
        ),
        0.0
    );
}
