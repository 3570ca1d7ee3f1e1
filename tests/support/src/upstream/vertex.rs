//! Google Vertex AI as the fake serves it, with Google's OAuth token endpoint:
//!
//! - `POST /token` (any path starting so): the JWT bearer grant. The assertion's RS256 signature
//!   is checked with the test key's public key (`tests/keys/`), and its claims: `iss` the test
//!   account, `scope` cloud-platform, `aud` this very URL, `exp` an hour after an `iat` of about
//!   now. It answers `{"access_token": "ya29.fake-vertex-N", "expires_in", "token_type"}`
//!   (`expires_in` 3599, or the query's `expires_in=N`); with `fail` in the query, or a bad
//!   assertion, Google's `400 {"error": "invalid_grant", "error_description"}`.
//! - `…/publishers/google/models/M:generateContent` / `:streamGenerateContent`,
//!   `…/publishers/anthropic/models/M:rawPredict` / `:streamRawPredict`: from the script, once
//!   their `Authorization: Bearer ya29.…` is there (else Google's 401); except a Gemini image
//!   model's `generateContent` asking for images (`M` holding `-image`, `IMAGE` in
//!   `responseModalities`): the fake Gemini API's ([`super::gemini::image_output`]) with what
//!   only Vertex AI takes (`imageConfig.personGeneration`, `imageConfig.imageOutputOptions`, the
//!   body's `labels`).
//! - `…:predict`: embeddings computed from the instances ([`fake_embedding`]), with token counts
//!   (`statistics.token_count`: the input's words); for an Imagen model
//!   (`…/publishers/google/models/imagen-*:predict`) the fake Gemini API's Imagen
//!   ([`super::gemini::imagen`]) with the parameters only Vertex AI takes (`negativePrompt`,
//!   `seed`, `enhancePrompt`, `addWatermark`, `storageUri`, the body's `labels`).
//! - `…/publishers/google/models/M:countTokens`: [`counted_tokens`] of the contents and function
//!   declarations; a field `CountTokensRequest` has not is refused, as Vertex refuses it.
//!
//! Errors in Google's shape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::pkcs8::DecodePublicKey;
use rsa::sha2::Sha256;
use rsa::signature::Verifier;
use serde_json::{Value, json};

use super::{Provider, ReceivedRequest, Reply, counted_tokens, fake_embedding};

/// The test-only service account key (a throwaway key; see tests/keys/README.md), with Google's
/// token endpoint as its `token_uri`: [`test_key`] points it at a fake.
pub const TEST_KEY: &str = include_str!("../../../keys/vertex-test-service-account.json");
/// Its public key, which verifies the JWTs.
pub const TEST_PUBLIC_KEY: &str = include_str!("../../../keys/vertex-test-public.pem");
/// Its account.
pub const TEST_EMAIL: &str = "gateway-test@gateway-test-project.iam.gserviceaccount.com";
/// Text of its private key no answer, record or log may contain (a line of the PEM body).
pub fn private_key_fragment() -> String {
    let key: Value = serde_json::from_str(TEST_KEY).expect("the test key is JSON");
    let pem = key["private_key"].as_str().expect("private_key");
    pem.lines().nth(5).expect("a PEM body line").to_owned()
}

/// The test key with `token_uri` set to `token_uri` (a fake's `/token`, with its query).
pub fn test_key(token_uri: &str) -> String {
    let mut key: Value = serde_json::from_str(TEST_KEY).expect("the test key is JSON");
    key["token_uri"] = json!(token_uri);
    key.to_string()
}

/// Every fake token endpoint's tokens are numbered from here, so no two are alike.
static MINTED: AtomicU64 = AtomicU64::new(1);

/// The prefix of every access token the fake mints.
pub const TOKEN_PREFIX: &str = "ya29.fake-vertex-";

/// Vertex AI and the token endpoint.
pub struct Vertex;

impl Provider for Vertex {
    const NAME: &'static str = "fake-vertex";

    fn is_generation(path: &str) -> bool {
        path.contains("/publishers/")
            && [
                ":generateContent",
                ":streamGenerateContent",
                ":rawPredict",
                ":streamRawPredict",
            ]
            .iter()
            .any(|method| path.ends_with(method))
    }

    fn computed(request: &ReceivedRequest) -> Option<Reply> {
        let path = request.path_only();
        if path.starts_with("/token") {
            return Some(token(request));
        }
        if path.contains("/publishers/") {
            let bearer = request
                .header("authorization")
                .and_then(|value| value.strip_prefix("Bearer "));
            if !bearer.is_some_and(|token| token.starts_with("ya29.")) {
                return Some(Reply::google_error(
                    401,
                    "Request had invalid authentication credentials.",
                    "UNAUTHENTICATED",
                ));
            }
        }
        if path.ends_with(":countTokens") {
            return Some(count(request));
        }
        if super::gemini::is_imagen_predict(path) {
            return Some(super::gemini::imagen(request, true));
        }
        if super::gemini::is_image_generation(request) {
            return Some(super::gemini::image_output(request, true));
        }
        path.ends_with(":predict").then(|| predict(request))
    }

    fn error(status: u16, message: &str) -> Reply {
        let status_name = if status == 404 {
            "NOT_FOUND"
        } else {
            "INTERNAL"
        };
        Reply::google_error(status, &format!("fake Vertex AI: {message}"), status_name)
    }
}

