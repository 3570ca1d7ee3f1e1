//! OpenTelemetry traces: a span per request (the child of the caller's `traceparent`, when it
//! sends one) and a child span per upstream try with the GenAI semantic-convention attributes,
//! exported over OTLP/HTTP (protobuf) in batches by the SDK's own thread, off the request path;
//! and W3C trace context out: each upstream request carries the `traceparent` of its try.
//!
//! Without `otlp_endpoint` no span is made: a caller's valid `traceparent` (and `tracestate`)
//! goes to the upstream as it came, so the caller's trace still joins the provider's.

use std::time::Duration;

use hyper::HeaderMap;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, TraceId, Tracer, TracerProvider};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, Span,
};
use uuid::Uuid;

use crate::config::Config;
use crate::plugins::{TraceHeaders, types};
use crate::store::{Invocation, TokenUsage};

/// How long one export may take before the batch is dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Spans waiting for export at most; beyond, new ones are dropped (a collector that cannot keep
/// up must not grow the gateway's memory). At ratio 1.0 that is ~half a second at 10k req/s.
const MAX_QUEUED_SPANS: usize = 8192;
/// How long shutdown waits for the last spans to be exported.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
const SERVICE_NAME: &str = "llm-gateway";

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("cannot start the OTLP exporter's thread: {0}")]
    Thread(std::io::Error),
}

/// The process's traces: an exporting tracer (with `otlp_endpoint`), or none. Clones share it.
#[derive(Clone)]
pub struct Traces {
    tracer: Option<SdkTracer>,
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    /// No spans; callers' trace context is still passed on.
    pub fn off() -> Traces {
        Traces {
            tracer: None,
            provider: None,
        }
    }

    /// The tracer `config` asks for: spans exported to its `otlp_endpoint` (with its
    /// `otlp_headers`), new traces sampled at `trace_sample_ratio`, a caller's decision kept.
    pub fn start(config: &Config) -> Result<Traces, TracesError> {
        let Some(endpoint) = &config.otlp_endpoint else {
            return Ok(Traces::off());
        };
        // An https collector needs the process's TLS provider (the plugins' upstreams install
        // the same one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = endpoint.traces_url();
        let headers = config.otlp_headers.to_map();
        let ratio = config.trace_sample_ratio.get();
        // The exporter's blocking HTTP client has a runtime of its own, which must be neither
        // built nor dropped on an async thread.
        let provider = std::thread::Builder::new()
            .name("otlp-setup".into())
            .spawn(move || -> Result<SdkTracerProvider, TracesError> {
                let exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
                    .with_endpoint(url)
                    .with_timeout(EXPORT_TIMEOUT)
                    .with_headers(headers)
                    .build()?;
                let batches = BatchSpanProcessor::builder(exporter)
                    .with_batch_config(
                        BatchConfigBuilder::default()
                            .with_max_queue_size(MAX_QUEUED_SPANS)
                            .build(),
                    )
                    .build();
                let service = std::env::var("OTEL_SERVICE_NAME")
                    .ok()
                    .filter(|name| !name.is_empty())
                    .unwrap_or_else(|| SERVICE_NAME.to_owned());
                Ok(SdkTracerProvider::builder()
                    .with_span_processor(batches)
                    .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                        ratio,
                    ))))
                    .with_resource(
                        opentelemetry_sdk::Resource::builder()
                            .with_service_name(service)
                            .build(),
                    )
                    .build())
            })
            .map_err(TracesError::Thread)?
            .join()
            .map_err(|_| TracesError::Thread(std::io::Error::other("setup thread panicked")))??;
        tracing::info!(endpoint = %endpoint.traces_url(), ratio, "exporting traces over OTLP/HTTP");
        Ok(Traces {
            tracer: Some(provider.tracer("gateway")),
            provider: Some(provider),
        })
    }

    /// Exports what is still queued (blocking: call it off the async threads).
    pub fn shutdown(&self) {
        if let Some(provider) = &self.provider
            && let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_WAIT)
        {
            tracing::warn!("traces: the last spans may be lost: {e}");
        }
    }

    /// The trace of a request that arrived with `headers`: its span, a child of the caller's
    /// context when the headers carry a valid one; without a tracer, the caller's context
    /// alone (to pass on).
    pub fn request(
        &self,
        headers: &HeaderMap,
        surface: &'static str,
        invocation_id: &Uuid,
        path: &str,
    ) -> RequestTrace {
        let caller = headers
            .contains_key(TRACEPARENT)
            .then(|| TraceContextPropagator::new().extract(&HeaderExtractor(headers)))
            .filter(|cx| cx.span().span_context().is_valid());
        let Some(tracer) = &self.tracer else {
            return RequestTrace {
                cx: caller,
                tracer: None,
            };
        };
        let parent = caller.unwrap_or_default();
        let span = tracer
            .span_builder(format!("POST {path}"))
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", "POST"),
                KeyValue::new("url.path", path.to_owned()),
                KeyValue::new("gateway.surface", surface),
                KeyValue::new("gateway.invocation_id", invocation_id.to_string()),
            ])
            .start_with_context(tracer, &parent);
        RequestTrace {
            cx: Some(parent.with_span(span)),
            tracer: Some(tracer.clone()),
        }
    }
}

