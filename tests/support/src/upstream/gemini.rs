//! Google's Gemini API as the fake serves it: `generateContent` and `streamGenerateContent`
//! from the script, except a Gemini image model's `generateContent` that asks for images
//! (`…/models/*-image*:generateContent` with `IMAGE` in `responseModalities`), answered with a
//! [`fake_png`] (see [`image_output`]); `batchEmbedContents` computed from the request; Imagen's
//! `predict` (`…/models/imagen-*:predict`) answered with [`fake_png`]s (see [`imagen`]). Both
//! image bodies are checked strictly, and the fake Vertex AI serves both too. Errors as
//! `{"error": {"code", "message", "status"}}`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::{Provider, ReceivedRequest, Reply, counted_tokens, fake_embedding, fake_png};
use crate::recording::Recording;

/// The content type Google answers JSON with.
const JSON: &str = "application/json; charset=UTF-8";

/// The Gemini API.
pub struct Gemini;

impl Provider for Gemini {
    const NAME: &'static str = "fake-gemini";

    fn is_generation(path: &str) -> bool {
        path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent")
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        let path = request.path_only();
        if path.ends_with(":countTokens") {
            return Some(count(request));
        }
        if is_imagen_predict(path) {
            return Some(imagen(request, false));
        }
        if is_image_generation(request) {
            return Some(image_output(request, false));
        }
        path.ends_with(":batchEmbedContents")
            .then(|| embeddings(request))
    }

    fn error(status: u16, message: &str) -> Reply {
        let status_name = if status == 404 {
            "NOT_FOUND"
        } else {
            "INTERNAL"
        };
        Reply::google_error(status, &format!("fake Gemini API: {message}"), status_name)
    }
}

/// The recording of a Gemini test case: `Google__gemini-2.5-flash__{case}`.
pub fn recording(case: &str) -> Recording {
    Recording::load(&format!("Google__gemini-2.5-flash__{case}"))
}

impl Reply {
    /// A whole JSON body (any text) with Google's content type.
    pub fn gemini_json(status: u16, body: &str) -> Reply {
        Reply::raw(status, JSON, body)
    }

    /// An error in Google's shape.
    pub fn google_error(status: u16, message: &str, status_name: &str) -> Reply {
        let body = json!({"error": {"code": status, "message": message, "status": status_name}});
        Reply::gemini_json(status, &body.to_string())
    }
}

/// `countTokens` of a `generateContentRequest` naming its model, counting [`counted_tokens`]
/// of its contents and function declarations.
fn count(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let generate = &body["generateContentRequest"];
    let named = generate["model"]
        .as_str()
        .is_some_and(|m| m.starts_with("models/"));
    let Some(contents) = generate["contents"].as_array().filter(|_| named) else {
        let message = "countTokens needs a generateContentRequest with its model and contents";
        return Reply::google_error(400, message, "INVALID_ARGUMENT");
    };
    let tools = generate["tools"].as_array().into_iter().flatten();
    let declarations = tools
        .filter_map(|tool| tool["functionDeclarations"].as_array())
        .map(Vec::len)
        .sum();
    let total = counted_tokens(contents.len(), declarations);
    Reply::gemini_json(200, &json!({"totalTokens": total}).to_string())
}

/// Answers `batchEmbedContents` with [`fake_embedding`] of each request's text, in order.
fn embeddings(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let vectors: Vec<Value> = body["requests"]
        .as_array()
        .map(|requests| {
            requests
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let text = r["content"]["parts"][0]["text"]
                        .as_str()
                        .unwrap_or_default();
                    json!({"values": fake_embedding(i, text)})
                })
                .collect()
        })
        .unwrap_or_default();
    Reply::gemini_json(200, &json!({"embeddings": vectors}).to_string())
}

/// The prompt Google's safety filters block every image of, in the fakes. Imagen's answer has no
/// image, only the reason (`raiFilteredReason`) when `includeRaiReason` asked for it, else it is
/// `{}`, as Imagen answers; a Gemini image model's has a candidate without content whose
/// `finishReason` is `IMAGE_SAFETY`, as Gemini answers.
pub const REFUSED_PROMPT: &str = "refuse me";

/// The output tokens the fake's Gemini image models bill an image at: Gemini 2.5 Flash Image's
/// 1290.
pub const IMAGE_TOKENS: u64 = 1290;

