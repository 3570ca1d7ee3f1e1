//! Running a provider natively, without a gateway: the SDK's own fake host (native builds
//! only, for a plugin's `cargo test`).
//!
//! [`Call`] builds the [`CompletionRequest`] the gateway would pass; [`Call::complete`] and
//! [`Call::stream`] run the plugin's [`Provider`] on it with an upstream of the test's own:
//! a closure that answers each request the plugin sends ([`json`], [`sse`], [`ndjson`] or
//! [`http::Response::from_chunks`]), or fails it. Every request is recorded, with its
//! headers and body; as in the gateway, one to a host other than the route's `base_url`'s
//! is refused before it reaches the closure. The plugin's `kv` and `log` already work
//! natively ([`crate::kv::clear`], lines on stderr).
//!
//! ```
//! use gateway_plugin_sdk::prelude::*;
//! use gateway_plugin_sdk::testing::{Call, json};
//! # struct Echo;
//! # impl HttpProvider for Echo {
//! #     type Decoder = Echo;
//! #     const OUTPUT: OutputFields = OutputFields { max_tokens: &[&["max_tokens"]], choices: &[] };
//! #     fn info() -> PluginInfo {
//! #         PluginInfo { name: "echo".into(), version: "0".into(), models: Vec::new() }
//! #     }
//! #     fn request(call: &CompletionRequest, _stream: bool) -> Result<Request, ProviderError> {
//! #         let base = call.route.checked_base_url("http://HOST")?;
//! #         Request::post(format!("{base}/say"))
//! #             .api_key(call.route.api_key.as_deref(), KeyIn::Header("x-key"))
//! #             .json(&serde_json::json!({"model": call.model}))
//! #     }
//! # }
//! # impl Default for Echo { fn default() -> Self { Echo } }
//! # impl StreamDecoder for Echo {
//! #     fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
//! #         let v: serde_json::Value = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
//! #         answer.text(0, v["said"].as_str().unwrap_or_default());
//! #         answer.complete();
//! #         Ok(())
//! #     }
//! # }
//!
//! let run = Call::text("m-1", "hello")
//!     .base_url("https://api.example.com")
//!     .api_key("k-1")
//!     .complete::<Echo>(|_request| json(200, &serde_json::json!({"said": "hi"})));
//! assert_eq!(run.result.unwrap().choices[0].text, "hi");
//! assert_eq!(run.sent[0].url(), "https://api.example.com/say");
//! assert_eq!(run.sent[0].header_value("x-key"), Some("k-1"));
//! ```

use std::cell::RefCell;

use serde::Serialize;

use crate::guard::{AnswerVerdict, CheckedRequest, Guard, Input, RequestVerdict};
use crate::http::{Request, Response};
use crate::tool::{Context, ToolError, ToolResult, Tools};
use crate::{
    Choice, Chunk, Completion, CompletionRequest, ImageRequest, Images, Message, OutputLimit,
    Prompt, Provider, ProviderError, RerankRequest, Reranking, Route, Sink, Speech, SpeechRequest,
    Transcription, TranscriptionRequest,
};

/// A tool as the gateway lists it (the WIT's `tool-def`).
pub use crate::tool::__bindings::gateway::provider::tool_types::ToolDef as ToolDefinition;

/// A test's upstream: the answer to each request the plugin sends.
type Upstream = Box<dyn FnMut(&Request) -> Result<Response, ProviderError>>;

struct Host {
    upstream: Upstream,
    /// The origins (`scheme://host[:port]`) reachable: a route's `base_url`'s, or a tool
    /// server's `allowed_hosts`.
    allowed: Vec<String>,
    /// Who refuses the others, for the error: "the route's base_url", "the server's allowed_hosts".
    allowed_by: &'static str,
    sent: Vec<Request>,
}

thread_local! {
    static HOST: RefCell<Option<Host>> = const { RefCell::new(None) };
}

