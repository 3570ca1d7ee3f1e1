//! Google's Gemini API as the fake serves it: `generateContent` and `streamGenerateContent`
//! from the script; `batchEmbedContents` computed from the request; Imagen's `predict`
//! (`…/models/imagen-*:predict`) answered with [`fake_png`]s, its body checked strictly (see
//! [`imagen`], which the fake Vertex AI serves too); errors as
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

/// The prompt Imagen's safety filters block every image of, in the fakes: the answer has no
/// image, only the reason (`raiFilteredReason`) when `includeRaiReason` asked for it, else it is
/// `{}`, as Imagen answers.
pub const REFUSED_PROMPT: &str = "refuse me";

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
        "outputOptions" => return check_output_options(value),
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

fn check_output_options(value: &Value) -> Result<(), String> {
    let Some(options) = value.as_object() else {
        return Err(invalid_value("parameters.outputOptions", "object", value));
    };
    for (name, value) in options {
        let ok = match name.as_str() {
            "mimeType" => value == "image/png" || value == "image/jpeg",
            "compressionQuality" => value.as_u64().is_some_and(|q| q <= 100),
            _ => return Err(unknown_name(name, "parameters.outputOptions")),
        };
        if !ok {
            let field = format!("parameters.outputOptions.{name}");
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
