//! Client certificates of X.509 version 1, accepted as OpenSSL accepts
//! them. webpki (rustls's verifier) reads only version 3 and refuses a v1
//! certificate outright, yet `openssl x509 -req` without an extensions file
//! makes v1 (Redis's own test certificates are such), and Redis, on
//! OpenSSL, takes them. So a client certificate webpki refuses is looked at
//! once more here when it is v1: it must be signed, with an algorithm the
//! crypto provider verifies, directly by one of the configured CAs, and be
//! within its validity dates. Every other certificate (v3, with any chain)
//! is webpki's alone, and its refusal stands.
//!
//! The same check serves a replica's link to its primary
//! ([`PrimaryVerifier`]): the primary's certificate must chain to the
//! configured CAs (webpki's check, or the v1 one), and its names are not
//! compared with the host the replica dialled, as Redis (OpenSSL with no
//! host check) does not compare them.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, PeerMisbehaved,
    RootCertStore, SignatureScheme,
};
use x509_cert::certificate::Version;
use x509_cert::der::asn1::AnyRef;
use x509_cert::der::{Decode, Encode, Tag};
use x509_cert::spki::SubjectPublicKeyInfoOwned;
use x509_cert::Certificate;

/// A configured CA as the v1 check needs it.
#[derive(Debug)]
struct Anchor {
    /// The contents of its subject Name (as a v1 certificate's issuer).
    subject: Vec<u8>,
    /// The contents of its public key's AlgorithmIdentifier.
    key_algorithm: Vec<u8>,
    /// Its public key (the subjectPublicKey bits).
    key: Vec<u8>,
}

/// The check of v1 certificates: signed directly by a configured CA.
#[derive(Debug)]
struct Version1 {
    anchors: Vec<Anchor>,
    algorithms: WebPkiSupportedAlgorithms,
}

/// webpki's client certificate verifier, plus v1 certificates signed
/// directly by a configured CA.
#[derive(Debug)]
pub(crate) struct WithVersion1 {
    webpki: Arc<dyn ClientCertVerifier>,
    v1: Version1,
}

/// A replica's check of its primary's certificate: webpki's chain check
/// (its name check aside), plus v1 certificates signed directly by a
/// configured CA.
#[derive(Debug)]
pub(crate) struct PrimaryVerifier {
    webpki: Arc<WebPkiServerVerifier>,
    v1: Version1,
}

/// The contents of a DER value (what follows its tag and length).
fn contents(der: &[u8]) -> Option<Vec<u8>> {
    AnyRef::from_der(der).ok().map(|any| any.value().to_vec())
}

/// The contents of an encodable value's DER.
fn contents_of(value: &impl Encode) -> Option<Vec<u8>> {
    contents(&value.to_der().ok()?)
}

/// The key algorithm (contents) and key bits of a public key.
fn key_parts(spki: &SubjectPublicKeyInfoOwned) -> Option<(Vec<u8>, Vec<u8>)> {
    Some((
        contents_of(&spki.algorithm)?,
        spki.subject_public_key.as_bytes()?.to_vec(),
    ))
}

/// `der` as a certificate, if it is one of version 1.
fn version_1(der: &CertificateDer<'_>) -> Option<Certificate> {
    Certificate::from_der(der)
        .ok()
        .filter(|c| c.tbs_certificate.version == Version::V1)
}

impl WithVersion1 {
    /// Wraps `webpki`, built over `roots`; `algorithms` are the crypto
    /// provider's.
    pub(crate) fn new(
        webpki: Arc<dyn ClientCertVerifier>,
        roots: &RootCertStore,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> WithVersion1 {
        WithVersion1 {
            webpki,
            v1: Version1::new(roots, algorithms),
        }
    }
}

impl PrimaryVerifier {
    /// Wraps `webpki`, built over `roots`; `algorithms` are the crypto
    /// provider's.
    pub(crate) fn new(
        webpki: Arc<WebPkiServerVerifier>,
        roots: &RootCertStore,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> PrimaryVerifier {
        PrimaryVerifier {
            webpki,
            v1: Version1::new(roots, algorithms),
        }
    }
}

impl Version1 {
    fn new(roots: &RootCertStore, algorithms: WebPkiSupportedAlgorithms) -> Version1 {
        let anchors = roots
            .roots
            .iter()
            .filter_map(|anchor| {
                // The trust anchor keeps the contents of the key's
                // SEQUENCE: wrapped again to be read.
                let spki_der = AnyRef::new(Tag::Sequence, anchor.subject_public_key_info.as_ref())
                    .ok()?
                    .to_der()
                    .ok()?;
                let spki = SubjectPublicKeyInfoOwned::from_der(&spki_der).ok()?;
                let (key_algorithm, key) = key_parts(&spki)?;
                Some(Anchor {
                    subject: anchor.subject.as_ref().to_vec(),
                    key_algorithm,
                    key,
                })
            })
            .collect();
        Version1 {
            anchors,
            algorithms,
        }
    }

