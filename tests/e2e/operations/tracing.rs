//! Traces as an OpenTelemetry collector receives them: a test collector (an HTTP server
//! decoding the OTLP/HTTP protobuf with `opentelemetry-proto`'s own messages) gets the request's
//! span, a child of the caller's `traceparent`, and a child span per upstream try with the GenAI
//! attributes; each upstream request carries its try's `traceparent`. Without a collector, the
//! caller's `traceparent` still reaches the upstream, and JSON logs carry the trace id.

use std::time::{Duration, Instant};

use gateway_test_support::{Gateway, OpenAiUpstream, Reply, Route, chat_request, with};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message;
use serde_json::{Value, json};

const PROVIDER_KEY: &str = "sk-test-tracing-caller-0123456789";
const MODEL: &str = "gpt-4o-mini";
const ROUTE: &str = "traced";
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const COLLECTOR_TOKEN: &str = "Bearer collector-token-for-tests";
/// Longest wait for spans to be exported (the batch processor sends every 50 ms here).
const PATIENCE: Duration = Duration::from_secs(30);

fn traceparent(sampled: bool) -> String {
    format!(
        "00-{CALLER_TRACE}-{CALLER_SPAN}-{}",
        if sampled { "01" } else { "00" }
    )
}

/// A collector: answers every export with 200 and keeps the requests.
fn collector() -> OpenAiUpstream {
    OpenAiUpstream::always(Reply::raw(200, "application/x-protobuf", ""))
}

/// A gateway exporting to `collector` (when given), with the priced route `traced` (one retry)
/// on `upstream`.
fn gateway(
    upstream: &OpenAiUpstream,
    collector: Option<&OpenAiUpstream>,
    extra: &[&str],
) -> Gateway {
    let route = Route::openai(ROUTE, &upstream.base_url("/v1"))
        .price(MODEL, 500_000.0, 1_000_000.0)
        .key("retries", "1")
        .key("retry_backoff_ms", "1");
    let mut builder = Gateway::builder()
        .route(route)
        .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    if let Some(collector) = collector {
        builder = builder
            .config_line(&format!("otlp_endpoint = \"{}\"", collector.base_url("")))
            .config_line(&format!(
                "otlp_headers = {{ authorization = \"{COLLECTOR_TOKEN}\" }}"
            ));
    }
    for line in extra {
        builder = builder.config_line(line);
    }
    builder.start()
}

fn answer() -> Reply {
    Reply::openai_answer(
        MODEL,
        "hello",
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
    )
}

/// A chat request to the route.
fn chat(gw: &Gateway) -> Value {
    chat_request(
        &gw.project_id,
        ROUTE,
        MODEL,
        json!([{"role": "user", "content": "hi"}]),
    )
}

/// A chat request of `user-7` with `headers`; returns the response's invocation id.
fn ask(gw: &Gateway, headers: &[(&str, &str)]) -> String {
    let body = with(chat(gw), "userId", json!("user-7"));
    let mut all = vec![("Provider-API-Key", PROVIDER_KEY)];
    all.extend_from_slice(headers);
    let response = gw.post_with_headers("/completions", Some(&gw.key), &all, &body);
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["invocationId"]
        .as_str()
        .expect("an invocationId")
        .to_owned()
}

/// Every span the collector received so far.
fn spans(collector: &OpenAiUpstream) -> Vec<Span> {
    collector
        .requests()
        .iter()
        .flat_map(|request| {
            ExportTraceServiceRequest::decode(request.body.as_slice())
                .unwrap_or_else(|e| panic!("not an OTLP trace export ({e})"))
                .resource_spans
        })
        .flat_map(|resource| resource.scope_spans)
        .flat_map(|scope| scope.spans)
        .collect()
}

