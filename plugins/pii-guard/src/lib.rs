//! A guard that keeps personal data and secrets away from the model and the
//! caller: email addresses, phone numbers, payment card numbers, IBANs, IP
//! addresses and API keys, tokens and private keys.
//!
//! `mode = "redact"` (the default) replaces each with a placeholder
//! (`[EMAIL]`) in every text of a request (the prompt, every message's text,
//! tool results included, embedding inputs) and of an answer (each choice's
//! text); `mode = "deny"` refuses the request or answer instead, naming the
//! kinds found, never the values. `kinds = ["email", "card"]` looks for those
//! only; `placeholder = "<{kind}>"` writes placeholders otherwise (`{KIND}`
//! is the upper-case name, `{kind}` the lower-case one).
//!
//! Each request runs in a fresh instance, checked twice, so the detectors
//! are hand-written byte scanners rather than regular expressions (nothing
//! to compile at start, a small component): one pass over each text, and
//! no allocation for a text with nothing to redact.

mod contact;
mod numbers;
mod scan;
mod secrets;

use gateway_plugin_sdk::guard::*;
use serde::Deserialize;

pub use scan::{Kind, Kinds, Match, Scanner};

struct PiiGuard;

/// The guard's settings (`[guards.ID] settings`).
#[derive(Debug, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    mode: Mode,
    /// What to look for; every kind when absent.
    kinds: Option<Vec<Kind>>,
    /// The placeholder's template; `[{KIND}]` when absent.
    placeholder: Option<String>,
}

#[derive(Debug, Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Mode {
    #[default]
    Redact,
    Deny,
}

/// The settings, checked: what the checks use.
struct Policy {
    mode: Mode,
    kinds: Kinds,
    placeholder: Option<String>,
}

impl Policy {
    /// The guard's settings, or a panic naming the guard and the setting:
    /// a misconfigured guard fails closed (the gateway refuses the request
    /// and logs why) rather than letting data through.
    fn of(request: &CheckedRequest) -> Policy {
        let settings: Settings = request.settings().unwrap_or_else(|e| panic!("{e}"));
        let kinds = match settings.kinds {
            Some(kinds) if kinds.is_empty() => panic!(
                "guard `{}`: setting `kinds` is empty: name one or more of email, phone, card, \
                 iban, ip, secret, or leave it out for all of them",
                request.guard
            ),
            Some(kinds) => kinds.into_iter().collect(),
            None => Kinds::ALL,
        };
        if let Some(placeholder) = &settings.placeholder
            && placeholder.len() > 64
        {
            panic!(
                "guard `{}`: setting `placeholder` is longer than 64 bytes",
                request.guard
            );
        }
        Policy {
            mode: settings.mode,
            kinds,
            placeholder: settings.placeholder,
        }
    }

    /// Replaces what `text` holds of the policy's kinds, counting each kind
    /// in `changes`. A text with nothing to replace is not copied.
    fn redact(&self, text: &mut String, changes: &mut Changes) {
        let mut counts = [0u32; Kind::ALL.len()];
        let mut redacted: Option<String> = None;
        let mut copied = 0;
        for found in Scanner::new(text, self.kinds) {
            let out = redacted.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..found.start]);
            self.write_placeholder(out, found.kind);
            copied = found.end;
            counts[found.kind as usize] += 1;
        }
        let Some(mut out) = redacted else {
            return;
        };
        out.push_str(&text[copied..]);
        *text = out;
        for kind in Kind::ALL {
            changes.add(kind.name(), counts[kind as usize]);
        }
    }

    fn write_placeholder(&self, out: &mut String, kind: Kind) {
        match &self.placeholder {
            None => {
                out.push('[');
                out.push_str(kind.upper());
                out.push(']');
            }
            Some(template) => {
                let placeholder = template
                    .replace("{KIND}", kind.upper())
                    .replace("{kind}", kind.name());
                out.push_str(&placeholder);
            }
        }
    }

    /// The kinds of the policy that `texts` hold, reading no further once
    /// every kind was found.
    fn find<'a>(&self, texts: impl Iterator<Item = &'a str>) -> Kinds {
        let mut found = Kinds::default();
        for text in texts {
            for matched in Scanner::new(text, self.kinds) {
                found.insert(matched.kind);
                if found.covers(self.kinds) {
                    return found;
                }
            }
        }
        found
    }
}

/// `"the request contains an email address and a payment card number"`.
fn reason(what: &str, found: Kinds) -> String {
    let mut reason = format!("the {what} contains ");
    let kinds: Vec<Kind> = found.iter().collect();
    for (n, kind) in kinds.iter().enumerate() {
        if n > 0 {
            reason.push_str(if n + 1 == kinds.len() { " and " } else { ", " });
        }
        reason.push_str(kind.described());
    }
    reason
}

impl Guard for PiiGuard {
    fn info() -> PluginInfo {
        PluginInfo::new("pii-guard", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn check_request(request: CheckedRequest) -> RequestVerdict {
        let policy = Policy::of(&request);
        match policy.mode {
            Mode::Redact => RequestVerdict::rewrite_texts(request.input, |text, changes| {
                policy.redact(text, changes)
            }),
            Mode::Deny => match policy.find(request.input.texts()) {
                found if found.is_empty() => RequestVerdict::Allow,
                found => RequestVerdict::deny(reason("request", found)),
            },
        }
    }

    fn check_response(request: CheckedRequest, answer: Completion) -> AnswerVerdict {
        let policy = Policy::of(&request);
        match policy.mode {
            Mode::Redact => {
                AnswerVerdict::rewrite_texts(answer, |text, changes| policy.redact(text, changes))
            }
            Mode::Deny => match policy.find(answer.choices.iter().map(|c| c.text.as_str())) {
                found if found.is_empty() => AnswerVerdict::Allow,
                found => AnswerVerdict::deny(reason("answer", found)),
            },
        }
    }
}

export_guard!(PiiGuard);

#[cfg(test)]
mod tests;