    /// A v1 certificate's own check: dates, then a signature by a CA.
    fn verify_version_1(&self, cert: &Certificate, now: UnixTime) -> Result<(), Error> {
        let tbs = &cert.tbs_certificate;
        let now = now.as_secs();
        if now < tbs.validity.not_before.to_unix_duration().as_secs() {
            return Err(CertificateError::NotValidYet.into());
        }
        if now > tbs.validity.not_after.to_unix_duration().as_secs() {
            return Err(CertificateError::Expired.into());
        }
        let unreadable = || Error::InvalidCertificate(CertificateError::BadEncoding);
        // The algorithm inside the signed part must be the one outside.
        if tbs.signature != cert.signature_algorithm {
            return Err(unreadable());
        }
        let issuer = contents_of(&tbs.issuer).ok_or_else(unreadable)?;
        let signature_algorithm = contents_of(&cert.signature_algorithm).ok_or_else(unreadable)?;
        let signed = tbs.to_der().map_err(|_| unreadable())?;
        let signature = cert.signature.as_bytes().ok_or_else(unreadable)?;
        let mut issuers = self
            .anchors
            .iter()
            .filter(|a| a.subject == issuer)
            .peekable();
        if issuers.peek().is_none() {
            return Err(CertificateError::UnknownIssuer.into());
        }
        for ca in issuers {
            let signed_by_ca = self.algorithms.all.iter().any(|alg| {
                alg.signature_alg_id().as_ref() == signature_algorithm.as_slice()
                    && alg.public_key_alg_id().as_ref() == ca.key_algorithm.as_slice()
                    && alg.verify_signature(&ca.key, &signed, signature).is_ok()
            });
            if signed_by_ca {
                return Ok(());
            }
        }
        Err(CertificateError::BadSignature.into())
    }

    /// The handshake's signature by a v1 certificate's key.
    fn verify_handshake(
        &self,
        cert: &Certificate,
        message: &[u8],
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let unadvertised =
            || Error::PeerMisbehaved(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme);
        let (key_algorithm, key) = key_parts(&cert.tbs_certificate.subject_public_key_info)
            .ok_or(Error::InvalidCertificate(CertificateError::BadEncoding))?;
        let algorithms = self
            .algorithms
            .mapping
            .iter()
            .find(|(scheme, _)| *scheme == dss.scheme)
            .map(|(_, algs)| *algs)
            .ok_or_else(unadvertised)?;
        let valid = algorithms.iter().any(|alg| {
            alg.public_key_alg_id().as_ref() == key_algorithm.as_slice()
                && alg.verify_signature(&key, message, dss.signature()).is_ok()
        });
        if valid {
            Ok(HandshakeSignatureValid::assertion())
        } else {
            Err(CertificateError::BadSignature.into())
        }
    }
}

/// The signature schemes TLS 1.3 allows in a handshake (RFC 8446 4.2.3:
/// no PKCS#1 v1.5, no SHA-1).
impl Version1 {
    /// A TLS 1.2 handshake signature: by a v1 certificate's key, else as
    /// webpki (`others`) checks it.
    fn tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        others: impl FnOnce() -> Result<HandshakeSignatureValid, Error>,
    ) -> Result<HandshakeSignatureValid, Error> {
        match version_1(cert) {
            Some(c) => self.verify_handshake(&c, message, dss),
            None => others(),
        }
    }

    /// A TLS 1.3 handshake signature: a v1 certificate's key with a scheme
    /// TLS 1.3 allows, else as webpki (`others`) checks it.
    fn tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
        others: impl FnOnce() -> Result<HandshakeSignatureValid, Error>,
    ) -> Result<HandshakeSignatureValid, Error> {
        match version_1(cert) {
            Some(_) if !allowed_in_tls13(dss.scheme) => Err(Error::PeerMisbehaved(
                PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme,
            )),
            Some(c) => self.verify_handshake(&c, message, dss),
            None => others(),
        }
    }
}

fn allowed_in_tls13(scheme: SignatureScheme) -> bool {
    matches!(
        scheme,
        SignatureScheme::ECDSA_NISTP256_SHA256
            | SignatureScheme::ECDSA_NISTP384_SHA384
            | SignatureScheme::ECDSA_NISTP521_SHA512
            | SignatureScheme::RSA_PSS_SHA256
            | SignatureScheme::RSA_PSS_SHA384
            | SignatureScheme::RSA_PSS_SHA512
            | SignatureScheme::ED25519
            | SignatureScheme::ED448
    )
}

impl ClientCertVerifier for WithVersion1 {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        match self
            .webpki
            .verify_client_cert(end_entity, intermediates, now)
        {
            Ok(verified) => Ok(verified),
            Err(refused) => match version_1(end_entity) {
                Some(cert) => self
                    .v1
                    .verify_version_1(&cert, now)
                    .map(|()| ClientCertVerified::assertion()),
                None => Err(refused),
            },
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1.tls12_signature(message, cert, dss, || {
            self.webpki.verify_tls12_signature(message, cert, dss)
        })
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1.tls13_signature(message, cert, dss, || {
            self.webpki.verify_tls13_signature(message, cert, dss)
        })
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether webpki refused a certificate only for its names: its chain
/// was checked before them.
fn only_the_name_differs(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        )
    )
}

impl ServerCertVerifier for PrimaryVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => Ok(verified),
            Err(e) if only_the_name_differs(&e) => Ok(ServerCertVerified::assertion()),
            Err(refused) => match version_1(end_entity) {
                Some(cert) => self
                    .v1
                    .verify_version_1(&cert, now)
                    .map(|()| ServerCertVerified::assertion()),
                None => Err(refused),
            },
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1.tls12_signature(message, cert, dss, || {
            self.webpki.verify_tls12_signature(message, cert, dss)
        })
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.v1.tls13_signature(message, cert, dss, || {
            self.webpki.verify_tls13_signature(message, cert, dss)
        })
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
