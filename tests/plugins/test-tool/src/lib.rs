//! A tool plugin for the gateway's tests: `reverse` (the same tool as `examples/js-tool`'s, so
//! that one can replace the other under load), `fetch` (any URL: the sandbox decides), `spin`
//! (CPU until the limit), `hog` (memory until the limit), `leak` (answers the server's secret
//! `token`: the gateway must redact it), `fail` (a `failed` tool error) and `picture` (every
//! kind of content block).

use gateway_plugin_sdk::http::Request;
use gateway_plugin_sdk::tool::*;
use serde::Deserialize;
use serde_json::json;

struct TestTool;

#[derive(Deserialize)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
struct Url {
    url: String,
}

fn object(properties: serde_json::Value, required: &[&str]) -> serde_json::Value {
    json!({"type": "object", "properties": properties, "required": required})
}

impl Tools for TestTool {
    fn info() -> PluginInfo {
        PluginInfo::new("test-tool", env!("CARGO_PKG_VERSION"), Vec::new())
    }

    fn tools(_context: &Context) -> Vec<ToolDef> {
        let text = object(json!({"text": {"type": "string"}}), &["text"]);
        let url = object(json!({"url": {"type": "string"}}), &["url"]);
        let none = object(json!({}), &[]);
        vec![
            ToolDef::new("reverse", "Reverses a text", text).read_only(),
            ToolDef::new("fetch", "GETs a URL; answers its status and body", url),
            ToolDef::new("spin", "Loops forever", none.clone()),
            ToolDef::new("hog", "Allocates without end", none.clone()),
            ToolDef::new("leak", "Answers the server's secret", none.clone()),
            ToolDef::new("fail", "Fails", none.clone()),
            ToolDef::new("picture", "Every kind of content", none).title("Picture"),
        ]
    }

    fn call(name: &str, arguments: Arguments, context: &Context) -> Result<ToolResult, ToolError> {
        match name {
            "reverse" => {
                let Text { text } = arguments.parse()?;
                Ok(ToolResult::text(text.chars().rev().collect::<String>()))
            }
            "fetch" => {
                let Url { url } = arguments.parse()?;
                let response = Request::get(url).send()?;
                let status = response.status;
                let body = String::from_utf8_lossy(&response.bytes()?).into_owned();
                Ok(ToolResult::text(format!("{status} {body}")))
            }
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "hog" => {
                let mut kept: Vec<Vec<u8>> = Vec::new();
                loop {
                    kept.push(vec![1; 1024 * 1024]);
                    std::hint::black_box(&kept);
                }
            }
            "leak" => Ok(ToolResult::text(format!(
                "the token is {}",
                context.secret("token").unwrap_or("missing")
            ))),
            // Its message quotes the secret: the gateway must redact it there too.
            "fail" => Err(ToolError::Failed(format!(
                "the test tool fails on purpose (token {})",
                context.secret("token").unwrap_or("missing")
            ))),
            "picture" => Ok(ToolResult::text("a picture")
                .with(Content::image(vec![137, 80, 78, 71], "image/png"))
                .with(Content::audio(vec![82, 73, 70, 70], "audio/wav"))
                .with(Content::link("https://example.com/a.png", "a.png"))
                .with(Content::Embedded(EmbeddedResource {
                    uri: "mem://note".into(),
                    media_type: Some("text/plain".into()),
                    body: ResourceBody::Text("a note".into()),
                }))),
            _ => Err(ToolError::unknown(name)),
        }
    }
}

export_tool!(TestTool);