const TRACEPARENT: &str = "traceparent";

/// One request's trace: the context its tries are children of (the request's span, or the
/// caller's context when the gateway makes no spans), and the tracer of its try spans.
#[derive(Clone)]
pub struct RequestTrace {
    cx: Option<Context>,
    tracer: Option<SdkTracer>,
}

impl RequestTrace {
    /// The trace id, for the log: the caller's, or the one this request started.
    pub fn trace_id(&self) -> Option<TraceId> {
        self.cx
            .as_ref()
            .map(|cx| cx.span().span_context().trace_id())
    }

    /// A try at `route`'s upstream `server` begins: its span, and what its upstream requests
    /// carry.
    pub fn attempt(&self, attempt: AttemptStart<'_>) -> TrySpan {
        self.client_span(|| {
            let operation = operation_name(attempt.kind);
            let mut attributes = vec![
                KeyValue::new("gen_ai.operation.name", operation),
                KeyValue::new("gen_ai.provider.name", provider_name(attempt.plugin)),
                KeyValue::new("gen_ai.request.model", attempt.model.to_owned()),
                KeyValue::new("gateway.route", attempt.route.to_owned()),
                KeyValue::new("gateway.plugin", attempt.plugin.to_owned()),
                KeyValue::new("gateway.attempt", attempt.number as i64),
            ];
            if let Some(host) = attempt.server {
                attributes.push(KeyValue::new("server.address", host.to_owned()));
            }
            (format!("{operation} {}", attempt.model), attributes)
        })
    }

    /// A tool call through `/mcp` begins: its `execute_tool` span (the GenAI conventions),
    /// and the `traceparent` its upstream request carries.
    pub fn execute_tool(&self, server: &str, tool: &str) -> TrySpan {
        self.client_span(|| {
            let attributes = vec![
                KeyValue::new("gen_ai.operation.name", "execute_tool"),
                KeyValue::new("gen_ai.tool.name", tool.to_owned()),
                KeyValue::new("gen_ai.tool.type", "extension"),
                KeyValue::new("gateway.mcp_server", server.to_owned()),
            ];
            (format!("execute_tool {tool}"), attributes)
        })
    }

    /// A client span of the request's, named and described by `describe` (called only when
    /// spans are made), and the trace context its upstream request carries.
    fn client_span(&self, describe: impl FnOnce() -> (String, Vec<KeyValue>)) -> TrySpan {
        let Some(cx) = &self.cx else {
            return TrySpan::default();
        };
        let Some(tracer) = &self.tracer else {
            // No spans of ours: the upstream joins the caller's trace where the caller is.
            return TrySpan {
                span: None,
                headers: headers_of(cx),
            };
        };
        let (name, attributes) = describe();
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(tracer, cx);
        let headers = headers_of(
            &Context::new()
                .with_remote_span_context(opentelemetry::trace::Span::span_context(&span).clone()),
        );
        TrySpan {
            span: Some(span),
            headers,
        }
    }

