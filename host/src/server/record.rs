//! The invocation record of a request, filled in as the request advances.

use std::time::Instant;

use uuid::Uuid;

use crate::error::ApiError;
use crate::store::{Invocation, InvocationStatus, TokenUsage, now_ms};

/// An invocation record under construction. Every request that reaches a
/// handler ends by turning its draft into exactly one record.
#[derive(Clone)]
pub struct Draft {
    record: Invocation,
    started: Instant,
}

impl Draft {
    pub fn new(id: Uuid) -> Draft {
        Draft {
            record: Invocation {
                id,
                project_id: None,
                user_id: None,
                route: None,
                plugin: None,
                model: None,
                kind: None,
                stream: false,
                status: InvocationStatus::Error,
                http_status: 0,
                error: None,
                provider_error: None,
                usage: None,
                cost_usd: None,
                created_at_ms: now_ms(),
                duration_ms: 0,
                request: None,
                response: None,
            },
            started: Instant::now(),
        }
    }

    pub fn id(&self) -> Uuid {
        self.record.id
    }

    pub fn request(&mut self, body: &[u8]) {
        self.record.request = Some(String::from_utf8_lossy(body).into_owned());
    }
    pub fn project(&mut self, project_id: &str) {
        self.record.project_id = Some(project_id.to_owned());
    }
    pub fn user(&mut self, user_id: Option<&str>) {
        self.record.user_id = user_id.map(str::to_owned);
    }
    pub fn route(&mut self, route: &str, plugin: &str) {
        self.record.route = Some(route.to_owned());
        self.record.plugin = Some(plugin.to_owned());
    }
    pub fn model(&mut self, model: &str, kind: &str, stream: bool) {
        self.record.model = Some(model.to_owned());
        self.record.kind = Some(kind.to_owned());
        self.record.stream = stream;
    }
    pub fn usage(&mut self, usage: Option<TokenUsage>, cost: Option<f64>) {
        self.record.usage = usage;
        self.record.cost_usd = cost;
    }

    pub fn success(mut self, http_status: u16, response: String) -> Invocation {
        self.record.status = InvocationStatus::Success;
        self.record.http_status = http_status;
        self.record.response = Some(response);
        self.done()
    }

    pub fn failure(mut self, error: &ApiError) -> Invocation {
        if let ApiError::Internal(detail) = error {
            tracing::error!(invocation_id = %self.record.id, "internal error: {detail}");
        }
        self.record.status = InvocationStatus::Error;
        self.record.http_status = error.status().as_u16();
        self.record.error = Some(error.message());
        self.record.provider_error = error.provider_error().map(str::to_owned);
        self.done()
    }

    /// The caller left before the answer was complete; `response` holds what was sent.
    pub fn cancelled(mut self, http_status: u16, response: Option<String>) -> Invocation {
        self.record.status = InvocationStatus::Cancelled;
        self.record.http_status = http_status;
        self.record.error = Some("the client disconnected".into());
        self.record.response = response;
        self.done()
    }

    fn done(mut self) -> Invocation {
        self.record.duration_ms = self.started.elapsed().as_millis() as i64;
        self.record
    }
}
