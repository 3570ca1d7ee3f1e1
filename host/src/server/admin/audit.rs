//! The audit log as the admin API and the console write it (every change through a row of
//! the table with an action, every refused change, every sign-in and failed one) and read it
//! (`GET /admin/audit`). An event is written after its change, before the answer: an event
//! that cannot be written is logged with the change (which is done: failing the answer now
//! would not undo it) and counted in `gateway_audit_write_failures_total`.

use std::net::IpAddr;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use super::who::Principal;
use crate::clock::{now_ms, parse_time};
use crate::error::ApiError;
use crate::http::{Body, error_response, json_response, typed_response};
use crate::reports::audit_json;
use crate::state::AppState;
use crate::store::{AuditEvent, AuditFilter, Outcome};

/// Events of a page when the request does not say.
const DEFAULT_PAGE: u32 = 100;
/// The most events of a page.
const MAX_PAGE: u32 = 1000;

/// What a change did, as its handler tells it: what it was done to, and that before and
/// after (never a secret: a key or token made is named by its prefix).
#[derive(Debug, Default)]
pub struct Change {
    pub target: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Who did it, as an event names them.
pub struct Actor<'a> {
    pub name: &'a str,
    pub role: String,
    pub via: &'static str,
}

impl<'a> From<&'a Principal> for Actor<'a> {
    fn from(principal: &'a Principal) -> Actor<'a> {
        Actor {
            name: &principal.actor,
            role: principal.grants.summary(),
            via: principal.via.as_str(),
        }
    }
}

/// One event, to be [`append`]ed.
pub struct Event<'a> {
    pub actor: Actor<'a>,
    pub client: IpAddr,
    pub action: &'static str,
    pub endpoint: String,
    pub change: Change,
    pub status: StatusCode,
    pub request_id: Uuid,
}

/// What a status says of how the change ended.
fn outcome(status: StatusCode) -> Outcome {
    match status.as_u16() {
        200..=299 => Outcome::Ok,
        401 | 403 | 429 => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

/// Appends `event` to the audit log and counts it.
pub async fn append(state: &AppState, event: Event<'_>) {
    let outcome = outcome(event.status);
    state.metrics.audit_event(event.action, outcome.as_str());
    let stored = AuditEvent {
        id: Uuid::now_v7(),
        at_ms: now_ms(),
        actor: event.actor.name.to_owned(),
        role: event.actor.role,
        via: event.actor.via.to_owned(),
        address: Some(event.client.to_canonical().to_string()),
        action: event.action.to_owned(),
        endpoint: event.endpoint,
        target: event.change.target,
        before: event.change.before,
        after: event.change.after,
        outcome,
        status: event.status.as_u16(),
        request_id: Some(event.request_id),
    };
    if let Err(error) = state.store.append_audit_event(&stored).await {
        state.metrics.audit_write_failed();
        tracing::error!(action = %stored.action, actor = %stored.actor, target = ?stored.target,
            outcome = outcome.as_str(), "the audit log could not be written: {error}");
    }
}

/// `GET /admin/audit`: the events the query selects, newest first unless `order=asc`, as
/// JSON lines (`format=json`: `{"events": [...], "next": ID}`); `after=ID` pages on from an
/// event (a page's last, or `next`).
pub async fn list(state: &AppState, request: &Request<Incoming>, id: &Uuid) -> Response<Body> {
    match read(state, request).await {
        Ok((events, false)) => {
            let mut lines = String::new();
            for event in &events {
                lines.push_str(&audit_json(event).to_string());
                lines.push('\n');
            }
            typed_response(StatusCode::OK, "application/x-ndjson", lines, id)
        }
        Ok((events, true)) => {
            let next = events.last().map(|event| event.id.to_string());
            let events: Vec<Value> = events.iter().map(audit_json).collect();
            json_response(
                StatusCode::OK,
                &json!({ "events": events, "next": next }),
                id,
            )
        }
        Err(error) => error_response(&error, id),
    }
}

/// The events a request asks for, and whether it asked for one JSON document.
async fn read(
    state: &AppState,
    request: &Request<Incoming>,
) -> Result<(Vec<AuditEvent>, bool), ApiError> {
    let query = request.uri().query().unwrap_or_default();
    let mut filter = AuditFilter {
        newest_first: true,
        limit: DEFAULT_PAGE,
        ..AuditFilter::default()
    };
    let mut document = false;
    let invalid = |param: &str, message: String| ApiError::InvalidParam {
        param: param.to_owned(),
        message: format!("{param}: {message}"),
    };
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        let text = Some(value.to_string()).filter(|v| !v.is_empty());
        match (&*name, value.as_ref()) {
            (_, "") => {}
            ("since", time) => {
                filter.since_ms = Some(parse_time(time).map_err(|m| invalid("since", m))?)
            }
            ("until", time) => {
                filter.until_ms = Some(parse_time(time).map_err(|m| invalid("until", m))?)
            }
            ("actor", _) => filter.actor = text,
            ("action", _) => filter.action = text,
            ("outcome", outcome) => {
                filter.outcome = Some(Outcome::parse(outcome).ok_or_else(|| {
                    invalid("outcome", format!("{outcome:?}: use ok, refused or failed"))
                })?);
            }
            ("after", after) => {
                filter.after = Some(Uuid::parse_str(after).map_err(|_| {
                    invalid(
                        "after",
                        "pass an event's id (a page's last, or next)".into(),
                    )
                })?);
            }
            ("order", "asc") => filter.newest_first = false,
            ("order", "desc") => filter.newest_first = true,
            ("order", other) => {
                return Err(invalid("order", format!("{other:?}: use asc or desc")));
            }
            ("format", "json") => document = true,
            ("format", "jsonl") => document = false,
            ("format", other) => {
                return Err(invalid("format", format!("{other:?}: use jsonl or json")));
            }
            ("limit", limit) => {
                filter.limit = limit
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE).contains(n))
                    .ok_or_else(|| invalid("limit", format!("a number from 1 to {MAX_PAGE}")))?;
            }
            (other, _) => {
                return Err(ApiError::BadRequest(format!(
                    "unknown query parameter {other:?}: use since, until, actor, action, \
                     outcome, after, order, format, limit"
                )));
            }
        }
    }
    Ok((state.store.audit_events(&filter).await?, document))
}