    /// The tool call ended; `error` says how it failed, if it did.
    pub fn end_tool(span: TrySpan, error: Option<&str>) {
        use opentelemetry::trace::Span as _;
        let Some(mut span) = span.span else { return };
        if let Some(error) = error {
            span.set_attribute(KeyValue::new("error.type", error.to_owned()));
            span.set_status(Status::error(error.to_owned()));
        }
        span.end();
    }

    /// A guard's check of the request (`stage`: `request` or `response`) begins: its span,
    /// a child of the request's.
    pub fn guard(&self, guard: &str, stage: &'static str) -> GuardSpan {
        let (Some(cx), Some(tracer)) = (&self.cx, &self.tracer) else {
            return GuardSpan { span: None };
        };
        let span = tracer
            .span_builder(format!("guard {guard}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(vec![
                KeyValue::new("gateway.guard.id", guard.to_owned()),
                KeyValue::new("gateway.guard.stage", stage),
            ])
            .start_with_context(tracer, cx);
        GuardSpan { span: Some(span) }
    }

    /// The request is over, as `record` says: its span gets the outcome and ends.
    pub fn end(self, record: &Invocation) {
        let Some(cx) = self.cx.filter(|_| self.tracer.is_some()) else {
            return;
        };
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        let mut attributes = vec![
            KeyValue::new("http.response.status_code", i64::from(record.http_status)),
            KeyValue::new("gateway.status", record.status.as_str()),
            KeyValue::new("gateway.stream", record.stream),
        ];
        let text = |key: &'static str, value: &Option<String>| {
            value.as_ref().map(|v| KeyValue::new(key, v.clone()))
        };
        attributes.extend(
            [
                text("gateway.route", &record.route),
                text("gateway.project_id", &record.project_id),
                text("user.id", &record.user_id),
                text("gen_ai.request.model", &record.model),
            ]
            .into_iter()
            .flatten(),
        );
        usage_attributes(&mut attributes, record.usage.as_ref(), record.cost_usd);
        span.set_attributes(attributes);
        if record.http_status >= 500 {
            let message = record.error.clone().unwrap_or_default();
            span.set_status(Status::error(message));
        }
        span.end();
    }
}

/// One guard check's span.
pub struct GuardSpan {
    span: Option<Span>,
}

impl GuardSpan {
    /// The check ended with `verdict` (`allow`, `deny`, `rewrite`, `error`).
    pub fn end(self, verdict: &'static str) {
        use opentelemetry::trace::Span as _;
        let Some(mut span) = self.span else { return };
        span.set_attribute(KeyValue::new("gateway.guard.verdict", verdict));
        if verdict == "error" {
            span.set_status(Status::error("the guard failed"));
        }
        span.end();
    }
}

/// What a try's span says of it when it begins.
pub struct AttemptStart<'a> {
    /// `text`, `chat` or `embeddings` (the record's kind).
    pub kind: &'static str,
    pub route: &'a str,
    pub plugin: &'a str,
    pub model: &'a str,
    /// The upstream's host.
    pub server: Option<&'a str>,
    /// 1 for the first try of the request.
    pub number: usize,
}

/// What a successful try answered, for its span.
#[derive(Default)]
pub struct Answer<'a> {
    pub response_model: Option<&'a str>,
    pub finish_reasons: Vec<&'static str>,
    pub usage: Option<&'a TokenUsage>,
    pub cost_usd: Option<f64>,
}