/// The reason the fakes give for [`REFUSED_PROMPT`]'s `count` images, worded as Imagen words it.
pub fn filtered_reason(count: u64) -> String {
    format!(
        "Your current safety filter threshold filtered out {count} generated images. You will \
         not be charged for blocked images. Try rephrasing the prompt. If you think this was an \
         error, send feedback. Support codes: 56562880"
    )
}

/// Whether `path` (without its query) is `predict` of an Imagen model (`…/models/imagen-*:predict`).
pub fn is_imagen_predict(path: &str) -> bool {
    path.strip_suffix(":predict")
        .and_then(|path| path.rsplit_once("/models/"))
        .is_some_and(|(_, model)| model.starts_with("imagen"))
}

/// Imagen's `predict`, on the Gemini API or (`vertex`) Vertex AI, which takes more parameters.
/// The body must be `{"instances": [{"prompt"}], "parameters": {...}}` (and Vertex AI's
/// `labels`) with only the parameters Imagen documents, each of its type and range; anything
/// else is Google's 400 naming it. The answer is `sampleCount` predictions
/// `{"bytesBase64Encoded", "mimeType"}` of [`fake_png`]s of the prompt and the image's number
/// (the bytes are that PNG whatever `outputOptions.mimeType` says, which the answer repeats),
/// after the prompt's safety attributes when `includeSafetyAttributes` asks for them. The
/// [`REFUSED_PROMPT`] gets no image.
pub fn imagen(request: &ReceivedRequest, vertex: bool) -> Reply {
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return invalid(&format!("Invalid JSON payload received. {e}")),
    };
    let (prompt, parameters) = match imagen_body(&body, vertex) {
        Ok((prompt, parameters)) => (prompt, Value::Object(parameters)),
        Err(message) => return invalid(&message),
    };
    let count = parameters["sampleCount"].as_u64().unwrap_or(4);
    let mut predictions = Vec::new();
    if parameters["includeSafetyAttributes"] == true {
        predictions.push(json!({"contentType": "Positive Prompt",
            "safetyAttributes": {"categories": ["Violence"], "scores": [0.1]}}));
    }
    if prompt == REFUSED_PROMPT {
        if parameters["includeRaiReason"] == true {
            predictions.push(json!({"raiFilteredReason": filtered_reason(count)}));
        }
    } else {
        let mime_type = parameters["outputOptions"]["mimeType"]
            .as_str()
            .unwrap_or("image/png");
        predictions.extend((0..count).map(|i| {
            let png = fake_png(&format!("{prompt}#{i}"));
            json!({"bytesBase64Encoded": STANDARD.encode(png), "mimeType": mime_type})
        }));
    }
    let answer = if predictions.is_empty() {
        json!({})
    } else {
        json!({ "predictions": predictions })
    };
    Reply::gemini_json(200, &answer.to_string())
}

/// Whether `request` asks a Gemini image model for images: `generateContent` of a model whose id
/// holds `-image`, with `IMAGE` in `generationConfig.responseModalities`. Any other
/// `generateContent` (a recording's, a script's) is the script's to answer.
pub fn is_image_generation(request: &ReceivedRequest) -> bool {
    let image_model = request
        .path_only()
        .strip_suffix(":generateContent")
        .and_then(|path| path.rsplit_once("/models/"))
        .is_some_and(|(_, model)| model.contains("-image"));
    let asks_images = || {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        body["generationConfig"]["responseModalities"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|modality| {
                modality
                    .as_str()
                    .is_some_and(|m| m.eq_ignore_ascii_case("IMAGE"))
            })
    };
    image_model && asks_images()
}

