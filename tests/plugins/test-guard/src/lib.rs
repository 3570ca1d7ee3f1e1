//! `test-guard`: a guard whose verdict the request's text chooses, so that the tests of guards
//! can ask for each behaviour a guard may have:
//!
//! - a text containing `deny-me` is denied (`reason: asked to be denied`);
//! - `rewrite-me` is replaced by `[REWRITTEN]` (one `marker` change per occurrence);
//! - `crash-me` panics; `loop-me` never returns (the CPU budget ends it);
//! - `reshape-me` answers a rewrite of the wrong shape (a chat for a text prompt, one text
//!   more for embeddings).
//!
//! Answers: `deny-answer` in the answer is denied; `rewrite-answer` is replaced by
//! `[ANSWER REWRITTEN]`; `crash-answer` panics; `count-checks` is replaced by `[CHECKS n]`,
//! n the checks its instance has made (2 when it checked the request too, 1 in a fresh
//! one). The setting `tag` (if any) is appended to every reason, so that tests can tell two
//! guards of this plugin apart.

// The generated bindings take every record field as an argument.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    world: "guard",
    path: "../../../wit",
});

// The world's own `use`s (PluginInfo, Completion, CheckedRequest and the verdicts) are
// already at the crate's root.
use gateway::provider::guard_types::{AnswerRewrite, Change, Input, RequestRewrite};
use gateway::provider::types::{Part, Prompt};

struct TestGuard;

/// The checks this instance has made, both stages.
static CHECKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn checked() -> u32 {
    CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

fn tag(request: &CheckedRequest) -> String {
    // Settings are a JSON object; the tag is a plain string value, read without a JSON crate.
    let settings = &request.settings;
    match settings.find("\"tag\":\"") {
        Some(at) => {
            let rest = &settings[at + 7..];
            let end = rest.find('"').unwrap_or(rest.len());
            format!(" ({})", &rest[..end])
        }
        None => String::new(),
    }
}

/// Every text of the request, for reading.
fn texts(input: &Input) -> Vec<&str> {
    match input {
        Input::Prompt(Prompt::Text(text)) => vec![text.as_str()],
        Input::Prompt(Prompt::Chat(messages)) => messages
            .iter()
            .flat_map(|message| message.parts.iter())
            .filter_map(|part| match part {
                Part::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect(),
        Input::Embedding(texts) => texts.iter().map(String::as_str).collect(),
    }
}

/// Replaces `from` by `to` in every text of `input`; how many it replaced.
fn replace(input: &mut Input, from: &str, to: &str) -> u32 {
    let mut count = 0;
    let mut each = |text: &mut String| {
        let found = text.matches(from).count() as u32;
        if found > 0 {
            *text = text.replace(from, to);
            count += found;
        }
    };
    match input {
        Input::Prompt(Prompt::Text(text)) => each(text),
        Input::Prompt(Prompt::Chat(messages)) => {
            for message in messages {
                for part in &mut message.parts {
                    if let Part::Text(text) = part {
                        each(text);
                    }
                }
            }
        }
        Input::Embedding(texts) => texts.iter_mut().for_each(each),
    }
    count
}

impl Guest for TestGuard {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "test-guard".into(),
            version: "0.1.0".into(),
            models: Vec::new(),
        }
    }

    fn check_request(request: CheckedRequest) -> RequestVerdict {
        checked();
        let all = texts(&request.input).join("\n");
        if all.contains("crash-me") {
            panic!("asked to crash");
        }
        if all.contains("loop-me") {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        if all.contains("deny-me") {
            return RequestVerdict::Deny(format!("asked to be denied{}", tag(&request)));
        }
        if all.contains("reshape-me") {
            let input = match request.input {
                Input::Prompt(Prompt::Text(_)) => Input::Prompt(Prompt::Chat(Vec::new())),
                Input::Prompt(Prompt::Chat(_)) => Input::Prompt(Prompt::Text(String::new())),
                Input::Embedding(mut texts) => {
                    texts.push(String::new());
                    Input::Embedding(texts)
                }
            };
            return RequestVerdict::Rewrite(RequestRewrite {
                input,
                changes: Vec::new(),
            });
        }
        if all.contains("rewrite-me") {
            let mut input = request.input;
            let count = replace(&mut input, "rewrite-me", "[REWRITTEN]");
            return RequestVerdict::Rewrite(RequestRewrite {
                input,
                changes: vec![Change {
                    kind: "marker".into(),
                    count,
                }],
            });
        }
        RequestVerdict::Allow
    }

    fn check_response(request: CheckedRequest, answer: Completion) -> AnswerVerdict {
        let all: Vec<&str> = answer.choices.iter().map(|c| c.text.as_str()).collect();
        let all = all.join("\n");
        let checks = checked();
        if all.contains("count-checks") {
            let marker = format!("[CHECKS {checks}]");
            return AnswerVerdict::Rewrite(AnswerRewrite {
                texts: (answer.choices.iter())
                    .map(|choice| choice.text.replace("count-checks", &marker))
                    .collect(),
                changes: vec![Change {
                    kind: "marker".into(),
                    count: 1,
                }],
            });
        }
        if all.contains("crash-answer") {
            panic!("asked to crash on the answer");
        }
        if all.contains("deny-answer") {
            return AnswerVerdict::Deny(format!("the answer asked to be denied{}", tag(&request)));
        }
        if all.contains("rewrite-answer") {
            let mut count = 0;
            let texts = answer
                .choices
                .iter()
                .map(|choice| {
                    count += choice.text.matches("rewrite-answer").count() as u32;
                    choice.text.replace("rewrite-answer", "[ANSWER REWRITTEN]")
                })
                .collect();
            return AnswerVerdict::Rewrite(AnswerRewrite {
                texts,
                changes: vec![Change {
                    kind: "marker".into(),
                    count,
                }],
            });
        }
        AnswerVerdict::Allow
    }
}

export!(TestGuard);
