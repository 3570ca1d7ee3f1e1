//! Leaf: byte encodings more than one layer reads or writes. Base64 as
//! callers send media (padding optional, as OpenAI and Anthropic accept it),
//! with the decoded length told before decoding anything; SHA-256 as hex (the
//! compiled-plugin cache's keys, the records' media summaries).

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use sha2::{Digest, Sha256};

/// Standard base64, padded or not.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// How many bytes base64 `text` decodes to (its padding counts for nothing).
pub fn base64_decoded_len(text: &str) -> usize {
    let unpadded = text.trim_end_matches('=').len();
    unpadded / 4 * 3 + unpadded % 4 * 3 / 4
}

/// The bytes of base64 `text`, padded or not.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    BASE64.decode(text)
}

/// URL-safe base64 without padding (a JWT's parts, a console cookie's fields).
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The bytes of URL-safe base64 `text`, padded or not.
pub fn base64url_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    BASE64URL.decode(text)
}

/// `bytes` as URL-safe base64 without padding.
pub fn base64url_encode(bytes: &[u8]) -> String {
    BASE64URL.encode(bytes)
}

/// `bytes` as padded standard base64 (MCP's image, audio and blob data).
pub fn base64_encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A SHA-256 of bytes that arrive a piece at a time (streamed audio), never held whole.
#[derive(Default)]
pub struct Sha256Hasher {
    hasher: Sha256,
    bytes: u64,
}

impl Sha256Hasher {
    pub fn update(&mut self, piece: &[u8]) {
        self.hasher.update(piece);
        self.bytes += piece.len() as u64;
    }
    /// How many bytes it has read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// The SHA-256 of everything read, as lowercase hex.
    pub fn hex(&self) -> String {
        hex(&self.hasher.clone().finalize())
    }
}

/// The length and SHA-256 (hex) of what base64 `text` decodes to, decoded a
/// piece at a time into the hash: the bytes are never held whole. `None` when
/// `text` is not base64.
pub fn base64_sha256(text: &str) -> Option<(u64, String)> {
    let mut decoder = base64::read::DecoderReader::new(text.as_bytes(), &BASE64);
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut decoder, &mut hasher).ok()?;
    Some((bytes, hex(&hasher.finalize())))
}

/// Bytes (a digest) as lowercase hex.
pub fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut hex = String::with_capacity(digest.len() * 2);
    for byte in digest {
        // Writing into a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// What lowercase or uppercase hex `text` stands for; `None` for anything else (an odd length,
/// another character).
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |byte: u8| char::from(byte).to_digit(16);
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8))
        .collect()
}

/// The length of `value` as compact JSON text, counted as it is written, without the text.
pub fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> Result<usize, serde_json::Error> {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value)?;
    Ok(count.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_reads_back_and_refuses_what_is_not_hex() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(unhex(&hex(&bytes)), Some(bytes.to_vec()));
        assert_eq!(unhex("ABff"), Some(vec![0xab, 0xff]));
        for bad in ["a", "zz", "0g", "+1"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn decoded_lengths_are_known_before_decoding() {
        for bytes in 0..10usize {
            let data = vec![7u8; bytes];
            let padded = base64::engine::general_purpose::STANDARD.encode(&data);
            let unpadded = padded.trim_end_matches('=');
            assert_eq!(base64_decoded_len(&padded), bytes, "{padded}");
            assert_eq!(base64_decoded_len(unpadded), bytes, "{unpadded}");
            assert_eq!(base64_decode(unpadded).unwrap(), data);
            assert_eq!(base64_decode(&padded).unwrap(), data);
            let summary = (bytes as u64, sha256_hex(&data));
            assert_eq!(base64_sha256(&padded), Some(summary.clone()));
            assert_eq!(base64_sha256(unpadded), Some(summary));
        }
        assert_eq!(base64_sha256("not base64!"), None);
    }

    #[test]
    fn sha256_in_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