impl<'a> Answer<'a> {
    pub fn of(completion: &'a types::Completion) -> Answer<'a> {
        Answer {
            response_model: Some(completion.model.as_str()).filter(|m| !m.is_empty()),
            finish_reasons: completion
                .choices
                .iter()
                .filter_map(|choice| {
                    choice
                        .finish_reason
                        .as_ref()
                        .map(types::FinishReason::as_str)
                })
                .collect(),
            usage: None,
            cost_usd: None,
        }
    }
}

/// One try's span (none without a tracer, or when not sampled it records nothing), and the
/// trace context its upstream requests carry.
#[derive(Default)]
pub struct TrySpan {
    span: Option<Span>,
    headers: Option<TraceHeaders>,
}

impl TrySpan {
    /// What the try's upstream requests carry: `traceparent` (and `tracestate`).
    pub fn headers(&self) -> Option<TraceHeaders> {
        self.headers.clone()
    }

    /// The try failed: `error` says how (`timeout`, `connection`, `upstream`, ...), `status`
    /// is the upstream's when it answered.
    pub fn failed(self, status: Option<u16>, error: &str) {
        use opentelemetry::trace::Span as _;
        let Some(mut span) = self.span else { return };
        if let Some(status) = status {
            span.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        span.set_attribute(KeyValue::new("error.type", error.to_owned()));
        span.set_status(Status::error(error.to_owned()));
        span.end();
    }

    /// The try answered.
    pub fn answered(self, answer: &Answer<'_>) {
        use opentelemetry::trace::Span as _;
        let Some(mut span) = self.span else { return };
        if !span.is_recording() {
            return;
        }
        let mut attributes = Vec::with_capacity(6);
        if let Some(model) = answer.response_model {
            attributes.push(KeyValue::new("gen_ai.response.model", model.to_owned()));
        }
        if !answer.finish_reasons.is_empty() {
            let reasons: Vec<StringValue> = answer
                .finish_reasons
                .iter()
                .map(|reason| StringValue::from(*reason))
                .collect();
            attributes.push(KeyValue::new(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            ));
        }
        usage_attributes(&mut attributes, answer.usage, answer.cost_usd);
        span.set_attributes(attributes);
        span.end();
    }
}

/// The GenAI usage attributes, and the cost.
fn usage_attributes(into: &mut Vec<KeyValue>, usage: Option<&TokenUsage>, cost: Option<f64>) {
    if let Some(usage) = usage {
        into.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            i64::from(usage.prompt_tokens),
        ));
        into.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            i64::from(usage.completion_tokens),
        ));
        if let Some(cached) = usage.cached_prompt_tokens {
            into.push(KeyValue::new(
                "gen_ai.usage.cache_read.input_tokens",
                i64::from(cached),
            ));
        }
        if let Some(written) = usage.cache_creation_tokens {
            into.push(KeyValue::new(
                "gen_ai.usage.cache_creation.input_tokens",
                i64::from(written),
            ));
        }
        if let Some(reasoning) = usage.reasoning_tokens {
            into.push(KeyValue::new(
                "gen_ai.usage.reasoning.output_tokens",
                i64::from(reasoning),
            ));
        }
        // Parts of the input tokens, which the GenAI conventions do not name (yet).
        if let Some(image) = usage.image_prompt_tokens {
            into.push(KeyValue::new(
                "gateway.usage.image.input_tokens",
                i64::from(image),
            ));
        }
        if let Some(audio) = usage.audio_prompt_tokens {
            into.push(KeyValue::new(
                "gateway.usage.audio.input_tokens",
                i64::from(audio),
            ));
        }
        if let Some(units) = usage.search_units {
            into.push(KeyValue::new(
                "gateway.usage.search_units",
                i64::from(units),
            ));
        }
        if let Some(images) = usage.images {
            into.push(KeyValue::new("gateway.usage.images", i64::from(images)));
        }
        if let Some(seconds) = usage.audio_seconds {
            into.push(KeyValue::new(
                "gateway.usage.audio_seconds",
                i64::from(seconds),
            ));
        }
        if let Some(characters) = usage.characters {
            into.push(KeyValue::new(
                "gateway.usage.characters",
                i64::from(characters),
            ));
        }
    }
    if let Some(cost) = cost {
        into.push(KeyValue::new("gateway.cost_usd", cost));
    }
}

