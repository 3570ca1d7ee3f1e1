//! Single sign-on to the console with the config's `[oidc]` provider: OpenID Connect's
//! authorization code flow with PKCE, `state` and `nonce` ([`Sso::begin`], [`Sso::finish`]),
//! the ID token verified by `openidconnect` (its signature against the issuer's JWKS, `iss`,
//! `aud`, `exp`, `nonce`), and sign-out at the provider where it offers it
//! ([`Sso::end_session_url`]).
//!
//! The provider's discovery document (with its JWKS) is fetched on first use and kept an hour;
//! an ID token signed with a key it does not list is verified again against a fresh one (the
//! provider rotated its keys), at most once every [`REFRESH_AT_MOST`]. Requests to the provider
//! go through reqwest without following redirects (a redirect is how a discovery document
//! would point the gateway elsewhere) and within [`TIMEOUT`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreIdTokenVerifier};

use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, EndSessionUrl,
    IssuerUrl, LogoutRequest, Nonce, PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl,
    ProviderMetadataWithLogout, RedirectUrl, Scope, SignatureVerificationError, TokenResponse,
};

use crate::causes::with_causes;
use crate::config::oidc::OidcConfig;

/// How long a discovery document (and its keys) is kept.
const KEEP: Duration = Duration::from_secs(3600);
/// The least time between two fetches of the document for an unknown signing key: tokens of
/// keys the provider never had cannot make the gateway fetch it more than once a second (and
/// such a token comes only from the provider's own token endpoint, for a code it issued).
const REFRESH_AT_MOST: Duration = Duration::from_secs(1);
/// A request to the provider at most.
const TIMEOUT: Duration = Duration::from_secs(10);
/// A provider's answer at most (a discovery document, a JWKS, a token response).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Why a sign-in could not be done.
#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    /// The provider could not be reached or answered what is no OpenID provider's answer.
    #[error("the OpenID provider: {0}")]
    Provider(String),
    /// The provider refused the code (it expired, was used, or the PKCE verifier is wrong).
    #[error("the OpenID provider refused the sign-in: {0}")]
    Refused(String),
    /// The ID token is not one to trust: its signature, issuer, audience, expiry or nonce.
    #[error("the ID token was refused: {0}")]
    Token(String),
    /// The config names something unusable (a URL, the secret's variable).
    #[error("[oidc]: {0}")]
    Config(String),
}

/// What a sign-in started, which the browser keeps (in a signed cookie) until it comes back.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
}

/// Who signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The provider's `sub`.
    pub subject: String,
    /// The `email` claim, when the provider gave one: how users are named.
    pub email: Option<String>,
    /// The groups claim's values.
    pub groups: Vec<String>,
}

struct Discovered {
    issuer: String,
    metadata: ProviderMetadataWithLogout,
    at: Instant,
}

/// The console's OpenID client: one per process, whatever the `[oidc]` table says now.
pub struct Sso {
    http: reqwest::Client,
    discovered: Mutex<Option<Discovered>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct HttpError(String);

impl Default for Sso {
    fn default() -> Self {
        Sso::new()
    }
}

impl Sso {
    pub fn new() -> Sso {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .build()
            .unwrap_or_default();
        Sso {
            http,
            discovered: Mutex::new(None),
        }
    }

    /// One request to the provider, as `openidconnect` asks it.
    async fn send(
        http: reqwest::Client,
        request: openidconnect::HttpRequest,
    ) -> Result<openidconnect::HttpResponse, HttpError> {
        let (parts, body) = request.into_parts();
        let response = http
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| HttpError(e.to_string()))?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| HttpError(e.to_string()))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(HttpError(format!(
                    "an answer over {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let mut answer = openidconnect::HttpResponse::new(body);
        *answer.status_mut() = status;
        *answer.headers_mut() = headers;
        Ok(answer)
    }

    /// The provider's discovery document: kept, or fetched when there is none for this issuer,
    /// it is old, or `refresh` (and the last fetch was long enough ago).
    async fn metadata(
        &self,
        config: &OidcConfig,
        refresh: bool,
    ) -> Result<ProviderMetadataWithLogout, SsoError> {
        {
            let kept = self.discovered.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(kept) = kept.as_ref().filter(|kept| kept.issuer == config.issuer) {
                let age = kept.at.elapsed();
                if age < KEEP && (!refresh || age < REFRESH_AT_MOST) {
                    return Ok(kept.metadata.clone());
                }
            }
        }
        let issuer = IssuerUrl::new(config.issuer.clone())
            .map_err(|e| SsoError::Config(format!("issuer: {e}")))?;
        let client = self.http.clone();
        let http = move |request| Sso::send(client.clone(), request);
        let metadata = ProviderMetadataWithLogout::discover_async(issuer, &http)
            .await
            .map_err(|e| SsoError::Provider(with_causes(&e)))?;
        *self.discovered.lock().unwrap_or_else(|p| p.into_inner()) = Some(Discovered {
            issuer: config.issuer.clone(),
            metadata: metadata.clone(),
            at: Instant::now(),
        });
        Ok(metadata)
    }

    /// Starts a sign-in: where to send the browser, and what to keep until it comes back.
    pub async fn begin(&self, config: &OidcConfig) -> Result<(String, Pending), SsoError> {
        let metadata = self.metadata(config, false).await?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(config.client_id.clone()),
            None,
        )
        .set_redirect_uri(redirect_url(config)?);
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        );
        for scope in config.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        let pending = Pending {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            verifier: verifier.secret().clone(),
        };
        Ok((url.to_string(), pending))
    }

