//! Embeddings through InvokeModel (`POST /model/{modelId}/invoke`), whose body is the model's
//! own:
//!
//! - Titan Text Embeddings (`amazon.titan-embed-text-*`) embeds one text per call:
//!   `{"inputText": ...}` (with the caller's `dimensions` and `normalize`), answered with
//!   `embedding` and `inputTextTokenCount`. N inputs are N calls, within the route's
//!   `max_http_requests` (32 unless the route raises it).
//! - Cohere Embed (`cohere.embed-*`) embeds up to 96 texts per call: `{"texts": [...],
//!   "input_type": "search_document"}` (the caller's `input_type`, `truncate` and
//!   `embedding_types` win), answered with `embeddings` (a list of vectors, or of `float`
//!   vectors by type); its token count is the answer's `x-amzn-bedrock-input-token-count`.
//!
//! Inference profile ids (`us.cohere.embed-v4:0`) name the same models.

use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{EmbeddingRequest, Embeddings, ProviderError, Usage, params_object};
use serde_json::{Map, Value, json};

use crate::invoke::{Invoke, input_tokens, parse};
use crate::wire::{CohereEmbeddings, CohereVectors, TitanEmbedding};

/// Cohere Embed's most texts per call.
pub const COHERE_BATCH: usize = 96;

/// Which embedding API a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Titan,
    Cohere,
}

impl Family {
    pub fn of(model: &str) -> Result<Family, ProviderError> {
        if model.contains("amazon.titan-embed") {
            Ok(Family::Titan)
        } else if model.contains("cohere.embed") {
            Ok(Family::Cohere)
        } else {
            Err(ProviderError::InvalidRequest(format!(
                "bedrock embeds with Titan Text Embeddings (amazon.titan-embed-text-*) and \
                 Cohere Embed (cohere.embed-*) models, not {model}"
            )))
        }
    }
}

/// The bodies of the calls that embed `request`'s inputs, in order.
pub fn bodies(request: &EmbeddingRequest) -> Result<(Family, Vec<Value>), ProviderError> {
    let family = Family::of(&request.model)?;
    let params = params_object(&request.params)?;
    let bodies = match family {
        Family::Titan => {
            let mut base = Map::new();
            for (name, value) in &params {
                match name.as_str() {
                    "dimensions" | "normalize" | "embeddingTypes" => {
                        base.insert(name.clone(), value.clone());
                    }
                    // OpenAI's `encoding_format` (float is what Titan answers), `user`.
                    _ => {}
                }
            }
            (request.input.iter())
                .map(|text| {
                    let mut body = base.clone();
                    body.insert("inputText".into(), json!(text));
                    Value::Object(body)
                })
                .collect()
        }
        Family::Cohere => {
            let mut base = Map::new();
            base.insert("input_type".into(), json!("search_document"));
            for (name, value) in &params {
                match name.as_str() {
                    "input_type" | "truncate" | "embedding_types" | "output_dimension" => {
                        base.insert(name.clone(), value.clone());
                    }
                    _ => {}
                }
            }
            (request.input.chunks(COHERE_BATCH))
                .map(|texts| {
                    let mut body = base.clone();
                    body.insert("texts".into(), json!(texts));
                    Value::Object(body)
                })
                .collect()
        }
    };
    Ok((family, bodies))
}

/// Embeds `request`'s inputs, one InvokeModel call per body.
pub fn embed(request: EmbeddingRequest) -> Result<Embeddings, ProviderError> {
    let invoke = Invoke::new(&request.route, &request.model)?;
    let (family, bodies) = bodies(&request)?;
    let mut vectors: Vec<Vec<f32>> = Vec::with_capacity(request.input.len());
    let mut prompt_tokens: Option<u32> = None;
    for body in &bodies {
        let (mut got, tokens) = read(family, invoke.send(body)?)?;
        vectors.append(&mut got);
        if let Some(tokens) = tokens {
            prompt_tokens = Some(prompt_tokens.unwrap_or(0).saturating_add(tokens));
        }
    }
    if vectors.len() != request.input.len() {
        return Err(ProviderError::malformed(format!(
            "{} embeddings for {} inputs",
            vectors.len(),
            request.input.len()
        )));
    }
    Ok(Embeddings {
        model: request.model,
        vectors,
        usage: prompt_tokens.map(|tokens| Usage::new(tokens, 0)),
    })
}

/// The vectors of one answer, and its input token count when it tells one.
pub fn read(
    family: Family,
    response: Response,
) -> Result<(Vec<Vec<f32>>, Option<u32>), ProviderError> {
    let header_tokens = input_tokens(&response);
    let body = response.bytes()?;
    match family {
        Family::Titan => {
            let answer: TitanEmbedding = parse(&body)?;
            let vector = answer
                .embedding
                .ok_or_else(|| ProviderError::malformed("a Titan answer without embedding"))?;
            Ok((
                vec![vector],
                answer.input_text_token_count.or(header_tokens),
            ))
        }
        Family::Cohere => {
            let answer: CohereEmbeddings = parse(&body)?;
            let vectors = match answer.embeddings {
                Some(CohereVectors::Floats(vectors)) => vectors,
                Some(CohereVectors::ByType {
                    float: Some(vectors),
                }) => vectors,
                _ => {
                    return Err(ProviderError::malformed(
                        "a Cohere answer without float embeddings",
                    ));
                }
            };
            Ok((vectors, header_tokens))
        }
    }
}
