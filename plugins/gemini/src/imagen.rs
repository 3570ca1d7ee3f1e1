//! Images from Google's Imagen models through `predict`, which the Gemini API
//! (`{base}/models/{model}:predict`, the key in `x-goog-api-key`) and Vertex AI
//! (`…/publishers/google/models/{model}:predict`, an OAuth token) serve with the same body and the
//! same answer; only some parameters are Vertex AI's alone. Pure (no I/O), so it is unit-tested
//! natively; both plugins reach it through `images::ImageCall`, whose module holds what Imagen
//! shares with Gemini's image models (the reading of `size`, `quality`, the output options, an
//! answer without images).
//!
//! Body: `{"instances": [{"prompt"}], "parameters": {"sampleCount", "aspectRatio"?,
//! "sampleImageSize"?, "outputOptions"?: {"mimeType"?, "compressionQuality"?},
//! "includeRaiReason": true, ...}}`, as Google documents it
//! (<https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/imagen-api>,
//! <https://ai.google.dev/gemini-api/docs/imagen>). The caller speaks OpenAI's images API:
//! - `n` is `sampleCount`: Imagen makes 1 to 4 images a request, more is refused;
//! - `size` `WxH` is the `aspectRatio` Imagen takes (`1:1`, `3:4`, `4:3`, `9:16`, `16:9`): one of
//!   Imagen's own sizes for them (1024x1024, 896x1280, 1280x896, 768x1408, 1408x768), their 2K
//!   doubles (`sampleImageSize: "2K"`) on the models that make 2K images (Imagen 4 Standard and
//!   Ultra), else any size whose width:height is exactly one of the ratios. `auto` or none leaves
//!   it to the model (1:1). Any other size is refused;
//! - `quality`: Imagen has no such setting: `auto` and `standard` are taken, others refused (a
//!   bigger image is asked with its size, not with `hd`);
//! - params, under OpenAI-style or Imagen's own names: `negative_prompt`, `seed`,
//!   `person_generation`, `aspect_ratio` (over the size's), `enhance_prompt`, `add_watermark`,
//!   `image_size`, `safety_setting`, `language`, ... go into `parameters` under Imagen's names;
//!   `output_format` (`png`, `jpeg`) and `output_compression` are `outputOptions`; any other is
//!   passed into `parameters` as it is (a field the plugin does not know yet; Google refuses names
//!   it does not know), as the plugins' embeddings do. `response_format` (how the gateway writes
//!   the images to its caller) and `user` (Google has no end-user field) are dropped. The Gemini
//!   API refuses what only Vertex AI takes (`negative_prompt`, `seed`, `enhance_prompt`,
//!   `add_watermark`, `storage_uri`, `labels`), so the plugin refuses it first, naming it.
//!
//! `includeRaiReason` is on unless the caller turns it off, so that an answer whose images were
//! all filtered says why. Answers: each prediction with `bytesBase64Encoded` is an image of its
//! `mimeType`; predictions without bytes (filtered images' `raiFilteredReason`, the prompt's
//! safety attributes) are skipped. No image at all is the upstream's refusal of the prompt: a 400
//! carrying Google's reasons (see `images::no_image`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::{
    GeneratedImage, ImageRequest, Images, ProviderError, Source, json, params_object_except,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::convert::take_aliases;
use crate::images::{
    ImageCall, Maker, OWNED, Ratio, Service, Sizes, no_image, output_options, quality, vertex_only,
};

/// The most images Imagen makes in one request.
pub const MAX_IMAGES: u32 = 4;

/// Imagen's ratios and sizes, at its default (`1K`) and `2K` tiers (Vertex AI's model pages
/// list them; the Gemini API serves the same models).
const RATIOS: [Ratio; 5] = [
    Ratio {
        name: "1:1",
        reduced: (1, 1),
        sizes: &[(1024, 1024), (2048, 2048)],
    },
    Ratio {
        name: "3:4",
        reduced: (3, 4),
        sizes: &[(896, 1280), (1792, 2560)],
    },
    Ratio {
        name: "4:3",
        reduced: (4, 3),
        sizes: &[(1280, 896), (2560, 1792)],
    },
    Ratio {
        name: "9:16",
        reduced: (9, 16),
        sizes: &[(768, 1408), (1536, 2816)],
    },
    Ratio {
        name: "16:9",
        reduced: (16, 9),
        sizes: &[(1408, 768), (2816, 1536)],
    },
];

/// Imagen's size tiers (`sampleImageSize`), the default first.
const TIERS: [&str; 2] = ["1K", "2K"];

/// How to ask Imagen for a bigger image, in the refusal of a quality.
const BIGGER: &str = "for 2K images ask a size such as 2048x2048 of imagen-4.0-generate-001 or \
                      imagen-4.0-ultra-generate-001";

/// `parameters` fields with the caller's names for them, Imagen's first.
const PARAMETER_ALIASES: &[&[&str]] = &[
    &["negativePrompt", "negative_prompt"],
    &["seed"],
    &["personGeneration", "person_generation"],
    &["aspectRatio", "aspect_ratio"],
    &["enhancePrompt", "enhance_prompt"],
    &["addWatermark", "add_watermark"],
    &[
        "sampleImageSize",
        "sample_image_size",
        "imageSize",
        "image_size",
    ],
    &["safetySetting", "safety_setting", "safety_filter_level"],
    &["includeRaiReason", "include_rai_reason"],
    &["includeSafetyAttributes", "include_safety_attributes"],
    &["guidanceScale", "guidance_scale"],
    &["language"],
    &["storageUri", "storage_uri", "output_gcs_uri"],
];

