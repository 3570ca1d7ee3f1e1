//! A message's content parts: text, images, audio, documents and reasoning,
//! read the ways provider wire formats want them (joined text, base64, a
//! `data:` URL).

use std::borrow::Cow;
use std::fmt;

use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use serde::{Serialize, Serializer};

use crate::{Document, Image, Message, Part, ProviderError, Reasoning, Source};

impl Part {
    /// The part's kind as the gateway names it in errors and records:
    /// `"text"`, `"image"`, `"audio"`, `"document"` or `"reasoning"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Part::Text(_) => "text",
            Part::Image(_) => "image",
            Part::Audio(_) => "audio",
            Part::Document(_) => "document",
            Part::Reasoning(_) => "reasoning",
        }
    }

    /// The error for a part the provider cannot take:
    /// [`ProviderError::InvalidRequest`] naming `provider` and the part's kind
    /// (the gateway answers 400).
    pub fn unsupported(&self, provider: &str) -> ProviderError {
        ProviderError::InvalidRequest(format!("{provider} does not take {} parts", self.kind()))
    }

    /// The error for a part the provider cannot take on message `i`, of `role`:
    /// [`ProviderError::InvalidRequest`] naming the message, `provider`, the part's kind and
    /// the role (the gateway answers 400).
    pub fn unsupported_on(&self, i: usize, provider: &str, role: &str) -> ProviderError {
        ProviderError::InvalidRequest(format!(
            "messages[{i}]: {provider} does not take {} parts on {role} messages",
            self.kind()
        ))
    }
}

impl Message {
    /// A message of `role` with `text` as its only part.
    pub fn text_message(role: crate::Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::Text(text.into())],
            name: None,
            function_call: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }

    /// The message's text parts, joined with `"\n"` (what a provider that
    /// takes one string per message sends); other parts are left out, so
    /// check [`Message::text_only`] first where they matter.
    pub fn text(&self) -> Cow<'_, str> {
        let mut texts = self.parts.iter().filter_map(|part| match part {
            Part::Text(text) => Some(text.as_str()),
            _ => None,
        });
        let Some(first) = texts.next() else {
            return Cow::Borrowed("");
        };
        match texts.next() {
            None => Cow::Borrowed(first),
            Some(second) => {
                let mut joined = format!("{first}\n{second}");
                for text in texts {
                    joined.push('\n');
                    joined.push_str(text);
                }
                Cow::Owned(joined)
            }
        }
    }

    /// [`Message::text`] for a provider that takes only text: the error of
    /// [`Part::unsupported`] naming `provider` when the message has an image,
    /// audio or a document. Reasoning parts are left out, as [`Message::text`]
    /// does.
    pub fn text_only(&self, provider: &str) -> Result<Cow<'_, str>, ProviderError> {
        match self.first_media() {
            Some(part) => Err(part.unsupported(provider)),
            None => Ok(self.text()),
        }
    }

    /// [`Message::text_only`] for message `i` of a conversation: the error of
    /// [`Part::unsupported_on`] naming the message, `provider` and the message's role when it
    /// has an image, audio or a document.
    pub fn text_only_at(&self, i: usize, provider: &str) -> Result<Cow<'_, str>, ProviderError> {
        match self.first_media() {
            Some(part) => Err(part.unsupported_on(i, provider, self.role.as_str())),
            None => Ok(self.text()),
        }
    }

    /// Whether the message has any text part (an assistant message that only
    /// called tools has none).
    pub fn has_text(&self) -> bool {
        self.parts.iter().any(|part| matches!(part, Part::Text(_)))
    }

    /// The first part that is neither text nor reasoning (an image, audio or
    /// a document), if any: what a text-only provider refuses with
    /// [`Part::unsupported`].
    pub fn first_media(&self) -> Option<&Part> {
        self.parts
            .iter()
            .find(|part| !matches!(part, Part::Text(_) | Part::Reasoning(_)))
    }

    /// The message's reasoning parts, in order.
    pub fn reasoning(&self) -> impl Iterator<Item = &Reasoning> {
        self.parts.iter().filter_map(|part| match part {
            Part::Reasoning(reasoning) => Some(reasoning),
            _ => None,
        })
    }
}

