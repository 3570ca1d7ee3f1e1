//! `POST /v1/rerank`: the rerank API as Cohere defined it and the rerank servers copied it
//! (Jina, vLLM, Infinity, LocalAI), beside OpenAI's endpoints because its clients set one base
//! URL and one key for both. Also at `/v2/rerank`, where Cohere's v2 client sends it.
//!
//! The body: `model` (`ROUTE/MODEL`, a route or an alias), `query`, `documents` (strings, or
//! objects with a `text`, as Jina's and Cohere's v1 take them), `top_n`, `return_documents`
//! (false unless asked, as Cohere's default); every other field (`max_tokens_per_doc`, ...)
//! goes to the plugin as a parameter. The answer has Cohere's fields and Jina's together,
//! so that either client reads it: `id`, `model`, `results` (`index`, `relevance_score`, and
//! `document.text` when asked), `usage.total_tokens` when the provider counted tokens, and
//! `meta.billed_units.search_units` when it billed search units.

use std::convert::Infallible;

use serde::de::MapAccess;
use serde_json::{Map, Value, json};

use super::Endpoint;
use super::request::{self, Body, Fields, read};
use crate::error::ApiError;
use crate::flow::{Ask, Envelope, Head, Kind, Ranked, Rerank as Asked};

/// `POST /v1/rerank` (and `/v2/rerank`).
pub struct Rerank(Body<RerankFields>);

/// The fields the surface reads itself.
#[derive(Debug, Default)]
pub struct RerankFields {
    model: Option<String>,
    query: Option<String>,
    documents: Option<Vec<Value>>,
    top_n: Option<u32>,
    return_documents: Option<bool>,
}

impl Fields for RerankFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "query" => read(map, &mut self.query),
            "documents" => read(map, &mut self.documents),
            "top_n" => read(map, &mut self.top_n),
            "return_documents" => read(map, &mut self.return_documents),
            _ => Ok(false),
        }
    }
}

impl RerankFields {
    /// What must hold before routing: a model, a query that says something, documents to
    /// order, and a `top_n` that asks for some.
    fn check(&self) -> Result<(), ApiError> {
        request::require_model(&self.model)?;
        match self.query.as_deref() {
            None => return Err(ApiError::invalid("query", "query is required")),
            Some(query) if query.trim().is_empty() => {
                return Err(ApiError::invalid("query", "query must not be empty"));
            }
            Some(_) => {}
        }
        match &self.documents {
            None => return Err(ApiError::invalid("documents", "documents is required")),
            Some(documents) if documents.is_empty() => {
                return Err(ApiError::invalid(
                    "documents",
                    "documents must not be an empty list",
                ));
            }
            Some(_) => {}
        }
        if self.top_n == Some(0) {
            return Err(ApiError::invalid("top_n", "top_n must be at least 1"));
        }
        Ok(())
    }

    /// The documents' texts, moved out of the body: a string, or an object with a `text`
    /// string (any other keys of it, such as a title, are not ranked and not kept).
    fn texts(&mut self) -> Result<Vec<String>, ApiError> {
        let documents = self.documents.take().unwrap_or_default();
        documents
            .into_iter()
            .enumerate()
            .map(|(i, document)| match document {
                Value::String(text) => Ok(text),
                Value::Object(mut fields) => match fields.remove("text") {
                    Some(Value::String(text)) => Ok(text),
                    _ => Err(ApiError::invalid(
                        format!("documents[{i}]"),
                        "a document object must have a text string (images and other fields \
                         are not ranked)",
                    )),
                },
                _ => Err(ApiError::invalid(
                    format!("documents[{i}]"),
                    "a document must be a string or an object with a text string",
                )),
            })
            .collect()
    }
}

impl Endpoint for Rerank {
    const KIND: Kind = Kind::Rerank;
    const PATH: &'static str = "/v1/rerank";

    fn read(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<RerankFields> = request::parse_body(body)?;
        body.fields.check()?;
        request::user(&body.params)?;
        Ok(Rerank(body))
    }
    fn model_and_params(&self) -> (&Option<String>, &Map<String, Value>) {
        (&self.0.fields.model, &self.0.params)
    }
    fn user(&self) -> Option<&str> {
        request::user(&self.0.params).ok().flatten()
    }
    fn asks(mut self) -> Result<Ask<Infallible, Infallible>, ApiError> {
        let documents = self.0.fields.texts()?;
        // More than there are documents asks for all of them, as Cohere reads it.
        let top_n = (self.0.fields.top_n)
            .map(|n| n.min(u32::try_from(documents.len()).unwrap_or(u32::MAX)));
        Ok(Ask::Rerank(Asked {
            query: self.0.fields.query.take().unwrap_or_default(),
            documents,
            top_n,
            return_documents: self.0.fields.return_documents.unwrap_or(false),
            codec: answer,
        }))
    }
}