/// What only Vertex AI takes, under each of its names (Google's SDK refuses them for the
/// Gemini API too).
const VERTEX_ONLY: &[&[&str]] = &[
    &["negative_prompt", "negativePrompt"],
    &["seed"],
    &["enhance_prompt", "enhancePrompt"],
    &["add_watermark", "addWatermark"],
    &["storage_uri", "storageUri", "output_gcs_uri"],
    &["labels"],
];

/// Whether `model` (an id, or a resource name ending in one) is an Imagen model.
pub fn is_imagen(model: &str) -> bool {
    model
        .trim()
        .rsplit('/')
        .next()
        .is_some_and(|id| id.starts_with("imagen"))
}

/// What `model` makes: Imagen's ratios, at 2K too (`sampleImageSize: "2K"`) on Imagen 4
/// Standard and Ultra, not on Imagen 4 Fast nor Imagen 3.
fn sizes(model: &str) -> Sizes {
    let id = model.trim().rsplit('/').next().unwrap_or_default();
    let two_k = id.starts_with("imagen-4") && !id.contains("fast");
    Sizes {
        ratios: &RATIOS,
        tiers: &TIERS[..if two_k { 2 } else { 1 }],
    }
}

/// The `predict` call of `request` (of an Imagen model) on `service`.
pub(crate) fn predict(
    request: &ImageRequest,
    service: Service,
) -> Result<ImageCall, ProviderError> {
    let route = &request.route.id;
    if !(1..=MAX_IMAGES).contains(&request.n) {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: n is {}, but Imagen makes 1 to {MAX_IMAGES} images a request",
            request.n
        )));
    }
    quality(request.quality.as_deref(), "Imagen", BIGGER, route)?;
    let sizes = sizes(&request.model);
    let asked = sizes.asked(request.size.as_deref(), "Imagen", route)?;

    let mut params = params_object_except(&request.params, OWNED)?;
    params.retain(|_, value| !value.is_null());
    // `sampleCount` is `n`: the plugin's to send.
    params.remove("sampleCount");
    let mut body = Map::new();
    match service {
        Service::GeminiApi => vertex_only(&params, VERTEX_ONLY, "Imagen", route)?,
        // Vertex AI's labels (billing) are a field of the body, not a parameter.
        Service::VertexAi => {
            if let Some(labels) = params.remove("labels") {
                body.insert("labels".into(), labels);
            }
        }
    }
    let output = output_options(
        &mut params,
        &["outputOptions", "output_options"],
        "Imagen",
        route,
    )?;
    let mut parameters = take_aliases(&mut params, PARAMETER_ALIASES);
    // A field the plugin does not know yet: passed as it is.
    parameters.extend(params);
    parameters.insert("sampleCount".into(), json!(request.n));
    if let Some(output) = output {
        parameters.insert("outputOptions".into(), Value::Object(output));
    }
    if let Some((ratio, tier)) = asked {
        // The caller's `aspect_ratio` is over the size's.
        parameters
            .entry("aspectRatio")
            .or_insert_with(|| json!(ratio.name));
        if tier > 0 {
            parameters
                .entry("sampleImageSize")
                .or_insert_with(|| json!(sizes.tiers[tier]));
        }
    }
    parameters
        .entry("includeRaiReason")
        .or_insert(Value::Bool(true));

    let size = sizes.reported(
        request.size.as_deref(),
        asked,
        parameters.get("aspectRatio"),
        parameters.get("sampleImageSize"),
    );
    body.insert("instances".into(), json!([{ "prompt": request.prompt }]));
    body.insert("parameters".into(), Value::Object(parameters));
    Ok(ImageCall {
        maker: Maker::Imagen,
        body: Value::Object(body),
        size,
    })
}

#[derive(Deserialize)]
struct PredictResponse {
    /// Absent when every image was filtered and no reason was asked.
    #[serde(default, deserialize_with = "json::null_as_default")]
    predictions: Vec<Prediction>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Prediction {
    #[serde(default)]
    bytes_base64_encoded: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    /// Why images were filtered (one prediction may stand for several).
    #[serde(default)]
    rai_filtered_reason: Option<String>,
    /// The prompt Imagen drew when it rewrote the caller's (`enhancePrompt`, Vertex AI).
    #[serde(default)]
    prompt: Option<String>,
}

/// Reads a `predict` answer to `request`, whose answer reports `size`.
pub(crate) fn read_predictions(
    body: &[u8],
    request: &ImageRequest,
    size: Option<String>,
) -> Result<Images, ProviderError> {
    let answer: PredictResponse = serde_json::from_slice(body).map_err(ProviderError::malformed)?;
    let mut images = Vec::new();
    let mut reasons = Vec::new();
    for (i, prediction) in answer.predictions.into_iter().enumerate() {
        reasons.extend(prediction.rai_filtered_reason);
        // Filtered images, and the prompt's safety attributes, come without bytes.
        let Some(data) = prediction.bytes_base64_encoded else {
            continue;
        };
        let bytes = STANDARD.decode(data.trim()).map_err(|e| {
            ProviderError::malformed(format!("predictions[{i}].bytesBase64Encoded: {e}"))
        })?;
        images.push(GeneratedImage {
            source: Source::Bytes(bytes),
            media_type: Some(prediction.mime_type.unwrap_or_else(|| "image/png".into())),
            revised_prompt: prediction.prompt.filter(|prompt| *prompt != request.prompt),
        });
    }
    if images.is_empty() {
        return Err(no_image(
            "Imagen made no image: its safety filters removed every one",
            &reasons,
        ));
    }
    images.truncate(request.n as usize);
    Ok(Images {
        model: request.model.clone(),
        images,
        // Imagen bills images, not tokens.
        usage: None,
        size,
        quality: None,
    })
}
