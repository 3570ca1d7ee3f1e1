//! Bedrock's errors, as answers (`x-amzn-errortype` header or `__type` field, and a JSON
//! `message`) and as exceptions inside an event stream (`:exception-type`), mapped to what the
//! gateway tells the caller.
//!
//! | Bedrock | error | caller |
//! |---|---|---|
//! | `ThrottlingException` (also `TooManyRequestsException`, `ServiceQuotaExceededException`) | upstream 429 | 429, retried by the route's `retries` |
//! | `ValidationException` | invalid request | 400 with Bedrock's message |
//! | `AccessDeniedException`, `UnrecognizedClientException`, `InvalidSignatureException`, `ExpiredTokenException` | upstream 403 | 502 with Bedrock's message |
//! | `ServiceUnavailableException`, `ModelNotReadyException` | upstream 503 | 502, retried |
//! | `InternalServerException`, `ModelStreamErrorException` | upstream 500 | 502, retried |
//! | `ModelTimeoutException` | upstream 504 | 502, retried |
//! | `ResourceNotFoundException` | upstream 404 | 404 (a model the caller named that is not there) |
//! | anything else | upstream, with the answer's status | 502 (429, 400, 404, 413 and 422 as themselves) |
//!
//! A signature error's message is cut before the canonical request AWS quotes in it (which
//! holds the session token when there is one).

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{ProviderError, UpstreamError, upstream_error};
use serde_json::Value;

/// The longest message kept, in characters.
const MAX_MESSAGE_CHARS: usize = 1000;

/// The error of a non-2xx answer (its body read to its end).
pub fn from_response(response: Response) -> ProviderError {
    let status = response.status;
    let header_kind = response.header("x-amzn-errortype").map(str::to_owned);
    let retry_after = response.header("retry-after").map(str::to_owned);
    // The status says what matters; a body that fails to arrive only costs the message.
    let body = response.bytes().unwrap_or_default();
    let json: Option<Value> = serde_json::from_slice(&body).ok();
    let kind = header_kind
        .as_deref()
        .or_else(|| json.as_ref()?.get("__type")?.as_str())
        .map(error_kind)
        .unwrap_or_default();
    let message = json
        .as_ref()
        .and_then(|json| json.get("message").or_else(|| json.get("Message")))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|message| !message.is_empty())
        .map(str::to_owned);
    let message = match (message, &json) {
        (Some(message), _) => message,
        (None, Some(_)) => String::new(),
        // Not Bedrock's JSON (a proxy's page): the SDK's reading of any error body.
        (None, None) => match upstream_error(status, &body, None) {
            ProviderError::Upstream(error) => error.message,
            other => other.to_string(),
        },
    };
    let retry_after = match upstream_error(status, b"", retry_after.as_deref()) {
        ProviderError::Upstream(error) => error.retry_after,
        _ => None,
    };
    mapped(&kind, Some(status), message, retry_after)
}

/// The error of an exception Bedrock sent in a stream (`:exception-type` such as
/// `throttlingException`, and its message).
pub fn from_exception(kind: &str, message: &str) -> ProviderError {
    mapped(kind, None, message.to_owned(), None)
}

/// `ValidationException` of `ValidationException:http://internal.amazon.com/coral/...` (the
/// header's form) or of `com.amazon.coral.validate#ValidationException` (`__type`'s).
fn error_kind(raw: &str) -> String {
    let kind = raw.split(':').next().unwrap_or(raw);
    kind.rsplit('#').next().unwrap_or(kind).trim().to_owned()
}

/// The gateway's error for a Bedrock error of `kind` (any letter case of its first letter:
/// answers say `ThrottlingException`, streams `throttlingException`), answered with `status`
/// when it came as an answer.
fn mapped(
    kind: &str,
    status: Option<u16>,
    message: String,
    retry_after: Option<u32>,
) -> ProviderError {
    let message = clean(message, kind, status);
    let lower = kind.to_ascii_lowercase();
    let upstream = |status: u16| {
        ProviderError::Upstream(UpstreamError {
            status,
            message: message.clone(),
            retry_after,
        })
    };
    match lower.as_str() {
        "throttlingexception" | "toomanyrequestsexception" | "servicequotaexceededexception" => {
            upstream(429)
        }
        "validationexception" => ProviderError::InvalidRequest(format!(
            "Bedrock refused the request (ValidationException): {message}"
        )),
        "accessdeniedexception"
        | "unrecognizedclientexception"
        | "invalidsignatureexception"
        | "incompletesignatureexception"
        | "signaturedoesnotmatch"
        | "expiredtokenexception"
        | "missingauthenticationtokenexception" => upstream(status.unwrap_or(403)),
        "serviceunavailableexception" | "modelnotreadyexception" => upstream(503),
        "internalserverexception" | "modelstreamerrorexception" => upstream(500),
        "modeltimeoutexception" => upstream(504),
        "resourcenotfoundexception" => upstream(404),
        _ => upstream(status.unwrap_or(500)),
    }
}

/// The message as the caller may see it: without the canonical request and string to sign a
/// signature error quotes, at most [`MAX_MESSAGE_CHARS`] long, and not empty.
fn clean(message: String, kind: &str, status: Option<u16>) -> String {
    let message = match message.find("The Canonical String for this request") {
        Some(cut) => message[..cut].trim_end().to_owned(),
        None => message,
    };
    let message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    if !message.trim().is_empty() {
        return message;
    }
    match (kind.is_empty(), status) {
        (false, _) => format!("Bedrock reported {kind}"),
        (true, Some(status)) => format!("Bedrock answered HTTP {status} without a message"),
        (true, None) => "Bedrock reported an error without a message".to_owned(),
    }
}
