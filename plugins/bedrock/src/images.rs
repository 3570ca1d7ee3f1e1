//! Images through InvokeModel (`invoke`: `POST {base_url}/model/{modelId}/invoke`) with
//! Amazon's image models, which take one text-to-image body and give one answer:
//!
//! | model | sizes |
//! |---|---|
//! | Nova Canvas (`amazon.nova-canvas-v1:0`) | sides of 320 to 4096 pixels, multiples of 16, an aspect ratio from 1:4 to 4:1, at most 4,194,304 pixels |
//! | Titan Image Generator G1 v2 and v1 (`amazon.titan-image-generator-v2:0`, `amazon.titan-image-generator-v1`) | the 25 sizes of its user guide ([`TITAN_SIZES`]) |
//!
//! - Body: `{"taskType": "TEXT_IMAGE", "textToImageParams": {"text", "negativeText"?,
//!   "style"?}, "imageGenerationConfig": {"numberOfImages", "width", "height", "quality",
//!   "cfgScale"?, "seed"?}}`; answer: `{"images": [base64 PNG, ...], "error"?}`. AWS's user
//!   guides: "Request and response structure for image generation" (Nova,
//!   docs.aws.amazon.com/nova/latest/userguide/image-gen-req-resp-structure.html) and "Amazon
//!   Titan Image Generator G1 models"
//!   (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-image.html).
//! - `n` is `numberOfImages`, 1 to 5 for both families; more is refused rather than split
//!   into several calls, which a `seed` would make repeat the same images.
//! - `size` (`WxH`) is `width` and `height`; none or `auto` is 1024x1024. A size is always
//!   sent (Titan's own default, 1408x1408, is not among its sizes) so that the size reported,
//!   which the gateway prices by, is the one made.
//! - `quality`: none, `standard`, `low`, `medium` and `auto` → `standard`; `hd`, `high` and
//!   `premium` → `premium`: Bedrock's two levels, which it prices apart.
//! - Params: `negative_prompt` → `negativeText`, `style` → `style` (Nova Canvas only: Titan
//!   has no styles and refuses one), `cfg_scale` → `cfgScale`, `seed` → `seed`, each as the
//!   caller wrote it. `response_format` and `user` are the gateway's and left out;
//!   `output_format` may only be `png`, all Bedrock makes. As for rerank, the caller's other
//!   params join the body as they are (never in place of the plugin's keys, nulls left out),
//!   and Bedrock refuses what the model does not take, a 400 with its message.
//! - The answer: each image's bytes (`image/png`), with the size and quality sent. Usage: none
//!   (Bedrock bills these models per image, by size and quality).
//! - An answer whose `error` is set is the content moderation's refusal (of the prompt, or of
//!   an image made): 400, as Nova Canvas's refusal of a prompt (a `ValidationException`, mapped
//!   by `errors`) is. An answer without images, or with one that is not base64, is refused
//!   ([`ProviderError::Failed`]).
//!
//! The model is named as for embeddings and rerank: a model id, an inference profile id or an
//! ARN, its family told by the name it contains.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use gateway_plugin_sdk::http::Response;
use gateway_plugin_sdk::{
    GeneratedImage, ImageRequest, Images, ProviderError, Source, params_object_except,
};
use serde_json::{Map, Value, json};

use crate::invoke::{Invoke, parse};
use crate::wire::ImagesAnswer;

/// Body keys the plugin writes; a caller's param never replaces them.
const OWNED_KEYS: &[&str] = &["taskType", "textToImageParams", "imageGenerationConfig"];

/// Params the gateway reads for itself and no image model takes.
const DROPPED: &[&str] = &["user", "response_format"];

/// The most images one call makes, Nova Canvas's and Titan's alike.
const MAX_IMAGES: u32 = 5;

/// The size made when the caller names none (or `auto`).
const DEFAULT_SIZE: Size = Size {
    width: 1024,
    height: 1024,
};

/// Nova Canvas's bounds on a side, in pixels.
const NOVA_SIDES: std::ops::RangeInclusive<u32> = 320..=4096;

/// Nova Canvas's sides are multiples of this.
const NOVA_SIDE_STEP: u32 = 16;

/// Nova Canvas's most pixels (2048x2048).
const NOVA_MAX_PIXELS: u64 = 4_194_304;

/// Nova Canvas's widest aspect ratio, either way (4:1 and 1:4).
const NOVA_MAX_RATIO: u32 = 4;

