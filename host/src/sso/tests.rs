//! ID tokens made and signed here (with the test keys of `testdata/`, made with
//! `openssl genrsa` for these tests only), verified as a provider's would be: the right one
//! accepted, with its email and groups; one of a wrong signature, issuer, audience, expiry or
//! nonce refused; one of a key the JWKS does not list told apart (the provider rotated its
//! keys).

use chrono::{Duration as Span, Utc};
use openidconnect::core::{
    CoreGenderClaim, CoreIdToken, CoreIdTokenVerifier, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreRsaPrivateSigningKey,
};
use openidconnect::{
    AdditionalClaims, Audience, ClientId, EndUserEmail, IdToken, IdTokenClaims, IssuerUrl,
    JsonWebKeyId, JsonWebKeySet, Nonce, PrivateSigningKey, StandardClaims, SubjectIdentifier,
};

use super::*;

const SIGNING: &str = include_str!("testdata/signing.pem");
const OTHER: &str = include_str!("testdata/other.pem");
const ISSUER: &str = "https://idp.test/realms/main";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Groups {
    groups: Vec<String>,
}
impl AdditionalClaims for Groups {}

type GroupsToken =
    IdToken<Groups, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;

fn key(pem: &str, kid: &str) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(pem, Some(JsonWebKeyId::new(kid.into()))).unwrap()
}

fn oidc() -> OidcConfig {
    toml::from_str(&format!(
        r#"
        issuer = "{ISSUER}"
        client_id = "gateway"
        redirect_url = "https://gateway.test/ui/oidc/callback"
        "#
    ))
    .unwrap()
}

/// What a token is made of: the provider's by default ([`Made::good`]), one part changed by
/// each case.
struct Made {
    issuer: &'static str,
    audience: &'static str,
    expires_in: Span,
    nonce: &'static str,
    key: CoreRsaPrivateSigningKey,
}

impl Made {
    fn good() -> Made {
        Made {
            issuer: ISSUER,
            audience: "gateway",
            expires_in: Span::minutes(5),
            nonce: "n-1",
            key: key(SIGNING, "k1"),
        }
    }

    fn token(self) -> CoreIdToken {
        let now = Utc::now();
        let claims = IdTokenClaims::new(
            IssuerUrl::new(self.issuer.into()).unwrap(),
            vec![Audience::new(self.audience.into())],
            now + self.expires_in,
            now - Span::seconds(1),
            StandardClaims::new(SubjectIdentifier::new("sub-alice".into()))
                .set_email(Some(EndUserEmail::new("Alice@Example.COM".into()))),
            Groups {
                groups: vec!["platform".into(), "team-a".into()],
            },
        )
        .set_nonce(Some(Nonce::new(self.nonce.into())));
        let signed = GroupsToken::new(
            claims,
            &self.key,
            CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
            None,
            None,
        )
        .unwrap();
        signed.to_string().parse().unwrap()
    }
}

/// The provider's JWKS as discovery gives it: the signing key's public half.
fn verifier() -> CoreIdTokenVerifier<'static> {
    let jwks = JsonWebKeySet::new(vec![key(SIGNING, "k1").as_verification_key()]);
    CoreIdTokenVerifier::new_public_client(
        ClientId::new("gateway".into()),
        IssuerUrl::new(ISSUER.into()).unwrap(),
        jwks,
    )
}

fn check(made: Made) -> Result<SignedIn, SsoError> {
    verify(
        &made.token(),
        &verifier(),
        &Nonce::new("n-1".into()),
        &oidc(),
    )
}

#[test]
fn a_token_of_the_provider_is_accepted_with_its_email_and_groups() {
    let signed_in = check(Made::good()).unwrap();
    assert_eq!(signed_in.subject, "sub-alice");
    assert_eq!(signed_in.email.as_deref(), Some("alice@example.com"));
    assert_eq!(signed_in.groups, ["platform", "team-a"]);
}

#[test]
fn a_token_wrong_in_any_way_is_refused() {
    let refused = |made: Made, what: &str| {
        let error = check(made).expect_err(what);
        assert!(matches!(error, SsoError::Token(_)), "{what}: {error}");
        error.to_string()
    };
    // Signed with another key under the listed key's id.
    let forged = refused(
        Made {
            key: key(OTHER, "k1"),
            ..Made::good()
        },
        "signature",
    );
    assert!(forged.contains("ignature"), "{forged}");
    let issuer = refused(
        Made {
            issuer: "https://evil.test",
            ..Made::good()
        },
        "issuer",
    );
    assert!(issuer.contains("ssuer"), "{issuer}");
    let audience = refused(
        Made {
            audience: "another-client",
            ..Made::good()
        },
        "audience",
    );
    assert!(audience.contains("udience"), "{audience}");
    let expired = refused(
        Made {
            expires_in: Span::minutes(-5),
            ..Made::good()
        },
        "expiry",
    );
    assert!(expired.contains("xpired"), "{expired}");
    let nonce = refused(
        Made {
            nonce: "replayed",
            ..Made::good()
        },
        "nonce",
    );
    assert!(nonce.contains("once"), "{nonce}");
}

#[test]
fn a_token_of_a_key_the_jwks_does_not_list_is_told_apart() {
    let error = check(Made {
        key: key(OTHER, "k2"),
        ..Made::good()
    })
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        SsoError::Token(NO_MATCHING_KEY.into()).to_string()
    );
}
