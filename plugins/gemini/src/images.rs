//! Images from Google's image models, on the Gemini API and on Vertex AI: Imagen's `predict`
//! (see `imagen`) and the `generateContent` of Gemini's image models (see `image_output`). Pure
//! (no I/O), so it is unit-tested natively; the vertex plugin uses [`ImageCall`] as it is, under
//! its own URL and credentials.
//!
//! What the two kinds share lives here, once: the caller's `size` read as one of the model's
//! aspect ratios and size tiers (an own size of the model names its tier; any other size of
//! exactly one of its ratios is that ratio at the default tier; `auto` or none leaves it to the
//! model; anything else is refused, listing what the model makes), the size the answer reports,
//! the `quality` setting neither has, the request fields the plugin sets itself, the params only
//! Vertex AI takes and OpenAI's `output_format` / `output_compression`, and an answer without
//! images, which is Google's refusal of the prompt.

use gateway_plugin_sdk::{ImageRequest, Images, ProviderError, UpstreamError};
use serde_json::{Map, Value, json};

use crate::convert::take_alias;
use crate::{image_output, imagen};

/// Which service a call goes to: Vertex AI takes parameters the Gemini API does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    GeminiApi,
    VertexAi,
}

impl Service {
    /// The plugin that calls it, for refusals.
    fn plugin(self) -> &'static str {
        match self {
            Service::GeminiApi => "the gemini plugin",
            Service::VertexAi => "the vertex plugin",
        }
    }
}

/// The kind of model a call makes images with, which decides its method and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Maker {
    /// Imagen: `predict`.
    Imagen,
    /// Gemini's image models: `generateContent`.
    Gemini,
}

/// One call that makes images: the method on the model's URL, its body, and what reading its
/// answer needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageCall {
    pub(crate) maker: Maker,
    pub(crate) body: Value,
    /// The size the answer reports (see [`Sizes::reported`]).
    pub(crate) size: Option<String>,
}

impl ImageCall {
    /// The call of `request` on `service`. A model that makes no images, and what the model
    /// does not take, are refused here, before anything is sent.
    pub fn of(request: &ImageRequest, service: Service) -> Result<ImageCall, ProviderError> {
        if imagen::is_imagen(&request.model) {
            imagen::predict(request, service)
        } else if image_output::is_image_model(&request.model) {
            image_output::generate(request, service)
        } else {
            Err(ProviderError::InvalidRequest(format!(
                "{} is not an image model: {} makes images with Imagen models (e.g. \
                 imagen-4.0-generate-001) and Gemini's image models (e.g. gemini-2.5-flash-image)",
                request.model,
                service.plugin()
            )))
        }
    }

    /// The method of the call on the model's URL (`…/models/{model}:{method}`).
    pub fn method(&self) -> &'static str {
        match self.maker {
            Maker::Imagen => "predict",
            Maker::Gemini => "generateContent",
        }
    }

    /// The request body.
    pub fn body(&self) -> &Value {
        &self.body
    }

    /// Reads the upstream's (successful) answer to the call of `request`.
    pub fn read(self, answer: &[u8], request: &ImageRequest) -> Result<Images, ProviderError> {
        match self.maker {
            Maker::Imagen => imagen::read_predictions(answer, request, self.size),
            Maker::Gemini => image_output::read(answer, request, self.size),
        }
    }
}

/// Request fields the plugin sets itself (from the request's own fields), and the ones it
/// drops: `response_format` is how the gateway writes the images to its caller, `user` has no
/// Google field.
pub(crate) const OWNED: &[&str] = &[
    "model",
    "prompt",
    "n",
    "size",
    "quality",
    "response_format",
    "user",
];

/// An aspect ratio a model takes, with the sizes it makes of it.
pub(crate) struct Ratio {
    pub name: &'static str,
    /// Width and height, reduced.
    pub reduced: (u32, u32),
    /// The size the model makes of it at each of its size tiers (see [`Sizes::tiers`]), the
    /// default first.
    pub sizes: &'static [(u32, u32)],
}

/// What a model makes: its aspect ratios, and the size tiers it takes, by the names the model
/// takes them under, the default first (`1K`, `2K`, ...). A model without tiers is one whose
/// sizes the plugin does not know: only its ratios are.
#[derive(Clone, Copy)]
pub(crate) struct Sizes {
    pub ratios: &'static [Ratio],
    pub tiers: &'static [&'static str],
}