/// The answer, in Cohere's fields and Jina's together.
fn answer(envelope: &Envelope<'_>, ranked: &Ranked<'_>) -> String {
    let results: Vec<Value> = (ranked.results.iter())
        .map(|result| {
            let mut item = json!({
                "index": result.index,
                "relevance_score": result.relevance_score,
            });
            let text = ranked
                .documents
                .and_then(|documents| documents.get(result.index as usize));
            if let Some(text) = text {
                item["document"] = json!({ "text": text });
            }
            item
        })
        .collect();
    let mut answer = Map::new();
    answer.insert("id".into(), json!(envelope.invocation_id));
    answer.insert("model".into(), json!(envelope.model));
    answer.insert("results".into(), Value::Array(results));
    if let Some(metered) = &ranked.usage {
        answer.insert(
            "usage".into(),
            json!({"total_tokens": metered.usage.total_tokens}),
        );
    }
    let mut meta = json!({"api_version": {"version": "2"}});
    if let Some(units) = ranked.search_units {
        meta["billed_units"] = json!({ "search_units": units });
    }
    answer.insert("meta".into(), meta);
    Value::Object(answer).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::flow::Surface;
    use crate::plugins::types;

    fn parsed(body: &str) -> Result<Rerank, ApiError> {
        let head = hyper::Request::new(()).into_parts().0;
        Rerank::parse(&head, body.as_bytes())
    }

    fn refusal(body: &str) -> (String, String) {
        let error = match parsed(body).and_then(|r| r.ask(Kind::Rerank, &Config::default())) {
            Ok(_) => panic!("{body} was taken"),
            Err(error) => error,
        };
        let ApiError::InvalidParam { param, message } = error else {
            panic!("{body}: {error:?}");
        };
        (param, message)
    }

    #[test]
    fn documents_are_strings_or_objects_with_a_text() {
        let body = r#"{"model": "r/m", "query": "q", "documents": ["a", {"text": "b", "title": "t"}],
            "top_n": 9, "return_documents": true, "max_tokens_per_doc": 512}"#;
        let rerank = parsed(body).unwrap();
        assert_eq!(rerank.0.params.get("max_tokens_per_doc"), Some(&json!(512)));
        let Ok(Ask::Rerank(asked)) = rerank.ask(Kind::Rerank, &Config::default()) else {
            panic!("not a rerank");
        };
        assert_eq!(asked.query, "q");
        assert_eq!(asked.documents, ["a", "b"]);
        assert_eq!(asked.top_n, Some(2), "more than the documents asks for all");
        assert!(asked.return_documents);
    }

    #[test]
    fn a_body_without_what_a_rerank_needs_is_refused_naming_the_field() {
        for (body, param) in [
            (r#"{"query": "q", "documents": ["a"]}"#, "model"),
            (r#"{"model": "r/m", "documents": ["a"]}"#, "query"),
            (
                r#"{"model": "r/m", "query": " ", "documents": ["a"]}"#,
                "query",
            ),
            (r#"{"model": "r/m", "query": "q"}"#, "documents"),
            (
                r#"{"model": "r/m", "query": "q", "documents": []}"#,
                "documents",
            ),
            (
                r#"{"model": "r/m", "query": "q", "documents": [1]}"#,
                "documents[0]",
            ),
            (
                r#"{"model": "r/m", "query": "q", "documents": ["a", {"image": "u"}]}"#,
                "documents[1]",
            ),
            (
                r#"{"model": "r/m", "query": "q", "documents": ["a"], "top_n": 0}"#,
                "top_n",
            ),
        ] {
            assert_eq!(refusal(body).0, param, "{body}");
        }
        // A wrong type is the parser's refusal, naming the field too.
        let error = parsed(r#"{"model": "r/m", "query": "q", "documents": ["a"], "top_n": -1}"#)
            .err()
            .unwrap();
        assert!(error.to_string().contains("top_n"), "{error}");
    }

    #[test]
    fn the_answer_has_cohere_s_fields_and_jina_s() {
        let envelope = Envelope {
            invocation_id: "id-1",
            project_id: "p",
            kind: Kind::Rerank,
            model: "m",
        };
        let results = [types::RerankResult {
            index: 1,
            relevance_score: 0.5,
        }];
        let usage = crate::store::TokenUsage {
            prompt_tokens: 7,
            total_tokens: 7,
            ..Default::default()
        };
        let documents = ["a".to_owned(), "b".to_owned()];
        let ranked = Ranked {
            results: &results,
            documents: Some(&documents),
            search_units: Some(1),
            usage: Some(crate::flow::Metered {
                usage: &usage,
                cost_usd: None,
            }),
        };
        let answer: Value = serde_json::from_str(&answer(&envelope, &ranked)).unwrap();
        assert_eq!(
            answer,
            json!({
                "id": "id-1",
                "model": "m",
                "results": [{"index": 1, "relevance_score": 0.5, "document": {"text": "b"}}],
                "usage": {"total_tokens": 7},
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
            })
        );
    }
}
