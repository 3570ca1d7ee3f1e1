//! Guards in the flow: each guard of the request's chain checks the request before the
//! provider is called (allow, deny, or rewrite what is sent), and the whole answer before
//! the caller gets it, in the same instance unless instances run short. Every verdict is
//! recorded with the invocation, counted, and traced.
//!
//! Guards fail closed: a guard that crashes, runs out of its limits, is not loaded, or
//! answers something unusable refuses the request rather than let it through unchecked.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::record::Draft;
use crate::error::ApiError;
use crate::plugins::types::{
    AnswerVerdict, Change, CheckedRequest, Completion, FunctionDef, GuardInput, Prompt,
    RequestVerdict,
};
use crate::plugins::{CallContext, GuardInstance, PluginError};
use crate::routing::{Chain, Guard};
use crate::state::AppState;
use crate::store::{GuardOutcome, GuardStage, GuardVerdictKind};
use crate::traces::GuardSpan;

/// A request that went through its guards: each guard's instance, kept to check the
/// answer too (unless instances ran short), and what they are shown of the request again
/// with the answer.
pub(super) struct Guarded {
    guards: Vec<(Arc<Guard>, Option<GuardInstance>)>,
    request: CheckedRequest,
}

/// The guards of one request, with what they are shown beside its input.
pub(super) struct Guards<'a> {
    pub chain: Chain,
    pub route: &'a str,
    pub model: &'a str,
    pub params: &'a str,
}

impl Guards<'_> {
    /// The prompt the guards let through (as they rewrote it), and what the check of the
    /// answer needs; without guards, the prompt as it is.
    pub async fn check_prompt(
        self,
        state: &AppState,
        draft: &mut Draft,
        prompt: Prompt,
        functions: &[FunctionDef],
    ) -> Result<(Prompt, Option<Guarded>), ApiError> {
        if self.chain.is_empty() {
            return Ok((prompt, None));
        }
        let input = GuardInput::Prompt(prompt);
        match self.check(state, draft, input, functions).await? {
            (GuardInput::Prompt(prompt), guarded) => Ok((prompt, Some(guarded))),
            _ => Err(changed_input()),
        }
    }

    /// The embeddings' input the guards let through (as they rewrote it); without guards,
    /// the input as it is.
    pub async fn check_embedding(
        self,
        state: &AppState,
        draft: &mut Draft,
        input: Vec<String>,
    ) -> Result<Vec<String>, ApiError> {
        if self.chain.is_empty() {
            return Ok(input);
        }
        let input = GuardInput::Embedding(input);
        match self.check(state, draft, input, &[]).await? {
            (GuardInput::Embedding(input), _) => Ok(input),
            _ => Err(changed_input()),
        }
    }

    async fn check(
        self,
        state: &AppState,
        draft: &mut Draft,
        input: GuardInput,
        functions: &[FunctionDef],
    ) -> Result<(GuardInput, Guarded), ApiError> {
        let Guards {
            chain,
            route,
            model,
            params,
        } = self;
        check_request(state, draft, chain, route, model, input, functions, params).await
    }
}

/// [`same_shape`] holds every rewrite to its input's kind: this is a bug if it shows.
fn changed_input() -> ApiError {
    ApiError::Internal("a guard's rewrite changed the input".into())
}

/// Runs the request's guards over `input`, in order, each seeing what the one before let
/// through; answers the input to send, and what the answer's check needs.
#[allow(clippy::too_many_arguments)]
async fn check_request(
    state: &AppState,
    draft: &mut Draft,
    chain: Chain,
    route: &str,
    model: &str,
    input: GuardInput,
    functions: &[FunctionDef],
    params: &str,
) -> Result<(GuardInput, Guarded), ApiError> {
    let mut request = CheckedRequest {
        guard: String::new(),
        settings: String::new(),
        route: route.to_owned(),
        model: model.to_owned(),
        input,
        functions: functions.to_vec(),
        params: params.to_owned(),
    };
    let mut guards = Vec::with_capacity(chain.len());
    for guard in chain.iter() {
        aim(&mut request, guard);
        let span = draft.request_trace().guard(&guard.id, "request");
        let step = match instance(state, draft, guard).await {
            Err(error) => Step::Failed(error),
            Ok(mut instance) => {
                let (checked, verdict) = instance.check_request(request).await;
                request = checked;
                // Starting a second instance for the answer costs about as much as the
                // guard's own work; keeping this one costs a slot and its memory meanwhile.
                let kept = state.runtime.has_room().then_some(instance);
                guards.push((guard.clone(), kept));
                match verdict {
                    Ok(RequestVerdict::Allow) => Step::Allowed,
                    Ok(RequestVerdict::Deny(reason)) => Step::Denied(reason),
                    Ok(RequestVerdict::Rewrite { input, changes }) => {
                        match same_shape(&request.input, &input) {
                            Ok(()) => {
                                request.input = input;
                                Step::Rewrote(counted(changes))
                            }
                            Err(reason) => Step::Failed(ApiError::GuardFailed {
                                guard: guard.id.to_string(),
                                reason,
                                crashed: false,
                            }),
                        }
                    }
                    Err(error) => Step::Failed(plugin_error(guard, error)),
                }
            }
        };
        if let Some(error) = settle(state, draft, guard, GuardStage::Request, span, step, true) {
            return Err(error);
        }
    }
    let input = request.input.clone();
    Ok((input, Guarded { guards, request }))
}