/// Bytes as standard base64 (with padding) in a serialized body: encoded
/// straight into the body as it is written, never into a string of its own
/// first (a 20 MiB image would otherwise take 27 MB more while the body is
/// built). What provider APIs take as a `data` field of base64 (Anthropic's
/// `base64` sources, Gemini's `inlineData`, OpenAI's `input_audio`).
///
/// ```
/// use gateway_plugin_sdk::Base64;
///
/// let body = serde_json::json!({"data": Base64(b"hi!")});
/// assert_eq!(body.to_string(), r#"{"data":"aGkh"}"#);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Base64<'a>(pub &'a [u8]);

/// The byte count, not the bytes (which a log line has no use for).
impl fmt::Debug for Base64<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Base64({} bytes)", self.0.len())
    }
}

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&Base64Display::new(self.0, &STANDARD))
    }
}

/// A [`Source`] as OpenAI-style APIs take it in `image_url.url` and
/// `file.file_data`: its URL as it is, or its bytes as a
/// `data:<media type>;base64,<data>` URL of `media_type`, base64-encoded
/// straight into the body as it is written (as [`Base64`] is).
///
/// ```
/// use gateway_plugin_sdk::{DataUrl, Source};
///
/// let source = Source::Bytes(b"hi!".to_vec());
/// let url = DataUrl { source: &source, media_type: "image/gif" };
/// assert_eq!(serde_json::to_string(&url).unwrap(), r#""data:image/gif;base64,aGkh""#);
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct DataUrl<'a> {
    /// The URL, or the bytes.
    pub source: &'a Source,
    /// The media type of a `data:` URL (unused for a URL source).
    pub media_type: &'a str,
}

/// The URL, or the media type and the byte count (not the bytes).
impl fmt::Debug for DataUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Url(url) => f.debug_tuple("DataUrl").field(url).finish(),
            Source::Bytes(bytes) => write!(
                f,
                "DataUrl(data:{};base64 of {} bytes)",
                self.media_type,
                bytes.len()
            ),
        }
    }
}

impl Serialize for DataUrl<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.source {
            Source::Url(url) => serializer.serialize_str(url),
            Source::Bytes(bytes) => serializer.collect_str(&format_args!(
                "data:{};base64,{}",
                self.media_type,
                Base64Display::new(bytes, &STANDARD)
            )),
        }
    }
}

impl Source {
    /// The bytes as standard base64 (with padding), written straight into a
    /// body as it is serialized (see [`Base64`]); `None` for a URL.
    pub fn as_base64(&self) -> Option<Base64<'_>> {
        match self {
            Source::Bytes(bytes) => Some(Base64(bytes)),
            Source::Url(_) => None,
        }
    }

    /// The URL, `None` for bytes.
    pub fn url(&self) -> Option<&str> {
        match self {
            Source::Url(url) => Some(url),
            Source::Bytes(_) => None,
        }
    }

    /// About the bytes the source takes once written into a JSON body
    /// (base64 for bytes).
    pub fn json_size_hint(&self) -> usize {
        match self {
            Source::Bytes(bytes) => bytes.len().div_ceil(3) * 4,
            Source::Url(url) => url.len(),
        }
    }
}

impl Image {
    /// The image's media type, `image/png` when the caller gave none with a URL.
    pub fn media_type(&self) -> &str {
        self.media_type.as_deref().unwrap_or("image/png")
    }
}

impl Document {
    /// The document's media type, `application/pdf` when the caller gave none.
    pub fn media_type(&self) -> &str {
        self.media_type.as_deref().unwrap_or("application/pdf")
    }
}

