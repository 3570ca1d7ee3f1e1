//! A complete provider for an OpenAI-compatible chat API: text, chat, streaming and usage.
use gateway_plugin_sdk::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Default)]
struct Minimal;

impl HttpProvider for Minimal {
    type Decoder = Minimal;
    const OUTPUT: OutputFields = OutputFields {
        max_tokens: &[&["max_completion_tokens"], &["max_tokens"]],
        choices: &[&["n"]],
    };

    fn info() -> PluginInfo {
        PluginInfo::new("minimal", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    /// The caller's params, the model and the prompt as chat messages.
    fn request(call: &CompletionRequest, stream: bool) -> Result<Request, ProviderError> {
        let owned = ["model", "messages", "stream", "stream_options"];
        let mut body = params_object_except(&call.params, &owned)?;
        let mut messages = Vec::new();
        for message in call.prompt.messages().iter() {
            let content = message.text_only("minimal")?;
            messages.push(json!({"role": message.role.as_str(), "content": content}));
        }
        body.insert("model".into(), json!(call.model));
        body.insert("messages".into(), json!(messages));
        body.insert("stream".into(), json!(stream));
        if let Some(max) = call.output.max_tokens {
            // What the gateway reserved: ask for no more, under every name the API reads.
            body.remove("max_completion_tokens");
            body.insert("max_tokens".into(), json!(max));
            body.insert("n".into(), json!(call.output.choices));
        }
        if stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let base = call.route.checked_base_url("http://HOST/v1")?;
        let request = Request::post(format!("{base}/chat/completions")).streaming(stream);
        request
            .api_key(call.route.api_key.as_deref(), KeyIn::Bearer)
            .json(&body)
    }
}

/// Reads answers (`choices[0].message`) and stream events (`choices[0].delta`, then `[DONE]`,
/// which the default `StreamDecoder::event` handles).
impl StreamDecoder for Minimal {
    fn body(&mut self, body: &[u8], answer: &mut Answer) -> Result<(), ProviderError> {
        let reply: Value = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
        let choice = &reply["choices"][0];
        for part in ["message", "delta"] {
            answer.text(0, choice[part]["content"].as_str().unwrap_or(""));
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            answer.finish_reason(0, FinishReason::parse(reason));
            answer.complete();
        }
        if let Ok(usage) = Usage::deserialize(&reply["usage"]) {
            answer.usage(usage);
        }
        Ok(())
    }
}

export_provider!(Minimal);

#[cfg(test)]
mod tests;