impl Guarded {
    /// Whether a guard of the chain holds a stream until its answer is checked.
    pub(super) fn buffers_streams(&self) -> bool {
        (self.guards.iter()).any(|(guard, _)| guard.stream == crate::config::GuardStream::Buffer)
    }

    /// Runs the answer's guards over `answer`: their verdicts decide what the caller gets
    /// (a denial or a failure is the request's error, a rewrite replaces the texts).
    pub(super) async fn check_answer(
        &mut self,
        state: &AppState,
        draft: &mut Draft,
        answer: Completion,
    ) -> Result<Completion, ApiError> {
        match self.judge(state, draft, answer, true).await {
            (answer, None) => Ok(answer),
            (_, Some(error)) => Err(error),
        }
    }

    /// Runs the answer's guards over an answer the caller has already been sent: their
    /// verdicts are recorded and counted, not applied.
    pub(super) async fn observe_answer(
        &mut self,
        state: &AppState,
        draft: &mut Draft,
        answer: Completion,
    ) -> Completion {
        self.judge(state, draft, answer, false).await.0
    }

    /// The answer's guards in order, each in the instance that checked the request if it
    /// was kept; the first error that is `applied` ends them.
    async fn judge(
        &mut self,
        state: &AppState,
        draft: &mut Draft,
        mut answer: Completion,
        applied: bool,
    ) -> (Completion, Option<ApiError>) {
        for (guard, kept) in &mut self.guards {
            let guard: &Guard = guard;
            aim(&mut self.request, guard);
            let span = draft.request_trace().guard(&guard.id, "response");
            let instance = match kept.take() {
                Some(instance) => Ok(instance),
                None => instance(state, draft, guard).await,
            };
            let verdict = match instance {
                Err(error) => Err(error),
                Ok(mut instance) => {
                    let request = std::mem::replace(&mut self.request, empty_request());
                    let (request, checked, verdict) =
                        instance.check_response(request, answer).await;
                    self.request = request;
                    answer = checked;
                    verdict.map_err(|error| plugin_error(guard, error))
                }
            };
            let step = match verdict {
                Ok(AnswerVerdict::Allow) => Step::Allowed,
                Ok(AnswerVerdict::Deny(reason)) => Step::Denied(reason),
                Ok(AnswerVerdict::Rewrite { texts, .. }) if texts.len() != answer.choices.len() => {
                    Step::Failed(ApiError::GuardFailed {
                        guard: guard.id.to_string(),
                        reason: format!(
                            "its rewrite gave {} texts for an answer of {} choices",
                            texts.len(),
                            answer.choices.len()
                        ),
                        crashed: false,
                    })
                }
                Ok(AnswerVerdict::Rewrite { texts, changes }) => {
                    if applied {
                        for (choice, text) in answer.choices.iter_mut().zip(texts) {
                            choice.text = text;
                        }
                    }
                    Step::Rewrote(counted(changes))
                }
                Err(error) => Step::Failed(error),
            };
            let stage = GuardStage::Response;
            // An observed answer's errors are recorded, not obeyed.
            if let Some(error) = settle(state, draft, guard, stage, span, step, applied)
                && applied
            {
                return (answer, Some(error));
            }
        }
        (answer, None)
    }
}

/// What one check of the request (or answer) shows of the guard itself.
fn aim(request: &mut CheckedRequest, guard: &Guard) {
    request.guard.clear();
    request.guard.push_str(&guard.id);
    request.settings.clear();
    request.settings.push_str(&guard.settings);
}

fn empty_request() -> CheckedRequest {
    CheckedRequest {
        guard: String::new(),
        settings: String::new(),
        route: String::new(),
        model: String::new(),
        input: GuardInput::Embedding(Vec::new()),
        functions: Vec::new(),
        params: String::new(),
    }
}

