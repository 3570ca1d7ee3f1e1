//! The endpoints. Each request flows one way: body -> auth -> validate ->
//! route -> plugin -> response, and ends as exactly one invocation record.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::AUTHORIZATION;
use hyper::{HeaderMap, Request, Response, StatusCode};
use serde_json::json;
use uuid::Uuid;

use super::AppState;
use super::body::{
    Body, check_declared_length, discard_body, error_response, json_response, json_text_response,
    read_body,
};
use super::record::{BodyPolicy, Draft};
use super::stream;
use crate::api::request::{self, Addressed, CompletionBody, EmbeddingBody, Kind, Target};
use crate::api::response::{self, Envelope};
use crate::error::ApiError;
use crate::plugins::{CallContext, Plugin, types};
use crate::pricing;
use crate::redact::Secrets;
use crate::routing::Route;
use crate::store::TokenUsage;

const PROVIDER_KEY_HEADER: &str = "provider-api-key";

/// What a handler produced.
pub(super) enum Reply {
    /// A complete JSON answer, still to be recorded.
    Json(serde_json::Value),
    /// A stream whose task records the invocation itself.
    Stream(Response<Body>),
    /// A failure the stream task has already recorded.
    Recorded(ApiError),
}

/// Runs a handler's flow to its end, or until shutdown's grace period is
/// over (then the request ends as [`ApiError::ShuttingDown`], still recorded).
async fn run_flow(
    state: &AppState,
    flow: impl std::future::Future<Output = Result<Reply, ApiError>>,
) -> Result<Reply, ApiError> {
    tokio::select! {
        result = flow => result,
        () = state.aborted() => Err(ApiError::ShuttingDown),
    }
}

/// Records a handler's outcome and turns it into the response.
async fn finish(state: &AppState, draft: Draft, result: Result<Reply, ApiError>) -> Response<Body> {
    let id = draft.id();
    match result {
        Ok(Reply::Json(body)) => {
            let text = body.to_string();
            let response = json_text_response(StatusCode::OK, Bytes::from(text.clone()), &id);
            state.log.record(draft.success(200, text)).await;
            response
        }
        Ok(Reply::Stream(response)) => response,
        Ok(Reply::Recorded(error)) => error_response(&error, &id),
        // Cut short by shutdown after the stream task took over the record:
        // the task records it (a task that vanished is recorded below).
        Err(error @ ApiError::ShuttingDown) if draft.is_handed_over() => {
            error_response(&error, &id)
        }
        Err(error) => {
            let error = draft.redact(error);
            let response = error_response(&error, &id);
            state.log.record(draft.failure(&error)).await;
            response
        }
    }
}

/// The project the request's API key belongs to.
async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    let value = headers.get(AUTHORIZATION).ok_or(ApiError::MissingKey)?;
    let value = value.to_str().map_err(|_| ApiError::InvalidKey)?;
    let key = crate::auth::key_from_header(value).ok_or(ApiError::MissingKey)?;
    let record = state
        .store
        .find_key(&crate::auth::hash_key(key))
        .await?
        .ok_or(ApiError::InvalidKey)?;
    Ok(record.project_id)
}