/// What [`crate::http::Request::send`] does natively: the running [`Call`]'s upstream.
pub(crate) fn send(request: Request) -> Result<Response, ProviderError> {
    HOST.with_borrow_mut(|host| {
        let Some(host) = host else {
            panic!(
                "http::Request::send calls the gateway, which only exists when the plugin runs \
                 as a wasm component; in a native test, run the plugin with \
                 gateway_plugin_sdk::testing::Call, which answers with an upstream of the test's"
            );
        };
        let origin = origin(request.url());
        host.sent.push(request.clone());
        match origin {
            Some(origin) if host.allowed.contains(&origin) => (host.upstream)(&request),
            origin => Err(ProviderError::Failed(format!(
                "the gateway does not allow requests to {}; only {} {} reachable",
                origin.unwrap_or_else(|| request.url().to_owned()),
                host.allowed_by,
                if host.allowed_by.ends_with('s') {
                    "are"
                } else {
                    "is"
                },
            ))),
        }
    })
}

/// `scheme://host[:port]` of `url`, lowercased, without a default port; `None` for a URL
/// that is not absolute HTTP(S).
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?.to_ascii_lowercase();
    let host_port = host_port.strip_suffix(default_port).unwrap_or(&host_port);
    (!host_port.is_empty()).then(|| format!("{scheme}://{host_port}"))
}

/// The origins an `allowed_hosts` entry lets a plugin reach, as the gateway reads it: a URL is
/// its origin; a bare `host[:port]` (port 443 when none) is that host and port over HTTPS and
/// HTTP.
fn allowed_origins(entry: &str) -> Vec<String> {
    if entry.contains("://") {
        return origin(entry).into_iter().collect();
    }
    let with_port = if entry
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        entry.to_owned()
    } else {
        format!("{entry}:443")
    };
    ["https", "http"]
        .iter()
        .filter_map(|scheme| origin(&format!("{scheme}://{with_port}")))
        .collect()
}

/// A completion request as the gateway passes it, and the run of a plugin on it.
#[derive(Debug, Clone)]
pub struct Call {
    request: CompletionRequest,
}

/// What a [`Call`] did: the plugin's result, the requests it sent, and (streamed) the chunks
/// the caller was sent.
#[derive(Debug)]
pub struct Run {
    /// What the plugin returned.
    pub result: Result<Completion, ProviderError>,
    /// The requests it sent, in order (a refused one too).
    pub sent: Vec<Request>,
    /// The chunks the caller was sent ([`Call::stream`]).
    pub chunks: Vec<Chunk>,
}

impl Run {
    /// The streamed text of choice `choice`, as the caller received it.
    pub fn streamed_text(&self, choice: u32) -> String {
        self.chunks
            .iter()
            .flat_map(|chunk| &chunk.deltas)
            .filter(|delta| delta.index == choice)
            .map(|delta| delta.text.as_str())
            .collect()
    }
}

impl Call {
    /// A `type: text` request for `prompt` to `model`, on a route `test` whose `base_url` is
    /// `http://upstream.test`, with no key, no settings and no output limit.
    pub fn text(model: &str, prompt: &str) -> Call {
        Call::new(model, Prompt::Text(prompt.to_owned()))
    }

    /// A chat request to `model`.
    pub fn chat(model: &str, messages: Vec<Message>) -> Call {
        Call::new(model, Prompt::Chat(messages))
    }

    fn new(model: &str, prompt: Prompt) -> Call {
        Call {
            request: CompletionRequest {
                route: Route {
                    id: "test".into(),
                    base_url: "http://upstream.test".into(),
                    api_key: None,
                    settings: "{}".into(),
                    secrets: Vec::new(),
                },
                model: model.to_owned(),
                prompt,
                functions: Vec::new(),
                function_choice: None,
                reasoning: None,
                output: OutputLimit {
                    max_tokens: None,
                    choices: 1,
                },
                params: "{}".into(),
            },
        }
    }