/// Waits until the collector has `count` spans of trace `trace` (hex), and returns them.
fn spans_of(collector: &OpenAiUpstream, trace: &str, count: usize) -> Vec<Span> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let found: Vec<Span> = spans(collector)
            .into_iter()
            .filter(|span| hex(&span.trace_id) == trace)
            .collect();
        if found.len() >= count {
            assert_eq!(found.len(), count, "{found:#?}");
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {count} spans of trace {trace} exported: {found:#?}",
            found.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Attribute `key` of `span`, as JSON (strings, integers, doubles, arrays of strings).
fn attribute(span: &Span, key: &str) -> Value {
    let Some(value) = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
    else {
        return Value::Null;
    };
    fn json_of(value: &Any) -> Value {
        match value {
            Any::StringValue(s) => json!(s),
            Any::IntValue(i) => json!(i),
            Any::DoubleValue(d) => json!(d),
            Any::BoolValue(b) => json!(b),
            Any::ArrayValue(array) => Value::Array(
                array
                    .values
                    .iter()
                    .filter_map(|v| v.value.as_ref().map(json_of))
                    .collect(),
            ),
            other => panic!("unexpected attribute value {other:?}"),
        }
    }
    json_of(value)
}

#[test]
fn spans_join_the_callers_trace_with_genai_attributes_and_the_upstream_gets_each_tries_traceparent()
{
    let collector = collector();
    let upstream = OpenAiUpstream::script(vec![
        Reply::openai_error(503, "overloaded", "server_error", None),
        answer(),
    ]);
    let gw = gateway(&upstream, Some(&collector), &[]);
    let parent = traceparent(true);
    let id = ask(
        &gw,
        &[("traceparent", &parent), ("tracestate", "vendor=abc")],
    );

    let spans = spans_of(&collector, CALLER_TRACE, 3);
    let request = spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .expect("the request's span");
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN, "{request:#?}");
    assert_eq!(request.name, "POST /completions");
    for (key, want) in [
        ("gateway.surface", json!("commonbase")),
        ("gateway.route", json!(ROUTE)),
        ("gateway.project_id", json!(gw.project_id)),
        ("user.id", json!("user-7")),
        ("gateway.invocation_id", json!(id)),
        ("gateway.status", json!("success")),
        ("http.response.status_code", json!(200)),
        ("gen_ai.request.model", json!(MODEL)),
        ("gen_ai.usage.input_tokens", json!(3)),
        ("gen_ai.usage.output_tokens", json!(2)),
        ("gateway.cost_usd", json!(3.5)),
    ] {
        assert_eq!(attribute(request, key), want, "request span {key}");
    }

    let mut tries: Vec<&Span> = spans
        .iter()
        .filter(|span| span.kind == SpanKind::Client as i32)
        .collect();
    tries.sort_by_key(|span| span.start_time_unix_nano);
    assert_eq!(tries.len(), 2);
    for (number, attempt) in tries.iter().enumerate() {
        assert_eq!(attempt.parent_span_id, request.span_id, "{attempt:#?}");
        assert_eq!(attempt.name, format!("chat {MODEL}"));
        for (key, want) in [
            ("gen_ai.operation.name", json!("chat")),
            ("gen_ai.provider.name", json!("openai")),
            ("gen_ai.request.model", json!(MODEL)),
            ("gateway.route", json!(ROUTE)),
            ("gateway.attempt", json!(number + 1)),
            ("server.address", json!(upstream.addr().to_string())),
        ] {
            assert_eq!(attribute(attempt, key), want, "try {} {key}", number + 1);
        }
    }
    let (failed, served) = (tries[0], tries[1]);
    assert_eq!(attribute(failed, "http.response.status_code"), json!(503));
    assert_eq!(attribute(failed, "error.type"), json!("upstream"));
    assert_eq!(
        failed.status.as_ref().map(|s| s.code),
        Some(StatusCode::Error as i32)
    );
    for (key, want) in [
        ("gen_ai.response.model", json!(MODEL)),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("gen_ai.usage.input_tokens", json!(3)),
        ("gen_ai.usage.output_tokens", json!(2)),
        ("gateway.cost_usd", json!(3.5)),
    ] {
        assert_eq!(attribute(served, key), want, "the serving try's {key}");
    }

    // Each upstream request is the child of its own try's span, in the caller's trace.
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    for (request, attempt) in sent.iter().zip(&tries) {
        let want = format!("00-{CALLER_TRACE}-{}-01", hex(&attempt.span_id));
        assert_eq!(request.header("traceparent"), Some(want.as_str()));
        assert_eq!(request.header("tracestate"), Some("vendor=abc"));
    }

    let exports = collector.requests();
    for export in &exports {
        assert_eq!(export.method, "POST");
        assert_eq!(export.path, "/v1/traces");
        assert_eq!(
            export.header("content-type"),
            Some("application/x-protobuf")
        );
        assert_eq!(export.header("authorization"), Some(COLLECTOR_TOKEN));
    }
    let resource = ExportTraceServiceRequest::decode(exports[0].body.as_slice())
        .expect("an export")
        .resource_spans
        .remove(0)
        .resource
        .expect("a resource");
    assert!(
        resource
            .attributes
            .iter()
            .any(|kv| kv.key == "service.name"),
        "{resource:#?}"
    );
}

#[test]
fn a_ratio_of_zero_starts_no_trace_but_follows_a_callers_sampled_decision() {
    let collector = collector();
    let upstream = OpenAiUpstream::each_call(answer());
    let gw = gateway(&upstream, Some(&collector), &["trace_sample_ratio = 0.0"]);
    ask(&gw, &[]);
    // Not sampled, still propagated: the upstream learns the trace is not recorded.
    let unsampled = upstream.requests()[0]
        .header("traceparent")
        .expect("a traceparent")
        .to_owned();
    assert!(
        unsampled.starts_with("00-") && unsampled.ends_with("-00"),
        "{unsampled}"
    );
    let own_trace = unsampled[3..35].to_owned();
    assert_ne!(own_trace, CALLER_TRACE);

    ask(&gw, &[("traceparent", &traceparent(true))]);
    spans_of(&collector, CALLER_TRACE, 2);
    // No caller's `tracestate`: the upstream gets none, not an empty one.
    for request in upstream.requests() {
        assert_eq!(request.header("tracestate"), None, "{request:?}");
    }
    // Exported in order: had the first request's spans been kept, they would be here by now.
    assert!(
        spans(&collector)
            .iter()
            .all(|span| hex(&span.trace_id) == CALLER_TRACE),
        "a span of an unsampled trace was exported"
    );
}

#[test]
fn without_a_collector_the_callers_trace_context_is_passed_on_and_logged() {
    let upstream = OpenAiUpstream::each_call(answer());
    let gw = gateway(&upstream, None, &["log_format = \"json\""]);
    let parent = traceparent(true);
    let id = ask(
        &gw,
        &[("traceparent", &parent), ("tracestate", "vendor=abc")],
    );
    ask(&gw, &[]);
    ask(&gw, &[("traceparent", "00-not-a-valid-parent-01")]);
    ask(&gw, &[("traceparent", &parent), ("tracestate", "")]);

    let sent = upstream.requests();
    assert_eq!(sent[3].header("traceparent"), Some(parent.as_str()));
    assert_eq!(
        sent[3].header("tracestate"),
        None,
        "an empty one is not sent"
    );
    assert_eq!(sent[0].header("traceparent"), Some(parent.as_str()));
    assert_eq!(sent[0].header("tracestate"), Some("vendor=abc"));
    assert_eq!(sent[1].header("traceparent"), None);
    assert_eq!(
        sent[2].header("traceparent"),
        None,
        "an invalid one is dropped"
    );

    let deadline = Instant::now() + PATIENCE;
    loop {
        let logs = gw.logs();
        let answered = logs
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| {
                line["span"]["invocation_id"] == json!(id) && line["message"] == "answered"
            });
        if let Some(line) = answered {
            assert_eq!(line["span"]["trace_id"], json!(CALLER_TRACE), "{line}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answered line for {id}:\n{logs}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_streamed_answer_ends_its_try_span_with_the_streams_usage() {
    let collector = collector();
    let upstream =
        OpenAiUpstream::script(vec![Reply::openai_slow_stream(2, Duration::from_millis(2))]);
    let gw = gateway(&upstream, Some(&collector), &[]);
    let body = with(chat(&gw), "stream", json!(true));
    let parent = traceparent(true);
    let response = gw.post_stream_with_headers(
        "/completions",
        Some(&gw.key),
        &[("Provider-API-Key", PROVIDER_KEY), ("traceparent", &parent)],
        &body,
    );
    assert_eq!(response.status, 200, "{}", response.raw);
    let spans = spans_of(&collector, CALLER_TRACE, 2);
    let attempt = spans
        .iter()
        .find(|span| span.kind == SpanKind::Client as i32)
        .expect("the try's span");
    for (key, want) in [
        ("gen_ai.response.model", json!("slow-model")),
        ("gen_ai.response.finish_reasons", json!(["stop"])),
        ("gen_ai.usage.input_tokens", json!(5)),
        ("gen_ai.usage.output_tokens", json!(2)),
    ] {
        assert_eq!(attribute(attempt, key), want, "{key}");
    }
    let request = spans
        .iter()
        .find(|span| span.kind == SpanKind::Server as i32)
        .expect("the request's span");
    assert_eq!(attribute(request, "gateway.stream"), json!(true));
    assert_eq!(attempt.parent_span_id, request.span_id);
}
