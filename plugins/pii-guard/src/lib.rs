//! A guard that keeps personal data and secrets away from the model and the
//! caller: email addresses, phone numbers, payment card numbers, IBANs, IP
//! addresses and API keys, tokens and private keys.
//!
//! `mode = "redact"` (the default) replaces each with a placeholder
//! (`[EMAIL]`) in every text of a request (the prompt, every message's text,
//! tool results included, the authors' names, embedding inputs) and of an
//! answer (each choice's text); `mode = "deny"` refuses the request or answer
//! instead, naming the kinds found, never the values. `kinds = ["email",
//! "card"]` looks for those only; `placeholder = "<{kind}>"` writes
//! placeholders otherwise (`{KIND}` is the upper-case name, `{kind}` the
//! lower-case one).
//!
//! Texts are read normalised (NFKC, without invisible characters: `＠`,
//! fullwidth digits, no-break spaces, a zero-width space inside a domain),
//! and a chat's texts also as one, so that an address cut between two
//! messages is found (`run.rs`); what is replaced is the original text.
//!
//! Each request runs in a fresh instance, checked twice, so the detectors
//! are hand-written byte scanners rather than regular expressions (nothing
//! to compile at start, a small component): one pass over each text, and
//! no copy of an ASCII text (or one NFKC leaves as it is) with nothing to
//! redact.

mod contact;
mod normalize;
mod numbers;
mod run;
mod scan;
mod secrets;

use gateway_plugin_sdk::guard::*;
use serde::Deserialize;

use run::{Edit, Run};
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
        self.redact_run(&mut [text], changes);
    }

    /// Replaces what `texts`, read as one ([`Run`]), hold of the policy's
    /// kinds, counting each finding once, in the order found. A finding
    /// that spans texts leaves its placeholder in each of them, so that no
    /// text is emptied (some providers refuse an empty text part).
    fn redact_run(&self, texts: &mut [&mut String], changes: &mut Changes) {
        let (findings, edits) = {
            let run = Run::new(texts.iter().map(|text| text.as_str()));
            let (_, findings) = run.scan(self.kinds);
            if findings.is_empty() {
                return;
            }
            let edits = run.edits(&findings);
            (findings, edits)
        };
        for found in &findings {
            changes.add(found.kind.name(), 1);
        }
        for (text, edits) in texts.iter_mut().zip(edits) {
            self.rewrite(text, &edits);
        }
    }

    /// Writes a placeholder over each of `edits` (ranges of `text`, in order).
    fn rewrite(&self, text: &mut String, edits: &[Edit]) {
        if edits.is_empty() {
            return;
        }
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        for edit in edits {
            // Two findings in what one character was normalised to: its
            // placeholder stands for both.
            if edit.range.end <= copied {
                continue;
            }
            out.push_str(&text[copied..edit.range.start.max(copied)]);
            self.write_placeholder(&mut out, edit.kind);
            copied = edit.range.end;
        }
        out.push_str(&text[copied..]);
        *text = out;
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

    /// The kinds of the policy that `runs` hold, reading no further once
    /// every kind was found.
    fn find<'a>(&self, runs: impl IntoIterator<Item = Vec<&'a str>>) -> Kinds {
        let mut found = Kinds::default();
        for texts in runs {
            let (kinds, _) = Run::new(texts).scan(self.kinds);
            found = found.union(kinds);
            if found.covers(self.kinds) {
                break;
            }
        }
        found
    }
}

/// The texts of `input` the guard reads, in runs read as one ([`Run`]): a
/// chat's text parts, every message's one after the other; each author's
/// `name` on its own; a text prompt; each embedding input on its own (each
/// is embedded alone, so an address cut in two is in none of them).
///
/// The `name` of a `function` or `tool` message is the function's, which
/// the provider matches with the call it answers: it is left, as are the
/// calls and the function definitions.
fn runs(input: &mut Input) -> Vec<Vec<&mut String>> {
    match input {
        Input::Prompt(Prompt::Text(text)) => vec![vec![text]],
        Input::Embedding(texts) => texts.iter_mut().map(|text| vec![text]).collect(),
        Input::Prompt(Prompt::Chat(messages)) => {
            let mut parts = Vec::new();
            let mut names = Vec::new();
            for message in messages {
                for part in &mut message.parts {
                    if let Part::Text(text) = part {
                        parts.push(text);
                    }
                }
                let author = matches!(message.role, Role::System | Role::User | Role::Assistant);
                if let Some(name) = message.name.as_mut().filter(|_| author) {
                    names.push(vec![name]);
                }
            }
            let mut runs = vec![parts];
            runs.extend(names);
            runs
        }
    }
}

/// Immutable views of [`runs`].
fn read_runs(input: &mut Input) -> Vec<Vec<&str>> {
    (runs(input).into_iter())
        .map(|run| run.into_iter().map(|text| &**text).collect())
        .collect()
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
        let mut input = request.input;
        match policy.mode {
            Mode::Redact => {
                let mut changes = Changes::new();
                for mut run in runs(&mut input) {
                    policy.redact_run(&mut run, &mut changes);
                }
                RequestVerdict::rewrite(input, changes)
            }
            Mode::Deny => match policy.find(read_runs(&mut input)) {
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
            Mode::Deny => match policy.find(answer.choices.iter().map(|c| vec![c.text.as_str()])) {
                found if found.is_empty() => AnswerVerdict::Allow,
                found => AnswerVerdict::deny(reason("answer", found)),
            },
        }
    }
}

export_guard!(PiiGuard);

#[cfg(test)]
mod tests;