/// A Gemini image model's `generateContent`, on the Gemini API or (`vertex`) Vertex AI, which
/// takes more image settings. The body must be `{"contents": [{"role": "user", "parts":
/// [{"text"}]}], "generationConfig": {...}}` (and the request fields `generateContent` has:
/// `safetySettings`, ...; Vertex AI's `labels`), with only `generationConfig` fields Google
/// documents, `candidateCount` 1 (Google's "Multiple candidates is not enabled" else), modalities
/// `TEXT` and `IMAGE`, and in `imageConfig` a documented ratio and size tier (on Vertex AI also
/// `personGeneration` and `imageOutputOptions`); anything else is Google's 400 naming it. The
/// answer is one candidate with an `inlineData` part of [`fake_png`] of the prompt and `#0` (the
/// bytes are that PNG whatever `imageOutputOptions.mimeType` says, which the answer repeats), and
/// a `usageMetadata`: the prompt's words as prompt tokens, [`IMAGE_TOKENS`] as output. The
/// [`REFUSED_PROMPT`] gets a candidate without content, finished by `IMAGE_SAFETY`.
pub fn image_output(request: &ReceivedRequest, vertex: bool) -> Reply {
    let model = request
        .path_only()
        .strip_suffix(":generateContent")
        .and_then(|path| path.rsplit_once("/models/"))
        .map_or("", |(_, model)| model);
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return invalid(&format!("Invalid JSON payload received. {e}")),
    };
    let (prompt, config) = match image_output_body(&body, vertex) {
        Ok(checked) => checked,
        Err(message) => return invalid(&message),
    };
    if config["candidateCount"].as_u64().is_some_and(|n| n > 1) {
        return invalid(&format!(
            "Multiple candidates is not enabled for models/{model}"
        ));
    }
    let words = prompt.split_whitespace().count() as u64;
    let prompt_details = json!([{"modality": "TEXT", "tokenCount": words}]);
    let answer = if prompt == REFUSED_PROMPT {
        json!({
            "candidates": [{"finishReason": "IMAGE_SAFETY", "index": 0}],
            "usageMetadata": {"promptTokenCount": words, "totalTokenCount": words,
                              "promptTokensDetails": prompt_details},
            "modelVersion": model,
        })
    } else {
        let mime_type = config["imageConfig"]["imageOutputOptions"]["mimeType"]
            .as_str()
            .unwrap_or("image/png");
        let png = fake_png(&format!("{prompt}#0"));
        json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"inlineData": {"mimeType": mime_type, "data": STANDARD.encode(png)}}]},
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": {"promptTokenCount": words, "candidatesTokenCount": IMAGE_TOKENS,
                "totalTokenCount": words + IMAGE_TOKENS, "promptTokensDetails": prompt_details,
                "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": IMAGE_TOKENS}]},
            "modelVersion": model,
            "responseId": "fake-gemini-image",
        })
    };
    Reply::gemini_json(200, &answer.to_string())
}

/// The request fields of `generateContent` besides `contents` and `generationConfig`.
const GENERATE_FIELDS: [&str; 5] = [
    "safetySettings",
    "systemInstruction",
    "tools",
    "toolConfig",
    "cachedContent",
];

/// The fields of `generationConfig` Google documents.
const GENERATION_FIELDS: [&str; 19] = [
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "thinkingConfig",
    "imageConfig",
    "mediaResolution",
];

/// The prompt and the `generationConfig` of a Gemini image model's body, or Google's message for
/// what is wrong with it.
fn image_output_body(body: &Value, vertex: bool) -> Result<(String, Value), String> {
    let Some(fields) = body.as_object() else {
        return Err("Invalid JSON payload received. Expected an object.".into());
    };
    for (name, value) in fields {
        match name.as_str() {
            "contents" | "generationConfig" => {}
            name if GENERATE_FIELDS.contains(&name) => {}
            "labels" if vertex => {
                let strings = value
                    .as_object()
                    .is_some_and(|labels| labels.values().all(Value::is_string));
                if !strings {
                    return Err(invalid_value("labels", "map<string, string>", value));
                }
            }
            _ => return Err(unknown_name(name, "")),
        }
    }
    let content = match body["contents"].as_array().map(Vec::as_slice) {
        Some([content]) => content,
        _ => return Err("contents must hold exactly one content, the prompt".into()),
    };
    let Some(content) = content.as_object() else {
        return Err(invalid_value("contents[0]", "object", content));
    };
    if let Some(extra) = content.keys().find(|key| *key != "role" && *key != "parts") {
        return Err(unknown_name(extra, "contents[0]"));
    }
    if content.get("role").is_some_and(|role| role != "user") {
        return Err(invalid_value("contents[0].role", "user", &content["role"]));
    }
    let part = match content
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([part]) => part,
        _ => return Err("contents[0].parts must hold exactly one part, the prompt".into()),
    };
    if let Some(extra) = part
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key)
        .find(|key| *key != "text")
    {
        return Err(unknown_name(extra, "contents[0].parts[0]"));
    }
    let prompt = match part.get("text") {
        Some(Value::String(prompt)) if !prompt.trim().is_empty() => prompt.clone(),
        _ => return Err("contents[0].parts[0].text is required: a non-empty string".into()),
    };
    let config = match body.get("generationConfig") {
        Some(Value::Object(config)) => config,
        other => {
            return Err(invalid_value(
                "generationConfig",
                "object",
                other.unwrap_or(&Value::Null),
            ));
        }
    };
    for (name, value) in config {
        if !GENERATION_FIELDS.contains(&name.as_str()) {
            return Err(unknown_name(name, "generationConfig"));
        }
        let ok = match name.as_str() {
            "candidateCount" => value.as_u64().is_some_and(|n| n >= 1),
            "responseModalities" => value.as_array().is_some_and(|modalities| {
                modalities.iter().all(|modality| {
                    modality.as_str().is_some_and(|m| {
                        m.eq_ignore_ascii_case("TEXT") || m.eq_ignore_ascii_case("IMAGE")
                    })
                })
            }),
            "imageConfig" => {
                check_image_config(value, vertex)?;
                true
            }
            _ => true,
        };
        if !ok {
            let field = format!("generationConfig.{name}");
            return Err(invalid_value(&field, "a value Google takes", value));
        }
    }
    Ok((prompt, Value::Object(config.clone())))
}

