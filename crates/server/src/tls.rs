//! TLS with rustls: Redis 7.0's `tls-*` settings turned into a rustls
//! server configuration (for the TLS Redis port, and the memcached and
//! HTTP ports when `memcached-tls` / `http-tls` are on) and a client
//! configuration (for a link this server opens, such as a replica's link
//! to its primary under `tls-replication`).
//!
//! rustls with the `ring` provider: no C toolchain beyond what `ring`
//! needs, TLS 1.2 and 1.3 only (Redis's `TLSv1` and `TLSv1.1` are refused
//! as unsupported), no renegotiation. Settings are read from the
//! segment's shared setting text, so every worker builds the same
//! configuration, and builds it again when `CONFIG SET` changes one (see
//! [`Acceptor`]).

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::ring as provider;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedCipherSuite};
use x509_cert::der::{Decode, Encode};

/// Redis's `tls-auth-clients`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client must present a certificate the CA list trusts.
    Required,
    /// A client may present one; if it does, it must be trusted.
    Optional,
    /// Client certificates are not asked for.
    No,
}

/// The TLS settings, by their Redis names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-cert-file`: the server's certificate chain (PEM).
    pub cert_file: String,
    /// `tls-key-file`: its private key (PEM, unencrypted).
    pub key_file: String,
    /// `tls-key-file-pass`: kept; encrypted keys are refused (see
    /// [`load_key`]).
    pub key_file_pass: String,
    /// `tls-client-cert-file` / `tls-client-key-file`: the certificate
    /// this server shows when it connects out (default: the server's).
    pub client_cert_file: String,
    /// See `client_cert_file`.
    pub client_key_file: String,
    /// `tls-client-key-file-pass`: the password of `client_key_file`.
    pub client_key_file_pass: String,
    /// `tls-ca-cert-file`: CA certificates (PEM) that clients' (and
    /// primaries') certificates must chain to.
    pub ca_cert_file: String,
    /// `tls-ca-cert-dir`: a directory of such PEM files.
    pub ca_cert_dir: String,
    /// `tls-auth-clients`.
    pub auth_clients: Option<ClientAuth>,
    /// `tls-protocols` (empty: TLS 1.2 and 1.3).
    pub protocols: String,
    /// `tls-ciphers`: TLS 1.2 suites, OpenSSL's names.
    pub ciphers: String,
    /// `tls-ciphersuites`: TLS 1.3 suites, IANA (= OpenSSL's) names.
    pub ciphersuites: String,
    /// `tls-prefer-server-ciphers`.
    pub prefer_server_ciphers: bool,
    /// `memcached-tls`: the memcached TCP port speaks TLS.
    pub memcached: bool,
    /// `http-tls`: the HTTP port speaks TLS (HTTPS and WSS).
    pub http: bool,
}

impl TlsSettings {
    /// Reads the settings from the shared setting text.
    pub fn from_text(text: &[u8]) -> TlsSettings {
        let get = |name: &str| engine::setting_in(text, name).unwrap_or_default();
        TlsSettings {
            cert_file: get("tls-cert-file"),
            key_file: get("tls-key-file"),
            key_file_pass: get("tls-key-file-pass"),
            client_cert_file: get("tls-client-cert-file"),
            client_key_file: get("tls-client-key-file"),
            client_key_file_pass: get("tls-client-key-file-pass"),
            ca_cert_file: get("tls-ca-cert-file"),
            ca_cert_dir: get("tls-ca-cert-dir"),
            auth_clients: match get("tls-auth-clients").as_str() {
                "no" => Some(ClientAuth::No),
                "optional" => Some(ClientAuth::Optional),
                _ => Some(ClientAuth::Required),
            },
            protocols: get("tls-protocols"),
            ciphers: get("tls-ciphers"),
            ciphersuites: get("tls-ciphersuites"),
            prefer_server_ciphers: get("tls-prefer-server-ciphers") == "yes",
            memcached: get("memcached-tls") == "yes",
            http: get("http-tls") == "yes",
        }
    }

    /// Whether any listener needs a server configuration (`tls_port` is
    /// the configured `tls-port`).
    pub fn wanted(&self, tls_port: u16) -> bool {
        tls_port != 0 || self.memcached || self.http
    }
}

