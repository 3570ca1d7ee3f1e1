//! Calls to the echo plugin straight through a [`PluginRuntime`], without HTTP: for tests of
//! the runtime's instance pool (slots held, recycled, capped).

use std::sync::Arc;

use gateway::plugins::types::{Completion, CompletionRequest, Prompt, Route as WitRoute};
use gateway::plugins::{CallContext, Plugin, PluginError, PluginRuntime, Sandbox};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::harness::built_plugins_dir;

/// The echo plugin loaded into `runtime`, and a text request for it.
pub struct EchoCalls {
    pub runtime: Arc<PluginRuntime>,
    sandbox: Arc<Sandbox>,
    request: CompletionRequest,
}

impl EchoCalls {
    /// Loads `echo.wasm` into `runtime`; calls ask it to echo `prompt` word by word.
    pub async fn load(runtime: Arc<PluginRuntime>, prompt: &str) -> EchoCalls {
        runtime
            .load(&built_plugins_dir().join("echo.wasm"))
            .await
            .expect("load echo");
        EchoCalls {
            runtime,
            sandbox: Arc::new(Sandbox::offline().expect("sandbox")),
            request: CompletionRequest {
                route: WitRoute {
                    id: "direct".into(),
                    base_url: String::new(),
                    api_key: None,
                    settings: "{}".into(),
                    secrets: Vec::new(),
                },
                model: "echo".into(),
                prompt: Prompt::Text(prompt.into()),
                functions: Vec::new(),
                function_choice: None,
                reasoning: None,
                output: Default::default(),
                params: "{}".into(),
            },
        }
    }

    /// The echo plugin as the runtime serves it now (another one after a recycle).
    pub fn plugin(&self) -> Arc<Plugin> {
        self.runtime.get("echo").expect("echo is serving")
    }

    /// Starts a streamed call on `plugin`; its instance lives until the call ends, which a
    /// full `sink` nobody reads delays.
    pub fn stream(
        &self,
        plugin: Arc<Plugin>,
        sink: mpsc::Sender<gateway::plugins::types::Chunk>,
    ) -> JoinHandle<Result<Completion, PluginError>> {
        let (runtime, request) = (self.runtime.clone(), self.request.clone());
        let ctx = CallContext {
            invocation_id: uuid::Uuid::nil(),
            route: Arc::from("direct"),
            sandbox: self.sandbox.clone(),
            secrets: Default::default(),
            trace: Default::default(),
            trace_headers: None,
        };
        tokio::spawn(async move { runtime.complete_stream(&plugin, &ctx, request, sink).await })
    }
}