    /// Ends a sign-in: the code exchanged (with the PKCE verifier and the client's secret) for
    /// an ID token, which is verified. `state` has been checked against `pending` already.
    pub async fn finish(
        &self,
        config: &OidcConfig,
        pending: &Pending,
        code: &str,
    ) -> Result<SignedIn, SsoError> {
        let secret = client_secret(config)?;
        let metadata = self.metadata(config, false).await?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(config.client_id.clone()),
            secret.map(ClientSecret::new),
        )
        .set_redirect_uri(redirect_url(config)?);
        let http_client = self.http.clone();
        let http = move |request| Sso::send(http_client.clone(), request);
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| SsoError::Provider(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.clone()))
            .request_async(&http)
            .await
            .map_err(|e| SsoError::Refused(with_causes(&e)))?;
        let token = response
            .id_token()
            .ok_or_else(|| SsoError::Provider("the token response has no ID token".into()))?;
        let nonce = Nonce::new(pending.nonce.clone());
        match verify(token, &client.id_token_verifier(), &nonce, config) {
            Err(SsoError::Token(why)) if why == NO_MATCHING_KEY => {
                // Signed with a key the kept JWKS does not have: the provider rotated its
                // keys since. Once more with what it lists now.
                let fresh = self.metadata(config, true).await?;
                let client = CoreClient::from_provider_metadata(
                    fresh,
                    ClientId::new(config.client_id.clone()),
                    client_secret(config)?.map(ClientSecret::new),
                );
                verify(token, &client.id_token_verifier(), &nonce, config)
            }
            verified => verified,
        }
    }

    /// Where to send the browser to sign out at the provider too, when it offers it
    /// (`end_session_endpoint`); after that it comes back to `back_to`.
    pub async fn end_session_url(&self, config: &OidcConfig, back_to: &str) -> Option<String> {
        let metadata = self.metadata(config, false).await.ok()?;
        let endpoint: EndSessionUrl = metadata
            .additional_metadata()
            .end_session_endpoint
            .clone()?;
        let mut request =
            LogoutRequest::from(endpoint).set_client_id(ClientId::new(config.client_id.clone()));
        if let Ok(back) = PostLogoutRedirectUrl::new(back_to.to_owned()) {
            request = request.set_post_logout_redirect_uri(back);
        }
        Some(request.http_get_url().to_string())
    }
}

/// What [`verify`] says when no key of the JWKS matches the token's.
const NO_MATCHING_KEY: &str = "no key of the provider's JWKS signed it";

/// The token's claims, if `verifier` (the issuer's keys, the client id, the issuer) and
/// `nonce` accept it: signature, `iss`, `aud` (and `azp`), `exp`, `nonce`.
pub fn verify(
    token: &CoreIdToken,
    verifier: &CoreIdTokenVerifier<'_>,
    nonce: &Nonce,
    config: &OidcConfig,
) -> Result<SignedIn, SsoError> {
    let claims = token.claims(verifier, nonce).map_err(|e| match e {
        ClaimsVerificationError::SignatureVerification(
            SignatureVerificationError::NoMatchingKey,
        ) => SsoError::Token(NO_MATCHING_KEY.into()),
        other => SsoError::Token(with_causes(&other)),
    })?;
    // The claims the core types do not keep (the groups) from the payload whose signature was
    // just verified.
    let payload = token
        .to_string()
        .split('.')
        .nth(1)
        .and_then(|part| crate::encoding::base64url_decode(part).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .unwrap_or_default();
    let groups = match &payload[config.groups_claim.as_str()] {
        serde_json::Value::Array(values) => values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        serde_json::Value::String(one) => vec![one.clone()],
        _ => Vec::new(),
    };
    Ok(SignedIn {
        subject: claims.subject().as_str().to_owned(),
        email: claims.email().map(|email| email.as_str().to_lowercase()),
        groups,
    })
}

fn redirect_url(config: &OidcConfig) -> Result<RedirectUrl, SsoError> {
    RedirectUrl::new(config.redirect_url.clone())
        .map_err(|e| SsoError::Config(format!("redirect_url: {e}")))
}

/// The client's secret from the environment variable `client_secret_env` names.
fn client_secret(config: &OidcConfig) -> Result<Option<String>, SsoError> {
    let Some(name) = &config.client_secret_env else {
        return Ok(None);
    };
    match std::env::var(name) {
        Ok(secret) if !secret.is_empty() => Ok(Some(secret)),
        _ => Err(SsoError::Config(format!(
            "client_secret_env names {name}, which is not set"
        ))),
    }
}

#[cfg(test)]
mod tests;
