//! Images from Google's Imagen models through `predict`, which the Gemini API
//! (`{base}/models/{model}:predict`, the key in `x-goog-api-key`) and Vertex AI
//! (`…/publishers/google/models/{model}:predict`, an OAuth token) serve with the same body and the
//! same answer; only some parameters are Vertex AI's alone. Pure (no I/O), so it is unit-tested
//! natively; the vertex plugin uses it as it is.
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
//! carrying Google's reasons (see [`all_filtered`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::{
    GeneratedImage, ImageRequest, Images, ProviderError, Source, UpstreamError, json,
    params_object_except,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::convert::{take_alias, take_aliases};

/// Which service a call goes to: Vertex AI takes parameters the Gemini API does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    GeminiApi,
    VertexAi,
}

impl Service {
    /// The plugin that calls it, for refusals: the service itself also serves other image
    /// models (Gemini's `generateContent` ones), which the plugins do not.
    fn plugin(self) -> &'static str {
        match self {
            Service::GeminiApi => "the gemini plugin",
            Service::VertexAi => "the vertex plugin",
        }
    }
}

/// The most images Imagen makes in one request.
pub const MAX_IMAGES: u32 = 4;

/// An aspect ratio Imagen takes, with the sizes it makes for it.
struct Ratio {
    name: &'static str,
    /// Width and height, reduced.
    reduced: (u32, u32),
    /// The default (`1K`) size, and the `2K` one.
    sizes: [(u32, u32); 2],
}

/// Imagen's ratios and sizes (Vertex AI's model pages list them; the Gemini API serves the same
/// models).
const RATIOS: [Ratio; 5] = [
    Ratio {
        name: "1:1",
        reduced: (1, 1),
        sizes: [(1024, 1024), (2048, 2048)],
    },
    Ratio {
        name: "3:4",
        reduced: (3, 4),
        sizes: [(896, 1280), (1792, 2560)],
    },
    Ratio {
        name: "4:3",
        reduced: (4, 3),
        sizes: [(1280, 896), (2560, 1792)],
    },
    Ratio {
        name: "9:16",
        reduced: (9, 16),
        sizes: [(768, 1408), (1536, 2816)],
    },
    Ratio {
        name: "16:9",
        reduced: (16, 9),
        sizes: [(1408, 768), (2816, 1536)],
    },
];

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

/// Keys the plugin sets itself (the request's own fields, and `sampleCount`, which is `n`), and
/// the ones it drops: `response_format` is how the gateway writes the images to its caller,
/// `user` has no Google field.
const OWNED: &[&str] = &[
    "model",
    "prompt",
    "n",
    "size",
    "quality",
    "sampleCount",
    "response_format",
    "user",
];

/// A `predict` call: its body, and the size the answer reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Predict {
    pub body: Value,
    /// The request's size when it chose the aspect ratio; otherwise the size Imagen makes for
    /// the ratio and size asked (`1024x1024` when everything is left to the model); `None` for
    /// a ratio the plugin does not know (Google judges it).
    pub size: Option<String>,
}

/// Whether `model` (an id, or a resource name ending in one) is an Imagen model.
pub fn is_imagen(model: &str) -> bool {
    model
        .trim()
        .rsplit('/')
        .next()
        .is_some_and(|id| id.starts_with("imagen"))
}

/// Whether `model` makes 2K images (`sampleImageSize: "2K"`): Imagen 4 Standard and Ultra, not
/// Imagen 4 Fast nor Imagen 3.
fn takes_2k(model: &str) -> bool {
    let id = model.trim().rsplit('/').next().unwrap_or_default();
    id.starts_with("imagen-4") && !id.contains("fast")
}