fn check_project(key_project: &str, project_id: &Option<String>) -> Result<(), ApiError> {
    let requested = request::require_project_id(project_id)?;
    if requested != key_project {
        return Err(ApiError::WrongProject(requested.to_owned()));
    }
    Ok(())
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

/// The provider key a call uses (the caller's wins), after noting every key
/// the request carries in the draft so that none shows in errors or records.
fn provider_key(
    draft: &mut Draft,
    route: &Route,
    headers: &HeaderMap,
) -> Result<Option<String>, ApiError> {
    let from_caller = caller_provider_key(headers)?;
    draft.secrets(Secrets::new([
        route.configured_key(),
        from_caller.as_deref(),
    ]));
    route.provider_key(from_caller)
}

fn plugin_for(state: &AppState, route: &Route) -> Result<Arc<Plugin>, ApiError> {
    state
        .runtime
        .get(&route.config.plugin)
        .ok_or_else(|| ApiError::PluginNotLoaded {
            route: route.id.clone(),
            plugin: route.config.plugin.clone(),
        })
}

/// Usage and its cost (`None` when the model's price is unknown).
pub(super) fn usage_and_cost(
    route: &Route,
    plugin: &Plugin,
    model: &str,
    usage: Option<&types::Usage>,
) -> (Option<TokenUsage>, Option<f64>) {
    let Some(usage) = usage.map(TokenUsage::from) else {
        return (None, None);
    };
    let cost = match pricing::price_for(
        &route.config.pricing,
        &route.config.plugin,
        &plugin.info.models,
        model,
    ) {
        Some(price) => Some(pricing::cost(&usage, price)),
        None => {
            pricing::warn_unpriced(&route.id, model);
            None
        }
    };
    (Some(usage), cost)
}

/// A request that passed the checks every POST endpoint starts with.
struct Admitted<T> {
    /// The project of the caller's key, which is the body's `projectId`.
    project: String,
    body: T,
    target: Target,
    route: Arc<Route>,
    /// The config's cap on the request's text once variables are filled in.
    max_expanded_bytes: usize,
}

/// Declared body size, key, body, JSON, project, route: in the contract's
/// order. The key comes before the body is read, so that nobody without one
/// can make the gateway buffer (or record) a body.
async fn admit<T: serde::de::DeserializeOwned + Addressed>(
    state: &AppState,
    draft: &mut Draft,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Admitted<T>, ApiError> {
    let live = state.live();
    let config = &live.config;
    let read_timeout = Duration::from_secs(config.request_read_timeout_secs.get());
    let max_body_bytes = config.max_body_bytes.get();
    check_declared_length(headers, max_body_bytes)?;
    let project = match authenticate(state, headers).await {
        Ok(project) => project,
        Err(error) => {
            // Read what the client is still sending (without keeping it), so
            // that it gets its 401 rather than a connection reset.
            discard_body(body, max_body_bytes, read_timeout).await;
            return Err(error);
        }
    };
    // From here on the record belongs to the key's project, so its owner can read it.
    draft.project(&project);
    draft.keep_bodies(BodyPolicy::of(config));
    let bytes: Bytes = read_body(body, max_body_bytes, read_timeout).await?;
    draft.request(&bytes);
    let body = request::parse_body::<T>(&bytes)?;
    draft.user(body.user_id());
    check_project(&project, body.project_id())?;
    let target = request::target(body.provider_config())?;
    let route = live.routes.get(&target.route)?;
    draft.route(&route.id, &route.config.plugin);
    Ok(Admitted {
        project,
        body,
        target,
        route,
        max_expanded_bytes: config.max_expanded_bytes(),
    })
}

fn call_context(draft: &Draft, route: &Route) -> CallContext {
    CallContext {
        invocation_id: draft.id(),
        sandbox: route.sandbox.clone(),
        secrets: draft.current_secrets().clone(),
    }
}

pub(super) async fn completions(
    state: Arc<AppState>,
    request: Request<Incoming>,
    draft: Draft,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let mut draft = draft;
    let result = run_flow(
        &state,
        completion_flow(&state, &mut draft, &parts.headers, body),
    )
    .await;
    finish(&state, draft, result).await
}

async fn completion_flow(
    state: &Arc<AppState>,
    draft: &mut Draft,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Reply, ApiError> {
    let Admitted {
        project: key_project,
        body,
        target,
        route,
        max_expanded_bytes,
    } = admit::<CompletionBody>(state, draft, headers, body).await?;
    if target.kind == Kind::Embeddings {
        return Err(ApiError::BadRequest(
            "params.type \"embeddings\" is served by POST /embeddings".into(),
        ));
    }
    let stream = body.stream.unwrap_or(false);
    let show_usage = body.show_usage.unwrap_or(false);
    let model = route.model(target.model.clone())?;
    draft.model(&model, target.kind.as_str(), stream);

    let api_key = provider_key(draft, &route, headers)?;
    let completion_request = types::CompletionRequest {
        prompt: request::prompt(&body, target.kind, max_expanded_bytes)?,
        functions: request::functions(&body)?,
        function_choice: request::function_choice(&body)?,
        route: route.wit_route(api_key),
        model: model.clone(),
        params: target.params,
    };
    let plugin = plugin_for(state, &route)?;
    let ctx = call_context(draft, &route);

    if stream {
        return stream::start(stream::StreamCall {
            state: state.clone(),
            route,
            plugin,
            ctx,
            request: completion_request,
            model,
            project_id: key_project,
            kind: target.kind,
            show_usage,
            draft: draft.hand_over(),
        })
        .await;
    }

    let call = state.runtime.complete(&plugin, &ctx, completion_request);
    let completion = tokio::time::timeout(route.timeout, call)
        .await
        .map_err(|_| timeout_error(&route))??;
    let (usage, cost) = usage_and_cost(&route, &plugin, &model, completion.usage.as_ref());
    draft.usage(usage, cost);

    let id = draft.id().to_string();
    let envelope = Envelope {
        invocation_id: &id,
        project_id: &key_project,
        kind: target.kind,
        model: &model,
    };
    let choices = completion
        .choices
        .iter()
        .map(|choice| response::choice(&envelope, choice, &choice.text))
        .collect();
    let usage = usage.as_ref().filter(|_| show_usage).map(|u| (u, cost));
    Ok(Reply::Json(response::completion(
        &envelope, true, choices, usage,
    )))
}

pub(super) fn timeout_error(route: &Route) -> ApiError {
    ApiError::Timeout(format!(
        "no complete answer within {} s",
        route.timeout.as_secs()
    ))
}

pub(super) async fn embeddings(
    state: Arc<AppState>,
    request: Request<Incoming>,
    draft: Draft,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let mut draft = draft;
    let result = run_flow(
        &state,
        embedding_flow(&state, &mut draft, &parts.headers, body),
    )
    .await;
    finish(&state, draft, result).await
}

async fn embedding_flow(
    state: &Arc<AppState>,
    draft: &mut Draft,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Reply, ApiError> {
    let Admitted {
        project: key_project,
        body,
        target,
        route,
        ..
    } = admit::<EmbeddingBody>(state, draft, headers, body).await?;
    if target.kind != Kind::Embeddings {
        return Err(ApiError::BadRequest(format!(
            "POST /embeddings needs params.type \"embeddings\", not {:?}",
            target.kind.as_str()
        )));
    }
    let model = route.model(target.model.clone())?;
    draft.model(&model, Kind::Embeddings.as_str(), false);
    let input = body
        .input
        .ok_or_else(|| ApiError::BadRequest("input is required".into()))?
        .into_list()?;
    let embedding_request = types::EmbeddingRequest {
        route: route.wit_route(provider_key(draft, &route, headers)?),
        model: model.clone(),
        input,
        params: target.params,
    };
    let plugin = plugin_for(state, &route)?;
    let ctx = call_context(draft, &route);
    let inputs = embedding_request.input.len();
    let call = state.runtime.embed(&plugin, &ctx, embedding_request);
    let result = tokio::time::timeout(route.timeout, call)
        .await
        .map_err(|_| timeout_error(&route))??;
    if result.vectors.len() != inputs {
        return Err(ApiError::ProviderFailed(format!(
            "the provider returned {} embeddings for {inputs} inputs",
            result.vectors.len(),
        )));
    }
    let (usage, cost) = usage_and_cost(&route, &plugin, &model, result.usage.as_ref());
    draft.usage(usage, cost);
    let id = draft.id().to_string();
    let envelope = Envelope {
        invocation_id: &id,
        project_id: &key_project,
        kind: Kind::Embeddings,
        model: &model,
    };
    Ok(Reply::Json(response::embeddings(
        &envelope,
        &result.vectors,
    )))
}

/// `GET /invocations/{id}`: the caller's own project's records only.
pub(super) async fn invocation(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id_text: &str,
    request_id: Uuid,
) -> Response<Body> {
    let result = async {
        let project = authenticate(&state, request.headers()).await?;
        let not_found = || ApiError::NotFound(format!("no invocation {id_text} in this project"));
        let id = Uuid::parse_str(id_text).map_err(|_| not_found())?;
        // Records are written in batches: make sure this one has landed.
        state.log.flush().await;
        let record = state.store.invocation(&id).await?.ok_or_else(not_found)?;
        if record.project_id.as_deref() != Some(project.as_str()) {
            return Err(not_found());
        }
        Ok(record.to_json())
    }
    .await;
    match result {
        Ok(body) => json_response(StatusCode::OK, &body, &request_id),
        Err(error) => error_response(&error, &request_id),
    }
}

pub(super) fn healthz(id: &Uuid) -> Response<Body> {
    json_response(StatusCode::OK, &json!({"status": "ok"}), id)
}
