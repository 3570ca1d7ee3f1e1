//! Embeddings through Vertex AI's `predict` (Google's text embedding models): the request's
//! body and the reading of its answer. Pure, unit-tested natively.

use gateway_plugin_sdk::{Embeddings, ProviderError, Usage, params_object_except};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Instance fields (one per input) with the caller's names for them, Vertex's first.
const INSTANCE_ALIASES: &[&[&str]] = &[&["task_type", "taskType"], &["title"]];

/// `parameters` fields with the caller's names for them, Vertex's first.
const PARAMETER_ALIASES: &[&[&str]] = &[
    &[
        "outputDimensionality",
        "output_dimensionality",
        "dimensions",
    ],
    &["autoTruncate", "auto_truncate"],
];

/// Caller params with no Vertex field: OpenAI's `user` (Vertex has no end-user field) and
/// `encoding_format` (how the gateway writes the vectors to its caller, not the upstream's
/// business).
const DROPPED: &[&str] = &["model", "input", "user", "encoding_format"];

/// How many inputs one `predict` call takes for `model`: Gemini's embedding models take one
/// instance per request; the `text-embedding-*` and `text-multilingual-embedding-*` models up
/// to 250 (Vertex's limit).
pub fn batch_size(model: &str) -> usize {
    if model.trim().starts_with("gemini-embedding") {
        1
    } else {
        250
    }
}

/// The `predict` body for `inputs`: `{"instances": [{"content", "task_type"?, "title"?}],
/// "parameters": {...}}`. Params Vertex has a field for go under its name (`dimensions` is
/// `outputDimensionality`); any other is passed in `parameters` as it is (a field the plugin
/// does not know yet).
pub fn predict_body(inputs: &[String], params: &str) -> Result<Value, ProviderError> {
    let mut params = params_object_except(params, DROPPED)?;
    params.retain(|_, value| !value.is_null());
    let shared = take_aliases(&mut params, INSTANCE_ALIASES);
    let mut parameters = take_aliases(&mut params, PARAMETER_ALIASES);
    parameters.extend(params);
    let instances: Vec<Value> = inputs
        .iter()
        .map(|input| {
            let mut instance = shared.clone();
            instance.insert("content".into(), json!(input));
            Value::Object(instance)
        })
        .collect();
    let mut body = json!({ "instances": instances });
    if !parameters.is_empty() {
        body["parameters"] = Value::Object(parameters);
    }
    Ok(body)
}

/// Each alias group's first name found in `params` (taken out of them), under the group's
/// first name.
fn take_aliases(params: &mut Map<String, Value>, table: &[&[&str]]) -> Map<String, Value> {
    let mut taken = Map::new();
    for aliases in table {
        let mut found = None;
        for alias in *aliases {
            if let Some(value) = params.remove(*alias) {
                found.get_or_insert(value);
            }
        }
        if let Some(value) = found {
            taken.insert(aliases[0].to_owned(), value);
        }
    }
    taken
}

#[derive(Deserialize)]
struct PredictAnswer {
    #[serde(default)]
    predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
struct Prediction {
    embeddings: Embedding,
}

#[derive(Deserialize)]
struct Embedding {
    values: Vec<f32>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[derive(Deserialize)]
struct Statistics {
    #[serde(default)]
    token_count: Option<f64>,
}

/// Adds one `predict` answer for `inputs` inputs to `embeddings`: its vectors in order, and
/// its inputs' token counts (`statistics.token_count`) to the prompt tokens.
pub fn read_predictions(
    body: &[u8],
    inputs: usize,
    embeddings: &mut Embeddings,
) -> Result<(), ProviderError> {
    let answer: PredictAnswer = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    if answer.predictions.len() != inputs {
        return Err(ProviderError::malformed(format!(
            "{} predictions for {inputs} inputs",
            answer.predictions.len()
        )));
    }
    let mut tokens = 0u32;
    let mut counted = false;
    for prediction in answer.predictions {
        if let Some(count) = prediction.embeddings.statistics.and_then(|s| s.token_count) {
            counted = true;
            // Counts are whole numbers Vertex writes as floats (`7.0`).
            tokens = tokens.saturating_add(count.max(0.0) as u32);
        }
        embeddings.vectors.push(prediction.embeddings.values);
    }
    if counted {
        let usage = embeddings.usage.get_or_insert_with(|| Usage::new(0, 0));
        usage.prompt_tokens = usage.prompt_tokens.saturating_add(tokens);
        usage.total_tokens = usage.total_tokens.saturating_add(tokens);
    }
    Ok(())
}
