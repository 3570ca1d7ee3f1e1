//! What a record keeps of a request's images, audio and documents: never
//! their bytes. With `record_bodies = "truncated"` each base64 payload of the
//! request body — a `data:` URL (OpenAI's `image_url` and `file_data`, the
//! Responses API's `image_url`), or the `data` / `file_data` of a part
//! (Anthropic's `base64` sources, OpenAI's `input_audio`) — is
//! replaced by `{kind, media_type, bytes, sha256}` of the decoded bytes (decoded a
//! piece at a time into the hash: never held whole).
//! Every surface's shape is covered by this one walk over the JSON, so a
//! surface added later is covered too.
//!
//! Only bodies that can carry media are read again: the raw body is first
//! searched for the markers every such shape has (`base64`, `input_audio`),
//! so a text-only request costs one `memmem` scan.
//!
//! A `multipart/form-data` body (an audio upload) is kept as a JSON object of its fields, each
//! file summarized the same way with its `file_name` ([`form_summary`]), whatever the config's
//! `record_bodies`: its bytes are no text a record could show.

use serde_json::{Map, Value, json};

use crate::encoding::base64_sha256;

/// Shorter strings are kept as they are: no media payload is this small, and
/// a record may show them whole.
const MIN_PAYLOAD: usize = 64;

/// `body` with its media payloads summarized, `None` when it has none (or is
/// not JSON): the caller keeps the body as it is.
pub fn summarized(body: &[u8]) -> Option<String> {
    let may_carry = memchr::memmem::find(body, b"base64").is_some()
        || memchr::memmem::find(body, b"input_audio").is_some();
    if !may_carry {
        return None;
    }
    let mut value: Value = serde_json::from_slice(body).ok()?;
    summarize(&mut value).then(|| value.to_string())
}

/// A `multipart/form-data` body as a record keeps it: its text fields as they are (a field sent
/// more than once as a list), each file as `{kind, media_type, file_name, bytes, sha256}`; a
/// form that does not read as the error that says why. `None` for any other body.
pub fn form_summary(content_type: Option<&str>, body: &[u8]) -> Option<String> {
    crate::form::boundary(content_type)?;
    let form = match crate::form::read(content_type, body) {
        Ok(form) => form,
        Err(error) => return Some(json!({ "form_error": error.to_string() }).to_string()),
    };
    let mut fields = Map::new();
    for field in form.fields {
        let value = match &field.file_name {
            Some(file_name) => {
                let media_type = field.content_type.as_deref();
                json!({
                    "kind": kind_of(media_type),
                    "media_type": media_type,
                    "file_name": file_name,
                    "bytes": field.data.len(),
                    "sha256": crate::encoding::sha256_hex(&field.data),
                })
            }
            None => Value::String(String::from_utf8_lossy(&field.data).into_owned()),
        };
        let name = field
            .name
            .strip_suffix("[]")
            .unwrap_or(&field.name)
            .to_owned();
        match fields.get_mut(&name) {
            Some(Value::Array(values)) => values.push(value),
            Some(first) => *first = Value::Array(vec![first.take(), value]),
            None => {
                fields.insert(name, value);
            }
        }
    }
    Some(Value::Object(fields).to_string())
}

/// Replaces the payloads under `value`; whether it replaced any.
fn summarize(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match data_url(text) {
            Some(summary) => {
                *value = summary;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, item| summarize(item) | any),
        Value::Object(object) => summarize_object(object),
        _ => false,
    }
}

fn summarize_object(object: &mut Map<String, Value>) -> bool {
    let media_type = (object.get("media_type").or_else(|| object.get("mime_type")))
        .or_else(|| object.get("mimeType"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            let format = object.get("format")?.as_str()?;
            Some(format!("audio/{format}"))
        });
    let mut any = false;
    for (key, field) in object.iter_mut() {
        let payload = matches!(key.as_str(), "data" | "file_data" | "bytes");
        any |= match field {
            Value::String(text) if payload && text.len() >= MIN_PAYLOAD => {
                match data_url(text).or_else(|| summary_of(media_type.as_deref(), text)) {
                    Some(summary) => {
                        *field = summary;
                        true
                    }
                    None => false,
                }
            }
            other => summarize(other),
        };
    }
    any
}

