//! The checks of the server's certificate that `sslmode` asks for.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_platform_verifier::Verifier;

use crate::store::StoreError;

/// How much of the server's certificate is checked when TLS is used, after
/// libpq's `sslmode`: `prefer` and `require` encrypt without checking it (a
/// stock Debian server offers a self-signed `localhost` certificate),
/// `verify-ca` checks it chains to a trusted root, `verify-full` also that it
/// names the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verify {
    Nothing,
    Chain,
    Full,
}

/// The certificates of `sslrootcert`'s PEM file.
pub(super) fn root_store(path: &std::path::Path) -> Result<rustls::RootCertStore, StoreError> {
    use rustls::pki_types::pem::PemObject;
    let bad = |why: String| StoreError::Pool(format!("sslrootcert {}: {why}", path.display()));
    let mut store = rustls::RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|e| bad(e.to_string()))?;
        store.add(certificate).map_err(|e| bad(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(store)
}

pub(super) fn rustls_config(
    verify: Verify,
    roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Built only when something is checked: `prefer` and `require` need no trust store.
    let checked = |provider: Arc<rustls::crypto::CryptoProvider>| {
        Ok::<Arc<dyn ServerCertVerifier>, rustls::Error>(match roots {
            None => Arc::new(Verifier::new(provider)?),
            Some(roots) => rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?,
        })
    };
    let verifier: Arc<dyn ServerCertVerifier> = match verify {
        Verify::Nothing => Arc::new(Unverified(provider.clone())),
        Verify::Chain => Arc::new(ChainOnly(checked(provider.clone())?)),
        Verify::Full => checked(provider.clone())?,
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `sslmode=prefer` and `require`: any certificate, as libpq takes it (the
/// handshake's signatures are still checked against it).
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the full check's verdict, except on the host name
/// (which it checks after the chain, so a name error means the chain held).
#[derive(Debug)]
struct ChainOnly(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verdict =
            self.0
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verdict {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