/// The server configuration `s` makes; the error says why there is none.
pub fn server_config(s: &TlsSettings) -> Result<Arc<ServerConfig>, String> {
    if s.cert_file.is_empty() || s.key_file.is_empty() {
        return Err("tls-cert-file and tls-key-file must be set".into());
    }
    let certs = load_certs(&s.cert_file)?;
    let key = load_key(&s.key_file, &s.key_file_pass)?;
    let provider = Arc::new(self::provider(s)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(&s.protocols)?)
        .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?;
    let auth = s.auth_clients.unwrap_or(ClientAuth::Required);
    let builder = if auth == ClientAuth::No {
        builder.with_no_client_auth()
    } else {
        let roots = Arc::new(roots(s)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
        let verifier = if auth == ClientAuth::Optional {
            verifier.allow_unauthenticated()
        } else {
            verifier
        };
        let webpki = verifier
            .build()
            .map_err(|e| format!("client certificate verifier: {e}"))?;
        builder.with_client_cert_verifier(Arc::new(crate::client_cert::WithVersion1::new(
            webpki,
            &roots,
            provider.signature_verification_algorithms,
        )))
    };
    let certified = certified_key(certs, key, &provider)
        .map_err(|e| format!("{} and {}: {e}", s.cert_file, s.key_file))?;
    let mut config = builder.with_cert_resolver(Arc::new(SingleCertAndKey::from(certified)));
    config.ignore_client_order = s.prefer_server_ciphers;
    Ok(Arc::new(config))
}

/// The client configuration for a link this server opens (a replica's
/// link to its primary): the peer must chain to the CA list (its names
/// are not checked, as Redis does not check them; v1 certificates as in
/// [`crate::client_cert`]); this server shows `tls-client-cert-file`
/// (else `tls-cert-file`), as Redis does.
pub fn client_config(s: &TlsSettings) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(provider(s)?);
    let roots = Arc::new(roots(s)?);
    let webpki = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| format!("server certificate verifier: {e}"))?;
    let verifier = crate::client_cert::PrimaryVerifier::new(
        webpki,
        &roots,
        provider.signature_verification_algorithms,
    );
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(&s.protocols)?)
        .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let (cert, key, pass) = if s.client_cert_file.is_empty() {
        (&s.cert_file, &s.key_file, &s.key_file_pass)
    } else {
        (
            &s.client_cert_file,
            &s.client_key_file,
            &s.client_key_file_pass,
        )
    };
    let config = if cert.is_empty() {
        builder.with_no_client_auth()
    } else {
        let certified = certified_key(load_certs(cert)?, load_key(key, pass)?, &provider)
            .map_err(|e| format!("{cert} and {key}: {e}"))?;
        builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(certified)))
    };
    Ok(Arc::new(config))
}

/// This server's certificate chain with its private key, once the key is
/// known to be the certificate's. rustls's own check parses the certificate
/// with webpki, which refuses X.509 v1 (what `openssl x509 -req` makes
/// without an extensions file, as Redis's test certificates `redis.crt`);
/// peers that accept v1 (OpenSSL) may be shown one, so the public keys are
/// compared here from a parse that reads every version.
fn certified_key(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("unusable private key: {e}"))?;
    let end_entity = certs.first().ok_or("no certificate")?;
    let certificate = x509_cert::Certificate::from_der(end_entity)
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    let cert_spki = certificate
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    match signing_key.public_key() {
        Some(key_spki) if key_spki.as_ref() != cert_spki.as_slice() => {
            Err("the private key does not match the certificate".into())
        }
        // A key whose public half the provider cannot name (none of
        // ring's) is taken on trust, as rustls takes it.
        _ => Ok(CertifiedKey::new(certs, signing_key)),
    }
}

/// The certificate chain in a PEM file.
fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load certificate: {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {path}: no certificate"
        ));
    }
    Ok(certs)
}

/// The private key in a PEM file: unencrypted (PKCS#8, PKCS#1 or SEC1),
/// or PKCS#8 encrypted with `tls-key-file-pass` (PBES2, as `openssl
/// pkcs8 -topk8` and OpenSSL 3's `openssl rsa -aes256` write it). A key
/// others may read is served but warned about.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: &dyn std::fmt::Display| format!("Failed to load private key: {path}: {why}");
    let text = std::fs::read(path).map_err(|e| fail(&e))?;
    warn_if_readable_by_others(Path::new(path));
    let has = |needle: &[u8]| text.windows(needle.len()).any(|w| w == needle);
    if has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if pass.is_empty() {
            return Err(fail(
                &"the key is encrypted and tls-key-file-pass is not set",
            ));
        }
        let text = std::str::from_utf8(&text).map_err(|e| fail(&e))?;
        let (_, document) = pkcs8::der::Document::from_pem(text).map_err(|e| fail(&e))?;
        let info =
            pkcs8::EncryptedPrivateKeyInfo::try_from(document.as_bytes()).map_err(|e| fail(&e))?;
        let plain = info
            .decrypt(pass)
            .map_err(|_| fail(&"wrong tls-key-file-pass, or an encryption pkcs8 cannot undo"))?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    if has(b"Proc-Type: 4,ENCRYPTED") {
        return Err(fail(
            &"a traditionally encrypted key is not supported (convert it: openssl pkcs8 -topk8 -in KEY -out NEW)",
        ));
    }
    PrivateKeyDer::from_pem_reader(BufReader::new(text.as_slice())).map_err(|e| fail(&e))
}

