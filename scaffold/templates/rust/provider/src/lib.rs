//! {{name}}: a provider for a chat API that answers `POST /generate` with JSON, and streams
//! newline-delimited JSON. Change `request` and `body` to your API's shapes.
use gateway_plugin_sdk::prelude::*;
use serde::Deserialize;
use serde_json::json;

#[derive(Default)]
struct Plugin;

impl HttpProvider for Plugin {
    type Decoder = Plugin;
    /// The API streams one JSON object per line: each line reaches `StreamDecoder::event`,
    /// whose default reads it with `body`.
    const FRAMING: Framing = Framing::Ndjson;
    /// Where a caller's params ask for an answer's size: the gateway reserves budget for it.
    const OUTPUT: OutputFields = OutputFields {
        max_tokens: &[&["max_tokens"]],
        choices: &[],
    };

    fn info() -> PluginInfo {
        // The models it knows, with their default prices in dollars per million tokens (a
        // route's `pricing` table overrides them): what the gateway charges budgets with.
        let models = vec![ModelPrice {
            model: "example-model".into(),
            input_per_mtok: 0.0,
            output_per_mtok: 0.0,
        }];
        PluginInfo::new("{{name}}", env!("CARGO_PKG_VERSION"), models)
    }

    fn request(call: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        let mut messages = Vec::new();
        for message in call.prompt.messages().iter() {
            // Images, audio and documents are refused with a clear error: this API reads text.
            let content = message.text_only("{{name}}")?;
            messages.push(json!({"role": message.role.as_str(), "content": content}));
        }
        let mut body = json!({"model": call.model, "messages": messages, "stream": stream});
        if let Some(max_tokens) = call.output.max_tokens {
            body["max_tokens"] = json!(max_tokens);
        }
        let base = call.route.checked_base_url("https://api.example.com/v1")?;
        Request::post(format!("{base}/generate"))
            .streaming(stream)
            .api_key(call.route.api_key.as_deref(), KeyIn::Bearer)
            .json(&body)
    }
}

/// A whole answer, or one line of a stream: `{"text", "finish_reason", "usage"}`, each optional.
#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    text: String,
    finish_reason: Option<String>,
    usage: Option<Tokens>,
}

#[derive(Deserialize)]
struct Tokens {
    input_tokens: u32,
    output_tokens: u32,
}

impl StreamDecoder for Plugin {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        let reply: Reply = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
        answer.text(0, &reply.text);
        if let Some(tokens) = reply.usage {
            answer.usage(Usage::new(tokens.input_tokens, tokens.output_tokens));
        }
        if let Some(reason) = reply.finish_reason {
            answer.finish_reason(0, FinishReason::parse(&reason));
            answer.complete();
        }
        Ok(())
    }
}

export_provider!(Plugin);

#[cfg(test)]
mod tests;
