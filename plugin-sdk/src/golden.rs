//! Golden upstream bodies (the `golden` feature, for plugins' tests): one conversation that uses
//! every part of the canonical request ([`request`]), and the check of what a plugin makes of it
//! against a file checked in beside the code ([`check`]). Every provider plugin converts the
//! same conversation, so that a change to the canonical request, or to a plugin's mapping,
//! shows its effect on each upstream body in one diff.
//!
//! `UPDATE_GOLDEN=1 cargo test` writes the files anew instead of comparing them.

use std::path::Path;

use serde_json::Value;

use crate::{
    CompletionRequest, FunctionChoice, FunctionDef, Image, Message, OutputLimit, Part, Prompt,
    ReasoningConfig, ReasoningEffort, Role, Route, Source, ToolCall,
};

/// The environment variable that makes [`check`] write the golden files instead of comparing.
pub const UPDATE: &str = "UPDATE_GOLDEN";

/// The smallest PNG there is (one transparent pixel): the image the user sends.
const PIXEL_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// The golden conversation, to `model` on `route`: a system prompt; the user's text and an
/// image; the assistant's text and a call of the one tool (whose parameters are a JSON
/// Schema); the tool's result; the caller's temperature, `max_tokens` and stop sequence; a
/// reasoning effort; the host's output limit.
pub fn request(route: Route, model: &str) -> CompletionRequest {
    let message = |role: Role, parts: Vec<Part>| Message {
        parts,
        ..Message::text_message(role, "")
    };
    let image = Image {
        source: Source::Bytes(PIXEL_PNG.to_vec()),
        media_type: Some("image/png".into()),
        detail: None,
    };
    let call = ToolCall {
        id: "call_weather_1".into(),
        name: "get_weather".into(),
        arguments: r#"{"city":"Paris","unit":"celsius"}"#.into(),
    };
    let text = |text: &str| Part::Text(text.into());
    let prompt = vec![
        message(
            Role::System,
            vec![text("You are a terse weather assistant.")],
        ),
        message(
            Role::User,
            vec![
                text("What is the weather in Paris, and does it match this sky?"),
                Part::Image(image),
            ],
        ),
        Message {
            tool_calls: vec![call],
            ..message(Role::Assistant, vec![text("Let me look it up.")])
        },
        Message {
            tool_call_id: Some("call_weather_1".into()),
            name: Some("get_weather".into()),
            ..message(
                Role::Tool,
                vec![text(r#"{"temperature":18,"sky":"overcast"}"#)],
            )
        },
    ];
    let parameters = r#"{"type":"object","properties":{"city":{"type":"string","description":"The city's name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}"#;
    CompletionRequest {
        route,
        model: model.into(),
        prompt: Prompt::Chat(prompt),
        functions: vec![FunctionDef {
            name: "get_weather".into(),
            description: Some("The current weather of a city".into()),
            parameters: Some(parameters.into()),
        }],
        function_choice: Some(FunctionChoice::Auto),
        reasoning: Some(ReasoningConfig {
            effort: Some(ReasoningEffort::Low),
            budget_tokens: None,
        }),
        output: OutputLimit {
            max_tokens: Some(4096),
            choices: 1,
        },
        params: r#"{"temperature": 0.2, "max_tokens": 4096, "stop": ["END"]}"#.into(),
    }
}

/// The upstream request a plugin made, as its golden file holds it: the URL and the body.
pub fn sent(http: &crate::http::Request) -> Value {
    let body = serde_json::from_slice::<Value>(http.body_bytes())
        .unwrap_or_else(|e| panic!("the request body is not JSON: {e}"));
    serde_json::json!({"url": http.url(), "body": body})
}

/// Compares `actual` with the golden file at `path` (pretty JSON, keys sorted), panicking with a
/// line diff when they differ; with `UPDATE_GOLDEN=1` in the environment, writes `actual` there
/// instead.
#[track_caller]
pub fn check(path: &Path, actual: &Value) {
    let actual = format!("{}\n", pretty(actual));
    if std::env::var_os(UPDATE).is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(path, &actual)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "cannot read the golden file {}: {e}; run the test with {UPDATE}=1 to write it",
            path.display()
        )
    });
    if expected != actual {
        panic!(
            "the upstream request differs from the golden file {} (- golden, + now); run the test \
             with {UPDATE}=1 to accept it:\n{}",
            path.display(),
            diff(&expected, &actual)
        );
    }
}

/// Pretty JSON with every object's keys sorted (whatever order `serde_json` keeps them in).
fn pretty(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sorted(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string_pretty(&sorted(value)).unwrap_or_default()
}

/// The lines of `old` and `new` that differ (`-` old, `+` new), with two lines of context
/// around each change: the longest common subsequence of their lines.
fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', a[i]));
            i += 1;
        } else {
            lines.push(('+', b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        let from = k.saturating_sub(2);
        let to = (k + 3).min(lines.len());
        lines[from..to].iter().any(|(mark, _)| *mark != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (mark, line)) in lines.iter().enumerate() {
        if near_change(k) {
            if skipped {
                out.push_str("  ...\n");
                skipped = false;
            }
            out.push_str(&format!("{mark} {line}\n"));
        } else {
            skipped = true;
        }
    }
    if skipped && !out.is_empty() {
        out.push_str("  ...\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn the_diff_shows_changed_lines_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            diff(old, new),
            "  ...\n  c\n  d\n- e\n+ E\n  f\n  g\n  ...\n"
        );
        assert_eq!(diff("x\n", "x\n"), "");
    }
}
