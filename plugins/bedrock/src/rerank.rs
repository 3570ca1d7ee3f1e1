//! Rerank through InvokeModel (`invoke`: `POST {base_url}/model/{modelId}/invoke`), the query
//! and the documents in the rerank model's own body:
//!
//! | model | body | answer |
//! |---|---|---|
//! | Cohere Rerank 3.5 (`cohere.rerank-v3-5:0`) | `{"query", "documents", "top_n", "api_version": 2}` | `{"id", "results": [{"index", "relevance_score"}]}` |
//! | Amazon Rerank 1.0 (`amazon.rerank-v1:0`) | `{"query", "documents", "top_n"}` | `{"results": [{"index", "relevance_score"}]}` |
//!
//! - `api_version` 2: Bedrock refuses a Cohere Rerank 3.5 call without it ("#/api_version: 1
//!   is not greater or equal to 2").
//! - AWS's user guide documents no InvokeModel body for Amazon Rerank: `query` and `documents`
//!   are what the InvokeModel examples that use it send (OpenSearch's connector among them),
//!   and `top_n` is Cohere's, as other InvokeModel clients send it to both.
//! - `top_n` is sent only when the caller set one (the gateway has brought it down to the
//!   number of documents); without it every document comes back. The results are read in the
//!   model's order, as given: the gateway checks every provider's results against the
//!   documents, sorts them and cuts them to `top_n` (host/src/flow/whole.rs).
//! - The caller's other params join the body as they are (`max_tokens_per_doc`, ...), never in
//!   place of the keys above; `user` (the gateway's, for attribution) and nulls are left out.
//!   Bedrock refuses what the model does not take, a 400 with its message.
//! - An answer that is not this JSON, or whose index does not fit the SDK's `u32`, is refused
//!   ([`ProviderError::Failed`]).
//! - Usage: Bedrock's rerank answers count no tokens (Cohere's own API's `meta.billed_units`
//!   is not among them), so usage is the `x-amzn-bedrock-input-token-count` header's count when
//!   Bedrock sends one, else none. Search units: the queries Bedrock bills ([`search_units`]).
//! - Errors: Bedrock's, mapped as for every call (`errors`).
//!
//! The model is named as for embeddings: a model id, an inference profile id or an ARN, its
//! family told by the name it contains.
//!
//! Not Bedrock's `Rerank` operation: that one belongs to Agents for Amazon Bedrock (`POST
//! /rerank` on `bedrock-agent-runtime.REGION.amazonaws.com`), another host than the route's
//! Bedrock Runtime `base_url`, which is the only one the gateway lets the plugin reach.

use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{
    ProviderError, RerankRequest, RerankResult, Reranking, Usage, params_object_except,
};
use serde_json::{Value, json};

use crate::invoke::{Invoke, input_tokens, parse};
use crate::sigv4::AmzDate;
use crate::wire::RerankAnswer;

/// Body keys the plugin writes; a caller's param never replaces them.
const OWNED_KEYS: &[&str] = &["query", "documents", "top_n", "api_version"];

/// Params the gateway reads for itself and no rerank model takes.
const DROPPED: &[&str] = &["user"];

/// Cohere Rerank 3.5's API version on Bedrock, the lowest it takes.
const COHERE_API_VERSION: u32 = 2;

/// The most documents one billed query covers ([`search_units`]).
const DOCUMENTS_PER_QUERY: usize = 100;

/// Which rerank API a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Cohere,
    Amazon,
}

impl Family {
    pub fn of(model: &str) -> Result<Family, ProviderError> {
        if model.contains("cohere.rerank") {
            Ok(Family::Cohere)
        } else if model.contains("amazon.rerank") {
            Ok(Family::Amazon)
        } else {
            Err(ProviderError::InvalidRequest(format!(
                "bedrock reranks with Cohere Rerank (cohere.rerank-v3-5:0) and Amazon Rerank \
                 (amazon.rerank-v1:0) models, not {model}"
            )))
        }
    }
}

/// The InvokeModel body that reranks `request`'s documents.
fn body(request: &RerankRequest) -> Result<Value, ProviderError> {
    let family = Family::of(&request.model)?;
    let mut body = params_object_except(&request.params, OWNED_KEYS)?;
    body.retain(|name, value| !value.is_null() && !DROPPED.contains(&name.as_str()));
    body.insert("query".into(), json!(request.query));
    body.insert("documents".into(), json!(request.documents));
    if let Some(top_n) = request.top_n {
        body.insert("top_n".into(), json!(top_n));
    }
    if family == Family::Cohere {
        body.insert("api_version".into(), json!(COHERE_API_VERSION));
    }
    Ok(Value::Object(body))
}

/// The signed InvokeModel call for `request`, at `date`.
pub fn upstream_request(request: &RerankRequest, date: &AmzDate) -> Result<Request, ProviderError> {
    let invoke = Invoke::new(&request.route, &request.model)?;
    invoke.request(&body(request)?, date)
}

/// Reranks `request`'s documents with one InvokeModel call.
pub fn rerank(request: RerankRequest) -> Result<Reranking, ProviderError> {
    let response = crate::send(upstream_request(&request, &AmzDate::now())?)?;
    read(response, &request)
}

/// The reranking a successful `response` gives for `request`.
pub fn read(response: Response, request: &RerankRequest) -> Result<Reranking, ProviderError> {
    let tokens = input_tokens(&response);
    let answer: RerankAnswer = parse(&response.bytes()?)?;
    let results = (answer.results.into_iter())
        .map(|result| {
            let index = u32::try_from(result.index).map_err(|_| {
                ProviderError::malformed(format!("a result for document {}", result.index))
            })?;
            Ok(RerankResult {
                index,
                relevance_score: result.relevance_score,
            })
        })
        .collect::<Result<_, ProviderError>>()?;
    Ok(Reranking {
        model: request.model.clone(),
        results,
        usage: tokens.map(|tokens| Usage::new(tokens, 0)),
        search_units: Some(search_units(request.documents.len())),
    })
}

/// The queries Bedrock bills for one call ranking `documents` documents.
///
/// AWS prices Cohere Rerank 3.5 and Amazon Rerank 1.0 "per 1,000 queries"
/// (aws.amazon.com/bedrock/pricing), and its user guide ("Pricing and search units",
/// docs.aws.amazon.com/bedrock/latest/userguide/rerank-pricing.html) defines the query:
/// "Reranking is priced per query. A query is a single call to the reranker model that can
/// contain up to 100 document chunks. The SearchUnits metric in Amazon CloudWatch represents
/// the number of queries processed by the reranker model." A call of more documents is billed
/// as several queries (the pricing page: 350 documents are 4). The pricing page also has
/// Amazon Rerank split a document longer than 512 tokens (query included) into more chunks,
/// which only Bedrock's tokenizer tells: this count is the least Bedrock bills.
pub fn search_units(documents: usize) -> u32 {
    u32::try_from(documents.div_ceil(DOCUMENTS_PER_QUERY)).unwrap_or(u32::MAX)
}