/// Logs a warning when a private key file can be read by its group or by
/// anyone (it is still used: refusing would break setups that rely on a
/// group, such as a certificate manager's).
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o044 != 0 {
            crate::redislog::log(
                'M',
                crate::redislog::level::WARNING,
                &format!(
                    "TLS private key {} can be read by other users; chmod 600 it",
                    path.display()
                ),
            );
        }
    }
}

/// The trusted CA certificates: `tls-ca-cert-file` and every PEM file in
/// `tls-ca-cert-dir`.
fn roots(s: &TlsSettings) -> Result<RootCertStore, String> {
    let mut files = Vec::new();
    if !s.ca_cert_file.is_empty() {
        files.push(s.ca_cert_file.clone());
    }
    if !s.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&s.ca_cert_dir).map_err(|e| {
            format!(
                "Failed to configure CA certificate(s) file/directory: {}: {e}",
                s.ca_cert_dir
            )
        })?;
        for entry in dir.flatten() {
            let path = entry.path();
            if path.is_file() {
                files.push(path.display().to_string());
            }
        }
    }
    if files.is_empty() {
        return Err(
            "Failed to configure CA certificate(s) file/directory: either tls-ca-cert-file or tls-ca-cert-dir must be specified"
                .into(),
        );
    }
    let mut roots = RootCertStore::empty();
    for file in files {
        // A directory may hold other files (hash links, keys): those
        // without a certificate add nothing.
        for cert in CertificateDer::pem_file_iter(&file)
            .map_err(|e| {
                format!("Failed to configure CA certificate(s) file/directory: {file}: {e}")
            })?
            .flatten()
        {
            roots
                .add(cert)
                .map_err(|e| format!("CA certificate in {file}: {e}"))?;
        }
    }
    if roots.is_empty() {
        return Err("Failed to configure CA certificate(s) file/directory: no certificate".into());
    }
    Ok(roots)
}

/// `tls-protocols`: space-separated `TLSv1.2` / `TLSv1.3`, any case.
fn versions(text: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut out: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for word in text.split_whitespace() {
        let version: &'static rustls::SupportedProtocolVersion = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "Invalid tls-protocols specified: {word} is not supported (TLSv1.2 and TLSv1.3 are)"
                ))
            }
            _ => {
                return Err(format!(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'. ({word})"
                ))
            }
        };
        if !out.iter().any(|v| v.version == version.version) {
            out.push(version);
        }
    }
    if out.is_empty() {
        out = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    Ok(out)
}

