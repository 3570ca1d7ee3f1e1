//! The `guard` world (`wit/guard.wit`), on the current line: its bindings, which
//! share the provider world's `types`, `log` and `kv` (one copy of each, linked
//! once), and the conversions of what a guard is shown and says. Like the
//! provider's, they move every string and list: a request goes in and comes
//! back out, so the flow keeps it for the answer's check without a copy.

use wasmtime::StoreContextMut;
use wasmtime::component::{Component, ComponentExportIndex, Func, InstancePre, Linker, TypedFunc};

use super::v0_2::types;
use crate::plugins::imports::PluginState;
use crate::plugins::types as host;

mod bindings {
    wasmtime::component::bindgen!({
        world: "guard",
        path: "../wit",
        imports: { default: async },
        exports: { default: async },
        with: {
            "gateway:provider/types": crate::plugins::wit::v0_2::bindings::gateway::provider::types,
            "gateway:provider/log": crate::plugins::wit::v0_2::bindings::gateway::provider::log,
            "gateway:provider/kv": crate::plugins::wit::v0_2::bindings::gateway::provider::kv,
        },
    });
}

use bindings::GuardPre;
use bindings::gateway::provider::guard_types as g;

/// The guard world's one interface of its own (types only); the others are the
/// provider world's, linked by it.
pub(super) fn add_to_linker(linker: &mut Linker<PluginState>) -> wasmtime::Result<()> {
    linker.instance("gateway:provider/guard-types@0.2.0")?;
    Ok(())
}

/// Whether a component is a guard: it exports `check-request`.
pub(super) fn is_guard(component: &Component) -> bool {
    component.get_export_index(None, "check-request").is_some()
}

/// Checks that every export of the world is there with its type.
pub(super) fn check(pre: &InstancePre<PluginState>) -> wasmtime::Result<()> {
    GuardPre::new(pre.clone()).map(drop)
}

pub(super) async fn info(
    pre: &InstancePre<PluginState>,
    mut store: impl wasmtime::AsContextMut<Data = PluginState>,
) -> wasmtime::Result<wasmtime::Result<host::PluginInfo>> {
    let guard = GuardPre::new(pre.clone())?
        .instantiate_async(&mut store)
        .await?;
    Ok(guard.call_info(&mut store).await.map(Into::into))
}

/// Where a guard's exports are, found once per load.
#[derive(Clone, Copy)]
pub(super) struct GuardExports {
    check_request: ComponentExportIndex,
    check_response: ComponentExportIndex,
}

impl GuardExports {
    pub(super) fn find(component: &Component) -> wasmtime::Result<GuardExports> {
        Ok(GuardExports {
            check_request: super::export_index(component, "check-request")?,
            check_response: super::export_index(component, "check-response")?,
        })
    }

    pub(super) fn check_request(&self) -> ComponentExportIndex {
        self.check_request
    }

    pub(super) fn check_response(&self) -> ComponentExportIndex {
        self.check_response
    }
}

type CheckRequestFunc<'a> = TypedFunc<(&'a g::CheckedRequest,), (g::RequestVerdict,)>;
type CheckResponseFunc<'a> =
    TypedFunc<(&'a g::CheckedRequest, &'a types::Completion), (g::AnswerVerdict,)>;

/// Calls `check-request`. The request comes back whatever happened, for the
/// answer's check.
pub(super) async fn check_request(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::CheckedRequest,
) -> (host::CheckedRequest, wasmtime::Result<host::RequestVerdict>) {
    let request = g::CheckedRequest::from(request);
    // SAFETY: `check` had `GuardPre::new` check this export's type against the
    // world's, which this signature is (bindgen's own for it).
    let typed: CheckRequestFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
    let result = typed.call_async(&mut store, (&request,)).await;
    let verdict = result.map(|(verdict,)| verdict.into());
    (request.into(), verdict)
}

/// Calls `check-response`; the request and the answer come back whatever happened.
pub(super) async fn check_response(
    func: Func,
    mut store: StoreContextMut<'_, PluginState>,
    request: host::CheckedRequest,
    answer: host::Completion,
) -> (
    host::CheckedRequest,
    host::Completion,
    wasmtime::Result<host::AnswerVerdict>,
) {
    let request = g::CheckedRequest::from(request);
    let answer = types::Completion::from(answer);
    // SAFETY: as in `check_request`.
    let typed: CheckResponseFunc<'_> = unsafe { TypedFunc::new_unchecked(func) };
    let result = typed.call_async(&mut store, (&request, &answer)).await;
    let verdict = result.map(|(verdict,)| verdict.into());
    (request.into(), answer.into(), verdict)
}

// ---------------------------------------------------------------- into the guard

impl From<host::CheckedRequest> for g::CheckedRequest {
    fn from(request: host::CheckedRequest) -> g::CheckedRequest {
        g::CheckedRequest {
            guard: request.guard,
            settings: request.settings,
            route: request.route,
            model: request.model,
            input: request.input.into(),
            functions: request.functions.into_iter().map(Into::into).collect(),
            params: request.params,
        }
    }
}

impl From<host::GuardInput> for g::Input {
    fn from(input: host::GuardInput) -> g::Input {
        match input {
            host::GuardInput::Prompt(prompt) => g::Input::Prompt(prompt.into()),
            host::GuardInput::Embedding(texts) => g::Input::Embedding(texts),
        }
    }
}

// ---------------------------------------------------------------- out of the guard

impl From<g::CheckedRequest> for host::CheckedRequest {
    fn from(request: g::CheckedRequest) -> host::CheckedRequest {
        host::CheckedRequest {
            guard: request.guard,
            settings: request.settings,
            route: request.route,
            model: request.model,
            input: request.input.into(),
            functions: request.functions.into_iter().map(Into::into).collect(),
            params: request.params,
        }
    }
}

impl From<g::Input> for host::GuardInput {
    fn from(input: g::Input) -> host::GuardInput {
        match input {
            g::Input::Prompt(prompt) => host::GuardInput::Prompt(prompt.into()),
            g::Input::Embedding(texts) => host::GuardInput::Embedding(texts),
        }
    }
}

impl From<g::RequestVerdict> for host::RequestVerdict {
    fn from(verdict: g::RequestVerdict) -> host::RequestVerdict {
        match verdict {
            g::RequestVerdict::Allow => host::RequestVerdict::Allow,
            g::RequestVerdict::Deny(reason) => host::RequestVerdict::Deny(reason),
            g::RequestVerdict::Rewrite(rewrite) => host::RequestVerdict::Rewrite {
                input: rewrite.input.into(),
                changes: changes(rewrite.changes),
            },
        }
    }
}

impl From<g::AnswerVerdict> for host::AnswerVerdict {
    fn from(verdict: g::AnswerVerdict) -> host::AnswerVerdict {
        match verdict {
            g::AnswerVerdict::Allow => host::AnswerVerdict::Allow,
            g::AnswerVerdict::Deny(reason) => host::AnswerVerdict::Deny(reason),
            g::AnswerVerdict::Rewrite(rewrite) => host::AnswerVerdict::Rewrite {
                texts: rewrite.texts,
                changes: changes(rewrite.changes),
            },
        }
    }
}

fn changes(changes: Vec<g::Change>) -> Vec<host::Change> {
    changes
        .into_iter()
        .map(|change| host::Change {
            kind: change.kind,
            count: change.count,
        })
        .collect()
}
