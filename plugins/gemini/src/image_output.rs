//! Images from Gemini's image models (`gemini-2.5-flash-image`, `gemini-3-pro-image-preview`,
//! and any other model whose id holds `-image`) through `generateContent`, which the Gemini API
//! (`{base}/models/{model}:generateContent`, the key in `x-goog-api-key`) and Vertex AI
//! (`…/publishers/google/models/{model}:generateContent`, an OAuth token) serve with the same
//! body and the same answer; only some image settings are Vertex AI's alone. Pure (no I/O), so it
//! is unit-tested natively; both plugins reach it through `images::ImageCall`.
//!
//! Body: `{"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], "generationConfig":
//! {"responseModalities": ["IMAGE"], "imageConfig"?: {"aspectRatio"?, "imageSize"?}, ...}}`, as
//! Google documents it (<https://ai.google.dev/gemini-api/docs/image-generation>, "Optional
//! configurations": the models answer text and images unless `responseModalities` asks for
//! images only; <https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal-response-generation>).
//! The caller speaks OpenAI's images API:
//! - `n`: these models make one image a request (they refuse `candidateCount` above 1:
//!   "Multiple candidates is not enabled"), so any other `n` is refused, naming it; the plugin
//!   does not make several calls for one request;
//! - `size` `WxH` is `imageConfig.aspectRatio` (`1:1`, `2:3`, `3:2`, `3:4`, `4:3`, `4:5`,
//!   `5:4`, `9:16`, `16:9`, `21:9`) read as Imagen's sizes are (see `images`): one of the
//!   model's own sizes (Gemini 2.5 Flash Image: 1024x1024, 832x1248, 1248x832, 864x1184,
//!   1184x864, 896x1152, 1152x896, 768x1344, 1344x768, 1536x672; Gemini 3 Pro Image: its 1K
//!   sizes, and its 2K and 4K ones, which are `imageConfig.imageSize` `2K` / `4K`, as Google's
//!   tables list them), else any size whose width:height is exactly one of the ratios. `auto` or
//!   none leaves it to the model (a 1:1 square, 1K). Other models' sizes are not known to the
//!   plugin: their ratios are, and they report the size asked, or none;
//! - `quality`: no such setting, as for Imagen: `auto` and `standard` are taken, others refused;
//! - params, under OpenAI-style or Google's own names: `aspect_ratio` and `image_size` (over the
//!   size's), and on Vertex AI `person_generation`, are `imageConfig` fields, as are `output_format`
//!   (`png`, `jpeg`) and `output_compression` (Vertex AI's `imageConfig.imageOutputOptions`); an
//!   `imageConfig` object is the starting point; Vertex AI's `labels` are the body's field. The
//!   Gemini API has none of these (output options, person setting, labels), so the plugin
//!   refuses them first, naming them. Every other param is a
//!   `generationConfig` (or request) field as the plugin's completions map it (`seed`,
//!   `temperature`, `safety_settings`, `responseModalities` over the plugin's, a
//!   `generationConfig` object, and any other name as it is: Google judges it); `candidateCount`
//!   is `n`'s, `response_format` and `user` are dropped, as for Imagen.
//!
//! Answers: the candidates' `inlineData` parts (`mimeType`, base64 `data`) are the images, in
//! order, at most `n`; text parts and the draft images Gemini 3 Pro Image makes while it thinks
//! (`"thought": true`, neither billed nor the answer) are skipped. Usage is `usageMetadata`, read
//! as the plugin's completions read it: these models bill tokens, the image being output tokens
//! (1290 an image on Gemini 2.5 Flash Image). No image at all (a blocked prompt's
//! `promptFeedback.blockReason`; a candidate's `finishReason` such as `IMAGE_SAFETY`,
//! `PROHIBITED_CONTENT`, `NO_IMAGE`; or text only) is the upstream's refusal of the prompt: a
//! 400 with Google's reasons, as Imagen's filtered images are.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::{
    GeneratedImage, ImageRequest, Images, ProviderError, Source, embedded_error,
    params_object_except,
};
use serde_json::{Map, Value, json};

use crate::convert::{generation_config_of, take_alias, take_aliases};
use crate::images::{
    ImageCall, Maker, OWNED, Ratio, Service, Sizes, no_image, output_options, quality, vertex_only,
};
use crate::stream::usage;
use crate::wire::GenerateContentResponse;

/// The aspect ratios of Gemini's image models, with Gemini 2.5 Flash Image's one size of each
/// (Google's table, <https://ai.google.dev/gemini-api/docs/image-generation>).
const FLASH: [Ratio; 10] = [
    Ratio {
        name: "1:1",
        reduced: (1, 1),
        sizes: &[(1024, 1024)],
    },
    Ratio {
        name: "2:3",
        reduced: (2, 3),
        sizes: &[(832, 1248)],
    },
    Ratio {
        name: "3:2",
        reduced: (3, 2),
        sizes: &[(1248, 832)],
    },
    Ratio {
        name: "3:4",
        reduced: (3, 4),
        sizes: &[(864, 1184)],
    },
    Ratio {
        name: "4:3",
        reduced: (4, 3),
        sizes: &[(1184, 864)],
    },
    Ratio {
        name: "4:5",
        reduced: (4, 5),
        sizes: &[(896, 1152)],
    },
    Ratio {
        name: "5:4",
        reduced: (5, 4),
        sizes: &[(1152, 896)],
    },
    Ratio {
        name: "9:16",
        reduced: (9, 16),
        sizes: &[(768, 1344)],
    },
    Ratio {
        name: "16:9",
        reduced: (16, 9),
        sizes: &[(1344, 768)],
    },
    Ratio {
        name: "21:9",
        reduced: (21, 9),
        sizes: &[(1536, 672)],
    },
];

