//! Content parts in OpenAI's shape, which OpenAI's chat `content` arrays and
//! the Commonbase API's messages share: `text`, `image_url` (an `https:` URL
//! or a `data:` URL), `input_audio` (base64) and `file` (`file_data`, a
//! `data:` URL), read into the plugin's parts with their media decoded once
//! and checked against `max_part_bytes`. Bases64 is read leniently about its
//! padding, as OpenAI does.

use serde::Deserialize;

use crate::encoding;
use crate::error::ApiError;
use crate::plugins::types;

/// A message's `content`: a string, or an array of parts.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of content parts")]
pub enum ContentBody {
    Text(String),
    Parts(Vec<PartBody>),
}

#[derive(Debug, Deserialize)]
pub struct PartBody {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
    /// An assistant's refusal, sent back as part of the conversation.
    pub refusal: Option<String>,
    pub image_url: Option<ImageUrlBody>,
    pub input_audio: Option<InputAudioBody>,
    pub file: Option<FileBody>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "{\"url\": ..., \"detail\"?: ...} or a URL")]
pub enum ImageUrlBody {
    Object { url: String, detail: Option<String> },
    Url(String),
}

#[derive(Debug, Deserialize)]
pub struct InputAudioBody {
    pub data: String,
    pub format: String,
}

#[derive(Debug, Deserialize)]
pub struct FileBody {
    pub file_data: Option<String>,
    pub filename: Option<String>,
    pub file_id: Option<String>,
}

/// Decodes base64 `data` of the part at `param`, refusing (413) what would be
/// larger than `max_part_bytes` before decoding it.
pub fn decode_base64(data: &str, param: &str, max_part_bytes: usize) -> Result<Vec<u8>, ApiError> {
    let data = data.trim();
    if encoding::base64_decoded_len(data) > max_part_bytes {
        return Err(ApiError::PartTooLarge {
            param: param.to_owned(),
            limit: max_part_bytes,
        });
    }
    encoding::base64_decode(data).map_err(|e| {
        ApiError::invalid(
            param.to_owned(),
            format!("{param} is not valid base64: {e}"),
        )
    })
}

/// The media type and bytes of a `data:<media type>;base64,<data>` URL.
pub fn data_url(
    url: &str,
    param: &str,
    max_part_bytes: usize,
) -> Result<Option<(String, Vec<u8>)>, ApiError> {
    let Some(rest) = url.strip_prefix("data:") else {
        return Ok(None);
    };
    let Some((media_type, data)) = rest.split_once(";base64,") else {
        return Err(ApiError::invalid(
            param.to_owned(),
            format!("{param}: a data URL must be data:<media type>;base64,<data>"),
        ));
    };
    let media_type = media_type.trim().to_ascii_lowercase();
    if media_type.is_empty() || !media_type.contains('/') {
        return Err(ApiError::invalid(
            param.to_owned(),
            format!("{param}: the data URL names no media type"),
        ));
    }
    let bytes = decode_base64(data, param, max_part_bytes)?;
    Ok(Some((media_type, bytes)))
}

/// An `https:` (or `http:`) URL the provider is to fetch.
pub fn remote_url(url: String, param: &str) -> Result<String, ApiError> {
    let lower = url.get(..8).unwrap_or(&url).to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        Ok(url)
    } else {
        Err(ApiError::invalid(
            param.to_owned(),
            format!("{param}: the URL must be https:, http: or a data: URL"),
        ))
    }
}

/// What becomes of a text part's text, given where it is (for errors).
pub type TextFilter<'a> = dyn FnMut(String, &dyn Fn() -> String) -> Result<String, ApiError> + 'a;