/// Checks `imageConfig`: Google's ratios and size tiers (the tiers in upper case, as Google
/// requires), and on Vertex AI its person setting and output options.
fn check_image_config(value: &Value, vertex: bool) -> Result<(), String> {
    let Some(config) = value.as_object() else {
        return Err(invalid_value(
            "generationConfig.imageConfig",
            "object",
            value,
        ));
    };
    for (name, value) in config {
        let (ok, expected) = match name.as_str() {
            "aspectRatio" => (
                value.as_str().is_some_and(|ratio| {
                    [
                        "1:1", "2:3", "3:2", "3:4", "4:3", "4:5", "5:4", "9:16", "16:9", "21:9",
                    ]
                    .contains(&ratio)
                }),
                "1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9 or 21:9",
            ),
            "imageSize" => (
                value
                    .as_str()
                    .is_some_and(|size| ["1K", "2K", "4K"].contains(&size)),
                "1K, 2K or 4K",
            ),
            "personGeneration" if vertex => (
                value.as_str().is_some_and(|person| {
                    ["ALLOW_ALL", "ALLOW_ADULT", "ALLOW_NONE"].contains(&person)
                }),
                "ALLOW_ALL, ALLOW_ADULT or ALLOW_NONE",
            ),
            "imageOutputOptions" if vertex => {
                let place = "generationConfig.imageConfig.imageOutputOptions";
                check_output_options(value, place)?;
                (true, "")
            }
            _ => return Err(unknown_name(name, "generationConfig.imageConfig")),
        };
        if !ok {
            let field = format!("generationConfig.imageConfig.{name}");
            return Err(invalid_value(&field, expected, value));
        }
    }
    Ok(())
}

/// Google's 400 for a body it does not take.
fn invalid(message: &str) -> Reply {
    Reply::google_error(400, message, "INVALID_ARGUMENT")
}

/// The prompt and the parameters of an Imagen body, or Google's message for what is wrong
/// with it.
fn imagen_body(body: &Value, vertex: bool) -> Result<(String, Map<String, Value>), String> {
    let Some(fields) = body.as_object() else {
        return Err("Invalid JSON payload received. Expected an object.".into());
    };
    for (name, value) in fields {
        match name.as_str() {
            "instances" | "parameters" => {}
            "labels" if vertex => {
                let strings = value
                    .as_object()
                    .is_some_and(|labels| labels.values().all(Value::is_string));
                if !strings {
                    return Err(invalid_value("labels", "map<string, string>", value));
                }
            }
            _ => return Err(unknown_name(name, "")),
        }
    }
    let instance = match body["instances"].as_array().map(Vec::as_slice) {
        Some([instance]) => instance,
        _ => return Err("instances must hold exactly one instance".into()),
    };
    let Some(instance) = instance.as_object() else {
        return Err(invalid_value("instances[0]", "object", instance));
    };
    if let Some(extra) = instance.keys().find(|key| *key != "prompt") {
        return Err(unknown_name(extra, "instances[0]"));
    }
    let prompt = match instance.get("prompt") {
        Some(Value::String(prompt)) if !prompt.trim().is_empty() => prompt.clone(),
        _ => return Err("instances[0].prompt is required: a non-empty string".into()),
    };
    let parameters = match body.get("parameters") {
        None => Map::new(),
        Some(Value::Object(parameters)) => parameters.clone(),
        Some(other) => return Err(invalid_value("parameters", "object", other)),
    };
    for (name, value) in &parameters {
        check_parameter(name, value, vertex)?;
    }
    Ok((prompt, parameters))
}