    /// The route's `base_url`: the only origin the plugin may reach.
    pub fn base_url(mut self, base_url: &str) -> Call {
        self.request.route.base_url = base_url.trim_end_matches('/').to_owned();
        self
    }

    /// The provider key (the route's, or the caller's `Provider-API-Key`).
    pub fn api_key(mut self, key: &str) -> Call {
        self.request.route.api_key = Some(key.to_owned());
        self
    }

    /// The route's `settings`, as the config's table would give them.
    pub fn settings(mut self, settings: &impl Serialize) -> Call {
        self.request.route.settings = to_json(settings);
        self
    }

    /// A secret the route's settings name (`NAME_env`): `name` and its value.
    pub fn secret(mut self, name: &str, value: &str) -> Call {
        let secret = (name.to_owned(), value.to_owned());
        self.request.route.secrets.push(secret);
        self
    }

    /// The caller's other params (`temperature`, `stop`...), a JSON object.
    pub fn params(mut self, params: &impl Serialize) -> Call {
        self.request.params = to_json(params);
        self
    }

    /// The output limit the gateway reserved for: `max_tokens` a choice, and `choices`.
    pub fn output(mut self, max_tokens: Option<u32>, choices: u32) -> Call {
        self.request.output = OutputLimit {
            max_tokens,
            choices,
        };
        self
    }

    /// The request, to change what the builder does not reach (functions, reasoning...).
    pub fn request_mut(&mut self) -> &mut CompletionRequest {
        &mut self.request
    }

    /// The request as built.
    pub fn request(&self) -> &CompletionRequest {
        &self.request
    }

    /// Runs `P::complete` with `upstream` answering its requests.
    pub fn complete<P: Provider>(
        self,
        upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
    ) -> Run {
        let allowed = origin(&self.request.route.base_url).into_iter().collect();
        let (result, sent) = with_host(allowed, ROUTE, Box::new(upstream), || {
            P::complete(self.request)
        });
        Run {
            result,
            sent,
            chunks: Vec::new(),
        }
    }

    /// Runs `P::complete_stream` with `upstream` answering its requests; the chunks the caller
    /// would have been sent are in [`Run::chunks`].
    pub fn stream<P: Provider>(
        self,
        upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
    ) -> Run {
        let allowed = origin(&self.request.route.base_url).into_iter().collect();
        let mut sink = Sink::buffered();
        let (result, sent) = with_host(allowed, ROUTE, Box::new(upstream), || {
            P::complete_stream(self.request, &mut sink)
        });
        Run {
            result,
            sent,
            chunks: sink.sent().to_vec(),
        }
    }
}

/// Runs `P::rerank` on `request` with `upstream` answering its requests (the route's
/// `base_url` the only origin it may reach, as in a [`Call`]): what it returned, and the
/// requests it sent (a refused one too).
pub fn rerank<P: Provider>(
    request: RerankRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Reranking, ProviderError>, Vec<Request>) {
    let allowed = origin(&request.route.base_url).into_iter().collect();
    with_host(allowed, ROUTE, Box::new(upstream), || P::rerank(request))
}

/// Runs `P::generate_images` on `request` with `upstream` answering its requests, as
/// [`rerank`] does.
pub fn generate_images<P: Provider>(
    request: ImageRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Images, ProviderError>, Vec<Request>) {
    let allowed = origin(&request.route.base_url).into_iter().collect();
    with_host(allowed, ROUTE, Box::new(upstream), || {
        P::generate_images(request)
    })
}