/// Gemini 3 Pro Image's sizes of the same ratios, at 1K, 2K and 4K (Google's table, as above).
const PRO: [Ratio; 10] = [
    Ratio {
        name: "1:1",
        reduced: (1, 1),
        sizes: &[(1024, 1024), (2048, 2048), (4096, 4096)],
    },
    Ratio {
        name: "2:3",
        reduced: (2, 3),
        sizes: &[(848, 1264), (1696, 2528), (3392, 5056)],
    },
    Ratio {
        name: "3:2",
        reduced: (3, 2),
        sizes: &[(1264, 848), (2528, 1696), (5056, 3392)],
    },
    Ratio {
        name: "3:4",
        reduced: (3, 4),
        sizes: &[(896, 1200), (1792, 2400), (3584, 4800)],
    },
    Ratio {
        name: "4:3",
        reduced: (4, 3),
        sizes: &[(1200, 896), (2400, 1792), (4800, 3584)],
    },
    Ratio {
        name: "4:5",
        reduced: (4, 5),
        sizes: &[(928, 1152), (1856, 2304), (3712, 4608)],
    },
    Ratio {
        name: "5:4",
        reduced: (5, 4),
        sizes: &[(1152, 928), (2304, 1856), (4608, 3712)],
    },
    Ratio {
        name: "9:16",
        reduced: (9, 16),
        sizes: &[(768, 1376), (1536, 2752), (3072, 5504)],
    },
    Ratio {
        name: "16:9",
        reduced: (16, 9),
        sizes: &[(1376, 768), (2752, 1536), (5504, 3072)],
    },
    Ratio {
        name: "21:9",
        reduced: (21, 9),
        sizes: &[(1584, 672), (3168, 1344), (6336, 2688)],
    },
];

/// The size tiers (`imageConfig.imageSize`), the default first: Google refuses them in lower
/// case.
const TIERS: [&str; 3] = ["1K", "2K", "4K"];

/// How to ask for a bigger image, in the refusal of a quality.
const BIGGER: &str = "for 2K or 4K images ask a size such as 2048x2048 or 4096x4096 of \
                      gemini-3-pro-image-preview";

/// `imageConfig` fields with the caller's names for them, Google's first.
const IMAGE_CONFIG_ALIASES: &[&[&str]] = &[
    &["aspectRatio", "aspect_ratio"],
    &["imageSize", "image_size"],
    &["personGeneration", "person_generation"],
];

/// What only Vertex AI takes, under each of its names (Google's SDK says so of the Gemini API).
const VERTEX_ONLY: &[&[&str]] = &[
    &["person_generation", "personGeneration"],
    &["output_format"],
    &["output_compression"],
    &["imageOutputOptions", "image_output_options"],
    &["labels"],
];

/// Whether `model` (an id, or a resource name ending in one) is one of Gemini's image models.
pub(crate) fn is_image_model(model: &str) -> bool {
    model
        .trim()
        .rsplit('/')
        .next()
        .is_some_and(|id| id.contains("-image"))
}

/// What `model` makes: Google's tables for Gemini 2.5 Flash Image and Gemini 3 Pro Image; for
/// another model, only the ratios every one takes.
fn sizes(model: &str) -> Sizes {
    let id = model.trim().rsplit('/').next().unwrap_or_default();
    if id.starts_with("gemini-2.5-flash-image") {
        Sizes {
            ratios: &FLASH,
            tiers: &TIERS[..1],
        }
    } else if id.starts_with("gemini-3-pro-image") {
        Sizes {
            ratios: &PRO,
            tiers: &TIERS,
        }
    } else {
        Sizes {
            ratios: &FLASH,
            tiers: &[],
        }
    }
}

