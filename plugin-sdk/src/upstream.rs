//! Error answers of upstream APIs.

use serde_json::Value;

use crate::{ProviderError, UpstreamError};

/// The longest provider message kept, in characters; error pages can be huge.
const MAX_MESSAGE_CHARS: usize = 1000;

/// Builds [`ProviderError::Upstream`] from an error answer of the upstream
/// API.
///
/// The message is taken from the body's `{"error": {"message": ...}}`,
/// `{"error": "..."}` or `{"message": ...}`, else it is the body text itself
/// (trimmed); either way it is cut to at most 1000 characters. An empty body
/// gives a message naming the status.
///
/// `retry_after` is the `Retry-After` header's value: whole seconds (a
/// fraction is rounded up); an HTTP date or garbage gives `None`.
pub fn upstream_error(status: u16, body: &[u8], retry_after: Option<&str>) -> ProviderError {
    let message =
        json_message(body).unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
    let message = if message.is_empty() {
        format!("the provider answered HTTP {status} without a message")
    } else {
        truncate(message)
    };
    ProviderError::Upstream(UpstreamError {
        status,
        message,
        retry_after: retry_after.and_then(parse_retry_after),
    })
}

fn json_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let message = match value.get("error") {
        Some(Value::Object(error)) => error.get("message"),
        Some(error @ Value::String(_)) => Some(error),
        _ => None,
    }
    .or_else(|| value.get("message"))?;
    let message = message.as_str()?.trim();
    (!message.is_empty()).then(|| message.to_owned())
}

fn truncate(mut message: String) -> String {
    if let Some((cut, _)) = message.char_indices().nth(MAX_MESSAGE_CHARS) {
        message.truncate(cut);
    }
    message
}

fn parse_retry_after(value: &str) -> Option<u32> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u32>() {
        return Some(seconds);
    }
    let seconds = value.parse::<f64>().ok()?;
    // `as` saturates; the range check keeps NaN and negatives out.
    (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(error: ProviderError) -> UpstreamError {
        match error {
            ProviderError::Upstream(e) => e,
            other => panic!("not upstream: {other:?}"),
        }
    }

    #[test]
    fn openai_shape() {
        let body =
            br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        let e = parts(upstream_error(401, body, None));
        assert_eq!(e.status, 401);
        assert_eq!(e.message, "Incorrect API key provided");
        assert_eq!(e.retry_after, None);
    }

    #[test]
    fn string_error_and_message_shapes() {
        assert_eq!(
            parts(upstream_error(400, br#"{"error":"bad model"}"#, None)).message,
            "bad model"
        );
        assert_eq!(
            parts(upstream_error(400, br#"{"message":"nope"}"#, None)).message,
            "nope"
        );
    }

    #[test]
    fn other_bodies_are_used_as_text() {
        let e = parts(upstream_error(502, b"  <html>Bad gateway</html>\n", None));
        assert_eq!(e.message, "<html>Bad gateway</html>");
        // An error object without a message falls back to the whole body.
        let e = parts(upstream_error(500, br#"{"error":{"code":1}}"#, None));
        assert_eq!(e.message, r#"{"error":{"code":1}}"#);
    }

    #[test]
    fn empty_body_names_the_status() {
        let e = parts(upstream_error(503, b"", None));
        assert!(e.message.contains("503"), "{}", e.message);
    }

    #[test]
    fn long_messages_are_cut_on_char_boundaries() {
        let body = "é".repeat(3000);
        let e = parts(upstream_error(500, body.as_bytes(), None));
        assert_eq!(e.message.chars().count(), 1000);
    }

    #[test]
    fn retry_after() {
        let e = |v| parts(upstream_error(429, b"", Some(v))).retry_after;
        assert_eq!(e("20"), Some(20));
        assert_eq!(e(" 7 "), Some(7));
        assert_eq!(e("1.2"), Some(2));
        assert_eq!(e("-1"), None);
        assert_eq!(e("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
