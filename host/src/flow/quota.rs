//! The limits step: a key's scope (which routes and models it may use), then
//! its own and its project's rate limits and budgets, checked before the
//! plugin is called and charged with what the call consumed after it.

use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};

use crate::error::ApiError;
use crate::limits::{Admitted, Check, Limiter, Subject};
use crate::state::AppState;
use crate::store::{KeyRecord, TokenUsage};

/// Refuses a request its key may not make (403, naming the scope).
pub(super) fn check_scope(key: &KeyRecord, route: &str, model: &str) -> Result<(), ApiError> {
    let scope = &key.scope;
    if scope.allows(route, model) {
        return Ok(());
    }
    let mut allowed = Vec::new();
    if !scope.routes.is_empty() {
        allowed.push(format!("routes {}", scope.routes.join(", ")));
    }
    if !scope.models.is_empty() {
        allowed.push(format!("models {}", scope.models.join(", ")));
    }
    Err(ApiError::OutOfScope(format!(
        "this API key may not use model {model:?} of route {route:?}: it is limited to {}",
        allowed.join(" and ")
    )))
}

/// An admitted request's share of its limits: what it is charged with once
/// the call is over, and the rate-limit headers of its answer.
pub(super) struct Quota {
    limiter: Limiter,
    key: KeyRecord,
    admitted: Admitted,
}

impl Quota {
    /// Admits the request under its key's and project's limits, or refuses
    /// it (429 with `Retry-After`) before it reaches a plugin.
    pub async fn admit(state: &AppState, key: KeyRecord) -> Result<Quota, ApiError> {
        let admitted = state
            .limiter
            .admit(&checks(&key), &state.store)
            .await
            .map_err(|refused| {
                state.metrics.rate_limited(refused.scope.as_str());
                ApiError::RateLimited(refused)
            })?;
        Ok(Quota {
            limiter: state.limiter.clone(),
            key,
            admitted,
        })
    }

    /// Charges the call's tokens (prompt + completion) and cost; nothing
    /// when neither is known.
    pub async fn settle(&self, usage: Option<&TokenUsage>, cost_usd: Option<f64>) {
        let tokens = usage.map_or(0, |u| {
            u64::from(u.prompt_tokens).saturating_add(u64::from(u.completion_tokens))
        });
        let cost_usd = cost_usd.unwrap_or(0.0);
        if tokens == 0 && cost_usd <= 0.0 {
            return;
        }
        self.limiter
            .settle(&checks(&self.key), tokens, cost_usd)
            .await;
    }

    /// OpenAI's `x-ratelimit-*` headers, for the kinds of limit that apply
    /// (none without limits).
    pub fn set_headers(&self, headers: &mut HeaderMap) {
        for (name, value) in self.admitted.headers() {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
    }
}

fn checks(key: &KeyRecord) -> [Check<'_>; 2] {
    [
        Check {
            subject: Subject::Project(&key.project_id),
            limits: key.project_limits,
        },
        Check {
            subject: Subject::Key(&key.prefix),
            limits: key.limits,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::KeyScope;

    fn key(routes: &[&str], models: &[&str]) -> KeyRecord {
        KeyRecord {
            project_id: "p".into(),
            prefix: "gw_0123456789abc".into(),
            limits: Default::default(),
            project_limits: Default::default(),
            scope: KeyScope {
                routes: routes.iter().map(|r| r.to_string()).collect(),
                models: models.iter().map(|m| m.to_string()).collect(),
                expires_at_ms: None,
            },
        }
    }

    #[test]
    fn a_scope_allows_its_routes_wholly_and_its_models_exactly() {
        assert!(check_scope(&key(&[], &[]), "any", "thing").is_ok());
        let scoped = key(&["openai"], &["anthropic/claude-x", "local/org/model"]);
        assert!(check_scope(&scoped, "openai", "gpt-4o").is_ok());
        assert!(check_scope(&scoped, "anthropic", "claude-x").is_ok());
        assert!(check_scope(&scoped, "local", "org/model").is_ok());
        let refused = check_scope(&scoped, "anthropic", "claude-y").unwrap_err();
        assert_eq!(refused.status(), hyper::StatusCode::FORBIDDEN);
        let message = refused.message();
        assert!(message.contains("routes openai"), "{message}");
        assert!(
            message.contains("models anthropic/claude-x, local/org/model"),
            "{message}"
        );
        assert!(check_scope(&key(&["a"], &[]), "b", "m").is_err());
    }
}
