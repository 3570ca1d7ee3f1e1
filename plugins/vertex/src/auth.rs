//! Access tokens: a service account's key signs a JWT (RS256), which Google's token endpoint
//! exchanges for an access token (OAuth 2.0's JWT bearer grant, RFC 7523); the token is kept in
//! the host's `kv` store until shortly before it expires, so one token serves every request of
//! the route in this gateway process (the store is the route's: another route of the same
//! account mints its own; keyed by the account, so two accounts never share one).
//!
//! Nothing here logs or returns the key, the JWT or the token in an error.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use gateway_plugin_sdk::http::{Request, Response};
use gateway_plugin_sdk::{ProviderError, Route, kv};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs1v15::SigningKey;
use rsa::pkcs8::DecodePrivateKey;
use rsa::sha2::Sha256;
use rsa::signature::{SignatureEncoding, Signer};
use serde::Deserialize;
use serde_json::json;

use crate::call::Settings;

/// What the token lets the plugin do: Google Cloud's APIs (Vertex AI among them).
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, for keys that name none.
pub const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// How long the JWT asks to be valid: Google's maximum, one hour.
const ASSERTION_LIFETIME: u64 = 3600;

/// A token is used until this long before it expires, so that a request starting with it does
/// not end with it expired.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(300);

/// How a call authenticates.
#[derive(Debug)]
pub enum Credentials<'a> {
    /// A service account's key, exchanged for access tokens.
    ServiceAccount(ServiceAccount),
    /// An access token as it is (the route's `api_key`: `gcloud auth print-access-token`).
    Token(&'a str),
}

/// The type of a JSON credentials file.
#[derive(Deserialize)]
struct Kind {
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

/// The fields of a service account's JSON key the plugin reads.
#[derive(Deserialize)]
pub struct ServiceAccount {
    pub client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

impl std::fmt::Debug for ServiceAccount {
    // Never the private key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("token_uri", &self.token_uri())
            .finish_non_exhaustive()
    }
}

impl ServiceAccount {
    /// Reads a JSON key. Errors say what is wrong without quoting it (the text is a secret);
    /// `source` names where it came from.
    pub fn parse(json: &str, source: &str) -> Result<ServiceAccount, ProviderError> {
        // serde_json's messages name a field, a line and a column, and quote no string (every
        // field read is a string).
        let unreadable = |e: serde_json::Error| {
            ProviderError::Failed(format!("{source} is not a service account's JSON key: {e}"))
        };
        // The type first: other credentials (`gcloud`'s `authorized_user`) lack the key's fields.
        let kind: Kind = serde_json::from_str(json).map_err(unreadable)?;
        match kind.kind.as_deref() {
            None | Some("service_account") => {}
            Some(other) => {
                return Err(ProviderError::Failed(format!(
                    "{source} holds credentials of type {other:?}; only a service account's \
                     key (type \"service_account\") is taken (or give an access token as the \
                     route's key)"
                )));
            }
        }
        let account: ServiceAccount = serde_json::from_str(json).map_err(unreadable)?;
        if account.client_email.trim().is_empty() || account.private_key.trim().is_empty() {
            return Err(ProviderError::Failed(format!(
                "{source}: the key has no client_email or no private_key"
            )));
        }
        Ok(account)
    }

    /// Where the JWT is exchanged (the key's `token_uri`, Google's by default).
    pub fn token_uri(&self) -> &str {
        self.token_uri
            .as_deref()
            .map(str::trim)
            .filter(|uri| !uri.is_empty())
            .unwrap_or(DEFAULT_TOKEN_URI)
    }

    /// The signed JWT asserting this account at `now` (seconds since the Unix epoch): header
    /// `{"alg": "RS256", "typ": "JWT", "kid"}`, claims `iss` (the account), `scope`, `aud`
    /// (the token endpoint), `iat` and `exp` (an hour later).
    pub fn assertion(&self, now: u64) -> Result<String, ProviderError> {
        let mut header = json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = self.private_key_id.as_deref().filter(|id| !id.is_empty()) {
            header["kid"] = json!(kid);
        }
        let claims = json!({
            "iss": self.client_email,
            "scope": SCOPE,
            "aud": self.token_uri(),
            "iat": now,
            "exp": now + ASSERTION_LIFETIME,
        });
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .signing_key()?
            .try_sign(signed.as_bytes())
            .map_err(|_| {
                ProviderError::Failed("could not sign with the service account's key".into())
            })?;
        Ok(format!(
            "{signed}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        ))
    }

    /// The private key: PKCS#8 PEM as Google writes it (`BEGIN PRIVATE KEY`), or PKCS#1
    /// (`BEGIN RSA PRIVATE KEY`).
    fn signing_key(&self) -> Result<SigningKey<Sha256>, ProviderError> {
        let pem = self.private_key.trim();
        let key = rsa::PrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| rsa::PrivateKey::from_pkcs1_pem(pem))
            .map_err(|_| {
                ProviderError::Failed(format!(
                    "the private_key of service account {} is not an RSA key in PEM",
                    self.client_email
                ))
            })?;
        Ok(SigningKey::new(key))
    }

    /// The token endpoint's request for `assertion`: a form `POST` of the JWT bearer grant.
    pub fn token_request(&self, assertion: &str) -> Request {
        // The assertion is base64url and dots: nothing in it needs encoding in a form.
        let form = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        );
        Request::post(self.token_uri())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(form.into_bytes())
    }
}

/// The credentials of `route`: the service account's key its settings name
/// (`credentials_file_env` or `credentials_env`), else its key as an access token.
pub fn credentials<'a>(
    route: &'a Route,
    settings: &Settings,
) -> Result<Credentials<'a>, ProviderError> {
    let named = |secret: &str, setting: &str, variable: &str, what: &str| {
        route.secret(secret).ok_or_else(|| {
            ProviderError::Failed(format!(
                "route `{}`: settings.{setting} names {variable}, which is not set{what}",
                route.id
            ))
        })
    };
    let (json, source) = match (&settings.credentials_file_env, &settings.credentials_env) {
        (Some(_), Some(_)) => {
            return Err(ProviderError::Failed(format!(
                "route `{}`: set one of settings.credentials_file_env and \
                 settings.credentials_env, not both",
                route.id
            )));
        }
        (Some(variable), None) => (
            named(
                "credentials_file",
                "credentials_file_env",
                variable,
                " or whose file cannot be read",
            )?,
            format!("the file {variable} names"),
        ),
        (None, Some(variable)) => (
            named("credentials", "credentials_env", variable, "")?,
            variable.clone(),
        ),
        (None, None) => {
            return match route
                .api_key
                .as_deref()
                .filter(|key| !key.trim().is_empty())
            {
                Some(token) => Ok(Credentials::Token(token.trim())),
                None => Err(ProviderError::Failed(format!(
                    "route `{}` has no credentials: set settings.credentials_file_env (or \
                     credentials_env) to a service account's key, or give an access token as \
                     its key",
                    route.id
                ))),
            };
        }
    };
    let source = format!("route `{}`: {source}", route.id);
    ServiceAccount::parse(json, &source).map(Credentials::ServiceAccount)
}