/// The sizes Titan Image Generator G1 (v1 and v2) makes, as its user guide lists them.
pub const TITAN_SIZES: &[(u32, u32)] = &[
    (1024, 1024),
    (768, 768),
    (512, 512),
    (768, 1152),
    (384, 576),
    (1152, 768),
    (576, 384),
    (768, 1280),
    (384, 640),
    (1280, 768),
    (640, 384),
    (896, 1152),
    (448, 576),
    (1152, 896),
    (576, 448),
    (768, 1408),
    (384, 704),
    (1408, 768),
    (704, 384),
    (640, 1408),
    (320, 704),
    (1408, 640),
    (704, 320),
    (1152, 640),
    (1173, 640),
];

/// Which image API a model speaks: the same body, with different sizes and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Nova,
    Titan,
}

impl Family {
    pub fn of(model: &str) -> Result<Family, ProviderError> {
        if model.contains("amazon.nova-canvas") {
            Ok(Family::Nova)
        } else if model.contains("amazon.titan-image-generator") {
            Ok(Family::Titan)
        } else {
            Err(ProviderError::InvalidRequest(format!(
                "{model} does not make images: bedrock makes them with Amazon Nova Canvas \
                 (amazon.nova-canvas-v1:0) and Titan Image Generator \
                 (amazon.titan-image-generator-v2:0, amazon.titan-image-generator-v1)"
            )))
        }
    }

    fn name(self) -> &'static str {
        match self {
            Family::Nova => "Nova Canvas",
            Family::Titan => "Titan Image Generator",
        }
    }

    /// `size`, when the family makes it; else the caller's error, saying what it makes.
    fn check(self, size: Size) -> Result<Size, ProviderError> {
        let (fits, allowed) = match self {
            Family::Nova => (nova_fits(size), nova_sizes()),
            Family::Titan => (
                TITAN_SIZES.contains(&(size.width, size.height)),
                titan_sizes(),
            ),
        };
        if fits {
            Ok(size)
        } else {
            Err(ProviderError::InvalidRequest(format!(
                "size {size}: {} makes {allowed}",
                self.name()
            )))
        }
    }
}

/// An image's width and height in pixels, written `WxH` as OpenAI writes sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub width: u32,
    pub height: u32,
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

impl Size {
    /// The caller's `size`: `WxH`, or none or `auto` for [`DEFAULT_SIZE`].
    fn of(size: Option<&str>) -> Result<Size, ProviderError> {
        let text = match size.map(str::trim) {
            None | Some("auto") => return Ok(DEFAULT_SIZE),
            Some(text) => text,
        };
        let parsed = text.split_once('x').and_then(|(width, height)| {
            Some(Size {
                width: width.parse().ok()?,
                height: height.parse().ok()?,
            })
        });
        parsed.ok_or_else(|| {
            ProviderError::InvalidRequest(format!(
                "size {text:?} is not WIDTHxHEIGHT (such as 1024x1024) or auto"
            ))
        })
    }
}

fn nova_fits(size: Size) -> bool {
    let side = |pixels: u32| NOVA_SIDES.contains(&pixels) && pixels.is_multiple_of(NOVA_SIDE_STEP);
    let (long, short) = (size.width.max(size.height), size.width.min(size.height));
    side(size.width)
        && side(size.height)
        && long <= short.saturating_mul(NOVA_MAX_RATIO)
        && u64::from(size.width) * u64::from(size.height) <= NOVA_MAX_PIXELS
}

fn nova_sizes() -> String {
    format!(
        "sides of {} to {} pixels, multiples of {NOVA_SIDE_STEP}, with an aspect ratio from \
         1:{NOVA_MAX_RATIO} to {NOVA_MAX_RATIO}:1 and at most {NOVA_MAX_PIXELS} pixels",
        NOVA_SIDES.start(),
        NOVA_SIDES.end()
    )
}

fn titan_sizes() -> String {
    let sizes: Vec<String> = (TITAN_SIZES.iter())
        .map(|&(width, height)| Size { width, height }.to_string())
        .collect();
    format!("only {}", sizes.join(", "))
}

/// Bedrock's quality for the caller's: OpenAI's names, and Bedrock's own.
fn quality(quality: Option<&str>) -> Result<&'static str, ProviderError> {
    match quality {
        None | Some("standard" | "low" | "medium" | "auto") => Ok("standard"),
        Some("hd" | "high" | "premium") => Ok("premium"),
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "quality {other:?}: Bedrock's image models make standard (also asked as low, \
             medium or auto) and premium (also asked as hd or high)"
        ))),
    }
}