/// The summary of a `data:<media type>;base64,<data>` URL.
fn data_url(text: &str) -> Option<Value> {
    let rest = text.strip_prefix("data:")?;
    let (media_type, data) = rest.split_once(";base64,")?;
    summary_of(Some(media_type), data)
}

/// The summary of base64 `data` of `media_type`; `None` when it is not base64.
fn summary_of(media_type: Option<&str>, data: &str) -> Option<Value> {
    let (bytes, sha256) = base64_sha256(data.trim())?;
    let kind = kind_of(media_type);
    Some(json!({"kind": kind, "media_type": media_type, "bytes": bytes, "sha256": sha256}))
}

/// What a payload of `media_type` is, as a summary names it.
fn kind_of(media_type: Option<&str>) -> &'static str {
    match media_type.and_then(|m| m.split('/').next()) {
        Some("image") => "image",
        Some("audio") => "audio",
        _ => "document",
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::encoding::sha256_hex;

    /// 60 bytes, long enough to be taken for a payload once encoded.
    fn payload() -> (String, Vec<u8>) {
        let bytes: Vec<u8> = (0u8..60).collect();
        let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
        (data, bytes)
    }

    #[test]
    fn a_text_only_body_is_left_alone() {
        assert_eq!(
            summarized(br#"{"messages": [{"role": "user", "content": "hi"}]}"#),
            None
        );
        // Mentions the word but carries nothing.
        assert_eq!(
            summarized(br#"{"messages": [{"content": "base64 is a code"}]}"#),
            None
        );
    }

    #[test]
    fn a_form_is_kept_as_its_fields_and_its_files_summaries() {
        let body = "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nr/whisper-1\r\n\
            --B\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nword\r\n\
            --B\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\r\n\r\nsegment\r\n\
            --B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\
            Content-Type: audio/wav\r\n\r\nRIFF\x01\r\n--B--\r\n";
        let kind = Some("multipart/form-data; boundary=B");
        let kept: Value =
            serde_json::from_str(&form_summary(kind, body.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            kept,
            json!({
                "model": "r/whisper-1",
                "timestamp_granularities": ["word", "segment"],
                "file": {"kind": "audio", "media_type": "audio/wav", "file_name": "a.wav",
                         "bytes": 5, "sha256": sha256_hex(b"RIFF\x01")},
            })
        );
        let cut: Value =
            serde_json::from_str(&form_summary(kind, b"--B\r\nContent-Disp").unwrap()).unwrap();
        assert!(cut["form_error"].as_str().is_some(), "{cut}");
        assert_eq!(form_summary(Some("application/json"), b"{}"), None);
    }

    #[test]
    fn every_surfaces_payloads_become_summaries() {
        let (data, bytes) = payload();
        let summary = |media_type: &str, kind: &str| json!({"kind": kind, "media_type": media_type, "bytes": 60, "sha256": sha256_hex(&bytes)});
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}},
            {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
            {"type": "file", "file": {"file_data": format!("data:application/pdf;base64,{data}")}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}},
        ]}]});
        let kept: Value =
            serde_json::from_str(&summarized(body.to_string().as_bytes()).unwrap()).unwrap();
        let parts = &kept["messages"][0]["content"];
        assert_eq!(parts[0]["text"], "look");
        assert_eq!(parts[1]["image_url"]["url"], summary("image/png", "image"));
        assert_eq!(
            parts[2]["input_audio"]["data"],
            summary("audio/wav", "audio")
        );
        assert_eq!(
            parts[3]["file"]["file_data"],
            summary("application/pdf", "document")
        );
        assert_eq!(
            parts[4]["source"]["data"],
            summary("application/pdf", "document")
        );
        assert!(!kept.to_string().contains(&data));
    }
}
