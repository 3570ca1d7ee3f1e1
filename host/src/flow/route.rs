//! The route step, after admission: what the body asks for (the conversation it continues,
//! its target, model and input), the route that serves it, what the key's scope allows of
//! it, the request's full weight in the bytes in flight, and the plugin and guards it
//! goes through.

use std::sync::Arc;

use hyper::HeaderMap;

use super::admit::Admitted;
use super::record::Draft;
use super::{Ask, Kind, Surface, quota};
use crate::config::Config;
use crate::error::ApiError;
use crate::inflight::{BodyBytes, ITEM_BYTES, MEDIA_ITEM_BYTES};
use crate::plugins::{Plugin, types};
use crate::routing::{Chain, Route};
use crate::state::{AppState, Live};
use crate::store::{Conversation, KeyRecord};

const PROVIDER_KEY_HEADER: &str = "provider-api-key";

/// Who asks, and where the request goes.
pub(super) struct Routed {
    /// The caller's key: its project, scope and limits.
    pub key: KeyRecord,
    pub route: Arc<Route>,
    /// The route's plugin, loaded.
    pub plugin: Arc<Plugin>,
    pub model: String,
    pub kind: Kind,
    /// The caller's own provider key, if it sent one.
    pub caller_key: Option<String>,
    /// The request's bytes in the count of those in flight: held until it ends.
    pub inflight: BodyBytes,
}

/// A routed request with what it asks of the plugin.
pub(super) struct Request<C, E> {
    pub routed: Routed,
    /// The guards of the route and of the key's project, in order.
    pub chain: Chain,
    pub ask: Ask<C, E>,
    /// The plugin's pass-through parameters, as a JSON object text.
    pub params: String,
    /// Whether the caller wants the answer as a stream.
    pub stream: bool,
}

/// Reads what the admitted body asks for and routes it, in the order of the errors a
/// caller can get.
pub(super) async fn route<S: Surface>(
    state: &AppState,
    live: &Live,
    draft: &mut Draft,
    headers: &HeaderMap,
    admitted: Admitted<S>,
) -> Result<Request<S::Completion, S::Embeddings>, ApiError> {
    let config = &live.config;
    let Admitted {
        key,
        mut body,
        mut inflight,
        body_bytes,
    } = admitted;
    draft.user(body.user_id());
    body.check_project(&key.project_id)?;
    // What the request holds beyond its body's bytes, counted as it becomes known.
    let mut held = body_bytes;
    if let Some(previous) = body.previous().map(str::to_owned) {
        let conversation = continued(state, config, &key, &previous, body_bytes).await?;
        let size: usize = conversation.iter().map(String::len).sum();
        // The conversation goes to the plugin with the new turn: it is held like a body.
        held += size;
        hold(&mut inflight, config, |inflight, limit| {
            inflight.grow(size, limit)
        })?;
        body.continue_from(conversation)?;
    }
    let target = body.target(config)?;
    let route = live.routes.get(&target.route)?;
    draft.route(&route.id, &route.config.plugin);
    S::serves(target.kind)?;
    let stream = body.stream();
    let model = route.model(target.model)?;
    draft.model(&model, target.kind.as_str(), stream);
    quota::check_scope(&key, &route.id, &model)?;
    let caller_key = caller_key(draft, &route, headers)?;
    route.check_key(caller_key.is_some())?;
    let ask = body.ask(target.kind, config)?;
    held += weight(&ask);
    hold(&mut inflight, config, |inflight, limit| {
        inflight.resize(held, limit)
    })?;
    let plugin = state.runtime.for_route(&route.id, &route.config.plugin)?;
    let chain = (live.routes.guards()).for_request(&route.guards, &key.project_guards)?;
    Ok(Request {
        routed: Routed {
            key,
            route,
            plugin,
            model,
            kind: target.kind,
            caller_key,
            inflight,
        },
        chain,
        ask,
        params: target.params,
        stream,
    })
}

impl<C, E> Request<C, E> {
    /// The most output the call may produce (see [`quota::output_limit`]).
    pub fn output_limit(&self) -> types::OutputLimit {
        match &self.ask {
            Ask::Complete { prompted, .. } => quota::output_limit(
                &self.params,
                prompted.reasoning.as_ref(),
                self.routed.route.config.reserve_max_tokens(),
                quota::reserves(&self.routed.key),
            ),
            Ask::Embed { .. }
            | Ask::Count { .. }
            | Ask::Rerank(_)
            | Ask::Images(_)
            | Ask::Transcribe(_)
            | Ask::Speak(_) => types::OutputLimit::default(),
        }
    }
}