/// Runs `P::transcribe` on `request` with `upstream` answering its requests, as [`rerank`]
/// does.
pub fn transcribe<P: Provider>(
    request: TranscriptionRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (Result<Transcription, ProviderError>, Vec<Request>) {
    let allowed = origin(&request.route.base_url).into_iter().collect();
    with_host(allowed, ROUTE, Box::new(upstream), || {
        P::transcribe(request)
    })
}

/// Runs `P::speak` on `request` with `upstream` answering its requests, as [`rerank`] does;
/// with what it answered, the audio it sent the caller (a [`crate::AudioSink::buffered`] sink)
/// and the requests it made.
pub fn speak<P: Provider>(
    request: SpeechRequest,
    upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
) -> (
    Result<Speech, ProviderError>,
    crate::AudioSink,
    Vec<Request>,
) {
    let allowed = origin(&request.route.base_url).into_iter().collect();
    let mut audio = crate::AudioSink::buffered();
    let (result, requests) = with_host(allowed, ROUTE, Box::new(upstream), || {
        P::speak(request, &mut audio)
    });
    (result, audio, requests)
}

/// A call of a tool server (`[mcp_servers.ID]`): the context the gateway passes a tool plugin,
/// the hosts its `allowed_hosts` let it reach, and runs of the plugin's [`Tools`] on them, checks
/// included (an unknown tool, missing required arguments), as the gateway runs them.
///
/// ```
/// use gateway_plugin_sdk::testing::{ToolCall, json};
/// use gateway_plugin_sdk::tool::*;
/// # struct Ip;
/// # impl Tools for Ip {
/// #     fn info() -> PluginInfo { PluginInfo::new("ip", "0", Vec::new()) }
/// #     fn tools(_: &Context) -> Vec<ToolDef> {
/// #         vec![ToolDef::new("ip", "My address", serde_json::json!({"type": "object"}))]
/// #     }
/// #     fn call(_: &str, _: Arguments, _: &Context) -> Result<ToolResult, ToolError> {
/// #         let ip: serde_json::Value = http::Request::get("https://api.ipify.org/?format=json")
/// #             .send()?.json()?;
/// #         Ok(ToolResult::structured(ip))
/// #     }
/// # }
/// let run = ToolCall::server("net")
///     .allow_hosts(&["api.ipify.org"])
///     .call_tool::<Ip>("ip", &serde_json::json!({}), |_| json(200, &serde_json::json!({"ip": "192.0.2.1"})));
/// assert_eq!(run.result.unwrap().structured_content.as_deref(), Some(r#"{"ip":"192.0.2.1"}"#));
/// assert_eq!(run.sent[0].url(), "https://api.ipify.org/?format=json");
/// ```
#[derive(Debug, Clone)]
pub struct ToolCall {
    server: String,
    settings: String,
    secrets: Vec<(String, String)>,
    hosts: Vec<String>,
}

/// What a [`ToolCall::call_tool`] did: the plugin's result and the requests it sent.
#[derive(Debug)]
pub struct ToolRun {
    /// What the gateway would have answered: the tool's result, or its error.
    pub result: Result<ToolResult, ToolError>,
    /// The requests it sent, in order (a refused one too).
    pub sent: Vec<Request>,
}

impl ToolCall {
    /// Server `id` (`[mcp_servers.ID]`), with no settings, no secrets and no allowed host.
    pub fn server(id: &str) -> ToolCall {
        ToolCall {
            server: id.to_owned(),
            settings: "{}".into(),
            secrets: Vec::new(),
            hosts: Vec::new(),
        }
    }

    /// The server's `settings`, as the config's table would give them.
    pub fn settings(mut self, settings: &impl Serialize) -> ToolCall {
        self.settings = to_json(settings);
        self
    }

    /// A secret the settings name (`NAME_env`): `name` and its value.
    pub fn secret(mut self, name: &str, value: &str) -> ToolCall {
        self.secrets.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The server's `allowed_hosts`, as the config writes them (`api.example.com`,
    /// `127.0.0.1:8080`, `https://api.example.com`): the only hosts the tool's HTTP reaches.
    pub fn allow_hosts(mut self, hosts: &[&str]) -> ToolCall {
        self.hosts
            .extend(hosts.iter().flat_map(|h| allowed_origins(h)));
        self
    }

    /// The context the gateway would pass.
    pub fn context(&self) -> Context {
        Context::new(&self.server, &self.settings, self.secrets.clone())
    }

    /// `T`'s tools, as the gateway lists them.
    pub fn list_tools<T: Tools>(&self) -> Vec<ToolDefinition> {
        let (tools, _) = with_host(Vec::new(), SERVER, Box::new(refuse), || {
            crate::tool::list::<T>(&self.context())
        });
        tools
    }

    /// Runs `T`'s tool `name` with `arguments` (a JSON object, as the caller sent it) and
    /// `upstream` answering its requests.
    pub fn call_tool<T: Tools>(
        &self,
        name: &str,
        arguments: &impl Serialize,
        upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
    ) -> ToolRun {
        let arguments = to_json(arguments);
        let (result, sent) = with_host(self.hosts.clone(), SERVER, Box::new(upstream), || {
            crate::tool::call::<T>(name, &arguments, &self.context())
        });
        ToolRun { result, sent }
    }
}

/// An upstream for a run that expects no request.
fn refuse(request: &Request) -> Result<Response, ProviderError> {
    panic!(
        "the test gave no upstream, but the plugin sent {} {}",
        request.method(),
        request.url()
    )
}

/// A request as the gateway shows a guard (without the route's keys), and runs of the guard's
/// checks on it.
///
/// ```
/// use gateway_plugin_sdk::guard::*;
/// use gateway_plugin_sdk::testing::Check;
/// # struct NoCaps;
/// # impl Guard for NoCaps {
/// #     fn info() -> PluginInfo { PluginInfo::new("no-caps", "0", Vec::new()) }
/// #     fn check_request(request: CheckedRequest) -> RequestVerdict {
/// #         match request.input.texts().any(|t| t.chars().any(char::is_uppercase)) {
/// #             true => RequestVerdict::deny("no capitals"),
/// #             false => RequestVerdict::Allow,
/// #         }
/// #     }
/// # }
/// assert_eq!(Check::text("m", "HELLO").check_request::<NoCaps>(), RequestVerdict::deny("no capitals"));
/// assert_eq!(Check::embedding("m", &["hello"]).check_request::<NoCaps>(), RequestVerdict::Allow);
/// ```
#[derive(Debug, Clone)]
pub struct Check {
    request: CheckedRequest,
}

impl Check {
    /// A `type: text` completion request for `prompt` to `model`, to guard `test` on route
    /// `test`, with no settings and no params.
    pub fn text(model: &str, prompt: &str) -> Check {
        Check::new(model, Input::Prompt(Prompt::Text(prompt.to_owned())))
    }

    /// A chat request to `model`.
    pub fn chat(model: &str, messages: Vec<Message>) -> Check {
        Check::new(model, Input::Prompt(Prompt::Chat(messages)))
    }

    /// An embeddings request for `inputs`.
    pub fn embedding(model: &str, inputs: &[&str]) -> Check {
        let inputs = inputs.iter().map(|&text| text.to_owned()).collect();
        Check::new(model, Input::Embedding(inputs))
    }

    fn new(model: &str, input: Input) -> Check {
        Check {
            request: CheckedRequest {
                guard: "test".into(),
                settings: "{}".into(),
                route: "test".into(),
                model: model.to_owned(),
                input,
                functions: Vec::new(),
                params: "{}".into(),
            },
        }
    }

    /// The guard's `settings` (`[guards.ID.settings]`), as the config's table would give them.
    pub fn settings(mut self, settings: &impl Serialize) -> Check {
        self.request.settings = to_json(settings);
        self
    }

    /// The caller's pass-through params, a JSON object.
    pub fn params(mut self, params: &impl Serialize) -> Check {
        self.request.params = to_json(params);
        self
    }

    /// The guard's id (`[guards.ID]`).
    pub fn guard(mut self, id: &str) -> Check {
        self.request.guard = id.to_owned();
        self
    }

    /// The route serving the request.
    pub fn route(mut self, id: &str) -> Check {
        self.request.route = id.to_owned();
        self
    }

    /// The request, to change what the builder does not reach (functions...).
    pub fn request_mut(&mut self) -> &mut CheckedRequest {
        &mut self.request
    }

    /// Runs `G::check_request`, as the gateway does before the provider sees the request.
    pub fn check_request<G: Guard>(&self) -> RequestVerdict {
        G::check_request(self.request.clone())
    }

    /// Runs `G::check_response` on an answer whose choices' texts are `texts` (each finished
    /// with `stop`), as the gateway does before the caller sees it.
    pub fn check_response<G: Guard>(&self, texts: &[&str]) -> AnswerVerdict {
        let choices = (0u32..)
            .zip(texts)
            .map(|(index, text)| Choice {
                index,
                text: (*text).to_owned(),
                reasoning: Vec::new(),
                finish_reason: Some(crate::FinishReason::Stop),
                function_call: None,
                tool_calls: Vec::new(),
                logprobs: None,
            })
            .collect();
        let answer = Completion {
            model: self.request.model.clone(),
            choices,
            usage: None,
        };
        self.check_completion::<G>(answer)
    }

    /// Runs `G::check_response` on `answer`.
    pub fn check_completion<G: Guard>(&self, answer: Completion) -> AnswerVerdict {
        G::check_response(self.request.clone(), answer)
    }
}

const ROUTE: &str = "the route's base_url";
const SERVER: &str = "the server's allowed_hosts";

/// Runs `run` with a fake host whose HTTP reaches `allowed` through `upstream`; returns what
/// it returned and the requests it sent.
fn with_host<T>(
    allowed: Vec<String>,
    allowed_by: &'static str,
    upstream: Upstream,
    run: impl FnOnce() -> T,
) -> (T, Vec<Request>) {
    let host = Host {
        upstream,
        allowed,
        allowed_by,
        sent: Vec::new(),
    };
    HOST.with_borrow_mut(|slot| {
        assert!(slot.is_none(), "a testing run runs inside another");
        *slot = Some(host);
    });
    // Taken back even if the plugin panics, so that the thread's next test starts clean.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            HOST.with_borrow_mut(Option::take);
        }
    }
    let reset = Reset;
    let result = run();
    let sent = HOST
        .with_borrow_mut(Option::take)
        .map(|host| host.sent)
        .unwrap_or_default();
    drop(reset);
    (result, sent)
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| panic!("not JSON: {e}"))
}

