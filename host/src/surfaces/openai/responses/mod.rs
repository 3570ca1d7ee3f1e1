//! OpenAI's Responses API: `POST /v1/responses` over every route, and the kept
//! responses (`store`, the default) that `previous_response_id` continues and
//! `GET`/`DELETE /v1/responses/{id}` read and delete ([`get`], [`delete`]),
//! for the key's project only, and within its scope.
//!
//! A request is read into the same chat request the other surfaces make
//! (`instructions` as the system message, items as messages, function tools),
//! so every plugin serves it; the answer is written as a `response` object or
//! its typed events. Hosted tools (web search, file search, code interpreter...)
//! are OpenAI's own and are refused naming them.

mod answer;
mod request;

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::request::Body;
use super::response::error_body;
use crate::config::Config;
use crate::error::ApiError;
use crate::flow::{Ask, Envelope, Head, Kind, Parent, Prompted, Surface, Target};
use crate::plugins::types;
use crate::state::AppState;
use crate::store::KeyRecord;
use answer::{ResponseAnswer, ToKeep};
use request::ResponsesFields;

/// `POST /v1/responses`: a chat completion, whole or streamed, kept unless `store` is false.
pub struct Responses {
    body: Body<ResponsesFields>,
    /// The items of the response `previous_response_id` names and of those it continues,
    /// as they kept them.
    earlier: Vec<Value>,
    /// What `previous_response_id` names, with the bytes its conversation was read from.
    parent: Option<Parent>,
}

impl Responses {
    /// The prompt (the kept conversation's turns first), tools and reasoning, in the order of
    /// the errors a caller gets; and, when the response is to be kept (`store`), this turn's
    /// input as it came.
    fn prompted(&mut self, max_part_bytes: usize) -> Result<(Prompted, Option<ToKeep>), ApiError> {
        let input = self.body.fields.input.take().unwrap_or(Value::Null);
        let earlier = self.earlier.len();
        let mut items = std::mem::take(&mut self.earlier);
        items.extend(request::input_items(input));
        let fields = &self.body.fields;
        let prompt = request::prompt(
            fields.instructions.as_deref(),
            &items,
            earlier,
            max_part_bytes,
        )?;
        // Kept, this request's items are stored as they came (the earlier ones are their
        // responses'); else they go now (their media is decoded).
        let keep = self.store().then(|| ToKeep {
            input: items.split_off(earlier),
            parent: self.parent.take(),
        });
        let fields = &self.body.fields;
        let prompted = Prompted {
            prompt,
            functions: request::functions(fields)?,
            function_choice: request::function_choice(fields)?,
            reasoning: request::reasoning(fields)?,
        };
        Ok((prompted, keep))
    }

    fn store(&self) -> bool {
        self.body.fields.store.unwrap_or(true)
    }

    /// What the response object repeats of the request, as OpenAI's does.
    fn echo(&self) -> Map<String, Value> {
        let fields = &self.body.fields;
        let params = &self.body.params;
        let param = |name: &str| params.get(name).cloned().unwrap_or(Value::Null);
        let reasoning = fields.reasoning.clone().unwrap_or_default();
        let format = (fields.text.as_ref().and_then(|t| t.format.clone()))
            .filter(|f| !f.is_null())
            .unwrap_or_else(|| json!({"type": "text"}));
        let mut echo = Map::new();
        echo.insert("instructions".into(), json!(fields.instructions));
        echo.insert(
            "max_output_tokens".into(),
            fields.max_output_tokens.clone().unwrap_or(Value::Null),
        );
        echo.insert(
            "metadata".into(),
            (fields.metadata.clone())
                .filter(|m| !m.is_null())
                .unwrap_or_else(|| json!({})),
        );
        echo.insert(
            "parallel_tool_calls".into(),
            params
                .get("parallel_tool_calls")
                .filter(|p| p.is_boolean())
                .cloned()
                .unwrap_or(Value::Bool(true)),
        );
        echo.insert(
            "previous_response_id".into(),
            json!(fields.previous_response_id),
        );
        echo.insert(
            "reasoning".into(),
            json!({"effort": reasoning.effort,
                "summary": reasoning.summary.or(reasoning.generate_summary)}),
        );
        echo.insert("store".into(), json!(self.store()));
        echo.insert("temperature".into(), param("temperature"));
        echo.insert("text".into(), json!({"format": format}));
        echo.insert(
            "tool_choice".into(),
            (fields.tool_choice.clone())
                .filter(|c| !c.is_null())
                .unwrap_or_else(|| json!("auto")),
        );
        echo.insert(
            "tools".into(),
            Value::Array(fields.tools.clone().unwrap_or_default()),
        );
        echo.insert("top_p".into(), param("top_p"));
        echo.insert(
            "truncation".into(),
            json!(fields.truncation.as_deref().unwrap_or("disabled")),
        );
        echo.insert("user".into(), param("user"));
        echo
    }
}

