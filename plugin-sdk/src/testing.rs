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

use crate::http::{Request, Response};
use crate::{
    Chunk, Completion, CompletionRequest, Message, OutputLimit, Prompt, Provider, ProviderError,
    Route, Sink,
};

/// A test's upstream: the answer to each request the plugin sends.
type Upstream = Box<dyn FnMut(&Request) -> Result<Response, ProviderError>>;

struct Host {
    upstream: Upstream,
    /// `scheme://host[:port]` of the route's `base_url`: the only origin reachable.
    origin: Option<String>,
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
        match (&host.origin, origin) {
            (Some(allowed), Some(origin)) if *allowed == origin => (host.upstream)(&request),
            (_, origin) => Err(ProviderError::Failed(format!(
                "the gateway does not allow requests to {}; only the route's base_url is reachable",
                origin.unwrap_or_else(|| request.url().to_owned())
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
        let origin = origin(&self.request.route.base_url);
        with_host(origin, Box::new(upstream), || {
            (P::complete(self.request), Vec::new())
        })
    }

    /// Runs `P::complete_stream` with `upstream` answering its requests; the chunks the caller
    /// would have been sent are in [`Run::chunks`].
    pub fn stream<P: Provider>(
        self,
        upstream: impl FnMut(&Request) -> Result<Response, ProviderError> + 'static,
    ) -> Run {
        let origin = origin(&self.request.route.base_url);
        with_host(origin, Box::new(upstream), || {
            let mut sink = Sink::buffered();
            let result = P::complete_stream(self.request, &mut sink);
            (result, sink.sent().to_vec())
        })
    }
}

fn with_host(
    origin: Option<String>,
    upstream: Upstream,
    run: impl FnOnce() -> (Result<Completion, ProviderError>, Vec<Chunk>),
) -> Run {
    let host = Host {
        upstream,
        origin,
        sent: Vec::new(),
    };
    HOST.with_borrow_mut(|slot| {
        assert!(slot.is_none(), "a testing::Call runs inside another");
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
    let (result, chunks) = run();
    let sent = HOST
        .with_borrow_mut(Option::take)
        .map(|host| host.sent)
        .unwrap_or_default();
    drop(reset);
    Run {
        result,
        sent,
        chunks,
    }
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
}
