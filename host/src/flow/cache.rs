//! The cache step, on routes with `cache_ttl_secs`: a request the route answered before is
//! answered again from the response cache ([`crate::cache`]) without a plugin call, in the
//! caller's surface and mode (a stream as the frames a live answer makes); a successful,
//! complete answer of a request that missed is stored for the next one.
//!
//! A hit still goes through the request's guards (the answer was cached as the provider gave
//! it, before its guards judged it), counts against requests-per-minute limits but not
//! tokens-per-minute or budgets, and is recorded with `cache: "hit"`, cost 0 and what it
//! saved. The caller steers it with `x-gateway-cache` or `Cache-Control`: `no-cache` skips
//! the lookup and stores the new answer, `no-store` neither reads nor writes.

use std::sync::Arc;
use std::time::Duration;

use hyper::HeaderMap;
use hyper::header::{CACHE_CONTROL, HeaderValue};

use super::call::Served;
use super::guard::Guards;
use super::quota::Quota;
use super::record::Draft;
use super::route::{Request, Routed};
use super::{
    AnswerHeaders, Ask, CompletionCodec, EmbeddingCodec, Envelope, Kind, Metered, Reply, Whole,
};
use crate::cache::{Answer, CacheKey, Entry, Question, Scope};
use crate::config::CacheScope;
use crate::error::ApiError;
use crate::plugins::types;
use crate::state::AppState;
use crate::store::{CacheStatus, TokenUsage};

/// The request and response header of the cache: the caller's wish (`no-cache`,
/// `no-store`), and how the answer was served (`hit`, `miss`, `skip`).
pub const CACHE_HEADER: &str = "x-gateway-cache";

/// What the caller asked of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Directive {
    /// Read, and store what misses.
    Use,
    /// `no-cache`: do not read; store the new answer.
    Refresh,
    /// `no-store`: neither read nor store.
    Bypass,
}

/// The caller's directive: `x-gateway-cache` (one value, or 400), else `Cache-Control`'s
/// `no-store` or `no-cache` among its directives (the others are not the gateway's).
fn directive(headers: &HeaderMap) -> Result<Directive, ApiError> {
    if let Some(value) = headers.get(CACHE_HEADER) {
        let value = value.to_str().unwrap_or_default().trim();
        return if value.eq_ignore_ascii_case("no-store") {
            Ok(Directive::Bypass)
        } else if value.eq_ignore_ascii_case("no-cache") {
            Ok(Directive::Refresh)
        } else {
            Err(ApiError::BadRequest(format!(
                "{CACHE_HEADER}: must be no-cache or no-store, not {value:?}"
            )))
        };
    }
    let mut wish = Directive::Use;
    for value in headers.get_all(CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for part in value.split(',').map(str::trim) {
            if part.eq_ignore_ascii_case("no-store") {
                return Ok(Directive::Bypass);
            }
            if part.eq_ignore_ascii_case("no-cache") {
                wish = Directive::Refresh;
            }
        }
    }
    Ok(wish)
}

/// A request to a route that caches: its key, and what becomes of its answer.
pub(super) struct Caching {
    key: CacheKey,
    ttl: Duration,
    directive: Directive,
}

impl Caching {
    /// The request's caching, if its route caches (`None` costs nothing more).
    pub fn of<C, E>(
        request: &Request<C, E>,
        headers: &HeaderMap,
        output: types::OutputLimit,
    ) -> Result<Option<Caching>, ApiError> {
        let Request {
            routed,
            ask,
            params,
            ..
        } = request;
        let route = &routed.route;
        let Some(ttl) = route.config.cache_ttl() else {
            return Ok(None);
        };
        let directive = directive(headers)?;
        let scope = match route.config.cache_scope {
            CacheScope::Project => Scope::Project(&routed.key.project_id),
            CacheScope::Route => Scope::Route,
        };
        let question = match ask {
            Ask::Complete { prompted, .. } => Question::Complete {
                prompt: &prompted.prompt,
                functions: &prompted.functions,
                function_choice: prompted.function_choice.as_ref(),
                reasoning: prompted.reasoning.as_ref(),
                output,
            },
            Ask::Embed { input, .. } => Question::Embed { input },
            // A count is cheap and asked right before the call it sizes: not worth an entry.
            Ask::Count { .. } => return Ok(None),
            // Not kept (yet): a rerank answer is a list of scores, cheap to ask again.
            Ask::Rerank(_) => return Ok(None),
            // Not kept: images are large, and asked again for other images.
            Ask::Images(_) => return Ok(None),
            // Not kept: an upload is seldom sent twice.
            Ask::Transcribe(_) => return Ok(None),
            // Not kept: audio is large, and streamed as it is made.
            Ask::Speak(_) => return Ok(None),
        };
        let caller_key = routed.caller_key.as_deref();
        let model = &routed.model;
        let key = crate::cache::key(scope, caller_key, &route.id, model, question, params);
        Ok(Some(Caching {
            key,
            ttl,
            directive,
        }))
    }