/// OpenSSL's names of the TLS 1.2 suites rustls offers.
const TLS12_NAMES: &[(&str, rustls::CipherSuite)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        rustls::CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The crypto provider with the suites `tls-ciphers` (TLS 1.2, an
/// OpenSSL cipher list: names joined by `:`, `-NAME` removes, `DEFAULT`,
/// `ALL` and `HIGH` add every suite; names rustls does not offer are
/// skipped) and `tls-ciphersuites` (TLS 1.3, names joined by `:`) allow.
fn provider(s: &TlsSettings) -> Result<CryptoProvider, String> {
    let mut p = provider::default_provider();
    let all = p.cipher_suites.clone();
    let is13 = |c: &SupportedCipherSuite| matches!(c, SupportedCipherSuite::Tls13(_));
    let mut tls12: Vec<SupportedCipherSuite> = all.iter().filter(|c| !is13(c)).copied().collect();
    if !s.ciphers.is_empty() {
        let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
        for item in s.ciphers.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
            let (remove, name) = match item.strip_prefix(['-', '!']) {
                Some(n) => (true, n),
                None => (false, item.strip_prefix('+').unwrap_or(item)),
            };
            let matching: Vec<SupportedCipherSuite> = match name.to_ascii_uppercase().as_str() {
                "DEFAULT" | "ALL" | "HIGH" => tls12.clone(),
                upper => TLS12_NAMES
                    .iter()
                    .filter(|(n, _)| *n == upper)
                    .filter_map(|(_, id)| tls12.iter().find(|c| c.suite() == *id).copied())
                    .collect(),
            };
            if remove {
                chosen.retain(|c| !matching.iter().any(|m| m.suite() == c.suite()));
            } else {
                for m in matching {
                    if !chosen.iter().any(|c| c.suite() == m.suite()) {
                        chosen.push(m);
                    }
                }
            }
        }
        tls12 = chosen;
    }
    let mut tls13: Vec<SupportedCipherSuite> = all.iter().filter(|c| is13(c)).copied().collect();
    if !s.ciphersuites.is_empty() {
        let mut chosen = Vec::new();
        for name in s.ciphersuites.split(':').filter(|w| !w.is_empty()) {
            let found = tls13.iter().find(|c| {
                c.suite()
                    .as_str()
                    .is_some_and(|n| n.replacen("TLS13_", "TLS_", 1).eq_ignore_ascii_case(name))
            });
            match found {
                Some(c) => chosen.push(*c),
                None => return Err(format!("Failed to configure ciphersuites: {name}")),
            }
        }
        tls13 = chosen;
    }
    if tls12.is_empty() && tls13.is_empty() {
        return Err(format!("Failed to configure ciphers: {}", s.ciphers));
    }
    p.cipher_suites = tls13.into_iter().chain(tls12).collect();
    Ok(p)
}

/// A worker's TLS server configuration, built again whenever the TLS
/// generation word moves (CONFIG SET of a TLS setting on any worker): new
/// handshakes use the new certificate, connections already up keep theirs.
#[derive(Default)]
pub(crate) struct Acceptor {
    /// The generation `current` was built for, and what it built.
    built: Option<(u64, Option<Arc<ServerConfig>>, TlsSettings)>,
}

impl Acceptor {
    /// The configuration in force (None: TLS is not configured or its
    /// settings do not load; the reason was logged when they changed) and
    /// the settings it was built from.
    pub fn current(&mut self, store: &store::Store) -> (Option<Arc<ServerConfig>>, TlsSettings) {
        let generation = engine::tls_generation(store);
        if let Some((g, config, settings)) = &self.built {
            if *g == generation {
                return (config.clone(), settings.clone());
            }
        }
        let settings = TlsSettings::from_text(&store.config_text().unwrap_or_default());
        let config = match server_config(&settings) {
            Ok(c) => Some(c),
            Err(why) => {
                if settings.cert_file.is_empty() && settings.key_file.is_empty() {
                    None
                } else {
                    crate::redislog::log(
                        'M',
                        crate::redislog::level::WARNING,
                        &format!("TLS configuration not usable: {why}"),
                    );
                    None
                }
            }
        };
        self.built = Some((generation, config.clone(), settings.clone()));
        (config, settings)
    }
}

/// The check CONFIG SET runs on new TLS settings (`Engine::set_tls_check`):
/// with TLS in use by no listener and not by `tls-replication`, anything
/// goes (as in Redis, which only builds a context when TLS is in use).
pub(crate) fn check_text(text: &[u8]) -> Result<(), String> {
    let settings = TlsSettings::from_text(text);
    let tls_port = engine::setting_in(text, "tls-port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let replication = engine::setting_in(text, "tls-replication").as_deref() == Some("yes");
    if !settings.wanted(tls_port) && !replication {
        return Ok(());
    }
    server_config(&settings).map(|_| ()).map_err(|why| {
        crate::redislog::log(
            'M',
            crate::redislog::level::WARNING,
            &format!("Unable to update TLS configuration: {why}"),
        );
        why
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_are_read_as_redis_names_them() {
        assert_eq!(versions("").map(|v| v.len()), Ok(2));
        assert_eq!(versions("TLSv1.2").map(|v| v.len()), Ok(1));
        assert_eq!(versions("tlsv1.2 TLSv1.3 TLSv1.3").map(|v| v.len()), Ok(2));
        assert!(versions("TLSv1.1").is_err());
        assert!(versions("SSLv3").is_err());
    }

    #[test]
    fn cipher_lists_pick_what_rustls_offers() {
        let mut s = TlsSettings {
            ciphers: "DEFAULT:-ECDHE-RSA-AES128-GCM-SHA256".into(),
            ..TlsSettings::default()
        };
        let p = provider(&s).expect("suites left");
        assert!(!p
            .cipher_suites
            .iter()
            .any(|c| c.suite() == rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256));
        s.ciphersuites = "TLS_AES_256_GCM_SHA384".into();
        let p = provider(&s).expect("suites left");
        let tls13 = p
            .cipher_suites
            .iter()
            .filter(|c| matches!(c, SupportedCipherSuite::Tls13(_)))
            .count();
        assert_eq!(tls13, 1);
        s.ciphersuites = "TLS_NO_SUCH".into();
        assert!(provider(&s).is_err());
    }

    #[test]
    fn missing_files_are_reported() {
        let s = TlsSettings {
            cert_file: "/nonexistent/cert.pem".into(),
            key_file: "/nonexistent/key.pem".into(),
            ..TlsSettings::default()
        };
        let err = server_config(&s).expect_err("no files");
        assert!(err.contains("Failed to load certificate"), "{err}");
        assert!(server_config(&TlsSettings::default()).is_err());
    }
}
