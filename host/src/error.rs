//! Every way a request can fail, and the one place each maps to an HTTP
//! status (and `Retry-After`); API surfaces only choose the body's shape.

use hyper::StatusCode;
use serde_json::json;

use crate::plugins::{PluginError, types};
use crate::redact::Secrets;
use crate::store::GuardStage;

/// The `code` of a provider plugin's crash (a panic, an uncaught exception, a trap, its CPU
/// or memory limit), whatever the API surface.
pub const PLUGIN_ERROR: &str = "plugin_error";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("the request body is larger than the limit of {0} bytes")]
    BodyTooLarge(usize),
    #[error(
        "the request's text with its variables filled in is larger than the limit of {0} bytes (max_expanded_bytes)"
    )]
    ExpansionTooLarge(usize),
    /// An image, audio clip or document larger than `max_part_bytes` once decoded.
    #[error("{param} is larger than the limit of {limit} bytes (max_part_bytes)")]
    PartTooLarge { param: String, limit: usize },
    #[error("the file is larger than the limit of {0} bytes (max_file_bytes)")]
    FileTooLarge(u64),
    #[error(
        "the project's files would take more than {0} bytes (max_project_file_bytes): delete \
         some, or wait for uploads in progress to end"
    )]
    FilesFull(u64),
    #[error("the request was not received within {0} s (request_read_timeout_secs)")]
    RequestTimeout(u64),
    #[error("{0}")]
    BadRequest(String),
    /// A bad value of one named request parameter (`param` as the caller's
    /// API spells it, e.g. `messages[2].content`).
    #[error("{message}")]
    InvalidParam { param: String, message: String },
    #[error(
        "missing API key: send the project's key in the Authorization header (or, on /v1/ endpoints, in x-api-key)"
    )]
    MissingKey,
    #[error("invalid or revoked API key")]
    InvalidKey,
    #[error("this API key expired at {0}")]
    KeyExpired(String),
    /// The key may not be used for what was asked (its routes or models).
    #[error("{0}")]
    OutOfScope(String),
    /// A rate limit or budget of the project or key; the message names it.
    #[error("{0}")]
    RateLimited(crate::limits::Refused),
    /// The request names something ambiguously or conflicts with the state.
    #[error("{0}")]
    Conflict(String),
    #[error(
        "admin endpoints need the config's admin_token or a personal admin token (gwa_...) as a \
         Bearer token, or the console's session"
    )]
    AdminUnauthorized,
    /// A personal admin token that was revoked or expired; the message says which, and when.
    #[error("{0}")]
    AdminTokenRefused(String),
    /// The admin API's caller is known, and its role may not do what it asked.
    #[error("{0}")]
    AdminForbidden(String),
    #[error("wrong admin token")]
    WrongAdminToken,
    /// Too many wrong admin tokens from the client's address: the token was not compared.
    #[error("too many wrong admin tokens from this address; retry in {0} s")]
    SignInThrottled(u32),
    /// A change asked with the console's session cookie but without its CSRF token.
    #[error("a change from the admin console needs the session's x-csrf-token header")]
    CsrfRefused,
    #[error("GET /metrics needs the config's metrics_token as a Bearer token")]
    MetricsUnauthorized,
    #[error("this API key does not belong to project {0}")]
    WrongProject(String),
    #[error("unknown provider {0:?}")]
    UnknownRoute(String),
    #[error(
        "unknown model {0:?}: name a model as ROUTE/MODEL, a route id, or an alias of the config's [models]"
    )]
    UnknownModel(String),
    #[error("{0}")]
    NotFound(String),
    #[error("method not allowed: use {0}")]
    MethodNotAllowed(&'static str),
    #[error("provider {route:?} is unavailable: its plugin {plugin:?} is not loaded")]
    PluginNotLoaded { route: String, plugin: String },
    #[error("the provider answered with an error (HTTP {status})")]
    Upstream {
        status: u16,
        message: String,
        retry_after: Option<u32>,
    },
    #[error("the provider did not answer in time: {0}")]
    Timeout(String),
    #[error("the provider call failed: {0}")]
    ProviderFailed(String),
    #[error("the provider plugin failed: {0}")]
    PluginFailed(String),
    #[error("the provider plugin is unusable: {0}")]
    PluginUnavailable(String),
    #[error("the gateway is serving as many requests as it may at once ({0}); retry shortly")]
    Busy(u32),
    /// The bodies of the requests in flight fill `max_inflight_body_bytes` (the limit).
    #[error(
        "the gateway holds as many request bytes in flight as it may ({0} bytes, max_inflight_body_bytes); retry shortly"
    )]
    BodiesInFlight(usize),
    /// Every upstream of the route (and of its fallbacks) is out of rotation after failing
    /// repeatedly (`eject_after_failures`); the first is back in `retry_after` seconds.
    #[error(
        "every upstream of provider {route:?} is out of rotation after failing repeatedly; retry in {retry_after} s"
    )]
    Ejected { route: String, retry_after: u32 },
    /// A guard refused the request, or the answer (`stage`).
    #[error("{} was blocked by guard {guard:?}: {reason}", refused(.stage))]
    GuardDenied {
        guard: String,
        stage: GuardStage,
        reason: String,
    },
    /// A guard crashed, ran out of its limits or answered something unusable: guards fail
    /// closed, so the request is refused rather than let through unchecked.
    #[error("guard {guard:?} failed, and the request is refused unchecked: {reason}")]
    GuardFailed {
        guard: String,
        reason: String,
        /// It crashed (a panic, an uncaught exception, its CPU or memory limit), as a provider
        /// plugin can: the answer carries the same `plugin_error` code and points to the log.
        crashed: bool,
    },
    /// A guard the request must go through is not loaded (or not defined).
    #[error("guard {guard:?} is unavailable: {reason}")]
    GuardUnavailable { guard: String, reason: String },
    #[error("the gateway is shutting down: the request was ended before it was complete")]
    ShuttingDown,
    #[error("the gateway's database is unreachable; retry shortly")]
    DatabaseUnavailable(String),
    #[error("internal error")]
    Internal(String),
    /// Every try of a request failed (its retries, its fallbacks): the last
    /// one's error, whose status and `providerError` the answer keeps.
    #[error("{last} ({attempts} attempts)")]
    Exhausted {
        last: Box<ApiError>,
        attempts: usize,
    },
}