impl Part {
    /// About the bytes the part takes once written into a JSON body.
    pub fn json_size_hint(&self) -> usize {
        match self {
            Part::Text(text) => text.len() + 16,
            Part::Image(image) => image.source.json_size_hint() + 64,
            Part::Audio(audio) => audio.data.len().div_ceil(3) * 4 + 64,
            Part::Document(document) => document.source.json_size_hint() + 64,
            Part::Reasoning(reasoning) => {
                reasoning.text.len()
                    + reasoning.signature.as_ref().map_or(0, String::len)
                    + reasoning.redacted.as_ref().map_or(0, String::len)
                    + 64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Role;

    #[test]
    fn text_is_the_text_parts_joined() {
        let mut message = Message::text_message(Role::User, "a");
        assert!(matches!(message.text(), Cow::Borrowed("a")));
        message.parts.push(Part::Image(Image {
            source: Source::Url("https://x/y.png".into()),
            media_type: None,
            detail: None,
        }));
        message.parts.push(Part::Text("b".into()));
        message.parts.push(Part::Text("c".into()));
        assert_eq!(message.text(), "a\nb\nc");
        assert_eq!(message.first_media().map(Part::kind), Some("image"));
        assert_eq!(
            message.text_only("p"),
            Err(ProviderError::InvalidRequest(
                "p does not take image parts".into()
            ))
        );
        message.parts.clear();
        assert_eq!(message.text(), "");
        assert!(!message.has_text());
    }

    #[test]
    fn sources_as_base64_and_data_urls() {
        let bytes = Source::Bytes(b"hi!".to_vec());
        assert_eq!(bytes.as_base64(), Some(Base64(b"hi!")));
        assert_eq!(bytes.url(), None);
        assert_eq!(bytes.json_size_hint(), 4);
        let url = Source::Url("https://x/y".into());
        assert_eq!(url.as_base64(), None);
        assert_eq!(url.url(), Some("https://x/y"));
    }

    #[test]
    fn base64_and_data_urls_serialize_as_strings() {
        fn json(value: &impl Serialize) -> String {
            serde_json::to_string(value).expect("serializes")
        }
        // Bytes: standard base64 with padding, as a JSON string.
        assert_eq!(json(&Base64(b"hi!")), r#""aGkh""#);
        assert_eq!(json(&Base64(b"%PDF")), r#""JVBERg==""#);
        assert_eq!(json(&Base64(&[0xfb, 0xff])), r#""+/8=""#);
        // Empty bytes: an empty string, and a data URL with no data.
        assert_eq!(json(&Base64(b"")), r#""""#);
        let empty = Source::Bytes(Vec::new());
        let data_url = |source| DataUrl {
            source,
            media_type: "application/pdf",
        };
        assert_eq!(json(&data_url(&empty)), r#""data:application/pdf;base64,""#);
        // Bytes as a data URL of the media type.
        let bytes = Source::Bytes(b"hi!".to_vec());
        assert_eq!(
            json(&DataUrl {
                source: &bytes,
                media_type: "image/gif",
            }),
            r#""data:image/gif;base64,aGkh""#
        );
        // A URL as it is (escaped as any JSON string), whatever the media type.
        let url = Source::Url("https://x/y?a=\"b\"".into());
        assert_eq!(json(&data_url(&url)), r#""https://x/y?a=\"b\"""#);
        // Inside a body, and through `serde_json::Value` too.
        let body = serde_json::json!({"data": Base64(b"hi!"), "url": data_url(&bytes)});
        assert_eq!(
            body,
            serde_json::json!({"data": "aGkh", "url": "data:application/pdf;base64,aGkh"})
        );
    }

    #[test]
    fn base64_and_data_urls_debug_the_byte_count_not_the_bytes() {
        assert_eq!(format!("{:?}", Base64(&[7; 1000])), "Base64(1000 bytes)");
        let bytes = Source::Bytes(vec![7; 1000]);
        let url = Source::Url("https://x/y".into());
        let data_url = |source| DataUrl {
            source,
            media_type: "image/png",
        };
        assert_eq!(
            format!("{:?}", data_url(&bytes)),
            "DataUrl(data:image/png;base64 of 1000 bytes)"
        );
        assert_eq!(format!("{:?}", data_url(&url)), r#"DataUrl("https://x/y")"#);
    }

    #[test]
    fn unsupported_names_the_provider_and_the_kind() {
        let part = Part::Document(Document {
            source: Source::Bytes(Vec::new()),
            media_type: Some("application/pdf".into()),
            title: None,
        });
        assert_eq!(
            part.unsupported("acme"),
            ProviderError::InvalidRequest("acme does not take document parts".into())
        );
    }
}
