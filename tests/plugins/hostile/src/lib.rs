//! `hostile`: a test-only plugin that attacks its own sandbox, so the tests in
//! `tests/e2e/plugins/sandbox/` can prove that one misbehaving plugin costs the gateway
//! one failed request and nothing more.
//!
//! The request's model picks the attack:
//!
//! | model       | behaviour |
//! |-------------|-----------|
//! | `loop`      | spins forever on the CPU without calling the host |
//! | `memory`    | allocates 1 MiB blocks and writes every byte of each, keeping them all, until an allocation fails |
//! | `panic`     | `panic!` (plugins build with `panic = "abort"`, so the instance traps) |
//! | `trap`      | executes wasm's `unreachable` instruction directly |
//! | `stack`     | recurses without bound; each level does work after its call, so the optimizer can neither drop the recursion nor turn it into a loop |
//! | `forbidden` | sends `GET` to `providerConfig.params.url` (default `http://127.0.0.1:1/`), a host the route is not meant to allow; answers the text `reached URL: HTTP STATUS` if the gateway let the request through, otherwise fails with what the gateway answered |
//! | `huge`      | `GET {base_url}/huge` and reads the body to its end, counting the bytes and keeping none; answers `read N bytes` |
//! | `endless`   | `GET {base_url}/endless` and reads the body until it ends (it never does, the upstream keeps it open); streamed (`stream: true`), each chunk's text goes to the caller as it arrives |
//! | `flood`     | `GET {base_url}/flood` `providerConfig.params.count` times (default 5000), reading each answer and ignoring failures; answers `flood: N calls succeeded`, or fails saying how many succeeded and why the first refused call was refused |
//! | `stdout`    | prints `hostile stdout: PROMPT` with `println!` and `hostile stderr: PROMPT` with `eprintln!`, then answers `ok` |
//! | any other   | answers `ok` |
//!
//! `PROMPT` is the text prompt (or the last chat message's content). Failures
//! the plugin reports itself are [`ProviderError`]s whose message starts with
//! `hostile MODEL:`; the gateway's read errors keep their kind (a timeout
//! stays a timeout, so the caller gets 504).

use std::hint::black_box;

use gateway_plugin_sdk::{
    Completion, CompletionRequest, FinishReason, ModelPrice, PluginInfo, Prompt, Provider,
    ProviderError, Sink, StreamAssembler, export_provider, http, params_object,
};

/// Every model with its own behaviour (the rest answer `ok`).
const MODELS: [&str; 11] = [
    "loop",
    "memory",
    "panic",
    "trap",
    "stack",
    "forbidden",
    "huge",
    "endless",
    "flood",
    "stdout",
    "ok",
];

/// Where `forbidden` goes when the request does not say: port 1 of the
/// loopback, which no route of the tests uses.
const DEFAULT_FORBIDDEN_URL: &str = "http://127.0.0.1:1/";
/// How many calls `flood` makes when the request does not say.
const DEFAULT_FLOOD_COUNT: u64 = 5000;
/// Size of each block the memory bomb allocates.
const MEMORY_BLOCK: usize = 1 << 20;

struct Hostile;

impl Provider for Hostile {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "hostile".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            models: MODELS
                .into_iter()
                .map(|model| ModelPrice {
                    model: model.into(),
                    input_per_mtok: 0.0,
                    output_per_mtok: 0.0,
                })
                .collect(),
        }
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let text = match request.model.as_str() {
            "loop" => spin(),
            "memory" => memory_bomb(),
            "panic" => panic!("hostile: asked to panic"),
            "trap" => trap(),
            "stack" => format!("recursion returned {}", recurse(0, black_box(u64::MAX))),
            "forbidden" => forbidden(&request)?,
            "huge" => format!("read {} bytes", drain(&request, "huge", None)?),
            "endless" => format!("read {} bytes", drain(&request, "endless", None)?),
            "flood" => flood(&request)?,
            "stdout" => {
                let prompt = prompt_text(&request.prompt);
                println!("hostile stdout: {prompt}");
                eprintln!("hostile stderr: {prompt}");
                "ok".to_owned()
            }
            _ => "ok".to_owned(),
        };
        Ok(answer(request.model, &text))
    }

    fn complete_stream(
        request: CompletionRequest,
        sink: &mut Sink,
    ) -> Result<Completion, ProviderError> {
        if request.model == "endless" {
            let read = drain(&request, "endless", Some(sink))?;
            return Ok(answer(request.model, &format!("read {read} bytes")));
        }
        // Everything else behaves as when not streamed, sent as one chunk.
        let completion = Self::complete(request)?;
        for choice in &completion.choices {
            sink.text(choice.index, &choice.text)?;
        }
        Ok(completion)
    }
}

export_provider!(Hostile);