/// Checks one of Imagen's parameters: its type and, where Imagen has one, its range.
fn check_parameter(name: &str, value: &Value, vertex: bool) -> Result<(), String> {
    let one_of = |values: &[&str]| {
        value
            .as_str()
            .is_some_and(|value| values.iter().any(|v| v.eq_ignore_ascii_case(value)))
    };
    let (ok, expected) = match name {
        "sampleCount" => (
            value.as_u64().is_some_and(|n| (1..=4).contains(&n)),
            "TYPE_INT32, 1 to 4",
        ),
        "aspectRatio" => (
            one_of(&["1:1", "3:4", "4:3", "9:16", "16:9"]),
            "1:1, 3:4, 4:3, 9:16 or 16:9",
        ),
        "sampleImageSize" => (one_of(&["1K", "2K"]), "1K or 2K"),
        "personGeneration" => (
            one_of(&["dont_allow", "allow_adult", "allow_all"]),
            "dont_allow, allow_adult or allow_all",
        ),
        "safetySetting" | "language" => (value.is_string(), "TYPE_STRING"),
        "includeRaiReason" | "includeSafetyAttributes" => (value.is_boolean(), "TYPE_BOOL"),
        "guidanceScale" => (value.is_number(), "TYPE_FLOAT"),
        "outputOptions" => return check_output_options(value, "parameters.outputOptions"),
        "negativePrompt" | "storageUri" if vertex => (value.is_string(), "TYPE_STRING"),
        "seed" if vertex => (
            value
                .as_u64()
                .is_some_and(|seed| seed <= u64::from(u32::MAX)),
            "TYPE_UINT32",
        ),
        "enhancePrompt" | "addWatermark" if vertex => (value.is_boolean(), "TYPE_BOOL"),
        _ => return Err(unknown_name(name, "parameters")),
    };
    if ok {
        Ok(())
    } else {
        Err(invalid_value(
            &format!("parameters.{name}"),
            expected,
            value,
        ))
    }
}

/// Checks output options (Imagen's `outputOptions`, Vertex AI's `imageOutputOptions`) at
/// `place`.
fn check_output_options(value: &Value, place: &str) -> Result<(), String> {
    let Some(options) = value.as_object() else {
        return Err(invalid_value(place, "object", value));
    };
    for (name, value) in options {
        let ok = match name.as_str() {
            "mimeType" => value == "image/png" || value == "image/jpeg",
            "compressionQuality" => value.as_u64().is_some_and(|q| q <= 100),
            _ => return Err(unknown_name(name, place)),
        };
        if !ok {
            let field = format!("{place}.{name}");
            return Err(invalid_value(
                &field,
                "image/png or image/jpeg; 0 to 100",
                value,
            ));
        }
    }
    Ok(())
}

/// Google's words for a field it does not know, at `place` (the body's top level when empty).
fn unknown_name(name: &str, place: &str) -> String {
    let at = if place.is_empty() {
        String::new()
    } else {
        format!(" at '{place}'")
    };
    format!("Invalid JSON payload received. Unknown name \"{name}\"{at}: Cannot find field.")
}