/// The token endpoint's refusal, as Google words it.
fn invalid_grant(description: &str) -> Reply {
    Reply::json(
        400,
        &json!({"error": "invalid_grant", "error_description": description}),
    )
}

/// The value of `name` in a query or form (`a=1&b=2`), percent-decoding only what the plugin
/// encodes (`:`).
fn field<'a>(pairs: &'a str, name: &str) -> Option<&'a str> {
    pairs
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn token(request: &ReceivedRequest) -> Reply {
    let query = request.path.split_once('?').map_or("", |(_, query)| query);
    if query.split('&').any(|pair| pair == "fail") {
        return invalid_grant("Invalid JWT Signature.");
    }
    let form = String::from_utf8_lossy(&request.body).into_owned();
    if request.header("content-type") != Some("application/x-www-form-urlencoded") {
        return invalid_grant("not a form");
    }
    if field(&form, "grant_type") != Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer") {
        return invalid_grant("unsupported grant_type");
    }
    let Some(assertion) = field(&form, "assertion") else {
        return invalid_grant("no assertion");
    };
    let host = request.header("host").unwrap_or_default();
    let audience = format!("http://{host}{}", request.path);
    if let Err(problem) = check_assertion(assertion, &audience) {
        return invalid_grant(&problem);
    }
    let expires_in: u64 = field(query, "expires_in")
        .and_then(|n| n.parse().ok())
        .unwrap_or(3599);
    let n = MINTED.fetch_add(1, Ordering::Relaxed);
    Reply::json(
        200,
        &json!({"access_token": format!("{TOKEN_PREFIX}{n}"), "expires_in": expires_in,
            "token_type": "Bearer"}),
    )
}

/// Checks the JWT: its RS256 signature with the test key's public key, and its claims.
pub fn check_assertion(jwt: &str, audience: &str) -> Result<Value, String> {
    let segments: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = segments[..] else {
        return Err("not a JWT".into());
    };
    let decode = |segment: &str| -> Result<Value, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(segment)
            .map_err(|e| format!("base64url: {e}"))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("JSON: {e}"))
    };
    let header = decode(header)?;
    if header["alg"] != "RS256" || header["typ"] != "JWT" {
        return Err(format!("header {header}"));
    }
    let key = VerifyingKey::<Sha256>::from_public_key_pem(TEST_PUBLIC_KEY)
        .map_err(|e| format!("the test public key: {e}"))?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|e| format!("signature base64url: {e}"))?;
    let signature =
        Signature::try_from(signature.as_slice()).map_err(|e| format!("signature: {e}"))?;
    let signed = &jwt[..jwt.rfind('.').unwrap_or(0)];
    key.verify(signed.as_bytes(), &signature)
        .map_err(|_| "Invalid JWT Signature.".to_owned())?;
    let claims = decode(claims)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let iat = claims["iat"].as_u64().ok_or("no iat")?;
    let checks = [
        (claims["iss"] == TEST_EMAIL, "iss"),
        (
            claims["scope"] == "https://www.googleapis.com/auth/cloud-platform",
            "scope",
        ),
        (claims["aud"] == audience, "aud"),
        (iat.abs_diff(now) <= 60, "iat"),
        (claims["exp"].as_u64() == Some(iat + 3600), "exp"),
    ];
    for (ok, claim) in checks {
        if !ok {
            return Err(format!(
                "bad claim {claim} in {claims} (aud expected {audience})"
            ));
        }
    }
    Ok(claims)
}

/// Answers `predict` with [`fake_embedding`] of each instance's content, and its word count as
/// its token count.
fn predict(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let predictions: Vec<Value> = body["instances"]
        .as_array()
        .map(|instances| {
            instances
                .iter()
                .enumerate()
                .map(|(i, instance)| {
                    let text = instance["content"].as_str().unwrap_or_default();
                    json!({"embeddings": {"values": fake_embedding(i, text),
                        "statistics": {"token_count": text.split_whitespace().count() as f64,
                            "truncated": false}}})
                })
                .collect()
        })
        .unwrap_or_default();
    Reply::gemini_json(
        200,
        &json!({"predictions": predictions, "metadata": {"billableCharacterCount": 1}}).to_string(),
    )
}

/// The fields of Vertex AI's `CountTokensRequest` a body may hold.
const COUNT_FIELDS: [&str; 4] = ["contents", "systemInstruction", "tools", "generationConfig"];

/// `countTokens`, counting [`counted_tokens`] of the contents and function declarations.
fn count(request: &ReceivedRequest) -> Reply {
    let body = request.json();
    let fields = body.as_object().into_iter().flatten();
    if let Some((extra, _)) = fields
        .clone()
        .find(|(key, _)| !COUNT_FIELDS.contains(&key.as_str()))
    {
        let message = format!("Invalid JSON payload received. Unknown name \"{extra}\"");
        return Reply::google_error(400, &message, "INVALID_ARGUMENT");
    }
    let Some(contents) = body["contents"].as_array() else {
        return Reply::google_error(400, "contents is required", "INVALID_ARGUMENT");
    };
    let tools = body["tools"].as_array().into_iter().flatten();
    let declarations = tools
        .filter_map(|tool| tool["functionDeclarations"].as_array())
        .map(Vec::len)
        .sum();
    let total = counted_tokens(contents.len(), declarations);
    Reply::json(200, &json!({"totalTokens": total}))
}
