//! The limits step: a key's scope (which routes and models it may use), then
//! its own and its project's rate limits and budgets, checked before the
//! plugin is called and charged with what the call consumed after it.

use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};
use serde::Deserialize;

use super::{Ask, Prompted};
use crate::error::ApiError;
use crate::limits::{Admitted, Check, Estimate, Limiter, Reservation, Subject};
use crate::plugins::{Plugin, types};
use crate::pricing::{self, PriceTable};
use crate::routing::Route;
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

/// An admitted request's share of its limits: what it reserved, what it is charged with
/// once the call is over, and the rate-limit headers of its answer. Dropped unsettled (the
/// request failed, or was cancelled), it gives its reservation back.
pub(super) struct Quota {
    limiter: Limiter,
    key: KeyRecord,
    admitted: Admitted,
    /// What the admission reserved, until it is settled.
    reservation: Option<Reservation>,
}

impl Quota {
    /// Admits the request under its key's and project's limits, reserving its `estimate`
    /// (made only when a limit counts tokens or cost), or refuses it (429 with
    /// `Retry-After`) before it reaches a plugin.
    pub async fn admit(
        state: &AppState,
        key: KeyRecord,
        estimate: impl FnOnce() -> Estimate,
    ) -> Result<Quota, ApiError> {
        let estimate = if reserves(&key) {
            estimate()
        } else {
            Estimate::default()
        };
        let (admitted, reservation) = state
            .limiter
            .admit(&checks(&key), &state.store, estimate)
            .await
            .map_err(|refused| {
                state.metrics.rate_limited(refused.scope.as_str());
                ApiError::RateLimited(refused)
            })?;
        Ok(Quota {
            limiter: state.limiter.clone(),
            key,
            admitted,
            reservation: (!reservation.is_empty()).then_some(reservation),
        })
    }

    /// Admits a request answered from the response cache: it counts against the
    /// requests-per-minute limits only (no provider spends tokens or money on it), so it
    /// reserves nothing and is refused only by those.
    pub async fn admit_cached(state: &AppState, key: KeyRecord) -> Result<Quota, ApiError> {
        let requests_only = |limits: crate::limits::LimitSet| crate::limits::LimitSet {
            rpm: limits.rpm,
            ..Default::default()
        };
        let key = KeyRecord {
            limits: requests_only(key.limits),
            project_limits: requests_only(key.project_limits),
            ..key
        };
        Quota::admit(state, key, Estimate::default).await
    }

    /// Charges the call's tokens (prompt + completion) and cost, less what was reserved;
    /// without usage, gives the reservation back. Called once, when the request ends.
    pub async fn settle(&mut self, usage: Option<&TokenUsage>, cost_usd: Option<f64>) {
        let reservation = self.reservation.take().unwrap_or_default();
        let tokens = usage.map_or(0, |u| {
            u64::from(u.prompt_tokens).saturating_add(u64::from(u.completion_tokens))
        });
        // The limiter returns at once when there is nothing to book.
        self.limiter
            .settle(
                &checks(&self.key),
                &reservation,
                tokens,
                cost_usd.unwrap_or(0.0),
            )
            .await;
    }