/// A one-choice completion answering `text`.
fn answer(model: String, text: &str) -> Completion {
    let mut assembler = StreamAssembler::new();
    assembler.push_text(0, text);
    assembler.finish_reason(0, FinishReason::Stop);
    assembler.finish(model)
}

/// The text prompt, or the last chat message's content.
fn prompt_text(prompt: &Prompt) -> String {
    match prompt {
        Prompt::Text(text) => text.clone(),
        Prompt::Chat(messages) => messages
            .last()
            .map(|message| message.text().into_owned())
            .unwrap_or_default(),
    }
}

/// The message of any provider error, for quoting in another one.
fn describe(error: &ProviderError) -> String {
    match error {
        ProviderError::InvalidRequest(message)
        | ProviderError::Timeout(message)
        | ProviderError::Failed(message) => message.clone(),
        ProviderError::Upstream(upstream) => {
            format!("upstream HTTP {}: {}", upstream.status, upstream.message)
        }
    }
}

/// Burns CPU forever. `black_box` keeps the counter observable, so the loop
/// cannot be folded away; nothing in it calls the host.
fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates and writes memory until an allocation fails, which aborts (a
/// trap) or makes the host refuse to grow the memory (a trap too).
fn memory_bomb() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    let mut fill: u8 = 1;
    loop {
        // Writing every byte makes the pages real, not just reserved.
        let block = vec![fill; MEMORY_BLOCK];
        hoard.push(black_box(block));
        fill = fill.wrapping_add(1).max(1);
    }
}

/// Executes wasm's `unreachable` instruction (natively, where the crate is
/// only built for lints, it aborts).
fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::unreachable()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::process::abort()
    }
}

/// Recurses until `depth` reaches `limit` (the caller passes an opaque
/// `u64::MAX`, so the stack runs out first). The work after the call keeps
/// each frame alive: no tail call, no loop. No local has its address taken,
/// so the frames live on wasm's own call stack, not in linear memory.
#[inline(never)]
fn recurse(depth: u64, limit: u64) -> u64 {
    if depth >= limit {
        return depth;
    }
    recurse(depth + 1, limit).wrapping_mul(31) ^ depth
}

/// Requests a URL the route does not name.
fn forbidden(request: &CompletionRequest) -> Result<String, ProviderError> {
    let params = params_object(&request.params)?;
    let url = params
        .get("url")
        .and_then(|url| url.as_str())
        .unwrap_or(DEFAULT_FORBIDDEN_URL)
        .to_owned();
    match http::Request::get(url.clone()).send() {
        Ok(response) => {
            let status = response.status;
            // Read the answer so the connection is released cleanly.
            let _ = response.bytes();
            Ok(format!("reached {url}: HTTP {status}"))
        }
        Err(error) => Err(ProviderError::Failed(format!(
            "hostile forbidden: the gateway answered: {}",
            describe(&error)
        ))),
    }
}

/// Reads `{base_url}/{path}` to its end, counting the bytes and keeping none;
/// with a sink, each chunk's text is sent to the caller as it arrives.
/// Failures keep their kind (a timeout stays a timeout).
fn drain(
    request: &CompletionRequest,
    path: &str,
    mut sink: Option<&mut Sink>,
) -> Result<u64, ProviderError> {
    let mut response = http::Request::get(format!("{}/{path}", request.route.base_url))
        .send()?
        .error_for_status()?;
    let mut read: u64 = 0;
    while let Some(chunk) = response.chunk()? {
        read += chunk.len() as u64;
        if let Some(sink) = sink.as_deref_mut() {
            sink.text(0, &String::from_utf8_lossy(&chunk))?;
        }
    }
    Ok(read)
}

/// Calls the HTTP import `count` times, ignoring failures the way a careless
/// or hostile plugin would.
fn flood(request: &CompletionRequest) -> Result<String, ProviderError> {
    let params = params_object(&request.params)?;
    let count = params
        .get("count")
        .and_then(|count| count.as_u64())
        .unwrap_or(DEFAULT_FLOOD_COUNT);
    let url = format!("{}/flood", request.route.base_url);
    let mut succeeded: u64 = 0;
    let mut first_failure: Option<(u64, String)> = None;
    for call in 1..=count {
        match http::Request::get(url.clone())
            .send()
            .and_then(|response| response.bytes())
        {
            Ok(_) => succeeded += 1,
            Err(error) => {
                first_failure.get_or_insert_with(|| (call, describe(&error)));
            }
        }
    }
    match first_failure {
        None => Ok(format!("flood: {count} calls succeeded")),
        Some((call, why)) => Err(ProviderError::Failed(format!(
            "hostile flood: {succeeded} of {count} calls succeeded; call {call} was the first to fail: {why}"
        ))),
    }
}
