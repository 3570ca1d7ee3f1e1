//! Guards in the flow: each guard of the request's chain checks the request before the
//! provider is called (allow, deny, or rewrite what is sent), and the whole answer before
//! the caller gets it. Every verdict is recorded with the invocation, counted, and traced.
//!
//! Guards fail closed: a guard that crashes, runs out of its limits, is not loaded, or
//! answers something unusable refuses the request rather than let it through unchecked.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::record::Draft;
use crate::error::ApiError;
use crate::plugins::types::{
    AnswerVerdict, Change, CheckedRequest, Completion, FunctionDef, GuardInput, RequestVerdict,
};
use crate::plugins::{CallContext, PluginError};
use crate::routing::{Chain, Guard};
use crate::state::AppState;
use crate::store::{GuardOutcome, GuardStage, GuardVerdictKind};

/// A request that went through its guards: what they are shown of it again with its answer.
pub(super) struct Guarded {
    chain: Chain,
    request: CheckedRequest,
}

/// Runs the request's guards over `input`, in order, each seeing what the one before let
/// through; answers the input to send, and what the answer's check needs.
#[allow(clippy::too_many_arguments)]
pub(super) async fn check_request(
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
    for guard in chain.iter() {
        aim(&mut request, guard);
        let span = draft.request_trace().guard(&guard.id, "request");
        let plugin = match loaded(state, guard) {
            Ok(plugin) => plugin,
            Err(error) => {
                span.end("error");
                return Err(failed(
                    state,
                    draft,
                    guard,
                    GuardStage::Request,
                    error,
                    true,
                ));
            }
        };
        let ctx = context(draft, guard);
        let (checked, verdict) = state.runtime.check_request(&plugin, &ctx, request).await;
        request = checked;
        match verdict {
            Ok(RequestVerdict::Allow) => {
                span.end("allow");
                note(state, draft, guard, GuardStage::Request, Verdict::Allow);
            }
            Ok(RequestVerdict::Deny(reason)) => {
                span.end("deny");
                return Err(denied(
                    state,
                    draft,
                    guard,
                    GuardStage::Request,
                    reason,
                    true,
                ));
            }
            Ok(RequestVerdict::Rewrite { input, changes }) => {
                if let Err(why) = same_shape(&request.input, &input) {
                    span.end("error");
                    let error = ApiError::GuardFailed {
                        guard: guard.id.to_string(),
                        reason: why,
                    };
                    return Err(failed(
                        state,
                        draft,
                        guard,
                        GuardStage::Request,
                        error,
                        true,
                    ));
                }
                span.end("rewrite");
                request.input = input;
                let changes = counted(changes);
                note(
                    state,
                    draft,
                    guard,
                    GuardStage::Request,
                    Verdict::Rewrite(changes, true),
                );
            }
            Err(error) => {
                span.end("error");
                let error = plugin_error(guard, error);
                return Err(failed(
                    state,
                    draft,
                    guard,
                    GuardStage::Request,
                    error,
                    true,
                ));
            }
        }
    }
    let input = request.input.clone();
    Ok((input, Guarded { chain, request }))
}