/// The `generateContent` call of `request` (of a Gemini image model) on `service`.
pub(crate) fn generate(
    request: &ImageRequest,
    service: Service,
) -> Result<ImageCall, ProviderError> {
    let route = &request.route.id;
    let model = request.model.trim();
    if request.n != 1 {
        return Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: n is {}, but {model} makes one image a request (Gemini's image \
             models take no candidateCount above 1): ask n 1",
            request.n
        )));
    }
    quality(request.quality.as_deref(), model, BIGGER, route)?;
    let sizes = sizes(model);
    let asked = sizes.asked(request.size.as_deref(), model, route)?;

    let mut params = params_object_except(&request.params, OWNED)?;
    params.retain(|_, value| !value.is_null());
    // `candidateCount` is `n`: the plugin's (it sends none, the default 1).
    take_alias(&mut params, &["candidateCount", "candidate_count"]);
    // Vertex AI's labels (billing) are a field of the body, as for Imagen.
    let labels = match service {
        Service::GeminiApi => {
            vertex_only(&params, VERTEX_ONLY, model, route)?;
            None
        }
        Service::VertexAi => params.remove("labels"),
    };
    let output = output_options(
        &mut params,
        &["imageOutputOptions", "image_output_options"],
        model,
        route,
    )?;
    let flat = take_aliases(&mut params, IMAGE_CONFIG_ALIASES);
    let (mut config, mut body) = generation_config_of(params, route)?;
    // The caller's `imageConfig` (a param of its own, or in `generationConfig`), the flat
    // params over it, and the size's ratio and tier where the caller set none.
    let mut image_config = match take_alias(&mut config, &["imageConfig", "image_config"]) {
        None => Map::new(),
        Some(Value::Object(image_config)) => image_config,
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: imageConfig must be an object"
            )));
        }
    };
    image_config.extend(flat);
    if let Some(output) = output {
        image_config.insert("imageOutputOptions".into(), Value::Object(output));
    }
    if let Some((ratio, tier)) = asked {
        image_config
            .entry("aspectRatio")
            .or_insert_with(|| json!(ratio.name));
        if tier > 0 {
            image_config
                .entry("imageSize")
                .or_insert_with(|| json!(sizes.tiers[tier]));
        }
    }
    let size = sizes.reported(
        request.size.as_deref(),
        asked,
        image_config.get("aspectRatio"),
        image_config.get("imageSize"),
    );
    // Images only: the models add text unless told not to, which the caller would pay for.
    let modalities = take_alias(&mut config, &["responseModalities", "response_modalities"]);
    config.insert(
        "responseModalities".into(),
        modalities.unwrap_or_else(|| json!(["IMAGE"])),
    );
    if !image_config.is_empty() {
        config.insert("imageConfig".into(), Value::Object(image_config));
    }
    body.insert(
        "contents".into(),
        json!([{"role": "user", "parts": [{"text": request.prompt}]}]),
    );
    body.insert("generationConfig".into(), Value::Object(config));
    if let Some(labels) = labels {
        body.insert("labels".into(), labels);
    }
    Ok(ImageCall {
        maker: Maker::Gemini,
        body: Value::Object(body),
        size,
    })
}

/// Reads a `generateContent` answer to `request`, whose answer reports `size`.
pub(crate) fn read(
    answer: &[u8],
    request: &ImageRequest,
    size: Option<String>,
) -> Result<Images, ProviderError> {
    let answer: GenerateContentResponse =
        serde_json::from_slice(answer).map_err(ProviderError::malformed)?;
    if let Some(error) = answer.error.as_ref().filter(|e| !e.is_null()) {
        return Err(embedded_error(error));
    }
    let mut images = Vec::new();
    let mut reasons = Vec::new();
    let mut said = Vec::new();
    if let Some(feedback) = answer.prompt_feedback
        && let Some(reason) = feedback.block_reason.filter(|r| !r.is_empty())
    {
        reasons.push(match feedback.block_reason_message {
            Some(message) => format!("the prompt was blocked: {reason}: {message}"),
            None => format!("the prompt was blocked: {reason}"),
        });
    }
    for (c, candidate) in answer.candidates.into_iter().enumerate() {
        if let Some(reason) = candidate
            .finish_reason
            .filter(|r| !r.is_empty() && r != "STOP")
        {
            reasons.push(match candidate.finish_message {
                Some(message) => format!("{reason}: {message}"),
                None => reason,
            });
        }
        let parts = candidate.content.map(|c| c.parts).unwrap_or_default();
        for (p, part) in parts.into_iter().enumerate() {
            // Drafts made while thinking are not the answer (and not billed).
            if part.thought == Some(true) {
                continue;
            }
            if let Some(blob) = part.inline_data {
                let bytes = STANDARD.decode(blob.data.trim()).map_err(|e| {
                    ProviderError::malformed(format!(
                        "candidates[{c}].content.parts[{p}].inlineData.data: {e}"
                    ))
                })?;
                images.push(GeneratedImage {
                    source: Source::Bytes(bytes),
                    media_type: Some(blob.mime_type.unwrap_or_else(|| "image/png".into())),
                    revised_prompt: None,
                });
            } else if let Some(text) = part.text {
                said.push(text);
            }
        }
    }
    if images.is_empty() {
        // Without a reason, the model's words are the only one (it may decline in text).
        let said = said.concat();
        if reasons.is_empty() && !said.trim().is_empty() {
            reasons.push(format!("it answered text only: {:?}", said.trim()));
        }
        return Err(no_image(
            &format!("{} made no image", request.model),
            &reasons,
        ));
    }
    images.truncate(request.n as usize);
    Ok(Images {
        model: request.model.clone(),
        images,
        usage: answer.usage_metadata.as_ref().map(usage),
        size,
        quality: None,
    })
}
