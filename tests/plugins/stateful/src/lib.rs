//! `stateful`: a test-only plugin that runs the `kv` import and the route's secrets as its
//! prompt says, so that the e2e tests can check their scoping, expiry and bounds.
//!
//! Prompts (one command each): `set KEY VALUE TTL_MS`, `get KEY` (answers the value or
//! `none`), `delete KEY`, `secret NAME` (answers the secret reversed, or `none`: the gateway
//! redacts the value itself from answers), `mint KEY TTL_MS` (answers `minted N` or `kept N`
//! through `kv::get_or_refresh`, N the value kept: a counter of mints kept under `KEY.count`).

use std::time::Duration;

use gateway_plugin_sdk::{
    Choice, Completion, CompletionRequest, FinishReason, PluginInfo, Prompt, Provider,
    ProviderError, export_provider, kv,
};

struct Stateful;

impl Provider for Stateful {
    fn info() -> PluginInfo {
        PluginInfo::new("stateful", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn complete(request: CompletionRequest) -> Result<Completion, ProviderError> {
        let Prompt::Text(command) = &request.prompt else {
            return Err(ProviderError::InvalidRequest("send a text prompt".into()));
        };
        let words: Vec<&str> = command.split_whitespace().collect();
        let ttl = |ms: &str| {
            ms.parse()
                .map(Duration::from_millis)
                .map_err(|_| ProviderError::InvalidRequest(format!("bad ttl {ms}")))
        };
        let text = match words.as_slice() {
            ["set", key, value, ms] => {
                kv::set(key, value.as_bytes(), ttl(ms)?);
                "ok".to_owned()
            }
            ["get", key] => kv::get(key)
                .map_or_else(|| "none".to_owned(), |v| String::from_utf8_lossy(&v).into()),
            ["delete", key] => {
                kv::delete(key);
                "ok".to_owned()
            }
            ["secret", name] => request
                .route
                .secret(name)
                .map_or_else(|| "none".to_owned(), |s| s.chars().rev().collect()),
            ["mint", key, ms] => {
                let mut minted = false;
                let value = kv::get_or_refresh(key, ttl(ms)?, || {
                    minted = true;
                    let count_key = format!("{key}.count");
                    let count = kv::get(&count_key)
                        .and_then(|v| String::from_utf8(v).ok())
                        .and_then(|v| v.parse::<u32>().ok())
                        .unwrap_or(0)
                        + 1;
                    kv::set(&count_key, count.to_string().as_bytes(), Duration::ZERO);
                    Ok::<_, ProviderError>(count.to_string().into_bytes())
                })?;
                let value = String::from_utf8_lossy(&value);
                if minted {
                    format!("minted {value}")
                } else {
                    format!("kept {value}")
                }
            }
            _ => {
                return Err(ProviderError::InvalidRequest(format!(
                    "unknown command: {command}"
                )));
            }
        };
        Ok(Completion {
            model: request.model,
            choices: vec![Choice {
                index: 0,
                text,
                reasoning: Vec::new(),
                finish_reason: Some(FinishReason::Stop),
                function_call: None,
                tool_calls: Vec::new(),
                logprobs: None,
            }],
            usage: None,
        })
    }
}

export_provider!(Stateful);