/// What a guard refused, in words: the request, or the answer.
fn refused(stage: &GuardStage) -> &'static str {
    match stage {
        GuardStage::Request => "the request",
        GuardStage::Response => "the answer",
    }
}

impl ApiError {
    /// A 400 naming the request's field `param` (`messages[2].content`) and what is wrong with
    /// it, as every surface reports a bad field.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::InvalidParam {
            param: param.into(),
            message: message.into(),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BodyTooLarge(_)
            | ApiError::FileTooLarge(_)
            | ApiError::FilesFull(_)
            | ApiError::ExpansionTooLarge(_)
            | ApiError::PartTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::BadRequest(_)
            | ApiError::InvalidParam { .. }
            | ApiError::GuardDenied { .. } => StatusCode::BAD_REQUEST,
            ApiError::MissingKey
            | ApiError::InvalidKey
            | ApiError::KeyExpired(_)
            | ApiError::AdminUnauthorized
            | ApiError::AdminTokenRefused(_)
            | ApiError::WrongAdminToken
            | ApiError::MetricsUnauthorized => StatusCode::UNAUTHORIZED,
            ApiError::WrongProject(_)
            | ApiError::OutOfScope(_)
            | ApiError::CsrfRefused
            | ApiError::AdminForbidden(_) => StatusCode::FORBIDDEN,
            ApiError::RateLimited(_) | ApiError::SignInThrottled(_) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::UnknownRoute(_) | ApiError::UnknownModel(_) | ApiError::NotFound(_) => {
                StatusCode::NOT_FOUND
            }
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PluginNotLoaded { .. }
            | ApiError::PluginUnavailable(_)
            | ApiError::Busy(_)
            | ApiError::BodiesInFlight(_)
            | ApiError::Ejected { .. }
            | ApiError::DatabaseUnavailable(_)
            | ApiError::GuardUnavailable { .. }
            | ApiError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            // Rate limits pass through so clients' retry logic works as it does upstream.
            ApiError::Upstream { status: 429, .. } => StatusCode::TOO_MANY_REQUESTS,
            // The provider refused the caller's request itself (a value out of its range, a
            // model it does not have, a body too large for it): the caller's fault, and a 4xx
            // so that clients do not send it again as they would after a 502. An upstream
            // 401/403 stays a 502: the route's key is the operator's to fix.
            ApiError::Upstream { status: 400, .. } => StatusCode::BAD_REQUEST,
            ApiError::Upstream { status: 404, .. } => StatusCode::NOT_FOUND,
            ApiError::Upstream { status: 413, .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Upstream { status: 422, .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Upstream { .. }
            | ApiError::ProviderFailed(_)
            | ApiError::PluginFailed(_)
            | ApiError::GuardFailed { .. } => StatusCode::BAD_GATEWAY,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Exhausted { last, .. } => last.status(),
        }
    }

