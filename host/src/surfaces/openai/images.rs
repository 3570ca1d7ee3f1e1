//! `POST /v1/images/generations`: images made from a text prompt, in OpenAI's shape, served by
//! any route whose plugin makes images (OpenAI's DALL-E and GPT Image, Imagen on Gemini and
//! Vertex AI, Nova Canvas and Titan on Bedrock).
//!
//! The body: `model` (`ROUTE/MODEL`, a route or an alias), `prompt`, `n` (1 to 10, 1 unless
//! asked), `size`, `quality`, `response_format` (`url` or `b64_json`); every other field
//! (`style`, `background`, `output_format`, `negative_prompt`, ...) goes to the plugin as a
//! parameter, `response_format` too. The answer: `created`, `data` (each image's `b64_json`, or
//! its `url` where the provider keeps it or the caller asked for URLs: then a `data:` URL of its
//! bytes), `revised_prompt` where the model rewrote the prompt, `size` and `quality` as made,
//! and `usage` where the provider bills images by tokens. Streamed image generation is not
//! served.

use std::convert::Infallible;

use serde::de::MapAccess;
use serde_json::{Map, Value, json};

use super::Endpoint;
use super::request::{self, Body, Fields, read};
use crate::error::ApiError;
use crate::flow::{Ask, Drawn, Envelope, Head, Images as Asked, Kind, MAX_IMAGES, Picture};

/// `POST /v1/images/generations`.
pub struct Images(Body<ImageFields>);

/// The fields the surface reads itself (`response_format` is read from the parameters, which
/// keep it for the plugin).
#[derive(Debug, Default)]
pub struct ImageFields {
    model: Option<String>,
    prompt: Option<String>,
    n: Option<u32>,
    size: Option<String>,
    quality: Option<String>,
    stream: Option<bool>,
}

impl Fields for ImageFields {
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "model" => read(map, &mut self.model),
            "prompt" => read(map, &mut self.prompt),
            "n" => read(map, &mut self.n),
            "size" => read(map, &mut self.size),
            "quality" => read(map, &mut self.quality),
            "stream" => read(map, &mut self.stream),
            _ => Ok(false),
        }
    }
}

impl ImageFields {
    /// What must hold before routing: a model, a prompt that says something, a number of images
    /// OpenAI's API takes, and no stream.
    fn check(&self) -> Result<(), ApiError> {
        request::require_model(&self.model)?;
        match self.prompt.as_deref() {
            None => return Err(ApiError::invalid("prompt", "prompt is required")),
            Some(prompt) if prompt.trim().is_empty() => {
                return Err(ApiError::invalid("prompt", "prompt must not be empty"));
            }
            Some(_) => {}
        }
        if let Some(n) = self.n
            && !(1..=MAX_IMAGES).contains(&n)
        {
            return Err(ApiError::invalid(
                "n",
                format!("n must be between 1 and {MAX_IMAGES}"),
            ));
        }
        for (param, value) in [("size", &self.size), ("quality", &self.quality)] {
            if value
                .as_deref()
                .is_some_and(|value| value.trim().is_empty())
            {
                return Err(ApiError::invalid(
                    param,
                    format!("{param} must not be empty"),
                ));
            }
        }
        if self.stream == Some(true) {
            return Err(ApiError::invalid(
                "stream",
                "streamed image generation is not served: ask without stream",
            ));
        }
        Ok(())
    }
}

/// Whether the caller asked for URLs (`response_format: "url"`); anything but `url`,
/// `b64_json` or nothing is refused.
fn wants_urls(params: &Map<String, Value>) -> Result<bool, ApiError> {
    match params.get("response_format") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(format)) if format == "url" => Ok(true),
        Some(Value::String(format)) if format == "b64_json" => Ok(false),
        Some(_) => Err(ApiError::invalid(
            "response_format",
            "response_format must be \"url\" or \"b64_json\"",
        )),
    }
}

impl Endpoint for Images {
    const KIND: Kind = Kind::Images;
    const PATH: &'static str = "/v1/images/generations";

    fn read(_: &Head, body: &[u8]) -> Result<Self, ApiError> {
        let body: Body<ImageFields> = request::parse_body(body)?;
        body.fields.check()?;
        wants_urls(&body.params)?;
        request::user(&body.params)?;
        Ok(Images(body))
    }
    fn model_and_params(&self) -> (&Option<String>, &Map<String, Value>) {
        (&self.0.fields.model, &self.0.params)
    }
    fn user(&self) -> Option<&str> {
        request::user(&self.0.params).ok().flatten()
    }
    fn asks(mut self) -> Result<Ask<Infallible, Infallible>, ApiError> {
        let fields = &mut self.0.fields;
        Ok(Ask::Images(Asked {
            prompt: fields.prompt.take().unwrap_or_default(),
            n: fields.n.unwrap_or(1),
            size: fields.size.take(),
            quality: fields.quality.take(),
            urls: wants_urls(&self.0.params)?,
            codec: answer,
        }))
    }
}

