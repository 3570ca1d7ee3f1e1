//! `multipart/form-data` request bodies (RFC 7578): OpenAI's audio uploads read from memory
//! ([`read`]: the body is whole, within `max_body_bytes`, before any of it is parsed), each
//! field's name, file name, content type and bytes; and a file upload read as it arrives
//! ([`Streamed`]: its text fields whole, its file a chunk at a time, never all of it in
//! memory).
//!
//! multer (the parser axum and others use) does the reading. For [`read`] its stream is the one
//! chunk of the body, ready, so every step of its future completes at its first poll.

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
    /// A streamed form longer than its bound ([`Streamed::new`]'s `limit`).
    #[error("the form is over {0} bytes")]
    TooLarge(u64),
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

/// The bytes a streamed form may hold beside its file: the boundaries, each part's headers
/// and the text fields (a purpose, an expiry).
pub const STREAMED_FORM_OVERHEAD: u64 = 256 * 1024;

/// A form read as its body arrives.
pub struct Streamed {
    multipart: multer::Multipart<'static>,
    fields: usize,
}

/// A field of a [`Streamed`] form.
pub enum StreamedField {
    /// A text field, read whole (at most [`MAX_TEXT_FIELD_BYTES`]).
    Text { name: String, value: String },
    /// A file, whose bytes [`StreamedFile::chunk`] reads.
    File {
        name: String,
        file_name: String,
        content_type: Option<String>,
        file: StreamedFile,
    },
}

/// A file of a [`Streamed`] form, read a chunk at a time (however the client's frames cut it).
/// Boxed: multer's field is large, and a text field is small.
pub struct StreamedFile(Box<multer::Field<'static>>);

impl StreamedFile {
    /// The next bytes of the file; None at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, FormError> {
        self.0.chunk().await.map_err(form_error)
    }
}

impl Streamed {
    /// A form of `content_type` read from `body` as it comes; more than `limit` bytes in all
    /// (boundaries and headers included) is [`FormError::TooLarge`].
    pub fn new<S, E>(content_type: Option<&str>, body: S, limit: u64) -> Result<Streamed, FormError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
    {
        let boundary = boundary(content_type)
            .ok_or_else(|| FormError::NotMultipart(content_type.unwrap_or("none").to_owned()))?;
        let constraints =
            multer::Constraints::new().size_limit(multer::SizeLimit::new().whole_stream(limit));
        Ok(Streamed {
            multipart: multer::Multipart::with_constraints(body, boundary, constraints),
            fields: 0,
        })
    }

    /// The next field; None after the last. The file of the field before it must have been
    /// dropped (it holds the form), and is skipped if it was not read to its end.
    pub async fn next(&mut self) -> Result<Option<StreamedField>, FormError> {
        let Some(mut field) = self.multipart.next_field().await.map_err(form_error)? else {
            return Ok(None);
        };
        if self.fields == MAX_FIELDS {
            return Err(FormError::TooManyFields);
        }
        self.fields += 1;
        let name = field.name().unwrap_or_default().to_owned();
        if let Some(file_name) = field.file_name().map(str::to_owned) {
            let content_type = field.content_type().map(ToString::to_string);
            return Ok(Some(StreamedField::File {
                name,
                file_name,
                content_type,
                file: StreamedFile(Box::new(field)),
            }));
        }
        let mut value = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(form_error)? {
            if value.len() + chunk.len() > MAX_TEXT_FIELD_BYTES {
                return Err(FormError::TextTooLong(name));
            }
            value.extend_from_slice(&chunk);
        }
        let value = String::from_utf8(value)
            .map_err(|_| FormError::Malformed(format!("the field {name:?} is not UTF-8 text")))?;
        Ok(Some(StreamedField::Text { name, value }))
    }
}