impl Surface for Responses {
    const NAME: &'static str = "openai";
    type Completion = ResponseAnswer;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<ResponsesFields> = super::request::parse_body(body)?;
        request::check(&body.fields, &body.params)?;
        Ok(Responses {
            body,
            earlier: Vec::new(),
            parent: None,
        })
    }
    fn user_id(&self) -> Option<&str> {
        let user = super::request::user(&self.body.params).ok().flatten();
        user.or(self.body.fields.safety_identifier.as_deref())
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        let mut target = super::target(config, &self.body.fields.model, Kind::Chat, &Map::new())?;
        target.params = request::params(&self.body.fields, &self.body.params)?;
        Ok(target)
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        super::serves(kind, Kind::Chat, "/v1/responses")
    }
    fn stream(&self) -> bool {
        self.body.fields.stream.unwrap_or(false)
    }
    fn previous(&self) -> Option<&str> {
        self.body.fields.previous_response_id.as_deref()
    }
    fn continue_from(&mut self, turns: Vec<String>) -> Result<(), ApiError> {
        let Some(id) = self.body.fields.previous_response_id.clone() else {
            return Ok(());
        };
        let mut bytes = 0;
        for turn in turns {
            bytes += turn.len() as u64;
            let items: Vec<Value> = serde_json::from_str(&turn).map_err(|e| {
                ApiError::Internal(format!(
                    "the conversation of the kept response {id} does not read: {e}"
                ))
            })?;
            self.earlier.extend(items);
        }
        self.parent = Some(Parent {
            id,
            conversation_bytes: bytes,
        });
        Ok(())
    }
    fn ask(
        mut self,
        _: Kind,
        config: &Config,
    ) -> Result<Ask<ResponseAnswer, Infallible>, ApiError> {
        let echo = self.echo();
        let (prompted, keep) = self.prompted(config.max_part_bytes.get())?;
        Ok(Ask::Complete {
            prompted,
            codec: ResponseAnswer::new(echo, keep),
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        error_body(error, invocation_id)
    }
}

/// `POST /v1/responses/input_tokens`: how many tokens a response's input would take (its
/// `previous_response_id`'s conversation included), as `{"object": "response.input_tokens",
/// "input_tokens": N}` (with `"estimated": true` where the number is an estimate).
pub struct InputTokens(Responses);

impl Surface for InputTokens {
    const NAME: &'static str = "openai";
    type Completion = Infallible;
    type Embeddings = Infallible;

    fn project_key(head: &Head) -> Result<&str, ApiError> {
        crate::auth::api_key(&head.headers)
    }
    fn parse(head: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let mut responses = Responses::parse(head, body)?;
        let fields = &mut responses.body.fields;
        // Nothing is answered to keep or to stream.
        (fields.store, fields.stream) = (Some(false), None);
        Ok(InputTokens(responses))
    }
    fn user_id(&self) -> Option<&str> {
        self.0.user_id()
    }
    fn check_project(&self, _: &str) -> Result<(), ApiError> {
        Ok(())
    }
    fn target(&self, config: &Config) -> Result<Target, ApiError> {
        let target = self.0.target(config)?;
        Ok(Target {
            kind: Kind::CountTokens,
            ..target
        })
    }
    fn serves(kind: Kind) -> Result<(), ApiError> {
        super::serves(kind, Kind::CountTokens, "/v1/responses/input_tokens")
    }
    fn stream(&self) -> bool {
        false
    }
    fn previous(&self) -> Option<&str> {
        self.0.previous()
    }
    fn continue_from(&mut self, turns: Vec<String>) -> Result<(), ApiError> {
        self.0.continue_from(turns)
    }
    /// The response's prompt, counted: no echo to write, nothing kept (`parse` set `store`
    /// false).
    fn ask(mut self, _: Kind, config: &Config) -> Result<Ask<Infallible, Infallible>, ApiError> {
        let (prompted, _) = self.0.prompted(config.max_part_bytes.get())?;
        Ok(Ask::Count {
            prompted,
            codec: input_tokens,
        })
    }
    fn error_body(error: &ApiError, invocation_id: &Uuid) -> serde_json::Value {
        error_body(error, invocation_id)
    }
}

/// OpenAI's answer to `input_tokens`, an estimate marked as one.
fn input_tokens(_: &Envelope<'_>, count: types::TokenCount) -> String {
    let answer = json!({"object": "response.input_tokens", "input_tokens": count.input_tokens});
    crate::surfaces::json::count_answer(answer, count)
}

/// The caller's key.
async fn caller(state: &AppState, request: &Request<Incoming>) -> Result<KeyRecord, ApiError> {
    let key = crate::auth::api_key(request.headers())?;
    crate::auth::key_record(&state.store, key).await
}

/// What a key is told of a kept response of another project, or of a route or model outside
/// its scope (made by another of its project's keys): that there is none. A 403 would tell
/// a key limited to one route which ids exist on the others.
fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("response with id {id:?} not found"))
}

/// `GET /v1/responses/{id}`: a kept response, as its caller got it.
pub async fn get(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &str,
    request_id: Uuid,
) -> Response<crate::http::Body> {
    let result = async {
        let key = caller(&state, &request).await?;
        let kept = state.store.response(&key.project_id, id).await?;
        kept.filter(|kept| key.scope.allows_origin(&kept.origin))
            .map(|kept| kept.body)
            .ok_or_else(|| not_found(id))
    }
    .await;
    match result {
        Ok(body) => {
            crate::http::json_text_response(StatusCode::OK, bytes::Bytes::from(body), &request_id)
        }
        Err(error) => super::error_response(&error, &request_id),
    }
}

/// `DELETE /v1/responses/{id}`: forgets a kept response (its invocation record stays).
pub async fn delete(
    state: Arc<AppState>,
    request: Request<Incoming>,
    id: &str,
    request_id: Uuid,
) -> Response<crate::http::Body> {
    let result = async {
        let key = caller(&state, &request).await?;
        let head = state.store.response_head(&key.project_id, id).await?;
        if !head.is_some_and(|head| key.scope.allows_origin(&head.origin)) {
            return Err(not_found(id));
        }
        match state.store.delete_response(&key.project_id, id).await? {
            true => Ok(()),
            false => Err(not_found(id)),
        }
    }
    .await;
    match result {
        Ok(()) => crate::http::json_response(
            StatusCode::OK,
            &json!({"id": id, "object": "response", "deleted": true}),
            &request_id,
        ),
        Err(error) => super::error_response(&error, &request_id),
    }
}