/// Counts the request's bytes in flight as `count` says, or refuses it.
fn hold(
    inflight: &mut BodyBytes,
    config: &Config,
    count: impl FnOnce(&mut BodyBytes, usize) -> bool,
) -> Result<(), ApiError> {
    let limit = config.max_inflight_body_bytes.get();
    if count(inflight, limit) {
        Ok(())
    } else {
        Err(ApiError::BodiesInFlight(limit))
    }
}

/// What the plugin's input holds beyond its bytes: many tiny items cost the gateway many
/// times their bytes, so each counts as more (in place of admission's count of the body's
/// JSON objects).
fn weight<C, E>(ask: &Ask<C, E>) -> usize {
    let (items, media) = match ask {
        Ask::Complete { prompted, .. } | Ask::Count { prompted, .. } => {
            let (items, media) = prompted.prompt.items();
            (items + prompted.functions.len(), media)
        }
        Ask::Embed { input, .. } => (input.len(), 0),
        Ask::Rerank(rerank) => (rerank.documents.len().saturating_add(1), 0),
        // The answer's images are held whole, as a prompt's media are.
        Ask::Images(images) => (1, images.n as usize),
        // The upload's bytes were counted as the body's.
        Ask::Transcribe(_) => (1, 0),
        // The audio streams through: none of it is held.
        Ask::Speak(_) => (1, 0),
    };
    items.saturating_mul(ITEM_BYTES) + media.saturating_mul(MEDIA_ITEM_BYTES)
}

/// The conversation of the kept response `previous` names, for `key`: its size, read alone,
/// is held to `max_conversation_bytes` before any of it is loaded.
async fn continued(
    state: &AppState,
    config: &Config,
    key: &KeyRecord,
    previous: &str,
    body_bytes: usize,
) -> Result<Vec<String>, ApiError> {
    let not_found = || {
        ApiError::invalid(
            "previous_response_id",
            format!("previous response with id {previous:?} not found"),
        )
    };
    let head = state.store.response_head(&key.project_id, previous).await?;
    // Another scope's is not found, as another project's: its conversation would reach
    // the caller through the model, and a refusal would tell that it exists.
    let head = head.filter(|head| key.scope.allows_origin(&head.origin));
    let head = head.ok_or_else(not_found)?;
    let size = usize::try_from(head.conversation_bytes).unwrap_or(usize::MAX);
    let cap = config.max_conversation_bytes.get();
    if size.saturating_add(body_bytes) > cap {
        return Err(ApiError::invalid(
            "previous_response_id",
            format!(
                "the conversation of previous response {previous:?} is {size} bytes, which \
                 with this request's is over the gateway's max_conversation_bytes ({cap}): \
                 start a new conversation, without previous_response_id"
            ),
        ));
    }
    match state.store.conversation(&key.project_id, previous).await? {
        // Deleted since its head was read.
        None => Err(not_found()),
        Some(Conversation::Whole(turns)) => Ok(turns),
        Some(Conversation::Broken { deleted }) => Err(ApiError::invalid(
            "previous_response_id",
            format!(
                "previous response {previous:?} continues response {deleted:?}, which was \
                 deleted (by DELETE /v1/responses/{{id}} or the gateway's \
                 record_retention_days): its conversation cannot be continued; \
                 start a new conversation, without previous_response_id"
            ),
        )),
    }
}

/// The caller's own provider key, after noting every key the request may carry to an
/// upstream (each target's of its route and of its fallbacks, and the caller's) in the draft
/// so that none shows in answers, errors or records.
fn caller_key(
    draft: &mut Draft,
    route: &Route,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    let from_caller = caller_provider_key(headers)?;
    draft.secrets(match &from_caller {
        Some(key) => route.secrets.with(key),
        None => route.secrets.clone(),
    });
    Ok(from_caller)
}

/// The caller's own provider key: `KEY` or `Bearer KEY` (any case of the
/// scheme; the plugin adds the scheme its upstream wants).
fn caller_provider_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(PROVIDER_KEY_HEADER) {
        None => Ok(None),
        Some(value) => {
            let key = value
                .to_str()
                .map_err(|_| ApiError::BadRequest("Provider-API-Key is not valid text".into()))?
                .trim();
            let key = match key.split_once(char::is_whitespace) {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
                _ => key,
            };
            Ok((!key.is_empty()).then(|| key.to_owned()))
        }
    }
}
