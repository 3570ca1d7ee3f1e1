//! The Responses API's answers kept for later requests (`store: true`), each with its turn of
//! the conversation and the route and model that made it.

use uuid::Uuid;

/// A Responses API answer kept for later requests (`store: true`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// `resp_` and 32 hex digits.
    pub id: String,
    pub project_id: String,
    /// The invocation that answered it.
    pub invocation_id: Uuid,
    /// Unix ms, as an invocation's `created_at_ms`.
    pub created_at_ms: i64,
    /// The response object as the caller got it (JSON text), for `GET /v1/responses/{id}`.
    pub body: String,
    /// This turn of the conversation a `previous_response_id` continues: the request's own
    /// input items followed by the output items, as a JSON array text. The turns before it
    /// are its `parent`'s (and theirs), each kept once however many turns continue it.
    pub context: String,
    /// The kept response this one continued (its `previous_response_id`), if any.
    pub parent: Option<String>,
    /// The bytes of the whole conversation up to and with this turn: its `context` and its
    /// parents'. What a continuation would load, told before loading it.
    pub conversation_bytes: u64,
    /// What it was made with, which a key's scope is held to.
    pub origin: Origin,
}

/// The most turns a conversation is read back through: the parents of a response are older
/// ones, so they end; this only bounds a walk through rows written by hand.
pub const CONVERSATION_TURNS: i32 = 1_000_000;

/// What a continuation checks of the kept response it names before loading its conversation
/// ([`Store::response_head`](super::Store::response_head)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    pub origin: Origin,
    /// [`StoredResponse::conversation_bytes`].
    pub conversation_bytes: u64,
}

/// A kept response's conversation, read from its turn back through its parents
/// ([`Store::conversation`](super::Store::conversation)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversation {
    /// Every turn's items (a JSON array text each), the first turn first.
    Whole(Vec<String>),
    /// A response it continues was deleted (by `DELETE /v1/responses/{id}` or retention):
    /// the turns before it are gone, so the conversation cannot be continued.
    Broken {
        /// The id of the deleted response.
        deleted: String,
    },
}

/// The route and model that served a kept response (its record's `route` and `model`): a key
/// limited to some routes or models reads, deletes and continues only the kept responses it
/// could have made. `None` for one kept before they were stored whose record was gone when
/// the schema gained them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub route: Option<String>,
    pub model: Option<String>,
}