/// Google's words for a value of the wrong type or out of range.
fn invalid_value(field: &str, expected: &str, value: &Value) -> String {
    format!("Invalid value at '{field}' ({expected}), {value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fake's answer to Imagen's `predict` with `body`: its status and JSON body.
    fn predict(body: &Value, vertex: bool) -> (u16, Value) {
        let request = ReceivedRequest {
            method: "POST".into(),
            path: "/v1beta/models/imagen-4.0-generate-001:predict".into(),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        };
        let Reply::Whole { status, body, .. } = imagen(&request, vertex) else {
            panic!("a whole answer");
        };
        (status, serde_json::from_str(&body).expect("a JSON answer"))
    }

    fn body(prompt: &str, parameters: Value) -> Value {
        json!({"instances": [{"prompt": prompt}], "parameters": parameters})
    }

    #[test]
    fn only_imagens_predict_is_imagen() {
        assert!(is_imagen_predict(
            "/v1beta/models/imagen-4.0-generate-001:predict"
        ));
        assert!(is_imagen_predict(
            "/v1/projects/p/locations/l/publishers/google/models/imagen-3.0-generate-002:predict"
        ));
        assert!(!is_imagen_predict(
            "/v1/projects/p/locations/l/publishers/google/models/text-embedding-005:predict"
        ));
        assert!(!is_imagen_predict(
            "/v1beta/models/imagen-4.0-generate-001:generateContent"
        ));
    }

    #[test]
    fn imagen_answers_sample_count_pngs_of_the_prompt() {
        let parameters = json!({"sampleCount": 2, "aspectRatio": "16:9", "sampleImageSize": "2K",
            "personGeneration": "allow_adult", "includeRaiReason": true,
            "outputOptions": {"mimeType": "image/jpeg", "compressionQuality": 75}});
        let (status, answer) = predict(&body("a fox", parameters), false);
        assert_eq!(status, 200, "{answer}");
        let image = |seed: &str| json!({"bytesBase64Encoded": STANDARD.encode(fake_png(seed)), "mimeType": "image/jpeg"});
        assert_eq!(
            answer,
            json!({"predictions": [image("a fox#0"), image("a fox#1")]})
        );
        // No parameters: Imagen's default count, PNGs; the prompt's safety attributes first
        // when asked.
        let (_, answer) = predict(&json!({"instances": [{"prompt": "a fox"}]}), false);
        assert_eq!(answer["predictions"].as_array().map(Vec::len), Some(4));
        assert_eq!(answer["predictions"][0]["mimeType"], "image/png");
        let (_, answer) = predict(
            &body(
                "a fox",
                json!({"sampleCount": 1,
            "includeSafetyAttributes": true}),
            ),
            false,
        );
        assert_eq!(answer["predictions"][0]["contentType"], "Positive Prompt");
        assert!(answer["predictions"][1]["bytesBase64Encoded"].is_string());
    }

    #[test]
    fn the_refused_prompt_gets_no_image() {
        let (status, answer) = predict(
            &body(
                REFUSED_PROMPT,
                json!({"sampleCount": 3, "includeRaiReason": true}),
            ),
            false,
        );
        assert_eq!(status, 200);
        assert_eq!(
            answer,
            json!({"predictions": [{"raiFilteredReason": filtered_reason(3)}]})
        );
        let (_, answer) = predict(&body(REFUSED_PROMPT, json!({"sampleCount": 3})), true);
        assert_eq!(answer, json!({}));
    }

    /// The fake's answer to a Gemini image model's `generateContent` with `body`: its status and
    /// JSON body.
    fn generate(model: &str, body: &Value, vertex: bool) -> (u16, Value) {
        let request = ReceivedRequest {
            method: "POST".into(),
            path: format!("/v1beta/models/{model}:generateContent"),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        };
        assert!(is_image_generation(&request), "{body}");
        let Reply::Whole { status, body, .. } = image_output(&request, vertex) else {
            panic!("a whole answer");
        };
        (status, serde_json::from_str(&body).expect("a JSON answer"))
    }

    fn image_body(prompt: &str, config: Value) -> Value {
        json!({"contents": [{"role": "user", "parts": [{"text": prompt}]}],
               "generationConfig": config})
    }

    #[test]
    fn only_image_models_asked_for_images_are_answered_by_the_fake() {
        let request = |path: &str, body: Value| ReceivedRequest {
            method: "POST".into(),
            path: path.into(),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        };
        let images = image_body("x", json!({"responseModalities": ["IMAGE"]}));
        let text = image_body("x", json!({"responseModalities": ["TEXT"]}));
        for (path, body, expected) in [
            (
                "/v1beta/models/gemini-2.5-flash-image:generateContent",
                &images,
                true,
            ),
            (
                "/v1/projects/p/locations/l/publishers/google/models/gemini-3-pro-image-preview:generateContent",
                &images,
                true,
            ),
            // Google's REST samples write the modality as "Image".
            (
                "/v1beta/models/gemini-2.5-flash-image:generateContent",
                &image_body("x", json!({"responseModalities": ["Text", "Image"]})),
                true,
            ),
            // A chat of an image model, and any other model: the script's.
            (
                "/v1beta/models/gemini-2.5-flash-image:generateContent",
                &text,
                false,
            ),
            (
                "/v1beta/models/gemini-2.5-flash-image:generateContent",
                &json!({"contents": []}),
                false,
            ),
            (
                "/v1beta/models/gemini-2.5-flash:generateContent",
                &images,
                false,
            ),
            (
                "/v1beta/models/gemini-2.5-flash-image:streamGenerateContent",
                &images,
                false,
            ),
        ] {
            let request = request(path, body.clone());
            assert_eq!(is_image_generation(&request), expected, "{path} {body}");
        }
    }

    #[test]
    fn image_models_answer_a_png_of_the_prompt_with_token_usage() {
        let config = json!({"responseModalities": ["IMAGE"],
            "imageConfig": {"aspectRatio": "16:9", "imageSize": "2K"}, "seed": 7});
        let (status, answer) = generate(
            "gemini-2.5-flash-image",
            &image_body("a red fox", config),
            false,
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer,
            json!({
                "candidates": [{
                    "content": {"role": "model", "parts": [{"inlineData": {
                        "mimeType": "image/png",
                        "data": STANDARD.encode(fake_png("a red fox#0"))}}]},
                    "finishReason": "STOP",
                    "index": 0,
                }],
                "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": IMAGE_TOKENS,
                    "totalTokenCount": 3 + IMAGE_TOKENS,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}],
                    "candidatesTokensDetails": [{"modality": "IMAGE", "tokenCount": IMAGE_TOKENS}]},
                "modelVersion": "gemini-2.5-flash-image",
                "responseId": "fake-gemini-image",
            })
        );
        // Vertex AI's output options: the media type is repeated.
        let config = json!({"responseModalities": ["IMAGE"], "imageConfig": {
            "personGeneration": "ALLOW_ADULT",
            "imageOutputOptions": {"mimeType": "image/jpeg", "compressionQuality": 80}}});
        let mut body = image_body("a fox", config);
        body["labels"] = json!({"team": "art"});
        let (status, answer) = generate("gemini-2.5-flash-image", &body, true);
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer["candidates"][0]["content"]["parts"][0]["inlineData"]["mimeType"],
            "image/jpeg"
        );
    }

    #[test]
    fn image_models_block_the_refused_prompt_with_image_safety() {
        let (status, answer) = generate(
            "gemini-2.5-flash-image",
            &image_body(REFUSED_PROMPT, json!({"responseModalities": ["IMAGE"]})),
            false,
        );
        assert_eq!(status, 200);
        assert_eq!(
            answer["candidates"],
            json!([{"finishReason": "IMAGE_SAFETY", "index": 0}])
        );
        assert_eq!(answer["usageMetadata"]["promptTokenCount"], 2);
        assert!(
            answer["usageMetadata"]
                .get("candidatesTokenCount")
                .is_none()
        );
    }

    #[test]
    fn image_model_bodies_are_checked_as_google_checks_them() {
        let images = json!({"responseModalities": ["IMAGE"]});
        let with_config = |extra: Value| {
            let mut config = images.clone();
            config
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            image_body("x", config)
        };
        let cases = [
            (
                {
                    let mut body = image_body("x", images.clone());
                    body["extra"] = json!(1);
                    body
                },
                "Unknown name \"extra\"",
            ),
            (
                json!({"contents": [], "generationConfig": images.clone()}),
                "exactly one content",
            ),
            (
                json!({"contents": [{"role": "model", "parts": [{"text": "x"}]}],
                       "generationConfig": images.clone()}),
                "'contents[0].role'",
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"text": "x"}, {"text": "y"}]}],
                       "generationConfig": images.clone()}),
                "exactly one part",
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"text": "x", "thought": true}]}],
                       "generationConfig": images.clone()}),
                "Unknown name \"thought\" at 'contents[0].parts[0]'",
            ),
            (image_body("  ", images.clone()), "text is required"),
            (
                with_config(json!({"quality": "hd"})),
                "Unknown name \"quality\" at 'generationConfig'",
            ),
            (
                with_config(json!({"candidateCount": 2})),
                "Multiple candidates is not enabled for models/gemini-2.5-flash-image",
            ),
            (
                with_config(json!({"responseModalities": ["IMAGE", "AUDIO"]})),
                "'generationConfig.responseModalities'",
            ),
            (
                with_config(json!({"imageConfig": {"aspectRatio": "7:4"}})),
                "'generationConfig.imageConfig.aspectRatio'",
            ),
            (
                with_config(json!({"imageConfig": {"imageSize": "2k"}})),
                "'generationConfig.imageConfig.imageSize'",
            ),
            // Vertex AI's alone.
            (
                with_config(json!({"imageConfig": {"personGeneration": "ALLOW_ALL"}})),
                "Unknown name \"personGeneration\" at 'generationConfig.imageConfig'",
            ),
            (
                with_config(
                    json!({"imageConfig": {"imageOutputOptions": {"mimeType": "image/png"}}}),
                ),
                "Unknown name \"imageOutputOptions\"",
            ),
            (
                {
                    let mut body = image_body("x", images.clone());
                    body["labels"] = json!({"a": "b"});
                    body
                },
                "Unknown name \"labels\"",
            ),
        ];
        for (body, expected) in cases {
            let (status, answer) = generate("gemini-2.5-flash-image", &body, false);
            assert_eq!(status, 400, "{body}");
            assert_eq!(answer["error"]["status"], "INVALID_ARGUMENT");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(expected), "{body}: {message}");
        }
        let vertex = with_config(json!({"imageConfig": {
            "imageOutputOptions": {"mimeType": "image/webp"}}}));
        let (status, answer) = generate("gemini-2.5-flash-image", &vertex, true);
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("'generationConfig.imageConfig.imageOutputOptions.mimeType'"),
            "{answer}"
        );
    }

    #[test]
    fn bodies_are_checked_as_google_checks_them() {
        let cases = [
            (
                json!({"instances": [{"prompt": "x"}], "extra": 1}),
                "Unknown name \"extra\"",
            ),
            (json!({"instances": []}), "exactly one instance"),
            (
                json!({"instances": [{"prompt": ""}]}),
                "instances[0].prompt is required",
            ),
            (
                json!({"instances": [{"prompt": "x", "image": {}}]}),
                "Unknown name \"image\" at 'instances[0]'",
            ),
            (
                body("x", json!({"sampleCount": 5})),
                "'parameters.sampleCount'",
            ),
            (
                body("x", json!({"sampleCount": "2"})),
                "'parameters.sampleCount'",
            ),
            (
                body("x", json!({"aspectRatio": "3:2"})),
                "'parameters.aspectRatio'",
            ),
            (
                body("x", json!({"sampleImageSize": "4K"})),
                "'parameters.sampleImageSize'",
            ),
            (
                body("x", json!({"includeRaiReason": "yes"})),
                "'parameters.includeRaiReason'",
            ),
            (
                body("x", json!({"outputOptions": {"mimeType": "image/webp"}})),
                "'parameters.outputOptions.mimeType'",
            ),
            (
                body("x", json!({"outputOptions": {"format": "png"}})),
                "Unknown name \"format\" at 'parameters.outputOptions'",
            ),
            (
                body("x", json!({"quality": "hd"})),
                "Unknown name \"quality\" at 'parameters'",
            ),
            // Vertex AI's alone.
            (
                body("x", json!({"negativePrompt": "y"})),
                "Unknown name \"negativePrompt\"",
            ),
            (body("x", json!({"seed": 1})), "Unknown name \"seed\""),
            (
                json!({"instances": [{"prompt": "x"}], "labels": {"a": "b"}}),
                "Unknown name \"labels\"",
            ),
        ];
        for (body, expected) in cases {
            let (status, answer) = predict(&body, false);
            assert_eq!(status, 400, "{body}");
            assert_eq!(answer["error"]["status"], "INVALID_ARGUMENT");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(expected), "{body}: {message}");
        }
        let vertex = json!({"instances": [{"prompt": "x"}], "labels": {"team": "art"},
            "parameters": {"negativePrompt": "y", "seed": 7, "enhancePrompt": false,
                "addWatermark": false, "sampleCount": 1}});
        assert_eq!(predict(&vertex, true).0, 200);
        assert_eq!(predict(&vertex, false).0, 400);
        let (status, answer) = predict(&body("x", json!({"seed": -1})), true);
        assert_eq!(status, 400, "{answer}");
    }
}