    /// The upstream's own message, for `providerError`.
    pub fn provider_error(&self) -> Option<&str> {
        match self {
            ApiError::Upstream { message, .. } => Some(message),
            ApiError::ProviderFailed(message) | ApiError::Timeout(message) => Some(message),
            ApiError::Exhausted { last, .. } => last.provider_error(),
            _ => None,
        }
    }

    pub fn retry_after(&self) -> Option<u32> {
        match self {
            ApiError::Upstream { retry_after, .. } => *retry_after,
            // Instance slots free up as requests end, usually within a second.
            ApiError::Busy(_) => Some(1),
            // Bodies leave with their requests, most within seconds.
            ApiError::BodiesInFlight(_) => Some(1),
            ApiError::DatabaseUnavailable(_) => Some(5),
            ApiError::Ejected { retry_after, .. } | ApiError::SignInThrottled(retry_after) => {
                Some(*retry_after)
            }
            ApiError::RateLimited(refused) => {
                Some(u32::try_from(refused.retry_after_secs()).unwrap_or(u32::MAX))
            }
            ApiError::Exhausted { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// The message callers see. Internal details stay in the log.
    pub fn message(&self) -> String {
        self.to_string()
    }

    /// A stable code for errors the status alone does not tell apart, for the body's `code`.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ApiError::PluginFailed(_) | ApiError::GuardFailed { crashed: true, .. } => {
                Some(PLUGIN_ERROR)
            }
            ApiError::Exhausted { last, .. } => last.code(),
            _ => None,
        }
    }

    /// [`ApiError::message`] as the answer to invocation `invocation_id` says it: a plugin's
    /// crash points to the log, which has what the plugin's panic or exception said (the
    /// caller never sees that text: it may quote anything the plugin was sent or holds).
    pub fn message_for(&self, invocation_id: &uuid::Uuid) -> String {
        let message = self.message();
        if self.code() == Some(PLUGIN_ERROR) {
            format!(
                "{message} ({PLUGIN_ERROR}: the gateway's log has why, under invocation {invocation_id})"
            )
        } else {
            message
        }
    }

    /// [`ApiError::message_for`], for error shapes with no field for the parameter at fault
    /// or the provider's own message (Anthropic's, Google's): it names the one and quotes the
    /// other.
    pub fn described_for(&self, invocation_id: &uuid::Uuid) -> String {
        let mut message = self.message_for(invocation_id);
        if let ApiError::InvalidParam { param, .. } = self
            && !message.contains(param.as_str())
        {
            message = format!("{param}: {message}");
        }
        if let Some(provider) = self.provider_error()
            && !provider.is_empty()
            && !message.contains(provider)
        {
            message = format!("{message}: {provider}");
        }
        message
    }

