//! Error answers of upstream APIs.

use std::time::{Duration, SystemTime};

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
/// `retry_after` is the `Retry-After` header's value, either delay-seconds (a
/// fraction is rounded up) or an HTTP date (IMF-fixdate, or the obsolete RFC 850
/// and asctime forms), which becomes the seconds from now until then, rounded
/// up (0 for a date in the past). Values beyond `u32::MAX` seconds saturate;
/// garbage gives `None`.
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

/// Builds [`ProviderError::Upstream`] from an error the upstream reported
/// inside a successful answer: mid-stream, or a status 200 answer holding an
/// `error` object instead of a result.
///
/// `error` is the error object (`{"message", "code", "status", ...}`, the
/// shape OpenAI-style and Google APIs share) or a bare string. The message is
/// its non-empty `message`, else the error's JSON text. The status is its
/// `code` when that is an HTTP error status (a number or a numeric string),
/// else the HTTP status of a Google canonical `status` name
/// (`RESOURCE_EXHAUSTED` is 429, ...), else 500: the upstream failed after
/// accepting the request.
///
/// ```
/// use gateway_plugin_sdk::{embedded_error, ProviderError};
/// use serde_json::json;
///
/// let error = embedded_error(&json!({"message": "quota", "status": "RESOURCE_EXHAUSTED"}));
/// let ProviderError::Upstream(error) = error else { panic!() };
/// assert_eq!((error.status, error.message.as_str()), (429, "quota"));
/// ```
pub fn embedded_error(error: &Value) -> ProviderError {
    let message = match error {
        Value::String(message) => message.clone(),
        Value::Object(object) => match object.get("message") {
            Some(Value::String(message)) if !message.trim().is_empty() => message.clone(),
            _ => error.to_string(),
        },
        other => other.to_string(),
    };
    let from_code = error
        .get("code")
        .and_then(|code| match code {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..=599).contains(code));
    let from_status = error
        .get("status")
        .and_then(Value::as_str)
        .and_then(|status| match status {
            "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => Some(400),
            "UNAUTHENTICATED" => Some(401),
            "PERMISSION_DENIED" => Some(403),
            "NOT_FOUND" => Some(404),
            "RESOURCE_EXHAUSTED" => Some(429),
            "UNAVAILABLE" => Some(503),
            "DEADLINE_EXCEEDED" => Some(504),
            _ => None,
        });
    ProviderError::Upstream(UpstreamError {
        status: from_code.or(from_status).unwrap_or(500),
        message: truncate(message),
        retry_after: None,
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
    parse_retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] with the current time given, so tests can fix it.
fn parse_retry_after_at(value: &str, now: SystemTime) -> Option<u32> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u32>() {
        return Some(seconds);
    }
    if let Ok(seconds) = value.parse::<f64>() {
        // `as` saturates; the range check keeps NaN and negatives out.
        return (seconds.is_finite() && seconds >= 0.0).then(|| seconds.ceil() as u32);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    // A date already past (clocks disagree) means: retry now.
    let wait = date.duration_since(now).unwrap_or(Duration::ZERO);
    // Rounded up, as fractions above: retrying early only earns another 429.
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    Some(u32::try_from(seconds).unwrap_or(u32::MAX))
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
    fn embedded_errors() {
        let e = |v: Value| parts(embedded_error(&v));
        let error = e(serde_json::json!({"message": "bad", "code": 400}));
        assert_eq!((error.status, error.message.as_str()), (400, "bad"));
        assert_eq!(
            e(serde_json::json!({"message": "x", "code": "429"})).status,
            429
        );
        // Codes that are not HTTP error statuses do not count.
        assert_eq!(
            e(serde_json::json!({"message": "x", "code": 200})).status,
            500
        );
        assert_eq!(
            e(serde_json::json!({"message": "x", "code": "rate_limit_exceeded"})).status,
            500
        );
        assert_eq!(
            e(serde_json::json!({"message": "x", "status": "UNAVAILABLE"})).status,
            503
        );
        // The code wins over the status name.
        assert_eq!(
            e(serde_json::json!({"code": 403, "status": "UNAVAILABLE"})).message,
            r#"{"code":403,"status":"UNAVAILABLE"}"#
        );
        assert_eq!(e(serde_json::json!("plain")).message, "plain");
        assert_eq!(
            e(serde_json::json!({"message": " "})).message,
            r#"{"message":" "}"#
        );
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
        assert_eq!(e("4294967296"), Some(u32::MAX));
        assert_eq!(e("1e30"), Some(u32::MAX));
        assert_eq!(e("NaN"), None);
        assert_eq!(e("inf"), None);
    }

    /// 2015-10-21 07:28:00 UTC, the RFC's example date.
    fn example_date() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn retry_after_future_date_counts_the_seconds_until_it() {
        let now = example_date() - Duration::from_secs(90);
        assert_eq!(
            parse_retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(90)
        );
        // Surrounding whitespace is not part of the value.
        assert_eq!(
            parse_retry_after_at("  Wed, 21 Oct 2015 07:28:00 GMT ", now),
            Some(90)
        );
        // A part of a second still to wait counts as a whole one.
        let now = example_date() - Duration::from_millis(1500);
        assert_eq!(
            parse_retry_after_at("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(2)
        );
    }

    #[test]
    fn retry_after_past_or_present_date_is_zero() {
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(parse_retry_after_at(date, example_date()), Some(0));
        let later = example_date() + Duration::from_secs(3600);
        assert_eq!(parse_retry_after_at(date, later), Some(0));
        assert_eq!(
            parse_retry_after_at("Thu, 01 Jan 1970 00:00:00 GMT", later),
            Some(0)
        );
    }

    #[test]
    fn retry_after_obsolete_date_forms() {
        let now = example_date() - Duration::from_secs(60);
        // RFC 850, two-digit year.
        assert_eq!(
            parse_retry_after_at("Wednesday, 21-Oct-15 07:28:00 GMT", now),
            Some(60)
        );
        // asctime, day padded with a space.
        assert_eq!(
            parse_retry_after_at("Wed Oct 21 07:28:00 2015", now),
            Some(60)
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_446_336_000 - 5);
        assert_eq!(
            parse_retry_after_at("Sun Nov  1 00:00:00 2015", now),
            Some(5)
        );
    }

    #[test]
    fn retry_after_far_future_date_saturates() {
        assert_eq!(
            parse_retry_after_at("Fri, 31 Dec 9999 23:59:59 GMT", example_date()),
            Some(u32::MAX)
        );
    }

    #[test]
    fn retry_after_garbage_is_none() {
        let now = example_date();
        for value in [
            "",
            "soon",
            "Wed, 21 Oct 2015",
            // Wrong weekday for the date.
            "Thu, 21 Oct 2015 07:28:00 GMT",
            // Not GMT.
            "Wed, 21 Oct 2015 07:28:00 PST",
            "Wed, 21 Oct 2015 25:28:00 GMT",
            "Wed, 32 Oct 2015 07:28:00 GMT",
            "2015-10-21T07:28:00Z",
            "Wed, 21 Oct 2015 07:28:00 GMT extra",
            "Mié, 21 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(parse_retry_after_at(value, now), None, "{value:?}");
        }
    }

    #[test]
    fn retry_after_date_uses_the_clock() {
        // Through the public entry point, which reads the clock itself: the
        // wait lies between the date's distance from the instants just before
        // and just after the call.
        let before = SystemTime::now();
        let header = httpdate::fmt_http_date(before + Duration::from_secs(86_400));
        let date = httpdate::parse_http_date(&header).expect("a formatted date parses");
        let wait = parts(upstream_error(429, b"", Some(&header)))
            .retry_after
            .expect("a date gives a wait");
        let after = SystemTime::now();
        let seconds = |from: SystemTime| date.duration_since(from).map_or(0.0, |d| d.as_secs_f64());
        let wait = f64::from(wait);
        assert!(
            seconds(after).floor() <= wait && wait <= seconds(before).ceil(),
            "{wait} not within [{}, {}]",
            seconds(after),
            seconds(before)
        );
    }
}
