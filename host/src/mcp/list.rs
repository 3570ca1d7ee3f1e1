//! `tools/list`: the tools of every server the caller's key may use, named `ID__TOOL`, in a
//! stable order (server, then the server's own order), in pages.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

use super::{Exchange, Fault};
use crate::state::Live;
use crate::tools::{self, Extra, wire};

/// Tools per page: enough for most catalogs in one answer, few enough that a huge one
/// comes in pieces.
const PAGE: usize = 200;

pub(super) async fn list(live: &Live, exchange: &Exchange) -> Result<Value, Fault> {
    let offset = match exchange.params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(decode_cursor)
            .ok_or_else(|| Fault::new(wire::INVALID_PARAMS, "invalid cursor"))?,
    };
    let visible = visible_tools(live, exchange).await;
    let page: Vec<Value> = visible.iter().skip(offset).take(PAGE).cloned().collect();
    let mut result = Map::new();
    let next = offset + page.len();
    result.insert("tools".into(), Value::Array(page));
    if next < visible.len() {
        result.insert("nextCursor".into(), Value::String(encode_cursor(next)));
    }
    if matches!(exchange.era, super::Era::Modern) {
        // Which tools a list holds depends on the key: no shared cache may keep it.
        result.insert("ttlMs".into(), json!(0));
        result.insert("cacheScope".into(), json!("private"));
    }
    Ok(Value::Object(result))
}

/// Every tool the key may see, its definition renamed. Servers are asked at once; one that
/// fails is left out and logged: a server down does not fail the list.
async fn visible_tools(live: &Live, exchange: &Exchange) -> Vec<Value> {
    let extra = Extra::default();
    let mut asked = Vec::new();
    for (id, entry) in live.tools.iter() {
        match &entry.server {
            Ok(server) => {
                let server = server.clone();
                let extra = extra.clone();
                let listing = tokio::spawn(async move { server.tools(&extra).await });
                asked.push((id, entry, listing));
            }
            Err(reason) => tracing::warn!(server = %id, "left out of tools/list: {reason}"),
        }
    }
    let mut visible = Vec::new();
    for (id, entry, listing) in asked {
        let tools = match listing.await {
            Ok(Ok(tools)) => tools,
            Ok(Err(error)) => {
                tracing::warn!(server = %id, "left out of tools/list: {error}");
                continue;
            }
            Err(error) => {
                tracing::error!(server = %id, "left out of tools/list: the listing task failed: {error}");
                continue;
            }
        };
        for tool in tools.iter() {
            let name = tools::exposed_name(id, &tool.name);
            if !entry.config.allows_tool(&tool.name) || !exchange.key.allows_tool(&name) {
                continue;
            }
            let mut definition = tool.definition.clone();
            if let Value::Object(fields) = &mut definition {
                fields.insert("name".into(), Value::String(name));
            }
            visible.push(definition);
        }
    }
    visible
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("o{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let text = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&text)
        .ok()?
        .strip_prefix('o')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn cursors_round_trip() {
        assert_eq!(super::decode_cursor(&super::encode_cursor(400)), Some(400));
        assert_eq!(super::decode_cursor("bm9wZQ"), None);
    }
}