/// `n`, when one call makes that many images.
fn count(n: u32, family: Family) -> Result<u32, ProviderError> {
    if (1..=MAX_IMAGES).contains(&n) {
        Ok(n)
    } else {
        Err(ProviderError::InvalidRequest(format!(
            "n = {n}: {} makes 1 to {MAX_IMAGES} images a request",
            family.name()
        )))
    }
}

/// What one call asks for: its body, and the size and quality it makes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub body: Value,
    pub size: Size,
    pub quality: &'static str,
}

/// The InvokeModel call that makes `request`'s images; the caller's errors before any call.
pub fn plan(request: &ImageRequest) -> Result<Plan, ProviderError> {
    let family = Family::of(&request.model)?;
    let number = count(request.n, family)?;
    let size = family.check(Size::of(request.size.as_deref())?)?;
    let quality = quality(request.quality.as_deref())?;

    let mut params = params_object_except(&request.params, OWNED_KEYS)?;
    params.retain(|name, value| !value.is_null() && !DROPPED.contains(&name.as_str()));
    check_output_format(params.remove("output_format"))?;

    let mut text = Map::new();
    text.insert("text".into(), json!(request.prompt));
    if let Some(negative) = params.remove("negative_prompt") {
        text.insert("negativeText".into(), negative);
    }
    if let Some(style) = params.remove("style") {
        if family == Family::Titan {
            return Err(ProviderError::InvalidRequest(format!(
                "style: Titan Image Generator takes no style ({style}); Nova Canvas \
                 (amazon.nova-canvas-v1:0) does"
            )));
        }
        text.insert("style".into(), style);
    }

    let mut config = Map::new();
    config.insert("numberOfImages".into(), json!(number));
    config.insert("width".into(), json!(size.width));
    config.insert("height".into(), json!(size.height));
    config.insert("quality".into(), json!(quality));
    if let Some(cfg_scale) = params.remove("cfg_scale") {
        config.insert("cfgScale".into(), cfg_scale);
    }
    if let Some(seed) = params.remove("seed") {
        config.insert("seed".into(), seed);
    }

    let mut body = params;
    body.insert("taskType".into(), json!("TEXT_IMAGE"));
    body.insert("textToImageParams".into(), Value::Object(text));
    body.insert("imageGenerationConfig".into(), Value::Object(config));
    Ok(Plan {
        body: Value::Object(body),
        size,
        quality,
    })
}

/// Refuses an `output_format` other than PNG, the only format Bedrock's image models make.
fn check_output_format(format: Option<Value>) -> Result<(), ProviderError> {
    match format {
        None => Ok(()),
        Some(Value::String(format)) if format.eq_ignore_ascii_case("png") => Ok(()),
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "output_format {other}: Bedrock's image models make PNG only; leave output_format \
             out or set it to png"
        ))),
    }
}

/// Makes `request`'s images with one InvokeModel call.
pub fn generate_images(request: ImageRequest) -> Result<Images, ProviderError> {
    let plan = plan(&request)?;
    let invoke = Invoke::new(&request.route, &request.model)?;
    let response = invoke.send(&plan.body)?;
    read(response, request.model, &plan)
}

/// The images a successful `response` gives for `plan`, as `model` made them.
pub fn read(response: Response, model: String, plan: &Plan) -> Result<Images, ProviderError> {
    let answer: ImagesAnswer = parse(&response.bytes()?)?;
    if let Some(error) = answer.error.filter(|error| !error.trim().is_empty()) {
        return Err(ProviderError::InvalidRequest(format!(
            "Bedrock made no images: {error}"
        )));
    }
    let images = (answer.images.unwrap_or_default().iter().enumerate())
        .map(|(i, image)| decode(i, image))
        .collect::<Result<Vec<_>, ProviderError>>()?;
    if images.is_empty() {
        return Err(ProviderError::malformed("an answer without images"));
    }
    Ok(Images {
        model,
        images,
        usage: None,
        size: Some(plan.size.to_string()),
        quality: Some(plan.quality.to_owned()),
    })
}

/// Image number `i` of an answer, from its base64 text.
fn decode(i: usize, image: &str) -> Result<GeneratedImage, ProviderError> {
    let bytes = STANDARD
        .decode(image)
        .map_err(|error| ProviderError::malformed(format!("image {i} is not base64: {error}")))?;
    Ok(GeneratedImage {
        source: Source::Bytes(bytes),
        media_type: Some("image/png".into()),
        revised_prompt: None,
    })
}