impl Guarded {
    /// Whether a guard of the chain holds a stream until its answer is checked.
    pub(super) fn buffers_streams(&self) -> bool {
        (self.chain.iter()).any(|guard| guard.stream == crate::config::GuardStream::Buffer)
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

    /// The answer's guards in order; the first error that is `applied` ends them.
    async fn judge(
        &mut self,
        state: &AppState,
        draft: &mut Draft,
        mut answer: Completion,
        applied: bool,
    ) -> (Completion, Option<ApiError>) {
        for guard in self.chain.clone().iter() {
            aim(&mut self.request, guard);
            let span = draft.request_trace().guard(&guard.id, "response");
            let plugin = match loaded(state, guard) {
                Ok(plugin) => plugin,
                Err(error) => {
                    span.end("error");
                    let error = failed(state, draft, guard, GuardStage::Response, error, applied);
                    if applied {
                        return (answer, Some(error));
                    }
                    continue;
                }
            };
            let ctx = context(draft, guard);
            let request = std::mem::replace(&mut self.request, empty_request());
            let (request, checked, verdict) = state
                .runtime
                .check_response(&plugin, &ctx, request, answer)
                .await;
            self.request = request;
            answer = checked;
            match verdict {
                Ok(AnswerVerdict::Allow) => {
                    span.end("allow");
                    note(state, draft, guard, GuardStage::Response, Verdict::Allow);
                }
                Ok(AnswerVerdict::Deny(reason)) => {
                    span.end("deny");
                    let error = denied(state, draft, guard, GuardStage::Response, reason, applied);
                    if applied {
                        return (answer, Some(error));
                    }
                }
                Ok(AnswerVerdict::Rewrite { texts, changes }) => {
                    if texts.len() != answer.choices.len() {
                        span.end("error");
                        let error = ApiError::GuardFailed {
                            guard: guard.id.to_string(),
                            reason: format!(
                                "its rewrite gave {} texts for an answer of {} choices",
                                texts.len(),
                                answer.choices.len()
                            ),
                        };
                        let error =
                            failed(state, draft, guard, GuardStage::Response, error, applied);
                        if applied {
                            return (answer, Some(error));
                        }
                        continue;
                    }
                    span.end("rewrite");
                    if applied {
                        for (choice, text) in answer.choices.iter_mut().zip(texts) {
                            choice.text = text;
                        }
                    }
                    let changes = counted(changes);
                    note(
                        state,
                        draft,
                        guard,
                        GuardStage::Response,
                        Verdict::Rewrite(changes, applied),
                    );
                }
                Err(error) => {
                    span.end("error");
                    let error = plugin_error(guard, error);
                    let error = failed(state, draft, guard, GuardStage::Response, error, applied);
                    if applied {
                        return (answer, Some(error));
                    }
                }
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

/// The guard's plugin, if it is loaded and is a guard.
fn loaded(state: &AppState, guard: &Guard) -> Result<Arc<crate::plugins::Plugin>, ApiError> {
    state
        .runtime
        .for_guard(&guard.plugin)
        .ok_or_else(|| ApiError::GuardUnavailable {
            guard: guard.id.to_string(),
            reason: format!(
                "its plugin {:?} is not loaded (or is not a guard)",
                guard.plugin
            ),
        })
}

/// Where a guard's instance runs: its own sandbox and `kv` space; the request's keys
/// are kept out of its log lines.
fn context(draft: &Draft, guard: &Guard) -> CallContext {
    CallContext {
        invocation_id: draft.id(),
        route: guard.space.clone(),
        sandbox: guard.sandbox.clone(),
        secrets: draft.current_secrets().clone(),
        trace: Arc::default(),
        trace_headers: None,
    }
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
            reason: other.to_string(),
        },
    }
}

enum Verdict {
    Allow,
    /// What changed, and whether it was applied.
    Rewrite(BTreeMap<String, u32>, bool),
}

fn note(state: &AppState, draft: &mut Draft, guard: &Guard, stage: GuardStage, verdict: Verdict) {
    let (kind, changes, applied) = match verdict {
        Verdict::Allow => (GuardVerdictKind::Allow, BTreeMap::new(), true),
        Verdict::Rewrite(changes, applied) => (GuardVerdictKind::Rewrite, changes, applied),
    };
    state
        .metrics
        .guard_verdict(&guard.id, stage.as_str(), kind.as_str());
    draft.guarded(GuardOutcome {
        guard: guard.id.to_string(),
        stage,
        verdict: kind,
        reason: None,
        changes,
        applied,
    });
}

/// Records and counts a denial; the error the caller gets when it is `applied`.
fn denied(
    state: &AppState,
    draft: &mut Draft,
    guard: &Guard,
    stage: GuardStage,
    reason: String,
    applied: bool,
) -> ApiError {
    let reason = draft.current_secrets().redact_owned(reason);
    state
        .metrics
        .guard_verdict(&guard.id, stage.as_str(), GuardVerdictKind::Deny.as_str());
    draft.guarded(GuardOutcome {
        guard: guard.id.to_string(),
        stage,
        verdict: GuardVerdictKind::Deny,
        reason: Some(reason.clone()),
        changes: BTreeMap::new(),
        applied,
    });
    ApiError::GuardDenied {
        guard: guard.id.to_string(),
        stage,
        reason,
    }
}

/// Records and counts a guard's failure; the error the request ends with.
fn failed(
    state: &AppState,
    draft: &mut Draft,
    guard: &Guard,
    stage: GuardStage,
    error: ApiError,
    applied: bool,
) -> ApiError {
    let error = draft.redact(error);
    tracing::warn!(invocation_id = %draft.id(), guard = %guard.id, stage = stage.as_str(),
        "guard failed: {}", error.message());
    state
        .metrics
        .guard_verdict(&guard.id, stage.as_str(), GuardVerdictKind::Error.as_str());
    draft.guarded(GuardOutcome {
        guard: guard.id.to_string(),
        stage,
        verdict: GuardVerdictKind::Error,
        reason: Some(error.message()),
        changes: BTreeMap::new(),
        applied,
    });
    error
}