/// Reads `parts` (the content array at `place`) into the plugin's parts.
/// Text parts pass through `text` (the Commonbase API fills its variables there).
pub fn read(
    parts: Vec<PartBody>,
    place: &dyn Fn() -> String,
    max_part_bytes: usize,
    text: &mut TextFilter<'_>,
) -> Result<Vec<types::Part>, ApiError> {
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.into_iter().enumerate() {
        let param = || format!("{}[{j}]", place());
        let missing = |field: &str| {
            let param = format!("{}.{field}", param());
            ApiError::invalid(param, format!("a {} part needs {field}", part.kind))
        };
        let read = match part.kind.as_str() {
            "text" => match part.text {
                Some(t) => types::Part::Text(text(t, &|| format!("{}.text", param()))?),
                None => return Err(missing("text")),
            },
            "refusal" => match part.refusal {
                Some(refusal) => types::Part::Text(refusal),
                None => return Err(missing("refusal")),
            },
            "image_url" => {
                let param = format!("{}.image_url", param());
                let (url, detail) = match part.image_url {
                    Some(ImageUrlBody::Object { url, detail }) => (url, detail),
                    Some(ImageUrlBody::Url(url)) => (url, None),
                    None => return Err(missing("image_url")),
                };
                let url_param = format!("{param}.url");
                let (source, media_type) = match data_url(&url, &url_param, max_part_bytes)? {
                    Some((media_type, bytes)) => (types::Source::Bytes(bytes), Some(media_type)),
                    None => (types::Source::Url(remote_url(url, &url_param)?), None),
                };
                types::Part::Image(types::Image {
                    source,
                    media_type,
                    detail,
                })
            }
            "input_audio" => {
                let Some(audio) = part.input_audio else {
                    return Err(missing("input_audio"));
                };
                let param = format!("{}.input_audio.data", param());
                types::Part::Audio(types::Audio {
                    data: decode_base64(&audio.data, &param, max_part_bytes)?,
                    format: audio.format.to_ascii_lowercase(),
                })
            }
            "file" => {
                let Some(file) = part.file else {
                    return Err(missing("file"));
                };
                let param = format!("{}.file", param());
                let Some(data) = file.file_data else {
                    let why = match file.file_id {
                        Some(_) => {
                            "file_id is not supported (the gateway keeps no files): send file_data"
                        }
                        None => "a file part needs file_data",
                    };
                    return Err(ApiError::invalid(format!("{param}.file_data"), why));
                };
                let data_param = format!("{param}.file_data");
                let (media_type, bytes) = match data_url(&data, &data_param, max_part_bytes)? {
                    Some(decoded) => decoded,
                    // OpenAI's SDKs send a data URL; bare base64 is taken as a PDF.
                    None => (
                        "application/pdf".to_owned(),
                        decode_base64(&data, &data_param, max_part_bytes)?,
                    ),
                };
                types::Part::Document(types::Document {
                    source: types::Source::Bytes(bytes),
                    media_type: Some(media_type),
                    title: file.filename,
                })
            }
            other => {
                return Err(ApiError::invalid(
                    format!("{}.type", param()),
                    format!(
                        "content part type {other:?} is not supported (\"text\", \"image_url\", \
                         \"input_audio\", \"file\")"
                    ),
                ));
            }
        };
        out.push(read);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(json: &str, max: usize) -> Result<Vec<types::Part>, ApiError> {
        let body: Vec<PartBody> = serde_json::from_str(json).unwrap();
        read(body, &|| "messages[0].content".into(), max, &mut |t, _| {
            Ok(t)
        })
    }

    fn param_of(error: ApiError) -> String {
        match error {
            ApiError::InvalidParam { param, .. } | ApiError::PartTooLarge { param, .. } => param,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_kind_is_read_and_media_decoded() {
        let read = parts(
            r#"[{"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/PNG;base64,aGkh", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
                {"type": "input_audio", "input_audio": {"data": "aGk", "format": "WAV"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERg==", "filename": "a.pdf"}}]"#,
            1 << 20,
        )
        .unwrap();
        assert_eq!(read[0], types::Part::Text("look".into()));
        assert_eq!(
            read[1],
            types::Part::Image(types::Image {
                source: types::Source::Bytes(b"hi!".to_vec()),
                media_type: Some("image/png".into()),
                detail: Some("low".into()),
            })
        );
        assert_eq!(
            read[2],
            types::Part::Image(types::Image {
                source: types::Source::Url("https://x.test/a.jpg".into()),
                media_type: None,
                detail: None,
            })
        );
        assert_eq!(
            read[3],
            types::Part::Audio(types::Audio {
                data: b"hi".to_vec(),
                format: "wav".into(),
            })
        );
        assert_eq!(
            read[4],
            types::Part::Document(types::Document {
                source: types::Source::Bytes(b"%PDF".to_vec()),
                media_type: Some("application/pdf".into()),
                title: Some("a.pdf".into()),
            })
        );
    }

    #[test]
    fn bad_parts_are_refused_by_their_place() {
        let cases = [
            (
                r#"[{"type": "image_url", "image_url": {"url": "ftp://x"}}]"#,
                "messages[0].content[0].image_url.url",
            ),
            (
                r#"[{"type": "image_url", "image_url": {"url": "data:image/png,abc"}}]"#,
                "messages[0].content[0].image_url.url",
            ),
            (
                r#"[{"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}}]"#,
                "messages[0].content[0].image_url.url",
            ),
            (
                r#"[{"type": "text"}, {"type": "x"}]"#,
                "messages[0].content[0].text",
            ),
            (
                r#"[{"type": "text", "text": "a"}, {"type": "x"}]"#,
                "messages[0].content[1].type",
            ),
            (
                r#"[{"type": "file", "file": {"file_id": "file-1"}}]"#,
                "messages[0].content[0].file.file_data",
            ),
        ];
        for (json, param) in cases {
            assert_eq!(param_of(parts(json, 1 << 20).unwrap_err()), param, "{json}");
        }
    }

    #[test]
    fn a_part_over_the_limit_is_413_before_it_is_decoded() {
        let data = "A".repeat(4000);
        let json = format!(
            r#"[{{"type": "input_audio", "input_audio": {{"data": "{data}", "format": "wav"}}}}]"#
        );
        let error = parts(&json, 2999).unwrap_err();
        assert_eq!(error.status(), hyper::StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(param_of(error), "messages[0].content[0].input_audio.data");
        assert!(parts(&json, 3000).is_ok());
        // Padding counts for nothing: "aGk=" decodes to 2 bytes, not 3.
        let padded =
            r#"[{"type": "input_audio", "input_audio": {"data": "aGk=", "format": "wav"}}]"#;
        assert!(parts(padded, 2).is_ok());
        assert!(parts(padded, 1).is_err());
    }
}