/// The `kv` key of `account`'s token: one per account (and token endpoint), so that two
/// accounts never share a token. Keys are not secret; the token is the value.
pub fn cache_key(account: &ServiceAccount) -> String {
    format!(
        "access-token:{}:{}",
        account.client_email.trim(),
        account.token_uri()
    )
}

/// The access token for `credentials`: the route's own, or `account`'s kept token, minted (by
/// `send`ing the token request) when there is none or it is about to expire.
pub fn access_token(
    route: &Route,
    credentials: &Credentials<'_>,
    send: impl FnOnce(Request) -> Result<Response, ProviderError>,
) -> Result<String, ProviderError> {
    let account = match credentials {
        Credentials::Token(token) => return Ok((*token).to_owned()),
        Credentials::ServiceAccount(account) => account,
    };
    let token = kv::get_or_refresh_with(&cache_key(account), || {
        let assertion = account.assertion(unix_now())?;
        let response = send(account.token_request(&assertion)).map_err(|e| match e {
            ProviderError::Timeout(message) => ProviderError::Timeout(format!(
                "route `{}`: the token endpoint {}: {message}",
                route.id,
                account.token_uri()
            )),
            other => ProviderError::Failed(format!(
                "route `{}`: the token endpoint {} could not be reached: {}",
                route.id,
                account.token_uri(),
                error_text(&other)
            )),
        })?;
        let (token, lifetime) = read_token(response, account, &route.id)?;
        Ok::<_, ProviderError>((token.into_bytes(), lifetime.saturating_sub(EXPIRY_MARGIN)))
    })?;
    String::from_utf8(token)
        .map_err(|_| ProviderError::Failed("the kept access token is not text".into()))
}

/// Forgets `credentials`' kept token (the upstream refused it: revoked, or the account's
/// rights changed), so that the next call mints another.
pub fn forget(credentials: &Credentials<'_>) {
    if let Credentials::ServiceAccount(account) = credentials {
        kv::delete(&cache_key(account));
    }
}

/// The text of an SDK error, for wrapping it in another.
fn error_text(error: &ProviderError) -> &str {
    match error {
        ProviderError::InvalidRequest(message)
        | ProviderError::Timeout(message)
        | ProviderError::Failed(message) => message,
        ProviderError::Upstream(error) => &error.message,
    }
}

/// The token endpoint's answer.
#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// The access token and its lifetime from the token endpoint's `response`. A refusal is
/// [`ProviderError::Failed`] (the gateway answers 502) naming the endpoint, its status and its
/// `error` and `error_description` (OAuth's error fields, which carry neither key nor token).
pub fn read_token(
    response: Response,
    account: &ServiceAccount,
    route: &str,
) -> Result<(String, Duration), ProviderError> {
    let status = response.status;
    let success = response.is_success();
    let endpoint = account.token_uri();
    let body = response.bytes()?;
    let answer: Option<TokenAnswer> = serde_json::from_slice(&body).ok();
    if !success {
        let reason = match answer {
            Some(TokenAnswer {
                error: Some(error),
                error_description,
                ..
            }) => match error_description.filter(|d| !d.is_empty()) {
                Some(description) => format!("{error}: {description}"),
                None => error,
            },
            _ => "no OAuth error in its answer".to_owned(),
        };
        return Err(ProviderError::Failed(format!(
            "route `{route}`: the token endpoint {endpoint} refused service account {} \
             (HTTP {status}): {reason}",
            account.client_email
        )));
    }
    match answer {
        Some(TokenAnswer {
            access_token: Some(token),
            expires_in,
            ..
        }) if !token.is_empty() => Ok((
            token,
            // Google's tokens live an hour; an answer without a lifetime is used once.
            Duration::from_secs(expires_in.unwrap_or(0)),
        )),
        _ => Err(ProviderError::Failed(format!(
            "route `{route}`: the token endpoint {endpoint} answered without an access_token"
        ))),
    }
}

/// Seconds since the Unix epoch (the JWT's `iat`).
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