/// An answer of `status` whose body is `value` as JSON.
pub fn json(status: u16, value: &impl Serialize) -> Result<Response, ProviderError> {
    Ok(Response::from_chunks(
        status,
        vec![("content-type".into(), "application/json".into())],
        vec![to_json(value).into_bytes()],
    ))
}

/// A 200 Server-Sent Events stream of `data` events, one body chunk each.
pub fn sse<I: IntoIterator<Item = S>, S: AsRef<str>>(data: I) -> Result<Response, ProviderError> {
    let chunks = data
        .into_iter()
        .map(|d| format!("data: {}\n\n", d.as_ref()).into_bytes())
        .collect();
    Ok(Response::from_chunks(
        200,
        vec![("content-type".into(), "text/event-stream".into())],
        chunks,
    ))
}

/// A 200 newline-delimited JSON stream of `values`, one line and one body chunk each.
pub fn ndjson<I: IntoIterator<Item = V>, V: Serialize>(
    values: I,
) -> Result<Response, ProviderError> {
    let chunks = values
        .into_iter()
        .map(|v| format!("{}\n", to_json(&v)).into_bytes())
        .collect();
    Ok(Response::from_chunks(
        200,
        vec![("content-type".into(), "application/x-ndjson".into())],
        chunks,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        assert_eq!(
            origin("https://API.example.com:443/v1?x"),
            Some("https://api.example.com".into())
        );
        assert_eq!(
            origin("http://u:p@127.0.0.1:8080/"),
            Some("http://127.0.0.1:8080".into())
        );
        assert_eq!(origin("ftp://x"), None);
        assert_eq!(origin("/relative"), None);
    }

    /// A tool that GETs the `url` it is given.
    struct Fetch;

    impl Tools for Fetch {
        fn info() -> crate::PluginInfo {
            crate::PluginInfo::new("fetch", "0", Vec::new())
        }

        fn tools(_context: &Context) -> Vec<crate::tool::ToolDef> {
            let input = serde_json::json!({"type": "object", "required": ["url"]});
            vec![crate::tool::ToolDef::new("get", "GETs a URL", input)]
        }

        fn call(
            _name: &str,
            arguments: crate::tool::Arguments,
            context: &Context,
        ) -> Result<ToolResult, ToolError> {
            let url = arguments.get("url").and_then(|u| u.as_str()).unwrap_or("");
            let token = context.secret("token").unwrap_or("none").to_owned();
            let response = Request::get(url).header("x-token", &token).send()?;
            Ok(ToolResult::text(response.status.to_string()))
        }
    }

    #[test]
    fn a_tool_reaches_only_its_servers_allowed_hosts() {
        let server = ToolCall::server("s")
            .secret("token", "t-1")
            .allow_hosts(&["api.example.com"]);
        let run = server.call_tool::<Fetch>(
            "get",
            &serde_json::json!({"url": "https://api.example.com/x"}),
            |_| json(204, &serde_json::json!({})),
        );
        assert_eq!(run.result, Ok(ToolResult::text("204")));
        assert_eq!(run.sent[0].header_value("x-token"), Some("t-1"));

        let run = server.call_tool::<Fetch>(
            "get",
            &serde_json::json!({"url": "https://evil.example/x"}),
            |_| unreachable!("refused before the upstream"),
        );
        match run.result {
            Err(ToolError::Failed(message)) => {
                assert!(
                    message.contains("the server's allowed_hosts are"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(run.sent.len(), 1);
    }

    #[test]
    fn a_tool_call_is_checked_as_the_gateway_checks_it() {
        let server = ToolCall::server("s");
        let refuse = |_: &Request| -> Result<Response, ProviderError> { unreachable!() };
        let run = server.call_tool::<Fetch>("get", &serde_json::json!({}), refuse);
        assert!(matches!(run.result, Err(ToolError::InvalidArguments(_))));
        let run = server.call_tool::<Fetch>("put", &serde_json::json!({"url": "x"}), refuse);
        assert!(matches!(run.result, Err(ToolError::UnknownTool(_))));
        assert_eq!(server.list_tools::<Fetch>()[0].name, "get");
    }

    struct NoRed;

    impl Guard for NoRed {
        fn info() -> crate::PluginInfo {
            crate::PluginInfo::new("no-red", "0", Vec::new())
        }

        fn check_response(_request: CheckedRequest, answer: Completion) -> AnswerVerdict {
            match answer.choices.iter().any(|c| c.text.contains("red")) {
                true => AnswerVerdict::deny("red"),
                false => AnswerVerdict::Allow,
            }
        }
    }

    #[test]
    fn a_guard_checks_the_answers_texts() {
        let check = Check::text("m", "colours?");
        assert_eq!(check.check_request::<NoRed>(), RequestVerdict::Allow);
        assert_eq!(
            check.check_response::<NoRed>(&["blue", "red"]),
            AnswerVerdict::deny("red")
        );
        assert_eq!(
            check.check_response::<NoRed>(&["blue"]),
            AnswerVerdict::Allow
        );
    }

    #[test]
    fn allowed_hosts_read_as_the_gateway_reads_them() {
        assert_eq!(
            allowed_origins("API.example.com"),
            ["https://api.example.com", "http://api.example.com:443"]
        );
        assert_eq!(
            allowed_origins("127.0.0.1:8080"),
            ["https://127.0.0.1:8080", "http://127.0.0.1:8080"]
        );
        assert_eq!(
            allowed_origins("http://127.0.0.1:80/x"),
            ["http://127.0.0.1"]
        );
    }
}