/// The ratio a size asks, and the size tier (an index of [`Sizes::tiers`]: 0 unless the size
/// is one of the model's own); `None` for the model's default.
pub(crate) type Asked = Option<(&'static Ratio, usize)>;

impl Sizes {
    /// What `size` asks of `maker` (the model, in refusals) on `route`. Any other size than the
    /// ones [`Asked`] describes is refused, listing what the model makes.
    pub fn asked(
        self,
        size: Option<&str>,
        maker: &str,
        route: &str,
    ) -> Result<Asked, ProviderError> {
        let size = match size.map(str::trim) {
            None => return Ok(None),
            Some(size) if size.eq_ignore_ascii_case("auto") => return Ok(None),
            Some(size) => size,
        };
        let parsed = size.split_once('x').and_then(|(width, height)| {
            let width: u32 = width.parse().ok()?;
            let height: u32 = height.parse().ok()?;
            (width > 0 && height > 0).then_some((width, height))
        });
        if let Some((width, height)) = parsed {
            // The model's own sizes first: they say which tier is asked.
            for ratio in self.ratios {
                let mut own = ratio.sizes.iter().take(self.tiers.len());
                if let Some(tier) = own.position(|own| *own == (width, height)) {
                    return Ok(Some((ratio, tier)));
                }
            }
            let divisor = gcd(width, height);
            let reduced = (width / divisor, height / divisor);
            if let Some(ratio) = self.ratios.iter().find(|ratio| ratio.reduced == reduced) {
                return Ok(Some((ratio, 0)));
            }
        }
        let mut taken = vec!["auto".to_owned()];
        for tier in 0..self.tiers.len() {
            let own = self.ratios.iter().filter_map(|ratio| ratio.sizes.get(tier));
            taken.extend(own.copied().map(dimensions));
        }
        let names: Vec<&str> = self.ratios.iter().map(|ratio| ratio.name).collect();
        let ratios = match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: size {size:?} is not one {maker} makes: it takes {}, or any \
             width x height of ratio {ratios}",
            taken.join(", ")
        )))
    }

    /// The size the answer reports: the request's `size` when it chose the ratio made
    /// (`made_ratio`, the aspect ratio sent; none is the model's default, 1:1); otherwise the
    /// model's own size for the ratio and tier made (`made_tier`, the tier sent; none is the
    /// default). `None` where the plugin does not know it: a ratio or tier it does not know, or
    /// a model whose sizes it does not know.
    pub fn reported(
        self,
        size: Option<&str>,
        asked: Asked,
        made_ratio: Option<&Value>,
        made_tier: Option<&Value>,
    ) -> Option<String> {
        let made_ratio = made_ratio.map_or(Some("1:1"), Value::as_str)?;
        if let (Some(size), Some((ratio, _))) = (size, asked)
            && ratio.name == made_ratio
        {
            return Some(size.trim().to_owned());
        }
        let ratio = self.ratios.iter().find(|ratio| ratio.name == made_ratio)?;
        let tier = match made_tier {
            None => 0,
            Some(tier) => {
                let tier = tier.as_str()?;
                self.tiers
                    .iter()
                    .position(|name| name.eq_ignore_ascii_case(tier))?
            }
        };
        if tier >= self.tiers.len() {
            return None;
        }
        ratio.sizes.get(tier).copied().map(dimensions)
    }
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

/// Google's image models have no quality setting: the caller's default ones are taken, any
/// other refused, `bigger` telling how to ask for a bigger image instead.
pub(crate) fn quality(
    quality: Option<&str>,
    maker: &str,
    bigger: &str,
    route: &str,
) -> Result<(), ProviderError> {
    match quality.map(str::trim) {
        None => Ok(()),
        Some(quality)
            if quality.eq_ignore_ascii_case("auto") || quality.eq_ignore_ascii_case("standard") =>
        {
            Ok(())
        }
        // `hd` could be read as a bigger size, but OpenAI's `hd` is finer detail at the same
        // size, and only some models make bigger images: those are asked with their size.
        Some(other) => Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: quality {other:?} is not one {maker} takes: it has no quality \
             setting (auto or standard); {bigger}"
        ))),
    }
}

/// Refuses, naming it as the caller did, a param of `vertex_only` (each field under its
/// names), which `maker` takes on Vertex AI but not on the Gemini API.
pub(crate) fn vertex_only(
    params: &Map<String, Value>,
    vertex_only: &[&[&str]],
    maker: &str,
    route: &str,
) -> Result<(), ProviderError> {
    let given = vertex_only
        .iter()
        .flat_map(|aliases| aliases.iter())
        .find(|name| params.contains_key(**name));
    match given {
        None => Ok(()),
        Some(name) => Err(ProviderError::InvalidRequest(format!(
            "route `{route}`: {name} is not supported by {maker} on the Gemini API \
             (Vertex AI takes it)"
        ))),
    }
}

/// The output options (`{"mimeType", "compressionQuality"}`) from OpenAI's `output_format`
/// and `output_compression`, over the caller's own object (under `aliases`); `None` when none
/// is given.
pub(crate) fn output_options(
    params: &mut Map<String, Value>,
    aliases: &[&str],
    maker: &str,
    route: &str,
) -> Result<Option<Map<String, Value>>, ProviderError> {
    let mut options = match take_alias(params, aliases) {
        None => None,
        Some(Value::Object(options)) => Some(options),
        Some(_) => {
            return Err(ProviderError::InvalidRequest(format!(
                "route `{route}`: {} must be an object",
                aliases[0]
            )));
        }
    };
    if let Some(format) = params.remove("output_format") {
        let mime_type = match format.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("png") => "image/png",
            Some("jpeg" | "jpg") => "image/jpeg",
            _ => {
                return Err(ProviderError::InvalidRequest(format!(
                    "route `{route}`: output_format {format} is not one {maker} makes: png or \
                     jpeg"
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

/// An answer without images: Google's filters removed every one, or blocked the prompt. It is
/// Google's refusal of the prompt, as a blocked prompt's 400 is, so it is passed on as one: the
/// caller sees a 400 saying `what` with Google's `reasons`, and the gateway does not try again.
pub(crate) fn no_image(what: &str, reasons: &[String]) -> ProviderError {
    let why = if reasons.is_empty() {
        "Google gave no reason".to_owned()
    } else {
        reasons.join("; ")
    };
    ProviderError::Upstream(UpstreamError {
        status: 400,
        message: format!("{what} ({why})"),
        retry_after: None,
    })
}
