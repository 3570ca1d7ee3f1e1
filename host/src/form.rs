//! `multipart/form-data` request bodies (RFC 7578), as OpenAI's audio uploads send them: read
//! from memory (the body is whole, within `max_body_bytes`, before any of it is parsed), each
//! field's name, file name, content type and bytes.
//!
//! multer (the parser axum and others use) does the reading; its stream is the one chunk of the
//! body, ready, so every step of its future completes at its first poll.

use bytes::Bytes;
use futures_util::FutureExt as _;

/// The most fields a form may have: OpenAI's upload endpoints take about ten.
pub const MAX_FIELDS: usize = 64;

/// The most bytes a text field (not a file) may hold: a prompt, a language, a format.
pub const MAX_TEXT_FIELD_BYTES: usize = 64 * 1024;

/// A form's fields, in the order they came.
#[derive(Debug, Default)]
pub struct Form {
    pub fields: Vec<FormField>,
}

#[derive(Debug)]
pub struct FormField {
    pub name: String,
    /// Set on a file.
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub data: Bytes,
}

impl FormField {
    pub fn is_file(&self) -> bool {
        self.file_name.is_some()
    }
}

/// Why a body is not a form the gateway reads.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormError {
    #[error("the body must be multipart/form-data with a boundary (Content-Type: {0})")]
    NotMultipart(String),
    #[error("the form is malformed: {0}")]
    Malformed(String),
    #[error("the form has more than {MAX_FIELDS} fields")]
    TooManyFields,
    #[error("the form's field {0:?} is over {MAX_TEXT_FIELD_BYTES} bytes (only a file may be)")]
    TextTooLong(String),
}

/// The boundary of a `multipart/form-data` content type, if it is one.
pub fn boundary(content_type: Option<&str>) -> Option<String> {
    multer::parse_boundary(content_type?).ok()
}

/// Reads `body`, a form of `content_type`.
pub fn read(content_type: Option<&str>, body: &[u8]) -> Result<Form, FormError> {
    let boundary = boundary(content_type)
        .ok_or_else(|| FormError::NotMultipart(content_type.unwrap_or("none").to_owned()))?;
    let chunk = Bytes::copy_from_slice(body);
    let stream = futures_util::stream::iter([Ok::<_, std::convert::Infallible>(chunk)]);
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut form = Form::default();
    // A body wholly in memory: a step that is not ready at once is a parser waiting for more.
    let pending = || FormError::Malformed("the body ends inside a field".into());
    while let Some(field) = (multipart.next_field().now_or_never())
        .ok_or_else(pending)?
        .map_err(|e| FormError::Malformed(e.to_string()))?
    {
        if form.fields.len() == MAX_FIELDS {
            return Err(FormError::TooManyFields);
        }
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field.file_name().map(str::to_owned);
        let content_type = field.content_type().map(ToString::to_string);
        let data = (field.bytes().now_or_never())
            .ok_or_else(pending)?
            .map_err(|e| FormError::Malformed(e.to_string()))?;
        if file_name.is_none() && data.len() > MAX_TEXT_FIELD_BYTES {
            return Err(FormError::TextTooLong(name));
        }
        form.fields.push(FormField {
            name,
            file_name,
            content_type,
            data,
        });
    }
    Ok(form)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE: &str = "multipart/form-data; boundary=XyZ";

    fn body(parts: &[&str]) -> Vec<u8> {
        let mut body = String::new();
        for part in parts {
            body.push_str("--XyZ\r\n");
            body.push_str(part);
            body.push_str("\r\n");
        }
        body.push_str("--XyZ--\r\n");
        body.into_bytes()
    }

    #[test]
    fn fields_and_files_are_read_in_order() {
        let body = body(&[
            "Content-Disposition: form-data; name=\"model\"\r\n\r\nr/whisper-1",
            "Content-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\
             Content-Type: audio/wav\r\n\r\nRIFF\r\n\x00\x01",
        ]);
        let form = read(Some(TYPE), &body).unwrap();
        let [model, file] = form.fields.as_slice() else {
            panic!("{form:?}");
        };
        assert_eq!(
            (model.name.as_str(), &model.data[..]),
            ("model", &b"r/whisper-1"[..])
        );
        assert!(!model.is_file());
        assert_eq!(file.file_name.as_deref(), Some("a.wav"));
        assert_eq!(file.content_type.as_deref(), Some("audio/wav"));
        assert_eq!(&file.data[..], b"RIFF\r\n\x00\x01");
    }

    #[test]
    fn what_is_not_a_form_the_gateway_reads_is_refused() {
        let json = read(Some("application/json"), b"{}").unwrap_err();
        assert_eq!(json, FormError::NotMultipart("application/json".into()));
        assert!(matches!(read(None, b""), Err(FormError::NotMultipart(_))));
        // Cut short: no closing boundary.
        let cut = b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nr/m";
        assert!(matches!(
            read(Some(TYPE), cut),
            Err(FormError::Malformed(_))
        ));
        let many: Vec<String> = (0..=MAX_FIELDS)
            .map(|i| format!("Content-Disposition: form-data; name=\"f{i}\"\r\n\r\nx"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            read(Some(TYPE), &body(&many)).unwrap_err(),
            FormError::TooManyFields
        );
        let long = format!(
            "Content-Disposition: form-data; name=\"prompt\"\r\n\r\n{}",
            "x".repeat(MAX_TEXT_FIELD_BYTES + 1)
        );
        assert_eq!(
            read(Some(TYPE), &body(&[&long])).unwrap_err(),
            FormError::TextTooLong("prompt".into())
        );
    }
}