/// The `predict` call of `request` on `service`.
pub fn predict(request: &ImageRequest, service: Service) -> Result<Predict, ProviderError> {
    let route = &request.route.id;
    if !is_imagen(&request.model) {
        return Err(ProviderError::InvalidRequest(format!(
            "{} is not an Imagen model: {} makes images with Imagen models only \
             (e.g. imagen-4.0-generate-001)",
            request.model,
            service.plugin()
        )));
    }
    if !(1..=MAX_IMAGES).contains(&request.n) {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: n is {}, but Imagen makes 1 to {MAX_IMAGES} images a request",
            request.n
        )));
    }
    quality(request.quality.as_deref(), route)?;
    let asked = size(&request.model, request.size.as_deref(), route)?;

    let mut params = params_object_except(&request.params, OWNED)?;
    params.retain(|_, value| !value.is_null());
    let mut body = Map::new();
    match service {
        Service::GeminiApi => vertex_only(&params, route)?,
        // Vertex AI's labels (billing) are a field of the body, not a parameter.
        Service::VertexAi => {
            if let Some(labels) = params.remove("labels") {
                body.insert("labels".into(), labels);
            }
        }
    }
    let output = output_options(&mut params, route)?;
    let mut parameters = take_aliases(&mut params, PARAMETER_ALIASES);
    // A field the plugin does not know yet: passed as it is.
    parameters.extend(params);
    parameters.insert("sampleCount".into(), json!(request.n));
    if let Some(output) = output {
        parameters.insert("outputOptions".into(), Value::Object(output));
    }
    if let Some((ratio, two_k)) = asked {
        // The caller's `aspect_ratio` is over the size's.
        parameters
            .entry("aspectRatio")
            .or_insert_with(|| json!(ratio.name));
        if two_k {
            parameters
                .entry("sampleImageSize")
                .or_insert_with(|| json!("2K"));
        }
    }
    parameters
        .entry("includeRaiReason")
        .or_insert(Value::Bool(true));

    let reported = reported_size(request.size.as_deref(), asked, &parameters);
    body.insert("instances".into(), json!([{ "prompt": request.prompt }]));
    body.insert("parameters".into(), Value::Object(parameters));
    Ok(Predict {
        body: Value::Object(body),
        size: reported,
    })
}

/// Imagen has no quality setting: the caller's default ones are taken, any other refused.
fn quality(quality: Option<&str>, route: &str) -> Result<(), ProviderError> {
    match quality.map(str::trim) {
        None => Ok(()),
        Some(quality)
            if quality.eq_ignore_ascii_case("auto") || quality.eq_ignore_ascii_case("standard") =>
        {
            Ok(())
        }
        // `hd` could be read as 2K, but OpenAI's `hd` is finer detail at the same size, and
        // only some Imagen models make 2K: a bigger image is asked with its size instead.
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: quality {other:?} is not one Imagen takes: it has no quality \
             setting (auto or standard); for 2K images ask a size such as 2048x2048 of \
             imagen-4.0-generate-001 or imagen-4.0-ultra-generate-001"
        ))),
    }
}

