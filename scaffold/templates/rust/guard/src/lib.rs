//! {{name}}: a guard that refuses requests mentioning a blocked word (the guard's `words`
//! setting), in any case. Answers are let through: implement `check_response` to check them.
use gateway_plugin_sdk::guard::*;
use serde::Deserialize;

/// `[guards.ID.settings]`: a misspelt key is refused rather than ignored.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    words: Vec<String>,
}

struct Plugin;

impl Guard for Plugin {
    fn info() -> PluginInfo {
        PluginInfo::new("{{name}}", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn check_request(request: CheckedRequest) -> RequestVerdict {
        // Bad settings are the operator's mistake, not the caller's: the panic fails the
        // request closed and the gateway logs the message.
        let settings: Settings = request.settings().unwrap_or_else(|e| panic!("{e}"));
        for text in request.input.texts() {
            let text = text.to_lowercase();
            for word in &settings.words {
                if !word.is_empty() && text.contains(&word.to_lowercase()) {
                    return RequestVerdict::deny(format!("the request mentions \"{word}\""));
                }
            }
        }
        RequestVerdict::Allow
    }
}

export_guard!(Plugin);

#[cfg(test)]
mod tests;