    /// The cached answer of this request, when the caller lets it be read; notes in the
    /// record how the cache served it.
    pub async fn lookup(&self, state: &AppState, draft: &mut Draft, kind: Kind) -> Option<Hit> {
        if self.directive != Directive::Use {
            draft.cache(CacheStatus::Skip, None);
            return None;
        }
        let entry = state.cache.get(&self.key).await;
        // The kind is part of the key; an entry of another is another version's mistake.
        match entry.filter(|entry| is_embeddings(&entry.answer) == (kind == Kind::Embeddings)) {
            Some(entry) => {
                draft.cache(CacheStatus::Hit, entry.cost_usd);
                Some(Hit(entry))
            }
            None => {
                draft.cache(CacheStatus::Miss, None);
                None
            }
        }
    }

    /// Stores a successful, complete answer (`cost_usd`: what it cost), unless the caller
    /// said `no-store`. Awaited before the answer goes out, so that the caller's next
    /// request finds it.
    pub async fn store(&self, state: &AppState, answer: Answer, cost_usd: Option<f64>) {
        if self.directive == Directive::Bypass {
            return;
        }
        let entry = Entry { answer, cost_usd };
        state.cache.put(self.key, entry, self.ttl).await;
    }
}

fn is_embeddings(answer: &Answer) -> bool {
    matches!(answer, Answer::Embeddings(_))
}

/// The answer's `x-gateway-cache` header.
pub(super) fn set_header(status: CacheStatus, headers: &mut HeaderMap) {
    headers.insert(CACHE_HEADER, HeaderValue::from_static(status.as_str()));
}

/// A cached answer found for the request.
pub(super) struct Hit(Arc<Entry>);

impl Hit {
    /// Answers `request` from the cache (see the module's description), after its guards
    /// checked it.
    pub async fn answer<C: CompletionCodec, E: EmbeddingCodec>(
        self,
        state: &AppState,
        draft: &mut Draft,
        request: Request<C, E>,
    ) -> Result<Reply, ApiError> {
        let Request {
            routed,
            chain,
            ask,
            params,
            stream,
        } = request;
        let Routed {
            key, route, model, ..
        } = routed;
        let project = key.project_id.clone();
        let quota = Quota::admit_cached(state, key).await?;
        let mut limits = HeaderMap::new();
        quota.set_headers(&mut limits);
        let headers = AnswerHeaders {
            served: Served {
                route: route.header.clone(),
                target: None,
            },
            limits,
        };
        let guards = Guards {
            chain,
            route: &route.id,
            model: &model,
            params: &params,
        };
        let id = draft.id().to_string();
        let envelope = Envelope {
            invocation_id: &id,
            project_id: &project,
            kind: routed.kind,
            model: &model,
        };
        match (ask, &self.0.answer) {
            (Ask::Complete { prompted, codec }, Answer::Completion(completion)) => {
                let (_, mut guarded) = guards
                    .check_prompt(state, draft, prompted.prompt, &prompted.functions)
                    .await?;
                let usage = charge_nothing(draft, completion.usage.as_ref());
                let mut completion = completion.clone();
                if let Some(guarded) = &mut guarded {
                    completion = guarded.check_answer(state, draft, completion).await?;
                }
                let whole = Whole {
                    codec,
                    envelope,
                    completion,
                    usage: usage.as_ref().map(free),
                    stream,
                };
                Ok(whole.reply(state, draft, headers).await)
            }
            (Ask::Embed { input, codec }, Answer::Embeddings(embeddings)) => {
                guards.check_embedding(state, draft, input).await?;
                let usage = charge_nothing(draft, embeddings.usage.as_ref());
                let usage = usage.as_ref().map(free);
                let text = codec.embeddings(&envelope, &embeddings.vectors, usage);
                Ok(Reply::Json(text, headers))
            }
            _ => Err(ApiError::Internal(
                "a cached answer of another kind than its request".into(),
            )),
        }
    }
}

/// A hit's usage, in the record at no cost: the answer costs nothing this time.
fn charge_nothing(draft: &mut Draft, usage: Option<&types::Usage>) -> Option<TokenUsage> {
    let usage = usage.map(TokenUsage::from);
    draft.usage(usage, Some(0.0));
    usage
}

/// A hit's usage, at no cost.
fn free(usage: &TokenUsage) -> Metered<'_> {
    Metered {
        usage,
        cost_usd: Some(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    #[test]
    fn the_caller_steers_the_cache_by_either_header() {
        let of = |pairs: &[(&str, &str)]| directive(&headers(pairs)).ok();
        assert_eq!(of(&[]), Some(Directive::Use));
        assert_eq!(
            of(&[("x-gateway-cache", "no-cache")]),
            Some(Directive::Refresh)
        );
        assert_eq!(
            of(&[("x-gateway-cache", "No-Store")]),
            Some(Directive::Bypass)
        );
        assert_eq!(of(&[("x-gateway-cache", "sometimes")]), None);
        assert_eq!(
            of(&[("cache-control", "no-cache")]),
            Some(Directive::Refresh)
        );
        assert_eq!(
            of(&[("cache-control", "max-age=0, no-store")]),
            Some(Directive::Bypass)
        );
        assert_eq!(
            of(&[("cache-control", "no-cache"), ("cache-control", "no-store")]),
            Some(Directive::Bypass)
        );
        assert_eq!(of(&[("cache-control", "max-age=60")]), Some(Directive::Use));
        // The gateway's own header decides when both are sent.
        assert_eq!(
            of(&[
                ("x-gateway-cache", "no-cache"),
                ("cache-control", "no-store")
            ]),
            Some(Directive::Refresh)
        );
    }
}