/// multer's error as the gateway tells it.
fn form_error(error: multer::Error) -> FormError {
    match error {
        multer::Error::StreamSizeExceeded { limit } => FormError::TooLarge(limit),
        other => FormError::Malformed(other.to_string()),
    }
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

    /// `body` as a stream of `cut`-byte frames, as a client's frames may cut it anywhere.
    fn frames(
        body: Vec<u8>,
        cut: usize,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        let frames: Vec<_> = body
            .chunks(cut)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(frames)
    }

    #[tokio::test]
    async fn a_streamed_form_gives_its_text_whole_and_its_file_in_pieces() {
        // Lines that look like the boundary without being one (a delimiter is CRLF, `--` and
        // the boundary).
        let file = "{\"custom_id\": \"a\"}\r\n-XyZ\n--XyZ\r--XyZ\r\n".repeat(50);
        let body = body(&[
            "Content-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch",
            &format!(
                "Content-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\
                 Content-Type: application/jsonl\r\n\r\n{file}"
            ),
        ]);
        for cut in [1, 7, 4096] {
            let mut form = Streamed::new(Some(TYPE), frames(body.clone(), cut), 1 << 20).unwrap();
            let Some(StreamedField::Text { name, value }) = form.next().await.unwrap() else {
                panic!("no text field first");
            };
            assert_eq!((name.as_str(), value.as_str()), ("purpose", "batch"));
            let Some(StreamedField::File {
                name,
                file_name,
                content_type,
                file: mut part,
            }) = form.next().await.unwrap()
            else {
                panic!("no file second");
            };
            assert_eq!((name.as_str(), file_name.as_str()), ("file", "in.jsonl"));
            assert_eq!(content_type.as_deref(), Some("application/jsonl"));
            let mut read = Vec::new();
            while let Some(chunk) = part.chunk().await.unwrap() {
                read.extend_from_slice(&chunk);
            }
            assert_eq!(read, file.as_bytes());
            drop(part);
            assert!(form.next().await.unwrap().is_none());
        }
    }

    #[tokio::test]
    async fn a_streamed_form_over_its_bound_or_cut_short_is_refused() {
        let file = "x".repeat(10_000);
        let whole = body(&[&format!(
            "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n{file}"
        )]);
        // Over the bound wherever it is seen: reading ahead for the first field's headers, or
        // reading the file.
        let mut form = Streamed::new(Some(TYPE), frames(whole.clone(), 512), 4096).unwrap();
        let error = match form.next().await {
            Err(error) => error,
            Ok(Some(StreamedField::File { file: mut part, .. })) => loop {
                match part.chunk().await {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("read past the bound"),
                    Err(error) => break error,
                }
            },
            Ok(_) => panic!("no file"),
        };
        assert_eq!(error, FormError::TooLarge(4096));

        let cut = whole[..whole.len() - 20].to_vec();
        let mut form = Streamed::new(Some(TYPE), frames(cut, 512), 1 << 20).unwrap();
        let Some(StreamedField::File { file: mut part, .. }) = form.next().await.unwrap() else {
            panic!("no file");
        };
        let mut failed = false;
        loop {
            match part.chunk().await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(FormError::Malformed(_)) => {
                    failed = true;
                    break;
                }
                Err(other) => panic!("{other}"),
            }
        }
        assert!(
            failed || form.next().await.is_err(),
            "a cut form read as whole"
        );

        let long = format!(
            "Content-Disposition: form-data; name=\"purpose\"\r\n\r\n{}",
            "x".repeat(MAX_TEXT_FIELD_BYTES + 1)
        );
        let mut form = Streamed::new(Some(TYPE), frames(body(&[&long]), 999), 1 << 20).unwrap();
        assert!(
            matches!(form.next().await, Err(FormError::TextTooLong(name)) if name == "purpose")
        );
        assert!(matches!(
            Streamed::new(Some("text/plain"), frames(Vec::new(), 1), 1),
            Err(FormError::NotMultipart(_))
        ));
    }
}