    /// The gateway's own error body (Commonbase's shape), for its own
    /// endpoints and the Commonbase surface. Another API surface writes its
    /// own shape ([`crate::flow::Surface::error_body`]) from the same status
    /// and message, so that the status of every failure is decided here.
    pub fn body(&self, invocation_id: &uuid::Uuid) -> serde_json::Value {
        let mut body = json!({
            "error": self.message_for(invocation_id),
            "invocationId": invocation_id.to_string(),
        });
        if let Some(code) = self.code() {
            body["code"] = json!(code);
        }
        if let Some(provider_error) = self.provider_error() {
            body["providerError"] = json!(provider_error);
        }
        if let Some(guard) = self.guard() {
            body["guard"] = json!(guard);
        }
        body
    }

    /// The guard that refused the request, or failed it.
    pub fn guard(&self) -> Option<&str> {
        match self {
            ApiError::GuardDenied { guard, .. }
            | ApiError::GuardFailed { guard, .. }
            | ApiError::GuardUnavailable { guard, .. } => Some(guard),
            _ => None,
        }
    }
}

impl ApiError {
    /// The same error with `secrets` taken out of every text it carries (an
    /// upstream's error message may quote the key it was sent).
    pub fn redacted(self, secrets: &Secrets) -> ApiError {
        let clean = |text: String| secrets.redact_owned(text);
        match self {
            ApiError::BadRequest(m) => ApiError::BadRequest(clean(m)),
            ApiError::WrongProject(m) => ApiError::WrongProject(clean(m)),
            ApiError::InvalidParam { param, message } => ApiError::InvalidParam {
                param: clean(param),
                message: clean(message),
            },
            ApiError::UnknownRoute(m) => ApiError::UnknownRoute(clean(m)),
            ApiError::UnknownModel(m) => ApiError::UnknownModel(clean(m)),
            ApiError::NotFound(m) => ApiError::NotFound(clean(m)),
            ApiError::OutOfScope(m) => ApiError::OutOfScope(clean(m)),
            ApiError::Conflict(m) => ApiError::Conflict(clean(m)),
            ApiError::PluginNotLoaded { route, plugin } => ApiError::PluginNotLoaded {
                route: clean(route),
                plugin: clean(plugin),
            },
            ApiError::Upstream {
                status,
                message,
                retry_after,
            } => ApiError::Upstream {
                status,
                message: clean(message),
                retry_after,
            },
            ApiError::Timeout(m) => ApiError::Timeout(clean(m)),
            ApiError::ProviderFailed(m) => ApiError::ProviderFailed(clean(m)),
            ApiError::PluginFailed(m) => ApiError::PluginFailed(clean(m)),
            ApiError::PluginUnavailable(m) => ApiError::PluginUnavailable(clean(m)),
            ApiError::Internal(m) => ApiError::Internal(clean(m)),
            ApiError::DatabaseUnavailable(m) => ApiError::DatabaseUnavailable(clean(m)),
            ApiError::GuardDenied {
                guard,
                stage,
                reason,
            } => ApiError::GuardDenied {
                guard,
                stage,
                reason: clean(reason),
            },
            ApiError::GuardFailed {
                guard,
                reason,
                crashed,
            } => ApiError::GuardFailed {
                guard,
                reason: clean(reason),
                crashed,
            },
            ApiError::GuardUnavailable { guard, reason } => ApiError::GuardUnavailable {
                guard,
                reason: clean(reason),
            },
            ApiError::Exhausted { last, attempts } => ApiError::Exhausted {
                last: Box::new(last.redacted(secrets)),
                attempts,
            },
            other @ (ApiError::BodyTooLarge(_)
            | ApiError::FileTooLarge(_)
            | ApiError::FilesFull(_)
            | ApiError::ExpansionTooLarge(_)
            | ApiError::PartTooLarge { .. }
            | ApiError::RequestTimeout(_)
            | ApiError::MissingKey
            | ApiError::InvalidKey
            | ApiError::KeyExpired(_)
            | ApiError::RateLimited(_)
            | ApiError::AdminUnauthorized
            | ApiError::WrongAdminToken
            | ApiError::SignInThrottled(_)
            | ApiError::CsrfRefused
            | ApiError::AdminForbidden(_)
            | ApiError::AdminTokenRefused(_)
            | ApiError::MetricsUnauthorized
            | ApiError::MethodNotAllowed(_)
            | ApiError::Busy(_)
            | ApiError::BodiesInFlight(_)
            | ApiError::Ejected { .. }
            | ApiError::ShuttingDown) => other,
        }
    }
}

