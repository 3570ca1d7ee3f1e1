//! Fixtures of the plugin SDK's types for the provider plugins' unit tests: chat messages as
//! callers send them ([`message`], [`named`], [`calling`]), and the error a call must have
//! returned ([`invalid_request`], [`failed`], [`upstream`]).

use std::fmt::Debug;

use gateway_plugin_sdk::{FunctionCall, Message, ProviderError, Role, UpstreamError};

/// A message of `role` with text `content` and nothing else.
pub fn message(role: Role, content: &str) -> Message {
    Message::text_message(role, content)
}

/// A message of `role` with text `content` from the participant `name`.
pub fn named(role: Role, name: &str, content: &str) -> Message {
    Message {
        name: Some(name.into()),
        ..message(role, content)
    }
}

/// An assistant message without text that calls function `name` with `arguments` (JSON text),
/// the legacy `function_call` way.
pub fn calling(name: &str, arguments: &str) -> Message {
    Message {
        parts: Vec::new(),
        function_call: Some(FunctionCall {
            name: name.into(),
            arguments: arguments.into(),
        }),
        ..message(Role::Assistant, "")
    }
}

/// The message of a [`ProviderError::InvalidRequest`]; panics on any other result.
pub fn invalid_request(result: Result<impl Debug, ProviderError>) -> String {
    match result {
        Err(ProviderError::InvalidRequest(message)) => message,
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
}

/// The message of a [`ProviderError::Failed`]; panics on any other result.
pub fn failed(result: Result<impl Debug, ProviderError>) -> String {
    match result {
        Err(ProviderError::Failed(message)) => message,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// The error of a [`ProviderError::Upstream`]; panics on any other result.
pub fn upstream(result: Result<impl Debug, ProviderError>) -> UpstreamError {
    match result {
        Err(ProviderError::Upstream(error)) => error,
        other => panic!("expected Upstream, got {other:?}"),
    }
}