    /// Charges what the admission reserved (the prompt's estimate and the answer's limit) as
    /// the call's consumption: for a call whose output flowed before it was cut short (the
    /// caller left, shutdown, the upstream failed) and before its provider reported its usage.
    /// The provider bills what it generated, whoever read it; giving the reservation back would
    /// let a caller who hangs up before a stream's last chunk spend past every budget.
    pub async fn settle_unreported(&mut self) {
        let reservation = self.reservation.take().unwrap_or_default();
        let Estimate { tokens, cost_usd } = reservation.estimate();
        self.limiter
            .settle(&checks(&self.key), &reservation, tokens, cost_usd)
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

impl Drop for Quota {
    fn drop(&mut self) {
        let Some(reservation) = self.reservation.take() else {
            return;
        };
        // Settling waits for Redis, which a drop cannot: the release runs on this thread's
        // runtime (a request never changes threads). Without a runtime (the process is going
        // away) there is nothing left to release it for: in-process counters go with it, and
        // Redis's budget counters keep it until their period ends (token buckets refill).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let limiter = self.limiter.clone();
        let key = self.key.clone();
        runtime.spawn(async move {
            limiter.settle(&checks(&key), &reservation, 0, 0.0).await;
        });
    }
}

/// Prompt bytes per estimated token: OpenAI's rule of thumb for English text (~4 bytes a
/// token); an estimate only decides admission, the reported usage is what is charged.
const BYTES_PER_TOKEN: u64 = 4;

/// The answer sizes a request's pass-through parameters ask for (OpenAI's names, which
/// every surface writes).
#[derive(Default, Deserialize)]
struct Sizes {
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    n: Option<u64>,
}

/// How much the answer may hold: what the request's tokens and cost are reserved for, and
/// what the plugin asks its upstream for (it writes this over every name its provider has
/// for it, so the two are one number by construction, whatever else the params say):
///
/// - per choice: the caller's `max_completion_tokens`, else `max_tokens`; without either,
///   `room` (the route's [`reserve_max_tokens`]) when `reserves` (a limit counts tokens or
///   cost, so the provider's default, unknown here, cannot be left to stand), else none;
/// - an explicit reasoning budget that leaves the answer no room (Anthropic and Bedrock count
///   thinking in `max_tokens`, and want it below it) adds `room` above the budget, as the
///   plugins did before the host decided it;
/// - choices: the caller's `n`, at least 1.
///
/// [`reserve_max_tokens`]: crate::config::RouteConfig::reserve_max_tokens
pub(super) fn output_limit(
    params: &str,
    reasoning: Option<&types::ReasoningConfig>,
    room: u64,
    reserves: bool,
) -> types::OutputLimit {
    // Unreadable parameters are the plugin's to refuse; they ask for the defaults. (No
    // cheaper test of the text first: a key may be spelt with JSON escapes.)
    let sizes: Sizes = serde_json::from_str(params).unwrap_or_default();
    let mut per_choice = sizes
        .max_completion_tokens
        .or(sizes.max_tokens)
        .or_else(|| reserves.then_some(room));
    let budget = reasoning
        .filter(|r| r.effort != Some(types::ReasoningEffort::None))
        .and_then(|r| r.budget_tokens);
    if let (Some(max), Some(budget)) = (per_choice, budget)
        && max <= u64::from(budget)
    {
        per_choice = Some(u64::from(budget).saturating_add(room));
    }
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    types::OutputLimit {
        max_tokens: per_choice.map(clamp),
        choices: clamp(sizes.n.unwrap_or(1).max(1)),
    }
}

/// What a request is expected to consume: its prompt's bytes / 4 in tokens, plus its
/// [`output_limit`] (every choice's tokens), at the price of the model it asks for (0 when
/// the price is unknown).
pub(super) fn estimate<C, E>(
    ask: &Ask<C, E>,
    output: types::OutputLimit,
    route: &Route,
    plugin: &Plugin,
    model: &str,
    prices: &PriceTable,
) -> Estimate {
    let (prompt_bytes, completion_tokens) = match ask {
        Ask::Complete { prompted, .. } => {
            let Prompted {
                prompt, functions, ..
            } = prompted;
            let per_choice = output
                .max_tokens
                .map_or_else(|| route.config.reserve_max_tokens(), u64::from);
            let functions: usize = functions
                .iter()
                .map(|f| {
                    f.name.len()
                        + f.description.as_ref().map_or(0, String::len)
                        + f.parameters.as_ref().map_or(0, String::len)
                })
                .sum();
            (
                prompt_size(prompt) + functions,
                per_choice.saturating_mul(u64::from(output.choices)),
            )
        }
        Ask::Embed { input, .. } => (input.iter().map(String::len).sum(), 0),
        // A reranker reads the query beside each document.
        Ask::Rerank(rerank) => {
            let documents = rerank.documents.iter().map(String::len).sum::<usize>();
            let queries = rerank.query.len().saturating_mul(rerank.documents.len());
            (documents.saturating_add(queries), 0)
        }
        // Counting spends no tokens: it takes a request from the request limits only.
        Ask::Count { .. } => (0, 0),
        // A model that bills its images by tokens (`gpt-image-1`) is reserved each image's as
        // a completion's that sets no limit.
        Ask::Images(images) => (
            images.prompt.len(),
            route
                .config
                .reserve_max_tokens()
                .saturating_mul(u64::from(images.n)),
        ),
        // Audio is billed by its seconds (below), or by tokens the gateway cannot tell from
        // its bytes.
        Ask::Transcribe(_) => (0, 0),
        // A model that bills speech by tokens (`gpt-4o-mini-tts`) reads the text and is reserved
        // its audio as a completion's that sets no limit.
        Ask::Speak(speak) => (speak.input.len(), route.config.reserve_max_tokens()),
    };
    let prompt_tokens = (prompt_bytes as u64).div_ceil(BYTES_PER_TOKEN);
    // A rerank billed by search units is reserved the least its provider bills: one a query of
    // up to 100 documents (Cohere's and Bedrock's unit).
    let search_units = match ask {
        Ask::Rerank(rerank) => u32::try_from(rerank.documents.len().div_ceil(100)).ok(),
        _ => None,
    };
    let usage = TokenUsage {
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
        completion_tokens: u32::try_from(completion_tokens).unwrap_or(u32::MAX),
        search_units,
        // Images are reserved as many as asked, at the price of the size and quality asked.
        images: match ask {
            Ask::Images(images) => Some(images.n),
            _ => None,
        },
        audio_seconds: match ask {
            Ask::Transcribe(transcribe) => Some(audio_seconds(transcribe.audio.len())),
            _ => None,
        },
        // What a provider that bills by characters charges, known before the call.
        characters: match ask {
            Ask::Speak(speak) => Some(characters(&speak.input)),
            _ => None,
        },
        ..TokenUsage::default()
    };
    let (pricing, plugin, models) = (
        &route.config.pricing,
        &route.config.plugin,
        &plugin.info.models,
    );
    let price = match ask {
        Ask::Images(images) => {
            let (size, quality) = (images.size.as_deref(), images.quality.as_deref());
            pricing::image_price_for(pricing, prices, plugin, models, model, size, quality)
        }
        _ => pricing::price_for(pricing, prices, plugin, models, model),
    };
    Estimate {
        tokens: prompt_tokens.saturating_add(completion_tokens),
        cost_usd: price.map_or(0.0, |price| pricing::cost(&usage, price)),
    }
}

/// The bytes a second of uploaded audio takes at the least the gateway reserves for: 4,000,
/// compressed speech at 32 kbit/s. Denser audio (WAV: 32,000 a second at 16 kHz) is reserved
/// more seconds than it lasts, and charged its own once the provider tells them.
const AUDIO_BYTES_PER_SECOND: usize = 4_000;

/// The seconds an upload of `bytes` is reserved as.
fn audio_seconds(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(AUDIO_BYTES_PER_SECOND)).unwrap_or(u32::MAX)
}

/// The characters of a speech's text, as providers that bill by them count them (Unicode
/// scalar values).
pub(super) fn characters(input: &str) -> u32 {
    u32::try_from(input.chars().count()).unwrap_or(u32::MAX)
}

/// The bytes of a prompt's texts: what its tokens are estimated from.
fn prompt_size(prompt: &types::Prompt) -> usize {
    match prompt {
        types::Prompt::Text(text) => text.len(),
        types::Prompt::Chat(messages) => messages
            .iter()
            .map(|m| {
                m.parts.iter().map(types::Part::size).sum::<usize>()
                    + m.name.as_ref().map_or(0, String::len)
                    + m.function_call
                        .as_ref()
                        .map_or(0, |c| c.name.len() + c.arguments.len())
                    + m.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            })
            .sum(),
    }
}

/// Whether a request of `key` reserves its estimated tokens and cost when it is admitted.
pub(super) fn reserves(key: &KeyRecord) -> bool {
    key.limits.reserves() || key.project_limits.reserves()
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
                tools: Vec::new(),
            },
            project_guards: Default::default(),
            project_tools: Default::default(),
        }
    }

    #[test]
    fn the_output_limit_is_the_callers_else_the_routes_under_a_limit() {
        let limit = |params, reasoning, reserves| {
            let l = output_limit(params, reasoning, 4096, reserves);
            (l.max_tokens, l.choices)
        };
        assert_eq!(limit("{}", None, false), (None, 1));
        assert_eq!(limit("", None, false), (None, 1));
        assert_eq!(limit("{}", None, true), (Some(4096), 1));
        let both = r#"{"max_tokens": 7, "max_completion_tokens": 9, "n": 3}"#;
        assert_eq!(limit(both, None, false), (Some(9), 3));
        // Escaped names are the same names.
        assert_eq!(
            limit(r#"{"max\u005ftokens": 7}"#, None, false),
            (Some(7), 1)
        );
        // Unreadable sizes: the route's under a limit (the plugin writes it over them).
        assert_eq!(
            limit(r#"{"max_tokens": "many"}"#, None, true),
            (Some(4096), 1)
        );
        assert_eq!(limit(r#"{"n": 0}"#, None, false), (None, 1));
        assert_eq!(
            limit(r#"{"max_tokens": 99999999999}"#, None, false),
            (Some(u32::MAX), 1)
        );
        let budget = |budget_tokens, effort| types::ReasoningConfig {
            effort,
            budget_tokens: Some(budget_tokens),
        };
        // A budget that leaves no room raises the limit by the route's room; one that does
        // not, or one turned off, leaves it.
        let thinking = budget(30_000, None);
        assert_eq!(
            limit(r#"{"max_tokens": 1}"#, Some(&thinking), false),
            (Some(34_096), 1)
        );
        assert_eq!(limit("{}", Some(&thinking), true), (Some(34_096), 1));
        assert_eq!(limit("{}", Some(&thinking), false), (None, 1));
        assert_eq!(
            limit(r#"{"max_tokens": 40000}"#, Some(&thinking), false),
            (Some(40_000), 1)
        );
        let off = budget(30_000, Some(types::ReasoningEffort::None));
        assert_eq!(
            limit(r#"{"max_tokens": 1}"#, Some(&off), false),
            (Some(1), 1)
        );
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