/// The `traceparent` (and `tracestate`) that make an upstream request a child of `cx`'s span.
fn headers_of(cx: &Context) -> Option<TraceHeaders> {
    let mut headers = HeaderMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut HeaderInjector(&mut headers));
    Some(TraceHeaders {
        traceparent: headers.remove(TRACEPARENT)?,
        tracestate: headers
            .remove("tracestate")
            .filter(|state| !state.is_empty()),
    })
}

/// `gen_ai.operation.name` of a request kind.
fn operation_name(kind: &str) -> &'static str {
    match kind {
        "chat" => "chat",
        "embeddings" => "embeddings",
        "count_tokens" => "count_tokens",
        // Not among the conventions' names, which allow a system's own.
        "rerank" => "rerank",
        "images" => "image_generation",
        "transcription" => "transcription",
        "speech" => "speech",
        _ => "text_completion",
    }
}

/// `gen_ai.provider.name`: the semantic conventions' name for the plugins that ship with the
/// gateway, the plugin's own name for others.
fn provider_name(plugin: &str) -> StringValue {
    match plugin {
        "openai" => "openai".into(),
        "anthropic" => "anthropic".into(),
        "gemini" => "gcp.gemini".into(),
        other => other.to_owned().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    hyper::header::HeaderName::from_static(name),
                    value.parse().unwrap(),
                )
            })
            .collect()
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn without_a_tracer_the_callers_context_is_passed_on_as_it_came() {
        let traces = Traces::off();
        let id = Uuid::nil();
        let trace = traces.request(
            &headers(&[("traceparent", PARENT), ("tracestate", "vendor=abc")]),
            "openai",
            &id,
            "/v1/chat/completions",
        );
        assert_eq!(
            trace.trace_id().map(|id| id.to_string()).as_deref(),
            Some("0af7651916cd43dd8448eb211c80319c")
        );
        let attempt = trace.attempt(AttemptStart {
            kind: "chat",
            route: "r",
            plugin: "openai",
            model: "m",
            server: None,
            number: 1,
        });
        let sent = attempt.headers().expect("forwarded");
        assert_eq!(sent.traceparent, PARENT);
        assert_eq!(
            sent.tracestate.as_ref().map(|v| v.to_str().unwrap()),
            Some("vendor=abc")
        );
    }

    #[test]
    fn an_invalid_or_absent_traceparent_is_not_passed_on() {
        let traces = Traces::off();
        let id = Uuid::nil();
        for sent in [
            headers(&[]),
            headers(&[("traceparent", "00-not-a-trace-01")]),
            headers(&[(
                "traceparent",
                "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            )]),
        ] {
            let trace = traces.request(&sent, "openai", &id, "/v1/chat/completions");
            assert!(trace.trace_id().is_none());
            let attempt = trace.attempt(AttemptStart {
                kind: "text",
                route: "r",
                plugin: "p",
                model: "m",
                server: None,
                number: 1,
            });
            assert!(attempt.headers().is_none());
        }
    }

    #[test]
    fn units_billed_beside_tokens_are_attributes_of_their_own() {
        let usage = TokenUsage {
            audio_seconds: Some(61),
            characters: Some(1200),
            ..TokenUsage::default()
        };
        let mut attributes = Vec::new();
        usage_attributes(&mut attributes, Some(&usage), Some(0.018));
        let value = |key: &str| {
            attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.clone())
        };
        assert_eq!(value("gateway.usage.characters"), Some(Value::I64(1200)));
        assert_eq!(value("gateway.usage.audio_seconds"), Some(Value::I64(61)));
        assert_eq!(value("gateway.usage.images"), None, "none reported");
    }
}