impl From<crate::limits::Throttled> for ApiError {
    fn from(throttled: crate::limits::Throttled) -> ApiError {
        ApiError::SignInThrottled(u32::try_from(throttled.retry_after_secs).unwrap_or(u32::MAX))
    }
}

impl From<PluginError> for ApiError {
    fn from(e: PluginError) -> ApiError {
        match e {
            PluginError::Provider(types::ProviderError::InvalidRequest(message)) => {
                ApiError::BadRequest(message)
            }
            PluginError::Provider(types::ProviderError::Upstream(e)) => ApiError::Upstream {
                status: e.status,
                message: e.message,
                retry_after: e.retry_after,
            },
            PluginError::Provider(types::ProviderError::Timeout(message)) => {
                ApiError::Timeout(message)
            }
            PluginError::Provider(types::ProviderError::Failed(message)) => {
                ApiError::ProviderFailed(message)
            }
            PluginError::Crashed(failure) => ApiError::PluginFailed(failure.to_string()),
            PluginError::Unavailable(failure) => ApiError::PluginUnavailable(failure.to_string()),
            PluginError::Busy(limit) => ApiError::Busy(limit),
        }
    }
}

impl From<crate::plugins::NotLoaded> for ApiError {
    fn from(e: crate::plugins::NotLoaded) -> ApiError {
        ApiError::PluginNotLoaded {
            route: e.route,
            plugin: e.plugin,
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> ApiError {
        if e.is_unavailable() {
            // The detail (which host, why) is for the log, not the caller.
            tracing::warn!("database unreachable: {e}");
            return ApiError::DatabaseUnavailable(e.to_string());
        }
        match e {
            crate::store::StoreError::Invalid { field, .. } => ApiError::InvalidParam {
                param: field.to_owned(),
                message: e.to_string(),
            },
            crate::store::StoreError::UnknownProject(_)
            | crate::store::StoreError::UnknownKey(_) => ApiError::NotFound(e.to_string()),
            crate::store::StoreError::AmbiguousKey { .. } => ApiError::Conflict(e.to_string()),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(status: u16) -> ApiError {
        ApiError::Upstream {
            status,
            message: "limit must be <= 4096".into(),
            retry_after: None,
        }
    }

    #[test]
    fn upstream_client_errors_are_the_callers_and_the_rest_a_bad_gateway() {
        for status in [400, 404, 413, 422, 429] {
            assert_eq!(upstream(status).status().as_u16(), status);
        }
        for status in [401, 403, 409, 500, 502, 503, 529] {
            assert_eq!(
                upstream(status).status(),
                StatusCode::BAD_GATEWAY,
                "{status}"
            );
        }
        let exhausted = ApiError::Exhausted {
            last: Box::new(upstream(400)),
            attempts: 2,
        };
        assert_eq!(exhausted.status(), StatusCode::BAD_REQUEST);
        assert_eq!(exhausted.provider_error(), Some("limit must be <= 4096"));
    }

    #[test]
    fn a_plugin_crash_has_its_code_and_points_to_the_log() {
        let id = uuid::Uuid::nil();
        let crashed = ApiError::from(PluginError::Crashed(crate::plugins::Failure::Panicked));
        assert_eq!(crashed.status(), StatusCode::BAD_GATEWAY);
        assert_eq!(crashed.code(), Some(PLUGIN_ERROR));
        let body = crashed.body(&id);
        assert_eq!(body["code"], json!(PLUGIN_ERROR));
        let message = body["error"].as_str().unwrap_or_default();
        assert!(message.contains(&id.to_string()), "{message}");
        assert!(message.contains("plugin_error"), "{message}");
        // A provider's own error is no crash.
        let refused = ApiError::from(PluginError::Provider(types::ProviderError::InvalidRequest(
            "temperature must be at most 1".into(),
        )));
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(refused.code(), None);
        assert_eq!(refused.message_for(&id), "temperature must be at most 1");
    }
}
