//! Where a plugin may connect: a forbidden host refused, logged and never contacted,
//! `allowed_hosts` extending the reachable hosts, and a proxy named in the environment carrying the
//! upstream requests.

use super::*;

// ---------------------------------------------------------------- hosts

#[test]
fn forbidden_host_is_refused_logged_and_never_contacted() {
    let upstream = HostileUpstream::start();
    let gw = start(&upstream, vec![]);
    // The address the plugin tries: a listener that must never see a
    // connection (a refused request must not even connect).
    let bait = TcpListener::bind("127.0.0.1:0").expect("bind the bait listener");
    bait.set_nonblocking(true).expect("nonblocking bait");
    let url = format!("http://{}/steal", bait.local_addr().expect("bait address"));

    let body = with_param(ask(&gw, HOSTILE, "forbidden"), "url", json!(url));
    let response = gw.post("/completions", &body);
    let id = expect_failure(&gw, &response, 502, &["does not allow"]);

    let warning = log_line(&gw, "warning about the forbidden host", |line| {
        line.contains("does not allow") && line.contains(&id)
    });
    assert!(warning.contains("WARN"), "not a warning: {warning}");
    match bait.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, from)) => panic!("the forbidden address got a connection from {from}"),
        Err(e) => panic!("checking the bait listener: {e}"),
    }
    assert_eq!(upstream.total_requests(), 0);
    assert_healthy(&gw);
}

#[test]
fn allowed_hosts_extends_the_reachable_hosts() {
    let upstream = HostileUpstream::start();
    let extra = HostileUpstream::start();
    let allowed = format!("[\"{}\"]", extra.addr());
    let gw = start(
        &upstream,
        vec![
            hostile_route("widened", &upstream.base_url("/v1"), Limits::default())
                .key("allowed_hosts", &allowed),
        ],
    );
    let url = format!("{}/extra", extra.base_url(""));
    let body = with_param(ask(&gw, "widened", "forbidden"), "url", json!(url));
    let answer = assert_ok(&gw.post("/completions", &body));
    assert_eq!(
        answer["choices"][0]["text"],
        json!(format!("reached {url}: HTTP 200"))
    );
    assert_eq!(extra.requests_ending_with("/extra"), 1);
    // The route without the addition still refuses it.
    let body = with_param(ask(&gw, HOSTILE, "forbidden"), "url", json!(url));
    expect_failure(
        &gw,
        &gw.post("/completions", &body),
        502,
        &["does not allow"],
    );
    assert_eq!(extra.requests_ending_with("/extra"), 1);
    assert_healthy(&gw);
}

// ---------------------------------------------------------------- egress proxy

#[test]
fn a_proxy_named_in_the_environment_carries_the_upstream_requests() {
    // The fake upstream plays the proxy: a request for a host that does not resolve can reach
    // it only through the proxy, which is sent the whole URL.
    let proxy = OpenAiUpstream::start();
    let gw = Gateway::builder()
        .route(Route::openai("proxied", "http://upstream.invalid:9/v1"))
        .env("HTTP_PROXY", &format!("http://{}", proxy.addr()))
        .start();
    let request = embeddings_request(&gw.project_id, "proxied", "embed", json!(["a b"]));
    let body = assert_ok(&post_with_provider_key(
        &gw,
        "/embeddings",
        "sk-test-0123456789",
        &request,
    ));
    assert_eq!(
        body["data"][0]["embedding"],
        json!(fake_embedding(0, "a b"))
    );
    let sent = proxy.single_request();
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(sent.header("host"), Some("upstream.invalid:9"));
}
