//! `multipart/form-data` bodies (RFC 7578), for the upstream APIs that take uploads as forms
//! (OpenAI's audio transcriptions and their copies).
//!
//! ```
//! use gateway_plugin_sdk::form::Form;
//! use gateway_plugin_sdk::http::Request;
//!
//! let form = Form::new()
//!     .text("model", "whisper-1")
//!     .file("file", "speech.wav", "audio/wav", b"RIFF....".to_vec());
//! let request = Request::post("https://api.openai.com/v1/audio/transcriptions").form(form);
//! let content_type = request.header_value("content-type").unwrap();
//! assert!(content_type.starts_with("multipart/form-data; boundary="));
//! ```

/// A form's fields and files, in the order they are added.
#[derive(Debug, Default, Clone)]
pub struct Form {
    parts: Vec<FormPart>,
}

#[derive(Debug, Clone)]
enum FormPart {
    Text {
        name: String,
        value: String,
    },
    File {
        name: String,
        file_name: String,
        media_type: String,
        bytes: Vec<u8>,
    },
}

impl Form {
    /// An empty form.
    pub fn new() -> Form {
        Form::default()
    }

    /// Adds a text field. A field added twice is sent twice, as forms send lists.
    pub fn text(mut self, name: &str, value: &str) -> Form {
        self.parts.push(FormPart::Text {
            name: name.to_owned(),
            value: value.to_owned(),
        });
        self
    }

    /// Adds a file: its bytes, under `file_name`, with its media type.
    pub fn file(mut self, name: &str, file_name: &str, media_type: &str, bytes: Vec<u8>) -> Form {
        self.parts.push(FormPart::File {
            name: name.to_owned(),
            file_name: file_name.to_owned(),
            media_type: media_type.to_owned(),
            bytes,
        });
        self
    }

    /// The body, and its `Content-Type` (with a boundary that none of the parts holds).
    pub fn finish(self) -> (Vec<u8>, String) {
        let boundary = self.boundary();
        let size: usize = (self.parts.iter())
            .map(|part| match part {
                FormPart::Text { name, value } => name.len() + value.len(),
                FormPart::File {
                    name,
                    file_name,
                    bytes,
                    ..
                } => name.len() + file_name.len() + bytes.len() + 32,
            })
            .sum();
        let mut body = Vec::with_capacity(size + (self.parts.len() + 1) * (boundary.len() + 64));
        for part in self.parts {
            body.extend_from_slice(b"--");
            body.extend_from_slice(boundary.as_bytes());
            body.extend_from_slice(b"\r\n");
            match part {
                FormPart::Text { name, value } => {
                    let head = format!(
                        "Content-Disposition: form-data; name=\"{}\"\r\n\r\n",
                        quoted(&name)
                    );
                    body.extend_from_slice(head.as_bytes());
                    body.extend_from_slice(value.as_bytes());
                }
                FormPart::File {
                    name,
                    file_name,
                    media_type,
                    bytes,
                } => {
                    let head = format!(
                        "Content-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\n\
                         Content-Type: {}\r\n\r\n",
                        quoted(&name),
                        quoted(&file_name),
                        media_type.replace(['\r', '\n'], "")
                    );
                    body.extend_from_slice(head.as_bytes());
                    body.extend_from_slice(&bytes);
                }
            }
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--");
        body.extend_from_slice(boundary.as_bytes());
        body.extend_from_slice(b"--\r\n");
        (body, format!("multipart/form-data; boundary={boundary}"))
    }

    /// A boundary that no part's bytes hold: the first of a numbered series (a plugin has no
    /// randomness to draw one from, and a fixed one could be in an uploaded file).
    fn boundary(&self) -> String {
        let holds = |boundary: &str| {
            let needle = boundary.as_bytes();
            self.parts.iter().any(|part| {
                let bytes = match part {
                    FormPart::Text { value, .. } => value.as_bytes(),
                    FormPart::File { bytes, .. } => bytes,
                };
                bytes.windows(needle.len()).any(|window| window == needle)
            })
        };
        (0u64..)
            .map(|n| format!("gateway-form-boundary-{n:016x}"))
            .find(|boundary| !holds(boundary))
            .unwrap_or_default()
    }
}

/// A name or file name inside a quoted header parameter: `"`, CR and LF percent-encoded, as
/// browsers send them (RFC 7578, section 4.2).
fn quoted(text: &str) -> String {
    text.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

impl crate::http::Request {
    /// Sets the body to `form` and its `Content-Type` (replacing any set before).
    pub fn form(self, form: Form) -> Self {
        let (body, content_type) = form.finish();
        self.replace_header("content-type", &content_type)
            .body(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_written_as_rfc_7578_says() {
        let (body, content_type) = Form::new()
            .text("model", "whisper-1")
            .text("timestamp_granularities[]", "word")
            .file("file", "a \"b\".wav", "audio/wav", b"RIFF".to_vec())
            .finish();
        let boundary = "gateway-form-boundary-0000000000000000";
        assert_eq!(
            content_type,
            format!("multipart/form-data; boundary={boundary}")
        );
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"timestamp_granularities[]\"\
             \r\n\r\nword\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"a %22b%22.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(String::from_utf8(body).unwrap(), expected);
    }

    #[test]
    fn the_boundary_is_one_the_parts_do_not_hold() {
        let first = "gateway-form-boundary-0000000000000000";
        let (body, content_type) = Form::new()
            .file(
                "file",
                "f",
                "application/octet-stream",
                first.as_bytes().to_vec(),
            )
            .finish();
        let second = "gateway-form-boundary-0000000000000001";
        assert!(content_type.ends_with(second), "{content_type}");
        assert!(body.starts_with(format!("--{second}\r\n").as_bytes()));
    }
}