/// An instance of the guard's plugin for this request, if its plugin is loaded and is
/// a guard. It runs in the guard's own sandbox and `kv` space; the request's keys are
/// kept out of its log lines.
async fn instance(
    state: &AppState,
    draft: &Draft,
    guard: &Guard,
) -> Result<GuardInstance, ApiError> {
    let plugin =
        (state.runtime.for_guard(&guard.plugin)).ok_or_else(|| ApiError::GuardUnavailable {
            guard: guard.id.to_string(),
            reason: format!(
                "its plugin {:?} is not loaded (or is not a guard)",
                guard.plugin
            ),
        })?;
    let ctx = CallContext {
        invocation_id: draft.id(),
        route: guard.space.clone(),
        sandbox: guard.sandbox.clone(),
        secrets: draft.current_secrets().clone(),
        trace: Arc::default(),
        trace_headers: None,
    };
    (state.runtime.guard(plugin, ctx).await).map_err(|error| plugin_error(guard, error))
}

/// A guard's rewrite must keep the kind of input (and, for texts, their number): the
/// request's surface answers in the shape the caller asked for.
fn same_shape(before: &GuardInput, after: &GuardInput) -> Result<(), String> {
    match (before, after) {
        (GuardInput::Prompt(before), GuardInput::Prompt(after)) => {
            use crate::plugins::types::Prompt;
            match (before, after) {
                (Prompt::Text(_), Prompt::Text(_)) | (Prompt::Chat(_), Prompt::Chat(_)) => Ok(()),
                _ => Err("its rewrite changed a text prompt into a chat, or back".into()),
            }
        }
        (GuardInput::Embedding(before), GuardInput::Embedding(after)) => {
            if before.len() == after.len() {
                Ok(())
            } else {
                Err(format!(
                    "its rewrite gave {} texts for {} to embed",
                    after.len(),
                    before.len()
                ))
            }
        }
        _ => Err("its rewrite changed the kind of input".into()),
    }
}

fn counted(changes: Vec<Change>) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for change in changes {
        *counts.entry(change.kind).or_insert(0u32) += change.count;
    }
    counts
}

fn plugin_error(guard: &Guard, error: PluginError) -> ApiError {
    let guard = guard.id.to_string();
    match error {
        // Out of instance slots: the gateway is full, not the guard broken.
        PluginError::Busy(limit) => ApiError::Busy(limit),
        PluginError::Unavailable(failure) => ApiError::GuardUnavailable {
            guard,
            reason: failure.to_string(),
        },
        other => ApiError::GuardFailed {
            guard,
            crashed: matches!(other, PluginError::Crashed(_)),
            reason: other.to_string(),
        },
    }
}

/// What one guard's check came to.
enum Step {
    Allowed,
    Denied(String),
    /// What changed, by kind.
    Rewrote(BTreeMap<String, u32>),
    Failed(ApiError),
}

/// Ends the guard's span, counts its verdict and records it with the invocation;
/// the error the request ends with if the guard denied or failed (when `applied`:
/// an observed answer's verdicts are kept, not obeyed).
fn settle(
    state: &AppState,
    draft: &mut Draft,
    guard: &Guard,
    stage: GuardStage,
    span: GuardSpan,
    step: Step,
    applied: bool,
) -> Option<ApiError> {
    let (verdict, reason, changes, error) = match step {
        Step::Allowed => (GuardVerdictKind::Allow, None, BTreeMap::new(), None),
        Step::Rewrote(changes) => (GuardVerdictKind::Rewrite, None, changes, None),
        Step::Denied(reason) => {
            let reason = draft.current_secrets().redact_owned(reason);
            let error = ApiError::GuardDenied {
                guard: guard.id.to_string(),
                stage,
                reason: reason.clone(),
            };
            (
                GuardVerdictKind::Deny,
                Some(reason),
                BTreeMap::new(),
                Some(error),
            )
        }
        Step::Failed(error) => {
            let error = draft.redact(error);
            tracing::warn!(invocation_id = %draft.id(), guard = %guard.id, stage = stage.as_str(),
                "guard failed: {}", error.message());
            let reason = Some(error.message());
            (
                GuardVerdictKind::Error,
                reason,
                BTreeMap::new(),
                Some(error),
            )
        }
    };
    span.end(verdict.as_str());
    state
        .metrics
        .guard_verdict(&guard.id, stage.as_str(), verdict.as_str());
    draft.guarded(GuardOutcome {
        guard: guard.id.to_string(),
        stage,
        verdict,
        reason,
        changes,
        applied,
    });
    error
}
