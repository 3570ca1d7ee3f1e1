//! A message's content parts: text, images, audio, documents and reasoning,
//! read the ways provider wire formats want them (joined text, base64, a
//! `data:` URL).

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

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

impl Source {
    /// The bytes as standard base64 (with padding), `None` for a URL.
    pub fn base64(&self) -> Option<String> {
        match self {
            Source::Bytes(bytes) => Some(STANDARD.encode(bytes)),
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

    /// The URL, or the bytes as a `data:` URL of `media_type`: what
    /// OpenAI-style APIs take in `image_url.url`.
    pub fn url_or_data(&self, media_type: Option<&str>) -> Cow<'_, str> {
        match self {
            Source::Url(url) => Cow::Borrowed(url),
            Source::Bytes(bytes) => {
                let media_type = media_type.unwrap_or("application/octet-stream");
                let mut url =
                    String::with_capacity(media_type.len() + 13 + bytes.len() * 4 / 3 + 4);
                url.push_str("data:");
                url.push_str(media_type);
                url.push_str(";base64,");
                STANDARD.encode_string(bytes, &mut url);
                Cow::Owned(url)
            }
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
        assert_eq!(bytes.base64().as_deref(), Some("aGkh"));
        assert_eq!(bytes.url(), None);
        assert_eq!(
            bytes.url_or_data(Some("image/gif")),
            "data:image/gif;base64,aGkh"
        );
        assert_eq!(bytes.json_size_hint(), 4);
        let url = Source::Url("https://x/y".into());
        assert_eq!(url.base64(), None);
        assert_eq!(url.url_or_data(None), "https://x/y");
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