/// The answer, in OpenAI's shape.
fn answer(_: &Envelope<'_>, drawn: &Drawn<'_>) -> String {
    let data: Vec<Value> = (drawn.images.iter())
        .map(|drawing| {
            let mut item = match &drawing.picture {
                Picture::Base64(data) => json!({ "b64_json": data }),
                Picture::Url(url) => json!({ "url": url }),
                Picture::Summary(summary) => json!({ "b64_json": summary }),
            };
            if let Some(revised) = drawing.revised_prompt {
                item["revised_prompt"] = json!(revised);
            }
            item
        })
        .collect();
    let mut answer = Map::new();
    answer.insert("created".into(), json!(drawn.created));
    answer.insert("data".into(), Value::Array(data));
    if let Some(size) = drawn.size {
        answer.insert("size".into(), json!(size));
    }
    if let Some(quality) = drawn.quality {
        answer.insert("quality".into(), json!(quality));
    }
    if let Some(metered) = &drawn.usage {
        let usage = metered.usage;
        let text = usage
            .prompt_tokens
            .saturating_sub(usage.image_prompt_tokens.unwrap_or(0));
        answer.insert(
            "usage".into(),
            json!({
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "input_tokens_details": {
                    "text_tokens": text,
                    "image_tokens": usage.image_prompt_tokens.unwrap_or(0),
                },
            }),
        );
    }
    Value::Object(answer).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::flow::Drawing;
    use crate::flow::Surface;

    fn parsed(body: &str) -> Result<Images, ApiError> {
        let head = hyper::Request::new(()).into_parts().0;
        Images::parse(&head, body.as_bytes())
    }

    fn asked(body: &str) -> Asked {
        match parsed(body).and_then(|images| images.ask(Kind::Images, &Config::default())) {
            Ok(Ask::Images(asked)) => asked,
            Ok(_) => panic!("{body}: not images"),
            Err(error) => panic!("{body}: {error:?}"),
        }
    }

    #[test]
    fn the_surface_reads_what_it_needs_and_leaves_the_rest_to_the_plugin() {
        let body = r#"{"model": "r/m", "prompt": "a cat", "n": 2, "size": "1024x1792",
            "quality": "hd", "response_format": "url", "style": "vivid", "stream": false}"#;
        let images = parsed(body).unwrap();
        let params = &images.0.params;
        assert_eq!(params.get("style"), Some(&json!("vivid")));
        assert_eq!(params.get("response_format"), Some(&json!("url")));
        assert!(!params.contains_key("stream") && !params.contains_key("n"));
        let asked = asked(body);
        assert_eq!(asked.prompt, "a cat");
        assert_eq!(asked.n, 2);
        assert_eq!(asked.size.as_deref(), Some("1024x1792"));
        assert_eq!(asked.quality.as_deref(), Some("hd"));
        assert!(asked.urls);
        let asked = self::asked(r#"{"model": "r/m", "prompt": "a cat"}"#);
        assert_eq!((asked.n, asked.size, asked.urls), (1, None, false));
    }

    #[test]
    fn a_body_without_what_images_need_is_refused_naming_the_field() {
        for (body, param) in [
            (r#"{"prompt": "a cat"}"#, "model"),
            (r#"{"model": "r/m"}"#, "prompt"),
            (r#"{"model": "r/m", "prompt": "  "}"#, "prompt"),
            (r#"{"model": "r/m", "prompt": "a", "n": 0}"#, "n"),
            (r#"{"model": "r/m", "prompt": "a", "n": 11}"#, "n"),
            (r#"{"model": "r/m", "prompt": "a", "size": ""}"#, "size"),
            (
                r#"{"model": "r/m", "prompt": "a", "quality": " "}"#,
                "quality",
            ),
            (
                r#"{"model": "r/m", "prompt": "a", "stream": true}"#,
                "stream",
            ),
            (
                r#"{"model": "r/m", "prompt": "a", "response_format": "png"}"#,
                "response_format",
            ),
        ] {
            match parsed(body) {
                Err(ApiError::InvalidParam { param: got, .. }) => assert_eq!(got, param, "{body}"),
                Err(error) => panic!("{body}: {error:?}"),
                Ok(_) => panic!("{body} was taken"),
            }
        }
        let error = parsed(r#"{"model": "r/m", "prompt": "a", "n": "2"}"#)
            .err()
            .unwrap();
        assert!(error.to_string().contains('n'), "{error}");
    }

    #[test]
    fn the_answer_has_openai_s_fields() {
        let envelope = Envelope {
            invocation_id: "id-1",
            project_id: "p",
            kind: Kind::Images,
            model: "m",
        };
        let usage = crate::store::TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 100,
            total_tokens: 110,
            image_prompt_tokens: Some(4),
            ..Default::default()
        };
        let drawn = Drawn {
            images: vec![
                Drawing {
                    picture: Picture::Base64("AAAA".into()),
                    revised_prompt: Some("a grey cat"),
                },
                Drawing {
                    picture: Picture::Url("https://x/y.png".into()),
                    revised_prompt: None,
                },
                Drawing {
                    picture: Picture::Summary(json!({"kind": "image", "bytes": 3})),
                    revised_prompt: None,
                },
            ],
            created: 7,
            size: Some("1024x1024"),
            quality: None,
            usage: Some(crate::flow::Metered {
                usage: &usage,
                cost_usd: None,
            }),
        };
        let answer: Value = serde_json::from_str(&answer(&envelope, &drawn)).unwrap();
        assert_eq!(
            answer,
            json!({
                "created": 7,
                "data": [
                    {"b64_json": "AAAA", "revised_prompt": "a grey cat"},
                    {"url": "https://x/y.png"},
                    {"b64_json": {"kind": "image", "bytes": 3}},
                ],
                "size": "1024x1024",
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 100,
                    "total_tokens": 110,
                    "input_tokens_details": {"text_tokens": 6, "image_tokens": 4},
                },
            })
        );
    }
}