/// The aspect ratio `size` asks of `model`, and whether it asks 2K images; `None` for the
/// model's default.
fn size(
    model: &str,
    size: Option<&str>,
    route: &str,
) -> Result<Option<(&'static Ratio, bool)>, ProviderError> {
    let size = match size.map(str::trim) {
        None => return Ok(None),
        Some(size) if size.eq_ignore_ascii_case("auto") => return Ok(None),
        Some(size) => size,
    };
    let two_k = takes_2k(model);
    let parsed = size.split_once('x').and_then(|(width, height)| {
        let width: u32 = width.parse().ok()?;
        let height: u32 = height.parse().ok()?;
        (width > 0 && height > 0).then_some((width, height))
    });
    if let Some((width, height)) = parsed {
        // Imagen's own sizes first: they say whether 2K is asked.
        for ratio in &RATIOS {
            if ratio.sizes[0] == (width, height) {
                return Ok(Some((ratio, false)));
            }
            if two_k && ratio.sizes[1] == (width, height) {
                return Ok(Some((ratio, true)));
            }
        }
        let divisor = gcd(width, height);
        let reduced = (width / divisor, height / divisor);
        if let Some(ratio) = RATIOS.iter().find(|ratio| ratio.reduced == reduced) {
            return Ok(Some((ratio, false)));
        }
    }
    let mut taken: Vec<String> = RATIOS.iter().map(|r| dimensions(r.sizes[0])).collect();
    if two_k {
        taken.extend(RATIOS.iter().map(|r| dimensions(r.sizes[1])));
    }
    Err(ProviderError::InvalidRequest(format!(
        "route `{route}`: size {size:?} is not one Imagen makes: it takes auto, {}, or any \
         width x height of ratio 1:1, 3:4, 4:3, 9:16 or 16:9",
        taken.join(", ")
    )))
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn dimensions((width, height): (u32, u32)) -> String {
    format!("{width}x{height}")
}

/// The size the answer reports (see [`Predict::size`]).
fn reported_size(
    asked: Option<&str>,
    ratio: Option<(&'static Ratio, bool)>,
    parameters: &Map<String, Value>,
) -> Option<String> {
    let made_ratio = parameters
        .get("aspectRatio")
        .map_or(Some("1:1"), Value::as_str)?;
    if let (Some(asked), Some((ratio, _))) = (asked, ratio)
        && ratio.name == made_ratio
    {
        return Some(asked.trim().to_owned());
    }
    let ratio = RATIOS.iter().find(|ratio| ratio.name == made_ratio)?;
    let two_k = parameters
        .get("sampleImageSize")
        .and_then(Value::as_str)
        .is_some_and(|size| size.eq_ignore_ascii_case("2K"));
    Some(dimensions(ratio.sizes[usize::from(two_k)]))
}

/// Refuses what the Gemini API does not take, naming it as the caller did.
fn vertex_only(params: &Map<String, Value>, route: &str) -> Result<(), ProviderError> {
    let given = VERTEX_ONLY
        .iter()
        .flat_map(|aliases| aliases.iter())
        .find(|name| params.contains_key(**name));
    match given {
        None => Ok(()),
        Some(name) => Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: {name} is not supported by Imagen on the Gemini API \
             (Vertex AI takes it)"
        ))),
    }
}

/// `outputOptions` from OpenAI's `output_format` and `output_compression`, over the caller's own
/// `outputOptions`; `None` when none is given.
fn output_options(
    params: &mut Map<String, Value>,
    route: &str,
) -> Result<Option<Map<String, Value>>, ProviderError> {
    let mut options = match take_alias(params, &["outputOptions", "output_options"]) {
        None => None,
        Some(Value::Object(options)) => Some(options),
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: outputOptions must be an object"
            )));
        }
    };
    if let Some(format) = params.remove("output_format") {
        let mime_type = match format.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("png") => "image/png",
            Some("jpeg" | "jpg") => "image/jpeg",
            _ => {
                return Err(ProviderError::InvalidRequest(format!(
                    "route `{route}`: output_format {format} is not one Imagen makes: \
                     png or jpeg"
                )));
            }
        };
        options
            .get_or_insert_with(Map::new)
            .insert("mimeType".into(), json!(mime_type));
    }
    if let Some(compression) = params.remove("output_compression") {
        options
            .get_or_insert_with(Map::new)
            .insert("compressionQuality".into(), compression);
    }
    Ok(options)
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

/// Reads a `predict` answer to `request` (whose call was `predict`) into its images.
pub fn read_predictions(
    body: &[u8],
    request: &ImageRequest,
    predict: Predict,
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
        return Err(all_filtered(&reasons));
    }
    images.truncate(request.n as usize);
    Ok(Images {
        model: request.model.clone(),
        images,
        // Imagen bills images, not tokens.
        usage: None,
        size: predict.size,
        quality: None,
    })
}

/// An answer without images: Google's safety filters removed every one. It is Google's refusal
/// of the prompt, as a blocked prompt's 400 is, so it is passed on as one: the caller sees a 400
/// with Google's reasons, and the gateway does not try again.
fn all_filtered(reasons: &[String]) -> ProviderError {
    let why = if reasons.is_empty() {
        "Google gave no reason".to_owned()
    } else {
        reasons.join("; ")
    };
    ProviderError::Upstream(UpstreamError {
        status: 400,
        message: format!("Imagen made no image: its safety filters removed every one ({why})"),
        retry_after: None,
    })
}
