//! A panic, a trap, a stack overflow: each a 502 with `plugin_error`, logged once.

use super::*;

// ---------------------------------------------------------------- crashes

/// `model` crashes its instance: 502 with the stable `plugin_error` code, mentioning one of
/// `needles`; when the plugin logs what it said (`logged`, a panic's message), the caller does
/// not get that text and the log has it once, without the wasm backtrace (issue 46 item 15).
fn crash(model: &str, needles: &[&str], logged: Option<&str>) {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    let response = gw.post("/completions", &ask(&gw, HOSTILE, model));
    let id = expect_failure(&gw, &response, 502, needles);
    assert_eq!(
        response.json()["code"],
        json!("plugin_error"),
        "{}",
        response.text()
    );
    if let Some(said) = logged {
        assert!(!response.text().contains(said), "{}", response.text());
        assert_crash_logged_once(&gw, &id, said, None, &["wasm backtrace"]);
    }
    // Streamed, the crash comes before any text: a plain error too.
    let streamed = gw.post_stream(
        "/completions",
        &with(ask(&gw, HOSTILE, model), "stream", json!(true)),
    );
    assert_eq!(streamed.status, 502, "{}", streamed.raw);
    let id = streamed.json()["invocationId"]
        .as_str()
        .unwrap_or_else(|| panic!("no invocationId: {}", streamed.raw))
        .to_owned();
    assert_error_recorded(&gw, &id, 502);
    assert_healthy(&gw);
}

#[test]
fn panic_is_a_502() {
    crash("panic", &["crashed"], Some("hostile: asked to panic"));
}

#[test]
fn trap_is_a_502() {
    crash("trap", &["crashed"], None);
}

#[test]
fn stack_overflow_is_a_502() {
    crash("stack", &["stack overflow"], None);
}
